#!/usr/bin/env bash
# ctest `drivers_modern`: starts its own FerretDB (scripts/backend.sh) and a
# mongoplex in front of it (scripts/with-proxy.sh, MONGOPLEX_BIN), makes sure
# the pinned drivers are installed (tests/drivers/install.sh; fast when they
# are), and runs the modern-driver suite (run.sh) direct and through the proxy,
# and a third time through the proxy with loadBalanced=true and compressors in
# the URI (run.sh's lbcomp pass; MODERN_LB_COMPRESS=0 leaves it out).
# Fails -- never skips -- when FerretDB cannot start or any driver cannot run.
# MODERN_OUT=DIR keeps transcripts, driver logs and the proxy log.
#   tests/drivers/modern/test.sh [DRIVER...]   a subset (run.sh's names; keep
#                                              pymongo in it: the reference)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
work="$(mktemp -d)"
t0=$(date +%s)
cleanup() {
  "$ROOT/scripts/backend.sh" stop "$work/ferretdb" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

if ! "$ROOT/tests/drivers/install.sh"; then
  echo "drivers_modern: tests/drivers/install.sh failed (see above); the drivers it names will fail below"
fi
if ! uri="$("$ROOT/scripts/backend.sh" start ferretdb "$work/ferretdb")"; then
  echo "FAIL drivers_modern: FerretDB did not start (scripts/backend.sh start ferretdb; needs Go >= 1.22 to build it)"
  exit 1
fi
echo "drivers_modern: FerretDB at $uri"
export MONGOPLEX_PROXY_LOG="${MODERN_OUT:+$MODERN_OUT/mongoplex.log}"
[ -n "$MONGOPLEX_PROXY_LOG" ] && mkdir -p "$MODERN_OUT" || unset MONGOPLEX_PROXY_LOG
export MODERN_LB_COMPRESS="${MODERN_LB_COMPRESS:-1}"
"$ROOT/scripts/with-proxy.sh" "$uri" pool_size=4 -- "$ROOT/tests/drivers/modern/run.sh" "$@"
rc=$?
echo "drivers_modern: $(( $(date +%s) - t0 )) s in all"
exit $rc
