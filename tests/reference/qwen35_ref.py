#!/usr/bin/python3
"""A NumPy Qwen3.5 / Qwen3.6 (hybrid Gated DeltaNet + gated attention), written
from the Hugging Face definition (transformers' modeling_qwen3_5:
Qwen3_5RMSNorm (zero-centred: x/rms * (1 + w)), Qwen3_5RMSNormGated (plain
weight, times silu(z)), Qwen3_5Attention (q_proj -> per head [q | gate],
q_norm/k_norm, partial NeoX RoPE, output * sigmoid(gate)), Qwen3_5GatedDeltaNet
(in_proj_qkv -> causal depthwise conv1d + SiLU -> l2norm(q, k), q / sqrt(dk),
K heads repeat_interleave'd to the V heads, beta = sigmoid(b),
g = -exp(A_log) * softplus(a + dt_bias), the gated delta rule, gated norm,
out_proj), Qwen3_5MLP; and modeling_qwen3_5_moe's Qwen3_5MoeSparseMoeBlock:
router softmax, top-k, always renormalized, the experts, plus the shared expert
times sigmoid(shared_expert_gate(x))), used as the independent oracle for
inferno's logits.

It reads a Hugging Face folder (config.json with the text fields in
"text_config" or at the top level, tensors model.language_model.* or model.*;
model.visual.* and mtp.* ignored) or a GGUF file in llama.cpp's layout
(architecture qwen35 / qwen35moe), whose converter changes values: the
zero-centred norms hold 1 + w, ssm_a = -exp(A_log), and the V heads of the
DeltaNet tensors are reordered from HF's grouped order to a tiled one (HF V
head k*r + j sits at GGUF position j*Nk + k, r = Nv/Nk). Both are read into
one canonical form (HF head order; norms as their multiplier 1 + w; A as
-exp(A_log)), so both layouts give the same model. The safetensors reader and
the GGUF reader / dequantizers are qwen3_ref's. It computes in float64.

The DeltaNet runs as the token-by-token recurrence (the definition) or, with
--chunk N, as a chunked form derived independently (the UT / WY solve per
chunk); the self-test checks that both agree, and that a whole-sequence pass
equals a one-token-at-a-time pass with the conv / recurrent / KV state kept.

Usage:
  qwen35_ref.py MODEL --tokens 1,2,3 [--gen-from inferno.npy] --out ref.npy [--tokens ...]
      Writes logits [steps, vocab] (float32): the last prompt row first, then
      one row per generated token. The generated tokens are the argmax of
      each row of --gen-from (inferno's greedy --dump-logits), so both sides
      see the same sequence even where two logits nearly tie.
  qwen35_ref.py --compare A.npy B.npy [--tol X]
      Prints the max abs difference (per step and overall); exit 1 above tol.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_ref  # noqa: E402  (safetensors reader, GGUF reader + dequantizers, compare)

F64 = np.float64


# ---- the canonical weights: name -> a thunk giving the float32 array in the
# canonical layout, and a transform applied in float64 (HF's 1 + w etc.) ----

class Weights:
    def __init__(self):
        self.src = {}  # name -> (thunk -> float32 ndarray, f64 transform or None)

    def put(self, name, thunk, post=None):
        self.src[name] = (thunk, post)

    def __contains__(self, name):
        return name in self.src

    def raw(self, name):
        return self.src[name][0]()

    def __getitem__(self, name):
        thunk, post = self.src[name]
        a = thunk().astype(F64)
        return post(a) if post else a


def one_plus(w):  # Qwen3_5RMSNorm's multiplier
    return 1.0 + w


def neg_exp(a_log):  # -exp(A_log), as the GGUF holds it
    return -np.exp(a_log)


# ---- V head orders: HF groups the V heads by K head (V head h reads K head
# h // r); llama.cpp's GGUF tiles them (V head h reads K head h % Nk). ----

def untile(a, axis, nk, r, blk):
    """GGUF tiled order -> HF grouped order along axis (Nv blocks of blk)."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    a = a.reshape(r, nk, blk, *rest).swapaxes(0, 1).reshape(nk * r * blk, *rest)
    return np.ascontiguousarray(np.moveaxis(a, 0, axis))


