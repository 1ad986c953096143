#!/usr/bin/env bash
# --kv paged against --kv basic end to end on the tiny models: the same
# greedy (and seeded) text and bit-identical logits at every step, for
# prompts that cross block boundaries, with several block sizes and prefill
# chunk sizes; chat turns that keep the cache; the context end; and bad
# flag values or a pool too small giving one clear line.
set -uo pipefail
cd "$(dirname "$0")/../.."
INF=build/inferno
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x "$INF" ] || [ ! -f models/tiny-f32.gguf ]; then
    echo "check_kv_paged: build/inferno or models/tiny-f32.gguf missing (make && scripts/make-models.sh)"
    echo "0 passed, 1 failed"; exit 1
fi

PROMPT="The quick brown fox jumps over the lazy dog. Paged caches keep keys and values in fixed \
blocks; a block table maps each logical block of a sequence to a physical one, so many \
requests can share one pool of memory without copying."

gen() { # out-prefix, args...
    local out=$1; shift
    "$INF" run -p "$PROMPT" --raw -n 16 --ignore-eos --dump-logits "$out.npy" "$@" >"$out.txt" 2>"$out.err"
}

same() { # description, a, b
    if cmp -s "$2.txt" "$3.txt" && cmp -s "$2.npy" "$3.npy" && [ -s "$2.txt" ]; then ok "$1"
    else bad "$1: $(head -c 200 "$3.err")"; fi
}

n_prompt=$("$INF" run -p "$PROMPT" --raw -n 1 --verbose-prompt 2>&1 >/dev/null | grep -o "prompt eval time.*/ *[0-9]* tokens" | grep -o "[0-9]* tokens" | grep -o "[0-9]*")
echo "# prompt: ${n_prompt:-?} tokens"

for model in tiny-f32 tiny-q8_0 tiny-moe-q4_k_m; do
    gen "$tmp/$model-basic" -m models/$model.gguf --temp 0 --kv basic
    for bs in 16 4 1 32; do
        gen "$tmp/$model-p$bs" -m models/$model.gguf --temp 0 --kv paged --kv-block $bs
        same "$model greedy: paged (block $bs) = basic, text and logits of 17 steps" "$tmp/$model-basic" "$tmp/$model-p$bs"
    done
done

# Every K/V type (the default above is f16): paged = basic bit for bit.
for t in f32 bf16 q8_0; do
    gen "$tmp/$t-basic" -m models/tiny-f32.gguf --temp 0 --kv basic -ctk $t -ctv $t
    for bs in 16 4; do
        gen "$tmp/$t-p$bs" -m models/tiny-f32.gguf --temp 0 --kv paged --kv-block $bs -ctk $t -ctv $t
        same "K/V $t: paged (block $bs) = basic, text and logits of 17 steps" "$tmp/$t-basic" "$tmp/$t-p$bs"
    done
done
gen "$tmp/mix-basic" -m models/tiny-f32.gguf --temp 0 --kv basic -ctk q8_0 -ctv f16
gen "$tmp/mix-paged" -m models/tiny-f32.gguf --temp 0 --kv paged --kv-block 8 -ctk q8_0 -ctv f16
same "K q8_0, V f16: paged = basic" "$tmp/mix-basic" "$tmp/mix-paged"

# Prefill in chunks of 7 rows: chunks start and end inside blocks.
gen "$tmp/chunk-basic" -m models/tiny-f32.gguf --temp 0 -b 7 --kv basic
gen "$tmp/chunk-paged" -m models/tiny-f32.gguf --temp 0 -b 7 --kv paged --kv-block 8
same "prefill in 7-row chunks, block 8: paged = basic" "$tmp/chunk-basic" "$tmp/chunk-paged"

# Seeded sampling draws the same tokens.
gen "$tmp/seed-basic" -m models/tiny-f32.gguf --temp 0.9 --seed 7 --kv basic
gen "$tmp/seed-paged" -m models/tiny-f32.gguf --temp 0.9 --seed 7 --kv paged --kv-block 4
same "temperature 0.9, seed 7: paged = basic" "$tmp/seed-basic" "$tmp/seed-paged"

# A pool given by --cache-mem that holds the whole context works the same.
gen "$tmp/mem-paged" -m models/tiny-f32.gguf --temp 0 --kv paged --cache-mem 8M -c 1024
same "--cache-mem 8M: paged = basic" "$tmp/tiny-f32-basic" "$tmp/mem-paged"

