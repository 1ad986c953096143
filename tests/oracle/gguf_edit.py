#!/usr/bin/python3
"""Rewrites a GGUF file the way other tools lay files out, for the checks:

  gguf_edit.py IN OUT --arch NAME
      general.architecture becomes NAME and every OLD.* key NAME.* (a
      qwen3 file as a qwen3vl one, as llama.cpp names Qwen3-VL's text model).
  gguf_edit.py IN OUT --str KEY VALUE
      the string KEY becomes VALUE (added when the file lacks it), e.g.
      tokenizer.ggml.pre as another converter names the pre-tokenizer.
  gguf_edit.py IN OUT --mtp 1
      a multi-token-prediction block appended after the trunk as llama.cpp's
      qwen35/qwen35moe converter writes one (<arch>.block_count + 1,
      <arch>.nextn_predict_layers 1, blk.N.* for the new last block N: the
      last layer's tensors again and nextn.eh_proj / enorm / hnorm /
      shared_head_norm), every value of it 1e6 (F32): a reader that ran it
      would give other logits.
  gguf_edit.py IN OUT_PREFIX --split N
      llama.cpp's gguf-split layout: OUT_PREFIX-0000i-of-0000N.gguf, the first
      with all metadata, each with split.no/count/tensors.count and its share
      of the tensors (their data copied byte for byte).

Written from the GGUF specification; parses only what it rewrites."""
import struct
import sys

SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def parse(raw):
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, raw, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("<Q")
        s = raw[pos:pos + n]
        pos += n
        return s

    def skip_value(t):
        nonlocal pos
        if t == 8:
            string()
        elif t == 9:
            et, n = take("<I"), take("<Q")
            for _ in range(n):
                skip_value(et)
        else:
            pos += SCALAR[t]

    assert raw[:4] == b"GGUF"
    pos = 4
    version, n_tensors, n_kv = take("<I"), take("<Q"), take("<Q")
    kvs = []  # (key bytes, type, raw value bytes)
    for _ in range(n_kv):
        key = string()
        t = take("<I")
        start = pos
        skip_value(t)
        kvs.append((key, t, raw[start:pos]))
    tensors = []  # (name, dims, type, offset)
    for _ in range(n_tensors):
        name = string()
        nd = take("<I")
        dims = [take("<Q") for _ in range(nd)]
        ty = take("<I")
        off = take("<Q")
        tensors.append((name, dims, ty, off))
    align = 32
    for key, t, v in kvs:
        if key == b"general.alignment":
            align = struct.unpack("<I", v)[0]
    data = (pos + align - 1) // align * align
    return version, kvs, tensors, align, data


def sizes(tensors, end):
    """Each tensor's byte size: up to the next offset (offsets are ascending)."""
    offs = sorted(set(t[3] for t in tensors)) + [end]
    nxt = {o: offs[i + 1] for i, o in enumerate(offs[:-1])}
    return [nxt[t[3]] - t[3] for t in tensors]


def s(b):
    return struct.pack("<Q", len(b)) + b


def write(path, version, kvs, tensors, blobs, align):
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, t, v in kvs:
        head += s(key) + struct.pack("<I", t) + v
    off, infos, body = 0, b"", []  # body: the pieces, joined once (no quadratic copies)
    for (name, dims, ty, _), blob in zip(tensors, blobs):
        pad = (off + align - 1) // align * align - off
        off += pad
        infos += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", ty, off)
        body += [b"\0" * pad, blob]
        off += len(blob)
    head += infos
    head += b"\0" * ((len(head) + align - 1) // align * align - len(head))
    with open(path, "wb") as f:
        f.write(head)
        f.writelines(body)


def main():
    src, out, what, arg = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    raw = open(src, "rb").read()
    version, kvs, tensors, align, data = parse(raw)
    blobs = [raw[data + t[3]:data + t[3] + n] for t, n in zip(tensors, sizes(tensors, len(raw) - data))]
    if what == "--arch":
        old = next(v for k, t, v in kvs if k == b"general.architecture")[8:]
        new = arg.encode()
        kvs = [(k, t, s(new) if k == b"general.architecture" else v) for k, t, v in kvs]
        kvs = [(new + k[len(old):] if k.startswith(old + b".") else k, t, v) for k, t, v in kvs]
        write(out, version, kvs, tensors, blobs, align)
        return 0
    if what == "--str":
        key, value = arg.encode(), s(sys.argv[5].encode())
        if not any(k == key for k, t, v in kvs):
            kvs.append((key, 8, value))
        kvs = [(k, t, value) if k == key else (k, t, v) for k, t, v in kvs]
        write(out, version, kvs, tensors, blobs, align)
        return 0
    if what == "--mtp":
        arch = next(v for k, t, v in kvs if k == b"general.architecture")[8:]
        bc = arch + b".block_count"
        n = struct.unpack("<I", next(v for k, t, v in kvs if k == bc))[0]
        kvs = [(k, t, struct.pack("<I", n + 1) if k == bc else v) for k, t, v in kvs]
        kvs.append((arch + b".nextn_predict_layers", 4, struct.pack("<I", 1)))
        emb = next(d for name, d, ty, o in tensors if name == b"token_embd.weight")[0]
        last = b"blk.%d." % (n - 1)
        extra = [(b"blk.%d." % n + name[len(last):], dims) for name, dims, ty, o in tensors
                 if name.startswith(last)]
        extra += [(b"blk.%d.nextn.eh_proj.weight" % n, [2 * emb, emb])]
        extra += [(b"blk.%d.nextn.%s.weight" % (n, w), [emb]) for w in (b"enorm", b"hnorm", b"shared_head_norm")]
        for name, dims in extra:
            count = 1
            for d in dims:
                count *= d
            tensors.append((name, dims, 0, 0))  # F32
            blobs.append(struct.pack("<f", 1e6) * count)
        write(out, version, kvs, tensors, blobs, align)
        return 0
    n = int(arg)
    per = (len(tensors) + n - 1) // n
    for i in range(n):
        split = [(b"split.no", 2, struct.pack("<H", i)), (b"split.count", 2, struct.pack("<H", n)),
                 (b"split.tensors.count", 5, struct.pack("<i", len(tensors)))]
        meta = (kvs if i == 0 else [kv for kv in kvs if kv[0] == b"general.alignment"]) + split
        part = slice(i * per, (i + 1) * per)
        write(f"{out}-{i + 1:05d}-of-{n:05d}.gguf", version, meta, tensors[part], blobs[part], align)
    return 0


if __name__ == "__main__":
    sys.exit(main())
