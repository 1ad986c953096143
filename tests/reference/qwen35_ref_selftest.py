#!/usr/bin/python3
"""Self-test of qwen35_ref.py, with NumPy only.

Builds tiny random Qwen3.5 models as Hugging Face folders (config.json +
f32 safetensors written here), converts each to a GGUF file in llama.cpp's
layout (written here too: GGUF v3, f32 tensors; norms as 1 + w, ssm_a =
-exp(A_log), V heads tiled, conv1d squeezed, an MTP block appended), and
checks:
  - the reference gives the same logits (1e-9) from the folder and the GGUF,
    and from the GGUF read with its tiled V heads kept (V head h reading K
    head h % Nk);
  - a whole-sequence pass, a one-token-at-a-time pass (conv / recurrent / KV
    state carried), and chunked DeltaNet passes (chunks of 4 and 64, and a
    chunked prefill followed by single steps) agree (1e-9);
  - hand-checkable properties: with beta = 0 the delta rule outputs 0; one
    token with beta = 1, g = 0 and q = k a unit vector outputs v; the causal
    conv's impulse response is the kernel reversed; RoPE leaves the dims
    after n_rot and position 0 alone; the first row does not depend on later
    tokens; with top_k = all experts the MoE block is the softmax-weighted
    sum of every expert plus the gated shared expert;
  - the MoE variant: fused and per-expert HF experts, split and fused
    (ffn_gate_up_exps) GGUF experts, all agree;
  - the CLI (--tokens / --gen-from / --out, --compare) end to end.
Prints "N passed, N failed"; exits 1 on any failure.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qwen35_ref as R  # noqa: E402

TOL = 1e-9
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name} {detail}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def close(name, a, b, tol=TOL):
    d = float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
    check(name, np.shape(a) == np.shape(b) and d <= tol, f"(max abs diff {d:.3g}, tol {tol:g})")


# ---- writers ----

def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, v):
    if isinstance(v, str):
        return gguf_str(key) + struct.pack("<I", 8) + gguf_str(v)
    if isinstance(v, float):
        return gguf_str(key) + struct.pack("<If", 6, v)
    if isinstance(v, list):  # int32 array
        return gguf_str(key) + struct.pack("<IIQ", 9, 5, len(v)) + struct.pack(f"<{len(v)}i", *v)
    return gguf_str(key) + struct.pack("<II", 4, v)  # uint32


def write_gguf(path, meta, tensors, align=32):
    """GGUF v3: header, metadata, tensor infos (ggml ne = reversed numpy
    shape), padding, f32 data at aligned offsets."""
    kv = b"".join(gguf_kv(k, v) for k, v in meta.items())
    infos, blobs, off = b"", [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        pad = -off % align
        off += pad
        blobs.append(b"\0" * pad + b)
        ne = list(reversed(a.shape))
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        infos += struct.pack("<IQ", 0, off)
        off += len(b)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + kv + infos
    head += b"\0" * (-len(head) % align)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


# ---- a tiny random model ----

def exact_a_log(rng, n):
    """A_log values (float32) whose -exp(A_log), computed in float64, is
    within ~1e-13 of a float32: so the GGUF's rounded ssm_a is the same number
    as the folder's A_log up to far below the test tolerance."""
    out = np.empty(n, np.float32)
    for i in range(n):
        x0 = np.float32(np.log(rng.uniform(1.0, 8.0)))
        cand = (x0.view(np.int32) + np.arange(-(1 << 19), 1 << 19, dtype=np.int32)).view(np.float32)
        e = np.exp(cand.astype(np.float64))
        err = np.abs(e - e.astype(np.float32).astype(np.float64)) / e
        out[i] = cand[int(np.argmin(err))]
    return out


def norm_w(rng, n):  # zero-centred norm weights with 1 + w exact in float32
    return (np.round(rng.normal(0, 0.2, n) * 4096) / 4096).astype(np.float32)


