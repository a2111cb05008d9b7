#!/usr/bin/env bash
# Operational tests: reload (SIGHUP), graceful shutdown (SIGTERM), statistics
# (mongoplexStats, /metrics). Each test_*.py starts its own proxies with their
# own config files and logs in temporary directories.
#
#   tests/ops/run.sh [reload|shutdown|stats]...      (default: all)
#
# Prints one PASS/FAIL line per subtest, then "ops: N passed, N failed";
# exits non-zero if anything failed.
#
# Environment:
#   MONGOPLEX_BIN        the proxy (default: <repo>/build/mongoplex)
#   MONGOPLEX_TEST_URI   backend for reload/stats; if unset, a mongo-java-server
#                        is started here (scripts/backend.sh) and stopped after
#   PYTHON               interpreter with pymongo and mockupdb (default: the first
#                        of python3, /usr/bin/python3 that has both)
#   OPS_TIMEOUT          per-script wall-clock limit in seconds (default 120)
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export MONGOPLEX_BIN="${MONGOPLEX_BIN:-$root/build/mongoplex}"
timeout_s="${OPS_TIMEOUT:-120}"
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree

scripts=()
if [ "$#" -eq 0 ]; then
  for f in "$here"/test_*.py; do scripts+=("$f"); done
else
  for a in "$@"; do
    case "$a" in
      -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    esac
    [ -f "$here/test_$a.py" ] || { echo "run.sh: no test_$a.py" >&2; exit 2; }
    scripts+=("$here/test_$a.py")
  done
fi

pick_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return 0; fi
  local p
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pymongo, mockupdb' >/dev/null 2>&1; then
      echo "$p"; return 0
    fi
  done
  return 1
}

if ! py="$(pick_python)"; then
  echo "FAIL setup: no python3 with pymongo and mockupdb (apt-get install python3-pymongo python3-mockupdb, or set PYTHON)"
  echo "ops: 0 passed, 1 failed"
  exit 1
fi
if [ ! -x "$MONGOPLEX_BIN" ]; then
  echo "FAIL setup: $MONGOPLEX_BIN not found (ninja -C build mongoplex)"
  echo "ops: 0 passed, 1 failed"
  exit 1
fi

# mongosh (stats test): installed by the drivers test's npm ci; do it here if missing.
drivers="$root/tests/drivers"
if [ ! -x "$drivers/node_modules/.bin/mongosh" ] && command -v npm >/dev/null 2>&1; then
  echo "run.sh: installing mongosh (npm ci in tests/drivers)"
  ( cd "$drivers" && exec 9<package-lock.json && flock 9 &&
    { [ -x node_modules/.bin/mongosh ] ||
      npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; } ) ||
    echo "run.sh: npm ci failed; the mongosh checks will fail"
fi

work=""
cleanup() {
  if [ -n "$work" ]; then
    "$root/scripts/backend.sh" stop "$work/java" >/dev/null 2>&1 || true
    rm -rf "$work"
  fi
}
trap cleanup EXIT
if [ -z "${MONGOPLEX_TEST_URI:-}" ]; then
  work="$(mktemp -d)"
  if ! MONGOPLEX_TEST_URI="$("$root/scripts/backend.sh" start java "$work/java")"; then
    echo "FAIL setup: could not start mongo-java-server (scripts/backend.sh start java)"
    echo "ops: 0 passed, 1 failed"
    exit 1
  fi
  export MONGOPLEX_TEST_URI
fi
echo "ops: backend $MONGOPLEX_TEST_URI, proxy $MONGOPLEX_BIN, $py"

passed=0
failed=0
failed_names=()
for s in "${scripts[@]}"; do
  name="$(basename "$s" .py)"
  echo "=== $name"
  out="$(mktemp)"
  timeout -k 5 "$timeout_s" "$py" "$s" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  p=$(grep -c '^PASS ' "$out")
  f=$(grep -c '^FAIL ' "$out")
  passed=$((passed + p))
  failed=$((failed + f))
  while read -r line; do failed_names+=("${line%%:*}"); done < <(grep '^FAIL ' "$out" | cut -c6-)
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      echo "FAIL $name: timed out after ${timeout_s}s"
    else
      echo "FAIL $name: exited with status $rc"
    fi
    failed=$((failed + 1))
    failed_names+=("$name")
  fi
  rm -f "$out"
done

echo "=== ops summary"
[ "$failed" -eq 0 ] || echo "failed: ${failed_names[*]}"
echo "ops: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
