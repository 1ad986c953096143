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
    --formats gguf:f32,gguf:f16,gguf:bf16,gguf:q8_0,gguf:q4_0,gguf:q4_k,gguf:q6_k,gguf:q4_k_m,hf:f32,hf:f16,hf:bf16,hf-sharded:f32 \
    --skip-existing
