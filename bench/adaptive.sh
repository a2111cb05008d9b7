#!/usr/bin/env bash
# bench/adaptive.sh — the goals of issue 23 item 3 for adaptive_concurrency
# (pool/limit.h), measured as ratios within one run, never as timed tests.
#
# Against mongoplex-curvemodel (BACKEND=curve: a model of the user's server,
# never MongoDB) and mongo-java-server, with bench/run.sh's machinery
# (bench/common.sh: start_curve_model, start_backend, free_port, wait_port;
# mongoplex-bench run for the measurements):
#
#   sweep    one mongoplex per fixed pool_size in SIZES (adaptive off) and one
#            with adaptive_concurrency = on, pool_size 100, all measured in one
#            mongoplex-bench run at THREADS (100) client threads for IDS; per
#            ids: the best fixed pool_size by throughput, adaptive's
#            throughput and p99 as ratios to it. Once per SWEEPS entry:
#              seed      the seed curve (bench/curves/seed.csv)
#              peak40x2  bench/curves/peak40x2.csv (the run-time change's target)
#              rtt1000   the seed curve with --rtt-us 1000 (a remote database)
#              java      mongo-java-server (no collapse: adaptive must cost nothing)
#            SWEEPS lists NAME:BATCHING:IDS entries (BATCHING: the proxies'
#            batching setting); with batching on the 1-id row is also compared
#            with the seed's 1-id peak (3,717 lookups/s: goal >= 5x).
#   settle   a cold adaptive proxy under 100 threads of 1-id lookups; the limit
#            sampled every 0.5 s; the time after which it stays within ±25 %
#            of its median over the rest of the run.
#   change   the same, with the model SIGHUPed to peak40x2.csv at CHANGE_AT s
#            and back to seed.csv at BACK_AT s: limit.csv (t, limit, in flight,
#            queued, lookups/s through the proxy) and limit.png (gnuplot).
#   two      two adaptive proxies in front of one model, 50 clients each: their
#            sum against the best fixed single proxy of the seed sweep, and each
#            one's share.
# The limit and its figures are sampled from /metrics (the same numbers as
# mongoplexStats: proxy/stats_report.c renders both).
#
# Settings (environment, defaults in brackets):
#   SHORT [0]         1: a try in about 10 minutes: QUERIES 30, REPEAT 1,
#                     SETTLE_S 15, CHANGE_AT 20, BACK_AT 45, END_AT 70, SWEEPS
#                     "seed:off:1,10,20 seed:on:1 peak40x2:off:1 rtt1000:off:1
#                     java:off:1,20"
#   SIZES [1,2,4,8,12,16,20,32,50,100]  THREADS [100]  IDS [1,10,20]
#   SWEEPS [every one of seed peak40x2 rtt1000 java, batching off and on, IDS]
#   PARTS [sweep,settle,change,two]
#   QUERIES [200] per thread per cell  REPEAT [3]  WARMUP [200]  DOCS [20000000]
#   SETTLE_S [30]  CHANGE_AT [40] BACK_AT [100] END_AT [160] (seconds)
#   TOLERANCE_PCT, MIN_LIMIT []  adaptive_tolerance_pct / adaptive_min_limit
#                                (empty: the defaults)
#   OUT [bench/out/adaptive-<timestamp>]  BUILD_DIR [build]  BUILD [1]
# Output in OUT: summary.txt (every table), sweep-*/ (report.txt,
# results.json), settle.csv, limit.csv, limit.png, two-*.json, logs.
# Exit status: 0 when every part ran (the goals' verdicts are in the
# summary, not in the exit status), 2 when something could not be set up.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MONGOPLEX_CACHE:-$ROOT/.cache}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BUILD="${BUILD:-1}"
SHORT="${SHORT:-0}"
if [[ "$SHORT" == 1 ]]; then
  QUERIES="${QUERIES:-30}" REPEAT="${REPEAT:-1}" WARMUP="${WARMUP:-100}"
  SETTLE_S="${SETTLE_S:-15}" CHANGE_AT="${CHANGE_AT:-20}" BACK_AT="${BACK_AT:-45}"
  END_AT="${END_AT:-70}"
  SWEEPS="${SWEEPS:-seed:off:1,10,20 seed:on:1 peak40x2:off:1 rtt1000:off:1 java:off:1,20}"
