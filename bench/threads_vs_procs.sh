#!/usr/bin/env bash
# bench/threads_vs_procs.sh — issue 25's threads-or-processes question measured
# on a PROTOTYPE (bench/proto_workers.c, mongoplex-proto-workers: a small
# forwarding proxy for this measurement only, not mongoplex): N event loops as
# N threads sharing one backend pool under a mutex, against N processes with a
# pool each (proxy/workers.c's shape), side by side in ONE mongoplex-bench run.
#
# It starts the java backend (bench/common.sh start_backend; the jar is cached
# under MONGOPLEX_CACHE), loads it, starts one prototype per mode and N (and
# the real mongoplex with workers = N), then runs mongoplex-bench once over
# every path (direct, threads-N, procs-N, mongoplex-wN; interleaved, in a
# balanced order per repeat), 1-id lookups at each THREADS count. Around the run it
# reads each proxy's CPU (utime + stime of the process and its children,
# /proc; 10 ms ticks) and its request count (the prototype's own counters,
# printed when SIGTERM stops it; mongoplexStats requests_total), and prints
# OUT/report.txt: q/s and p50 per path and client-thread count, CPU µs per
# request, the prototype's waits/handoffs/migrations/contended per request, and
# the ratios threads-N / procs-N and N / 1 per mode. `uptime` is printed before
# and after; the run is marked NOISY when the 1-minute load average before it
# was above NOISY_LOAD: its figures are then not results.
#
# Exit: 0 when every path ran without error; 2 when a proxy or the backend did
# not start, mongoplex-bench failed or reported errors, a proxy died, or a
# prototype counted errors or did not exit 0 on SIGTERM. Every process it
# started is stopped on exit (proxies by pid, the backend by scripts/backend.sh).
#
# Settings (environment, defaults in brackets):
#   N_LIST [1,2]        event loops per prototype and mongoplex workers
#   THREADS [8,32]      client threads (mongoplex-bench --threads)
#   QUERIES [2000]      queries per client thread per run
#   REPEAT [3]          runs per cell, at least 2 (medians are reported)
#   WARMUP [500]        untimed queries per path first (--warmup)
#   DOCS [100000]       documents loaded into the backend
#   POOL_SIZE [8]       backend connections per proxy in all: threads share
#                       them, procs and mongoplex workers get ceil(/N) each
#   MONGOPLEX [on]      off: leave out the real mongoplex paths
#   MP_BATCHING [off]   mongoplex's batching (off: it forwards each lookup,
#                       the prototype's job)
#   NOISY_LOAD [1.5]    the 1-minute load average above which the run is NOISY
#   BUILD_DIR [build]   mongoplex-bench, mongoplex-proto-workers, mongoplex
#   OUT [bench/out/tvp-<timestamp>]
#   MONGOPLEX_CACHE [/var/cache/mongoplex-ci]  where the backend jar is cached
#   BACKEND_URI []      an existing server instead of starting one
#   CALLGRIND [off]     on: afterwards, instructions per request (load-
#                       independent, unlike the figures above): each mode at
#                       the largest N under valgrind --tool=callgrind
#                       (--trace-children=yes), CG_THREADS [8,32] client
#                       threads x CG_QUERIES [50,400] queries each; the
#                       marginal count (Ir(big) - Ir(small)) / (requests(big) -
#                       requests(small)) leaves out start-up and shut-down.
#                       Output in OUT/callgrind/, table in OUT/callgrind.txt
#
#   A smoke run:  DOCS=2000 QUERIES=200 REPEAT=2 WARMUP=50 bench/threads_vs_procs.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
N_LIST="${N_LIST:-1,2}" THREADS="${THREADS:-8,32}" QUERIES="${QUERIES:-2000}"
REPEAT="${REPEAT:-3}" WARMUP="${WARMUP:-500}" DOCS="${DOCS:-100000}"
POOL_SIZE="${POOL_SIZE:-8}" MONGOPLEX="${MONGOPLEX:-on}" MP_BATCHING="${MP_BATCHING:-off}"
NOISY_LOAD="${NOISY_LOAD:-1.5}" CALLGRIND="${CALLGRIND:-off}"
CG_THREADS="${CG_THREADS:-8,32}" CG_QUERIES="${CG_QUERIES:-50,400}"
OUT="${OUT:-$ROOT/bench/out/tvp-$(date +%Y%m%d-%H%M%S)}"
export MONGOPLEX_CACHE="${MONGOPLEX_CACHE:-/var/cache/mongoplex-ci}"
BENCH="$BUILD_DIR/bench/mongoplex-bench"
PROTO="$BUILD_DIR/bench/mongoplex-proto-workers"
MP="$BUILD_DIR/mongoplex"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

