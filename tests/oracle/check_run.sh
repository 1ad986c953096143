#!/usr/bin/env bash
# `inferno run` and `inferno chat` end to end on the generated tiny model:
# bad input gives one line and a non-zero exit; the context limits; the
# --dump-logits file; the same seed giving the same text; chat reusing the
# KV cache of earlier turns.
set -uo pipefail
cd "$(dirname "$0")/../.."
INF=build/inferno
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# bad input: non-zero exit and exactly one line on stderr, no crash
expect_error() { # description, args...
    local what=$1; shift
    "$INF" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? lines
    # (the first load of a model may say, on a line of its own, that it
    # writes the pack cache: runtime/engine_pack.h)
    grep -v "^inferno: packing the weights once into" "$tmp/err" >"$tmp/err1"
    mv "$tmp/err1" "$tmp/err"
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ]; then ok "$what: $(cat "$tmp/err")"
    else bad "$what: rc $rc, $lines lines: $(head -c 300 "$tmp/err")"; fi
}
expect_error "missing model" run -m models/nope.gguf -p hi
expect_error "bad path (a folder without config.json)" run -m /tmp -p hi
expect_error "not a model file" run -m README.md -p hi
expect_error "negative -n" run -p hi -n -5
expect_error "top-p 7" run -p hi --top-p 7
expect_error "unknown flag" run -p hi --bogus
expect_error "unknown backend" run -p hi --backend warp
expect_error "missing value" run -p hi -n
expect_error "no prompt" run
expect_error "bad token id" run --token-ids 1,999999
expect_error "prompt over the context" run -p "one two three four five six seven eight nine ten" --raw -c 8
expect_error "context past the model's training length" run -p hi -c 99999999
expect_error "chat: unknown flag" chat --bogus
expect_error "unknown --pack-cache mode" run -p hi --pack-cache sometimes
touch "$tmp/a-file"
expect_error "--pack-cache on where no directory can be made" run -p hi --pack-cache on --pack-cache-dir "$tmp/a-file/sub"
expect_error "bench: unknown --pack-cache mode" bench --pack-cache maybe
expect_error "serve: unknown --pack-cache mode" serve --pack-cache maybe

# --pack-cache on: the first run writes the packed weights, the second maps them; same text
"$INF" run -p "Why is the sky blue?" -n 8 --temp 0 --pack-cache on --pack-cache-dir "$tmp/pc" >"$tmp/p1" 2>"$tmp/e1"
"$INF" run -p "Why is the sky blue?" -n 8 --temp 0 --pack-cache on --pack-cache-dir "$tmp/pc" >"$tmp/p2" 2>"$tmp/e2"
"$INF" run -p "Why is the sky blue?" -n 8 --temp 0 --pack-cache off >"$tmp/p3" 2>/dev/null
if ! grep -q "packed weights mapped from\|packing the weights once" "$tmp/e1" "$tmp/e2"; then
    ok "--pack-cache on: this level packs no weights, nothing cached"
elif grep -q "packing the weights once" "$tmp/e1" && grep -q "packed weights mapped from" "$tmp/e2" &&
    cmp -s "$tmp/p1" "$tmp/p2" && cmp -s "$tmp/p1" "$tmp/p3"; then
    ok "--pack-cache on: written, then mapped; the same text as packing in memory"
else bad "--pack-cache: $(cat "$tmp/e1" "$tmp/e2")"; fi
expect_error "chat: missing model" chat -m models/nope.gguf </dev/null

# generation that reaches the context end stops with reason "length"
"$INF" run --token-ids 1,2,3 -c 8 --temp 0 --ignore-eos >"$tmp/out" 2>"$tmp/err"
if grep -q "stop reason *= length" "$tmp/err" && grep -q "/     6 tokens" "$tmp/err"; then
    ok "context end: a 3-token prompt in -c 8 feeds 5 more and samples a 6th, reason length"
else bad "context end: $(cat "$tmp/err")"; fi

# the timing summary and streaming text on the default model through the chat template
"$INF" run -p "Why is the sky blue?" -n 12 --seed 42 >"$tmp/a" 2>"$tmp/err"
if grep -q "load time" "$tmp/err" && grep -q "prompt eval time" "$tmp/err" &&
    grep -q "tokens per second" "$tmp/err" && [ -s "$tmp/a" ]; then ok "run on the default model prints text and the timing summary"
else bad "run on the default model: $(cat "$tmp/err")"; fi
"$INF" run -p "Why is the sky blue?" -n 12 --seed 42 >"$tmp/b" 2>/dev/null
cmp -s "$tmp/a" "$tmp/b" && ok "same seed, same text" || bad "same seed gave different text"
"$INF" run -p "Why is the sky blue?" -n 12 --seed 43 >"$tmp/c" 2>/dev/null
cmp -s "$tmp/a" "$tmp/c" && bad "seeds 42 and 43 gave the same text" || ok "another seed, other text"

# --dump-logits: [steps, vocab] float32 .npy, prefill row first, 5 steps
"$INF" run -p hi --raw -n 5 --temp 0 --ignore-eos --dump-logits "$tmp/l.npy" >/dev/null 2>&1
shape=$(/usr/bin/python3 -c "import numpy as np,sys; a=np.load(sys.argv[1]); print(a.dtype, a.shape)" "$tmp/l.npy" 2>&1)
[ "$shape" = "float32 (5, 151936)" ] && ok "--dump-logits: $shape" || bad "--dump-logits: $shape"

# chat: two turns; the second prefills only what is new
printf 'Hello there\nAnd a second question\n' | "$INF" chat -n 6 --seed 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
turns=$(grep -c '^\[.*prompt tokens' "$tmp/err")
cached=$(grep '^\[.*prompt tokens' "$tmp/err" | sed -n 2p | sed -E 's/.*\(([0-9]+) cached\).*/\1/')
# At least the whole first prompt is reused; the answer is reused too where it
# re-tokenizes to the ids that were sampled (random weights need not).
first=$(grep '^\[.*prompt tokens' "$tmp/err" | sed -n 1p | sed -E 's/^\[([0-9]+) prompt tokens.*/\1/')
if [ $rc -eq 0 ] && [ "$turns" -eq 2 ] && [ "${cached:-0}" -ge "${first:-1}" ] && [ "${first:-0}" -gt 0 ]; then
    ok "chat: 2 turns, the second reused $cached cached tokens"
else bad "chat: rc $rc, turns $turns, cached ${cached:-none}: $(cat "$tmp/err")"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
