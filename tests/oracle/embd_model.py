#!/usr/bin/python3
"""Derives the test models issue 15 needs from the generated tiny ones, laid
out as the published files are (written from the formats, not from inferno):

  embd_model.py gguf IN.gguf OUT.gguf
      Qwen3-Embedding as its GGUF: qwen3.pooling_type 3 (last), and
      tokenizer.ggml.add_eos_token true with eos_token_id <|endoftext|> (151643),
      the token appended to a text.
  embd_model.py hf IN-hf OUT-hf
      Qwen3-Embedding-8B as Hugging Face ships it: tensors saved from the
      base model (no "model." prefix), tie_word_embeddings false and no
      lm_head (no output head at all), tokenizer.json's post_processor a
      TemplateProcessing appending <|endoftext|>, and sentence-transformers'
      modules.json + 1_Pooling/config.json (last-token pooling).
  embd_model.py sampling-gguf IN.gguf OUT.gguf
      general.sampling.temp 0.0 (f32), top_k 7 (i32), top_p 0.5 (f32),
      min_p 0.25 (f32), penalty_repeat 1.5 (f32).
  embd_model.py kv IN.gguf OUT.gguf KEY u32|i32|f32|str VALUE
      one key set (added or replaced), for the checks of bad values.
  embd_model.py sampling-hf IN-hf OUT-hf
      generation_config.json with temperature 0.0, top_k 7, top_p 0.5,
      min_p 0.25, repetition_penalty 1.5."""
import json
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gguf_edit  # noqa: E402

SAMPLING = {"temperature": 0.0, "top_k": 7, "top_p": 0.5, "min_p": 0.25, "repetition_penalty": 1.5}


def gguf_with(src, out, extra):
    raw = open(src, "rb").read()
    version, kvs, tensors, align, data = gguf_edit.parse(raw)
    blobs = [raw[data + t[3]:data + t[3] + n]
             for t, n in zip(tensors, gguf_edit.sizes(tensors, len(raw) - data))]
    names = {k for k, _, _ in extra}
    kvs = [kv for kv in kvs if kv[0] not in names] + extra
    gguf_edit.write(out, version, kvs, tensors, blobs, align)


def f32(x):
    return struct.pack("<f", x)


def copy_hf(src, out):
    if os.path.exists(out):
        shutil.rmtree(out)
    shutil.copytree(src, out)


def flat_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack_from("<Q", raw, 0)[0]
    head = json.loads(raw[8:8 + n])
    new = {}
    for k, v in head.items():
        new[k[len("model."):] if k.startswith("model.") else k] = v
    assert "lm_head.weight" not in new
    h = json.dumps(new, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + raw[8 + n:])


def main():
    what, src, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if what == "gguf":
        gguf_with(src, out, [(b"qwen3.pooling_type", 4, struct.pack("<I", 3)),
                             (b"tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 151643)),
                             (b"tokenizer.ggml.add_eos_token", 7, b"\x01")])
    elif what == "sampling-gguf":
        gguf_with(src, out, [(b"general.sampling.temp", 6, f32(SAMPLING["temperature"])),
                             (b"general.sampling.top_k", 5, struct.pack("<i", SAMPLING["top_k"])),
                             (b"general.sampling.top_p", 6, f32(SAMPLING["top_p"])),
                             (b"general.sampling.min_p", 6, f32(SAMPLING["min_p"])),
                             (b"general.sampling.penalty_repeat", 6,
                              f32(SAMPLING["repetition_penalty"]))])
    elif what == "kv":
        key, ty, val = sys.argv[4].encode(), sys.argv[5], sys.argv[6]
        t, raw = {"u32": (4, lambda v: struct.pack("<I", int(v))),
                  "i32": (5, lambda v: struct.pack("<i", int(v))),
                  "f32": (6, lambda v: f32(float(v))),
                  "str": (8, lambda v: struct.pack("<Q", len(v.encode())) + v.encode())}[ty]
        gguf_with(src, out, [(key, t, raw(val))])
    elif what == "sampling-hf":
        copy_hf(src, out)
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": 151643, "do_sample": True, **SAMPLING}, f, indent=2)
    elif what == "hf":
        copy_hf(src, out)
        flat_safetensors(os.path.join(out, "model.safetensors"))
        cfg_path = os.path.join(out, "config.json")
        cfg = json.load(open(cfg_path))
        cfg["tie_word_embeddings"] = False
        json.dump(cfg, open(cfg_path, "w"), indent=2)
        tok_path = os.path.join(out, "tokenizer.json")
        tok = json.load(open(tok_path))
        eot = "<|endoftext|>"
        eot_id = next(t["id"] for t in tok["added_tokens"] if t["content"] == eot)
        tok["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": eot, "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": eot, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": eot, "type_id": 1}}],
            "special_tokens": {eot: {"id": eot, "ids": [eot_id], "tokens": [eot]}},
        }
        json.dump(tok, open(tok_path, "w"), ensure_ascii=False)
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
                  open(os.path.join(out, "modules.json"), "w"), indent=2)
        os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
        json.dump({"word_embedding_dimension": cfg["hidden_size"], "pooling_mode_cls_token": False,
                   "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
                   "pooling_mode_lasttoken": True, "include_prompt": True},
                  open(os.path.join(out, "1_Pooling", "config.json"), "w"), indent=2)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
