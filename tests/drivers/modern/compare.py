#!/usr/bin/env python3
# Compares the modern-driver transcripts and prints the driver matrix.
#
#   compare.py DIR NAME...
#
# DIR holds, for every NAME, NAME.direct.json and NAME.proxy.json (the
# transcripts, see README.md) and NAME.{direct,proxy}.status ("rc seconds
# runtime" written by run.sh; a missing transcript is explained by the run's
# log NAME.{direct,proxy}.log). A driver passes when both runs wrote a
# transcript, no step reports an error, the proxy transcript equals the direct
# one exactly (field order and BSON types included, command counts included),
# and its direct results equal PyMongo's (the reference; compared as JSON
# values, so field order and the drivers' own bookkeeping -- command counts,
# the order of keys in result summaries -- are not part of that check).
# MODERN_MODES (default "direct proxy") may add "lbcomp" (run.sh's
# MODERN_LB_COMPRESS=1 pass: proxy URI with loadBalanced=true and
# compressors): its transcript must equal the direct one the same way, and its
# NAME.lbcomp.effect line (lbcomp_effect.py: the proxy's counters showed LB
# and compression in effect for that run) must start with "ok".
# Exit 0 when every NAME passed.
import json
import os
import sys

REFERENCE = "pymongo"


def load(path, ordered):
    hook = (lambda pairs: ("{}", tuple(pairs))) if ordered else None
    with open(path) as f:
        return json.load(f, object_pairs_hook=hook)


def first_diff(a, b, path="$"):
    """Path of the first difference between two JSON values (None if equal)."""
    if isinstance(a, tuple) and isinstance(b, tuple) and a[:1] == ("{}",) == b[:1]:
        ka, kb = [k for k, _ in a[1]], [k for k, _ in b[1]]
        if ka != kb:
            return "%s keys %s != %s" % (path, ka, kb)
        for (k, va), (_, vb) in zip(a[1], b[1]):
            d = first_diff(va, vb, "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            return "%s keys %s != %s" % (path, sorted(a), sorted(b))
        for k in sorted(a):
            d = first_diff(a[k], b[k], "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return "%s length %d != %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    if a != b or type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return "%s: %s != %s" % (path, json.dumps(untuple(a))[:200], json.dumps(untuple(b))[:200])
    return None


def untuple(v):
    if isinstance(v, tuple) and v[:1] == ("{}",):
        return {k: untuple(x) for k, x in v[1]}
    if isinstance(v, list):
        return [untuple(x) for x in v]
    return v


def step_errors(t):
    return ["%s: %s" % (s["op"], json.dumps(s["error"])[:300]) for s in t["steps"] if "error" in s]


def status(d, name, mode):
    try:
        with open(os.path.join(d, "%s.%s.status" % (name, mode))) as f:
            rc, secs, runtime = (f.read().split(None, 2) + ["?", "?", "?"])[:3]
            return rc, secs, runtime.strip()
    except OSError:
        return "?", "?", "?"


def log_tail(d, name, mode, ext="log"):
    try:
        with open(os.path.join(d, "%s.%s.%s" % (name, mode, ext))) as f:
            lines = [ln.rstrip() for ln in f if ln.strip()]
        return " | ".join(lines[-3:])[:400] or "(no output)"
    except OSError:
        return "(no log)"


def check(d, name, reference):
    """Returns (rows, problems) for one driver."""
    rows, problems, ts = [], [], {}
    modes = os.environ.get("MODERN_MODES", "direct proxy").split()
    for mode in modes:
        rc, secs, runtime = status(d, name, mode)
        path = os.path.join(d, "%s.%s.json" % (name, mode))
        row = {"mode": mode, "rc": rc, "secs": secs, "runtime": runtime, "version": "?", "steps": 0, "cmds": "-"}
        if rc == "0" and os.path.exists(path):
            t = load(path, ordered=False)
            ts[mode] = t
            row["version"] = t.get("version") or "?"
            row["steps"] = len(t["steps"])
            if t.get("commands") is not None:
                c = t["commands"]
                row["cmds"] = "%d (find %d, getMore %d)" % (sum(c.values()), c.get("find", 0), c.get("getMore", 0))
            for e in step_errors(t):
                problems.append("%s: step error: %s" % (mode, e))
        else:
            problems.append("%s: did not run (rc=%s): %s" % (mode, rc, log_tail(d, name, mode)))
        rows.append(row)
    for mode in modes[1:]:
        if "direct" in ts and mode in ts:
            a = load(os.path.join(d, name + ".direct.json"), ordered=True)
            b = load(os.path.join(d, "%s.%s.json" % (name, mode)), ordered=True)
            diff = first_diff(a, b)
            if diff:
                problems.append("direct vs %s: %s" % (mode, diff))
    if "lbcomp" in modes:
        effect = log_tail(d, name, "lbcomp", "effect")
        rows[modes.index("lbcomp")]["effect"] = effect
        if not effect.startswith("ok"):
            problems.append("lbcomp: not in effect on the proxy: " + effect)
    if "direct" in ts and reference is not None and name != REFERENCE:
        diff = first_diff({"steps": reference["steps"]}, {"steps": ts["direct"]["steps"]})
        if diff:
            problems.append("direct results differ from %s's: %s" % (REFERENCE, diff))
    return rows, problems


def main():
    if len(sys.argv) < 3:
        print("usage: compare.py DIR NAME...", file=sys.stderr)
        return 2
    d, names = sys.argv[1], sys.argv[2:]
    ref_path = os.path.join(d, REFERENCE + ".direct.json")
    reference = load(ref_path, ordered=False) if os.path.exists(ref_path) else None
    failed = []
    print("%-9s %-8s %-7s %-6s %5s %6s  %-26s %s" % ("driver", "version", "mode", "result", "steps", "secs",
                                                   "commands", "runtime"))
    effects = []
    for name in names:
        rows, problems = check(d, name, reference)
        verdict = "FAIL" if problems else "pass"
        for r in rows:
            print("%-9s %-8s %-7s %-6s %5d %6s  %-26s %s" % (name, r["version"], r["mode"], verdict, r["steps"],
                                                           r["secs"], r["cmds"], r["runtime"]))
        effects += ["%-9s %s" % (name, r["effect"]) for r in rows if "effect" in r]
        for p in problems:
            print("  %s: %s" % (name, p))
        if problems:
            failed.append(name)
    if effects:
        print("lbcomp runs, proxy counters during each (loadBalanced=true + compressors):")
        for e in effects:
            print("  " + e)
    if reference is None:
        print("no %s direct transcript: cross-driver comparison not possible" % REFERENCE)
        failed.append(REFERENCE + "(reference)")
    print("modern drivers: %d passed, %d failed%s" % (len(names) - len(set(failed) & set(names)),
                                                   len(set(failed) & set(names)),
                                                   (": " + " ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
