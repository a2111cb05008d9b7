#!/usr/bin/env bash
# Cross-driver smoke test: real MongoDB drivers (PyMongo, the Node.js driver,
# mongosh) must get the same answers through mongoplex as directly against the
# backend.
#
# Usage:  MONGOPLEX_DIRECT_URI=mongodb://127.0.0.1:PORT/ \
#         MONGOPLEX_PROXY_URI=mongodb://127.0.0.1:PROXYPORT/ \
#         tests/drivers/run.sh [pymongo|node|mongosh]...
#
# With no argument all three run.  Each prints a PASS/FAIL line; the script
# exits non-zero if any of them fails.  The database is the one in the URI
# path (default "mongoplex_smoke"); each run uses a fresh collection.
#
# Environment:
#   PYTHON                 interpreter with pymongo (default: first of python3,
#                          /usr/bin/python3 that can import pymongo)
#   SMOKE_TIMEOUT          per-driver wall-clock limit in seconds (default 180)
#   SMOKE_SKIP_NPM_CI=1    never run npm ci (use node_modules as they are)
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here" || exit 2

all=(pymongo node mongosh)
if [ "$#" -eq 0 ]; then
  selected=("${all[@]}")
else
  selected=()
  for a in "$@"; do
    case "$a" in
      pymongo|node|mongosh) selected+=("$a") ;;
      -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
      *) echo "usage: $0 [pymongo|node|mongosh]..." >&2; exit 2 ;;
    esac
  done
fi

if [ -z "${MONGOPLEX_DIRECT_URI:-}" ] || [ -z "${MONGOPLEX_PROXY_URI:-}" ]; then
  echo "run.sh: set MONGOPLEX_DIRECT_URI (backend) and MONGOPLEX_PROXY_URI (mongoplex)" >&2
  exit 2
fi
export MONGOPLEX_DIRECT_URI MONGOPLEX_PROXY_URI

timeout_s="${SMOKE_TIMEOUT:-180}"

needs_node=0
for d in "${selected[@]}"; do
  [ "$d" = pymongo ] || needs_node=1
done

# npm ci when node_modules is missing or older than the lockfile / package.json.
# (npm ci writes node_modules/.package-lock.json, which serves as the stamp.)
node_modules_fresh() {
  local stamp="node_modules/.package-lock.json"
  [ -f "$stamp" ] && [ -x node_modules/.bin/mongosh ] && [ -f node_modules/mongodb/package.json ] \
    && [ ! package-lock.json -nt "$stamp" ] && [ ! package.json -nt "$stamp" ]
}

ensure_node_modules() {
  if [ "${SMOKE_SKIP_NPM_CI:-0}" = 1 ] || node_modules_fresh; then return 0; fi
  if ! command -v npm >/dev/null 2>&1; then
    echo "run.sh: npm not found (Node.js 18+ and npm are needed for the node and mongosh tests)" >&2
    return 1
  fi
  (
    # Two runs at once must not both npm ci into the same directory.
    exec 9<package-lock.json
    flock 9
    node_modules_fresh && exit 0
    echo "run.sh: installing pinned drivers (npm ci) in $here"
    # --ignore-scripts: the only install scripts are optional native add-ons
    # (kerberos, os-dns-native, ...) that these tests do not need.
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error || { echo "run.sh: npm ci failed" >&2; exit 1; }
    touch node_modules/.package-lock.json
  )
}

pick_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return 0; fi
  local p
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pymongo' >/dev/null 2>&1; then
      echo "$p"; return 0
    fi
  done
  return 1
}

npm_ok=1
if [ "$needs_node" = 1 ]; then
  ensure_node_modules || npm_ok=0
fi

passed=0
failed=0
failed_names=()
for d in "${selected[@]}"; do
  echo "=== $d"
  rc=0
  case "$d" in
    pymongo)
      if py="$(pick_python)"; then
        timeout -k 5 "$timeout_s" "$py" smoke_pymongo.py; rc=$?
      else
        echo "FAIL pymongo: no python3 with pymongo found (apt-get install python3-pymongo, or set PYTHON)"; rc=2
      fi ;;
    node)
      if [ "$npm_ok" = 1 ]; then
        timeout -k 5 "$timeout_s" node smoke_node.js; rc=$?
      else
        echo "FAIL node: drivers not installed (npm ci failed)"; rc=2
      fi ;;
    mongosh)
      if [ "$npm_ok" = 1 ]; then
        # --norc: ignore any ~/.mongoshrc.js; the script opens its own connections.
        # --quiet also skips mongosh's update check; telemetry is forced off.
        MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1 \
          timeout -k 5 "$timeout_s" node_modules/.bin/mongosh --nodb --norc --quiet --file smoke_mongosh.js; rc=$?
      else
        echo "FAIL mongosh: drivers not installed (npm ci failed)"; rc=2
      fi ;;
  esac
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "FAIL $d: timed out after ${timeout_s}s"
  fi
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failed_names+=("$d(rc=$rc)")
  fi
done

echo "=== driver smoke summary"
if [ "$failed" -gt 0 ]; then
  echo "failed: ${failed_names[*]}"
fi
echo "drivers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