# chat: three turns keep the cache (only the new part is prefilled).
turns='Hello there, tell me about blocks\nAnd what about tables?\nThanks, one more thing\n'
printf "$turns" | "$INF" chat -m models/tiny-f32.gguf -n 10 --temp 0 --kv basic >"$tmp/chat-b.txt" 2>"$tmp/chat-b.err"
printf "$turns" | "$INF" chat -m models/tiny-f32.gguf -n 10 --temp 0 --kv paged --kv-block 4 >"$tmp/chat-p.txt" 2>"$tmp/chat-p.err"
cb=$(grep -o "([0-9]* cached)" "$tmp/chat-b.err" | tr '\n' ' ')
cp=$(grep -o "([0-9]* cached)" "$tmp/chat-p.err" | tr '\n' ' ')
if cmp -s "$tmp/chat-b.txt" "$tmp/chat-p.txt" && [ "$cb" = "$cp" ] && [ "$(grep -c cached "$tmp/chat-p.err")" = 3 ]; then
    ok "chat, 3 turns: paged = basic, cached tokens per turn: $cp"
else bad "chat: basic [$cb] paged [$cp]: $(head -c 300 "$tmp/chat-p.err")"; fi

# The context end stops with "length" the same way.
"$INF" run -m models/tiny-f32.gguf --token-ids 1,2,3 -c 8 --temp 0 --ignore-eos --kv paged --kv-block 4 >"$tmp/ctx.txt" 2>"$tmp/ctx.err"
if grep -q "stop reason *= length" "$tmp/ctx.err" && grep -q "/     6 tokens" "$tmp/ctx.err"; then
    ok "paged context end: -c 8 stops with reason length after 6 tokens"
else bad "paged context end: $(cat "$tmp/ctx.err")"; fi

# Bad input: one line, non-zero exit, no crash.
expect_error() { # description, args...
    local what=$1; shift
    "$INF" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$? lines
    # (the first load of a model may say, on a line of its own, that it
    # writes the pack cache: runtime/engine_pack.h)
    grep -v "^inferno: packing the weights once into" "$tmp/err" >"$tmp/err1"
    mv "$tmp/err1" "$tmp/err"
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ]; then ok "$what: $(cat "$tmp/err")"
    else bad "$what: rc $rc, $lines lines: $(head -c 300 "$tmp/err")"; fi
}
expect_error "--kv foo" run -p hi --kv foo
expect_error "--kv-block 12" run -p hi --kv paged --kv-block 12
expect_error "--cache-mem nonsense" run -p hi --kv paged --cache-mem lots
expect_error "--cache-mem below one block" run -m models/tiny-f32.gguf -p hi --kv paged --cache-mem 1K
expect_error "-ctk q4_0" run -m models/tiny-f32.gguf -p hi -ctk q4_0
grep -q "expected one of f32, f16, bf16, q8_0" "$tmp/err" && ok "the refusal lists the K/V types" ||
    bad "K/V type message: $(cat "$tmp/err")"
expect_error "--cache-type-v nonsense" run -m models/tiny-f32.gguf -p hi --cache-type-v nonsense
# A pool smaller than one context is refused when the engine opens (as the
# server does), naming the budget and what one context needs (f16 K/V: a
# block of 4 positions of the tiny model is 8 KiB).
expect_error "pool below one context" run -m models/tiny-f32.gguf -p "$PROMPT" --raw --kv paged --kv-block 4 --cache-mem 64K -c 4096
grep -q "cache-mem 65536 bytes hold 8 blocks.*fewer than one context of 4096" "$tmp/err" &&
    ok "the refusal names the budget and the context" || bad "pool message: $(cat "$tmp/err")"
# Without -c a request may use the whole pool: here 32 positions, so the
# prompt is refused naming its tokens and that context (never truncated).
expect_error "prompt past the pool" run -m models/tiny-f32.gguf -p "$PROMPT" --raw --kv paged --kv-block 4 --cache-mem 64K
grep -q "prompt has $n_prompt tokens but the context holds 32" "$tmp/err" &&
    ok "the refusal names the prompt's tokens and the context" || bad "prompt message: $(cat "$tmp/err")"
"$INF" run -m models/tiny-f32.gguf --token-ids 1,2,3 --kv paged --kv-block 4 --cache-mem 64K -n 100 --temp 0 --ignore-eos >"$tmp/pool.txt" 2>"$tmp/pool.err"
grep -q "stop reason *= length" "$tmp/pool.err" && grep -q "/    30 tokens" "$tmp/pool.err" &&
    ok "one request fills the whole pool of 32 positions: 3 prompt + 30 generated (the last one not stored)" ||
    bad "whole pool: $(tail -3 "$tmp/pool.err")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
