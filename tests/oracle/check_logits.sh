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
# 4. qwen3moe (tiny-moe: 8 experts, top 2): F32 from GGUF and from both Hugging
#    Face expert layouts (per-expert tensors, transformers v5's fused
#    gate_up_proj) against the reference at prefill and every decode step
#    (< 1e-4); the three give identical logits; quantized files against the
#    reference on their dequantized weights.
# 5. YaRN (rope_scaling type yarn, factor 4, original context 32): a 100-token
#    prompt runs to position 107, past the original context, against the
#    reference's frequencies and attention factor (< 1e-4); the same config as
#    transformers v5 writes it (rope_parameters, dtype) and the GGUF that
#    `inferno quantize` makes of it (rope.scaling.*) give identical logits.
# 6. Files as other tools lay them out (tests/oracle/gguf_edit.py): a GGUF
#    split in 3 by llama.cpp's gguf-split layout, opened from its first file,
#    and Qwen3-VL's text models (GGUF qwen3vl, qwen3vlmoe; Hugging Face
#    qwen3_vl, qwen3_vl_moe folders: tests/oracle/hf_edit.py) give the logits
#    of the file they came from, bit for bit; a later split or a missing one
#    is refused by name.
# 7. K/V cache types against f32 K/V.
# 8. Embeddings (serve --embeddings, Qwen3-Embedding's GGUF and HF layouts)
#    against the reference's last-token hidden state after the final norm,
#    normalized: < 1e-4.
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

# 4. qwen3moe
if [ ! -f models/tiny-moe-f32.gguf ] || [ ! -d models/tiny-moe-f32-hf ] || [ ! -d models/tiny-moe-f32-hf-fused ]; then
    bad "models/tiny-moe-* not generated (scripts/make-models.sh)"; finish
fi
for src in gguf hf hf-fused; do
    case $src in gguf) m=models/tiny-moe-f32.gguf ;; hf) m=models/tiny-moe-f32-hf ;; *) m=models/tiny-moe-f32-hf-fused ;; esac
    args=()
    for L in 1 17 65; do
        run_inf $m "$(ids $L)" "$tmp/moe_${src}_$L.npy" || { bad "inferno run MoE $src $L"; continue; }
        args+=(--tokens "$(ids $L)" --gen-from "$tmp/moe_${src}_$L.npy" --out "$tmp/ref_moe_${src}_$L.npy")
    done
    $PY $REF $m "${args[@]}" || bad "reference run MoE $src"
    for L in 1 17 65; do
        cmp_npy "MoE F32 ($src) prompt $L tokens, prefill + $((NGEN - 1)) decode steps" "$tmp/moe_${src}_$L.npy" "$tmp/ref_moe_${src}_$L.npy" $TOL
    done
done
for L in 1 17 65; do
    cmp_npy "MoE F32 GGUF == HF folder, prompt $L" "$tmp/moe_gguf_$L.npy" "$tmp/moe_hf_$L.npy" 0
    cmp_npy "MoE F32 GGUF == HF fused folder, prompt $L" "$tmp/moe_gguf_$L.npy" "$tmp/moe_hf-fused_$L.npy" 0
done
for t in q8_0 q4_k_m mxfp4; do
    run_inf models/tiny-moe-$t.gguf "$(ids 17)" "$tmp/moe_$t.npy" || { bad "inferno run MoE $t"; continue; }
    $PY $REF models/tiny-moe-$t.gguf --tokens "$(ids 17)" --gen-from "$tmp/moe_$t.npy" --out "$tmp/ref_moe_$t.npy" ||
        { bad "reference run MoE $t"; continue; }
    cmp_npy "MoE ${t^^} prompt 17 vs reference on its dequantized weights" "$tmp/moe_$t.npy" "$tmp/ref_moe_$t.npy" $TOL
done
# a Hugging Face config with norm_topk_prob false is honoured (the chosen
# experts' weights are not renormalized): the same weights, another model
mkdir -p "$tmp/moe-nonorm"
for f in model.safetensors tokenizer.json tokenizer_config.json; do ln -s "$PWD/models/tiny-moe-f32-hf/$f" "$tmp/moe-nonorm/$f"; done
$PY -c "import json,sys; c=json.load(open(sys.argv[1])); c['norm_topk_prob']=False; json.dump(c, open(sys.argv[2],'w'))" \
    models/tiny-moe-f32-hf/config.json "$tmp/moe-nonorm/config.json"
