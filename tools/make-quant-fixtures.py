#!/usr/bin/env python3
"""Writes weight-type fixtures with ggml's own quantizer and dequantizer (node-llama-cpp's prebuilt
libggml-base.so, called through ctypes), in the form of ../shared/fixtures/quant/ (its README):
one GGUF per type, three tensors of 24 rows of 1024 weights: `src` (F32, the input), `q` (the
type, ggml_quantize_chunk of src) and `deq` (F32, ggml's to_float of q), metadata
general.architecture = "quant-fixture" and fixture.type = the type's name. This script wrote
tests/fixtures/quant/ for the types that folder lacks (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M). ggml will
not write those without an importance matrix; the one given is all ones (every weight alike).
Not part of CI (the files are committed); set-up of node-llama-cpp as in tools/llamacpp-check.mjs.

usage: /usr/bin/python3 tools/make-quant-fixtures.py [--lib DIR] OUT_DIR TYPE..."""
import ctypes
import glob
import os
import struct
import sys

import numpy as np

TYPES = {"iq2_xxs": 16, "iq2_xs": 17, "iq1_s": 19, "iq1_m": 29}
N, ROWS = 1024, 24


class Traits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool),
                ("to_float", ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)),
                ("from_float_ref", ctypes.c_void_p)]


def source_rows():
    """N(0, 0.02^2) rows, then the awkward ones: all zero, one sign only, two outliers, a 1e-6
    scale, a spike every 32, x40"""
    rng = np.random.default_rng(20261207)
    x = rng.normal(0, 0.02, (ROWS, N)).astype(np.float32)
    x[1] = 0
    x[2] = np.abs(x[2])
    x[3, 17], x[3, 900] = 1.5, -2.0
    x[4] *= 1e-4
    x[5, ::32] = 0.5
    x[6] *= 40
    return x


def gguf(path, type_id, type_name, src, q, deq):
    def s(v):
        b = v.encode()
        return struct.pack("<Q", len(b)) + b

    kv = [(s("general.architecture"), 8, s("quant-fixture")), (s("fixture.type"), 8, s(type_name))]
    tensors = [("src", 0, src.tobytes()), ("q", type_id, q), ("deq", 0, deq.tobytes())]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for k, t, v in kv:
        head += k + struct.pack("<I", t) + v
    off, body = 0, b""
    for name, t, data in tensors:
        head += s(name) + struct.pack("<I", 2) + struct.pack("<QQ", N, ROWS) + struct.pack("<IQ", t, off)
        pad = (-len(data)) % 32
        body += data + b"\0" * pad
        off += len(data) + pad
    head += b"\0" * ((-len(head)) % 32)
    with open(path, "wb") as f:
        f.write(head + body)


def main(argv):
    lib = "/tmp/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
    if len(argv) > 1 and argv[0] == "--lib":
        lib, argv = argv[1], argv[2:]
    if len(argv) < 2 or any(t not in TYPES for t in argv[1:]):
        sys.exit(__doc__)
    found = sorted(glob.glob(os.path.join(lib, "libggml-base*.so")))
    if not found:
        sys.exit(f"no libggml-base*.so in {lib}")
    g = ctypes.CDLL(found[0])
    g.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    g.ggml_quantize_chunk.restype = ctypes.c_size_t
    g.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    src = source_rows()
    ones = np.ones(N, dtype=np.float32)
    for name in argv[1:]:
        t = TYPES[name]
        tr = g.ggml_get_type_traits(t).contents
        row = tr.type_size * N // tr.blck_size
        q = ctypes.create_string_buffer(row * ROWS)
        n = g.ggml_quantize_chunk(t, src.ctypes.data, q, 0, ROWS, N, ones.ctypes.data)
        if n != row * ROWS:
            sys.exit(f"{name}: ggml wrote {n} bytes, not {row * ROWS}")
        deq = np.zeros((ROWS, N), dtype=np.float32)
        for r in range(ROWS):
            tr.to_float(ctypes.addressof(q) + r * row, deq.ctypes.data + 4 * r * N, N)
        gguf(os.path.join(argv[0], f"quant-{name}.gguf"), t, tr.type_name.decode(), src, q.raw, deq)
        print(f"{name}: {row} bytes a row, deq range {deq.min():.4g} .. {deq.max():.4g}")


if __name__ == "__main__":
    main(sys.argv[1:])
