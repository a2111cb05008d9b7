#!/usr/bin/env bash
# Runs a command with a mongoplex proxy in front of a backend.
#
#   scripts/with-proxy.sh BACKEND_URI [key=value ...] -- command [args...]
#
# Starts build/mongoplex (or $MONGOPLEX_BIN) on a free loopback port with a
# config made of the defaults, backend_uri = BACKEND_URI and the given
# settings, waits until it answers, then runs the command with
# MONGOPLEX_DIRECT_URI and MONGOPLEX_PROXY_URI set. The proxy is stopped
# (SIGINT) when the command ends; its log is kept in $MONGOPLEX_PROXY_LOG if
# set. Exit status: the command's, or 1 if the proxy exited uncleanly.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${MONGOPLEX_BIN:-$ROOT/build/mongoplex}"
[ $# -ge 3 ] || { echo "usage: $0 BACKEND_URI [key=value ...] -- command..." >&2; exit 2; }
backend="$1"; shift
work="$(mktemp -d)"
cfg="$work/mongoplex.ini"
log="${MONGOPLEX_PROXY_LOG:-$work/mongoplex.log}"
{
  echo "[mongoplex]"
  echo "listen_addr = 127.0.0.1"
  echo "listen_port = 0"
  echo "backend_uri = $backend"
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do echo "${1%%=*} = ${1#*=}"; shift; done
} > "$cfg"
[ "${1:-}" = "--" ] || { echo "$0: missing -- before the command" >&2; exit 2; }
shift

"$BIN" -c "$cfg" 2> "$log" &
pid=$!
cleanup() {
  if kill -0 "$pid" 2>/dev/null; then kill -INT "$pid"; fi
  wait "$pid" 2>/dev/null; local rc=$?
  [ -n "${MONGOPLEX_PROXY_LOG:-}" ] || rm -rf "$work"
  return $rc
}
trap 'cleanup || true' EXIT

port=""
for _ in $(seq 1 100); do
  port="$(grep -o 'listening on 127.0.0.1:[0-9]*' "$log" 2>/dev/null | head -1 | cut -d: -f2 || true)"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "mongoplex failed to start:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.05
done
[ -n "$port" ] || { echo "mongoplex did not start listening" >&2; cat "$log" >&2; exit 1; }

export MONGOPLEX_DIRECT_URI="$backend"
export MONGOPLEX_PROXY_URI="mongodb://127.0.0.1:$port/"
set +e
"$@"
rc=$?
set -e
trap - EXIT
cleanup; prc=$?
if [ $prc -ne 0 ]; then
  echo "mongoplex exited with status $prc; log follows:" >&2
  tail -50 "$log" >&2
  [ $rc -ne 0 ] || rc=1
fi
exit $rc