fi
QUERIES="${QUERIES:-200}"
REPEAT="${REPEAT:-3}"
WARMUP="${WARMUP:-200}"
SETTLE_S="${SETTLE_S:-30}"
CHANGE_AT="${CHANGE_AT:-40}"
BACK_AT="${BACK_AT:-100}"
END_AT="${END_AT:-160}"
SIZES="${SIZES:-1,2,4,8,12,16,20,32,50,100}"
THREADS="${THREADS:-100}"
IDS="${IDS:-1,10,20}"
SWEEPS="${SWEEPS:-seed:off:$IDS seed:on:$IDS peak40x2:off:$IDS peak40x2:on:$IDS rtt1000:off:$IDS rtt1000:on:$IDS java:off:$IDS java:on:$IDS}"
PARTS="${PARTS:-sweep,settle,change,two}"
DOCS="${DOCS:-20000000}"
TOLERANCE_PCT="${TOLERANCE_PCT:-}"
MIN_LIMIT="${MIN_LIMIT:-}"
OUT="${OUT:-$ROOT/bench/out/adaptive-$(date +%Y%m%d-%H%M%S)}"
MONGOPLEX_BIN="$BUILD_DIR/mongoplex"
BENCH="$BUILD_DIR/bench/mongoplex-bench"
SEED_CURVE="$ROOT/bench/curves/seed.csv"
PEAK_CURVE="$ROOT/bench/curves/peak40x2.csv"

PIDS=()
log() { echo "adaptive.sh: $*" >&2; }
die() { log "$*"; exit 2; }
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"

