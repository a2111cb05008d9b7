#!/usr/bin/env bash
# bench/workers.sh — workers = 2 against workers = 1, side by side in one run
# (issue 25 item 2), with mongo-java-server as the backend (not the
# bottleneck: bench/ceiling.sh measures the single worker's ceiling).
#
# Part A (TLS + zstd, where one worker's core is the limit): W_THREADS [8]
#   client threads x W_IDS [20] ids x W_QUERIES [1500] queries per thread,
#   paths w1 and w2 (client TLS, compressors=zstd) in one mongoplex-bench
#   run. Reported: wall q/s of each, the ratio w2/w1, and the CPU the
#   proxy's processes used (all workers: /proc of the master's children) and
#   the client process used (mongoplex-bench itself), in cores.
# Part B (the 50/100-thread batching cell of issue 25): direct, w1 and w2
#   (plain, batching on) at CELL_THREADS [50,100] x 1 id x CELL_QUERIES [200],
#   and what batching kept across workers: ids merged per $in (the summed
#   counters batch_lookups_merged / batches_sent of each proxy over the run).
# Part C (where the proxy is the bottleneck, modelled): Part A again with
#   every proxy process capped at CAP_PCT [5] % of one core (a cgroup of its
#   own per process, the cpu controller's CFS quota: v1 /sys/fs/cgroup/cpu or
#   v2 cpu.max), so that the proxy, not the clients or the backend sharing
#   the 2 cores, is the limit: what a host with cores to spare for the proxy
#   would show. C_THREADS [32] client threads (not 8: SO_REUSEPORT spreads
#   connections by a hash, unevenly over few, and the wall-clock figure waits
#   for the last thread) x W_IDS x C_QUERIES [200] queries per thread.
#   CAP_PCT=0 skips it; no writable cpu controller: said, skipped.
# Settings also: DOCS [20000] REPEAT [2] BUILD_DIR [build]
#   OUT [bench/out/workers-<timestamp>]. Prints `uptime` first and last: a
#   figure is a result only from a quiet machine; 2 cores are shared by the
#   clients, the proxy's workers and the backend, so say what was left.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
DOCS="${DOCS:-20000}" REPEAT="${REPEAT:-2}"
W_THREADS="${W_THREADS:-8}" W_IDS="${W_IDS:-20}" W_QUERIES="${W_QUERIES:-1500}"
CELL_THREADS="${CELL_THREADS:-50,100}" CELL_QUERIES="${CELL_QUERIES:-200}"
CAP_PCT="${CAP_PCT:-5}" C_THREADS="${C_THREADS:-32}" C_QUERIES="${C_QUERIES:-200}"
OUT="${OUT:-$ROOT/bench/out/workers-$(date +%Y%m%d-%H%M%S)}"
BENCH="$BUILD_DIR/bench/mongoplex-bench"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
bench_init workers.sh mpw

# CPU ticks of a proxy: the process and its children (a master's workers).
tree_ticks() {
  local t=0 p
  for p in "$1" $(pgrep -P "$1" || true); do t=$(( t + $(cpu_ticks "$p") )); done
  echo "$t"
}
batch_counters() { # port -> "merged sent"
  /usr/bin/python3 -c '
import sys
from pymongo import MongoClient
c = MongoClient("mongodb://127.0.0.1:'"$1"'/").admin.command("mongoplexStats")["counters"]
print(c["batch_lookups_merged"], c["batches_sent"])'
}

echo "uptime at start: $(uptime)" | tee "$OUT/uptime.txt"
"$ROOT/tests/tls/mkcerts.sh" "$C" >/dev/null
J_URI="$("$ROOT/scripts/backend.sh" start java "$C/java")"
"$BENCH" load --uri "$J_URI" --docs "$DOCS" >/dev/null 2>&1
TLS=("client_tls_mode = requireTLS" "client_tls_cert_file = $C/server.pem"
     "client_tls_key_file = $C/server.key")
