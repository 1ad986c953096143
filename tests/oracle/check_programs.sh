#!/usr/bin/env bash
# One engine under every program: for the same model, prompt, sampling
# settings and seed, `inferno run`, `inferno chat` (one turn) and
# `inferno serve` (one request) give the same text, greedy and at temperature
# 0.8 with top-k/top-p; a two-turn `chat` and the same two turns sent to the
# server give the same second answer. Also: chat's multi-line input (a line
# ending in \, a """ block) is one message, /clear starts over, /bye ends.
# Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
INF=build/inferno
MODEL=${MODEL:-models/tiny-q8_0.gguf}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
tmp=$(mktemp -d)
spid=
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$tmp"' EXIT
if [ ! -x "$INF" ] || [ ! -f "$MODEL" ]; then
    echo "check_programs: needs $INF and $MODEL"; echo "0 passed, 1 failed"; exit 1
fi
N=24
Q1="Why is the sky blue?"
Q2="And at sunset?"

# The server, on a free port (paged cache, two slots: the default shape).
"$INF" serve -m "$MODEL" --host 127.0.0.1 --port 0 -np 2 >"$tmp/serve.log" 2>&1 &
spid=$!
port=
for _ in $(seq 1 300); do
    port=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+).*|\1|p' "$tmp/serve.log" | head -n 1)
    if [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; then
        break
    fi
    sleep 0.1
done
[ -n "$port" ] || { echo "check_programs: the server did not start: $(cat "$tmp/serve.log")"; echo "0 passed, 1 failed"; exit 1; }

# serve MESSAGES_JSON SAMPLING_JSON: the reply's content (reasoning folded back in).
serve() {
    curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
        -d "{\"messages\": $1, \"max_tokens\": $N, $2}" |
        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
            if(!j.choices){console.error(s);process.exit(1)}
            const m=j.choices[0].message;
            process.stdout.write((m.reasoning_content?"<think>\n"+m.reasoning_content+"\n</think>\n\n":"")+(m.content??""))})'
}
msg() { node -e 'process.stdout.write(JSON.stringify(process.argv.slice(1).map((c,i)=>({role:i%2?"assistant":"user",content:c}))))' -- "$@"; }

# settings MODE SEED: the CLI flags and the request fields of the same sampling.
settings() {
    if [ "$1" = greedy ]; then
        flags=(--temp 0); body='"temperature": 0'
    else
        flags=(--temp 0.8 --top-k 40 --top-p 0.9 --seed "$2")
        body="\"temperature\": 0.8, \"top_k\": 40, \"top_p\": 0.9, \"seed\": $2"
    fi
}

for mode in greedy sampled; do
    settings $mode 1234
    "$INF" run -m "$MODEL" -p "$Q1" -n $N "${flags[@]}" >"$tmp/run.txt" 2>"$tmp/run.err"
    printf '%s\n/bye\n' "$Q1" | "$INF" chat -m "$MODEL" -n $N "${flags[@]}" >"$tmp/chat.txt" 2>"$tmp/chat.err"
    serve "$(msg "$Q1")" "$body" >"$tmp/serve.txt"
    printf '\n' >>"$tmp/serve.txt" # run and chat end the reply with a newline
    if [ -s "$tmp/run.txt" ] && cmp -s "$tmp/run.txt" "$tmp/chat.txt"; then ok "$mode: run = chat"
    else bad "$mode: run '$(head -c 200 "$tmp/run.txt")' vs chat '$(head -c 200 "$tmp/chat.txt")' $(tail -2 "$tmp/chat.err")"; fi
    if cmp -s "$tmp/run.txt" "$tmp/serve.txt"; then ok "$mode: run = serve"
    else bad "$mode: run '$(head -c 200 "$tmp/run.txt")' vs serve '$(head -c 200 "$tmp/serve.txt")'"; fi
done

