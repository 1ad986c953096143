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

# start_server LOGFILE ARGS...: starts a server; sets $spid.
start_server() {
    local log=$1; shift
    "$INFERNO" serve -m "$MODEL" --host 127.0.0.1 --port 0 -np 4 -c "$CTX" --api-key "$KEY" \
        --alias tiny "$@" >"$log" 2>&1 &
    spid=$!
}
# wait_ready LOGFILE PID: prints the port once /health says 200 (60 s at most).
wait_ready() {
    local log=$1 p=$2 port=
    for _ in $(seq 1 100); do
        port=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+).*|\1|p' "$log" | head -n 1)
        [ -n "$port" ] && break
        kill -0 "$p" 2>/dev/null || return 1
        sleep 0.1
    done
    [ -n "$port" ] || return 1
    for _ in $(seq 1 600); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/health")
        if [ "$code" = 200 ]; then echo "$port"; return 0; fi
        kill -0 "$p" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

log=$(mktemp)
blog=$(mktemp)
start_server "$log" --kv paged --cache-mem 5
pid=$spid
start_server "$blog" --kv basic
bpid=$spid
cleanup() {
    for p in "$pid" "$bpid"; do
        if kill -0 "$p" 2>/dev/null; then kill -KILL "$p" 2>/dev/null; fi
    done
    rm -f "$log" "$blog"
}
trap cleanup EXIT

port=$(wait_ready "$log" "$pid")
bport=$(wait_ready "$blog" "$bpid")
if [ -z "$port" ] || [ -z "$bport" ]; then
    echo "check_server: the servers did not become ready"
    sed 's/^/    paged | /' "$log"; sed 's/^/    basic | /' "$blog"
    echo "0 passed, 1 failed"
    exit 1
fi
echo "servers ready: paged on port $port, basic on port $bport"

run_suite() { # file
    local out rc line
    out=$(INFERNO_URL="http://127.0.0.1:$port" INFERNO_BASIC_URL="http://127.0.0.1:$bport" \
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

# Clean shutdown on SIGTERM within 10 s, exit status 0, no sanitizer report.
for which in paged basic; do
    if [ "$which" = paged ]; then p=$pid; l=$log; else p=$bpid; l=$blog; fi
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
