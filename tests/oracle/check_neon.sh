#!/usr/bin/env bash
# NEON kernels: cross-compiles the backend (kern_neon.c, the generic kernels,
# the SIMD/pool backends, the scalar reference) with the op tests for aarch64
# using Debian's gcc-aarch64-linux-gnu, and runs them under qemu-user. The
# test binary is a standalone build of just the backend, the reference
# (de)quantizers and the test: no external libraries.
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
src=(src/backend/cpu_features.c src/backend/kern_generic.c src/backend/kern_neon.c src/backend/pack.c
     src/backend/pool.c src/backend/scalar.c src/backend/select.c src/backend/simd.c src/backend/trace.c
     src/quant/dtype.c src/quant/quantize.c src/util/err.c src/util/mem.c tests/unit/test_backend_ops.c)
if ! "$CC" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Wno-unused-parameter \
        -Wno-missing-field-initializers -Wno-format-truncation -Isrc -Itests/unit "${src[@]}" -o "$out/test_backend_ops" \
        -lm -lpthread -static 2>"$out/build.log"; then
    cat "$out/build.log"
    echo "0 passed, 1 failed"
    exit 1
fi
"$QEMU" "$out/test_backend_ops"
