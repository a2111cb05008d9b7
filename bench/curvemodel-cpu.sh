#!/usr/bin/env bash
# bench/curvemodel-cpu.sh — how much CPU does mongoplex-curvemodel (a model
# of the user's server, never MongoDB) use at a given query rate?
#
# Starts the model with a flat curve (RATE queries/s at every concurrency:
# one cell `1,1,RATE`, so c clients in a closed loop get latency c / RATE
# and together about RATE queries/s), drives it with mongoplex-bench
# (THREADS closed-loop client threads, 1-id lookups, QUERIES per thread),
# and reads the model's /proc/PID/stat utime+stime and /proc/PID/status
# voluntary_ctxt_switches before and after the run. Prints the achieved
# queries/s (the model's own count, curveModelStatus-free: the bench's
# queries over the wall time of the run), the model's CPU in % of one core,
# its voluntary context switches per query, and `uptime` (the figures are
# NOISY when the load average is above the core count).
#
# Settings (environment, defaults in brackets): RATE [4000], THREADS [10],
# QUERIES [4000] per thread, WARMUP [200], EXTRA_ARGS [] (more model flags),
# BUILD_DIR [build], CURVEMODEL_BIN [$BUILD_DIR/bench/mongoplex-curvemodel],
# BENCH_BIN [$BUILD_DIR/bench/mongoplex-bench], OUT [a temporary folder].
# Exit status 0, or 2 when the run could not be made. Uses the binaries as
# they are (build them first: ninja -C build mongoplex-curvemodel mongoplex-bench).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
MODEL="${CURVEMODEL_BIN:-$BUILD_DIR/bench/mongoplex-curvemodel}"
BENCH="${BENCH_BIN:-$BUILD_DIR/bench/mongoplex-bench}"
RATE="${RATE:-4000}"
THREADS="${THREADS:-10}"
QUERIES="${QUERIES:-4000}"
WARMUP="${WARMUP:-200}"
OUT="${OUT:-$(mktemp -d /tmp/curvemodel-cpu-XXXXXX)}"
mkdir -p "$OUT"

die() { echo "curvemodel-cpu.sh: $*" >&2; exit 2; }
[[ -x "$MODEL" ]] || die "no model binary at $MODEL"
[[ -x "$BENCH" ]] || die "no mongoplex-bench binary at $BENCH"

printf 'ids,threads,queries_per_second\n1,1,%s\n' "$RATE" >"$OUT/flat.csv"
# shellcheck disable=SC2086
"$MODEL" --curve "$OUT/flat.csv" --port 0 ${EXTRA_ARGS:-} </dev/null >"$OUT/uri" 2>"$OUT/model.log" &
MPID=$!
trap 'kill "$MPID" 2>/dev/null || true; wait "$MPID" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -s "$OUT/uri" ]] && break; sleep 0.1; done
URI="$(head -n1 "$OUT/uri")"
[[ "$URI" == mongodb://* ]] || die "the model printed no URI; log: $OUT/model.log"

# utime+stime (ticks) and voluntary/involuntary context switches of MPID
sample() {
  local stat
  stat="$(sed 's/^.*) //' "/proc/$MPID/stat")"
  # fields after the comm: 3=state ... utime is field 14, stime 15 (12, 13 here)
  awk '{print $12 + $13}' <<<"$stat"
  awk '/^voluntary_ctxt_switches/ {print $2}' "/proc/$MPID/status"
  awk '/^nonvoluntary_ctxt_switches/ {print $2}' "/proc/$MPID/status"
}

# warm-up (connections, page faults) outside the measured window: the bench
# warms up with WARMUP queries before its timed part, which is all we time
# from the outside too, so we sample around the whole bench run and subtract
# nothing: the warm-up is a small share of QUERIES x THREADS.
read -r -d '' t0 v0 n0 < <(sample; printf '\0') || true
w0="$(date +%s.%N)"
"$BENCH" run --path model="$URI" --docs 20000000 --threads "$THREADS" --ids 1 \
  --queries "$QUERIES" --repeat 1 --warmup "$WARMUP" --json "$OUT/bench.json" \
  >"$OUT/bench.txt" 2>"$OUT/bench.log" || die "mongoplex-bench failed; see $OUT/bench.log"
w1="$(date +%s.%N)"
read -r -d '' t1 v1 n1 < <(sample; printf '\0') || true

python3 - "$t0" "$t1" "$v0" "$v1" "$n0" "$n1" "$w0" "$w1" "$(getconf CLK_TCK)" \
  "$(( THREADS * QUERIES + WARMUP ))" "$OUT/bench.json" "$RATE" "$THREADS" <<'PY'
import json, sys
t0, t1, v0, v1, n0, n1 = (int(x) for x in sys.argv[1:7])
w0, w1, hz, nq = float(sys.argv[7]), float(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
d = json.load(open(sys.argv[11]))
r = d["results"][0]
wall = w1 - w0
cpu = (t1 - t0) / hz
print(f"curve model CPU (a model, not MongoDB): flat curve {sys.argv[12]} q/s, "
      f"{sys.argv[13]} client threads, 1-id lookups")
print(f"  bench: {r['tput_wall_qps']:.0f} q/s wall clock over its timed part"
      f" (p50 {r['p50_us'] / 1e3:.2f} ms)")
print(f"  model over the whole bench run ({nq} queries incl. warm-up and handshakes,"
      f" {wall:.2f} s): {nq / wall:.0f} q/s,"
      f" CPU {cpu * 100 / wall:.1f} % of one core ({cpu * 1e6 / nq:.1f} us/query),"
      f" {(v1 - v0) / nq:.3f} voluntary + {(n1 - n0) / nq:.3f} involuntary ctx switches/query")
PY
echo "  uptime: $(uptime)"
