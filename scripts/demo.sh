#!/usr/bin/env bash
# The demo: one command brings up a local backend (mongo-java-server), the
# mongoplex proxy in front of it with a pool of 8 backend connections, and a
# short version of the user's workload (random _id lookups from 1 to 100
# client threads), then shows how many client connections shared how few
# backend connections, the throughput direct vs through the proxy, and a
# paragraph saying in plain words what the figures mean.
#
#   scripts/demo.sh            (DOCS, QUERIES, THREADS, IDS may be overridden)
#
# Results are kept in demo-results/<date-time>/ (OUT=dir to choose): report.txt
# (the tables), demo.json (every figure), stats.json (mongoplexStats after the
# run), cpu.txt (backend CPU per lookup), summary.txt (the paragraph),
# mongoplex.log and backend.log.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DOCS="${DOCS:-100000}"
QUERIES="${QUERIES:-500}"
THREADS="${THREADS:-1,10,50,100}"
IDS="${IDS:-1,20}"
OUT="${OUT:-$ROOT/demo-results/$(date +%Y%m%d-%H%M%S)}"
PY=/usr/bin/python3

[ -n "${MONGOPLEX_SKIP_INSTALL:-}" ] || scripts/install-deps.sh demo
echo "== building mongoplex and mongoplex-bench (Release)"
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DMP_BUILD_TESTS=OFF >/dev/null
ninja -C build-release mongoplex mongoplex-bench | tail -n 1
export MONGOPLEX_BIN="$ROOT/build-release/mongoplex"
BENCH="$ROOT/build-release/bench/mongoplex-bench"

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
work="$(mktemp -d)"
trap 'cp "$work/backend/log" "$OUT/backend.log" 2>/dev/null; scripts/backend.sh stop "$work/backend" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
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
echo
echo "== results kept in $OUT (report.txt, demo.json, stats.json, cpu.txt, summary.txt, logs)"