if run_inf "$tmp/moe-nonorm" "$(ids 17)" "$tmp/moe_nonorm.npy" &&
    $PY $REF "$tmp/moe-nonorm" --tokens "$(ids 17)" --gen-from "$tmp/moe_nonorm.npy" --out "$tmp/ref_moe_nonorm.npy"; then
    cmp_npy "MoE norm_topk_prob false vs reference" "$tmp/moe_nonorm.npy" "$tmp/ref_moe_nonorm.npy" $TOL
    $PY -c "import numpy as np,sys; d=abs(np.load(sys.argv[1])[0]-np.load(sys.argv[2])[0]).max(); print(f'{d:.3g}'); sys.exit(1 if d < 1e-2 else 0)" \
        "$tmp/moe_nonorm.npy" "$tmp/moe_hf_17.npy" >"$tmp/d.txt" &&
        ok "MoE norm_topk_prob false changes the logits (by $(cat "$tmp/d.txt"))" || bad "MoE norm_topk_prob false gives the renormalized logits"
else
    bad "MoE norm_topk_prob false run"
fi

# 5. YaRN
yarn_dir() { # dir, python expression editing the config c
    mkdir -p "$1"
    for f in model.safetensors tokenizer.json tokenizer_config.json; do ln -sf "$PWD/models/tiny-f32-hf/$f" "$1/$f"; done
    $PY -c "import json,sys; c=json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[2],'w'))" \
        models/tiny-f32-hf/config.json "$1/config.json"
}
yarn_dir "$tmp/yarn" "c['rope_scaling']={'rope_type':'yarn','factor':4.0,'original_max_position_embeddings':32}"
yarn_dir "$tmp/yarn-v5" "c['rope_parameters']={'rope_type':'yarn','rope_theta':c.pop('rope_theta'),'factor':4.0,'original_max_position_embeddings':32}; c.pop('rope_scaling'); c['dtype']=c.pop('torch_dtype')"
if run_inf "$tmp/yarn" "$(ids 100)" "$tmp/yarn.npy" &&
    $PY $REF "$tmp/yarn" --tokens "$(ids 100)" --gen-from "$tmp/yarn.npy" --out "$tmp/ref_yarn.npy"; then
    cmp_npy "YaRN prompt 100 tokens (positions past the original 32), prefill + $((NGEN - 1)) decode steps" "$tmp/yarn.npy" "$tmp/ref_yarn.npy" $TOL
    run_inf "$tmp/yarn-v5" "$(ids 100)" "$tmp/yarn-v5.npy" &&
        cmp_npy "YaRN as transformers v5 writes it (rope_parameters) == rope_scaling" "$tmp/yarn.npy" "$tmp/yarn-v5.npy" 0 || bad "YaRN v5 config run"
    $INF quantize "$tmp/yarn" "$tmp/yarn.gguf" F32 >/dev/null 2>&1 && run_inf "$tmp/yarn.gguf" "$(ids 100)" "$tmp/yarn-gguf.npy" &&
        cmp_npy "YaRN GGUF (rope.scaling.*) == HF folder" "$tmp/yarn.npy" "$tmp/yarn-gguf.npy" 0 || bad "YaRN GGUF run"
else
    bad "YaRN run"
fi

# 6. split GGUF, Qwen3-VL text
EDIT=tests/oracle/gguf_edit.py
for m in tiny-q8_0 tiny-moe-q8_0; do
    run_inf models/$m.gguf "$(ids 17)" "$tmp/$m.npy" || { bad "inferno run $m"; continue; }
    $PY $EDIT models/$m.gguf "$tmp/$m-split" --split 3 &&
        run_inf "$tmp/$m-split-00001-of-00003.gguf" "$(ids 17)" "$tmp/$m-split.npy" &&
        cmp_npy "$m split in 3 files == the whole file" "$tmp/$m.npy" "$tmp/$m-split.npy" 0 || bad "$m split run"
    vl=qwen3vl; [ "$m" = tiny-moe-q8_0 ] && vl=qwen3vlmoe
    $PY $EDIT models/$m.gguf "$tmp/$m-$vl.gguf" --arch $vl &&
        run_inf "$tmp/$m-$vl.gguf" "$(ids 17)" "$tmp/$m-$vl.npy" &&
        cmp_npy "$m as $vl (Qwen3-VL's text model) == $m" "$tmp/$m.npy" "$tmp/$m-$vl.npy" 0 || bad "$m as $vl run"
