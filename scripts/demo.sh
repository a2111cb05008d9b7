#!/usr/bin/env bash
# The demo: one command brings up a local backend (mongo-java-server), the
# mongoplex proxy in front of it with a pool of 8 backend connections, and a
# short version of the user's workload (random _id lookups from 1 to 100
# client threads), then shows how many client connections shared how few
# backend connections, the throughput direct vs through the proxy, and a
# paragraph saying in plain words what the figures mean.
#
# Then the user's story: the same lookups against mongoplex-curvemodel, a
# model calibrated to the report's table, not MongoDB (bench/curves/seed.csv;
# bench/README.md, "The curve model"), whose throughput collapses at 100
# threads like the report's server. A short version of the report's table
# (SEED_IDS x SEED_THREADS) is run on every path of SEED_PATHS, taking turns:
# direct, through mongoplex with a fixed pool (pool_size SEED_POOL_SIZE), and
# the same with batching. Each path has its own model, so what the backend
# saw (curveModelStatus: most queries in service at once, finds answered) is
# that path's alone. A side-by-side table with the seed's figure for each
# cell and a paragraph follow, and the part's wall time (kept under 90 s).
#
#   scripts/demo.sh            (DOCS, QUERIES, THREADS, IDS may be overridden;
#                               for the model part SEED_IDS [1,20],
#                               SEED_THREADS [10,100], SEED_QUERIES [4000 per
#                               cell, split among its threads], SEED_POOL_SIZE
#                               [10], SEED_PATHS [below])
#
# Results are kept in demo-results/<date-time>/ (OUT=dir to choose): report.txt
# (the tables), demo.json (every figure; the model part under "seed_model"),
# stats.json (mongoplexStats after the run), cpu.txt (backend CPU per lookup),
# summary.txt (the paragraphs), mongoplex.log and backend.log; the model
# part's logs in seed-model/<path>/ (backend/log: the model's, mongoplex.log).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DOCS="${DOCS:-100000}"
QUERIES="${QUERIES:-500}"
THREADS="${THREADS:-1,10,50,100}"
IDS="${IDS:-1,20}"
OUT="${OUT:-$ROOT/demo-results/$(date +%Y%m%d-%H%M%S)}"
PY=/usr/bin/python3
# The model part (the user's table against a model calibrated to it).
SEED_IDS="${SEED_IDS:-1,20}"
SEED_THREADS="${SEED_THREADS:-10,100}"
SEED_QUERIES="${SEED_QUERIES:-4000}"
SEED_POOL_SIZE="${SEED_POOL_SIZE:-10}"
SEED_DOCS=20000000 # the seed's collection; the model's documents are virtual
SEED_CURVE="$ROOT/bench/curves/seed.csv"
# Its paths, one a line: NAME|mongoplex settings (empty: direct to the
# model)|what the table and the paragraph call it. The adaptive path is
# mongoplex untuned: pool_size 100 (as many as the clients) is only the
# ceiling, the adaptive limit finds the backend's knee from its latencies.
SEED_PATHS="${SEED_PATHS:-direct||direct to the model
fixed-pool|pool_size=$SEED_POOL_SIZE batching=off|through mongoplex, fixed pool (pool_size $SEED_POOL_SIZE, batching off)
batching|pool_size=$SEED_POOL_SIZE batching=on batch_max_ids=100|through mongoplex, fixed pool + batching (pool_size $SEED_POOL_SIZE, batch_max_ids 100)
adaptive|pool_size=100 adaptive_concurrency=on batching=off|through mongoplex, adaptive limit (pool_size 100 only its ceiling, batching off)}"

