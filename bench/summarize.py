#!/usr/bin/env python3
"""bench/summarize.py — markdown tables from one or more bench/run.sh results.json.

Usage: bench/summarize.py [--capacity-plot OUT.png] LABEL=out/dir/results.json ...

For each run: one table per ids value with, per path and thread count, the
wall-clock queries/s, its ratio to direct, p50 latency, proxy CPU us/query
(user+sys), backend CPU us/lookup, backend capacity and backend connections.
Then the headline: per run and path, the median and range of the
throughput ratios to direct over the cells, the cells where the path beats
direct, and the range of its backend capacity.
With --capacity-plot: also a gnuplot PNG (OUT.png, script OUT.png.gp), one
panel per run, backend capacity (backend CPU per lookup direct / through the
path; > 1: the backend works less per lookup) against threads, one line per
path x ids.
Standard library only (json, subprocess for gnuplot).
"""
import json
import subprocess
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


def capacity_plot(runs, png):
    n = len(runs)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    gp = [f"set terminal pngcairo size {700 * cols},{450 * rows} noenhanced",
          f"set output '{png}'", f"set multiplot layout {rows},{cols}",
          "set logscale x", "set xrange [0.8:125]", "set grid", "set key top left",
          "set xlabel 'client threads'", "set ylabel 'backend capacity (x direct)'"]
    blocks = 0
    for label, d in runs:
        res = d["results"]
        plots = []
        for name in sorted({r["path"] for r in res} - {"direct"}):
            for ids in d["config"]["ids"]:
                pts = sorted((r["threads"], r.get("backend_capacity")) for r in res
                             if r["path"] == name and r["ids"] == ids)
                pts = [(t, c) for t, c in pts if c is not None]
                if not pts:
                    continue
                gp.append(f"$b{blocks} << EOD")
                gp += [f"{t} {c}" for t, c in pts]
                gp.append("EOD")
                plots.append(f"$b{blocks} using 1:2 with linespoints title '{name} {ids} id'")
                blocks += 1
        gp.append(f"set title '{label}: backend CPU per lookup, direct / through the path'")
        gp.append("plot " + ", ".join(plots) + ", 1 with lines dt 2 lc rgb 'black' title 'direct'")
    gp.append("unset multiplot")
    with open(png + ".gp", "w") as f:
        f.write("\n".join(gp) + "\n")
    subprocess.run(["gnuplot", png + ".gp"], check=True)


def main():
    runs = []
    args = sys.argv[1:]
    png = None
    if len(args) >= 2 and args[0] == "--capacity-plot":
        png, args = args[1], args[2:]
    for arg in args:
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
    if png:
        capacity_plot(runs, png)


if __name__ == "__main__":
    main()