T1="$(start_ini_proxy tls1 "backend_uri = $J_URI" "workers = 1" "${TLS[@]}")"
T2="$(start_ini_proxy tls2 "backend_uri = $J_URI" "workers = 2" "pool_size = 16" "${TLS[@]}")"
P1="$(start_ini_proxy plain1 "backend_uri = $J_URI" "workers = 1")"
P2="$(start_ini_proxy plain2 "backend_uri = $J_URI" "workers = 2" "pool_size = 16")"
CA="tls=true&tlsCAFile=$C/ca.pem&compressors=zstd"
tck="$(getconf CLK_TCK)"

# run NAME ARGS...: mongoplex-bench with ARGS, JSON in $OUT/NAME.json; prints
# the proxies' and the client's CPU over the run, in cores.
run() {
  local name="$1" t0 a0 b0 a1 b1 cl
  shift
  t0=$(date +%s.%N)
  a0=$(tree_ticks "$(cat "$C/$PA.pid")"); b0=$(tree_ticks "$(cat "$C/$PB.pid")")
  cl="$( { TIMEFORMAT='%U %S'; time "$BENCH" run "$@" --docs "$DOCS" --repeat "$REPEAT" \
    --warmup 100 --json "$OUT/$name.json" >"$OUT/$name.txt" 2>"$OUT/$name.err"; } 2>&1 )"
  a1=$(tree_ticks "$(cat "$C/$PA.pid")"); b1=$(tree_ticks "$(cat "$C/$PB.pid")")
  python3 - "$t0" "$(date +%s.%N)" "$tck" "$a0" "$a1" "$b0" "$b1" "$PA" "$PB" $cl <<'PY'
import sys
t0, t1, tck = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
a0, a1, b0, b1 = map(int, sys.argv[4:8])
cu, cs = float(sys.argv[10]), float(sys.argv[11])
wall = t1 - t0
print("  CPU over the whole run (%.0f s, every repeat and path; 2 cores in all): "
      "%s %.2f cores, %s %.2f cores, the clients (mongoplex-bench) %.2f cores"
      % (wall, sys.argv[8], (a1 - a0) / tck / wall, sys.argv[9], (b1 - b0) / tck / wall,
         (cu + cs) / wall))
PY
}

echo "== A: TLS + zstd, $W_THREADS threads x $W_IDS ids, workers 1 vs 2 (median of $REPEAT)" | tee "$OUT/a.txt"
PA=tls1 PB=tls2
{
  run a --path "w1=mongodb://localhost:$T1/?$CA" --path "w2=mongodb://localhost:$T2/?$CA" \
    --threads "$W_THREADS" --ids "$W_IDS" --queries "$W_QUERIES"
  python3 - "$OUT/a.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
q = {r["path"]: r["tput_wall_qps"] for r in res}
e = sum(r["errors"] + r["mismatches"] for r in res)
print("  w1 %.0f q/s  w2 %.0f q/s  ratio w2/w1 %.2f  errors %d" % (q["w1"], q["w2"], q["w2"] / q["w1"], e))
PY
} | tee -a "$OUT/a.txt"