[ -n "${MONGOPLEX_SKIP_INSTALL:-}" ] || scripts/install-deps.sh demo
echo "== building mongoplex, mongoplex-bench and mongoplex-curvemodel (Release)"
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DMP_BUILD_TESTS=OFF >/dev/null
ninja -C build-release mongoplex mongoplex-bench mongoplex-curvemodel | tail -n 1
export MONGOPLEX_BIN="$ROOT/build-release/mongoplex"
BENCH="$ROOT/build-release/bench/mongoplex-bench"
export CURVEMODEL_BIN="$ROOT/build-release/bench/mongoplex-curvemodel"

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
work="$(mktemp -d)"
PIDS=()    # the models of the model part (bench/common.sh: start_curve_model)
HOLDERS=() # scripts/with-proxy.sh of each of its mongoplex paths
# Stops the model part's proxies (each with-proxy.sh ends when
# $work/seed/stop appears) and its models; 1 if one of them had exited
# uncleanly (its status named).
seed_stop() {
  local rc=0 p
  [[ ! -d "$work/seed" ]] || touch "$work/seed/stop"
  for p in ${HOLDERS[@]+"${HOLDERS[@]}"}; do
    wait "$p" || { echo "demo.sh: a mongoplex of the model part exited with status $?" \
      "(its log: $OUT/seed-model/*/mongoplex.log)" >&2; rc=1; }
  done
  HOLDERS=()
  for p in ${PIDS[@]+"${PIDS[@]}"}; do
    kill -TERM "$p" 2>/dev/null || { echo "demo.sh: the model (pid $p) had exited" >&2; rc=1; }
    wait "$p" || { echo "demo.sh: the model (pid $p) exited with status $?" >&2; rc=1; }
  done
  PIDS=()
  return $rc
}
cleanup() {
  cp "$work/backend/log" "$OUT/backend.log" 2>/dev/null || true
  scripts/backend.sh stop "$work/backend" >/dev/null 2>&1 || true
  seed_stop 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
echo "== starting mongo-java-server (the demo backend)"
backend="$(scripts/backend.sh start java "$work/backend")"
BACKEND_PID="$(cat "$work/backend/pid")"
echo "   backend at $backend (JVM pid $BACKEND_PID)"
echo "== loading $DOCS documents"
"$BENCH" load --uri "$backend" --docs "$DOCS"

# Backend CPU (user + system clock ticks of the JVM) from /proc/PID/stat.
jvm_ticks() { sed 's/.*) //' "/proc/$BACKEND_PID/stat" | awk '{print $12 + $13}'; }

# The same lookups (100 threads, 1 id each) over one path alone, with the
# backend's CPU read before and after: backend CPU per lookup on that path.
cpu_run() {
  local name="$1" uri="$2" t0 t1
  t0="$(jvm_ticks)"
  "$BENCH" run --path "$name=$uri" --docs "$DOCS" --threads 100 --ids 1 --queries 300 \
    --repeat 1 --warmup 0 --json "$OUT/cpu-$name.json" >/dev/null 2>>"$OUT/progress.log"
  t1="$(jvm_ticks)"
  echo "$name $((t1 - t0)) $((100 * 300))" >>"$OUT/cpu.txt"
}

demo_run() {
  echo "== mongoplex is listening at $MONGOPLEX_PROXY_URI (pool_size = 8, batching on, batch_max_ids = 100: see docs/benchmark-results.md)"
  echo "== measuring direct and through mongoplex, taking turns (about a minute; progress in $OUT/progress.log)"
  "$BENCH" run --path "direct=$MONGOPLEX_DIRECT_URI" --path "mongoplex=$MONGOPLEX_PROXY_URI" \
    --docs "$DOCS" --threads "$THREADS" --ids "$IDS" --queries "$QUERIES" --repeat 1 \
    --warmup 100 --json "$OUT/demo.json" 2>>"$OUT/progress.log" | tee "$OUT/report.txt"
  "$PY" - "$MONGOPLEX_PROXY_URI" "$OUT/stats.json" <<'PYEOF'
import sys, pymongo
from bson import json_util
s = pymongo.MongoClient(sys.argv[1]).admin.command("mongoplexStats")
open(sys.argv[2], "w").write(json_util.dumps(s, indent=1))
PYEOF
  echo "== backend CPU per lookup: 100 threads x 300 lookups of 1 id, direct, then through mongoplex"
  : >"$OUT/cpu.txt"
  cpu_run direct "$MONGOPLEX_DIRECT_URI"
  cpu_run mongoplex "$MONGOPLEX_PROXY_URI"
  echo
  "$PY" "$ROOT/scripts/demo-summary.py" "$OUT" "$(getconf CLK_TCK)" | tee "$OUT/summary.txt"
}
export -f demo_run cpu_run jvm_ticks
export BENCH DOCS THREADS IDS QUERIES PY OUT ROOT BACKEND_PID
MONGOPLEX_PROXY_LOG="$OUT/mongoplex.log" \
  scripts/with-proxy.sh "$backend" pool_size=8 batching=on batch_max_ids=100 log_level=warning -- bash -c demo_run
# The in-memory backend is done: stopped, so it takes nothing from the model part.
cp "$work/backend/log" "$OUT/backend.log"
scripts/backend.sh stop "$work/backend" >/dev/null

# ---- The model part: the user's table against a model calibrated to it ----
SEED_LOG=""
die() {
  echo "demo.sh: $*" >&2
  [[ -z "$SEED_LOG" || ! -s "$SEED_LOG" ]] || { echo "--- $SEED_LOG:" >&2; tail -n 20 "$SEED_LOG" >&2; }
  exit 1
}
log() { :; } # start_curve_model's progress line: the demo prints its own
# shellcheck source=../bench/common.sh
. "$ROOT/bench/common.sh"

# mongoplex with SETTINGS (key=value, space-separated) in front of MODEL_URI
# for the path NAME, kept running by scripts/with-proxy.sh until seed_stop;
# sets PROXY_URI.
start_seed_proxy() {
  local name="$1" model="$2" dir="$OUT/seed-model/$1" pid i kv=()
  read -ra kv <<<"$3"
  MONGOPLEX_PROXY_LOG="$dir/mongoplex.log" scripts/with-proxy.sh "$model" "${kv[@]}" \
    log_level=warning -- bash -c \
    'echo "$MONGOPLEX_PROXY_URI" >"$1.tmp" && mv "$1.tmp" "$1"
     while [ -d "$2" ] && [ ! -e "$2/stop" ]; do sleep 0.1; done' _ "$dir/proxy-uri" "$work/seed" \
    >"$dir/with-proxy.out" 2>&1 &
  pid=$!
  HOLDERS+=("$pid")
  SEED_LOG="$dir/with-proxy.out"
  for i in $(seq 1 100); do
    [[ ! -s "$dir/proxy-uri" ]] || break
    kill -0 "$pid" 2>/dev/null || die "mongoplex for the path $name did not start"
    sleep 0.1
  done
  [[ -s "$dir/proxy-uri" ]] || die "mongoplex for the path $name did not start in 10 s"
  PROXY_URI="$(cat "$dir/proxy-uri")"
}

seed_t0=$SECONDS
seed_load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== the user's story: the report's table against mongoplex-curvemodel, a model calibrated"
echo "   to the report's table, not MongoDB (${SEED_CURVE#"$ROOT/"}: like the report, 1-id lookups"
echo "   peak near 3,700/s at 10-20 threads and collapse at 100); each path has its own model"
mkdir -p "$work/seed" "$OUT/seed-model"
: >"$work/seed/paths.tsv"
seed_bench_paths=()
while IFS='|' read -r name settings label; do
  [[ -n "$name" ]] || continue
  mkdir -p "$OUT/seed-model/$name"
  SEED_LOG="$OUT/seed-model/$name/backend/log"
  OUT="$OUT/seed-model/$name" CURVE="$SEED_CURVE" DOCS="$SEED_DOCS" CURVE_RTT_US=0 \
    start_curve_model
  model_uri="$URI"
  if [[ -z "$settings" ]]; then
    path_uri="$model_uri"
    echo "   $name: $label, the model at $model_uri"
  else
    start_seed_proxy "$name" "$model_uri" "$settings"
    path_uri="$PROXY_URI"
    echo "   $name: $label: mongoplex at $path_uri, its model at $model_uri"
  fi
  seed_bench_paths+=(--path "$name=$path_uri")
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$settings" "$label" "$model_uri" "$path_uri" \
    >>"$work/seed/paths.tsv"
done <<<"$SEED_PATHS"
SEED_LOG=""
[[ ${#seed_bench_paths[@]} -gt 0 ]] || die "SEED_PATHS names no path"
echo "== measuring ids $SEED_IDS x threads $SEED_THREADS, $SEED_QUERIES queries per cell split"
echo "   among its threads, one run per cell, the paths taking turns (progress in $OUT/progress.log)"
"$BENCH" run "${seed_bench_paths[@]}" --docs "$SEED_DOCS" --threads "$SEED_THREADS" \
  --ids "$SEED_IDS" --cell-queries "$SEED_QUERIES" --repeat 1 --warmup 20 \
  --json "$work/seed/bench.json" >"$work/seed/report.txt" 2>>"$OUT/progress.log" ||
  die "mongoplex-bench failed on the model part (exit $?); see $OUT/progress.log"
seed_load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
# What each path's backend saw (curveModelStatus) and each proxy's
# mongoplexStats, with the seed's cells, into demo.json under "seed_model".
"$PY" "$ROOT/scripts/demo-summary.py" --seed-model collect "$OUT" "$work/seed" "$SEED_CURVE" \
  "$seed_load_before" "$seed_load_after" "$(nproc)" ||
  die "could not read the model part's status (above)"
seed_stop || die "the model part did not stop cleanly (above)"
{ echo; echo "== the model part (a model calibrated to the report's table, not MongoDB): mongoplex-bench's report"
  cat "$work/seed/report.txt"; } >>"$OUT/report.txt"
echo
"$PY" "$ROOT/scripts/demo-summary.py" --seed-model table "$OUT" | tee -a "$OUT/report.txt"
echo
{ echo; "$PY" "$ROOT/scripts/demo-summary.py" --seed-model paragraph "$OUT"; } | tee -a "$OUT/summary.txt"
seed_elapsed=$((SECONDS - seed_t0))
"$PY" "$ROOT/scripts/demo-summary.py" --seed-model elapsed "$OUT" "$seed_elapsed"
seed_note=""
[[ "$seed_elapsed" -lt 90 ]] || seed_note=" -- OVER the 90 s budget"
echo "== the model part took ${seed_elapsed} s of wall time (budget: under 90 s)${seed_note};" \
  "load average $seed_load_before before, $seed_load_after after ($(nproc) cores)" |
  tee -a "$OUT/report.txt" "$OUT/summary.txt"
echo
echo "== results kept in $OUT (report.txt, demo.json, stats.json, cpu.txt, summary.txt, logs)"
