#!/usr/bin/env bash
# ctest `drivers_monitoring`: starts its own FerretDB (scripts/backend.sh; pymongo 4
# needs wire version 9+, which mongo-java-server lacks) and runs
# test_monitoring.py with the pymongo 4 venv and the Node.js driver of
# tests/drivers/node_modules. Fails -- never skips -- when FerretDB, the venv or
# the Node.js driver is missing. MONITOR_IDLE_S / MONITOR_HEARTBEAT_MS set the
# idle window (default 10 s at heartbeatFrequencyMS 2000).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
# shellcheck source=../modern/env.sh
. "$ROOT/tests/drivers/modern/env.sh"
work="$(mktemp -d)"
cleanup() {
  "$ROOT/scripts/backend.sh" stop "$work/ferretdb" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ ! -x "$MODERN_PY" ]; then
  echo "FAIL drivers_monitoring: no pymongo 4 venv at $MODERN_VENV (tests/drivers/install.sh)"
  exit 1
fi
if [ -z "${MONGOPLEX_MONITOR_URI:-}" ]; then
  if ! uri="$("$ROOT/scripts/backend.sh" start ferretdb "$work/ferretdb")"; then
    echo "FAIL drivers_monitoring: FerretDB did not start (scripts/backend.sh start ferretdb)"
    exit 1
  fi
else
  uri="$MONGOPLEX_MONITOR_URI"
fi
export MONGOPLEX_TEST_URI="$uri" PYTHONDONTWRITEBYTECODE=1
exec "$MODERN_PY" "$ROOT/tests/drivers/monitoring/test_monitoring.py" "$@"
