#!/usr/bin/python3
"""A NumPy Qwen3, written from the Hugging Face definition (transformers'
modeling_qwen3: Qwen3RMSNorm, Qwen3RotaryEmbedding + apply_rotary_pos_emb,
Qwen3Attention with q_norm/k_norm before RoPE, repeat_kv, Qwen3MLP), used as
the independent oracle for inferno's logits.

It reads a Hugging Face folder itself (config.json + *.safetensors, the
safetensors header parsed with json, tensors with numpy.frombuffer; bf16 by
shifting uint16 into the high half of a float32) and computes in float64, so
its numbers are the "true" values of the stored weights.

Usage:
  qwen3_ref.py MODEL_DIR --tokens 1,2,3 [--gen-from inferno.npy] --out ref.npy
      Writes logits [steps, vocab] (float32): the last prompt row first, then
      one row per generated token. The generated tokens are the argmax of
      each row of --gen-from (inferno's greedy --dump-logits), so both sides
      see the same sequence even where two logits nearly tie.
  qwen3_ref.py --compare A.npy B.npy [--tol X]
      Prints the max abs difference (per step and overall); exit 1 above tol.
"""
import argparse
import json
import os
import sys

import numpy as np


def load_safetensors(path):
    """{name: float32 array} for one .safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = raw[base + b:base + e]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif dt == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit(f"{path}: tensor {name}: dtype {dt} not handled")
        out[name] = a.reshape(info["shape"])
    return out


def load_model(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    weights = {}
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".safetensors"):
            weights.update(load_safetensors(os.path.join(folder, fn)))
    return cfg, weights


def rms_norm(x, w, eps):
    # Qwen3RMSNorm: x * rsqrt(mean(x^2) + eps), then times the weight
    var = np.mean(x * x, axis=-1, keepdims=True)
    return w * (x / np.sqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def forward(cfg, W, tokens):
    """Logits [T, vocab] (float64) for every position of tokens."""
    E = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or E // nh
    eps = cfg["rms_norm_eps"]
    theta = cfg.get("rope_theta", 10000.0)
    T = len(tokens)
    f64 = lambda name: W[name].astype(np.float64)

    x = f64("model.embed_tokens.weight")[np.array(tokens)]  # [T, E]

    # Qwen3RotaryEmbedding: inv_freq over even dims, emb = cat(freqs, freqs)
    inv_freq = 1.0 / (theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)  # [T, hd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)  # [T, hd]
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]

    mask = np.triu(np.full((T, T), -np.inf), k=1)  # causal
    group = nh // nkv
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, f64(p + "input_layernorm.weight"), eps)
        q = (h @ f64(p + "self_attn.q_proj.weight").T).reshape(T, nh, hd)
        k = (h @ f64(p + "self_attn.k_proj.weight").T).reshape(T, nkv, hd)
        v = (h @ f64(p + "self_attn.v_proj.weight").T).reshape(T, nkv, hd)
        q = rms_norm(q, f64(p + "self_attn.q_norm.weight"), eps)
        k = rms_norm(k, f64(p + "self_attn.k_norm.weight"), eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = np.repeat(k, group, axis=1)  # repeat_kv: head h reads kv head h // group
        v = np.repeat(v, group, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) * hd ** -0.5 + mask
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        att = np.einsum("hqk,khd->qhd", probs, v).reshape(T, nh * hd)
        x = x + att @ f64(p + "self_attn.o_proj.weight").T
        h = rms_norm(x, f64(p + "post_attention_layernorm.weight"), eps)
        g = h @ f64(p + "mlp.gate_proj.weight").T
        u = h @ f64(p + "mlp.up_proj.weight").T
        x = x + ((g / (1.0 + np.exp(-g))) * u) @ f64(p + "mlp.down_proj.weight").T

    x = rms_norm(x, f64("model.norm.weight"), eps)
    head = "model.embed_tokens.weight"
    if not cfg.get("tie_word_embeddings", False) and "lm_head.weight" in W:
        head = "lm_head.weight"
    Wh = W[head]
    logits = np.empty((T, Wh.shape[0]))
    for s in range(0, Wh.shape[0], 16384):  # the head in chunks: a float64 copy is big
        logits[:, s:s + 16384] = x @ Wh[s:s + 16384].astype(np.float64).T
    return logits


def compare(a_path, b_path, tol):
    a, b = np.load(a_path), np.load(b_path)
    if a.shape != b.shape:
        print(f"shape mismatch: {a_path} {a.shape} vs {b_path} {b.shape}")
        return 1
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    per_step = d.max(axis=1)
    worst = float(per_step.max())
    print(f"steps {a.shape[0]}  max abs diff {worst:.3g}  (first step {per_step[0]:.3g}, "
          f"last step {per_step[-1]:.3g}, at step {int(per_step.argmax())})")
    return 0 if worst <= tol else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--tokens", help="prompt token ids, comma separated")
    ap.add_argument("--gen-from", help="inferno's greedy logits .npy: generated tokens = argmax")
    ap.add_argument("--out", help="where to write the logits .npy")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    if args.compare:
        return compare(args.compare[0], args.compare[1], args.tol)
    if not args.model or not args.tokens or not args.out:
        ap.error("MODEL_DIR, --tokens and --out are needed")
    cfg, W = load_model(args.model)
    prompt = [int(t) for t in args.tokens.split(",") if t]
    gen = []
    if args.gen_from:
        # the last row's argmax is the token inferno sampled after the dump ended
        gen = [int(t) for t in np.load(args.gen_from).argmax(axis=1)[:-1]]
    logits = forward(cfg, W, prompt + gen)
    np.save(args.out, logits[len(prompt) - 1:].astype(np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
