#!/usr/bin/python3
"""A NumPy Qwen3, written from the Hugging Face definition (transformers'
modeling_qwen3: Qwen3RMSNorm, Qwen3RotaryEmbedding + apply_rotary_pos_emb,
Qwen3Attention with q_norm/k_norm before RoPE, repeat_kv, Qwen3MLP; and
modeling_qwen3_moe's Qwen3MoeSparseMoeBlock: router softmax in float, top-k,
renormalized when norm_topk_prob, each chosen expert's MLP weighted; the
sparse layers chosen by decoder_sparse_step and mlp_only_layers), used as the
independent oracle for inferno's logits.

Experts are read from every layout: GGUF's 3-D ffn_{gate,up,down}_exps,
Hugging Face's per-expert mlp.experts.E.{gate,up,down}_proj.weight, and
transformers v5's fused mlp.experts.gate_up_proj [E, 2F, H] (gate rows
first) / mlp.experts.down_proj [E, H, F]; all become stacked [E, out, in]
arrays here.

It reads a Hugging Face folder itself (config.json + *.safetensors, the
safetensors header parsed with json, tensors with numpy.frombuffer; bf16 by
shifting uint16 into the high half of a float32), or a GGUF file, whose
quantized blocks (Q8_0, Q4_0, Q4_K, Q6_K) it dequantizes itself from ggml's
block layouts. It computes in float64, so its numbers are the "true" values
of the stored weights.

Usage:
  qwen3_ref.py MODEL --tokens 1,2,3 [--gen-from inferno.npy] --out ref.npy [--tokens ...]
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


def stack_experts(cfg, W):
    """Every layout of MoE experts -> W[p + "mlp.experts.{gate,up,down}"] [E, out, in]."""
    n = cfg.get("num_experts") or cfg.get("num_local_experts") or 0
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}.mlp.experts."
        if p + "gate_up_proj" in W:  # transformers v5: gate rows, then up rows
            gu = W.pop(p + "gate_up_proj")
            f = gu.shape[1] // 2
            W[p + "gate"], W[p + "up"] = gu[:, :f, :], gu[:, f:, :]
            W[p + "down"] = W.pop(p + "down_proj")
        elif p + "0.gate_proj.weight" in W:
            for proj in ("gate", "up", "down"):
                W[p + proj] = np.stack([W.pop(f"{p}{e}.{proj}_proj.weight") for e in range(n)])
    return W


def load_model(folder):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    weights = {}
    for fn in sorted(os.listdir(folder)):
        if fn.endswith(".safetensors"):
            weights.update(load_safetensors(os.path.join(folder, fn)))
    # A checkpoint saved from the base model (Qwen3Model, as Qwen3-Embedding
    # ships) has no "model." prefix: transformers loads it under that prefix.
    if weights and not any(k.startswith("model.") or k == "lm_head.weight" for k in weights):
        weights = {"model." + k: v for k, v in weights.items()}
    return cfg, stack_experts(cfg, weights)


# ---- GGUF (for the quantized types): parsed and dequantized here, from the
# GGUF spec and ggml's block layouts, independently of inferno's C code. ----

GGUF_NAMES = {  # GGUF tensor name -> Hugging Face name ("{}" = layer)
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{}.attn_norm.weight": "model.layers.{}.input_layernorm.weight",
    "blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight",
    "blk.{}.attn_k.weight": "model.layers.{}.self_attn.k_proj.weight",
    "blk.{}.attn_v.weight": "model.layers.{}.self_attn.v_proj.weight",
    "blk.{}.attn_output.weight": "model.layers.{}.self_attn.o_proj.weight",
    "blk.{}.attn_q_norm.weight": "model.layers.{}.self_attn.q_norm.weight",
    "blk.{}.attn_k_norm.weight": "model.layers.{}.self_attn.k_norm.weight",
    "blk.{}.ffn_norm.weight": "model.layers.{}.post_attention_layernorm.weight",
    "blk.{}.ffn_gate.weight": "model.layers.{}.mlp.gate_proj.weight",
    "blk.{}.ffn_up.weight": "model.layers.{}.mlp.up_proj.weight",
    "blk.{}.ffn_down.weight": "model.layers.{}.mlp.down_proj.weight",
    "blk.{}.ffn_gate_inp.weight": "model.layers.{}.mlp.gate.weight",
    "blk.{}.ffn_gate_exps.weight": "model.layers.{}.mlp.experts.gate",
    "blk.{}.ffn_up_exps.weight": "model.layers.{}.mlp.experts.up",
    "blk.{}.ffn_down_exps.weight": "model.layers.{}.mlp.experts.down",
}


def f16(b):
    return np.frombuffer(b, dtype="<f2").astype(np.float32)


def deq_q8_0(raw):  # 34-byte blocks: f16 d, 32 x int8
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
    d = f16(b[:, :2].tobytes())[:, None]
    return (d * b[:, 2:].view(np.int8)).reshape(-1)


def deq_q4_0(raw):  # 18-byte blocks: f16 d, 16 bytes: low nibbles = 0..15, high = 16..31
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 18)
    d = f16(b[:, :2].tobytes())[:, None]
    q = b[:, 2:]
    w = np.concatenate([q & 15, q >> 4], axis=1).astype(np.int16) - 8
    return (d * w).reshape(-1)


def k_scale_min(sc):  # Q4_K: 12 bytes -> 8 six-bit scales and mins
    s = np.zeros((sc.shape[0], 8), np.float32)
    m = np.zeros((sc.shape[0], 8), np.float32)
    for j in range(8):
        if j < 4:
            s[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            s[:, j] = (sc[:, j + 4] & 15) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return s, m


def deq_q4_k(raw):  # 144-byte blocks: d, dmin, scales[12], qs[128]
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 144)
    d = f16(b[:, 0:2].tobytes())[:, None]
    dmin = f16(b[:, 2:4].tobytes())[:, None]
    s, m = k_scale_min(b[:, 4:16])
    qs = b[:, 16:]
    out = np.empty((b.shape[0], 256), np.float32)
    for c in range(4):  # 64 weights per 32 bytes: low nibbles, then high nibbles
        q = qs[:, 32 * c:32 * c + 32]
        j = 2 * c
        out[:, 64 * c:64 * c + 32] = d * s[:, j:j + 1] * (q & 15) - dmin * m[:, j:j + 1]
        out[:, 64 * c + 32:64 * c + 64] = d * s[:, j + 1:j + 2] * (q >> 4) - dmin * m[:, j + 1:j + 2]
    return out.reshape(-1)


def deq_q6_k(raw):  # 210-byte blocks: ql[128], qh[64], scales[16] int8, d
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 210)
    ql, qh = b[:, :128].astype(np.int16), b[:, 128:192].astype(np.int16)
    sc = b[:, 192:208].view(np.int8).astype(np.float32)
    d = f16(b[:, 208:210].tobytes())[:, None]
    out = np.empty((b.shape[0], 256), np.float32)
    for half in range(2):  # each 128 weights: 64 bytes of ql, 32 of qh
        L, H, o = ql[:, 64 * half:64 * half + 64], qh[:, 32 * half:32 * half + 32], 128 * half
        q1 = (L[:, :32] & 15) | ((H & 3) << 4)
        q2 = (L[:, 32:] & 15) | (((H >> 2) & 3) << 4)
        q3 = (L[:, :32] >> 4) | (((H >> 4) & 3) << 4)
        q4 = (L[:, 32:] >> 4) | (((H >> 6) & 3) << 4)
        for k, q in enumerate((q1, q2, q3, q4)):
            l0 = o + 32 * k
            for h16 in range(2):  # one scale per 16 weights
                s = sc[:, 8 * half + 2 * k + h16][:, None]
                out[:, l0 + 16 * h16:l0 + 16 * h16 + 16] = d * s * (q[:, 16 * h16:16 * h16 + 16] - 32)
    return out.reshape(-1)


GGUF_TYPES = {  # type id -> (block size, bytes per block, dequantizer)
    0: (1, 4, lambda r: np.frombuffer(r, dtype="<f4")),
    1: (1, 2, f16),
    30: (1, 2, lambda r: (np.frombuffer(r, dtype="<u2").astype(np.uint32) << 16).view(np.float32)),
    8: (32, 34, deq_q8_0),
    2: (32, 18, deq_q4_0),
    12: (256, 144, deq_q4_k),
    14: (256, 210, deq_q6_k),
}


# ---- the other block types (ggml's layouts; every product in float32, in
# ggml's order, so the values are bit-exact: --check-fixtures verifies that
# against the dequantized values llama.cpp wrote) ----

F32 = np.float32


def blocks(raw, nbytes):
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, nbytes)


def f16col(b, at):  # f16 at byte offset `at` of every block, as a float32 column
    return f16(np.ascontiguousarray(b[:, at:at + 2]).tobytes())[:, None]


def nibbles(q):  # 16 bytes -> 32 values: low nibbles, then high
    return np.concatenate([q & 15, q >> 4], axis=1)


def fifth_bit(qh4):  # 4 bytes (u32 little-endian) -> bit j for weight j
    bits = np.unpackbits(qh4, axis=1, bitorder="little")  # [blocks, 32]
    return bits.astype(np.uint8) << 4


def deq_q4_1(raw):  # 20 bytes: d, m, qs[16]
    b = blocks(raw, 20)
    return (nibbles(b[:, 4:]).astype(F32) * f16col(b, 0) + f16col(b, 2)).reshape(-1)


def deq_q5_0(raw):  # 22 bytes: d, qh[4], qs[16]
    b = blocks(raw, 22)
    q = (nibbles(b[:, 6:]) | fifth_bit(b[:, 2:6])).astype(np.int16) - 16
    return (q.astype(F32) * f16col(b, 0)).reshape(-1)


def deq_q5_1(raw):  # 24 bytes: d, m, qh[4], qs[16]
    b = blocks(raw, 24)
    q = nibbles(b[:, 8:]) | fifth_bit(b[:, 4:8])
    return (q.astype(F32) * f16col(b, 0) + f16col(b, 2)).reshape(-1)


def k2_fields(qs):  # [blocks, 64] -> [blocks, 256] 2-bit fields, weight order
    out = np.empty((qs.shape[0], 256), np.uint8)
    for h in range(2):
        for j in range(4):
            out[:, 128 * h + 32 * j:128 * h + 32 * j + 32] = (qs[:, 32 * h:32 * h + 32] >> (2 * j)) & 3
    return out


def deq_q2_k(raw):  # 84 bytes: scales[16], qs[64], d, dmin
    b = blocks(raw, 84)
    sc = b[:, :16]
    d, dmin = f16col(b, 80), f16col(b, 82)
    dl = np.repeat(d * (sc & 15).astype(F32), 16, axis=1)
    ml = np.repeat(dmin * (sc >> 4).astype(F32), 16, axis=1)
    return (dl * k2_fields(b[:, 16:80]).astype(F32) - ml).reshape(-1)


def deq_q3_k(raw):  # 110 bytes: hmask[32], qs[64], scales[12], d
    b = blocks(raw, 110)
    hm, s12 = b[:, :32], b[:, 96:108].astype(np.int16)
    d = f16col(b, 108)
    sc = np.empty((b.shape[0], 16), np.int16)
    for s in range(16):
        lo = s12[:, s] & 15 if s < 8 else s12[:, s - 8] >> 4
        sc[:, s] = (lo | (((s12[:, 8 + s % 4] >> (2 * (s // 4))) & 3) << 4)) - 32
    hbit = np.concatenate([(hm >> j) & 1 for j in range(8)], axis=1)  # weight 32j + l
    q = k2_fields(b[:, 32:96]).astype(np.int16) - 4 * (1 - hbit.astype(np.int16))
    dl = np.repeat(d * sc.astype(F32), 16, axis=1)
    return (dl * q.astype(F32)).reshape(-1)


def deq_q5_k(raw):  # 176 bytes: d, dmin, scales[12], qh[32], qs[128]
    b = blocks(raw, 176)
    d, dmin = f16col(b, 0), f16col(b, 2)
    s, m = k_scale_min(b[:, 4:16])
    qh, qs = b[:, 16:48], b[:, 48:]
    out = np.empty((b.shape[0], 256), F32)
    for j in range(8):
        q4 = qs[:, 32 * (j // 2):32 * (j // 2) + 32]
        q = ((q4 >> 4) if j % 2 else (q4 & 15)) | (((qh >> j) & 1) << 4)
        out[:, 32 * j:32 * j + 32] = (d * s[:, j:j + 1]) * q.astype(F32) - dmin * m[:, j:j + 1]
    return out.reshape(-1)


IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], F32)
FP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], F32)


def deq_iq4_nl(raw):  # 18 bytes: d, qs[16]
    b = blocks(raw, 18)
    return (f16col(b, 0) * IQ4NL[nibbles(b[:, 2:])]).reshape(-1)


def deq_iq4_xs(raw):  # 136 bytes: d, scales_h (u16), scales_l[4], qs[128]
    b = blocks(raw, 136)
    d = f16col(b, 0)
    sh = b[:, 2].astype(np.int32) | (b[:, 3].astype(np.int32) << 8)
    out = np.empty((b.shape[0], 256), F32)
    for s in range(8):
        ls = ((b[:, 4 + s // 2].astype(np.int32) >> (4 * (s % 2))) & 15) | (((sh >> (2 * s)) & 3) << 4)
        dl = d * (ls - 32).astype(F32)[:, None]
        out[:, 32 * s:32 * s + 32] = dl * IQ4NL[nibbles(b[:, 8 + 16 * s:24 + 16 * s])]
    return out.reshape(-1)


def deq_mxfp4(raw):  # 17 bytes: e (E8M0), qs[16]; scale 2^(e-128) as ggml builds it
    b = blocks(raw, 17)
    e = b[:, 0].astype(np.uint32)
    bits = np.where(e < 2, np.uint32(0x00200000) << e, (e - 1) << 23).astype(np.uint32)
    d = bits.view(F32)[:, None]
    return (FP4[nibbles(b[:, 1:])] * d).reshape(-1)


GGUF_TYPES.update({
    3: (32, 20, deq_q4_1),
    6: (32, 22, deq_q5_0),
    7: (32, 24, deq_q5_1),
    10: (256, 84, deq_q2_k),
    11: (256, 110, deq_q3_k),
    13: (256, 176, deq_q5_k),
    20: (32, 18, deq_iq4_nl),
    23: (256, 136, deq_iq4_xs),
    39: (32, 17, deq_mxfp4),
})


def read_gguf(path):
    """(raw bytes, metadata, [(name, ne, type, offset)], data section start) of a GGUF file."""
    with open(path, "rb") as f:
        raw = f.read()
    pos = [0]

    def take(fmt):
        v = np.frombuffer(raw, dtype=fmt, count=1, offset=pos[0])[0]
        pos[0] += np.dtype(fmt).itemsize
        return v

    def string():
        n = int(take("<u8"))
        s = raw[pos[0]:pos[0] + n].decode("utf-8", "replace")
        pos[0] += n
        return s

    scalars = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
               10: "<u8", 11: "<i8", 12: "<f8"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = int(take("<u4")), int(take("<u8"))
            if et in scalars:  # skip numeric arrays in one step
                pos[0] += n * np.dtype(scalars[et]).itemsize
                return None
            return [value(et) for _ in range(n)]
        return take(scalars[t]).item()

    if raw[:4] != b"GGUF":
        raise SystemExit(f"{path}: not a GGUF file")
    pos[0] = 4
    take("<u4")
    n_tensors, n_kv = int(take("<u8")), int(take("<u8"))
    meta = {}
    for _ in range(n_kv):
        k = string()
        meta[k] = value(int(take("<u4")))
    infos = []
    for _ in range(n_tensors):
        name = string()
        nd = int(take("<u4"))
        ne = [int(take("<u8")) for _ in range(nd)]
        infos.append((name, ne, int(take("<u4")), int(take("<u8"))))
    align = int(meta.get("general.alignment", 32))
    base = (pos[0] + align - 1) // align * align
    return raw, meta, infos, base


def tensor_values(raw, base, ne, t, off):
    block, bb, deq = GGUF_TYPES[t]
    n = int(np.prod(ne))
    return deq(raw[base + off:base + off + n // block * bb]).astype(np.float32)


def check_fixtures(folder):
    """Each fixture's q dequantized here equals ggml's deq bit for bit."""
    bad = 0
    for fn in sorted(os.listdir(folder)):
        if not fn.endswith(".gguf"):
            continue
        raw, meta, infos, base = read_gguf(os.path.join(folder, fn))
        t = {name: (ne, ty, off) for name, ne, ty, off in infos}
        if t["q"][1] not in GGUF_TYPES:
            print(f"skip {fn}: type {t['q'][1]} has no dequantizer here")
            continue
        got = tensor_values(raw, base, *t["q"])
        want = tensor_values(raw, base, *t["deq"])
        diff = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        if diff.size:
            i = int(diff[0])
            print(f"FAIL {fn}: {diff.size} values differ, first [{i}] {got[i]!r} vs ggml {want[i]!r}")
            bad += 1
        else:
            print(f"ok   {fn}: {got.size} values bit-exact")
    return 1 if bad else 0


def load_gguf(path):
    """(config, {HF name: float32 array}) from a GGUF file."""
    raw, meta, infos, base = read_gguf(path)
    a = meta["general.architecture"]
    cfg = {
        "hidden_size": meta[a + ".embedding_length"],
        "num_hidden_layers": meta[a + ".block_count"],
        "num_attention_heads": meta[a + ".attention.head_count"],
        "num_key_value_heads": meta[a + ".attention.head_count_kv"],
        "head_dim": meta.get(a + ".attention.key_length"),
        "rms_norm_eps": meta[a + ".attention.layer_norm_rms_epsilon"],
        "rope_theta": meta.get(a + ".rope.freq_base", 10000.0),
    }
    if meta.get(a + ".rope.scaling.type") == "yarn":  # llama.cpp: attn_factor * mscale
        f = meta[a + ".rope.scaling.factor"]
        cfg["rope_scaling"] = {
            "rope_type": "yarn", "factor": f,
            "original_max_position_embeddings": meta[a + ".rope.scaling.original_context_length"],
            "attention_factor": meta.get(a + ".rope.scaling.attn_factor", 1.0) * (0.1 * np.log(f) + 1.0),
            "beta_fast": meta.get(a + ".rope.scaling.yarn_beta_fast", 32),
            "beta_slow": meta.get(a + ".rope.scaling.yarn_beta_slow", 1)}
    if a + ".expert_count" in meta:  # llama.cpp always renormalizes the top-k weights
        cfg.update(num_experts=meta[a + ".expert_count"],
                   num_experts_per_tok=meta[a + ".expert_used_count"], norm_topk_prob=True)
    W = {}
    for name, ne, t, off in infos:
        data = tensor_values(raw, base, ne, t, off)
        hf = None
        for g, h in GGUF_NAMES.items():
            parts = name.split(".")
            if "{}" in g and len(parts) > 2 and parts[0] == "blk":
                if g.format(parts[1]) == name:
                    hf = h.format(parts[1])
            elif g == name:
                hf = h
        if hf:
            W[hf] = data.reshape(list(reversed(ne)))  # ggml ne is fastest-first
    cfg["tie_word_embeddings"] = "lm_head.weight" not in W
    # GGUF: a layer is sparse when it has a router
    cfg["mlp_only_layers"] = [i for i in range(cfg["num_hidden_layers"])
                              if f"model.layers.{i}.mlp.gate.weight" not in W]
    return cfg, W


def rms_norm(x, w, eps):
    # Qwen3RMSNorm: x * rsqrt(mean(x^2) + eps), then times the weight
    var = np.mean(x * x, axis=-1, keepdims=True)
    return w * (x / np.sqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rope_parameters(cfg, hd):
    """(inv_freq [hd/2], attention_scaling) as transformers' modeling_rope_utils
    computes them: the default RoPE, or _compute_yarn_parameters for
    rope_scaling / rope_parameters of type yarn."""
    params = cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta", params.get("rope_theta", 10000.0))
    inv_freq = 1.0 / (theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    rs = cfg.get("rope_scaling") or params
    if (rs.get("rope_type") or rs.get("type")) != "yarn":
        return inv_freq, 1.0
    factor = rs["factor"]
    orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * np.log(scale) + 1.0

    attention = rs.get("attention_factor")
    if attention is None:
        if rs.get("mscale") and rs.get("mscale_all_dim"):
            attention = get_mscale(factor, rs["mscale"]) / get_mscale(factor, rs["mscale_all_dim"])
        else:
            attention = get_mscale(factor)
    beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

    def correction_dim(n_rot):
        return hd * np.log(orig / (n_rot * 2 * np.pi)) / (2 * np.log(theta))

    low = max(np.floor(correction_dim(beta_fast)), 0)
    high = min(np.ceil(correction_dim(beta_slow)), hd - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(hd // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    inv_freq = (inv_freq / factor) * (1 - extrapolation) + inv_freq * extrapolation
    return inv_freq, attention


def silu(x):
    return x / (1.0 + np.exp(-x))


def sparse_moe_block(cfg, W, p, h):
    """Qwen3MoeSparseMoeBlock: router -> softmax (float) -> top-k -> renormalize
    when norm_topk_prob -> sum of each chosen expert's MLP, weighted."""
    k = cfg["num_experts_per_tok"]
    logits = h @ W[p + "mlp.gate.weight"].astype(np.float64).T  # [T, n_experts]
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    top = np.argsort(-probs, axis=-1, kind="stable")[:, :k]  # [T, k]
    weights = np.take_along_axis(probs, top, axis=-1)
    if cfg.get("norm_topk_prob", False):
        weights = weights / weights.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    for e in np.unique(top):
        rows, slot = np.nonzero(top == e)
        x = h[rows]
        g = x @ W[p + "mlp.experts.gate"][e].astype(np.float64).T
        u = x @ W[p + "mlp.experts.up"][e].astype(np.float64).T
        y = (silu(g) * u) @ W[p + "mlp.experts.down"][e].astype(np.float64).T
        out[rows] += weights[rows, slot][:, None] * y
    return out


