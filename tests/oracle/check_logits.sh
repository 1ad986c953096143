#!/usr/bin/env bash
# inferno's logits against the NumPy Qwen3 (tests/reference/qwen3_ref.py, an
# independent float64 implementation written from the Hugging Face
# definition, with its own safetensors/GGUF reading and its own dequantizers).
#
# 1. tiny F32: prompts of 1, 17, 64, 65 and 100 tokens, greedy, prefill row
#    and every decode step: max abs diff < 1e-4.
# 2. The GGUF file and the HF folder of the same F32 weights give identical
#    logits (difference 0); the F16/BF16 folders match the reference.
# 3. Every other type (F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, and llama-quantize's
#    mixes: Q4_K_M, Q4_K_S, Q5_K_S/M, Q3_K_S/M/L, Q2_K, Q4_1, Q5_0/1, IQ4_NL/XS,
#    plus every matrix MXFP4):
#    inferno on the quantized file against the reference on the same file's
#    dequantized weights: < 1e-4 too, since both use the exact same weight
#    values and only the summation order differs. The distance to the F32
#    run (the quantization error itself) is printed for information.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
REF=tests/reference/qwen3_ref.py
INF=build/inferno
# The scalar backend is the reference these tolerances are stated for; the
# fast backends are checked against it op by op and model by model
# (test_backend_ops, test_backend_model).
TOL=1e-4
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
finish() { echo "$pass passed, $fail failed"; exit $((fail != 0)); }

if ! $PY -c 'import numpy' 2>/dev/null; then echo "check_logits: $PY has no numpy"; bad numpy; finish; fi
if [ ! -f models/tiny-f32.gguf ] || [ ! -d models/tiny-f32-hf ]; then
    echo "check_logits: models/ not generated (scripts/make-models.sh)"; bad models; finish
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ids() { $PY -c "import sys; n=int(sys.argv[1]); print(','.join(str((i*7919+13*n) % 151000) for i in range(n)))" "$1"; }
NGEN=8
run_inf() { # model, ids, out.npy
    $INF run --backend "${BACKEND:-scalar}" -m "$1" --token-ids "$2" -n $NGEN --temp 0 --ignore-eos \
        -ctk "${CTK:-f32}" -ctv "${CTV:-f32}" --dump-logits "$3" >"$tmp/out.txt" 2>"$tmp/err.txt" ||
        { cat "$tmp/err.txt"; return 1; }
}
cmp_npy() { # label, a, b, tol
    local line
    line=$($PY $REF --compare "$2" "$3" --tol "$4") && ok "$1: $line" || bad "$1: $line (tolerance $4)"
}

# 1. F32 (weights and K/V) against the reference reading the HF folder
args=()
for L in 1 17 64 65 100; do
    run_inf models/tiny-f32.gguf "$(ids $L)" "$tmp/f32_$L.npy" || { bad "inferno run f32 $L"; continue; }
    args+=(--tokens "$(ids $L)" --gen-from "$tmp/f32_$L.npy" --out "$tmp/ref_f32_$L.npy")
done
$PY $REF models/tiny-f32-hf "${args[@]}" || bad "reference run"
for L in 1 17 64 65 100; do
    cmp_npy "F32 prompt $L tokens, prefill + $((NGEN - 1)) decode steps" "$tmp/f32_$L.npy" "$tmp/ref_f32_$L.npy" $TOL
done

# 2. GGUF and HF folder of the same weights: identical logits. For F16/BF16
#    the GGUF files keep the norm vectors in F32 (as llama.cpp's converter
#    does) while the HF folders store them in F16/BF16; the maker draws norm
#    values exact in bf16, so the pairs still hold the same weights (compared
#    in section 3). Each HF folder is also checked against the reference.
run_inf models/tiny-f32-hf "$(ids 17)" "$tmp/hf_f32.npy" &&
    cmp_npy "F32 GGUF == HF folder" "$tmp/f32_17.npy" "$tmp/hf_f32.npy" 0 || bad "F32 HF run"
for t in f16 bf16; do
    run_inf models/tiny-$t-hf "$(ids 17)" "$tmp/hf_$t.npy" || { bad "inferno run $t HF"; continue; }
    $PY $REF models/tiny-$t-hf --tokens "$(ids 17)" --gen-from "$tmp/hf_$t.npy" --out "$tmp/ref_hf_$t.npy" &&
        cmp_npy "${t^^} HF folder vs reference" "$tmp/hf_$t.npy" "$tmp/ref_hf_$t.npy" $TOL || bad "reference $t HF"