# Two turns, greedy and sampled: chat vs the server given the first reply.
for mode in greedy sampled; do
    settings $mode 99
    printf '%s\n%s\n' "$Q1" "$Q2" | "$INF" chat -m "$MODEL" -n $N "${flags[@]}" >"$tmp/chat2.txt" 2>"$tmp/chat2.err"
    # chat prints each reply followed by one newline; the replies may hold newlines
    # themselves, so take the first reply from the server and the rest from chat.
    r1=$(serve "$(msg "$Q1")" "$body")
    r2=$(serve "$(msg "$Q1" "$r1" "$Q2")" "$body")
    if [ "$(cat "$tmp/chat2.txt")" = "$(printf '%s\n%s' "$r1" "$r2")" ]; then ok "$mode: two turns: chat = serve"
    else bad "$mode: two turns differ: chat '$(head -c 300 "$tmp/chat2.txt")' vs serve '$r1' + '$r2'"; fi
    grep -q "cached" "$tmp/chat2.err" && [ "$(grep -c 'prompt tokens' "$tmp/chat2.err")" = 2 ] &&
        ok "$mode: chat ran two turns" || bad "$mode: chat turns: $(cat "$tmp/chat2.err")"
done

# Multi-line input: each form is one message (one turn), /clear starts over.
printf 'first \\\nstill first\n"""\nsecond\n\nstill second\n"""\n"""third"""\n/clear\nfourth\n/bye\nnot read\n' |
    "$INF" chat -m "$MODEL" -n 2 --temp 0 >"$tmp/ml.txt" 2>"$tmp/ml.err"
turns=$(grep -c 'prompt tokens' "$tmp/ml.err")
[ "$turns" = 4 ] && ok "multi-line input: 4 messages" || bad "multi-line input: $turns turns: $(cat "$tmp/ml.err")"
grep -q "new conversation" "$tmp/ml.err" && ok "/clear starts over" || bad "/clear: $(cat "$tmp/ml.err")"
# After /clear the fourth message is a first turn: the same as asking it alone.
printf 'fourth\n' | "$INF" chat -m "$MODEL" -n 2 --temp 0 >"$tmp/alone.txt" 2>/dev/null
[ "$(tail -n 1 "$tmp/ml.txt")" = "$(tail -n 1 "$tmp/alone.txt")" ] && ok "after /clear: a fresh conversation" ||
    bad "after /clear: '$(tail -n 1 "$tmp/ml.txt")' vs '$(tail -n 1 "$tmp/alone.txt")'"
# A """ block keeps its newlines: the same prompt as the message sent whole.
printf '"""\nsecond\n\nstill second\n"""\n' | "$INF" chat -m "$MODEL" -n 4 --temp 0 >"$tmp/b1.txt" 2>/dev/null
"$INF" run -m "$MODEL" -p "$(printf 'second\n\nstill second')" -n 4 --temp 0 >"$tmp/b2.txt" 2>/dev/null
cmp -s "$tmp/b1.txt" "$tmp/b2.txt" && ok '""" block = the same text given to run' || bad '""" block differs from run'

# bench runs its tests through the engine too: a row per test, at the default sizes
# (a ppN prompt and a tgN run must fit the context it opens).
if "$INF" bench -m "$MODEL" -p 512 -n 16 -r 1 --no-ttft -o json >"$tmp/bench.json" 2>"$tmp/bench.err" &&
    node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
        const t=j.tests.map(r=>r.n_prompt+"/"+r.n_gen).join(" ");
        if(t!=="512/0 0/16"||!j.tests.every(r=>r.avg_ts>0))process.exit(1)' "$tmp/bench.json"; then
    ok "bench: pp512 and tg16 rows"
else bad "bench: $(cat "$tmp/bench.err" | tail -3)"; fi
# at depth (llama-bench's -d) with the K/V types it was given, and their bytes
if "$INF" bench -m "$MODEL" -p 16 -n 4 -d 0,40 -r 1 --no-ttft -ctk q8_0 -ctv f16 -o json >"$tmp/bd.json" 2>"$tmp/bd.err" &&
    node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
        const t=j.tests.map(r=>r.n_prompt+"/"+r.n_gen+"@"+r.n_depth).join(" ");
        const ok=t==="16/0@0 16/0@40 0/4@0 0/4@40"&&j.tests.every(r=>r.avg_ts>0&&r.type_k==="q8_0"&&r.type_v==="f16")&&
            j.tests[1].kv_bytes>j.tests[0].kv_bytes;
        if(!ok){console.error(t);process.exit(1)}' "$tmp/bd.json"; then
    ok "bench -d 0,40 -ctk q8_0 -ctv f16: rows at each depth with their K/V types and bytes"
