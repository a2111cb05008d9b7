#!/usr/bin/env bash
# bench/ab.sh OLD_BINARY NEW_BINARY — two mongoplex builds and an HAProxy
# relay side by side in one mongoplex-bench run: the only comparison of a
# change's wall-clock effect this machine allows (its speed drifts up to 2x
# between runs; see docs/benchmark.md). Each repeat runs the three paths
# back to back, in a balanced order (bench/order.c: a REPEAT that is a
# multiple of 6 balances it), and bench/paired.py reads the ratios inside
# each repeat: new / relay, old / relay and new / old.
#
# Workload: THREADS [1] client threads, IDS [1] ids per lookup, QUERIES
# [3000] lookups per repeat, REPEAT [42] repeats, WARMUP [2000]; each
# mongoplex with POOL_SIZE [10] and batching off (EXTRA_INI: more lines,
# e.g. "batching = on"). Backend: mongo-java-server with DOCS [100000]
# documents, started here, or BACKEND_URI=mongodb://host:port/ (a
# single host, which the relay forwards to). Output in OUT
# [bench/out/ab-<timestamp>]: the bench's report, results.json and
# paired.txt; `uptime` before and after (a figure from a loaded machine is
# noise). Example, the binary of HEAD~1 against HEAD's:
#   git worktree add /tmp/old HEAD~1 && cmake -S /tmp/old -B /tmp/old/b -G Ninja \
#     -DCMAKE_BUILD_TYPE=Release && ninja -C /tmp/old/b mongoplex
#   bench/ab.sh /tmp/old/b/mongoplex build-rel/mongoplex
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ $# -eq 2 ] || { sed -n '2,/^set /{/^#/p}' "$0" >&2; exit 2; } # the header above
OLD_BIN="$1" NEW_BIN="$2"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
THREADS="${THREADS:-1}" IDS="${IDS:-1}" QUERIES="${QUERIES:-3000}" REPEAT="${REPEAT:-42}"
WARMUP="${WARMUP:-2000}" POOL_SIZE="${POOL_SIZE:-10}" DOCS="${DOCS:-100000}"
EXTRA_INI="${EXTRA_INI:-}"
OUT="${OUT:-$ROOT/bench/out/ab-$(date +%Y%m%d-%H%M%S)}"
BENCH="$BUILD_DIR/bench/mongoplex-bench"
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
bench_init ab.sh mpab
for b in "$OLD_BIN" "$NEW_BIN"; do [ -x "$b" ] || die "no mongoplex binary at $b"; done
command -v haproxy >/dev/null || die "haproxy is not installed (scripts/install-deps.sh bench)"

echo "uptime before: $(uptime)" | tee "$OUT/uptime.txt"
if [ -n "${BACKEND_URI:-}" ]; then
  URI="$BACKEND_URI"
else
  URI="$("$ROOT/scripts/backend.sh" start java "$C/java")"
  "$BENCH" load --uri "$URI" --docs "$DOCS" >"$OUT/load.log" 2>&1 || die "load failed; see $OUT/load.log"
fi
HP="$(uri_hostport "$URI")"
[ -n "$HP" ] || die "BACKEND_URI must be a single-host mongodb:// URI: $URI"

RELAY_PORT="$(free_port)"
relay_cfg "$C/haproxy.cfg" "$RELAY_PORT" "$HP" 1
haproxy -db -f "$C/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
RELAY_PID=$!
trap 'kill -TERM "$RELAY_PID" 2>/dev/null; bench_cleanup' EXIT # HAProxy stops on TERM, not INT
wait_port "$RELAY_PORT" "$RELAY_PID" 10 || die "haproxy did not start; see $OUT/haproxy.log"

ini=("listen_addr = 127.0.0.1" "backend_uri = $URI" "batching = off")
[ -z "$EXTRA_INI" ] || ini+=("$EXTRA_INI")
OLD_PORT="$(MP="$OLD_BIN" start_ini_proxy old "${ini[@]}" "pool_size = $POOL_SIZE")"
NEW_PORT="$(MP="$NEW_BIN" start_ini_proxy new "${ini[@]}" "pool_size = $POOL_SIZE")"

"$BENCH" run --path "relay=$(uri_via_port "$URI" "$HP" "$RELAY_PORT")" \
  --path "old=mongodb://127.0.0.1:$OLD_PORT/" --path "new=mongodb://127.0.0.1:$NEW_PORT/" \
  --proc "relay=$RELAY_PID" --proc "old=$(cat "$C/old.pid")" \
  --proc "new=$(cat "$C/new.pid")" --docs "$DOCS" --threads "$THREADS" --ids "$IDS" \
  --queries "$QUERIES" --repeat "$REPEAT" --warmup "$WARMUP" --json "$OUT/results.json" \
  >"$OUT/report.txt" 2>"$OUT/bench.log" || die "the bench failed; see $OUT/bench.log"
echo "uptime after: $(uptime)" | tee -a "$OUT/uptime.txt"
{
  python3 "$ROOT/bench/paired.py" --ref relay "$OUT/results.json"
  python3 "$ROOT/bench/paired.py" --ref old "$OUT/results.json"
} | tee "$OUT/paired.txt"
echo "ab.sh: old $OLD_BIN, new $NEW_BIN; details in $OUT"
