#!/usr/bin/env python3
"""Two GGUF files side by side: header, every metadata key (order, type, value), every tensor
(order, type, shape, offset, bytes), alignment, data section start and file size. Used to compare
a file `inferno quantize` writes with the one llama.cpp's quantizer writes from the same input
(tools/llamacpp-quantize.py; docs/QUANTIZE.md). Not part of CI.

usage: python3 gguf-diff.py A.gguf B.gguf [--quiet]
Prints each difference and a closing summary line; exit status 1 when the tensors' types,
shapes or bytes differ (metadata differences are reported, and counted, but do not fail)."""
import mmap
import struct
import sys

TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K",
              11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 20: "IQ4_NL", 23: "IQ4_XS", 30: "BF16",
              39: "MXFP4"}
# block elements, block bytes
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
         20: (32, 18), 23: (256, 136), 30: (1, 2), 39: (32, 17)}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
VTYPE = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool", 8: "str", 9: "arr",
         10: "u64", 11: "i64", 12: "f64"}


def read(path):
    f = open(path, "rb")
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, m, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        s = bytes(m[pos:pos + n]).decode("utf-8", "replace")
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return (VTYPE[et], [value(et) for _ in range(n)])
        return take(SCALAR[t])

    if m[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    meta = {}
    for _ in range(n_kv):
        k = string()
        t = take("<I")
        meta[k] = (VTYPE[t], value(t))
    tensors = []
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        tensors.append((name, ne, take("<I"), take("<Q")))
    align = meta.get("general.alignment", ("u32", 32))[1]
    base = (pos + align - 1) // align * align
    return {"m": m, "version": version, "meta": meta, "tensors": tensors, "align": align, "base": base,
            "size": len(m)}


def nbytes(ne, t):
    n = 1
    for d in ne:
        n *= d
    block, bb = BLOCK[t]
    return n // block * bb


def short(v):
    s = repr(v)
    return s if len(s) < 80 else s[:77] + "..."


def main(argv):
    quiet = "--quiet" in argv
    argv = [a for a in argv if a != "--quiet"]
    if len(argv) != 2:
        sys.exit(__doc__)
    a, b = read(argv[0]), read(argv[1])
    say = (lambda *x: None) if quiet else print
    n_meta = 0
    for k in ("version", "align", "base", "size"):
        if a[k] != b[k]:
            say(f"{k}: {a[k]} vs {b[k]}")
    ka, kb = list(a["meta"]), list(b["meta"])
    for k in ka:
        if k not in b["meta"]:
            n_meta += 1
            say(f"metadata only in A: {k} = {short(a['meta'][k])}")
        elif a["meta"][k] != b["meta"][k]:
            n_meta += 1
            say(f"metadata {k}: {short(a['meta'][k])} vs {short(b['meta'][k])}")
    for k in kb:
        if k not in a["meta"]:
            n_meta += 1
            say(f"metadata only in B: {k} = {short(b['meta'][k])}")
    common = [k for k in ka if k in b["meta"]]
    if common != [k for k in kb if k in a["meta"]]:
        n_meta += 1
        say("metadata: the shared keys come in a different order")
    ta = {t[0]: t for t in a["tensors"]}
    tb = {t[0]: t for t in b["tensors"]}
    n_bad = n_same = 0
    if [t[0] for t in a["tensors"]] != [t[0] for t in b["tensors"]]:
        say("tensors: a different set or order of names")
    for name in ta:
        if name not in tb:
            n_bad += 1
            say(f"tensor only in A: {name}")
            continue
        (_, nea, tya, offa), (_, neb, tyb, offb) = ta[name], tb[name]
        if nea != neb or tya != tyb:
            n_bad += 1
            say(f"tensor {name}: {TYPE_NAMES.get(tya, tya)} {nea} vs {TYPE_NAMES.get(tyb, tyb)} {neb}")
            continue
        if offa % a["align"] or offb % b["align"]:
            say(f"tensor {name}: offset not aligned ({offa}, {offb})")
        n = nbytes(nea, tya)
        da = a["m"][a["base"] + offa:a["base"] + offa + n]
        db = b["m"][b["base"] + offb:b["base"] + offb + n]
        if da == db:
            n_same += 1
            continue
        n_bad += 1
        block = BLOCK[tya][1]
        nblk = n // block
        diff = sum(1 for i in range(nblk) if da[i * block:(i + 1) * block] != db[i * block:(i + 1) * block])
        say(f"tensor {name} ({TYPE_NAMES.get(tya, tya)}): {diff} of {nblk} blocks differ")
    for name in tb:
        if name not in ta:
            n_bad += 1
            say(f"tensor only in B: {name}")
    print(f"{len(ta)} tensors: {n_same} byte-identical, {n_bad} differ; {len(ka)} / {len(kb)} metadata keys, "
          f"{n_meta} differences; alignment {a['align']} / {b['align']}, data at {a['base']} / {b['base']}, "
          f"{a['size']} / {b['size']} bytes")
    return 1 if n_bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
