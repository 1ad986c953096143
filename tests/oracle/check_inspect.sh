#!/usr/bin/env bash
# `inferno inspect --json` against npm @huggingface/gguf (an independent GGUF
# parser): metadata keys, types and values, tensor names, types, shapes and
# offsets. Runs on hand-built GGUF images from the unit tests (every metadata
# type, nested arrays, every tensor type) and on every generated model
# models/*.gguf (made by scripts/make-models.sh when missing). Then
# `inspect --tensor NAME --npy OUT` through NumPy (tests/oracle/inspect_npy.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
make -s -j2 build/inferno build/tests/test_gguf >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
[ -d node_modules/@huggingface/gguf ] || { echo "check_inspect: npm @huggingface/gguf is missing (make deps)"; echo "0 passed, 1 failed"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/tests/test_gguf --write-seeds "$tmp" >/dev/null

shopt -s nullglob
models=(models/*.gguf)
if [ ${#models[@]} -eq 0 ]; then scripts/make-models.sh >/dev/null 2>&1; models=(models/*.gguf); fi

pass=0 fail=0
run() {
    local line
    line=$(node tests/oracle/check_inspect.mjs build/inferno "$1" 2>&1 | tee /dev/stderr | tail -n 1)
    if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
        echo "$1: ${BASH_REMATCH[1]} checks agree, ${BASH_REMATCH[2]} differ" >&2
    else
        echo "$1: the comparison did not finish" >&2; fail=$((fail + 1))
    fi
}
for f in "$tmp"/*.gguf "${models[@]}"; do run "$f"; done
if [ ${#models[@]} -eq 0 ]; then
    echo "check_inspect: no generated models under models/ (scripts/make-models.sh made none)"
    fail=$((fail + 1))
fi
# --tensor/--npy: the values through NumPy, against the files read by the script itself.
fixtures=../shared/fixtures/quant
if [ -d "$fixtures" ] && [ -f models/tiny-q8_0.gguf ] && [ -d models/tiny-bf16-hf ]; then
    line=$(/usr/bin/python3 tests/oracle/inspect_npy.py build/inferno "$fixtures" models/tiny-q8_0.gguf \
        models/tiny-bf16-hf 2>&1 | tee /dev/stderr | tail -n 1)
    if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        pass=$((pass + BASH_REMATCH[1])); fail=$((fail + BASH_REMATCH[2]))
    else
        echo "inspect_npy.py did not finish" >&2; fail=$((fail + 1))
    fi
else
    echo "check_inspect: --npy needs $fixtures, models/tiny-q8_0.gguf and models/tiny-bf16-hf" >&2
    fail=$((fail + 1))
fi
echo "${pass} passed, ${fail} failed"
[ "$fail" -eq 0 ]
