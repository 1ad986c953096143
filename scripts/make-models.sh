#!/usr/bin/env bash
# Generates the test models under models/ (skips files already there).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/inferno-mkmodel ]; then
    echo "make-models: build/inferno-mkmodel is not built yet; skipping"; exit 0
fi
tok=$(scripts/tokenizer-files.sh dir)
scripts/tokenizer-files.sh check
mkdir -p models
build/inferno-mkmodel --preset tiny --tokenizer "$tok" --out models \
    --formats gguf:f32,gguf:f16,gguf:bf16,gguf:q8_0,gguf:q4_0,gguf:q4_k,gguf:q6_k,gguf:q4_k_m,gguf:q4_1,gguf:q5_0,gguf:q5_1,gguf:q2_k,gguf:q3_k_s,gguf:q3_k_m,gguf:q3_k_l,gguf:q4_k_s,gguf:q5_k_s,gguf:q5_k_m,gguf:iq4_nl,gguf:iq4_xs,gguf:mxfp4,hf:f32,hf:f16,hf:bf16,hf-sharded:f32 \
    --skip-existing
# qwen3moe: the tiny MoE preset (8 experts, top 2) as GGUF and as HF folders in
# both expert layouts (per-expert tensors; transformers v5's fused gate_up_proj)
build/inferno-mkmodel --preset tiny-moe --tokenizer "$tok" --out models \
    --formats gguf:f32,gguf:q8_0,gguf:q4_k_m,gguf:mxfp4,hf:f32,hf-fused:f32 \
    --skip-existing
# qwen35: the tiny Qwen3.5 hybrid (3 Gated DeltaNet layers, 1 gated attention)
build/inferno-mkmodel --preset tiny-qwen35 --tokenizer "$tok" --out models \
    --formats gguf:f32,gguf:q8_0,gguf:q4_k_m,hf:f32 \
    --skip-existing
# qwen35moe: the tiny Qwen3.5 MoE hybrid (the same trunk, a MoE block with a
# shared expert in every layer; the HF folder holds its experts fused)
build/inferno-mkmodel --preset tiny-qwen35-moe --tokenizer "$tok" --out models \
    --formats gguf:f32,gguf:q8_0,gguf:q4_k_m,hf:f32 \
    --skip-existing