def make_model(rng, moe=False):
    """The config fields and HF weights (names without the model prefix).
    rms_norm_eps is 2^-20, not 1e-6: a GGUF holds the epsilon as a float32,
    and f32(1e-6) alone moves these logits by ~1e-9."""
    t = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=2.0 ** -20,
             linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16,
             linear_num_key_heads=2, linear_num_value_heads=4, hidden_act="silu",
             rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                              "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                              "mrope_interleaved": True})
    if moe:  # also r = Nv/Nk = 3 (its reorder is no involution) and dk != dv
        t.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                 shared_expert_intermediate_size=48, full_attention_interval=4,
                 linear_num_value_heads=6, linear_value_head_dim=8)
    else:
        t["layer_types"] = ["linear_attention"] * 3 + ["full_attention"]
    E, V, hd = t["hidden_size"], t["vocab_size"], t["head_dim"]
    nh, nkv = t["num_attention_heads"], t["num_key_value_heads"]
    Nk, Nv, dk, dv, K = (t["linear_num_key_heads"], t["linear_num_value_heads"],
                         t["linear_key_head_dim"], t["linear_value_head_dim"],
                         t["linear_conv_kernel_dim"])
    ch = 2 * Nk * dk + Nv * dv

    def lin(o, i, s=1.0):
        return (rng.normal(0, s / np.sqrt(i), (o, i))).astype(np.float32)

    W = {"embed_tokens.weight": rng.normal(0, 1, (V, E)).astype(np.float32),
         "norm.weight": norm_w(rng, E)}
    for L in range(t["num_hidden_layers"]):
        p = f"layers.{L}."
        W[p + "input_layernorm.weight"] = norm_w(rng, E)
        W[p + "post_attention_layernorm.weight"] = norm_w(rng, E)
        if L == 3:
            W[p + "self_attn.q_proj.weight"] = lin(nh * 2 * hd, E)
            W[p + "self_attn.k_proj.weight"] = lin(nkv * hd, E)
            W[p + "self_attn.v_proj.weight"] = lin(nkv * hd, E)
            W[p + "self_attn.o_proj.weight"] = lin(E, nh * hd)
            W[p + "self_attn.q_norm.weight"] = norm_w(rng, hd)
            W[p + "self_attn.k_norm.weight"] = norm_w(rng, hd)
        else:
            a = p + "linear_attn."
            W[a + "in_proj_qkv.weight"] = lin(ch, E, 2.0)
            W[a + "in_proj_z.weight"] = lin(Nv * dv, E)
            W[a + "in_proj_b.weight"] = lin(Nv, E)
            W[a + "in_proj_a.weight"] = lin(Nv, E)
            W[a + "conv1d.weight"] = rng.normal(0, 0.5, (ch, 1, K)).astype(np.float32)
            W[a + "dt_bias"] = rng.normal(0, 1, Nv).astype(np.float32)
            W[a + "A_log"] = exact_a_log(rng, Nv)
            W[a + "norm.weight"] = rng.normal(1, 0.2, dv).astype(np.float32)
            W[a + "out_proj.weight"] = lin(E, Nv * dv)
        if moe:
            n, f, fs = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
            W[p + "mlp.gate.weight"] = lin(n, E, 3.0)
            W[p + "mlp.experts.gate_up_proj"] = np.stack([lin(2 * f, E) for _ in range(n)])
            W[p + "mlp.experts.down_proj"] = np.stack([lin(E, f) for _ in range(n)])
            W[p + "mlp.shared_expert.gate_proj.weight"] = lin(fs, E)
            W[p + "mlp.shared_expert.up_proj.weight"] = lin(fs, E)
            W[p + "mlp.shared_expert.down_proj.weight"] = lin(E, fs)
            W[p + "mlp.shared_expert_gate.weight"] = lin(1, E)
        else:
            F = t["intermediate_size"]
            W[p + "mlp.gate_proj.weight"] = lin(F, E)
            W[p + "mlp.up_proj.weight"] = lin(F, E)
            W[p + "mlp.down_proj.weight"] = lin(E, F)
    if not moe:
        W["lm_head.weight"] = lin(V, E)
    return t, W