# ---- Hugging Face folder ----

NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight",
         "self_attn.q_norm.weight", "self_attn.k_norm.weight")


def hf_config(cfg):
    """The canonical config dict from a config.json (text_config over the top level)."""
    top = dict(cfg)
    text = top.pop("text_config", None) or {}
    t = {**top, **text}
    n = t["num_hidden_layers"]
    layer_types = t.get("layer_types")
    if not layer_types:
        interval = t.get("full_attention_interval", 4)
        layer_types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                       for i in range(n)]
    bad = set(layer_types[:n]) - {"linear_attention", "full_attention"}
    if bad:
        raise SystemExit(f"layer_types {sorted(bad)} not handled here")
    rp = dict(t.get("rope_parameters") or t.get("rope_scaling") or {})
    theta = rp.get("rope_theta", t.get("rope_theta", 10000.0))
    partial = rp.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25))
    rope_type = rp.get("rope_type") or rp.get("type") or "default"
    if rope_type not in ("default", "mrope"):
        raise SystemExit(f"rope_type {rope_type!r} is not handled here")
    hd = t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"]
    tie = [c["tie_word_embeddings"] for c in (text, top) if "tie_word_embeddings" in c]
    if len(set(tie)) > 1:
        print(f"note: tie_word_embeddings differs between text_config and the top level "
              f"({tie}); tying when either says so", file=sys.stderr)
    C = dict(
        vocab=t.get("vocab_size"), E=t["hidden_size"], F=t.get("intermediate_size"),
        n_layer=n, n_head=t["num_attention_heads"], n_kv=t["num_key_value_heads"], hd=hd,
        eps=t.get("rms_norm_eps", 1e-6), theta=float(theta), n_rot=int(hd * partial),
        layer_types=list(layer_types)[:n], K=t.get("linear_conv_kernel_dim", 4),
        dk=t.get("linear_key_head_dim", 128), dv=t.get("linear_value_head_dim", 128),
        Nk=t.get("linear_num_key_heads", 16), Nv=t.get("linear_num_value_heads", 32),
        tie=any(tie), v_order="grouped",
        n_expert=t.get("num_experts", 0) or 0, top_k=t.get("num_experts_per_tok", 0),
    )
    return C