else bad "bench at depth: $(tail -3 "$tmp/bd.err")"; fi
# --membw: the read roof per thread count (its 1 GiB buffer in one child process, kept for
# every read and out of the peak RSS), a json field, and each tgN row's share of it: every
# repetition against the bandwidth read right after it (samples_membw_gbs), mean and sd, at
# each -t; md: the line and a roof column
if "$INF" bench -m "$MODEL" -p 8 -n 4 -r 2 -t 1,2 --no-ttft --membw 1G -o json >"$tmp/bw.json" 2>"$tmp/bw.err" &&
    node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));
        const m=j.membw, close=(a,b)=>Math.abs(a-b)<=1e-9*Math.abs(b);
        const row=t=>{const tg=j.tests.find(r=>r.n_gen===4&&r.n_threads===t), pp=j.tests.find(r=>r.n_prompt===8&&r.n_threads===t);
            const bw=tg.samples_membw_gbs, sh=tg.samples_ts.map((x,i)=>tg.step_bytes*x/(bw[i]*1e9));
            const mean=(sh[0]+sh[1])/2, sd=Math.abs(sh[0]-sh[1])/Math.SQRT2;
            return bw.length===2&&bw.every(g=>g>0)&&close(tg.membw_gbs,(bw[0]+bw[1])/2)&&tg.step_bytes>0&&
                close(tg.roof_share,mean)&&close(tg.roof_share_sd,sd)&&!("roof_share" in pp)&&!("samples_membw_gbs" in pp)};
        const ok=m.length===2&&m.map(x=>x.n_threads).join()==="1,2"&&m.every(x=>x.bytes===2**30&&x.passes===2&&x.gbs>0)&&
            row(1)&&row(2)&&j.peak_rss_bytes<2**30;
        if(!ok){console.error(JSON.stringify(j.membw),JSON.stringify(j.tests));process.exit(1)}' "$tmp/bw.json"; then
    ok "bench --membw 1G -t 1,2 -o json: membw [{n_threads, bytes, passes, gbs}] per thread count, roof_share (mean, sd of each repetition against the read after it) on the tg rows only, buffer out of the peak RSS"
else bad "bench --membw json: $(tail -3 "$tmp/bw.err")"; fi
if "$INF" bench -m "$MODEL" -p 0 -n 4 -r 1 -t 1 --no-ttft --membw 1024M >"$tmp/bw.md" 2>"$tmp/bw.err" &&
    grep -Eq '^memory read: [0-9.]+ GB/s \(1 thread, 1 GiB, best of 1, ' "$tmp/bw.md" &&
    grep -q '| *roof |$' "$tmp/bw.md" && grep -Eq 'tg4 .*\| +[0-9.]+ ± +[0-9.]+ % \|$' "$tmp/bw.md"; then
    ok "bench --membw 1024M: '$(grep '^memory read' "$tmp/bw.md")' and a roof column"
else bad "bench --membw md: $(cat "$tmp/bw.md" "$tmp/bw.err" | tail -5)"; fi
for v in 0.5G 1T abc 999999; do
    "$INF" bench -m "$MODEL" --membw "$v" >"$tmp/bw.out" 2>"$tmp/bw.err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "--membw: .*$v" "$tmp/bw.err" && [ ! -s "$tmp/bw.out" ] &&
        ok "bench --membw $v refused: $(cat "$tmp/bw.err")" || bad "bench --membw $v: rc $rc $(cat "$tmp/bw.err")"
done
"$INF" bench --help | grep -q -- "--membw SIZE" && ok "bench --help lists --membw" || bad "bench --help: no --membw"

kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
spid=
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
