#!/usr/bin/env bash
# inferno's Qwen3.5 / Qwen3.6 hybrids (qwen35: Gated DeltaNet layers and a
# gated attention layer; qwen35moe: the same trunk with MoE blocks and a
# shared expert) against the NumPy reference written from the Hugging Face
# definition (tests/reference/qwen35_ref.py; itself checked by
# check_qwen35_ref), on the scalar backend:
# 1. F32 from the GGUF file (llama.cpp's layout: 1 + w norms, ssm_a, tiled V
#    heads) and from the Hugging Face folder (zero-centred norms, A_log, 3-D
#    conv weight, grouped V heads; MoE: fused experts): prompts of 1, 17 and
#    70 tokens, the prefill row and every decode step, max abs diff < 1e-4;
#    dense and MoE.
# 2. Q8_0 and Q4_K_M files against the reference on their own dequantized
#    weights: < 1e-4; dense and MoE.
# 3. The recurrent state across calls: a prompt fed in chunks (-b 5: each
#    chunk continues the conv and delta-rule states the previous one left)
#    gives the logits of the whole prompt at once, bit for bit; so do the
#    basic and the paged K/V caches. A GGUF's multi-token-prediction block
#    is not run; `inferno quantize` of a qwen35 GGUF keeps the conv weights
#    F32 (as llama-quantize does) and runs as the reference reads it; of a
#    Hugging Face folder (dense, MoE) it writes llama.cpp's layout, whose
#    logits equal the GGUF file's bit for bit. Bad hybrid configs and a cut
#    file are refused by name.
# 4. The server: a chat's second turn resumes from the first's state
#    checkpoints and answers as a fresh server does.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
REF=tests/reference/qwen35_ref.py
INF=build/inferno
TOL=1e-4
NGEN=8
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
finish() { echo "$pass passed, $fail failed"; exit $((fail != 0)); }

if ! $PY -c 'import numpy' 2>/dev/null; then echo "check_qwen35: $PY has no numpy"; bad numpy; finish; fi
for v in qwen35 qwen35-moe; do
    for m in tiny-$v-f32.gguf tiny-$v-f32-hf tiny-$v-q8_0.gguf tiny-$v-q4_k_m.gguf; do
        [ -e models/$m ] || { bad "models/$m not generated (scripts/make-models.sh)"; finish; }
    done
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ids() { $PY -c "import sys; n=int(sys.argv[1]); print(','.join(str((i*7919+13*n) % 151000) for i in range(n)))" "$1"; }
run_inf() { # model, ids, out.npy, extra args...
    local m=$1 t=$2 o=$3
    shift 3
    $INF run --backend scalar -m "$m" --token-ids "$t" -n $NGEN --temp 0 --ignore-eos \
        -ctk f32 -ctv f32 --dump-logits "$o" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" ||
        { cat "$tmp/err.txt"; return 1; }
}
cmp_npy() { # label, a, b, tol
    local line
    line=$($PY $REF --compare "$2" "$3" --tol "$4") && ok "$1: $line" || bad "$1: $line (tolerance $4)"
}

for v in qwen35 qwen35-moe; do
    # 1. F32, both layouts
    for src in gguf hf; do
        m=models/tiny-$v-f32.gguf; [ $src = hf ] && m=models/tiny-$v-f32-hf
        args=()
        for L in 1 17 70; do
            run_inf $m "$(ids $L)" "$tmp/$v-${src}_$L.npy" || { bad "inferno run $v $src $L"; continue; }
            args+=(--tokens "$(ids $L)" --gen-from "$tmp/$v-${src}_$L.npy" --out "$tmp/ref_$v-${src}_$L.npy")
        done
        $PY $REF $m "${args[@]}" || bad "reference run $v $src"
        for L in 1 17 70; do
            cmp_npy "$v F32 $src prompt $L tokens, prefill + $((NGEN - 1)) decode steps" \
                "$tmp/$v-${src}_$L.npy" "$tmp/ref_$v-${src}_$L.npy" $TOL
        done
    done
    # 2. quantized files against the reference on their dequantized weights
    for t in q8_0 q4_k_m; do
        m=models/tiny-$v-$t.gguf
        run_inf $m "$(ids 17)" "$tmp/$v-$t.npy" || { bad "inferno run $v $t"; continue; }
        $PY $REF $m --tokens "$(ids 17)" --gen-from "$tmp/$v-$t.npy" --out "$tmp/ref_$v-$t.npy" &&
            cmp_npy "$v ${t^^} prompt 17 vs reference on its dequantized weights" "$tmp/$v-$t.npy" "$tmp/ref_$v-$t.npy" $TOL ||
            bad "reference run $v $t"
    done
