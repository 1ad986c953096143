#!/usr/bin/python3
"""Rewrites a Hugging Face folder the way other checkpoints lay it out, for the
checks:

  hf_edit.py IN OUT --vl
      Qwen3-VL's layout of the same text model: config.json's fields moved
      into text_config under model_type qwen3_vl (qwen3_vl_moe for a MoE),
      with a vision_config; the language model's tensors renamed
      model.X -> model.language_model.X; a vision-tower tensor added
      (model.visual.*), which a text-only reader must leave out.
  hf_edit.py IN OUT --vl-moe-xw
      As --vl, and the fused experts (mlp.experts.gate_up_proj [E, 2F, H],
      down_proj [E, H, F]) transposed to Qwen3-VL-MoE's x.W layout
      ([E, H, 2F], [E, F, H]).

Written from the safetensors format (an 8-byte little-endian header length,
a JSON header of name -> dtype, shape, data_offsets, then the data)."""
import json
import os
import shutil
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F16": np.float16}


def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack_from("<Q", raw, 0)[0]
    head = json.loads(raw[8:8 + n])
    meta = head.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, t in head.items():
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], data[a:b])
    return out, meta


def write_st(path, tensors, meta):
    head, blobs, off = {}, [], 0
    for name, (dt, shape, blob) in tensors.items():
        head[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    if meta is not None:
        head["__metadata__"] = meta
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    src, dst, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f not in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    moe = cfg["model_type"] == "qwen3_moe"
    text = dict(cfg)
    text["model_type"] = "qwen3_vl_moe_text" if moe else "qwen3_vl_text"
    # Qwen3-VL's text RoPE: interleaved multi-section, which for text tokens
    # (three equal position ids) is the plain one
    text["rope_scaling"] = {"mrope_interleaved": True, "mrope_section": [24, 20, 20],
                            "rope_type": "default"}
    vl = {"model_type": "qwen3_vl_moe" if moe else "qwen3_vl",
          "architectures": ["Qwen3VLMoeForConditionalGeneration" if moe
                            else "Qwen3VLForConditionalGeneration"],
          "text_config": text,
          "vision_config": {"depth": 2, "hidden_size": 4, "model_type": "qwen3_vl"},
          "tie_word_embeddings": cfg.get("tie_word_embeddings", False),
          "image_token_id": 151655}
    json.dump(vl, open(os.path.join(dst, "config.json"), "w"), indent=2)
    tensors, meta = read_st(os.path.join(src, "model.safetensors"))
    out = {}
    for name, (dt, shape, blob) in tensors.items():
        if mode == "--vl-moe-xw" and name.endswith((".mlp.experts.gate_up_proj",
                                                    ".mlp.experts.down_proj")):
            a = np.frombuffer(blob, dtype=DT[dt]).reshape(shape).transpose(0, 2, 1)
            shape, blob = list(a.shape), np.ascontiguousarray(a).tobytes()
        if name.startswith("model."):
            name = "model.language_model." + name[len("model."):]
        out[name] = (dt, shape, blob)
    out["model.visual.patch_embed.proj.weight"] = (
        "F32", [4], np.arange(4, dtype=np.float32).tobytes())
    write_st(os.path.join(dst, "model.safetensors"), out, meta)


if __name__ == "__main__":
    main()
