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
import os
import sys


class Params(ctypes.Structure):
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int), ("output_tensor_type", ctypes.c_int),
                ("token_embedding_type", ctypes.c_int), ("allow_requantize", ctypes.c_bool),
                ("quantize_output_tensor", ctypes.c_bool), ("only_copy", ctypes.c_bool), ("pure", ctypes.c_bool),
                ("keep_split", ctypes.c_bool), ("dry_run", ctypes.c_bool), ("imatrix", ctypes.c_void_p),
                ("kv_overrides", ctypes.c_void_p), ("tt_overrides", ctypes.c_void_p),
                ("prune_layers", ctypes.c_void_p), ("max_buf_size", ctypes.c_size_t)]


def main(argv):
    lib = "/tmp/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins"
    if len(argv) > 1 and argv[0] == "--lib":
        lib, argv = argv[1], argv[2:]
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
    rc = ll.llama_model_quantize(argv[0].encode(), argv[1].encode(), ctypes.byref(p))
    if rc:
        sys.exit(f"llama_model_quantize failed ({rc})")


if __name__ == "__main__":
    main(sys.argv[1:])