done
# Qwen3-VL's Hugging Face layout (tests/oracle/hf_edit.py): the text model of
# a qwen3_vl / qwen3_vl_moe folder gives the logits of the text-only folder,
# bit for bit; Qwen3-VL-MoE's x·W expert layout is refused by name.
for m in tiny-f32-hf tiny-moe-f32-hf-fused; do
    run_inf models/$m "$(ids 17)" "$tmp/$m.npy" || { bad "inferno run $m"; continue; }
    $PY tests/oracle/hf_edit.py models/$m "$tmp/$m-vl" --vl &&
        run_inf "$tmp/$m-vl" "$(ids 17)" "$tmp/$m-vl.npy" &&
        cmp_npy "$m in Qwen3-VL's layout (text_config, model.language_model.*) == $m" \
            "$tmp/$m.npy" "$tmp/$m-vl.npy" 0 || bad "$m as Qwen3-VL run"
done
# a text_config that is not an object, or that lacks a field the top level lacks too
for edit in "c['text_config'] = 5:text_config is not an object" \
            "del c['text_config']['hidden_size']:hidden_size is missing"; do
    rm -rf "$tmp/vl-bad"; cp -r "$tmp/tiny-f32-hf-vl" "$tmp/vl-bad"
    $PY -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); ${edit%%:*}; json.dump(c,open(p,'w'))" \
        "$tmp/vl-bad/config.json"
    msg=$($INF run -m "$tmp/vl-bad" --token-ids 1 -n 1 2>&1)
    [[ "$msg" == *"${edit#*:}"* ]] && ok "a Qwen3-VL config with ${edit%%:*}: refused by name: $msg" ||
        bad "a Qwen3-VL config with ${edit%%:*}: $msg"
done
$PY tests/oracle/hf_edit.py models/tiny-moe-f32-hf-fused "$tmp/vlmoe-xw" --vl-moe-xw
msg=$($INF run -m "$tmp/vlmoe-xw" --token-ids 1 -n 1 2>&1)
[[ "$msg" == *"x·W"*"GGUF"* ]] && ok "Qwen3-VL-MoE's x·W experts are refused by name: $msg" ||
    bad "Qwen3-VL-MoE x·W experts: $msg"
msg=$($INF run -m "$tmp/tiny-q8_0-split-00002-of-00003.gguf" --token-ids 1 -n 1 2>&1)
[[ "$msg" == *"split 2"*"open the first"* ]] && ok "a later split is refused: $msg" || bad "a later split: $msg"
rm "$tmp/tiny-q8_0-split-00003-of-00003.gguf"
msg=$($INF run -m "$tmp/tiny-q8_0-split-00001-of-00003.gguf" --token-ids 1 -n 1 2>&1)
[[ "$msg" == *"00003-of-00003.gguf"* ]] && ok "a missing split is named: $msg" || bad "a missing split: $msg"
# 7. K/V cache types: the same tiny F32 model with K and V stored as f16,
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

# 8. Embeddings (Qwen3-Embedding: the last token's hidden state after the
#    final norm, L2-normalized): `serve --embeddings` on the tiny F32 weights
#    laid out as Qwen3-Embedding's GGUF (pooling_type last, add_eos_token)
#    and its Hugging Face folder (base-model tensor names, no head,
#    TemplateProcessing appending <|endoftext|>, 1_Pooling), inputs of 1, 17,
#    64, 65 and 100 token ids in one request (batched across the slots),
#    against the reference on the same ids (< 1e-4); a text input is its
#    tokens plus <|endoftext|>; `dimensions` truncates and renormalizes.
EMB=tests/oracle/embd_model.py
$PY $EMB gguf models/tiny-f32.gguf "$tmp/embd.gguf" && $PY $EMB hf models/tiny-f32-hf "$tmp/embd-hf" ||
    bad "deriving the embedding models"