def write_hf(folder, t, W, moe, per_expert=False):
    """Dense: the qwen3_5 layout (text_config, model.language_model.*, plus
    vision and mtp tensors to be ignored). MoE: qwen3_5_moe_text (top-level
    fields, model.*), tied embeddings."""
    os.makedirs(folder, exist_ok=True)
    out = {}
    if moe:
        cfg = dict(t, model_type="qwen3_5_moe_text", tie_word_embeddings=True)
        pre = "model."
    else:
        cfg = {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"],
               "tie_word_embeddings": False,
               "text_config": dict(t, model_type="qwen3_5_text", tie_word_embeddings=False,
                                   mtp_num_hidden_layers=1),
               "vision_config": {"depth": 1}}
        pre = "model.language_model."
        out["model.visual.blocks.0.attn.qkv.weight"] = np.ones((3, 2), np.float32)
        out["mtp.fc.weight"] = np.ones((4, 2), np.float32)
        out["mtp.layers.0.input_layernorm.weight"] = np.ones(64, np.float32)
    for name, a in W.items():
        if name == "lm_head.weight":
            out[name] = a
        elif per_expert and name.endswith("mlp.experts.gate_up_proj"):
            p = pre + name[:-len("gate_up_proj")]
            f = a.shape[1] // 2
            for e in range(a.shape[0]):
                out[f"{p}{e}.gate_proj.weight"] = a[e, :f]
                out[f"{p}{e}.up_proj.weight"] = a[e, f:]
        elif per_expert and name.endswith("mlp.experts.down_proj"):
            p = pre + name[:-len("down_proj")]
            for e in range(a.shape[0]):
                out[f"{p}{e}.down_proj.weight"] = a[e]
        else:
            out[pre + name] = a
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    names = sorted(out)  # two shards
    half = len(names) // 2
    write_safetensors(os.path.join(folder, "model-00001-of-00002.safetensors"),
                      {n: out[n] for n in names[:half]})
    write_safetensors(os.path.join(folder, "model-00002-of-00002.safetensors"),
                      {n: out[n] for n in names[half:]})


