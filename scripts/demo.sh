#!/usr/bin/env bash
# The main job on the default generated model: generate the test models
# (random weights with real shapes and the real Qwen3 tokenizer), then run a
# prompt through the chat template and stream the answer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/make-models.sh
build/inferno inspect models/tiny-q8_0.gguf | sed -n 1,20p
echo
build/inferno run -m models/tiny-q8_0.gguf -p "Why is the sky blue?" -n 48 --seed 42
