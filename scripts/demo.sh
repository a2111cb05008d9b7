#!/usr/bin/env bash
# The demo: one command brings up a local backend (mongo-java-server), the
# mongoplex proxy in front of it with a pool of 8 backend connections, and a
# short version of the user's workload (random _id lookups from 1 to 100
# client threads), then shows how many client connections shared how few
# backend connections, and the throughput direct vs through the proxy.
#
#   scripts/demo.sh            (DOCS, QUERIES, THREADS, IDS may be overridden)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DOCS="${DOCS:-100000}"
QUERIES="${QUERIES:-500}"
THREADS="${THREADS:-1,10,50,100}"
IDS="${IDS:-1,20}"
PY=/usr/bin/python3

scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build-release mongoplex mongoplex-bench
export MONGOPLEX_BIN="$ROOT/build-release/mongoplex"
BENCH="$ROOT/build-release/bench/mongoplex-bench"

work="$(mktemp -d)"
trap 'scripts/backend.sh stop "$work/backend" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
echo "== starting mongo-java-server (the demo backend)"
backend="$(scripts/backend.sh start java "$work/backend")"
echo "   backend at $backend"
echo "== loading $DOCS documents"
"$BENCH" load --uri "$backend" --docs "$DOCS"

demo_run() {
  echo "== mongoplex is listening at $MONGOPLEX_PROXY_URI (pool_size = 8, batching on, batch_max_ids = 100: see docs/benchmark-results.md)"
  "$BENCH" run --path "direct=$MONGOPLEX_DIRECT_URI" --path "mongoplex=$MONGOPLEX_PROXY_URI" \
    --docs "$DOCS" --threads "$THREADS" --ids "$IDS" --queries "$QUERIES" --repeat 1 \
    --warmup 100 --json "$work/demo.json"
  echo
  echo "== the pool in use (db.adminCommand({mongoplexStats: 1}))"
  "$PY" - "$MONGOPLEX_PROXY_URI" <<'PYEOF'
import sys, pymongo
s = pymongo.MongoClient(sys.argv[1]).admin.command("mongoplexStats")
c, p = s["counters"], s["pools"][0]
print(f"   client connections accepted : {c['clients_accepted']}")
print(f"   backend connections opened  : {c['backend_connects']} (pool_size {p['poolSize']}, now idle {p['idle']})")
print(f"   requests forwarded          : {c['requests_forwarded']}")
print(f"   lookups answered by batches : {c['batch_lookups']} in {c['batches_sent']} merged $in queries")
PYEOF
}
export -f demo_run
export BENCH DOCS THREADS IDS QUERIES PY work
scripts/with-proxy.sh "$backend" pool_size=8 batching=on batch_max_ids=100 log_level=warning -- bash -c demo_run
