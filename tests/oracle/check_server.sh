#!/usr/bin/env bash
# The server against the real OpenAI client (npm openai@6): starts
# `inferno serve` with the tiny model on a free loopback port (--port 0, the
# bound port read from its log; --kv paged with a small pool so that the
# prefix cache must evict) and a second one with --kv basic, waits for
# /health, runs the client suite, the Responses and Anthropic Messages suite
# (apis.mjs: openai@6 and @anthropic-ai/sdk), a bounded load test (CLIENTS streaming
# clients for DURATION_S seconds against -np 4) and the prefix-cache checks
# (paged == basic greedy outputs, a shared 1000-token system prompt, pool
# pressure), then stops both servers with SIGTERM and checks that they exit
# cleanly. Ends with "N passed, N failed".
#
# Env: MODEL (models/tiny-q8_0.gguf), DURATION_S (20), CLIENTS (16),
#      INFERNO (build/inferno).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODEL=${MODEL:-models/tiny-q8_0.gguf}
INFERNO=${INFERNO:-build/inferno}
KEY=sk-inferno-test
CTX=1024
pass=0 fail=0

if [ ! -x "$INFERNO" ] || [ ! -f "$MODEL" ] || [ ! -d node_modules/openai ]; then
    echo "check_server: needs $INFERNO, $MODEL and node_modules/openai"
    echo "0 passed, 1 failed"
    exit 1
fi

# start_server LOGFILE ARGS...: starts a server; sets $spid (M: another model).
start_server() {
    local log=$1; shift
    "$INFERNO" serve -m "${M:-$MODEL}" --host 127.0.0.1 --port 0 -np 4 -c "$CTX" --api-key "$KEY" \
        --alias tiny "$@" >"$log" 2>&1 &
    spid=$!
}
. tests/oracle/serve_lib.sh # wait_ready

log=$(mktemp)
blog=$(mktemp)
elog=$(mktemp)
slog=$(mktemp)
mdir=$(mktemp -d)
# Models laid out as Qwen3-Embedding's GGUF, and with recommended sampling
# (general.sampling.*), from the same weights (tests/oracle/embd_model.py).
/usr/bin/python3 tests/oracle/embd_model.py gguf "$MODEL" "$mdir/embd.gguf"
/usr/bin/python3 tests/oracle/embd_model.py sampling-gguf "$MODEL" "$mdir/sampling.gguf"
start_server "$log" --kv paged --cache-mem 5
pid=$spid
start_server "$blog" --kv basic --cors-origins "https://app.example.com, http://localhost:3000"
bpid=$spid
M="$mdir/embd.gguf" start_server "$elog" --embeddings
epid=$spid
M="$mdir/sampling.gguf" start_server "$slog"
sspid=$spid
spec_pids=
cleanup() {
    for p in "$pid" "$bpid" "$epid" "$sspid" $spec_pids; do
        if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; fi
    done
    rm -f "$log" "$blog" "$elog" "$slog"
    rm -rf "$mdir"
}
trap cleanup EXIT

port=$(wait_ready "$log" "$pid")
bport=$(wait_ready "$blog" "$bpid")
eport=$(wait_ready "$elog" "$epid")
sport=$(wait_ready "$slog" "$sspid")
if [ -z "$port" ] || [ -z "$bport" ] || [ -z "$eport" ] || [ -z "$sport" ]; then
    echo "check_server: the servers did not become ready"
    sed 's/^/    paged | /' "$log"; sed 's/^/    basic | /' "$blog"
    sed 's/^/    embeddings | /' "$elog"; sed 's/^/    sampling | /' "$slog"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "servers ready: paged on port $port, basic on port $bport, embeddings on $eport, sampling on $sport"

run_suite() { # file [port]
    local out rc line
    out=$(INFERNO_URL="http://127.0.0.1:${2:-$port}" INFERNO_SAMPLING_URL="http://127.0.0.1:$sport" \
        INFERNO_BASIC_URL="http://127.0.0.1:$bport" \
        INFERNO_KEY=$KEY INFERNO_MODEL=tiny INFERNO_CTX=$CTX \
        DURATION_S=${DURATION_S:-20} CLIENTS=${CLIENTS:-16} \
        timeout 300 node "tests/oracle/server/$1" 2>&1)
    rc=$?
    echo "$out"
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' <<<"$out" | tail -n 1)
    local p f
    p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    [ -z "$line" ] && { p=0; f=1; }
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    pass=$((pass + p)); fail=$((fail + f))
}
run_suite suite.mjs
run_suite tools.mjs
run_suite apis.mjs
run_suite props.mjs
run_suite embeddings.mjs "$eport"
run_suite load.mjs
run_suite prefix.mjs
# A short hostile-connection soak (the full one: tests/soak.sh, 60 s).
# (4 streaming clients: on two busy cores 16 would queue the probe behind the slots.)
SOAK_S=${SOAK_S:-6} IDLE=${IDLE:-100} SLOW=${SLOW:-20} CLIENTS=${SOAK_CLIENTS:-4} run_suite soak.mjs

