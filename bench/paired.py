#!/usr/bin/env python3
"""bench/paired.py — paired ratios from one bench/run.sh results.json.

Usage: bench/paired.py [--ref PATH] results.json

mongoplex-bench runs every path once per repeat, in a balanced order, so the
paths of one repeat ran seconds apart. On a machine whose speed drifts (a
VM whose host is busy: here one path's throughput moved 2x between repeats
of one run) the median over repeats of each path alone still mixes fast
and slow periods; the ratio of two paths within each repeat does not.

For each cell (threads x ids) and path other than REF (default: relay):
the median over repeats of (path's q/s / REF's q/s in the same repeat), its
lowest and highest, and the same for p50 (path / REF; < 1: path faster).
Standard library only.
"""
import json
import sys


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def qps(run):
    return run["queries"] / run["wall_ms"] * 1000.0 if run["wall_ms"] else 0.0


def main():
    args = sys.argv[1:]
    ref = "relay"
    if len(args) >= 2 and args[0] == "--ref":
        ref, args = args[1], args[2:]
    if len(args) != 1:
        sys.exit("usage: bench/paired.py [--ref PATH] results.json")
    with open(args[0]) as f:
        d = json.load(f)
    res = d["results"]
    refs = {(r["threads"], r["ids"]): r for r in res if r["path"] == ref}
    if not refs:
        sys.exit(f"paired.py: no path named {ref} in {args[0]}")
    print(f"paired ratios to {ref} (per repeat: the paths of one repeat ran back to back)")
    print("| path | threads | ids | repeats | q/s ratio, median | range | p50 ratio, median | range |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(res, key=lambda r: (r["path"], r["threads"], r["ids"])):
        base = refs.get((r["threads"], r["ids"]))
        if r["path"] == ref or base is None:
            continue
        pairs = [(qps(a) / qps(b), a["p50_us"] / b["p50_us"])
                 for a, b in zip(r["runs"], base["runs"]) if qps(b) > 0 and b["p50_us"]]
        if not pairs:
            continue
        q = [x for x, _ in pairs]
        p = [y for _, y in pairs]
        print(f"| {r['path']} | {r['threads']} | {r['ids']} | {len(pairs)} | {median(q):.3f} | "
              f"{min(q):.2f}-{max(q):.2f} | {median(p):.3f} | {min(p):.2f}-{max(p):.2f} |")


if __name__ == "__main__":
    main()
