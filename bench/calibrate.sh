#!/usr/bin/env bash
# bench/calibrate.sh — does the curve model reproduce the user's table?
#
# Runs bench/run.sh with only the direct path against mongoplex-curvemodel
# (BACKEND=curve; a model of the user's server, never MongoDB) in the
# seed's shape: threads 1,5,10,20,50,100 x ids 1,10,20, 10,000 queries per
# run split among the threads (CELL_QUERIES), REPEAT runs per cell (median);
# then prints every cell side by side: the seed's figure (the curve file's
# cell: the median of the report's three runs), what the model serves there
# (mongoplex-curvemodel --print-curve: the running maximum in ids can make
# it slower than the seed's cell), the measured throughput by the report's
# own formula (10000 / (total_time / threads)) and by the wall clock, their
# ratios to the seed, the measured p50 against the model's latency at
# c = threads, the rest of each closed-loop cycle (threads / throughput -
# p50: the client's own time per query, mostly waiting for a CPU on a busy
# machine), and the model's CPU (% of one core) over the run.
# Exit status: 0 when every cell's ratio (report formula) is within
# ±TOLERANCE %, 1 when one is not, 2 when the run could not be made.
# A benchmark-side check of the model, not a test of the suite.
#
# Settings (environment, defaults in brackets): CURVE [bench/curves/seed.csv]
# (its cells are what is compared), TOLERANCE [15], REPEAT [3],
# CELL_QUERIES [10000], WARMUP [200], CURVE_RTT_US [0], BUILD [1],
# BUILD_DIR [build], OUT [bench/out/calibrate-<timestamp>].
# Takes about 4 minutes per repeat (the seed's runs take 3 minutes at its
# own speed). The load average is printed before and after: on a shared
# machine a run under load above the core count is noisy.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
export BUILD_DIR
export CURVE="${CURVE:-$ROOT/bench/curves/seed.csv}"
TOLERANCE="${TOLERANCE:-15}"
OUT="${OUT:-$ROOT/bench/out/calibrate-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
uptime_before="$(uptime)"
rc=0
BACKEND=curve MONGOPLEX=off HAPROXY=off MONGOBETWEEN=off UNIX=off AUTH=off \
  THREADS=1,5,10,20,50,100 IDS=1,10,20 CELL_QUERIES="${CELL_QUERIES:-10000}" \
  REPEAT="${REPEAT:-3}" WARMUP="${WARMUP:-200}" OUT="$OUT" "$ROOT/bench/run.sh" \
  >"$OUT/run.log" 2>&1 || rc=$?
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
uptime_after="$(uptime)"
model="${CURVEMODEL_BIN:-$BUILD_DIR/bench/mongoplex-curvemodel}"
"$model" --curve "$CURVE" --print-curve >"$OUT/model-curve.csv" ||
  { echo "calibrate.sh: $model --print-curve failed" >&2; exit 2; }
if [[ "$rc" -ne 0 || ! -f "$OUT/results.json" ]]; then
  tail -n 20 "$OUT/run.log" >&2
  echo "calibrate.sh: bench/run.sh failed (exit $rc); see $OUT/run.log" >&2
  exit 2
fi

python3 - "$CURVE" "$OUT/results.json" "$TOLERANCE" "$load_before" "$load_after" "$(nproc)" \
  "$OUT/model-curve.csv" "$uptime_before" "$uptime_after" "${CURVE_ARGS:-}" \
  <<'PY' | tee "$OUT/calibration.txt"
import json, statistics, sys

curve, results, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
seed = {}
for line in open(curve):
    line = line.strip()
    if not line or line.startswith("#") or line.startswith("ids,"):
        continue
    ids, threads, qps = line.split(",")
    seed[(int(ids), int(threads))] = float(qps)
model = {}
for line in open(sys.argv[7]):
    if line[0].isdigit():
        ids, threads, qps, lat = line.split(",")
        model[(int(ids), int(threads))] = (float(qps), float(lat))
d = json.load(open(results))
cells = {(r["ids"], r["threads"]): r for r in d["results"] if r["path"] == "direct"}
print(f"curve model calibration: {curve}")
print(f"  {d['config']['cell_queries']} queries per run, median of {d['config']['repeat']} runs;"
      f" load average before {sys.argv[4]}, after {sys.argv[5]} ({sys.argv[6]} cores)")
print(f"  uptime before: {sys.argv[8].strip()}")
print(f"  uptime after:  {sys.argv[9].strip()}")
print(f"  model flags: {sys.argv[10] or '(defaults)'}")
print("  seed = the curve file's cell; model = what the model serves there (--print-curve);"
      " measured by the report's formula 10000/(total_time/threads) and by the wall clock,"
      " ratios to the seed; p50 against the model's latency at c = threads; rest = threads /"
      " measured - p50 (the client's own time per query); model CPU = its utime+stime / wall"
      " time (median of the runs)")
peak = max(float(x) for x in (sys.argv[4].split()[0], sys.argv[5].split()[0]))
if peak > float(sys.argv[6]):
    print(f"  NOISY: the load average reached {peak:g} on {sys.argv[6]} cores; the fast cells"
          " (1-20 threads) measure the machine's scheduling as much as the model")
print()
print(" ids threads | seed q/s | model q/s | measured q/s  ratio | wall q/s  ratio |"
      " p50 ms / model ms | rest ms | model CPU")
bad = []
for (ids, threads) in sorted(seed):
    r = cells.get((ids, threads))
    if r is None:
        print(f"{ids:4d} {threads:7d} | {seed[(ids, threads)]:8.1f} | not measured")
        bad.append((ids, threads))
        continue
    s = seed[(ids, threads)]
    m, w = r["tput_original_qps"], r["tput_wall_qps"]
    cpu = [run["backend_cpu_us"] / (run["wall_ms"] * 1e3) * 100 for run in r["runs"]
           if run.get("backend_cpu_us") is not None and run["wall_ms"]]
    cpu_s = f"{statistics.median(cpu):5.1f} %" if cpu else "   -"
    ok = abs(m / s - 1) * 100 <= tol and not r["errors"] and not r["mismatches"]
    if not ok:
        bad.append((ids, threads))
    mq, ml = model.get((ids, threads), (float("nan"), float("nan")))
    p50 = r["p50_us"] / 1e3
    rest = threads / m * 1e3 - p50
    print(f"{ids:4d} {threads:7d} | {s:8.1f} | {mq:9.1f} | {m:12.1f} {m / s:6.3f} |"
          f" {w:8.1f} {w / s:6.3f} | {p50:7.2f} / {ml:7.2f} | {rest:7.2f} | {cpu_s}"
          f"{'' if ok else '   <-- OUTSIDE ±%g %%' % tol}")
print()
if bad:
    print(f"FAIL: {len(bad)} of {len(seed)} cells outside ±{tol:g} % (or with errors): {bad}")
    sys.exit(1)
print(f"OK: all {len(seed)} cells within ±{tol:g} % of the seed")
PY