def to_gguf(path, t, W, moe, fused_exps=False):
    """What llama.cpp's converter does, written out independently here."""
    a = "qwen35moe" if moe else "qwen35"
    Nk, Nv, dk, dv = (t["linear_num_key_heads"], t["linear_num_value_heads"],
                      t["linear_key_head_dim"], t["linear_value_head_dim"])
    r = Nv // Nk
    # GGUF V-head position j*Nk + k holds HF V head k*r + j
    head_of = np.array([k * r + j for j in range(r) for k in range(Nk)])

    def vrows(x, blk):  # reorder blocks of blk rows (axis 0)
        return np.concatenate([x[h * blk:(h + 1) * blk] for h in head_of], axis=0)

    n = t["num_hidden_layers"]
    meta = {"general.architecture": a, "general.alignment": 32,
            f"{a}.block_count": n + 1, f"{a}.nextn_predict_layers": 1,
            f"{a}.context_length": 4096, f"{a}.embedding_length": t["hidden_size"],
            f"{a}.feed_forward_length": t["intermediate_size"],
            f"{a}.attention.head_count": t["num_attention_heads"],
            f"{a}.attention.head_count_kv": t["num_key_value_heads"],
            f"{a}.attention.key_length": t["head_dim"], f"{a}.attention.value_length": t["head_dim"],
            f"{a}.attention.layer_norm_rms_epsilon": t["rms_norm_eps"],
            f"{a}.rope.freq_base": t["rope_parameters"]["rope_theta"],
            f"{a}.rope.dimension_count": int(t["head_dim"] * 0.25),
            f"{a}.rope.dimension_sections": [11, 11, 10, 0],
            f"{a}.ssm.conv_kernel": t["linear_conv_kernel_dim"], f"{a}.ssm.state_size": dk,
            f"{a}.ssm.group_count": Nk, f"{a}.ssm.time_step_rank": Nv,
            f"{a}.ssm.inner_size": Nv * dv, f"{a}.full_attention_interval": 4}
    if moe:
        meta.update({f"{a}.expert_count": t["num_experts"],
                     f"{a}.expert_used_count": t["num_experts_per_tok"],
                     f"{a}.expert_feed_forward_length": t["moe_intermediate_size"],
                     f"{a}.expert_shared_feed_forward_length": t["shared_expert_intermediate_size"]})
    T = {"token_embd.weight": W["embed_tokens.weight"],
         "output_norm.weight": (1 + W["norm.weight"]).astype(np.float32)}
    if "lm_head.weight" in W:
        T["output.weight"] = W["lm_head.weight"]
    plain = {"mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight", "self_attn.q_proj.weight": "attn_q.weight",
             "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate.weight": "ffn_gate_inp.weight",
             "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
             "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
             "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
             "linear_attn.norm.weight": "ssm_norm.weight"}
    plus1 = {"input_layernorm.weight": "attn_norm.weight",
             "post_attention_layernorm.weight": "post_attention_norm.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight",
             "self_attn.k_norm.weight": "attn_k_norm.weight"}
    qk = 2 * Nk * dk
    for L in range(n):
        p, b = f"layers.{L}.", f"blk.{L}."
        for name, x in W.items():
            if not name.startswith(p):
                continue
            s = name[len(p):]
            if s in plain:
                T[b + plain[s]] = x
            elif s in plus1:
                T[b + plus1[s]] = (1 + x).astype(np.float32)
            elif s == "mlp.shared_expert_gate.weight":
                T[b + "ffn_gate_inp_shexp.weight"] = x.reshape(-1)
            elif s == "mlp.experts.gate_up_proj":
                f = x.shape[1] // 2
                if fused_exps:
                    T[b + "ffn_gate_up_exps.weight"] = x
                else:
                    T[b + "ffn_gate_exps.weight"] = x[:, :f]
                    T[b + "ffn_up_exps.weight"] = x[:, f:]
            elif s == "mlp.experts.down_proj":
                T[b + "ffn_down_exps.weight"] = x
            elif s == "linear_attn.in_proj_qkv.weight":
                T[b + "attn_qkv.weight"] = np.concatenate([x[:qk], vrows(x[qk:], dv)])
            elif s == "linear_attn.in_proj_z.weight":
                T[b + "attn_gate.weight"] = vrows(x, dv)
            elif s == "linear_attn.in_proj_b.weight":
                T[b + "ssm_beta.weight"] = vrows(x, 1)
            elif s == "linear_attn.in_proj_a.weight":
                T[b + "ssm_alpha.weight"] = vrows(x, 1)
            elif s == "linear_attn.dt_bias":
                T[b + "ssm_dt.bias"] = x[head_of]
            elif s == "linear_attn.A_log":
                T[b + "ssm_a"] = (-np.exp(x.astype(np.float64)))[head_of].astype(np.float32)
            elif s == "linear_attn.conv1d.weight":
                c = x[:, 0, :]
                T[b + "ssm_conv1d.weight"] = np.concatenate([c[:qk], vrows(c[qk:], dv)])
            elif s == "linear_attn.out_proj.weight":
                T[b + "ssm_out.weight"] = vrows(x.T, dv).T
            else:
                raise AssertionError(name)
    # the MTP block llama.cpp appends (not run): garbage that must not matter
    T[f"blk.{n}.attn_norm.weight"] = np.full(t["hidden_size"], 1e6, np.float32)
    T[f"blk.{n}.nextn.eh_proj.weight"] = np.full((t["hidden_size"], 2 * t["hidden_size"]), 1e6,
                                                np.float32)
    write_gguf(path, meta, T)


