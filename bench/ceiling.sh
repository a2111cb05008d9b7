#!/usr/bin/env bash
# bench/ceiling.sh — the single-worker proxy's ceiling (issue 25 item 2):
# requests per CPU-second of the proxy (its user + system time from
# /proc/PID/stat through mongoplex-bench --proc), for plain, client TLS and
# client TLS + zstd, against a backend that is not the bottleneck
# (mongo-java-server); then the 50/100-thread batching cell with the proxy at
# the default CPU priority, at `nice -n -5` (what a unit's Nice=-5 gives) and
# at SCHED_RR (chrt --rr 1; the shipped unit forbids it: RestrictRealtime=yes).
#
# Part A (ceiling): CEIL_THREADS [8] client threads (enough to keep the
#   proxy's one core busy) x CEIL_IDS [20] random ids per query (the lookups
#   of bench/compress_figures.sh) x CEIL_QUERIES [1500] per thread. Reported:
#   wall q/s, proxy CPU us per request, requests per proxy CPU-second (the
#   ceiling of one core), and how much of a core the proxy used.
# Part B (the cell): direct vs mongoplex (batching on, the default) at
#   CELL_THREADS [50,100] x CELL_IDS [1] x CELL_QUERIES [200] per thread, the
#   proxy reniced between runs (one proxy; renice / chrt -p on its pid).
# Settings also: DOCS [20000] REPEAT [3] BUILD_DIR [build]
#   OUT [bench/out/ceiling-<timestamp>]. Setup shared with bench/tls.sh
#   (bench/common.sh: start_ini_proxy, cpu_ticks; tests/tls/mkcerts.sh).
# Prints `uptime` first and last: on a shared machine the figures are noisy.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
DOCS="${DOCS:-20000}" REPEAT="${REPEAT:-3}"
CEIL_THREADS="${CEIL_THREADS:-8}" CEIL_IDS="${CEIL_IDS:-20}" CEIL_QUERIES="${CEIL_QUERIES:-1500}"
CELL_THREADS="${CELL_THREADS:-50,100}" CELL_IDS="${CELL_IDS:-1}" CELL_QUERIES="${CELL_QUERIES:-200}"
OUT="${OUT:-$ROOT/bench/out/ceiling-$(date +%Y%m%d-%H%M%S)}"
BENCH="$BUILD_DIR/bench/mongoplex-bench"
MP="$BUILD_DIR/mongoplex"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
bench_init ceiling.sh mpc

echo "uptime at start: $(uptime)" | tee "$OUT/uptime.txt"
"$ROOT/tests/tls/mkcerts.sh" "$C" >/dev/null
J_URI="$("$ROOT/scripts/backend.sh" start java "$C/java")"
"$BENCH" load --uri "$J_URI" --docs "$DOCS" >/dev/null 2>&1
P_PLAIN="$(start_ini_proxy plain "backend_uri = $J_URI")"
P_TLS="$(start_ini_proxy tls "backend_uri = $J_URI" "client_tls_mode = requireTLS" \
  "client_tls_cert_file = $C/server.pem" "client_tls_key_file = $C/server.key")"
CA="tls=true&tlsCAFile=$C/ca.pem"

# One JSON result's figures: wall q/s, proxy us per request, requests per
# proxy CPU-second, share of one core.
figures() { # json path-name
  python3 - "$1" "$2" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
for r in res:
    if r["path"] != sys.argv[2]:
        continue
    us = (r["proxy_user_us_per_query"] or 0) + (r["proxy_sys_us_per_query"] or 0)
    rps = 1e6 / us if us else float("nan")
    print("%-14s threads %3d ids %2d  %8.0f q/s wall  proxy %6.1f us/request "
          "(user %5.1f sys %5.1f)  %7.0f requests per proxy CPU-second  core %3.0f%%  errors %d"
          % (r["path"], r["threads"], r["ids"], r["tput_wall_qps"], us,
             r["proxy_user_us_per_query"] or 0, r["proxy_sys_us_per_query"] or 0, rps,
             100 * r["tput_wall_qps"] * us / 1e6, r["errors"] + r["mismatches"]))
PY
}

# Part A: the ceiling of one core.
ceiling() { # name uri pidfile
  "$BENCH" run --path "$1=$2" --proc "$1=$(cat "$3")" --docs "$DOCS" --threads "$CEIL_THREADS" \
    --ids "$CEIL_IDS" --queries "$CEIL_QUERIES" --repeat "$REPEAT" --warmup 100 \
    --json "$OUT/$1.json" >"$OUT/$1.txt" 2>"$OUT/$1.err"
  figures "$OUT/$1.json" "$1"
}
echo "== A: single-worker ceiling (mongo-java-server backend; median of $REPEAT runs)" | tee "$OUT/ceiling.txt"
{
  ceiling plain "mongodb://127.0.0.1:$P_PLAIN/" "$C/plain.pid"
  ceiling clienttls "mongodb://localhost:$P_TLS/?$CA" "$C/tls.pid"
  ceiling clienttls-zstd "mongodb://localhost:$P_TLS/?$CA&compressors=zstd" "$C/tls.pid"
} | tee -a "$OUT/ceiling.txt"

# Part B: the 50/100-thread cell, direct vs the proxy at three priorities.
pid="$(cat "$C/plain.pid")"
cell() { # name
  "$BENCH" run --path "direct=$J_URI" --path "mongoplex=mongodb://127.0.0.1:$P_PLAIN/" \
    --proc "mongoplex=$pid" --docs "$DOCS" --threads "$CELL_THREADS" --ids "$CELL_IDS" \
    --queries "$CELL_QUERIES" --repeat "$REPEAT" --warmup 100 \
    --json "$OUT/cell-$1.json" >"$OUT/cell-$1.txt" 2>"$OUT/cell-$1.err"
  python3 - "$OUT/cell-$1.json" "$1" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
q = {(r["path"], r["threads"]): r["tput_wall_qps"] for r in res}
for t in sorted({r["threads"] for r in res}):
    d, m = q[("direct", t)], q[("mongoplex", t)]
    print("%-22s threads %3d  direct %8.0f q/s  mongoplex %8.0f q/s  (%.2fx direct)"
          % (sys.argv[2], t, d, m, m / d))
best = {p: max(v for (pp, _), v in q.items() if pp == p) for p in ("direct", "mongoplex")}
top = max(r["threads"] for r in res)
print("%-22s at %d threads: direct %.0f%% of its best, mongoplex %.0f%% of its best"
      % (sys.argv[2], top, 100 * q[("direct", top)] / best["direct"],
         100 * q[("mongoplex", top)] / best["mongoplex"]))
PY
}
echo "== B: batching cell, $CELL_THREADS threads x $CELL_IDS id(s) (median of $REPEAT runs)" | tee "$OUT/cell.txt"
{
  cell "default-priority"
  if renice -n -5 -p "$pid" >/dev/null 2>&1; then
    cell "nice-5"
  else
    echo "nice -5: not permitted here (renice failed: needs CAP_SYS_NICE)"
  fi
  renice -n 0 -p "$pid" >/dev/null 2>&1 || true
  if chrt -a --rr -p 1 "$pid" >/dev/null 2>&1; then
    cell "sched-rr-1"
    chrt -a --other -p 0 "$pid" >/dev/null 2>&1 || true
  else
    echo "SCHED_RR: not permitted here (chrt failed)"
  fi
} | tee -a "$OUT/cell.txt"
echo "uptime at end: $(uptime)" | tee -a "$OUT/uptime.txt"
echo "results in $OUT"
