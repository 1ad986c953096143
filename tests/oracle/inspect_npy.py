#!/usr/bin/python3
"""`inferno inspect --tensor NAME --npy OUT` checked with NumPy.

The .npy files are read by NumPy (np.load) and compared, bit for bit, with
values this script reads from the model files itself (its own small GGUF and
safetensors readers, written from the formats' specifications):
  - every weight-type fixture of llama.cpp (../shared/fixtures/quant): the
    dequantized `q` must equal the stored `deq` (ggml's own dequantization),
    and `deq` must equal its F32 bytes in the file;
  - a Q8_0 tensor of a generated model, dequantized here with NumPy;
  - a BF16 tensor of a Hugging Face folder, widened here with NumPy;
  - errors: a missing tensor, --npy without --tensor.
Prints "N passed, N failed".

usage: inspect_npy.py INFERNO FIXTURE_DIR MODEL_Q8_0.gguf HF_BF16_FOLDER
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAILED: {what} {detail}")


def gguf_tensors(path):
    """{name: (type id, ne fastest-first, absolute data offset)} of a GGUF file."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = buf[pos:pos + n].decode()
        pos += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t in scalar:
            return take(scalar[t])
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError(f"GGUF value type {t}")

    assert buf[:4] == b"GGUF", path
    pos = 4
    take("I")  # version
    n_tensors, n_kv = take("Q"), take("Q")
    alignment = 32
    for _ in range(n_kv):
        key = string()
        v = value(take("I"))
        if key == "general.alignment":
            alignment = v
    infos = []
    for _ in range(n_tensors):
        name = string()
        n_dims = take("I")
        ne = [take("Q") for _ in range(n_dims)]
        infos.append((name, take("I"), ne, take("Q")))
    data = (pos + alignment - 1) // alignment * alignment
    return {name: (t, ne, data + off) for name, t, ne, off in infos}


def run_npy(inferno, path, name, out):
    r = subprocess.run([inferno, "inspect", path, "--tensor", name, "--npy", out],
                       capture_output=True, text=True)
    return r


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def main():
    inferno, fixtures, q8_model, hf = sys.argv[1:5]
    tmp = tempfile.mkdtemp()
    files = sorted(glob.glob(os.path.join(fixtures, "quant-*.gguf")))
    check(len(files) >= 15, "fixtures found", f"{len(files)} in {fixtures}")
    # and the repository's own, for the types the shared folder lacks
    files += sorted(glob.glob(os.path.join("tests", "fixtures", "quant", "quant-*.gguf")))
    for path in files:
        info = gguf_tensors(path)
        _, ne, off = info["deq"]
        raw = np.fromfile(path, dtype="<f4", count=ne[0] * ne[1], offset=off).reshape(ne[1], ne[0])
        for name in ("q", "deq"):
            out = os.path.join(tmp, f"{os.path.basename(path)}.{name}.npy")
            r = run_npy(inferno, path, name, out)
            if r.returncode:
                check(False, f"{path} {name}: inspect", r.stderr)
                continue
            a = np.load(out)
            check(same_bits(a, raw), f"{os.path.basename(path)} {name}: equals deq bit for bit",
                  f"shape {a.shape} dtype {a.dtype}, first {a.ravel()[:4]} vs {raw.ravel()[:4]}")

    # Q8_0 dequantized here: blocks of an f16 scale and 32 int8.
    info = gguf_tensors(q8_model)
    name = "blk.0.attn_q.weight"
    t, ne, off = info[name]
    check(t == 8, f"{name} is Q8_0", f"type {t}")
    n_blocks = ne[0] * ne[1] // 32
    blocks = np.fromfile(q8_model, dtype=np.dtype([("d", "<f2"), ("q", "i1", 32)]), count=n_blocks, offset=off)
    want = (blocks["d"].astype(np.float32)[:, None] * blocks["q"].astype(np.float32)).reshape(ne[1], ne[0])
    out = os.path.join(tmp, "q8.npy")
    r = run_npy(inferno, q8_model, name, out)
    check(r.returncode == 0, f"{q8_model} {name}: inspect", r.stderr)
    if r.returncode == 0:
        check(same_bits(np.load(out), want), f"{name}: Q8_0 dequantized by NumPy")
        check(f"shape [{ne[0]}, {ne[1]}]" in r.stdout, f"{name}: the printed shape", r.stdout[:200])

    # BF16 from safetensors, read here: 8-byte header length, JSON header, data.
    st = os.path.join(hf, "model.safetensors")
    with open(st, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    name = "model.layers.0.self_attn.k_proj.weight"
    h = header[name]
    check(h["dtype"] == "BF16", f"{name} is BF16", h["dtype"])
    lo, hi = h["data_offsets"]
    bits = np.fromfile(st, dtype="<u2", count=(hi - lo) // 2, offset=8 + n + lo)
    want = (bits.astype(np.uint32) << 16).view(np.float32).reshape(h["shape"])
    out = os.path.join(tmp, "bf16.npy")
    r = run_npy(inferno, hf, name, out)
    check(r.returncode == 0, f"{hf} {name}: inspect", r.stderr)
    if r.returncode == 0:
        check(same_bits(np.load(out), want), f"{name}: BF16 widened by NumPy, shape {h['shape']}")

    # Errors are errors, and say what is wrong.
    r = run_npy(inferno, q8_model, "no.such.tensor", os.path.join(tmp, "x.npy"))
    check(r.returncode != 0 and "no tensor named 'no.such.tensor'" in r.stderr, "a missing tensor", r.stderr)
    r = subprocess.run([inferno, "inspect", q8_model, "--npy", os.path.join(tmp, "y.npy")],
                       capture_output=True, text=True)
    check(r.returncode != 0 and "--npy needs --tensor" in r.stderr, "--npy without --tensor", r.stderr)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