# ---- the checks ----

def hand_checks(rng):
    Nv, dk, dv, T = 3, 8, 5, 7
    q = R.l2norm(rng.normal(size=(T, Nv, dk)))
    k = R.l2norm(rng.normal(size=(T, Nv, dk)))
    v = rng.normal(size=(T, Nv, dv))
    g = -rng.uniform(0, 2, (T, Nv))
    zero = np.zeros((T, Nv))
    for fn, nm in ((R.delta_rule_recurrent, "recurrent"),
                   (lambda *a: R.delta_rule_chunked(*a, chunk=3), "chunked")):
        S = np.zeros((Nv, dk, dv))
        o = fn(q, k, v, g, zero, S)
        check(f"beta=0: {nm} delta rule outputs 0 and keeps S = 0",
              not np.any(o) and not np.any(S))
    u = R.l2norm(rng.normal(size=(1, Nv, dk)), eps=0.0)
    S = np.zeros((Nv, dk, dv))
    o = R.delta_rule_recurrent(u, u, v[:1], np.zeros((1, Nv)), np.ones((1, Nv)), S)
    close("one token, beta=1, g=0, q=k unit: output = v", o, v[:1], 1e-12)
    close("  ... and S = k v^T", S, u[0][:, :, None] * v[0][:, None, :], 1e-12)
    # chunked vs recurrent on random data, with a start state
    S0 = rng.normal(size=(Nv, dk, dv))
    b = rng.uniform(0, 1, (T, Nv))
    S1, S2 = S0.copy(), S0.copy()
    o1 = R.delta_rule_recurrent(q, k, v, g, b, S1)
    o2 = R.delta_rule_chunked(q, k, v, g, b, S2, chunk=3)
    close("chunked delta rule (chunk 3, T 7, start state) = recurrent: outputs", o2, o1, 1e-12)
    close("  ... and end states", S2, S1, 1e-12)
    # causal conv: an impulse at t=0 gives the kernel reversed
    ch, K = 5, 4
    w = rng.normal(size=(ch, K))
    x = np.zeros((6, ch))
    x[0] = 1.0
    out, hist = R.causal_conv(np.zeros((K - 1, ch)), x, w)
    want = np.zeros((6, ch))
    want[:K] = w[:, ::-1].T
    close("causal conv: impulse response = w[c, K-1-t]", out, want, 0)
    check("causal conv: history = the last K-1 inputs", np.array_equal(hist, x[-(K - 1):]))
    # RoPE: dims past n_rot untouched, position 0 the identity
    C = {"n_rot": 8, "theta": 1e7}
    xr = rng.normal(size=(3, 2, 32))
    y = R.rope(xr, np.arange(3), C)
    check("rope: dims after n_rot unchanged, position 0 unchanged",
          np.array_equal(y[..., 8:], xr[..., 8:]) and np.allclose(y[0], xr[0], 0, 1e-15))
    # RoPE rotates pairs (i, i + n_rot/2) by pos * theta^(-2i/n_rot)
    ang = 2 * 1e7 ** (-2 * 1 / 8)
    c, s = np.cos(ang), np.sin(ang)
    close("rope: pair (1, 5) at position 2 rotated by 2*theta^(-2/8)",
          y[2, :, [1, 5]], np.array([xr[2, :, 1] * c - xr[2, :, 5] * s,
                                     xr[2, :, 5] * c + xr[2, :, 1] * s]), 1e-14)


