#!/usr/bin/env python3
"""The library objects the fuzz targets link, so that `make fuzz` compiles
only those with clang's sanitizers (the SIMD kernels, which no parser calls,
are the slowest files to build that way, and the targets never contain them).

Usage: lib_objs.py BUILD OBJ... -- FUZZ_OBJ...
BUILD: the plain build's folder; OBJ: its library objects (build/src/...o);
FUZZ_OBJ: the fuzz targets compiled without sanitizers. Prints, one a line,
each needed library object with BUILD/ cut off (src/x/y.o): the closure of
the targets' undefined symbols over the objects' definitions, as the linker
takes archive members. Where the clang build needs one more (an optimizer
kept a call that gcc's removed), the link fails and `make fuzz` builds the
whole library instead."""
import subprocess
import sys


def syms(path):
    out = subprocess.run(["nm", "-P", path], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in "Uw" or kind == "v":
            if kind == "U":
                undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, undefined


def main():
    args = sys.argv[1:]
    build, rest = args[0], args[1:]
    sep = rest.index("--")
    objs, fuzz_objs = rest[:sep], rest[sep + 1:]
    definer, needs = {}, {}
    for o in objs:
        d, u = syms(o)
        needs[o] = u
        for s in d:
            definer.setdefault(s, o)
    todo = set()
    for f in fuzz_objs:
        todo |= syms(f)[1]
    seen_syms, chosen = set(), set()
    while todo:
        s = todo.pop()
        if s in seen_syms:
            continue
        seen_syms.add(s)
        o = definer.get(s)
        if o is not None and o not in chosen:
            chosen.add(o)
            todo |= needs[o] - seen_syms
    prefix = build.rstrip("/") + "/"
    for o in sorted(chosen):
        print(o[len(prefix):] if o.startswith(prefix) else o)


if __name__ == "__main__":
    main()
