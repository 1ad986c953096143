#!/usr/bin/env bash
# inferno quantize, from the tiny model's Hugging Face folder (F32) and from
# its BF16 GGUF file:
# 1. per-tensor types: llama.cpp's rules for a 4-layer model with 2 query
#    heads per KV head, spelled out here as tables (from llama-quant.cpp's
#    llama_tensor_get_type, not from inferno's code);
# 2. from the F32 folder, the tensor bytes equal the test-model maker's file
#    of the same mix (the same f32 weights through the same quantizers), and
#    so does the metadata but general.name: the tokenizer as llama.cpp's
#    converter writes it (added tokens that look special, <|fim_prefix|>,
#    CONTROL; bos_token_id from config.json), every key in the same order;
# 3. @huggingface/gguf reads every file and agrees with `inferno inspect`
#    (check_inspect.mjs); the metadata of a GGUF input is copied with
#    general.file_type rewritten;
# 4. inferno runs the quantized files and gives the maker's files' tokens;
# 5. bad inputs fail with a message: a quantized input, an unknown type;
# 6. qwen3moe folders in both expert layouts: the experts stacked into 3-D
#    tensors equal the maker's GGUF files; llama.cpp's per-tensor types for a
#    model of exactly 8 experts (its Mixtral rule: attn_k, attn_v Q8_0,
#    attn_output Q5_K), spelled out from llama-quant.cpp as for the dense
#    model; norm_topk_prob false is refused.
set -uo pipefail
cd "$(dirname "$0")/../.."
INF=build/inferno
PY=/usr/bin/python3
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
finish() { echo "$pass passed, $fail failed"; exit $((fail != 0)); }
if [ ! -d models/tiny-f32-hf ] || [ ! -f models/tiny-bf16.gguf ]; then
    echo "check_quantize: models/ not generated (scripts/make-models.sh)"; bad models; finish
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# types NAME -> "token_embd blk.L.{attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down} for L=0..3"
# (norms are F32 in every mix; the head is tied, so token_embd takes the output's type)
expect() {
    case $1 in
    Q4_K_M) echo "Q6_K | Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K | Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K Q4_K |" \
                 "Q4_K Q4_K Q6_K Q4_K Q4_K Q4_K Q6_K | Q4_K Q4_K Q6_K Q4_K Q4_K Q4_K Q6_K" ;;
    Q5_K_M) echo "Q6_K | Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K | Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K Q5_K |" \
                 "Q5_K Q5_K Q6_K Q5_K Q5_K Q5_K Q6_K | Q5_K Q5_K Q6_K Q5_K Q5_K Q5_K Q6_K" ;;
    Q3_K_M) echo "Q6_K | Q3_K Q3_K Q5_K Q4_K Q3_K Q3_K Q4_K | Q3_K Q3_K Q5_K Q4_K Q3_K Q3_K Q4_K |" \
                 "Q3_K Q3_K Q4_K Q4_K Q3_K Q3_K Q4_K | Q3_K Q3_K Q4_K Q4_K Q3_K Q3_K Q4_K" ;;
    Q4_K_S) echo "Q6_K | Q4_K Q4_K Q5_K Q4_K Q4_K Q4_K Q4_K | Q4_K Q4_K Q5_K Q4_K Q4_K Q4_K Q4_K |" \
                 "Q4_K Q4_K Q5_K Q4_K Q4_K Q4_K Q4_K | Q4_K Q4_K Q5_K Q4_K Q4_K Q4_K Q4_K" ;;
    Q2_K)   echo "Q6_K | Q2_K Q2_K Q3_K Q3_K Q2_K Q2_K Q3_K | Q2_K Q2_K Q3_K Q3_K Q2_K Q2_K Q3_K |" \
                 "Q2_K Q2_K Q3_K Q3_K Q2_K Q2_K Q3_K | Q2_K Q2_K Q3_K Q3_K Q2_K Q2_K Q3_K" ;;
    IQ4_XS) echo "Q6_K | IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS | IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS |" \
                 "IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS | IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS IQ4_XS" ;;
    Q4_1)   echo "Q6_K | Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 | Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 |" \
                 "Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 | Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1 Q4_1" ;;
    Q6_K)   echo "Q6_K | Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K | Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K |" \
                 "Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K | Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K Q6_K" ;;
    Q8_0)   echo "Q8_0 | Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 | Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 |" \
                 "Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 | Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0 Q8_0" ;;
    esac
}
# tiny-moe (8 experts): token_embd, then per layer attn_q attn_k attn_v attn_output
# ffn_gate_exps ffn_up_exps ffn_down_exps
moe_expect() {
    case $1 in
    Q4_K_M) echo "Q6_K | Q4_K Q8_0 Q8_0 Q5_K Q4_K Q4_K Q4_K | Q4_K Q8_0 Q8_0 Q5_K Q4_K Q4_K Q4_K |" \
                 "Q4_K Q8_0 Q8_0 Q5_K Q4_K Q4_K Q6_K | Q4_K Q8_0 Q8_0 Q5_K Q4_K Q4_K Q6_K" ;;
    Q2_K)   echo "Q6_K | Q2_K Q8_0 Q8_0 Q5_K Q2_K Q2_K Q3_K | Q2_K Q8_0 Q8_0 Q5_K Q2_K Q2_K Q3_K |" \
                 "Q2_K Q8_0 Q8_0 Q5_K Q2_K Q2_K Q3_K | Q2_K Q8_0 Q8_0 Q5_K Q2_K Q2_K Q3_K" ;;
    Q3_K_L) echo "Q6_K | Q3_K Q8_0 Q8_0 Q3_K Q3_K Q3_K Q5_K | Q3_K Q8_0 Q8_0 Q3_K Q3_K Q3_K Q5_K |" \
                 "Q3_K Q8_0 Q8_0 Q3_K Q3_K Q3_K Q5_K | Q3_K Q8_0 Q8_0 Q3_K Q3_K Q3_K Q5_K" ;;
    Q5_0)   echo "Q6_K | Q5_0 Q8_0 Q8_0 Q5_0 Q5_0 Q5_0 Q5_0 | Q5_0 Q8_0 Q8_0 Q5_0 Q5_0 Q5_0 Q5_0 |" \
                 "Q5_0 Q8_0 Q8_0 Q5_0 Q5_0 Q5_0 Q5_0 | Q5_0 Q8_0 Q8_0 Q5_0 Q5_0 Q5_0 Q5_0" ;;
    esac
}
# the same list read from a file: token_embd, then per layer its seven matrices
# (MATS, default the dense ones); norms must be F32
actual() {
    $INF inspect "$1" | awk -v mats="${MATS:-attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down}" '
        $1 == "token_embd.weight" { te = $2 }
        $1 ~ /^blk\.[0-9]+\./ {
            split($1, p, "."); l = p[2]; n = p[3]
            if (n ~ /norm/) { if ($2 != "F32") nonf32 = nonf32 " " $1 }
            else t[l, n] = $2
        }
        $1 == "output_norm.weight" && $2 != "F32" { nonf32 = nonf32 " " $1 }
        END {
            s = te
            for (l = 0; l < 4; l++) {
                s = s " |"
                split(mats, m, " ")
                for (i = 1; i <= 7; i++) s = s " " t[l, m[i]]
            }
            print s (nonf32 ? " NON-F32 NORMS:" nonf32 : "")
        }'
}

