#!/usr/bin/env python3
"""llama.cpp's own quantizer (llama_model_quantize in node-llama-cpp's prebuilt libllama.so,
called through ctypes), so that a file `inferno quantize` writes can be compared with the file
llama-quantize writes from the same input: metadata, tensor types and bytes
(tests/oracle/gguf_compare.py). Not part of CI; set-up as in tools/llamacpp-check.mjs.

usage: python3 llamacpp-quantize.py [--lib DIR] IN.gguf OUT.gguf FTYPE [THREADS]
FTYPE is llama.cpp's llama_ftype number (the numbers `inferno quantize --help` lists).
The struct below is llama_model_quantize_params of the llama.cpp release node-llama-cpp 3.22.1
bundles (include/llama.h in node_modules/node-llama-cpp/llama/gitRelease.bundle)."""
import ctypes
import glob
import importlib.util
import os
import sys


class Params(ctypes.Structure):
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int), ("output_tensor_type", ctypes.c_int),
                ("token_embedding_type", ctypes.c_int), ("allow_requantize", ctypes.c_bool),
                ("quantize_output_tensor", ctypes.c_bool), ("only_copy", ctypes.c_bool), ("pure", ctypes.c_bool),
                ("keep_split", ctypes.c_bool), ("dry_run", ctypes.c_bool), ("imatrix", ctypes.c_void_p),
                ("kv_overrides", ctypes.c_void_p), ("tt_overrides", ctypes.c_void_p),
                ("prune_layers", ctypes.c_void_p), ("max_buf_size", ctypes.c_size_t)]


class ImatrixEntry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.POINTER(ctypes.c_float)), ("size", ctypes.c_size_t)]


def imatrix_ones(path):
    """llama_model_imatrix_data entries of ones, one per matrix of the GGUF at path (its row
    width times its experts), ending in a NULL name"""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("gguf_diff", os.path.join(here, "gguf-diff.py"))
    gguf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gguf)
    mats = [(name, ne[0] * (ne[2] if len(ne) > 2 else 1)) for name, ne, _, _ in gguf.read(path)["tensors"]
            if len(ne) >= 2]
    ones = (ctypes.c_float * max(n for _, n in mats))(*([1.0] * max(n for _, n in mats)))
    entries = (ImatrixEntry * (len(mats) + 1))()
    for i, (name, n) in enumerate(mats):
        entries[i] = ImatrixEntry(name.encode(), ones, n)
    return entries, ones


def main(argv):
    lib = "/tmp/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins"
    pure = ones = False
    while argv and argv[0].startswith("--"):
        if argv[0] == "--lib" and len(argv) > 1:
            lib, argv = argv[1], argv[2:]
        elif argv[0] == "--pure":
            pure, argv = True, argv[1:]
        elif argv[0] == "--imatrix-ones":
            ones, argv = True, argv[1:]
        else:
            sys.exit(__doc__)
    if len(argv) not in (3, 4) or not argv[2].isdigit():
        sys.exit(__doc__)
    found = glob.glob(os.path.join(lib, "**", "libllama*.so"), recursive=True)
    if not found:
        sys.exit(f"no libllama*.so under {lib}")
    ll = ctypes.CDLL(found[0])
    ll.llama_model_quantize_default_params.restype = Params
    ll.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(Params)]
    ll.llama_model_quantize.restype = ctypes.c_uint32
    ll.llama_backend_init()
    p = ll.llama_model_quantize_default_params()
    p.ftype = int(argv[2])
    p.nthread = int(argv[3]) if len(argv) == 4 else 2
    p.pure = pure
    if ones:
        keep = imatrix_ones(argv[0])  # alive until the quantizer returns
        p.imatrix = ctypes.cast(keep[0], ctypes.c_void_p)
    rc = ll.llama_model_quantize(argv[0].encode(), argv[1].encode(), ctypes.byref(p))
    if rc:
        sys.exit(f"llama_model_quantize failed ({rc})")


if __name__ == "__main__":
    main(sys.argv[1:])
