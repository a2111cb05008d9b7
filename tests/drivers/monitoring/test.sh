#!/usr/bin/env bash
# ctest `drivers_monitoring`: starts its own FerretDB (scripts/backend.sh; pymongo 4
# needs wire version 9+, which mongo-java-server lacks) and runs
# test_monitoring.py with the pymongo 4 venv, the Node.js driver of
# tests/drivers/node_modules, the Java driver (the modern jar), the Go driver
# v2 (go/, built here), the Go driver v1 (the modern suite's go1 binary) and
# the Rust driver (the modern Rust binary's monitor mode).
# Fails -- never skips -- when FerretDB, the venv or the Node.js driver is
# missing. MONITOR_IDLE_S / MONITOR_HEARTBEAT_MS set the
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
# heartbeats_java runs java/MonitorJava.java on the modern suite's jar (the
# Java driver 5.14); heartbeats_go needs go/ built (the Go driver v2.8.2, the
# modern suite's module cache): a failed build fails that subtest with its output.
export MONITOR_JAVA_JAR="${MONITOR_JAVA_JAR:-$MODERN_JAR}"
# heartbeats_go1 runs the modern suite's Go driver v1 binary (go1/, built by
# tests/drivers/install.sh) in its monitor mode.
export MONITOR_GO1_BIN="${MONITOR_GO1_BIN:-$MODERN_GO1_BIN}"
if [ -z "${MONITOR_GO_BIN:-}" ]; then
  export MONITOR_GO_BIN="$work/mongoplex-monitor-go" MONITOR_GO_ERR=""
  if ! go="$(pick_go)"; then
    MONITOR_GO_ERR="no Go >= 1.22 (/usr/lib/go-1.23/bin/go or go on PATH)"
  elif ! MONITOR_GO_ERR="$(cd "$ROOT/tests/drivers/monitoring/go" && env "${MODERN_GOENV[@]}" \
      "$go" build -trimpath -buildvcs=false -o "$MONITOR_GO_BIN" . 2>&1)"; then
    MONITOR_GO_ERR="go build failed: $MONITOR_GO_ERR"
  fi
fi
# heartbeats_rust: the monitor mode of the modern suite's Rust binary (the
# Rust driver 3.9.1; tests/drivers/install.sh builds it, minutes cold).
export MONITOR_RUST_BIN="${MONITOR_RUST_BIN:-$MODERN_RUST_BIN}" MONITOR_RUST_ERR="not built: run tests/drivers/install.sh"
pick_cargo >/dev/null || MONITOR_RUST_ERR="no cargo with rustc >= 1.88 (Debian's cargo-web/rustc-web) to build it"
export MONGOPLEX_TEST_URI="$uri" PYTHONDONTWRITEBYTECODE=1
# Not exec: the EXIT trap must stop FerretDB and remove $work (the Go binary).
"$MODERN_PY" "$ROOT/tests/drivers/monitoring/test_monitoring.py" "$@"
exit $?