done

# 3. every type against the reference on its own dequantized weights, read by
#    the reference's own dequantizers, which first must reproduce llama.cpp's
#    values on its weight-type fixtures (../shared/fixtures/quant) bit for bit
FIX=../shared/fixtures/quant
if [ -d "$FIX" ]; then
    $PY $REF --check-fixtures "$FIX" >"$tmp/fix.txt" && ok "reference dequantizers == llama.cpp's on $(grep -c '^ok' "$tmp/fix.txt") fixtures" ||
        { cat "$tmp/fix.txt"; bad "reference dequantizers on the fixtures"; }
else
    echo "note: no $FIX (llama.cpp's weight-type fixtures): the reference dequantizers are not checked against llama.cpp"
fi
for t in f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m q4_k_s q5_k_s q5_k_m q3_k_s q3_k_m q3_k_l q2_k q4_1 q5_0 q5_1 \
    iq4_nl iq4_xs mxfp4; do
    args=()
    for L in 17; do
        run_inf models/tiny-$t.gguf "$(ids $L)" "$tmp/${t}_$L.npy" || { bad "inferno run $t $L"; continue; }
        args+=(--tokens "$(ids $L)" --gen-from "$tmp/${t}_$L.npy" --out "$tmp/ref_${t}_$L.npy")
    done
    $PY $REF models/tiny-$t.gguf "${args[@]}" || bad "reference run $t"
    for L in 17; do
        cmp_npy "${t^^} prompt $L vs reference on its dequantized weights" "$tmp/${t}_$L.npy" "$tmp/ref_${t}_$L.npy" $TOL
    done
    [ -f "$tmp/hf_$t.npy" ] && cmp_npy "${t^^} GGUF == HF folder" "$tmp/${t}_17.npy" "$tmp/hf_$t.npy" 0
    # information only: the quantization error against F32 (prefill row of 17 tokens)
    $PY -c "
import numpy as np, sys
a, b = np.load(sys.argv[1])[0], np.load(sys.argv[2])[0]
print(f'     ${t^^}: prefill logits vs F32 weights: max abs {abs(a-b).max():.3g} (logit range {b.min():.2f}..{b.max():.2f})')" \
        "$tmp/${t}_17.npy" "$tmp/f32_17.npy"
done

# 4. K/V cache types: the same tiny F32 model with K and V stored as f16,
#    bf16, q8_0 (and mixed) against f32 K/V, the prefill row and each decode
#    step up to the first whose greedy token differs (after it the two runs
#    continue different texts). A stored K/V element carries its type's
#    rounding error (relative 2^-11 for f16, 2^-8 for bf16, up to 1/254 of
#    its block's largest value for q8_0); on these logits (range about -9..10)
#    that stays below: f16 0.02, bf16 0.1, q8_0 0.25.
for kt in f16:f16:0.02 bf16:bf16:0.1 q8_0:q8_0:0.25 q8_0:f16:0.25 f32:bf16:0.1; do
    IFS=: read -r ck cv tol <<<"$kt"
    for L in 17 100; do
        CTK=$ck CTV=$cv run_inf models/tiny-f32.gguf "$(ids $L)" "$tmp/kv_${ck}_${cv}_$L.npy" ||
            { bad "inferno run K/V $ck/$cv $L"; continue; }
        line=$($PY -c "
import numpy as np, sys
a, b, tol = np.load(sys.argv[1]), np.load(sys.argv[2]), float(sys.argv[3])
n = min(len(a), len(b))
same = [i for i in range(n) if a[i].argmax() != b[i].argmax()]
rows = same[0] + 1 if same else n
d = float(abs(a[:rows] - b[:rows]).max())
print(f'{rows} steps max abs diff {d:.3g}', 'ok' if 0 < d < tol else 'bad')" \
            "$tmp/kv_${ck}_${cv}_$L.npy" "$tmp/f32_$L.npy" "$tol")
        case "$line" in
        *ok) ok "K $ck V $cv prompt $L vs f32 K/V: $line (tolerance $tol)" ;;
        *) bad "K $ck V $cv prompt $L vs f32 K/V: $line (tolerance $tol, and not 0)" ;;
        esac
    done
done
finish