embed_server() { # model log: starts a server, sets $eport and $epid
    $INF serve -m "$1" --backend "${BACKEND:-scalar}" --embeddings --port 0 -np 3 -c 256 -ctk f32 -ctv f32 \
        >"$2" 2>&1 &
    epid=$! eport=
    for _ in $(seq 1 300); do
        eport=$(sed -nE 's|.*listening on http://127\.0\.0\.1:([0-9]+).*|\1|p' "$2" | head -n 1)
        [ -n "$eport" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$eport/health")" = 200 ] && return 0
        kill -0 $epid 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
embed_json() { # port, body, out.npy: the response's embeddings as [n, dims]
    curl -s "http://127.0.0.1:$1/v1/embeddings" -H 'Content-Type: application/json' -d "$2" >"$3.json" &&
        $PY -c "
import json, sys, numpy as np
r = json.load(open(sys.argv[1]))
np.save(sys.argv[2], np.array([d['embedding'] for d in r['data']], dtype=np.float32))" "$3.json" "$3"
}
inputs=$(for L in 1 17 64 65 100; do printf '[%s],' "$(ids $L)"; done)
args=()
for L in 1 17 64 65 100; do args+=(--tokens "$(ids $L)" --out "$tmp/ref_embd_$L.npy"); done
$PY $REF "$tmp/embd-hf" --embed "${args[@]}" &&
    $PY -c "
import numpy as np, sys
np.save(sys.argv[1], np.concatenate([np.load(f) for f in sys.argv[2:]]))" "$tmp/ref_embd.npy" \
        $(for L in 1 17 64 65 100; do echo "$tmp/ref_embd_$L.npy"; done) || bad "reference embeddings"
for src in gguf hf; do
    m="$tmp/embd.gguf"; [ $src = hf ] && m="$tmp/embd-hf"
    if ! embed_server "$m" "$tmp/embd_$src.log"; then
        bad "embedding server ($src)"; sed 's/^/    | /' "$tmp/embd_$src.log"; kill $epid 2>/dev/null; continue
    fi
    embed_json $eport "{\"input\": [${inputs%,}]}" "$tmp/embd_$src.npy" &&
        cmp_npy "embeddings ($src) of 1, 17, 64, 65, 100 tokens vs the reference's last hidden state, normalized" \
            "$tmp/embd_$src.npy" "$tmp/ref_embd.npy" $TOL || bad "embeddings ($src)"
    # a text: its tokens (/tokenize) and the appended <|endoftext|>
    curl -s "http://127.0.0.1:$eport/tokenize" -H 'Content-Type: application/json' \
        -d '{"content": "The capital of France"}' >"$tmp/tok.json"
    tids=$($PY -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'] + [151643])))" "$tmp/tok.json")
    embed_json $eport '{"input": "The capital of France", "dimensions": 32}' "$tmp/embd_text_$src.npy" &&
        $PY $REF "$tmp/embd-hf" --embed --tokens "$tids" --out "$tmp/ref_text.npy" &&
        $PY -c "
import numpy as np, sys
v = np.load(sys.argv[1])[:, :32].astype(np.float64)
np.save(sys.argv[2], (v / np.linalg.norm(v)).astype(np.float32))" "$tmp/ref_text.npy" "$tmp/ref_text32.npy" &&
        cmp_npy "embedding ($src) of a text + <|endoftext|>, dimensions 32 (truncated, renormalized) vs the reference" \
            "$tmp/embd_text_$src.npy" "$tmp/ref_text32.npy" $TOL || bad "text embedding ($src)"
    kill -TERM $epid; wait $epid 2>/dev/null
done
# what the files state, refused by name when it is wrong or not computable
kv_msg() { # key type value: inferno's error on tiny-q8_0 with that key
    $PY $EMB kv models/tiny-q8_0.gguf "$tmp/kv.gguf" "$1" "$2" "$3" &&
        $INF run -m "$tmp/kv.gguf" --token-ids 1,2 -n 1 2>&1 >/dev/null
}
msg=$(kv_msg qwen3.pooling_type u32 9)
[[ "$msg" == *"qwen3.pooling_type is 9"* ]] && ok "pooling_type out of range: $msg" || bad "pooling_type 9: $msg"
msg=$(kv_msg general.sampling.top_p str high)
[[ "$msg" == *"general.sampling.top_p"* ]] && ok "a sampling key of the wrong type: $msg" || bad "top_p string: $msg"
msg=$(kv_msg general.sampling.top_p f32 1.5)
[[ "$msg" == *"general.sampling.top_p is 1.5, expected in [0, 1]"* ]] && ok "a sampling value out of range: $msg" || bad "top_p 1.5: $msg"
$PY $EMB kv "$tmp/embd.gguf" "$tmp/mean.gguf" qwen3.pooling_type u32 1
msg=$($INF serve -m "$tmp/mean.gguf" --embeddings --port 0 2>&1)
[[ "$msg" == *"pooling other than the last token"* ]] && ok "mean pooling is refused for --embeddings" || bad "mean pooling: $msg"
msg=$($INF run -m "$tmp/embd-hf" --token-ids 1,2 -n 1 2>&1)
[[ "$msg" == *"no output head"* ]] && ok "a model without a head refuses to generate: $msg" || bad "no-head generate: $msg"
msg=$($INF serve -m "$tmp/embd-hf" --port 0 2>&1)
[[ "$msg" == *"start it with --embeddings"* ]] && ok "serve without --embeddings on it says to start with it" || bad "no-head serve: $msg"
finish