# Flags that would open the server silently (issue 20 row 16).
out=$("$INFERNO" serve -m "$MODEL" --port 0 --api-key "" 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "empty key" <<<"$out"; then pass=$((pass + 1)); else
    echo "FAILED: --api-key '' gave status $rc: $out"; fail=$((fail + 1)); fi
wlog=$(mktemp)
"$INFERNO" serve -m "$MODEL" --host 0.0.0.0 --port 0 >"$wlog" 2>&1 &
wpid=$!
for _ in $(seq 1 50); do grep -q "listening" "$wlog" && break; sleep 0.1; done
kill -TERM "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null
if grep -q "warning: listening on 0.0.0.0 without --api-key" "$wlog"; then pass=$((pass + 1)); else
    echo "FAILED: no warning for --host 0.0.0.0 without a key"; sed 's/^/    | /' "$wlog"; fail=$((fail + 1)); fi
rm -f "$wlog"

# CORS (issue 15): a browser page on another origin calls the server after
# its preflight. check NAME CONDITION-OUTPUT: counts a pass when grep finds it.
expect() { # label, text, extended regex
    if grep -qiE "$3" <<<"$2"; then pass=$((pass + 1)); else
        echo "FAILED: $1: no /$3/ in:"; sed 's/^/    | /' <<<"$2"; fail=$((fail + 1)); fi
}
refuse() { # label, text, extended regex that must not occur
    if grep -qiE "$3" <<<"$2"; then
        echo "FAILED: $1: /$3/ in:"; sed 's/^/    | /' <<<"$2"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
}
U="http://127.0.0.1:$port"
pre=$(curl -s -i -X OPTIONS "$U/v1/chat/completions" -H 'Origin: http://localhost:5173' \
    -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: authorization, content-type, x-stainless-os')
expect "preflight without a key: 204" "$pre" '^HTTP/1.1 204'
expect "preflight: the origin allowed" "$pre" '^Access-Control-Allow-Origin: http://localhost:5173'
expect "preflight: methods" "$pre" '^Access-Control-Allow-Methods: .*POST'
expect "preflight: the usual headers" "$pre" '^Access-Control-Allow-Headers: .*Authorization, Content-Type, x-api-key, anthropic-version'
expect "preflight: the headers asked for" "$pre" '^Access-Control-Allow-Headers: .*x-stainless-os'
expect "preflight: max age" "$pre" '^Access-Control-Max-Age: [0-9]+'
expect "preflight: Vary" "$pre" '^Vary: Origin'
for o in 'http://127.0.0.1:8000' 'http://[::1]:9' 'http://localhost'; do
    r=$(curl -s -i -X OPTIONS "$U/v1/models" -H "Origin: $o")
    esc=$(sed 's/[].[]/\\&/g' <<<"$o") # the origin as a regex (its brackets and dots literal)
    expect "preflight from $o (loopback default)" "$r" "^Access-Control-Allow-Origin: ${esc}\s*\$"
done
r=$(curl -s -i -X OPTIONS "$U/v1/chat/completions" -H 'Origin: http://evil.example' -H 'Access-Control-Request-Method: POST')
expect "preflight from another origin: 403" "$r" '^HTTP/1.1 403'
expect "preflight from another origin: says why" "$r" 'may not call this server.*--cors-origins'
refuse "preflight from another origin: no CORS headers" "$r" '^Access-Control-Allow'
r=$(curl -s -i -X OPTIONS "$U/v1/chat/completions" -H 'Origin: http://localhost.evil.example:80')
expect "a lookalike origin is not loopback" "$r" '^HTTP/1.1 403'
r=$(curl -s -i "$U/v1/chat/completions" -H 'Origin: http://localhost:5173' -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}')
expect "the request after the preflight: 200" "$r" '^HTTP/1.1 200'
expect "its response names the origin" "$r" '^Access-Control-Allow-Origin: http://localhost:5173'
expect "its response varies by origin" "$r" '^Vary: Origin'
r=$(curl -s -i -N "$U/v1/chat/completions" -H 'Origin: http://localhost:5173' -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}')
expect "a stream names the origin" "$r" '^Access-Control-Allow-Origin: http://localhost:5173'
r=$(curl -s -i "$U/v1/models" -H 'Origin: http://localhost:5173')
expect "an error (401) to an allowed origin is readable" "$r" '^Access-Control-Allow-Origin: http://localhost:5173'
r=$(curl -s -i "$U/v1/models" -H 'Origin: http://evil.example' -H "Authorization: Bearer $KEY")
refuse "a response to another origin has no CORS headers" "$r" '^Access-Control-Allow'
r=$(curl -s -i -X OPTIONS "$U/v1/models" -H 'Host: evil.example' -H 'Origin: http://localhost')
expect "the Host check still holds for a preflight (421)" "$r" '^HTTP/1.1 421'
B="http://127.0.0.1:$bport" # --cors-origins "https://app.example.com, http://localhost:3000"
r=$(curl -s -i -X OPTIONS "$B/v1/chat/completions" -H 'Origin: https://app.example.com')
expect "--cors-origins: a listed origin" "$r" '^Access-Control-Allow-Origin: https://app.example.com'
r=$(curl -s -i -X OPTIONS "$B/v1/chat/completions" -H 'Origin: http://localhost:3000')
expect "--cors-origins: the second listed origin" "$r" '^Access-Control-Allow-Origin: http://localhost:3000'
r=$(curl -s -i -X OPTIONS "$B/v1/chat/completions" -H 'Origin: http://localhost:5173')
expect "--cors-origins replaces the loopback default" "$r" '^HTTP/1.1 403'

# run and chat take the model file's recommended sampling for the flags not
# given (temperature 0 there: every seed the same text), a flag overrides it.
gen() { "$INFERNO" run -m "$mdir/sampling.gguf" -p 'Name three colours.' -n 12 --no-think "$@" 2>/dev/null; }
a=$(gen -s 1); b=$(gen -s 2); g=$(gen -s 3 --temp 0 --repeat-penalty 1.5)
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$g" ]; then pass=$((pass + 1)); else
    echo "FAILED: run without --temp on the sampling model: seeds 1/2 and greedy differ: '$a' '$b' '$g'"; fail=$((fail + 1)); fi
a=$(gen -s 1 --temp 1 --top-k 0 --top-p 1 --min-p 0); b=$(gen -s 2 --temp 1 --top-k 0 --top-p 1 --min-p 0)
if [ "$a" != "$b" ]; then pass=$((pass + 1)); else
    echo "FAILED: run --temp 1 on the sampling model: seeds 1 and 2 gave the same text '$a'"; fail=$((fail + 1)); fi
# the same from a Hugging Face folder's generation_config.json
if [ -d models/tiny-f32-hf ]; then
    /usr/bin/python3 tests/oracle/embd_model.py sampling-hf models/tiny-f32-hf "$mdir/sampling-hf"
    hgen() { "$INFERNO" run -m "$mdir/sampling-hf" -p 'Name three colours.' -n 12 --no-think "$@" 2>/dev/null; }
    a=$(hgen -s 1); b=$(hgen -s 2); g=$(hgen -s 3 --temp 0 --repeat-penalty 1.5)
    if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$g" ]; then pass=$((pass + 1)); else
        echo "FAILED: run on generation_config.json temperature 0: '$a' '$b' '$g'"; fail=$((fail + 1)); fi
    a=$("$INFERNO" run -m models/tiny-f32-hf -p 'Name three colours.' -n 12 --no-think -s 1 2>/dev/null)
    b=$("$INFERNO" run -m models/tiny-f32-hf -p 'Name three colours.' -n 12 --no-think -s 2 2>/dev/null)
    if [ "$a" != "$b" ]; then pass=$((pass + 1)); else
        echo "FAILED: the control: without generation_config.json seeds 1 and 2 gave the same text"; fail=$((fail + 1)); fi
fi

# SSE pings (issue 15): with the one slot busy for some seconds (3000 tokens:
# about 4 s of the tiny model on 2 cores, where 800 took 1.1 s, too little for
# a 1 s interval), a second stream waits in the queue; it gets ": ping"
# comments every --sse-ping-interval second while it waits, then its frames
# and [DONE]. --sse-ping-interval 0 sends none.
plog=$(mktemp)
start_server "$plog" --kv basic -np 1 -c 4096 --sse-ping-interval 1
ppid_=$spid
if pport=$(wait_ready "$plog" "$ppid_"); then
    P="http://127.0.0.1:$pport"
    busy='{"prompt":"The slot is busy","max_tokens":3000,"ignore_eos":true,"temperature":0}'
    curl -s -o /dev/null --max-time 120 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
        -d "$busy" "$P/v1/completions" &
    bpid2=$!
    sleep 0.3
    out=$(curl -s -N --max-time 120 -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
        -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}' "$P/v1/chat/completions")
    wait "$bpid2"
    pings=$(grep -c '^: ping$' <<<"$out")
    if [ "$pings" -ge 1 ] && grep -q '^data: \[DONE\]$' <<<"$out"; then
        pass=$((pass + 1)); echo "  a queued stream got $pings pings, then its frames and [DONE]"
    else echo "FAILED: SSE pings while queued: $pings pings in: ${out:0:300}"; fail=$((fail + 1)); fi
    kill -TERM "$ppid_"; wait "$ppid_" 2>/dev/null
else
    echo "FAILED: the ping server did not start"; tail -n 20 "$plog"; fail=$((fail + 1))
fi
rm -f "$plog"

# Speculative decoding (tests/oracle/server/spec.mjs): tiny-bf16 served
# plainly, with --spec ngram (paged cache) and with the q8_0 file as its
# draft model (--draft-p-min 0: a draft every step; basic cache). Greedy
# output must equal the plain server's; each ends cleanly on SIGTERM.
SPEC_MODEL=models/tiny-bf16.gguf SPEC_DRAFT=models/tiny-q8_0.gguf
if [ -f "$SPEC_MODEL" ] && [ -f "$SPEC_DRAFT" ]; then
    xlog=$(mktemp) nlog=$(mktemp) dlog=$(mktemp)
    M=$SPEC_MODEL start_server "$xlog" -np 2; xpid=$spid
    M=$SPEC_MODEL start_server "$nlog" -np 2 --spec ngram; npid=$spid
    M=$SPEC_MODEL start_server "$dlog" -np 2 --kv basic -md "$SPEC_DRAFT" --draft-p-min 0; dpid=$spid
    spec_pids="$xpid $npid $dpid"
    xport=$(wait_ready "$xlog" "$xpid"); nport=$(wait_ready "$nlog" "$npid"); dport=$(wait_ready "$dlog" "$dpid")
    if [ -n "$xport" ] && [ -n "$nport" ] && [ -n "$dport" ]; then
        INFERNO_NGRAM_URL="http://127.0.0.1:$nport" INFERNO_DRAFT_URL="http://127.0.0.1:$dport" \
            run_suite spec.mjs "$xport"
    else
        echo "FAILED: the speculative decoding servers did not start"; fail=$((fail + 1))
        for l in "$xlog" "$nlog" "$dlog"; do tail -n 5 "$l" | sed 's/^/    | /'; done
    fi
    for p in $spec_pids; do kill -TERM "$p" 2>/dev/null; done
    for p in $spec_pids; do
        wait "$p"; rc=$?
        if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else
            echo "FAILED: a speculative decoding server exited with status $rc after SIGTERM"; fail=$((fail + 1)); fi
    done
    if grep -qE 'AddressSanitizer|ThreadSanitizer|LeakSanitizer|runtime error' "$xlog" "$nlog" "$dlog"; then
        echo "FAILED: sanitizer report in a speculative decoding server's log"
        grep -h -A30 -E 'Sanitizer|runtime error' "$xlog" "$nlog" "$dlog" | head -60; fail=$((fail + 1))
    fi
    spec_pids=
    rm -f "$xlog" "$nlog" "$dlog"
else
    echo "FAILED: speculative decoding needs $SPEC_MODEL and $SPEC_DRAFT"; fail=$((fail + 1))
fi

# Clean shutdown on SIGTERM within 10 s, exit status 0, no sanitizer report.
for which in paged basic embeddings sampling; do
    case $which in
    paged) p=$pid l=$log ;;
    basic) p=$bpid l=$blog ;;
    embeddings) p=$epid l=$elog ;;
    *) p=$sspid l=$slog ;;
    esac
    kill -TERM "$p"
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
        echo "FAILED: the $which server did not exit within 10 s of SIGTERM"; fail=$((fail + 1))
    else
        wait "$p"; rc=$?
        if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else
            echo "FAILED: the $which server exited with status $rc after SIGTERM"; fail=$((fail + 1))
            tail -n 30 "$l" | sed 's/^/    | /'
        fi
    fi
    if grep -qE 'AddressSanitizer|ThreadSanitizer|LeakSanitizer|runtime error' "$l"; then
        echo "FAILED: sanitizer report in the $which server's log"
        grep -A30 -E 'Sanitizer|runtime error' "$l" | head -60
        fail=$((fail + 1))
    fi
done
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
