#!/usr/bin/env python3
"""check-cycles.py — no call circle of more than 3 files inside pool/ or proxy/.

Builds the file-level call graph of each layer from the object files of a
build: for every pool/X.c.o (proxy/X.c.o) under BUILD_DIR, `nm` gives the
symbols it defines (T, D, B, R, ...) and the ones it needs (U); file A -> B
when A needs a symbol B defines, both in the same layer. It finds the
strongly connected components (Tarjan) and fails (exit 1) when one holds
more than MAX files (default 3), printing each such circle with the calls
that make it. --graph prints every edge and every circle of 2 or more files
(docs/architecture.md's picture is drawn from it).

Both layers are held to the limit: KNOWN below, the ratchet that tolerated
a circle while it was being broken, is empty (--strict ignores it anyway).

Usage: scripts/check-cycles.py [--max N] [--strict] [--graph] [BUILD_DIR]   (default: build)
Objects are taken from the product library (a path with mongoplex_core.dir)
when present, else from the first directory holding them; the self-test
(tests/scripts/test_check_cycles.sh) passes a fake build.
"""
import argparse
import os
import subprocess
import sys

LAYERS = ("pool", "proxy")

# Circles over the limit tolerated up to their size (a ratchet for a layer
# that does not pass yet; --strict ignores it). Empty: pool/ and proxy/ both
# pass at --max 3 (issue 22 item 6).
KNOWN = {}


def find_objects(build):
    """{layer: {file stem: .o path}}, one object per source file."""
    found = {layer: {} for layer in LAYERS}
    for dirpath, _, files in sorted(os.walk(build)):
        layer = os.path.basename(dirpath)
        if layer not in LAYERS:
            continue
        for f in sorted(files):
            if not f.endswith(".c.o") and not f.endswith(".o"):
                continue
            stem = f[: -len(".c.o")] if f.endswith(".c.o") else f[:-2]
            path = os.path.join(dirpath, f)
            have = found[layer].get(stem)
            if have is None or ("mongoplex_core.dir" in path and "mongoplex_core.dir" not in have):
                found[layer][stem] = path
    return found


def symbols(path):
    out = subprocess.run(["nm", "-P", path], check=True, capture_output=True, text=True).stdout
    defined, needed = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            needed.add(name)
        elif kind.isupper() and kind not in ("W", "V"):
            defined.add(name)
    return defined, needed


def graph(objs):
    """{file: {file: [symbols]}} within one layer."""
    syms = {f: symbols(p) for f, p in objs.items()}
    owner = {}
    for f, (defined, _) in syms.items():
        for s in defined:
            owner.setdefault(s, f)
    edges = {f: {} for f in syms}
    for f, (_, needed) in syms.items():
        for s in sorted(needed):
            g = owner.get(s)
            if g is not None and g != f:
                edges[f].setdefault(g, []).append(s)
    return edges


def sccs(edges):
    """Tarjan's strongly connected components, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=3)
    ap.add_argument("--graph", action="store_true")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("build", nargs="?", default="build")
    a = ap.parse_args()
    if not os.path.isdir(a.build):
        print(f"cycles: no build directory {a.build} (build first)", file=sys.stderr)
        return 2
    objs = find_objects(a.build)
    if not any(objs.values()):
        print(f"cycles: no pool/ or proxy/ object files under {a.build}", file=sys.stderr)
        return 2
    bad = 0
    for layer in LAYERS:
        edges = graph(objs[layer])
        comps = [c for c in sccs(edges) if len(c) > 1]
        if a.graph:
            for f in sorted(edges):
                for g in sorted(edges[f]):
                    print(f"{layer}/{f}.c -> {layer}/{g}.c  ({', '.join(edges[f][g][:4])}"
                          f"{', ...' if len(edges[f][g]) > 4 else ''})")
            for c in comps:
                print(f"{layer}: circle of {len(c)} files: {' '.join(c)}")
        limit = a.max if a.strict else max(a.max, KNOWN.get(layer, 0))
        for c in comps:
            if len(c) > a.max and len(c) <= limit:
                print(f"cycles: {layer}/: known circle of {len(c)} files (tolerated up to "
                      f"{limit}, goal {a.max}): {' '.join(c)}")
            if len(c) <= limit:
                continue
            bad += 1
            print(f"cycles: {layer}/: {len(c)} files call each other in a circle "
                  f"(at most {limit}): {' '.join(c)}", file=sys.stderr)
            members = set(c)
            for f in c:
                for g in sorted(edges[f]):
                    if g in members:
                        print(f"  {f}.c -> {g}.c: {', '.join(edges[f][g])}", file=sys.stderr)
    n = sum(len(v) for v in objs.values())
    if bad:
        print(f"cycles: {bad} circle(s) over the limit in {n} objects", file=sys.stderr)
        return 1
    print(f"cycles: {n} objects OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