def model_checks(tmp, rng, moe):
    tag = "moe" if moe else "dense"
    t, W = make_model(rng, moe)
    hf = os.path.join(tmp, f"hf_{tag}")
    gg = os.path.join(tmp, f"{tag}.gguf")
    write_hf(hf, t, W, moe)
    to_gguf(gg, t, W, moe)
    toks = [int(x) for x in rng.integers(0, t["vocab_size"], 11)]

    Ch, Wh = R.load_hf(hf)
    Cg, Wg = R.load_gguf(gg)
    Ct, Wt = R.load_gguf(gg, undo_v_order=False)
    check(f"{tag}: layer types", Ch["layer_types"] == Cg["layer_types"] ==
          ["linear_attention"] * 3 + ["full_attention"], str(Ch["layer_types"]))
    check(f"{tag}: GGUF n_layer = block_count - nextn_predict_layers", Cg["n_layer"] == 4)
    check(f"{tag}: n_rot 8 both sides", Ch["n_rot"] == Cg["n_rot"] == 8)
    check(f"{tag}: tie", Ch["tie"] == Cg["tie"] == moe)
    ref = R.forward(Ch, Wh, toks)
    check(f"{tag}: logits finite and not flat", np.all(np.isfinite(ref)) and ref.std() > 0.1,
          f"(std {ref.std():.3g})")
    close(f"{tag}: HF folder = GGUF (V heads untiled)", R.forward(Cg, Wg, toks), ref)
    close(f"{tag}: HF folder = GGUF (V heads kept tiled, K head h % Nk)",
          R.forward(Ct, Wt, toks), ref)
    # the reorder matters: reading the tiled GGUF with HF's grouping differs
    Cx = dict(Ct, v_order="grouped")
    d = np.max(np.abs(R.forward(Cx, Wt, toks) - ref))
    check(f"{tag}: ignoring the V-head reorder changes the logits", d > 1e-3, f"(by {d:.3g})")

    st = R.State(Ch)
    steps = np.concatenate([R.forward(Ch, Wh, [x], st) for x in toks])
    close(f"{tag}: one token at a time (state carried) = whole sequence", steps, ref)
    close(f"{tag}: chunked DeltaNet, chunks of 4 = token by token",
          R.forward(Ch, Wh, toks, chunk=4), ref)
    close(f"{tag}: chunked DeltaNet, one chunk of 64 = token by token",
          R.forward(Ch, Wh, toks, chunk=64), ref)
    st = R.State(Cg)
    part = [R.forward(Cg, Wg, toks[:6], st, chunk=4)]
    part += [R.forward(Cg, Wg, [x], st) for x in toks[6:]]
    close(f"{tag}: GGUF chunked prefill of 6 then single steps = whole sequence",
          np.concatenate(part), ref)
    close(f"{tag}: first row does not depend on later tokens", R.forward(Ch, Wh, toks[:1])[0],
          ref[0])

    if moe:
        hf2 = os.path.join(tmp, "hf_moe_per_expert")
        write_hf(hf2, t, W, moe, per_expert=True)
        C2, W2 = R.load_hf(hf2)
        close("moe: per-expert HF tensors = fused gate_up_proj/down_proj", R.forward(C2, W2, toks),
              ref, 0)
        gg2 = os.path.join(tmp, "moe_fused.gguf")
        to_gguf(gg2, t, W, moe, fused_exps=True)
        C3, W3 = R.load_gguf(gg2)
        close("moe: GGUF ffn_gate_up_exps = split ffn_{gate,up}_exps", R.forward(C3, W3, toks),
              R.forward(Cg, Wg, toks), 0)
        # top_k = all experts: the block is the full softmax mixture + gated shared expert
        p = "model.layers.0."
        h = rng.normal(size=(5, t["hidden_size"]))
        Call = dict(Ch, top_k=t["num_experts"])
        got = R.sparse_moe(Call, Wh, p, h)
        gu, dn = W["layers.0.mlp.experts.gate_up_proj"], W["layers.0.mlp.experts.down_proj"]
        f = gu.shape[1] // 2
        lg = h @ W["layers.0.mlp.gate.weight"].T.astype(np.float64)
        pr = np.exp(lg) / np.exp(lg).sum(axis=1, keepdims=True)
        want = np.zeros_like(h)
        for e in range(gu.shape[0]):
            a = h @ gu[e, :f].T.astype(np.float64)
            u = h @ gu[e, f:].T.astype(np.float64)
            want += pr[:, e:e + 1] * ((a / (1 + np.exp(-a)) * u) @ dn[e].T.astype(np.float64))
        sg = 1 / (1 + np.exp(-(h @ W["layers.0.mlp.shared_expert_gate.weight"].T.astype(np.float64))))
        a = h @ W["layers.0.mlp.shared_expert.gate_proj.weight"].T.astype(np.float64)
        u = h @ W["layers.0.mlp.shared_expert.up_proj.weight"].T.astype(np.float64)
        want += sg * ((a / (1 + np.exp(-a)) * u) @ W["layers.0.mlp.shared_expert.down_proj.weight"]
                      .T.astype(np.float64))
        close("moe: top_k = all experts: softmax mixture + sigmoid-gated shared expert", got, want,
              1e-12)
    return hf, gg, toks, {"hf": ref, "gguf": R.forward(Cg, Wg, toks)}


