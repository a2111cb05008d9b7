#!/usr/bin/env bash
# bench/batch_hold.sh — batch_hold_us on against off, side by side in one
# mongoplex-bench run: 1-id lookups from THREADS (100) client threads through
# mongoplex with batching on, for each pool in POOLS (fixed pool_size values,
# and `adaptive`: adaptive_concurrency = on with pool_size 100 its ceiling),
# with batch_hold_us = HOLD_US and = 0, plus direct. Against the curve model
# (BACKEND=curve, the default: mongoplex-curvemodel on the seed's table, a
# model of the user's server, never MongoDB) or mongo-java-server
# (BACKEND=java).
#
# Prints per pool: lookups/s with the hold and without, their ratio, the
# ids per merged query of each (batch_lookups / batches_sent from /metrics)
# and the share of single-lookup batches; the load average before and after
# (NOISY when the 1-minute load before was above 1.5 on this 2-core machine).
#
# Settings (environment, defaults in brackets): POOLS [8,16,adaptive]
# HOLD_US [1000] THREADS [100] QUERIES [200] REPEAT [2] WARMUP [200]
# DOCS [20000000; 100000 with java] BACKEND [curve] CURVE [bench/curves/seed.csv]
# BUILD_DIR [build-rel] OUT [bench/out/batch-hold-<timestamp>]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export MONGOPLEX_CACHE="${MONGOPLEX_CACHE:-$ROOT/.cache}"
POOLS="${POOLS:-8,16,adaptive}"
HOLD_US="${HOLD_US:-1000}"
THREADS="${THREADS:-100}"
QUERIES="${QUERIES:-200}"
REPEAT="${REPEAT:-2}"
WARMUP="${WARMUP:-200}"
BACKEND="${BACKEND:-curve}"
DOCS="${DOCS:-$([[ "$BACKEND" == curve ]] && echo 20000000 || echo 100000)}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-rel}"
OUT="${OUT:-$ROOT/bench/out/batch-hold-$(date +%Y%m%d-%H%M%S)}"
BENCH="$BUILD_DIR/bench/mongoplex-bench"
MP="$BUILD_DIR/mongoplex"
PIDS=()

# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
bench_init batch_hold.sh mphold
[[ -x "$MP" ]] || die "no $MP (cmake -S . -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release && ninja -C $BUILD_DIR)"
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; bench_cleanup' EXIT

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
BACKEND_DIR=""
start_backend
[[ -z "$BACKEND_DIR" ]] || { "$BENCH" load --uri "$URI" --docs "$DOCS" >/dev/null 2>&1 || die "load failed"; }

paths=(--path "direct=$URI")
declare -A metrics
IFS=, read -r -a pools <<<"$POOLS"
for pool in "${pools[@]}"; do
  for hold in "$HOLD_US" 0; do
    name="$pool-hold$hold"
    mport="$(free_port)"
    if [[ "$pool" == adaptive ]]; then
      lines=("pool_size = 100" "adaptive_concurrency = on")
    else
      lines=("pool_size = $pool")
    fi
    port="$(start_ini_proxy "$name" "backend_uri = $URI" "${lines[@]}" "batching = on" \
      "batch_hold_us = $hold" "max_queue = 100000" "log_level = warning" \
      "metrics_listen = 127.0.0.1:$mport")"
    paths+=(--path "$name=mongodb://127.0.0.1:$port/")
    metrics[$name]="127.0.0.1:$mport"
  done
done

log "one run: $(( ${#paths[@]} / 2 )) paths, $THREADS threads, 1 id, $QUERIES queries a thread, $REPEAT repeats"
"$BENCH" run "${paths[@]}" --docs "$DOCS" --threads "$THREADS" --ids 1 --queries "$QUERIES" \
  --repeat "$REPEAT" --warmup "$WARMUP" --json "$OUT/results.json" >"$OUT/report.txt" 2>"$OUT/progress.log" ||
  die "mongoplex-bench failed; see $OUT/progress.log"
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

for name in "${!metrics[@]}"; do
  curl -s "http://${metrics[$name]}/metrics" >"$OUT/$name.metrics" || true
done
[[ -z "$BACKEND_DIR" ]] || "$ROOT/scripts/backend.sh" stop "$BACKEND_DIR" >/dev/null 2>&1 || true

python3 - "$OUT" "$HOLD_US" "$load_before" "$load_after" "$POOLS" <<'PY' | tee "$OUT/summary.txt"
import json, os, sys
out, hold, before, after, pools = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5].split(",")
res = {r["path"]: r for r in json.load(open(os.path.join(out, "results.json")))["results"]}

def metric(name, key):
    try:
        for line in open(os.path.join(out, name + ".metrics")):
            if line.startswith(key + " ") or line.startswith(key + "{"):
                return float(line.split()[-1])
    except OSError:
        pass
    return 0.0

def batches(name):
    sent = metric(name, "mongoplex_batches_sent_total")
    looks = metric(name, "mongoplex_batch_lookups_total")
    singles = metric(name, 'mongoplex_batch_ids_bucket{le="1"}')
    return (looks / sent if sent else 0.0), (singles / sent if sent else 0.0)

noisy = float(before.split()[0]) > 1.5
print(f"bench/batch_hold.sh: batch_hold_us = {hold} against 0, batching on, 1-id lookups; "
      f"load average {before} before, {after} after" + (" (NOISY)" if noisy else ""))
print(f"direct: {res['direct']['tput_wall_qps']:.0f} lookups/s")
print(f"| pool | hold {hold}: lookups/s | ids/query | single | hold 0: lookups/s | ids/query | single | ratio |")
print("|---|---|---|---|---|---|---|---|")
for pool in pools:
    on, off = res[f"{pool}-hold{hold}"], res[f"{pool}-hold0"]
    (ion, son), (ioff, soff) = batches(f"{pool}-hold{hold}"), batches(f"{pool}-hold0")
    print(f"| {pool} | {on['tput_wall_qps']:.0f} | {ion:.1f} | {100*son:.0f} % | "
          f"{off['tput_wall_qps']:.0f} | {ioff:.1f} | {100*soff:.0f} % | "
          f"{on['tput_wall_qps']/off['tput_wall_qps']:.2f} |")
PY