lc() { echo "$1" | tr 'A-Z' 'a-z'; }
# same_meta A B: the metadata of the two files, key by key in order with types
# and values (arrays in full, from `inferno inspect --json`), but general.name
same_meta() {
    $PY - <(${INF} inspect --json "$1") <(${INF} inspect --json "$2") <<'PYEOF'
import json, sys
a, b = ([m for m in json.load(open(p))["metadata"] if m["key"] != "general.name"] for p in sys.argv[1:3])
diff = [x["key"] for x, y in zip(a, b) if x != y] + [m["key"] for m in (a[len(b):] + b[len(a):])]
print(f"{len(a)} / {len(b)} keys, {len(diff)} differ {diff[:3]}")
sys.exit(1 if diff else 0)
PYEOF
}
# same_tensors A B: the two GGUF files hold the same tensors, byte for byte,
# and the same general.file_type; prints what it compared
same_tensors() {
    $PY - "$1" "$2" <<'PYEOF'
import sys
sys.path.insert(0, "tests/reference")
import numpy as np, qwen3_ref as R
def tensors(p):
    raw, meta, infos, base = R.read_gguf(p)
    out = {}
    for name, ne, t, off in infos:
        block, bb, _ = R.GGUF_TYPES[t]
        out[name] = (t, ne, raw[base + off:base + off + int(np.prod(ne)) // block * bb])
    return meta, out
(ma, a), (mb, b) = tensors(sys.argv[1]), tensors(sys.argv[2])
diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
print(f"{len(a)} tensors, {len(diff)} differ {diff[:3]}; file_type {ma.get('general.file_type')} vs {mb.get('general.file_type')}")
sys.exit(1 if diff or ma.get('general.file_type') != mb.get('general.file_type') else 0)
PYEOF
}

for mix in Q4_K_M Q5_K_M Q3_K_M Q4_K_S Q2_K IQ4_XS Q4_1 Q6_K Q8_0; do
    out=$tmp/hf-$mix.gguf
    if ! $INF quantize models/tiny-f32-hf "$out" $mix 2 >"$tmp/log.txt" 2>&1; then
        cat "$tmp/log.txt"; bad "quantize HF folder to $mix"; continue
    fi
    got=$(actual "$out") want=$(expect $mix)
    [ "$got" = "$want" ] && ok "$mix from the HF folder: llama.cpp's per-tensor types" ||
        bad "$mix types: got [$got], llama.cpp gives [$want]"
    maker=models/tiny-$(lc $mix).gguf
    if [ -f "$maker" ]; then
        line=$(same_tensors "$out" "$maker") && ok "$mix from the HF folder == the maker's $maker: $line" || bad "$mix vs $maker: $line"
        line=$(same_meta "$out" "$maker") && ok "$mix from the HF folder: the maker's metadata: $line" || bad "$mix metadata vs $maker: $line"
    fi
done

# qwen3moe folders (one tensor per expert; transformers v5's fused gate_up_proj):
# the experts stacked into ffn_{gate,up,down}_exps equal the maker's GGUF files
for f in tiny-moe-f32-hf tiny-moe-f32-hf-fused; do
    for mix in Q8_0 Q4_K_M; do
        out=$tmp/$f-$mix.gguf maker=models/tiny-moe-$(lc $mix).gguf
        if ! $INF quantize models/$f "$out" $mix >"$tmp/log.txt" 2>&1; then
            cat "$tmp/log.txt"; bad "quantize $f to $mix"; continue
        fi
        line=$(same_tensors "$out" "$maker") && ok "$mix from $f == the maker's $maker: $line" ||
            bad "$mix from $f vs $maker: $line"
        line=$(same_meta "$out" "$maker") && ok "$mix from $f: the maker's metadata: $line" ||
            bad "$mix metadata from $f vs $maker: $line"
    done
done
for mix in Q4_K_M Q2_K Q3_K_L Q5_0; do
    out=$tmp/moe-types-$mix.gguf
    if ! $INF quantize models/tiny-moe-f32-hf "$out" $mix >"$tmp/log.txt" 2>&1; then
        cat "$tmp/log.txt"; bad "quantize tiny-moe-f32-hf to $mix"; continue
    fi
    got=$(MATS="attn_q attn_k attn_v attn_output ffn_gate_exps ffn_up_exps ffn_down_exps" actual "$out")
    want=$(moe_expect $mix)
    [ "$got" = "$want" ] && ok "$mix from the MoE folder (8 experts): llama.cpp's per-tensor types" ||
        bad "$mix MoE types: got [$got], llama.cpp gives [$want]"
done
cp -r models/tiny-moe-f32-hf "$tmp/no-norm"
$PY -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c['norm_topk_prob']=False; json.dump(c,open(p,'w'))" "$tmp/no-norm/config.json"
$INF quantize "$tmp/no-norm" "$tmp/no-norm.gguf" Q8_0 >"$tmp/err.txt" 2>&1
[ $? -ne 0 ] && grep -q "norm_topk_prob" "$tmp/err.txt" && [ ! -e "$tmp/no-norm.gguf" ] &&
    ok "norm_topk_prob false (GGUF always renormalizes) is refused: $(tail -1 "$tmp/err.txt")" ||
    bad "norm_topk_prob false: $(cat "$tmp/err.txt")"

# from the BF16 GGUF: metadata copied (file type rewritten), @huggingface/gguf agrees, it runs
for mix in Q4_K_M IQ4_XS; do
    out=$tmp/bf16-$mix.gguf
    if ! $INF quantize models/tiny-bf16.gguf "$out" $mix >"$tmp/log.txt" 2>&1; then
        cat "$tmp/log.txt"; bad "quantize BF16 GGUF to $mix"; continue
    fi
    got=$(actual "$out") want=$(expect $mix)
    [ "$got" = "$want" ] && ok "$mix from the BF16 GGUF: llama.cpp's per-tensor types" || bad "$mix (BF16 input) types: got [$got]"
    meta() { $INF inspect "$1" | awk '/^metadata:/ {m = 1; next} /^  name / {m = 0} m && /^  / && $1 != "general.file_type" {print}'; }
    keys_in=$(meta models/tiny-bf16.gguf) keys_out=$(meta "$out")
    ft=$($INF inspect "$out" | awk '$1 == "general.file_type" {print $3}')
    [ "$keys_in" = "$keys_out" ] && [ "$ft" = "$([ $mix = Q4_K_M ] && echo 15 || echo 30)" ] &&
        ok "$mix from the BF16 GGUF: metadata copied, general.file_type $ft" || bad "$mix metadata (file type $ft)"
    line=$(node tests/oracle/check_inspect.mjs $INF "$out" 2>&1 | tail -n 1)
    [[ $line =~ ^[0-9]+\ passed,\ 0\ failed$ ]] && ok "@huggingface/gguf reads the $mix file: $line" || bad "@huggingface/gguf on $mix: $line"
done
for f in "$tmp/hf-Q4_K_M.gguf" "$tmp/hf-IQ4_XS.gguf"; do
    line=$(node tests/oracle/check_inspect.mjs $INF "$f" 2>&1 | tail -n 1)
    [[ $line =~ ^[0-9]+\ passed,\ 0\ failed$ ]] && ok "@huggingface/gguf reads $(basename "$f"): $line" || bad "@huggingface/gguf on $f: $line"
done

# the quantized files run, with the maker's files' tokens
for mix in Q4_K_M Q3_K_M; do
    a=$($INF run -m "$tmp/hf-$mix.gguf" -p "The quick brown fox" -n 12 --temp 0 --ignore-eos 2>/dev/null)
    b=$($INF run -m models/tiny-$(lc $mix).gguf -p "The quick brown fox" -n 12 --temp 0 --ignore-eos 2>/dev/null)
    [ -n "$a" ] && [ "$a" = "$b" ] && ok "$mix quantized by inferno runs: the same tokens as the maker's file" || bad "$mix run: [$a] vs [$b]"
done
a=$($INF run -m "$tmp/bf16-Q4_K_M.gguf" -p "The quick brown fox" -n 12 --temp 0 --ignore-eos 2>"$tmp/err.txt") &&
    [ -n "$a" ] && ok "Q4_K_M from BF16 runs" || { cat "$tmp/err.txt"; bad "Q4_K_M from BF16 run"; }

# bad inputs
$INF quantize models/tiny-q4_0.gguf "$tmp/x.gguf" Q4_K_M >"$tmp/err.txt" 2>&1
[ $? -ne 0 ] && grep -q "already quantized" "$tmp/err.txt" && [ ! -e "$tmp/x.gguf" ] &&
    ok "a quantized input is refused: $(tail -1 "$tmp/err.txt")" || bad "quantized input: $(cat "$tmp/err.txt")"
$INF quantize models/tiny-f32-hf "$tmp/x.gguf" Q9_Z >"$tmp/err.txt" 2>&1
[ $? -eq 2 ] && grep -q "unknown" "$tmp/err.txt" && ok "an unknown type is refused" || bad "unknown type: $(cat "$tmp/err.txt")"
$INF quantize --help | grep -q "15  or  Q4_K_M" && ok "--help lists the types by number and name" || bad "--help"
finish