def cli_checks(tmp, hf, gg, toks, refs):
    script = os.path.join(HERE, "qwen35_ref.py")
    prompt, gen = toks[:7], toks[7:]
    # a fake inferno dump: rows whose argmax are the generated tokens (+ one after)
    vocab = refs["hf"].shape[1]
    fake = np.zeros((len(gen) + 1, vocab), np.float32)
    for i, x in enumerate(gen + [0]):
        fake[i, x] = 1.0
    fp = os.path.join(tmp, "fake.npy")
    np.save(fp, fake)
    outs = []
    for model, nm in ((hf, "hf"), (gg, "gguf")):
        o1, o2 = os.path.join(tmp, f"{nm}1.npy"), os.path.join(tmp, f"{nm}2.npy")
        r = subprocess.run([sys.executable, script, model,
                            "--tokens", ",".join(map(str, prompt)), "--gen-from", fp, "--out", o1,
                            "--tokens", ",".join(map(str, toks[:3])), "--gen-from", fp,
                            "--out", o2], capture_output=True, text=True)
        check(f"cli {nm}: runs", r.returncode == 0, r.stderr.strip()[-300:])
        if r.returncode:
            continue
        a = np.load(o1)
        close(f"cli {nm}: rows = last prompt row + one per generated token", a,
              refs[nm][len(prompt) - 1:].astype(np.float32), 0)
        outs.append(o1)
        b = np.load(o2)
        close(f"cli {nm}: second sequence of the same call (its own gen-from)", b,
              R.forward(*(R.load(model)), toks[:3] + gen)[2:].astype(np.float32), 0)
    if len(outs) == 2:
        r = subprocess.run([sys.executable, script, "--compare", outs[0], outs[1], "--tol", "1e-6"],
                           capture_output=True, text=True)
        check("cli --compare: hf vs gguf within tol", r.returncode == 0, r.stdout.strip())
        bad = os.path.join(tmp, "bad.npy")
        x = np.load(outs[0])
        x[0, 0] += 1
        np.save(bad, x)
        r = subprocess.run([sys.executable, script, "--compare", outs[0], bad, "--tol", "1e-6"],
                           capture_output=True, text=True)
        check("cli --compare: exits 1 above tol", r.returncode == 1, r.stdout.strip())


def main():
    rng = np.random.default_rng(20250607)
    with tempfile.TemporaryDirectory() as tmp:
        hand_checks(rng)
        hf, gg, toks, refs = model_checks(tmp, rng, moe=False)
        model_checks(tmp, rng, moe=True)
        cli_checks(tmp, hf, gg, toks, refs)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