def is_sparse(cfg, i):
    """Qwen3MoeDecoderLayer: the MoE block unless mlp_only_layers names the layer
    or it is off the decoder_sparse_step."""
    n = cfg.get("num_experts") or cfg.get("num_local_experts") or 0
    step = cfg.get("decoder_sparse_step", 1) or 1
    return i not in cfg.get("mlp_only_layers", []) and n > 0 and (i + 1) % step == 0


def forward(cfg, W, tokens, hidden=False):
    """Logits [T, vocab] (float64) for every position of tokens; with
    hidden, the final-normed hidden states [T, E] instead (what an embedding
    model pools)."""
    E = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    nkv = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or E // nh
    eps = cfg["rms_norm_eps"]
    T = len(tokens)
    f64 = lambda name: W[name].astype(np.float64)

    x = f64("model.embed_tokens.weight")[np.array(tokens)]  # [T, E]

    # Qwen3RotaryEmbedding: inv_freq over even dims, emb = cat(freqs, freqs);
    # cos and sin times the attention scaling (YaRN's; 1 otherwise)
    inv_freq, attention_scaling = rope_parameters(cfg, hd)
    freqs = np.outer(np.arange(T, dtype=np.float64), inv_freq)  # [T, hd/2]
    emb = np.concatenate([freqs, freqs], axis=-1)  # [T, hd]
    cos = np.cos(emb)[:, None, :] * attention_scaling
    sin = np.sin(emb)[:, None, :] * attention_scaling

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
        if is_sparse(cfg, i):
            x = x + sparse_moe_block(cfg, W, p, h)
            continue
        g = h @ f64(p + "mlp.gate_proj.weight").T
        u = h @ f64(p + "mlp.up_proj.weight").T
        x = x + (silu(g) * u) @ f64(p + "mlp.down_proj.weight").T

    x = rms_norm(x, f64("model.norm.weight"), eps)
    if hidden:
        return x
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
    ap.add_argument("model", nargs="?", help="Hugging Face folder or GGUF file")
    ap.add_argument("--tokens", action="append", help="prompt token ids, comma separated")
    ap.add_argument("--gen-from", action="append",
                    help="inferno's greedy logits .npy: generated tokens = argmax")
    ap.add_argument("--out", action="append", help="where to write the logits .npy")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--embed", action="store_true",
                    help="write each sequence's embedding instead: the last token's hidden "
                         "state after the final norm, L2-normalized (Qwen3-Embedding), as [1, E]")
    ap.add_argument("--check-fixtures", metavar="DIR",
                    help="check the dequantizers on llama.cpp's weight-type fixtures")
    args = ap.parse_args()
    if args.check_fixtures:
        return check_fixtures(args.check_fixtures)
    if args.compare:
        return compare(args.compare[0], args.compare[1], args.tol)
    if not args.model or not args.tokens or not args.out or len(args.tokens) != len(args.out):
        ap.error("MODEL, and --tokens/--out (one pair per sequence) are needed")
    if args.gen_from and len(args.gen_from) != len(args.out):
        ap.error("give one --gen-from per --out")
    if os.path.isdir(args.model):
        cfg, W = load_model(args.model)
    else:
        cfg, W = load_gguf(args.model)
    for i, toks in enumerate(args.tokens):  # several sequences share one load
        prompt = [int(t) for t in toks.split(",") if t]
        if args.embed:
            h = forward(cfg, W, prompt, hidden=True)[-1]
            np.save(args.out[i], (h / np.linalg.norm(h))[None, :].astype(np.float32))
            continue
        gen = []
        if args.gen_from:
            # the last row's argmax is the token sampled after the dump ended
            gen = [int(t) for t in np.load(args.gen_from[i]).argmax(axis=1)[:-1]]
        logits = forward(cfg, W, prompt + gen)
        np.save(args.out[i], logits[len(prompt) - 1:].astype(np.float32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