echo "== B: batching cell, $CELL_THREADS threads x 1 id: direct, workers 1, workers 2 (median of $REPEAT)" | tee "$OUT/b.txt"
PA=plain1 PB=plain2
m1a=$(batch_counters "$P1"); m2a=$(batch_counters "$P2")
{
  run b --path "direct=$J_URI" --path "w1=mongodb://127.0.0.1:$P1/" \
    --path "w2=mongodb://127.0.0.1:$P2/" --threads "$CELL_THREADS" --ids 1 \
    --queries "$CELL_QUERIES"
  m1b=$(batch_counters "$P1"); m2b=$(batch_counters "$P2")
  python3 - "$OUT/b.json" "$m1a" "$m1b" "$m2a" "$m2b" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
q = {(r["path"], r["threads"]): r["tput_wall_qps"] for r in res}
for t in sorted({r["threads"] for r in res}):
    d = q[("direct", t)]
    print("  threads %3d  direct %7.0f  w1 %7.0f (%.2fx direct)  w2 %7.0f (%.2fx direct, %.2fx w1)"
          % (t, d, q[("w1", t)], q[("w1", t)] / d, q[("w2", t)], q[("w2", t)] / d,
             q[("w2", t)] / q[("w1", t)]))
for name, a, b in (("w1", sys.argv[2], sys.argv[3]), ("w2", sys.argv[4], sys.argv[5])):
    (ma, sa), (mb, sb) = map(int, a.split()), map(int, b.split())
    sent = sb - sa
    print("  %s: %d lookups merged into %d batches: %.1f ids per $in" % (
        name, mb - ma, sent, (mb - ma) / sent if sent else 0.0))
PY
} | tee -a "$OUT/b.txt"
# cap_pid PID NAME: PID in a cgroup of its own capped at CAP_PCT % of a core.
CGROUPS=()
cap_pid() {
  local d
  if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    d="/sys/fs/cgroup/cpu/mongoplex-bench-$2-$$"
    mkdir "$d" && echo 100000 >"$d/cpu.cfs_period_us" &&
      echo $(( CAP_PCT * 1000 )) >"$d/cpu.cfs_quota_us" && echo "$1" >"$d/cgroup.procs" || return 1
  elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
    d="/sys/fs/cgroup/mongoplex-bench-$2-$$"
    mkdir "$d" && echo "$(( CAP_PCT * 1000 )) 100000" >"$d/cpu.max" &&
      echo "$1" >"$d/cgroup.procs" || return 1
  else
    return 1
  fi
  CGROUPS+=("$d")
}
uncap_all() {
  local d p root
  for d in "${CGROUPS[@]}"; do
    root="$(dirname "$d")"
    while read -r p; do echo "$p" >"$root/cgroup.procs" 2>/dev/null || true; done <"$d/cgroup.procs"
    rmdir "$d" 2>/dev/null || true
  done
  CGROUPS=()
}

if [ "$CAP_PCT" -gt 0 ]; then
  echo "== C: TLS + zstd, $C_THREADS threads x $W_IDS ids, every proxy process capped at $CAP_PCT % of a core (a model of a proxy-bound host)" | tee "$OUT/c.txt"
  trap 'uncap_all; bench_cleanup' EXIT
  ok=1
  cap_pid "$(cat "$C/tls1.pid")" w1 || ok=0
  i=0
  for w in $(pgrep -P "$(cat "$C/tls2.pid")"); do cap_pid "$w" "w2-$i" || ok=0; i=$((i + 1)); done
  if [ "$ok" = 1 ] && [ "$i" = 2 ]; then
    PA=tls1 PB=tls2
    {
      run c --path "w1=mongodb://localhost:$T1/?$CA" --path "w2=mongodb://localhost:$T2/?$CA" \
        --threads "$C_THREADS" --ids "$W_IDS" --queries "$C_QUERIES"
      python3 - "$OUT/c.json" "$CAP_PCT" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
q = {r["path"]: r["tput_wall_qps"] for r in res}
e = sum(r["errors"] + r["mismatches"] for r in res)
print("  capped at %s %% a process: w1 %.0f q/s  w2 %.0f q/s  ratio w2/w1 %.2f  errors %d"
      % (sys.argv[2], q["w1"], q["w2"], q["w2"] / q["w1"], e))
PY
    } | tee -a "$OUT/c.txt"
  else
    echo "  skipped: no writable cpu cgroup controller here (or the workers were not found)" | tee -a "$OUT/c.txt"
  fi
  uncap_all
fi
echo "uptime at end: $(uptime)" | tee -a "$OUT/uptime.txt"
echo "results in $OUT"
