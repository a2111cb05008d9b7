#!/usr/bin/python3
"""demo-summary.py — the paragraphs scripts/demo.sh prints after its tables.

    demo-summary.py OUT_DIR CLK_TCK
    demo-summary.py --seed-model collect OUT_DIR SEED_DIR CURVE LOAD_BEFORE LOAD_AFTER CORES
    demo-summary.py --seed-model table|paragraph OUT_DIR
    demo-summary.py --seed-model elapsed OUT_DIR SECONDS

The first form, the in-memory backend's part: reads what the demo wrote in
OUT_DIR: demo.json (mongoplex-bench run, paths "direct" and "mongoplex"),
stats.json (mongoplexStats after that run) and cpu.txt (lines "PATH TICKS
LOOKUPS": the backend JVM's user+system clock ticks from /proc/PID/stat
around a run of LOOKUPS single-id lookups on PATH alone).

--seed-model, the model part (mongoplex-curvemodel: a model calibrated to
the report's table, not MongoDB): `collect` gathers SEED_DIR/paths.tsv (one
path a line: name, mongoplex settings, label, its model's URI, the URI
measured), SEED_DIR/bench.json (mongoplex-bench run), each path's
curveModelStatus and each proxy's mongoplexStats (pymongo), the cells of the
curve file CURVE (the seed's figures) and the load averages into demo.json
under "seed_model"; `table` prints the cells side by side with the seed's,
`paragraph` what they mean, `elapsed` records the part's wall time.

Every sentence is computed from those figures, nothing assumed.
"""

import json
import sys


def load_stats(path):
    with open(path) as f:
        return json.load(f)


def num(v):
    """Extended JSON numbers ({"$numberLong": "12"}) or plain ones."""
    if isinstance(v, dict):
        v = next(iter(v.values()))
    return float(v)


