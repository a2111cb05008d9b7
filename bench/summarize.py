#!/usr/bin/env python3
"""bench/summarize.py — markdown tables from one or more bench/run.sh results.json.

Usage: bench/summarize.py LABEL=out/dir/results.json ...

For each run: one table per ids value with, per path and thread count, the
wall-clock queries/s, its ratio to direct, p50 latency, proxy CPU us/query
(user+sys), backend CPU us/lookup, backend capacity and backend connections.
Then the headline: per run and path, the median and range of the
throughput ratios to direct over the cells, the cells where the path beats
direct, and the range of its backend capacity.
Standard library only (json), so it runs wherever run.sh does.
"""
import json
import sys


def fmt(v, nd=0):
    if v is None:
        return "-"
    return f"{v:,.{nd}f}"


def table(label, d):
    res = d["results"]
    ids_values = d["config"]["ids"]
    paths = d["config"]["paths"]
    names = [p["name"] if isinstance(p, dict) else p for p in paths]
    direct = {(r["threads"], r["ids"]): r for r in res if r["path"] == "direct"}
    out = []
    for ids in ids_values:
        out.append(f"\n**{label}, {ids} id{'s' if ids != 1 else ''} per query**\n")
        out.append("| path | threads | q/s wall | vs direct | p50 us | proxy CPU us/q | "
                   "backend CPU us/lookup | backend capacity | backend conns |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for name in names:
            for r in sorted((r for r in res if r["path"] == name and r["ids"] == ids),
                            key=lambda r: r["threads"]):
                dr = direct.get((r["threads"], ids))
                ratio = r["tput_wall_qps"] / dr["tput_wall_qps"] if dr else None
                u, s = r.get("proxy_user_us_per_query"), r.get("proxy_sys_us_per_query")
                cpu = u + s if u is not None and s is not None else None
                bad = " (errors)" if r.get("errors") or r.get("mismatches") else ""
                out.append(f"| {name}{bad} | {r['threads']} | {fmt(r['tput_wall_qps'])} | "
                           f"{fmt(ratio, 2)} | {fmt(r['p50_us'])} | {fmt(cpu, 1)} | "
                           f"{fmt(r.get('backend_cpu_us_per_lookup'), 1)} | "
                           f"{fmt(r.get('backend_capacity'), 2)} | {fmt(r.get('backend_conns'))} |")
    return "\n".join(out)


def headline(label, d):
    res = d["results"]
    direct = {(r["threads"], r["ids"]): r for r in res if r["path"] == "direct"}
    lines = []
    for name in sorted({r["path"] for r in res} - {"direct"}):
        rs = [(r, r["tput_wall_qps"] / direct[(r["threads"], r["ids"])]["tput_wall_qps"])
              for r in res if r["path"] == name and (r["threads"], r["ids"]) in direct]
        if not rs:
            continue
        xs = sorted(x for _, x in rs)
        lo, hi, med = xs[0], xs[-1], xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
        wins = [f"{r['threads']}x{r['ids']} {x:.2f}" for r, x in rs if x > 1.0]
        caps = [r.get("backend_capacity") for r, _ in rs if r.get("backend_capacity")]
        lines.append(f"| {label} | {name} | {med:.2f} | {lo:.2f}-{hi:.2f} | "
                     f"{', '.join(wins) if wins else 'none'} | "
                     f"{(f'{min(caps):.2f}-{max(caps):.2f}') if caps else '-'} |")
    return lines


def main():
    runs = []
    for arg in sys.argv[1:]:
        label, _, path = arg.partition("=")
        with open(path) as f:
            runs.append((label, json.load(f)))
    print("| run | path | throughput / direct, median of cells | range | cells faster than direct "
          "(threads x ids: ratio) | backend capacity |")
    print("|---|---|---|---|---|---|")
    for label, d in runs:
        print("\n".join(headline(label, d)))
    for label, d in runs:
        print(table(label, d))


if __name__ == "__main__":
    main()