# Stops what this script started, by pid, newest first.
cleanup() {
  local i
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill "${PIDS[$i]}" 2>/dev/null || true; done
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do wait "${PIDS[$i]}" 2>/dev/null || true; done
  [[ -z "${BACKEND_DIR:-}" ]] || "$ROOT/scripts/backend.sh" stop "$BACKEND_DIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

has() { [[ ",$1," == *",$2,"* ]]; }
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# One mongoplex: NAME POOL_SIZE ADAPTIVE(on|off) BATCHING(on|off); sets
# MP_PORT, MP_METRICS (host:port) and MP_PID.
start_proxy() {
  local name="$1" size="$2" adaptive="$3" batching="$4" cfg="$OUT/$1.ini" mport
  MP_PORT="$(free_port)"
  mport="$(free_port)"
  cat >"$cfg" <<EOF
; generated by bench/adaptive.sh
[mongoplex]
listen_addr = 127.0.0.1
listen_port = $MP_PORT
backend_uri = $URI
pool_size = $size
batching = $batching
max_queue = 100000
metrics_listen = 127.0.0.1:$mport
adaptive_concurrency = $adaptive
log_level = warning
EOF
  [[ -z "$TOLERANCE_PCT" ]] || echo "adaptive_tolerance_pct = $TOLERANCE_PCT" >>"$cfg"
  [[ -z "$MIN_LIMIT" ]] || echo "adaptive_min_limit = $MIN_LIMIT" >>"$cfg"
  "$MONGOPLEX_BIN" -c "$cfg" >"$OUT/$name.log" 2>&1 &
  MP_PID=$!
  PIDS+=("$MP_PID")
  wait_port "$MP_PORT" "$MP_PID" 20 || die "$name did not start; see $OUT/$name.log"
  MP_METRICS="127.0.0.1:$mport"
}

stop_pids_from() { # index: stop PIDS[index..] (the proxies of one part)
  local i
  for ((i = ${#PIDS[@]} - 1; i >= $1; i--)); do kill "${PIDS[$i]}" 2>/dev/null || true; wait "${PIDS[$i]}" 2>/dev/null || true; done
  PIDS=("${PIDS[@]:0:$1}")
}

# The backend of a sweep: seed | peak40x2 | rtt1000 (the model) or java.
# Sets URI; the model's curve file is $OUT/curve.csv (SIGHUP re-reads it).
start_sweep_backend() {
  BACKEND_DIR=""
  case "$1" in
    java)
      BACKEND_DIR="$OUT/backend-java"
      "$ROOT/scripts/backend.sh" start java "$BACKEND_DIR" >/dev/null || die "java backend did not start"
      URI="$(cat "$BACKEND_DIR/uri")"
      "$BENCH" load --uri "$URI" --docs "$JAVA_DOCS" >/dev/null 2>&1 || die "loading java failed"
      ;;
    *)
      cp "$([[ "$1" == peak40x2 ]] && echo "$PEAK_CURVE" || echo "$SEED_CURVE")" "$OUT/curve.csv"
      CURVE="$OUT/curve.csv" CURVE_RTT_US="$([[ "$1" == rtt1000 ]] && echo 1000 || echo 0)" \
        start_curve_model
      ;;
  esac
}

stop_sweep_backend() {
  if [[ -n "$BACKEND_DIR" ]]; then
    "$ROOT/scripts/backend.sh" stop "$BACKEND_DIR" >/dev/null 2>&1 || true
    BACKEND_DIR=""
  elif [[ -n "${CURVE_PID:-}" ]]; then
    stop_pids_from "$(pid_index "$CURVE_PID")"
    CURVE_PID=""
  fi
}

pid_index() { local i; for i in "${!PIDS[@]}"; do [[ "${PIDS[$i]}" != "$1" ]] || { echo "$i"; return; }; done; echo "${#PIDS[@]}"; }

# Ratios of one sweep's results.json: best fixed, adaptive, goal verdicts.
sweep_table() {
  python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
res, label, goal = json.load(open(sys.argv[1]))["results"], sys.argv[2], float(sys.argv[3])
batching = sys.argv[4] == "on"
by = {}
for r in res:
    by.setdefault(r["ids"], {})[r["path"]] = r
print(f"{label}: best fixed pool_size vs adaptive (pool_size 100), 100 threads")
print("| ids | best fixed | its q/s | its p99 ms | adaptive q/s | adaptive p99 ms | tput ratio | p99 ratio | goal |")
print("|---|---|---|---|---|---|---|---|---|")
for ids in sorted(by):
    cells = by[ids]
    fixed = {p: r for p, r in cells.items() if p.startswith("fixed-")}
    best = max(fixed, key=lambda p: fixed[p]["tput_wall_qps"])
    b, a = fixed[best], cells["adaptive"]
    tr = a["tput_wall_qps"] / b["tput_wall_qps"]
    pr = a["p99_us"] / b["p99_us"]
    ok = tr >= goal and (goal < 0.95 or pr <= 1.2)
    print(f"| {ids} | {best[6:]} | {b['tput_wall_qps']:.0f} | {b['p99_us']/1000:.1f} | "
          f"{a['tput_wall_qps']:.0f} | {a['p99_us']/1000:.1f} | {tr:.2f} | {pr:.2f} | "
          f"{'met' if ok else 'NOT met'} (>= {goal:.2f}{', p99 <= 1.2' if goal >= 0.95 else ''}) |")
if batching and 1 in by:
    lk = by[1]["adaptive"]["lookups_wall_per_s"]
    print(f"batching on, 1 id: adaptive {lk:.0f} lookups/s = {lk/3716.781:.2f}x the seed's 1-id "
          f"peak (3,717/s; goal >= 5x: {'met' if lk >= 5 * 3716.781 else 'NOT met'})")
print("all fixed sizes, q/s: " + "; ".join(
    f"{ids} id(s): " + ", ".join(f"{p[6:]}={r['tput_wall_qps']:.0f}"
                               for p, r in sorted(by[ids].items(), key=lambda x: (len(x[0]), x[0]))
                               if p.startswith("fixed-")) for ids in sorted(by)))
PY
}

# Best fixed wall throughput at 1 id of a sweep (for the two-proxy goal).
best_fixed_1id() {
  python3 -c 'import json,sys
r=[x for x in json.load(open(sys.argv[1]))["results"] if x["ids"]==1 and x["path"].startswith("fixed-")]
print(max(x["tput_wall_qps"] for x in r))' "$1"
}

sweep() { # NAME BATCHING IDS
  local name="$1" batching="$2" ids="$3" dir="$OUT/sweep-$1-batch$2" first="${#PIDS[@]}" paths=() s
  local goal=0.95
  mkdir -p "$dir"
  [[ "$name" != rtt1000 ]] || goal=0.90
  [[ "$name" != peak40x2 ]] || goal=0.90
  start_sweep_backend "$name"
  for s in ${SIZES//,/ }; do
    start_proxy "fixed-$s-$name-$batching" "$s" off "$batching"
    paths+=(--path "fixed-$s=mongodb://127.0.0.1:$MP_PORT/")
  done
  start_proxy "adaptive-$name-$batching" 100 on "$batching"
  paths+=(--path "adaptive=mongodb://127.0.0.1:$MP_PORT/")
  log "sweep $name, batching $batching: ${#paths[@]} args, load $(load)"
  # untimed: every path (the adaptive limit from its cold start too) under
  # the full thread count once before the measured cells
  "$BENCH" run "${paths[@]}" --docs "$SWEEP_DOCS" --threads "$THREADS" --ids 1 \
    --queries 20 --repeat 1 --warmup 0 >/dev/null 2>&1 || true
  local up; up="$(uptime)"
  "$BENCH" run "${paths[@]}" --docs "$SWEEP_DOCS" --threads "$THREADS" --ids "$ids" \
    --queries "$QUERIES" --repeat "$REPEAT" --warmup "$WARMUP" --json "$dir/results.json" \
    >"$dir/report.txt" 2>"$dir/progress.log" || log "sweep $name: mongoplex-bench exit $? (see $dir)"
  stop_pids_from "$first"
  stop_sweep_backend
  say ""
  say "uptime before: $up"
  sweep_table "$dir/results.json" "sweep $name, batching $batching" "$goal" "$batching" |
    tee -a "$OUT/summary.txt"
}

# Samples the adaptive proxy's /metrics every 0.5 s into CSV FILE until
# END seconds: t, limit, in flight, queued, lookups/s (forwarded requests).
sample_limit() {
  local file="$1" end="$2" metrics="$3" t0 prev="" prevt="" now v
  echo "t_s,limit,inflight,queued,requests_per_s" >"$file"
  t0="$(date +%s.%N)"
  while :; do
    now="$(date +%s.%N)"
    awk -v a="$now" -v b="$t0" -v e="$end" 'BEGIN{exit !(a-b>=e)}' && break
    v="$(curl -s "http://$metrics/metrics" | awk '
      /^mongoplex_pool_limit\{/ {l=$2} /^mongoplex_pool_inflight\{/ {f=$2}
      /^mongoplex_pool_queued\{/ {q=$2} /^mongoplex_requests_forwarded_total / {r=$2}
      END {print l+0, f+0, q+0, r+0}')"
    set -- $v
    if [[ -n "$prev" ]]; then
      awk -v t="$now" -v t0="$t0" -v l="$1" -v f="$2" -v q="$3" -v r="$4" -v pr="$prev" -v pt="$prevt" \
        'BEGIN{printf "%.2f,%d,%d,%d,%.0f\n", t-t0, l, f, q, (r-pr)/(t-pt)}' >>"$file"
    fi
    prev="$4" prevt="$now"
    sleep 0.5
  done
}

# 100 threads of 1-id lookups on URI for a long while (stopped by pid).
background_load() { # URI THREADS JSON
  "$BENCH" run --path "p=$1" --docs "$SWEEP_DOCS" --threads "$2" --ids 1 --queries 1000000 \
    --repeat 1 --warmup 0 --json "$3" >/dev/null 2>&1 &
  LOAD_PID=$!
  PIDS+=("$LOAD_PID")
}

part_settle() {
  local first="${#PIDS[@]}"
  start_sweep_backend seed
  start_proxy "settle" 100 on off
  local up; up="$(uptime)"
  background_load "mongodb://127.0.0.1:$MP_PORT/" "$THREADS" "$OUT/settle-load.json"
  sample_limit "$OUT/settle.csv" "$SETTLE_S" "$MP_METRICS"
  stop_pids_from "$first"
  CURVE_PID=""
  say ""
  say "settle (seed model, 100 threads, 1 id, batching off, cold start); uptime before: $up"
  python3 - "$OUT/settle.csv" <<'PY' | tee -a "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = [float(r["t_s"]) for r in rows]; lim = [int(r["limit"]) for r in rows]
half = len(lim) // 2
med = statistics.median(lim[half:])
settled = None
for i in range(len(lim)):
    if all(abs(x - med) <= 0.25 * med + 1 for x in lim[i:]):
        settled = t[i]; break
print(f"limit median over the second half: {med}; first samples: {lim[:12]}")
print(f"settled (stays within +-25 % (+1) of it) after: {settled if settled is not None else 'never'} s"
      f" -> goal (<= 10 s) {'met' if settled is not None and settled <= 10 else 'NOT met'}")
# The climber wanders by design on a flat top (the limit moves while the
# throughput does not): the throughput's own settling, beside the band above.
rate = [float(r["requests_per_s"]) for r in rows]
rmed = statistics.median(rate[half:])
rset = None
for i in range(len(rate)):
    if all(x >= 0.9 * rmed for x in rate[i:]):
        rset = t[i]; break
print(f"throughput: median {rmed:.0f} requests/s over the second half; every 0.5 s interval at"
      f" >= 90 % of it from {rset if rset is not None else 'never'} s on")
PY
}

part_change() {
  local first="${#PIDS[@]}"
  start_sweep_backend seed
  start_proxy "change" 100 on off
  local up; up="$(uptime)"
  background_load "mongodb://127.0.0.1:$MP_PORT/" "$THREADS" "$OUT/change-load.json"
  sample_limit "$OUT/limit.csv" "$END_AT" "$MP_METRICS" &
  local sampler=$!
  PIDS+=("$sampler")
  sleep "$CHANGE_AT"
  cp "$PEAK_CURVE" "$OUT/curve.csv"; kill -HUP "$CURVE_PID"
  log "model SIGHUPed to peak40x2.csv at ${CHANGE_AT} s"
  sleep "$((BACK_AT - CHANGE_AT))"
  cp "$SEED_CURVE" "$OUT/curve.csv"; kill -HUP "$CURVE_PID"
  log "model SIGHUPed back to seed.csv at ${BACK_AT} s"
  wait "$sampler" || true
  stop_pids_from "$first"
  CURVE_PID=""
  if command -v gnuplot >/dev/null; then
    gnuplot <<EOF || log "gnuplot failed"
set terminal pngcairo size 900,450 noenhanced
set output "$OUT/limit.png"
set datafile separator ","
set title "adaptive limit: seed -> peak40x2 (${CHANGE_AT} s) -> seed (${BACK_AT} s), curve model, not MongoDB"
set xlabel "seconds"; set ylabel "limit / in flight"; set y2label "lookups/s"
set y2tics; set ytics nomirror; set key top left
set arrow from ${CHANGE_AT}, graph 0 to ${CHANGE_AT}, graph 1 nohead dt 2
set arrow from ${BACK_AT}, graph 0 to ${BACK_AT}, graph 1 nohead dt 2
plot "$OUT/limit.csv" every ::1 using 1:2 with steps lw 2 title "limit", \
     "" every ::1 using 1:3 with lines title "in flight", \
     "" every ::1 using 1:5 axes x1y2 with lines lc rgb "#999999" title "lookups/s (right)"
EOF
  else
    log "no gnuplot: limit.png not drawn"
  fi
  say ""
  say "change (seed -> peak40x2 at ${CHANGE_AT} s -> seed at ${BACK_AT} s; 100 threads, 1 id, batching off); uptime before: $up"
  python3 - "$OUT/limit.csv" "$CHANGE_AT" "$BACK_AT" "$END_AT" <<'PY' | tee -a "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
c, b, e = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
def phase(lo, hi):
    sel = [r for r in rows if lo <= float(r["t_s"]) < hi]
    return (statistics.median(int(r["limit"]) for r in sel) if sel else 0,
            statistics.median(float(r["requests_per_s"]) for r in sel) if sel else 0)
for name, lo, hi in (("seed, before", c / 2, c), ("peak40x2, settled", c + (b - c) / 2, b),
                     ("seed again, settled", b + (e - b) / 2, e)):
    l, q = phase(lo, hi)
    print(f"  {name:22s} ({lo:.0f}-{hi:.0f} s): median limit {l}, median {q:.0f} lookups/s")
for name, at, end in (("to peak40x2", c, b), ("back to seed", b, e)):
    final = phase(at + (end - at) / 2, end)[1]
    t90 = None
    for r in rows:
        t = float(r["t_s"])
        if at <= t < end and float(r["requests_per_s"]) >= 0.9 * final:
            t90 = t - at; break
    print(f"  {name}: first 0.5 s interval at >= 90 % of the phase's settled rate after "
          f"{t90 if t90 is not None else 'never'} s (compare with the sweeps' best fixed)")
PY
}

part_two() {
  local first="${#PIDS[@]}" a b pa pb
  start_sweep_backend seed
  start_proxy "two-a" 100 on off; a="$MP_PORT"
  start_proxy "two-b" 100 on off; b="$MP_PORT"
  local half=$((THREADS / 2)) up; up="$(uptime)"
  "$BENCH" run --path "a=mongodb://127.0.0.1:$a/" --docs "$SWEEP_DOCS" --threads "$half" --ids 1 \
    --queries "$((QUERIES * 2))" --repeat 1 --warmup "$WARMUP" --json "$OUT/two-a.json" >/dev/null 2>&1 &
  pa=$!
  "$BENCH" run --path "b=mongodb://127.0.0.1:$b/" --docs "$SWEEP_DOCS" --threads "$half" --ids 1 \
    --queries "$((QUERIES * 2))" --repeat 1 --warmup "$WARMUP" --json "$OUT/two-b.json" >/dev/null 2>&1 &
  pb=$!
  wait "$pa" || true; wait "$pb" || true
  stop_pids_from "$first"
  CURVE_PID=""
  local best="none" f="$OUT/sweep-seed-batchoff/results.json"
  [[ ! -f "$f" ]] || best="$(best_fixed_1id "$f")"
  say ""
  say "two adaptive proxies x $half clients, one seed model, 1 id, batching off; uptime before: $up"
  python3 - "$OUT/two-a.json" "$OUT/two-b.json" "$best" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
q = [json.load(open(f))["results"][0]["tput_wall_qps"] for f in sys.argv[1:3]]
tot = sum(q)
print(f"  proxy a {q[0]:.0f} q/s, proxy b {q[1]:.0f} q/s, together {tot:.0f} q/s; shares "
      f"{q[0]/tot:.0%} / {q[1]/tot:.0%} (goal 40-60 %: {'met' if all(0.4 <= x/tot <= 0.6 for x in q) else 'NOT met'})")
if sys.argv[3] != "none":
    best = float(sys.argv[3])
    print(f"  vs the best fixed single proxy of the seed sweep ({best:.0f} q/s at 100 threads): "
          f"{tot/best:.2f} (goal >= 0.90: {'met' if tot/best >= 0.9 else 'NOT met'})")
else:
    print("  no seed sweep with batching off in this run: no ratio to the best fixed")
PY
}

main() {
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  : >"$OUT/summary.txt"
  if [[ "$BUILD" == 1 ]]; then
    ninja -C "$BUILD_DIR" -j2 mongoplex mongoplex-bench mongoplex-curvemodel >"$OUT/build.log" 2>&1 ||
      die "build failed; see $OUT/build.log"
  fi
  SWEEP_DOCS="$DOCS"
  JAVA_DOCS=100000
  say "bench/adaptive.sh $(date -Is), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
  say "settings: SHORT=$SHORT SIZES=$SIZES THREADS=$THREADS QUERIES=$QUERIES REPEAT=$REPEAT" \
      "WARMUP=$WARMUP SWEEPS=$SWEEPS TOLERANCE_PCT=${TOLERANCE_PCT:-default}" \
      "MIN_LIMIT=${MIN_LIMIT:-default}"
  say "backend: mongoplex-curvemodel, a model of the user's table (not MongoDB), and mongo-java-server"
  say "machine: $(nproc) cores; uptime $(uptime)"
  local e name bt ids
  if has "$PARTS" sweep; then
    for e in $SWEEPS; do
      IFS=: read -r name bt ids <<<"$e"
      if [[ "$name" == java ]]; then SWEEP_DOCS="$JAVA_DOCS"; else SWEEP_DOCS="$DOCS"; fi
      sweep "$name" "${bt:-off}" "${ids:-1}"
    done
    SWEEP_DOCS="$DOCS"
  fi
  has "$PARTS" settle && part_settle
  has "$PARTS" change && part_change
  has "$PARTS" two && part_two
  say ""
  say "uptime after: $(uptime)"
  log "done; summary in $OUT/summary.txt"
}

main "$@"