done

# 3. the states carried across forward calls and cache kinds: bit for bit
run_inf models/tiny-qwen35-f32.gguf "$(ids 70)" "$tmp/chunked.npy" -b 5 &&
    cmp_npy "prompt of 70 fed 5 at a time == at once" "$tmp/qwen35-gguf_70.npy" "$tmp/chunked.npy" 0 ||
    bad "chunked run"
run_inf models/tiny-qwen35-f32.gguf "$(ids 70)" "$tmp/paged.npy" --kv paged --kv-block 16 &&
    cmp_npy "--kv paged == --kv basic" "$tmp/qwen35-gguf_70.npy" "$tmp/paged.npy" 0 ||
    bad "paged run"

# inferno quantize on a qwen35 GGUF: the conv weights stay F32 (as
# llama-quantize keeps ssm_conv1d), the file runs as the reference reads it
if $INF quantize models/tiny-qwen35-f32.gguf "$tmp/requant.gguf" q4_k_m >"$tmp/q.txt" 2>&1; then
    conv=$($INF inspect "$tmp/requant.gguf" | awk '$1 ~ /ssm_conv1d/ {print $2}' | sort -u | tr '\n' ' ')
    [ "$conv" = "F32 " ] && ok "quantize keeps ssm_conv1d F32" || bad "quantize: ssm_conv1d types: $conv"
    run_inf "$tmp/requant.gguf" "$(ids 17)" "$tmp/requant.npy" &&
        $PY $REF "$tmp/requant.gguf" --tokens "$(ids 17)" --gen-from "$tmp/requant.npy" --out "$tmp/ref_requant.npy" &&
        cmp_npy "inferno quantize q4_k_m of the qwen35 GGUF vs reference" "$tmp/requant.npy" "$tmp/ref_requant.npy" $TOL ||
        bad "requantized run"
else
    bad "inferno quantize qwen35: $(tail -2 "$tmp/q.txt")"
fi

# inferno quantize of the Hugging Face folders (dense, MoE) to F32 GGUF: the
# converter's values (1 + w norms, ssm_a, squeezed conv, V heads tiled,
# experts stacked) give the GGUF files' logits bit for bit
for v in qwen35 qwen35-moe; do
    if $INF quantize models/tiny-$v-f32-hf "$tmp/conv-$v.gguf" f32 >"$tmp/q.txt" 2>&1; then
        run_inf "$tmp/conv-$v.gguf" "$(ids 17)" "$tmp/conv-$v.npy" &&
            cmp_npy "$v HF folder converted to GGUF == the GGUF file" "$tmp/$v-gguf_17.npy" "$tmp/conv-$v.npy" 0 ||
            bad "converted $v run"
    else
        bad "inferno quantize $v folder: $(tail -2 "$tmp/q.txt")"
    fi
done

# the multi-token-prediction block llama.cpp's converter appends is loaded
# past, not run: the same logits bit for bit
$PY tests/oracle/gguf_edit.py models/tiny-qwen35-f32.gguf "$tmp/mtp.gguf" --mtp 1 &&
    run_inf "$tmp/mtp.gguf" "$(ids 70)" "$tmp/mtp.npy" &&
    cmp_npy "an MTP block (nextn_predict_layers 1) is not run" "$tmp/qwen35-gguf_70.npy" "$tmp/mtp.npy" 0 ||
    bad "MTP file"