log() { echo "threads_vs_procs.sh: $*" >&2; }
die() { log "FAILED: $*"; exit 2; }

mkdir -p "$OUT"
C="$(mktemp -d /tmp/tvp-XXXXXX)"
PROXIES=() # names; $C/NAME.pid each
PATHS=()   # mongoplex-bench --path arguments

# Every proxy by pid (SIGTERM, then SIGKILL after 5 s, children too), the
# backend, the temporary directory; says so if anything had to be killed.
cleanup() {
  local f pid kids i p
  for f in "$C"/*.pid; do
    [ -f "$f" ] || continue
    pid="$(cat "$f")"
    kids="$(pgrep -P "$pid" 2>/dev/null || true)"
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    for p in $pid $kids; do
      if kill -0 "$p" 2>/dev/null; then
        log "pid $p ($(basename "$f" .pid)) still running after 5 s: killed"
        kill -KILL "$p" 2>/dev/null || true
      fi
    done
  done
  [ -z "${BACKEND_DIR:-}" ] || "$ROOT/scripts/backend.sh" stop "$BACKEND_DIR" >/dev/null 2>&1 || true
  rm -rf "$C"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

[ "$REPEAT" -ge 2 ] || die "REPEAT must be at least 2"
for b in "$BENCH" "$PROTO"; do [ -x "$b" ] || die "no $b (ninja -C $BUILD_DIR)"; done
[ "$CALLGRIND" != on ] || command -v valgrind >/dev/null || die "CALLGRIND=on needs valgrind"
if [ "$MONGOPLEX" = on ]; then
  [ -x "$MP" ] || die "no $MP (ninja -C $BUILD_DIR), or MONGOPLEX=off"
  /usr/bin/python3 -c 'import pymongo' 2>/dev/null || die "mongoplex paths need python3-pymongo, or MONGOPLEX=off"
fi

# start_proto NAME MODE N: a prototype (--threads or --procs N) on a free port.
start_proto() {
  local name="$1" pid uri i
  "$PROTO" "--$2" "$3" --backend "$BACKEND_HP" --pool-size "$POOL_SIZE" --listen 0 \
    >"$OUT/$name.out" 2>"$OUT/$name.log" &
  pid=$!
  echo "$pid" >"$C/$name.pid"
  for i in $(seq 1 100); do
    [ ! -s "$OUT/$name.out" ] || break
    kill -0 "$pid" 2>/dev/null || die "$name did not start; $OUT/$name.log: $(tail -n 3 "$OUT/$name.log")"
    sleep 0.1
  done
  uri="$(head -n 1 "$OUT/$name.out")"
  [[ "$uri" == mongodb://* ]] || die "$name printed no URI in 10 s; see $OUT/$name.log"
  PROXIES+=("$name")
  PATHS+=(--path "$name=$uri")
}

# start_mongoplex NAME WORKERS: the real mongoplex (bench/common.sh start_ini_proxy).
start_mongoplex() {
  local port
  port="$(start_ini_proxy "$1" "backend_uri = $URI" "workers = $2" "pool_size = $POOL_SIZE" \
    "batching = $MP_BATCHING" "shutdown_quiesce_ms = 0")" || true
  [ -n "$port" ] || die "$1 did not start; see $OUT/$1.log"
  PROXIES+=("$1")
  PATHS+=(--path "$1=mongodb://127.0.0.1:$port/")
}

# CPU ticks of a proxy: the process (all its threads) and its children.
tree_ticks() {
  local t=0 p
  for p in "$1" $(pgrep -P "$1" || true); do t=$((t + $(cpu_ticks "$p"))); done
  echo "$t"
}

mp_requests() { # port -> requests_total summed over the workers
  /usr/bin/python3 -c '
import sys
from pymongo import MongoClient
c = MongoClient(sys.argv[1], directConnection=True, serverSelectionTimeoutMS=5000)
print(c.admin.command("mongoplexStats")["counters"]["requests_total"])' "$1"
}

counter() { # NAME -> its value on $line, the prototype's counters line
  sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<" $line"
}

path_uri() { # NAME -> its URI from PATHS
  local i
  for ((i = 1; i < ${#PATHS[@]}; i += 2)); do
    [[ "${PATHS[$i]}" != "$1="* ]] || { echo "${PATHS[$i]#*=}"; return 0; }
  done
}

# cg_run MODE N CLIENT_THREADS QUERIES: a prototype under callgrind, one
# mongoplex-bench run through it; prints "Ir requests waits handoffs migrations".
cg_run() {
  local d="$OUT/callgrind/$1-$2-t$3-q$4" pid i ir=0 f line
  mkdir -p "$d"
  valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$d/cg.%p" \
    "$PROTO" "--$1" "$2" --backend "$BACKEND_HP" --pool-size "$POOL_SIZE" --listen 0 \
    >"$d/out" 2>"$d/log" &
  pid=$!
  echo "$pid" >"$C/callgrind.pid"
  for i in $(seq 1 300); do
    [ ! -s "$d/out" ] || break
    kill -0 "$pid" 2>/dev/null || die "callgrind $1 $2 did not start; see $d/log"
    sleep 0.1
  done
  "$BENCH" run --path "p=$(head -n 1 "$d/out")" --docs "$DOCS" --threads "$3" --ids 1 \
    --queries "$4" --repeat 1 --warmup 0 >"$d/bench.txt" 2>"$d/bench.err" ||
    die "mongoplex-bench through callgrind $1 $2 failed; see $d/bench.err"
  kill -TERM "$pid"
  wait "$pid" || die "callgrind $1 $2 did not exit 0; see $d/log"
  rm -f "$C/callgrind.pid"
  for f in "$d"/cg.*; do ir=$((ir + $(sed -n 's/^summary: \([0-9]*\)$/\1/p' "$f"))); done
  line="$(grep '^counters:' "$d/out" | tail -n 1)"
  [ "$(counter errors)" = 0 ] || die "callgrind $1 $2 counted errors; see $d/log"
  echo "$ir $(counter requests) $(counter waits) $(counter handoffs) $(counter migrations)"
}

# Instructions per request of threads-N and procs-N, N the largest of N_LIST.
callgrind_part() {
  local n=0 m t a b qa qb
  for m in ${N_LIST//,/ }; do [ "$m" -le "$n" ] || n=$m; done
  qa="${CG_QUERIES%%,*}" qb="${CG_QUERIES##*,}"
  echo "instructions per request (valgrind --tool=callgrind --trace-children=yes, every" \
    "process; marginal between $qa and $qb queries per client thread; pool_size $POOL_SIZE)"
  for t in ${CG_THREADS//,/ }; do
    for m in threads procs; do
      a="$(cg_run "$m" "$n" "$t" "$qa")"
      b="$(cg_run "$m" "$n" "$t" "$qb")"
      python3 -c '
import sys
name, t = sys.argv[1], sys.argv[2]
a, b = [list(map(int, x.split())) for x in sys.argv[3:5]]
r = b[1] - a[1]
print("  %-10s %3s client threads: %6.0f instructions/request  (per request at %d queries: waits %.2f,"
      " handoffs %.2f, migrations %.2f)" % (name, t, (b[0] - a[0]) / r, int(sys.argv[5]),
      b[2] / b[1], b[3] / b[1], b[4] / b[1]))' "$m-$n" "$t" "$a" "$b" "$qb"
    done
  done
}

log "output in $OUT"
start_backend
BACKEND_HP="${URI#mongodb://}" BACKEND_HP="${BACKEND_HP%%[/?]*}" BACKEND_HP="${BACKEND_HP##*@}"
"$BENCH" load --uri "$URI" --docs "$DOCS" >"$OUT/load.txt" 2>&1 || die "load failed; see $OUT/load.txt"
PATHS+=(--path "direct=$URI")
for n in ${N_LIST//,/ }; do
  start_proto "threads-$n" threads "$n"
  start_proto "procs-$n" procs "$n"
  [ "$MONGOPLEX" != on ] || start_mongoplex "mongoplex-w$n" "$n"
done

UP0="$(uptime)"
read -r LOAD0 _ </proc/loadavg
echo "uptime before: $UP0" | tee "$OUT/uptime.txt"
declare -A T0 R0
for name in "${PROXIES[@]}"; do
  T0[$name]="$(tree_ticks "$(cat "$C/$name.pid")")"
  [[ "$name" != mongoplex-* ]] || R0[$name]="$(mp_requests "$(path_uri "$name")")"
done

rc=0
"$BENCH" run "${PATHS[@]}" --docs "$DOCS" --threads "$THREADS" --ids 1 --queries "$QUERIES" \
  --repeat "$REPEAT" --warmup "$WARMUP" --json "$OUT/results.json" \
  >"$OUT/bench.txt" 2> >(tee "$OUT/bench.err" >&2) || rc=$?
[ "$rc" = 0 ] || die "mongoplex-bench run exited $rc (errors, or a path failed): see $OUT/bench.txt and $OUT/bench.err"

# CPU and requests per proxy, then the prototypes stopped: their counters.
: >"$OUT/cpu.txt"
for name in "${PROXIES[@]}"; do
  pid="$(cat "$C/$name.pid")"
  kill -0 "$pid" 2>/dev/null || die "$name (pid $pid) died during the run; see $OUT/$name.log"
  ticks=$(($(tree_ticks "$pid") - ${T0[$name]}))
  if [[ "$name" == mongoplex-* ]]; then
    echo "$name $ticks $(($(mp_requests "$(path_uri "$name")") - ${R0[$name]})) - - - - -" >>"$OUT/cpu.txt"
    continue
  fi
  kill -TERM "$pid"
  prc=0
  wait "$pid" || prc=$?
  rm -f "$C/$name.pid"
  [ "$prc" = 0 ] || die "$name exited $prc on SIGTERM; see $OUT/$name.log"
  line="$(grep '^counters:' "$OUT/$name.out" | tail -n 1)"
  [ -n "$line" ] || die "$name printed no counters"
  echo "$name $ticks $(counter requests) $(counter errors) $(counter waits)" \
    "$(counter handoffs) $(counter migrations) $(counter contended)" >>"$OUT/cpu.txt"
  [ "$(counter errors)" = 0 ] || die "$name counted $(counter errors) errors; see $OUT/$name.log"
done
echo "uptime after: $(uptime)" | tee -a "$OUT/uptime.txt"

python3 - "$OUT/results.json" "$OUT/cpu.txt" "$(getconf CLK_TCK)" "$LOAD0" "$NOISY_LOAD" \
  "$N_LIST" "$POOL_SIZE" "$REPEAT" "$QUERIES" <<'PY' | tee "$OUT/report.txt"
import json, sys
res = json.load(open(sys.argv[1]))["results"]
tck, load0, noisy_at = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
ns = [int(n) for n in sys.argv[6].split(",")]
noisy = load0 > noisy_at
cpu = {}
for line in open(sys.argv[2]):
    f = line.split()
    cpu[f[0]] = f[1:]
paths = list(dict.fromkeys(r["path"] for r in res))
threads = sorted({r["threads"] for r in res})
q = {(r["path"], r["threads"]): r for r in res}

def us_per_req(p):
    if p not in cpu or int(cpu[p][1]) == 0:
        return None
    return int(cpu[p][0]) * 1e6 / tck / int(cpu[p][1])

def per_req(p, i):
    if p not in cpu or cpu[p][i] == "-" or int(cpu[p][1]) == 0:
        return "-"
    return "%.2f" % (int(cpu[p][i]) / int(cpu[p][1]))

tag = "NOISY: " if noisy else ""
print("%sthreads vs processes, PROTOTYPE (bench/proto_workers.c), 1-id lookups; pool_size %s per proxy;"
      % (tag, sys.argv[7]))
print("median of %s runs x %s queries per client thread; 1-min load average before: %.2f%s"
      % (sys.argv[8], sys.argv[9], load0,
         " (above %.2f: NOISY, these figures are not results)" % noisy_at if noisy else ""))
head = "%-14s" % "path" + "".join("  %6d thr q/s  p50 us" % t for t in threads)
print(head + "  CPU us/req  requests  waits/req  handoffs/req  migrations/req  contended/req")
for p in paths:
    row = "%-14s" % p
    for t in threads:
        r = q[(p, t)]
        row += "  %14.0f  %6.0f" % (r["tput_wall_qps"], r["p50_us"])
    u = us_per_req(p)
    row += "  %10s  %8s  %9s  %12s  %14s  %13s" % (
        "%.1f" % u if u is not None else "-", cpu[p][1] if p in cpu else "-",
        per_req(p, 3), per_req(p, 4), per_req(p, 5), per_req(p, 6))
    print(row)
print("CPU us/req: the proxy's utime + stime (process, threads and children, /proc, %d ticks/s)"
      " over the whole bench run / the requests it forwarded (warm-up and handshakes included)."
      % tck)
print("Per request, the prototype's counters: waits (no free connection), handoffs (a connection"
      " granted to another thread's loop), migrations (a connection moved to another loop's"
      " epoll), contended (the shared pool's lock found held).")
print()
print("ratios (q/s at each client-thread count; CPU us per request):")
pairs = []
for n in ns:
    if n > 1:
        pairs.append(("threads-%d" % n, "procs-%d" % n))
for mode in ("threads", "procs", "mongoplex-w"):
    sep = "" if mode.endswith("w") else "-"
    for n in ns:
        if n > 1 and 1 in ns:
            pairs.append(("%s%s%d" % (mode, sep, n), "%s%s1" % (mode, sep)))
print("%-30s" % "" + "".join("  %6d thr" % t for t in threads) + "  CPU us/req")
for a, b in pairs:
    if a not in paths or b not in paths:
        continue
    row = "%-30s" % ("%s / %s" % (a, b))
    for t in threads:
        row += "  %10.2f" % (q[(a, t)]["tput_wall_qps"] / q[(b, t)]["tput_wall_qps"])
    ua, ub = us_per_req(a), us_per_req(b)
    row += "  %10s" % ("%.2f" % (ua / ub) if ua and ub else "-")
    print(row)
errors = sum(r["errors"] + r["mismatches"] for r in res)
print()
print("errors: %d%s" % (errors, "   NOISY run" if noisy else ""))
PY
if [ "$CALLGRIND" = on ]; then
  log "callgrind: each mode under valgrind (a few seconds a run at the default sizes)"
  callgrind_part | tee "$OUT/callgrind.txt"
fi
log "report in $OUT/report.txt"
