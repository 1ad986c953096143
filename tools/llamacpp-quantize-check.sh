#!/usr/bin/env bash
# `inferno quantize` read back by llama.cpp (docs/QUANTIZE.md). Not part of CI: it needs
# node-llama-cpp in /tmp/llamacpp (set-up in tools/llamacpp-check.mjs) and takes minutes.
# For each source and type: inferno quantize → @huggingface/gguf reads it
# (tests/oracle/check_inspect.mjs) → for the tiny sources, llama.cpp's own quantizer on the
# GGUF of the same weights (tools/llamacpp-quantize.py) and the two files compared
# (tools/gguf-diff.py) → llama.cpp loads each file and its greedy ids and logits are compared
# with inferno's on the same file (tools/llamacpp-check.mjs --md).
# usage: tools/llamacpp-quantize-check.sh [OUT_DIR (default /tmp/llcheck)] [SOURCE...]
# SOURCE: hf moe-hf moe-fused f32 0.6b (default: all). Writes only under OUT_DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/llcheck}
shift $(($# > 0 ? 1 : 0))
sources=${*:-hf moe-hf moe-fused f32 0.6b}
LL=${LLAMACPP:-/tmp/llamacpp}
INF=build/inferno
TYPES="Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_NL IQ4_XS"
[ -f "$LL/check.mjs" ] || cp tools/llamacpp-check.mjs "$LL/check.mjs"
mkdir -p "$out"
ftype() { $INF quantize --help | awk -v t="$1" '$3 == t {print $1}'; }
declare -A SRC=([hf]=models/tiny-f32-hf [moe-hf]=models/tiny-moe-f32-hf
    [moe-fused]=models/tiny-moe-f32-hf-fused [f32]=models/tiny-f32.gguf
    [0.6b]=models/qwen3-0.6b-bf16.gguf)
# llama.cpp's quantizer reads GGUF only: the GGUF of the same weights as each tiny source
declare -A GG=([hf]=models/tiny-f32.gguf [moe-hf]=models/tiny-moe-f32.gguf
    [moe-fused]=models/tiny-moe-f32.gguf [f32]=models/tiny-f32.gguf)
files=()
echo "| source | type | @huggingface/gguf | against llama.cpp's quantizer on the same weights |"
echo "| --- | --- | --- | --- |"
for s in $sources; do
    for t in $TYPES; do
        f=$out/$s-$t.gguf
        if ! $INF quantize -t 2 "${SRC[$s]}" "$f" $t >"$out/log.txt" 2>&1; then
            echo "| $s | $t | quantize failed: $(tail -1 "$out/log.txt") | |"
            continue
        fi
        files+=("$f")
        hfg=$(node tests/oracle/check_inspect.mjs $INF "$f" 2>&1 | tail -n 1)
        vs=""
        if [ -n "${GG[$s]:-}" ]; then
            ref=$out/llama-quantize-$(basename "${GG[$s]}" .gguf)-$t.gguf
            [ -f "$ref" ] || python3 tools/llamacpp-quantize.py "${GG[$s]}" "$ref" "$(ftype $t)" 2 >/dev/null 2>&1 ||
                vs="llama-quantize failed"
            [ -z "$vs" ] && vs=$(python3 tools/gguf-diff.py --quiet "$f" "$ref" | tail -n 1)
        fi
        echo "| $s | $t | $hfg | $vs |"
    done
done
echo
node "$LL/check.mjs" --inferno "$INF" --md "${files[@]}" >"$out/check.txt" 2>&1
rc=$?
sed -n '/^| file /,$p' "$out/check.txt"
exit $rc