# Bad files are refused by name, not run: a config.json field of the hybrid
# that is wrong, and a GGUF cut short
bad_cfg() { # label, expected text, python expression editing the text_config dict t
    local d="$tmp/badcfg"
    rm -rf "$d" && mkdir -p "$d"
    for f in models/tiny-qwen35-f32-hf/*; do ln -s "$PWD/$f" "$d/"; done
    rm "$d/config.json"
    $PY -c "
import json, sys
c = json.load(open('models/tiny-qwen35-f32-hf/config.json')); t = c['text_config']
$3
json.dump(c, open(sys.argv[1], 'w'))" "$d/config.json"
    local msg
    msg=$($INF run -m "$d" --token-ids 1,2 -n 1 2>&1)
    local rc=$?
    [ $rc -ne 0 ] && [ $rc -lt 128 ] && [[ "$msg" == *"$2"* ]] && ok "refused: $1" ||
        bad "$1: rc $rc, message: $(echo "$msg" | tail -1)"
}
bad_cfg "layer_types with an unknown kind" 'layer_types[1] is "mamba"' "t['layer_types'][1] = 'mamba'"
bad_cfg "layer_types shorter than the layers" "layer_types has 3 entries for 4 layers" "t['layer_types'].pop()"
bad_cfg "partial_rotary_factor 3" "partial_rotary_factor 3" "t['rope_parameters']['partial_rotary_factor'] = 3"
bad_cfg "v heads not a multiple of k heads" "DeltaNet heads 3 (v) over 2 (k)" "t['linear_num_value_heads'] = 3"
bad_cfg "a huge head count" "linear_num_value_heads" "t['linear_num_value_heads'] = 2**40"
bad_cfg "layer_types not matching the tensors" "layers.3.linear_attn.in_proj_qkv.weight is missing" "t['layer_types'] = ['linear_attention'] * 4"
head -c 100000000 models/tiny-qwen35-f32.gguf >"$tmp/cut.gguf"
msg=$($INF run -m "$tmp/cut.gguf" --token-ids 1,2 -n 1 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && ok "refused: a GGUF cut short ($(echo "$msg" | tail -1 | cut -c1-100))" ||
    bad "a GGUF cut short: rc $rc"

# 4. The server: a chat's second turn resumes from the state checkpoints of
#    the first (cached_tokens > 0) and answers as a fresh server does.
port=$((18500 + RANDOM % 400))
serve() { $INF serve -m models/tiny-qwen35-f32.gguf --backend scalar --port $port -np 2 -c 1024 >"$tmp/serve.log" 2>&1 & spid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
chat() { curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d "$1"; }
hist=$($PY -c "print(' '.join(['the river runs past old stone walls'] * 20))")
turn1="{\"messages\":[{\"role\":\"user\",\"content\":\"$hist\"}],\"max_tokens\":4,\"temperature\":0}"
if serve; then
    chat "$turn1" >"$tmp/t1.json"
    reply=$($PY -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['choices'][0]['message']['content']))" "$tmp/t1.json")
    turn2="{\"messages\":[{\"role\":\"user\",\"content\":\"$hist\"},{\"role\":\"assistant\",\"content\":$reply},{\"role\":\"user\",\"content\":\"And then?\"}],\"max_tokens\":8,\"temperature\":0}"
    chat "$turn2" >"$tmp/warm.json"
    states=$(curl -s "http://127.0.0.1:$port/metrics" | awk '$1 == "inferno:prefix_cache_states" {print $2}')
    [ "${states:-0}" -ge 1 ] 2>/dev/null && ok "/metrics: $states state checkpoints held" ||
        bad "/metrics inferno:prefix_cache_states is '${states}'"
    kill $spid; wait $spid 2>/dev/null
    serve && chat "$turn2" >"$tmp/cold.json"
    kill $spid; wait $spid 2>/dev/null
    line=$($PY -c "
import json, sys
w, c = (json.load(open(f)) for f in sys.argv[1:3])
hit = w['usage']['prompt_tokens_details']['cached_tokens']
same = w['choices'][0]['message']['content'] == c['choices'][0]['message']['content']
print(f'cached {hit} of {w[\"usage\"][\"prompt_tokens\"]} prompt tokens, reply equal to a cold server: {same}')
sys.exit(0 if hit > 0 and same and c['usage']['prompt_tokens_details']['cached_tokens'] == 0 else 1)" "$tmp/warm.json" "$tmp/cold.json") &&
        ok "server second turn: $line" || bad "server second turn: $line"
else
    bad "inferno serve did not start: $(tail -2 "$tmp/serve.log")"
fi
finish