def load_hf(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    C = hf_config(cfg)
    arrays = {}
    for fn in sorted(os.listdir(folder)):
        if not fn.endswith(".safetensors"):
            continue
        for name, a in qwen3_ref.load_safetensors(os.path.join(folder, fn)).items():
            if name.startswith(("model.visual.", "visual.", "mtp.", "model.mtp.")):
                continue
            if name.startswith("model.language_model."):
                name = "model." + name[len("model.language_model."):]
            elif name.startswith("language_model.model."):
                name = "model." + name[len("language_model.model."):]
            elif name.startswith("language_model.lm_head."):
                name = name[len("language_model."):]
            arrays[name] = a
    if arrays and not any(k.startswith("model.") or k == "lm_head.weight" for k in arrays):
        arrays = {"model." + k: v for k, v in arrays.items()}  # a bare text-model save
    qwen3_ref.stack_experts({"num_hidden_layers": C["n_layer"], "num_experts": C["n_expert"]},
                            arrays)
    W = Weights()
    for name, a in arrays.items():
        post = None
        if name == "model.norm.weight" or name.endswith(NORMS):
            post = one_plus
        if name.endswith("linear_attn.A_log"):
            W.put(name[:-len("A_log")] + "A", (lambda a=a: a), neg_exp)
            continue
        if name.endswith("linear_attn.conv1d.weight"):  # [C, 1, K] -> [C, K]
            a = a.reshape(a.shape[0], -1)
        W.put(name, (lambda a=a: a), post)
    if C["vocab"] is None:
        C["vocab"] = W.raw("model.embed_tokens.weight").shape[0]
    if "lm_head.weight" not in W:
        C["tie"] = True
    return C, W


# ---- GGUF (llama.cpp's qwen35 / qwen35moe layout) ----

GGUF_LAYER = {  # GGUF name -> (canonical name, kind of V-head reorder or None)
    "attn_norm.weight": ("input_layernorm.weight", None),
    "post_attention_norm.weight": ("post_attention_layernorm.weight", None),
    "ffn_norm.weight": ("post_attention_layernorm.weight", None),
    "ffn_gate.weight": ("mlp.gate_proj.weight", None),
    "ffn_up.weight": ("mlp.up_proj.weight", None),
    "ffn_down.weight": ("mlp.down_proj.weight", None),
    "attn_q.weight": ("self_attn.q_proj.weight", None),
    "attn_k.weight": ("self_attn.k_proj.weight", None),
    "attn_v.weight": ("self_attn.v_proj.weight", None),
    "attn_output.weight": ("self_attn.o_proj.weight", None),
    "attn_q_norm.weight": ("self_attn.q_norm.weight", None),
    "attn_k_norm.weight": ("self_attn.k_norm.weight", None),
    "attn_qkv.weight": ("linear_attn.in_proj_qkv.weight", "qkv_rows"),
    "attn_gate.weight": ("linear_attn.in_proj_z.weight", "v_rows"),
    "ssm_conv1d.weight": ("linear_attn.conv1d.weight", "qkv_rows"),
    "ssm_dt.bias": ("linear_attn.dt_bias", "heads"),
    "ssm_dt": ("linear_attn.dt_bias", "heads"),
    "ssm_a": ("linear_attn.A", "heads"),
    "ssm_beta.weight": ("linear_attn.in_proj_b.weight", "heads"),
    "ssm_alpha.weight": ("linear_attn.in_proj_a.weight", "heads"),
    "ssm_norm.weight": ("linear_attn.norm.weight", None),
    "ssm_out.weight": ("linear_attn.out_proj.weight", "v_cols"),
    "ffn_gate_inp.weight": ("mlp.gate.weight", None),
    "ffn_gate_exps.weight": ("mlp.experts.gate", None),
    "ffn_up_exps.weight": ("mlp.experts.up", None),
    "ffn_down_exps.weight": ("mlp.experts.down", None),
    "ffn_gate_shexp.weight": ("mlp.shared_expert.gate_proj.weight", None),
    "ffn_up_shexp.weight": ("mlp.shared_expert.up_proj.weight", None),
    "ffn_down_shexp.weight": ("mlp.shared_expert.down_proj.weight", None),
    "ffn_gate_inp_shexp.weight": ("mlp.shared_expert_gate.weight", None),
}


def load_gguf(path, undo_v_order=True):
    """(config, Weights) from a GGUF file. With undo_v_order the tiled V heads
    are put back in HF's grouped order; without, they stay tiled and the
    forward pass reads K head h % Nk for V head h (llama.cpp's way)."""
    raw, meta, infos, base = qwen3_ref.read_gguf(path)
    a = meta["general.architecture"]
    if a not in ("qwen35", "qwen35moe"):
        print(f"note: architecture {a!r}, reading it as qwen35", file=sys.stderr)

    def key(k, default=KeyError):
        v = meta.get(f"{a}.{k}")
        if v is None:
            if default is KeyError:
                raise SystemExit(f"{path}: {a}.{k} missing (or a per-layer array, not handled)")
            return default
        return v

    nextn = key("nextn_predict_layers", 0)
    n_layer = key("block_count") - nextn
    hd = key("attention.key_length", None) or key("embedding_length") // key("attention.head_count")
    Nv, inner = key("ssm.time_step_rank"), key("ssm.inner_size")
    interval = key("full_attention_interval", 4)
    C = dict(
        E=key("embedding_length"), F=key("feed_forward_length", None), n_layer=n_layer,
        n_head=key("attention.head_count"), n_kv=key("attention.head_count_kv"), hd=hd,
        eps=key("attention.layer_norm_rms_epsilon"), theta=float(key("rope.freq_base", 10000.0)),
        n_rot=key("rope.dimension_count", hd),
        layer_types=["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                     for i in range(n_layer)],
        K=key("ssm.conv_kernel"), dk=key("ssm.state_size"), dv=inner // Nv,
        Nk=key("ssm.group_count"), Nv=Nv, v_order="grouped" if undo_v_order else "tiled",
        n_expert=key("expert_count", 0), top_k=key("expert_used_count", 0),
    )
    tensors = {name: (ne, t, off) for name, ne, t, off in infos}

    def values(name):
        ne, t, off = tensors[name]
        if t not in qwen3_ref.GGUF_TYPES:
            raise SystemExit(f"{path}: tensor {name}: ggml type {t} has no dequantizer")
        return qwen3_ref.tensor_values(raw, base, ne, t, off).reshape(list(reversed(ne)))

    nk, r, dk, dv = C["Nk"], C["Nv"] // C["Nk"], C["dk"], C["dv"]

    def fix(arr, kind):
        if not undo_v_order or kind is None or r == 1:
            return arr
        if kind == "qkv_rows":  # the V rows (channels) after the q and k ones
            qk = 2 * nk * dk
            return np.concatenate([arr[:qk], untile(arr[qk:], 0, nk, r, dv)], axis=0)
        if kind == "v_rows":
            return untile(arr, 0, nk, r, dv)
        if kind == "heads":
            return untile(arr, 0, nk, r, 1)
        if kind == "v_cols":
            return untile(arr, 1, nk, r, dv)
        raise AssertionError(kind)

    W = Weights()
    top = {"token_embd.weight": "model.embed_tokens.weight",
           "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
    for name in tensors:
        if name in top:
            W.put(top[name], (lambda n=name: values(n)))
            continue
        parts = name.split(".", 2)
        if parts[0] != "blk" or len(parts) < 3 or int(parts[1]) >= n_layer:
            continue  # the MTP (nextn) blocks after the trunk are not run
        p = f"model.layers.{int(parts[1])}."
        if parts[2] == "ffn_gate_up_exps.weight":  # fused [E, 2F, H], gate rows first
            def half(n=name, i=0):
                gu = values(n)
                f = gu.shape[1] // 2
                return gu[:, :f] if i == 0 else gu[:, f:]
            W.put(p + "mlp.experts.gate", (lambda n=name: half(n, 0)))
            W.put(p + "mlp.experts.up", (lambda n=name: half(n, 1)))
            continue
        if parts[2] not in GGUF_LAYER:
            print(f"note: {name} not used", file=sys.stderr)
            continue
        canon, kind = GGUF_LAYER[parts[2]]
        if canon == "mlp.shared_expert_gate.weight":
            W.put(p + canon, (lambda n=name: values(n).reshape(1, -1)))
            continue
        W.put(p + canon, (lambda n=name, k=kind: fix(values(n), k)))
    C["vocab"] = tensors["token_embd.weight"][0][1]
    C["tie"] = "lm_head.weight" not in W
    return C, W


def load(model, **kw):
    return load_hf(model) if os.path.isdir(model) else load_gguf(model, **kw)


# ---- the pieces ----

def rms_norm(x, mult, eps):  # mult: the norm's multiplier (1 + w, or w for the gated norm)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * mult


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):  # torch.nn.functional.softplus (beta 1, threshold 20)
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def l2norm(x, eps=1e-6):  # HF l2norm: x * rsqrt(sum x^2 + eps)
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rope(x, pos, C):
    """Partial NeoX RoPE over the first n_rot dims (for text tokens the three
    mrope sections all carry the same position, so this is the plain RoPE)."""
    n = C["n_rot"]
    inv_freq = 1.0 / (C["theta"] ** (np.arange(0, n, 2, dtype=F64) / n))
    freqs = np.outer(pos.astype(F64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)[:, None, :]  # [T, 1, n_rot]
    xr, xp = x[..., :n], x[..., n:]
    return np.concatenate([xr * np.cos(emb) + rotate_half(xr) * np.sin(emb), xp], axis=-1)


def delta_rule_recurrent(q, k, v, g, beta, S):
    """The gated delta rule, token by token (torch_recurrent_gated_delta_rule).
    q, k [T, Nv, dk] (normalized, q scaled), v [T, Nv, dv], g, beta [T, Nv],
    S [Nv, dk, dv] (updated in place). Returns out [T, Nv, dv]."""
    out = np.empty_like(v)
    for t in range(q.shape[0]):
        S *= np.exp(g[t])[:, None, None]
        mem = np.einsum("hkv,hk->hv", S, k[t])  # S^T k
        u = beta[t][:, None] * (v[t] - mem)
        S += k[t][:, :, None] * u[:, None, :]
        out[t] = np.einsum("hkv,hk->hv", S, q[t])  # S^T q
    return out


def delta_rule_chunked(q, k, v, g, beta, S, chunk=64):
    """The same recurrence, a chunk at a time. Inside a chunk with start state
    S0 and cumulative log-decay c_i = g_1 + ... + g_i, unrolling gives
      u_i = beta_i (v_i - e^{c_i} S0^T k_i - sum_{j<i} e^{c_i - c_j} (k_i.k_j) u_j)
    i.e. (I + L) U = diag(beta) (V - diag(e^c) K S0), L strictly lower with
    L_ij = beta_i e^{c_i - c_j} k_i.k_j, and then
      o_i = e^{c_i} S0^T q_i + sum_{j<=i} e^{c_i - c_j} (q_i.k_j) u_j,
      S_end = e^{c_C} S0 + sum_j e^{c_C - c_j} k_j u_j^T."""
    T = q.shape[0]
    out = np.empty_like(v)
    for s in range(0, T, chunk):
        qc, kc, vc = (np.swapaxes(a[s:s + chunk], 0, 1) for a in (q, k, v))  # [H, n, d]
        gc, bc = g[s:s + chunk].T, beta[s:s + chunk].T  # [H, n]
        n = gc.shape[1]
        c = np.cumsum(gc, axis=1)
        diff = c[:, :, None] - c[:, None, :]  # c_i - c_j
        lower = np.tril(np.ones((n, n), bool), -1)
        causal = np.tril(np.ones((n, n), bool))
        dec = np.exp(np.where(causal, diff, -np.inf))  # e^{c_i - c_j} for j <= i, else 0
        kk = np.einsum("hid,hjd->hij", kc, kc)
        L = np.where(lower, bc[:, :, None] * dec * kk, 0.0)
        rhs = bc[:, :, None] * (vc - np.exp(c)[:, :, None] * np.einsum("hid,hdv->hiv", kc, S))
        U = np.linalg.solve(np.eye(n) + L, rhs)
        qk = np.einsum("hid,hjd->hij", qc, kc) * dec
        o = np.exp(c)[:, :, None] * np.einsum("hid,hdv->hiv", qc, S) + qk @ U
        out[s:s + n] = np.swapaxes(o, 0, 1)
        tail = np.exp(c[:, -1:] - c)  # e^{c_C - c_j}
        S *= np.exp(c[:, -1])[:, None, None]
        S += np.einsum("hjd,hjv->hdv", kc * tail[:, :, None], U)
    return out


class State:
    """What a decode keeps between calls: per DeltaNet layer the conv history
    (the last K-1 rows of in_proj_qkv's output) and the recurrent state, per
    attention layer the K and V seen so far (after norm and RoPE)."""

    def __init__(self, C):
        self.pos = 0
        self.conv, self.S, self.kv = {}, {}, {}
        for i, t in enumerate(C["layer_types"]):
            if t == "linear_attention":
                ch = 2 * C["Nk"] * C["dk"] + C["Nv"] * C["dv"]
                self.conv[i] = np.zeros((C["K"] - 1, ch))
                self.S[i] = np.zeros((C["Nv"], C["dk"], C["dv"]))
            else:
                self.kv[i] = (np.zeros((0, C["n_kv"], C["hd"])), np.zeros((0, C["n_kv"], C["hd"])))


def attention(C, W, p, h, pos, st, i):
    T, nh, nkv, hd = h.shape[0], C["n_head"], C["n_kv"], C["hd"]
    qg = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, nh, 2 * hd)
    q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
    k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd)
    v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd)
    q = rope(rms_norm(q, W[p + "self_attn.q_norm.weight"], C["eps"]), pos, C)
    k = rope(rms_norm(k, W[p + "self_attn.k_norm.weight"], C["eps"]), pos, C)
    k0, v0 = st.kv[i]
    k, v = np.concatenate([k0, k]), np.concatenate([v0, v])
    st.kv[i] = (k, v)
    group = nh // nkv
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # head h reads kv h // group
    P = k.shape[0]
    scores = np.einsum("qhd,khd->hqk", q, k) * hd ** -0.5
    allowed = np.arange(P)[None, :] <= pos[:, None]  # causal
    scores = np.where(allowed[None], scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = scores / scores.sum(axis=-1, keepdims=True)
    att = np.einsum("hqk,khd->qhd", probs, v).reshape(T, nh * hd) * sigmoid(gate)
    return att @ W[p + "self_attn.o_proj.weight"].T


def causal_conv(hist, x, w):
    """Depthwise causal conv1d (PyTorch's cross-correlation, padding K-1, the
    first T outputs): out[t, c] = sum_j w[c, j] x[t - (K-1) + j, c], where the
    rows before x are hist (K-1 rows; zeros at the start). Returns (out, the
    new history)."""
    T, K = x.shape[0], w.shape[1]
    xs = np.concatenate([hist, x])
    out = sum(w[:, j] * xs[j:j + T] for j in range(K))
    return out, xs[xs.shape[0] - (K - 1):]


def gated_deltanet(C, W, p, h, st, i, chunk=0):
    T, Nk, Nv, dk, dv = h.shape[0], C["Nk"], C["Nv"], C["dk"], C["dv"]
    mixed = h @ W[p + "linear_attn.in_proj_qkv.weight"].T  # [T, ch]
    conv, st.conv[i] = causal_conv(st.conv[i], mixed, W[p + "linear_attn.conv1d.weight"])
    mixed = silu(conv)
    q = mixed[:, :Nk * dk].reshape(T, Nk, dk)
    k = mixed[:, Nk * dk:2 * Nk * dk].reshape(T, Nk, dk)
    v = mixed[:, 2 * Nk * dk:].reshape(T, Nv, dv)
    q = l2norm(q) * dk ** -0.5
    k = l2norm(k)
    heads = np.arange(Nv)
    kmap = heads // (Nv // Nk) if C["v_order"] == "grouped" else heads % Nk
    q, k = q[:, kmap], k[:, kmap]
    beta = sigmoid(h @ W[p + "linear_attn.in_proj_b.weight"].T)  # [T, Nv]
    a = h @ W[p + "linear_attn.in_proj_a.weight"].T
    g = W[p + "linear_attn.A"] * softplus(a + W[p + "linear_attn.dt_bias"])
    if chunk:
        o = delta_rule_chunked(q, k, v, g, beta, st.S[i], chunk)
    else:
        o = delta_rule_recurrent(q, k, v, g, beta, st.S[i])
    z = (h @ W[p + "linear_attn.in_proj_z.weight"].T).reshape(T, Nv, dv)
    o = rms_norm(o, W[p + "linear_attn.norm.weight"], C["eps"]) * silu(z)
    return o.reshape(T, Nv * dv) @ W[p + "linear_attn.out_proj.weight"].T


def mlp(W, pre, h):
    g = h @ W[pre + "gate_proj.weight"].T
    u = h @ W[pre + "up_proj.weight"].T
    return (silu(g) * u) @ W[pre + "down_proj.weight"].T


def sparse_moe(C, W, p, h):
    """Qwen3_5MoeSparseMoeBlock: softmax router, top-k, renormalized; the
    chosen experts' MLPs weighted; plus sigmoid(shared_expert_gate) * shared MLP."""
    logits = h @ W[p + "mlp.gate.weight"].T
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    top = np.argsort(-probs, axis=-1, kind="stable")[:, :C["top_k"]]
    wts = np.take_along_axis(probs, top, axis=-1)
    wts = wts / wts.sum(axis=-1, keepdims=True)
    eg, eu, ed = (W[p + "mlp.experts." + n] for n in ("gate", "up", "down"))
    out = np.zeros_like(h)
    for e in np.unique(top):
        rows, slot = np.nonzero(top == e)
        x = h[rows]
        y = (silu(x @ eg[e].T) * (x @ eu[e].T)) @ ed[e].T
        out[rows] += wts[rows, slot][:, None] * y
    if p + "mlp.shared_expert.gate_proj.weight" in W:
        gate = sigmoid(h @ W[p + "mlp.shared_expert_gate.weight"].T)  # [T, 1]
        out += gate * mlp(W, p + "mlp.shared_expert.", h)
    return out


def forward(C, W, tokens, state=None, chunk=0):
    """Logits [T, vocab] (float64) for the new tokens, continuing state (a
    fresh one when None; it is updated)."""
    st = state if state is not None else State(C)
    T = len(tokens)
    pos = np.arange(st.pos, st.pos + T)
    x = W.raw("model.embed_tokens.weight")[np.array(tokens)].astype(F64)
    eps = C["eps"]
    for i in range(C["n_layer"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        if C["layer_types"][i] == "linear_attention":
            x = x + gated_deltanet(C, W, p, h, st, i, chunk)
        else:
            x = x + attention(C, W, p, h, pos, st, i)
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        if p + "mlp.gate.weight" in W:
            x = x + sparse_moe(C, W, p, h)
        else:
            x = x + mlp(W, p + "mlp.", h)
    st.pos += T
    x = rms_norm(x, W["model.norm.weight"], eps)
    Wh = W.raw("model.embed_tokens.weight" if C["tie"] else "lm_head.weight")
    logits = np.empty((T, Wh.shape[0]))
    for s in range(0, Wh.shape[0], 16384):  # the head in chunks: a float64 copy is big
        logits[:, s:s + 16384] = x @ Wh[s:s + 16384].astype(F64).T
    return logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", help="Hugging Face folder or GGUF file")
    ap.add_argument("--tokens", action="append", help="prompt token ids, comma separated")
    ap.add_argument("--gen-from", action="append",
                    help="inferno's greedy logits .npy: generated tokens = argmax")
    ap.add_argument("--out", action="append", help="where to write the logits .npy")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--chunk", type=int, default=0,
                    help="run the DeltaNet in chunks of N (0: token by token, the default)")
    args = ap.parse_args()
    if args.compare:
        return qwen3_ref.compare(args.compare[0], args.compare[1], args.tol)
    if not args.model or not args.tokens or not args.out or len(args.tokens) != len(args.out):
        ap.error("MODEL, and --tokens/--out (one pair per sequence) are needed")
    if args.gen_from and len(args.gen_from) != len(args.out):
        ap.error("give one --gen-from per --out")
    C, W = load(args.model)
    for i, toks in enumerate(args.tokens):  # several sequences share one load
        prompt = [int(t) for t in toks.split(",") if t]
        gen = []
        if args.gen_from:
            # the last row's argmax is the token sampled after the dump ended
            gen = [int(t) for t in np.load(args.gen_from[i]).argmax(axis=1)[:-1]]
        logits = forward(C, W, prompt + gen, chunk=args.chunk)
        np.save(args.out[i], logits[len(prompt) - 1:].astype(np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
