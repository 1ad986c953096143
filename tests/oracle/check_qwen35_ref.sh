#!/usr/bin/env bash
# The NumPy Qwen3.5 / Qwen3.6 reference (tests/reference/qwen35_ref.py), the
# oracle for the hybrid architectures, checked on its own: tiny random Hugging
# Face folders (dense qwen3_5, MoE qwen3_5_moe_text) and the GGUF files its own
# converter code makes of them (1 + w norms, ssm_a = -exp(A_log), tiled V heads,
# an MTP block to skip) give the same logits; whole = token by token = chunked;
# hand-checkable cases of the delta rule, the conv, partial RoPE and the MoE
# block (tests/reference/qwen35_ref_selftest.py).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
if ! $PY -c 'import numpy' 2>/dev/null; then echo "check_qwen35_ref: $PY has no numpy"; echo "0 passed, 1 failed"; exit 1; fi
exec $PY tests/reference/qwen35_ref_selftest.py
