#!/usr/bin/env bash
# NEON kernels: cross-compiles the backend (kern_neon.c, the generic kernels,
# the SIMD/pool backends, the scalar reference) with the op tests for aarch64
# using Debian's gcc-aarch64-linux-gnu, and runs them under qemu-user. The
# test binary is a standalone build of just the backend, the reference
# (de)quantizers and the test: no external libraries (xxhash header-only,
# its header found after the cross compiler's own).
# Prints the test's own "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/../.."

CC=${AARCH64_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU_AARCH64:-qemu-aarch64}
if ! command -v "$CC" >/dev/null || ! command -v "$QEMU" >/dev/null; then
    echo "check_neon: $CC or $QEMU missing (scripts/install-deps.sh installs them)"
    echo "0 passed, 1 failed"
    exit 1
fi
out=build/neon
mkdir -p "$out"
src=(src/backend/arena.c src/backend/cpu_features.c src/backend/kern_generic.c src/backend/kern_neon.c src/backend/pack.c
     src/backend/pack_cache.c src/backend/pool.c src/backend/scalar.c src/backend/select.c src/backend/simd.c src/backend/trace.c
     src/kv/kv_type.c src/quant/dtype.c src/quant/grids.c src/quant/quantize.c src/util/err.c
     src/util/mem.c)
# test_backend_ops (every op, every type, against the scalar reference),
# test_deltanet (the DeltaNet ops) and
# test_quant_fixtures (every type read bit-exactly against llama.cpp's values)
passed=0 failed=0
for t in ${NEON_TESTS:-test_backend_ops test_quant_fixtures test_deltanet}; do
    extra=()
    # (gcc 12's aarch64 vectorizer crashes on one of this test's loops)
    [ $t = test_quant_fixtures ] && extra=(src/modelfile/gguf.c -fno-tree-vectorize)
    if ! "$CC" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Wno-unused-parameter \
            -Wno-missing-field-initializers -Wno-format-truncation -Isrc -Itests/unit \
            -idirafter /usr/include "${src[@]}" "${extra[@]}" \
            tests/unit/$t.c -o "$out/$t" -lm -lpthread -static 2>"$out/build.log"; then
        cat "$out/build.log"
        failed=$((failed + 1))
        continue
    fi
    "$QEMU" "$out/$t" >"$out/$t.txt" 2>&1
    grep -v '^ok\|^  ' "$out/$t.txt" | grep -v 'passed, .* failed' | tail -20
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/$t.txt" | tail -1)
    echo "$t (qemu aarch64): ${line:-no result}"
    [ -n "$line" ] || { failed=$((failed + 1)); continue; }
    set -- $line
    passed=$((passed + $1)) failed=$((failed + $3))
done
echo "$passed passed, $failed failed"
exit $((failed != 0))