def cells(results):
    """{(threads, ids): {path: tput_wall_qps}}"""
    out = {}
    for r in results:
        out.setdefault((r["threads"], r["ids"]), {})[r["path"]] = r["tput_wall_qps"]
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--seed-model":
        seed_model(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    out_dir, clk_tck = sys.argv[1], float(sys.argv[2])
    with open(out_dir + "/demo.json") as f:
        bench = json.load(f)
    stats = load_stats(out_dir + "/stats.json")
    cpu = {}
    with open(out_dir + "/cpu.txt") as f:
        for line in f:
            name, ticks, lookups = line.split()
            cpu[name] = (float(ticks) / clk_tck, int(lookups))

    c, pool = stats["counters"], stats["pools"][0]
    clients, backends = num(c["clients_accepted"]), num(c["backend_connects"])
    lookups, merged = num(c["batch_lookups"]), num(c["batch_lookups_merged"])
    h = stats["histograms"]["batch_ids"]
    batches, ids_sum = num(h["count"]), num(h["sum"])

    faster = slower = 0
    best = worst = None
    for key, paths in sorted(cells(bench["results"]).items()):
        if "direct" not in paths or "mongoplex" not in paths or not paths["direct"]:
            continue
        ratio = paths["mongoplex"] / paths["direct"]
        if ratio >= 1:
            faster += 1
        else:
            slower += 1
        if best is None or ratio > best[0]:
            best = (ratio, key)
        if worst is None or ratio < worst[0]:
            worst = (ratio, key)

    lines = ["What this run shows:"]
    lines.append(
        "- %d client connections were served by %d backend connections (pool_size %d)."
        % (clients, backends, num(pool["poolSize"])))
    if lookups:
        lines.append(
            "- %.0f%% of the %d _id lookups through mongoplex were merged with at least one "
            "other; the batcher sent %d $in queries, %.1f distinct ids each on average "
            "(the clients asked for %s ids per query)."
            % (100.0 * merged / lookups, lookups, batches, ids_sum / batches if batches else 0,
               " or ".join(str(i) for i in bench["config"]["ids"])))
    if "direct" in cpu and "mongoplex" in cpu:
        d = 1e6 * cpu["direct"][0] / cpu["direct"][1]
        m = 1e6 * cpu["mongoplex"][0] / cpu["mongoplex"][1]
        lines.append(
            "- Backend CPU per lookup (100 threads, 1 id, the JVM's /proc/PID/stat): %.1f us "
            "direct, %.1f us through mongoplex (%.2fx)." % (d, m, m / d if d else 0))
    if best is not None:
        lines.append(
            "- mongoplex's wall-clock throughput beat direct in %d of %d cells and was below it "
            "in %d (best %.2fx at %d threads x %d ids, worst %.2fx at %d threads x %d ids)."
            % (faster, faster + slower, slower, best[0], best[1][0], best[1][1], worst[0],
               worst[1][0], worst[1][1]))
    lines.append(
        "Why: here the clients, mongoplex and an in-memory backend that answers a lookup in "
        "tens of microseconds share the same 2 cores, so the CPU the extra hop costs (one "
        "more round trip, two more socket copies and the proxy's own work per request) comes "
        "out of the budget that merging saves the backend; with the proxy on its own cores, "
        "or a backend whose lookups cost real work (a disk-bound mongod), the saving remains "
        "and the hop's cost does not compete with it.")
    print("\n".join(lines))


# ---------------------------------------------------------------------------
# The model part: the user's table against mongoplex-curvemodel
# ---------------------------------------------------------------------------

MODEL_LABEL = "a model calibrated to the report's table, not MongoDB"


def seed_collect(out_dir, seed_dir, curve, load_before, load_after, cores):
    """Writes demo.json["seed_model"] from what the model part left in seed_dir."""
    import pymongo
    from bson import json_util

    def command(uri, name):
        client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
        try:
            return json.loads(json_util.dumps(client.admin.command(name)))
        finally:
            client.close()

    paths = []
    with open(seed_dir + "/paths.tsv") as f:
        for line in f:
            name, settings, label, model_uri, uri = line.rstrip("\n").split("\t")
            p = {"name": name, "label": label, "uri": uri, "model_uri": model_uri,
                 "settings": dict(kv.split("=", 1) for kv in settings.split()),
                 "model_status": command(model_uri, "curveModelStatus")}
            if settings:
                p["mongoplex_stats"] = command(uri, "mongoplexStats")
            paths.append(p)
    seed = []
    with open(curve) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and not line.startswith("ids,"):
                ids, threads, qps = line.split(",")
                seed.append({"ids": int(ids), "threads": int(threads), "qps": float(qps)})
    with open(seed_dir + "/bench.json") as f:
        bench = json.load(f)
    with open(out_dir + "/demo.json") as f:
        demo = json.load(f)
    demo["seed_model"] = {"what": "mongoplex-curvemodel: " + MODEL_LABEL, "curve": curve,
                          "seed": seed, "paths": paths, "bench": bench,
                          "load_before": load_before, "load_after": load_after,
                          "cores": int(cores)}
    with open(out_dir + "/demo.json", "w") as f:
        json.dump(demo, f, indent=1)


class SeedRun:
    """demo.json["seed_model"], read back."""

    def __init__(self, out_dir):
        with open(out_dir + "/demo.json") as f:
            self.d = json.load(f)["seed_model"]
        self.paths = self.d["paths"]
        self.seed = {(c["ids"], c["threads"]): c["qps"] for c in self.d["seed"]}
        self.cell = {(r["path"], r["ids"], r["threads"]): r for r in self.d["bench"]["results"]}
        cfg = self.d["bench"]["config"]
        self.ids, self.threads = cfg["ids"], cfg["threads"]
        self.cell_queries = cfg["cell_queries"]
        self.cores = self.d["cores"]
        peak = max(float(self.d["load_before"].split()[0]), float(self.d["load_after"].split()[0]))
        self.noisy = peak > self.cores

    def qps(self, path, ids, threads):
        r = self.cell.get((path, ids, threads))
        return r["tput_wall_qps"] if r else None

    def role(self, role):
        """The first path of a role: direct (no mongoplex settings), adaptive
        (adaptive_concurrency on), pool (batching off) or batching (batching on);
        None when SEED_PATHS has none."""
        for p in self.paths:
            s = p["settings"]
            r = ("direct" if not s else
                 "adaptive" if s.get("adaptive_concurrency", "off") == "on" else
                 "batching" if s.get("batching", "on") == "on" else "pool")
            if r == role:
                return p
        return None

    def load_line(self):
        return ("load average %s before, %s after, on %d cores%s"
                % (self.d["load_before"], self.d["load_after"], self.cores,
                   ": NOISY (more runnable tasks than cores; fast cells suffer most)"
                   if self.noisy else ""))


def fmt(v, spec):
    return "-" if v is None else spec % v


def seed_table(out_dir):
    run = SeedRun(out_dir)
    direct = run.role("direct")
    print("The user's table, short, against mongoplex-curvemodel: %s." % MODEL_LABEL)
    print("queries/s by the wall clock, %d queries per cell split among its threads, one run per"
          " cell;" % run.cell_queries)
    print("%s." % run.load_line())
    print("seed = the report's figure (%s: the median of its three runs);"
          % run.d["curve"].split("/")[-1])
    print("x seed = measured / seed; x direct = the path / direct, same cell.")
    for p in run.paths:
        print("  %s: %s" % (p["name"], p["label"]))
    print()
    groups = []  # one column group per path
    for p in run.paths:
        if p is direct or direct is None:
            groups.append(("%10s  x seed" % p["name"][-10:]))
        else:
            groups.append(("%10s  x seed  x direct" % p["name"][-10:]))
    print(" ids threads |  seed q/s | " + " | ".join(groups))
    for ids in run.ids:
        for th in run.threads:
            s = run.seed.get((ids, th))
            row = "%4d %7d | %9s | " % (ids, th, fmt(s, "%9.1f"))
            cols = []
            d = run.qps(direct["name"], ids, th) if direct else None
            for p in run.paths:
                q = run.qps(p["name"], ids, th)
                c = "%10s  %6s" % (fmt(q, "%10.1f"), fmt(q / s if q and s else None, "%6.2f"))
                if p is not direct and direct is not None:
                    c += "  %8s" % fmt(q / d if q and d else None, "%8.2f")
                cols.append(c)
            print(row + " | ".join(cols))
    print()
    print("What each path's backend saw (its own model, curveModelStatus): most queries in"
          " service at once:")
    print("  " + ", ".join("%s %d" % (p["name"], num(p["model_status"]["maxInService"]))
                           for p in run.paths)
          + "; finds answered: "
          + ", ".join("%s %d" % (p["name"], num(p["model_status"]["queries"]))
                      for p in run.paths)
          + " (warm-up included).")
    bad = [r for r in run.d["bench"]["results"] if r["errors"] or r["mismatches"]]
    if bad:
        print("ERRORS: " + "; ".join("%s %d threads x %d ids: %d errors, %d mismatches"
                                     % (r["path"], r["threads"], r["ids"], r["errors"],
                                        r["mismatches"]) for r in bad))


def seed_paragraph(out_dir):
    run = SeedRun(out_dir)
    direct, pool, batch = run.role("direct"), run.role("pool"), run.role("batching")
    lo, hi = min(run.threads), max(run.threads)
    one = 1 if 1 in run.ids else min(run.ids)
    many = max(run.ids)
    seed_peak = max((q, th) for (ids, th), q in run.seed.items() if ids == one)
    lines = ["What the model part shows (mongoplex-curvemodel, %s; timings on a shared machine,"
             " %s):" % (MODEL_LABEL, run.load_line())]

    def q(p, ids, th):
        return run.qps(p["name"], ids, th) if p else None

    def ratio(a, b):
        return a / b if a and b else float("nan")

    def upstream(p):
        """Why a mongoplex path fell short: the model was not the limit."""
        n = num(p["model_status"]["maxInService"])
        s_n = run.seed.get((one, int(n)))
        return (" (not the backend: with %d queries in service the model serves %s %d-id lookups"
                "/s, more with merged ones; mongoplex and the clients did not keep it that"
                " busy, on a machine at load average %s on %d cores)"
                % (n, "%.0f" % s_n if s_n else "its curve's", one,
                   run.d["load_after"].split()[0], run.cores))

    if direct:
        d_lo, d_hi = q(direct, one, lo), q(direct, one, hi)
        m_lo, m_hi = q(direct, many, lo), q(direct, many, hi)
        s_lo, s_hi = run.seed.get((one, lo)), run.seed.get((one, hi))
        sm_lo, sm_hi = run.seed.get((many, lo)), run.seed.get((many, hi))
        peak = max(d_lo or 0, s_lo or 0)  # the 10-thread figure, measured or the report's
        text = ("- Direct, %s: %d-id lookups at %d threads %.0f/s"
                % ("throughput collapses at %d threads like the report" % hi
                   if ratio(d_hi, peak) < 0.8 else
                   "throughput did NOT collapse at %d threads this time" % hi, one, hi, d_hi))
        if s_hi:
            text += " (the report there: %.0f/s, %.2fx)" % (s_hi, ratio(d_hi, s_hi))
        text += ", against %.0f/s at %d threads" % (d_lo, lo)
        if s_lo:
            text += " (the report: %.0f/s)" % s_lo
        if many != one:
            text += "; %d-id queries %.0f/s at %d threads against %.0f/s at %d" % (
                many, m_hi, hi, m_lo, lo)
            if sm_lo and sm_hi:
                text += " (the report: %.0f and %.0f)" % (sm_hi, sm_lo)
        if s_lo and ratio(d_lo, s_lo) < 0.8:
            text += (". The %d-thread cell came out at %.2f of the report's, yet its median"
                     " latency was %.2f ms, the model's %.2f ms there (%d / %.0f/s): the rest"
                     " of each cycle is the clients' own time per query, which a machine loaded"
                     " beyond its cores stretches (docs/benchmark-results.md, the calibration)"
                     % (lo, ratio(d_lo, s_lo), run.cell[(direct["name"], one, lo)]["p50_us"] / 1e3,
                        1e3 * lo / s_lo, lo, s_lo))
        text += (". Every client thread is one more query in service at once (up to %d here):"
                 " past the knee at 10-20 threads each one more makes all of them slower."
                 % num(direct["model_status"]["maxInService"]))
        lines.append(text)
    if pool:
        size = int(pool["settings"].get("pool_size", 16))
        p_lo, p_hi = q(pool, one, lo), q(pool, one, hi)
        pm_hi = q(pool, many, hi)
        s_size = run.seed.get((one, size))
        text = ("- Through mongoplex with a fixed pool (pool_size %d, the report's driver pool,"
                " near the model's knee; the proxy's default is 16): the backend saw at most %d"
                " queries at once while %d client threads asked, the rest waiting in mongoplex's"
                " fair queue, so throughput %s: at %d threads %.0f/s for %d id"
                " (%.2fx direct, %.2f of the path's own %d-thread figure%s)"
                % (size, num(pool["model_status"]["maxInService"]), hi,
                   "stays near the peak" if ratio(p_hi, p_lo) >= 0.8 else
                   "fell all the same",
                   hi, p_hi, one,
                   ratio(p_hi, q(direct, one, hi)), ratio(p_hi, p_lo), lo,
                   "; the seed at %d threads: %.0f/s" % (size, s_size) if s_size else ""))
        if many != one:
            text += " and %.0f/s for %d ids (%.2fx direct)" % (
                pm_hi, many, ratio(pm_hi, q(direct, many, hi)))
        if ratio(p_hi, p_lo) < 0.8 or (s_size and ratio(p_hi, s_size) < 0.8):
            text += upstream(pool)
        text += ("; at %d threads, which fit in the pool, it is %.2fx direct (the extra hop)."
                 % (lo, ratio(p_lo, q(direct, one, lo))))
        lines.append(text)
    if batch:
        b_hi, bm_hi = q(batch, one, hi), q(batch, many, hi)
        st = batch.get("mongoplex_stats", {})
        c = st.get("counters", {})
        h = st.get("histograms", {}).get("batch_ids", {})
        text = ("- With batching as well (%s), lookups waiting for a connection become few $in"
                " queries: the backend answered %d finds where direct it answered %d for the same"
                " client queries"
                % (" ".join("%s=%s" % kv for kv in batch["settings"].items()),
                   num(batch["model_status"]["queries"]),
                   num(direct["model_status"]["queries"]) if direct else float("nan")))
        if c and num(h.get("count", 0)):
            text += (" (over the whole run, both sizes: %d of the %d lookups that went through"
                     " the batcher were merged, into %d $in queries of %.1f ids on average)" % (num(c["batch_lookups_merged"]), num(c["batch_lookups"]),
                                    num(h["count"]), num(h["sum"]) / num(h["count"])))
        text += (", so at %d threads %d-id lookups reached %.0f/s: %.2fx the seed's %d-id peak"
                 " (%.0f/s at %d threads), %.2fx direct"
                 % (hi, one, b_hi, ratio(b_hi, seed_peak[0]), one, seed_peak[0], seed_peak[1],
                    ratio(b_hi, q(direct, one, hi))))
        if pool:
            text += ", %.2fx the fixed pool alone" % ratio(b_hi, q(pool, one, hi))
        if ratio(b_hi, seed_peak[0]) < 1:
            text += ("; below the seed's peak this time" + upstream(batch))
        text += "."
        if many != one:
            text += (" %d-id queries gain less (%.0f/s, %.2fx direct%s): a merged query saves the"
                     " cost of each query, not the per-id work, which the model charges for"
                     " every id." % (many, bm_hi, ratio(bm_hi, q(direct, many, hi)),
                                     ", %.2fx the fixed pool" % ratio(bm_hi, q(pool, many, hi))
                                     if pool else ""))
        lines.append(text)
    adaptive = run.role("adaptive")
    if adaptive:
        a_lo, a_hi = q(adaptive, one, lo), q(adaptive, one, hi)
        am_hi = q(adaptive, many, hi)
        text = ("- Untuned, with the adaptive limit (%s: pool_size only its ceiling): the"
                " backend saw at most %d queries at once while %d threads asked; at %d threads"
                " %.0f/s for %d id (%.2fx direct, %.2f of the path's own %d-thread figure"
                % (" ".join("%s=%s" % kv for kv in adaptive["settings"].items()),
                   num(adaptive["model_status"]["maxInService"]), hi, hi, a_hi, one,
                   ratio(a_hi, q(direct, one, hi)), ratio(a_hi, a_lo), lo))
        if pool:
            text += ", %.2fx the hand-set pool of %s" % (
                ratio(a_hi, q(pool, one, hi)), pool["settings"].get("pool_size", "16"))
        text += ")"
        if many != one:
            text += " and %.0f/s for %d ids (%.2fx direct)" % (
                am_hi, many, ratio(am_hi, q(direct, many, hi)))
        text += (". adaptive_concurrency is off by default: its goals against the best fixed"
                 " pool_size are not all met yet (docs/benchmark-results.md, Adaptive"
                 " concurrency).")
        lines.append(text)
    print("\n".join(lines))


def seed_model(what, out_dir, args):
    if what == "collect":
        seed_collect(out_dir, *args)
    elif what == "table":
        seed_table(out_dir)
    elif what == "paragraph":
        seed_paragraph(out_dir)
    elif what == "elapsed":
        with open(out_dir + "/demo.json") as f:
            demo = json.load(f)
        demo["seed_model"]["elapsed_s"] = int(args[0])
        with open(out_dir + "/demo.json", "w") as f:
            json.dump(demo, f, indent=1)
    else:
        sys.exit("demo-summary.py: --seed-model collect|table|paragraph|elapsed, not %r" % what)


if __name__ == "__main__":
    main()
