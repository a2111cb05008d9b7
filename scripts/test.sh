#!/usr/bin/env bash
# The test command: installs what is missing, builds, starts the test
# backends, runs the whole suite with ctest.
#
#   scripts/test.sh            Debug build, against mongo-java-server, then the
#                              integration suite again against FerretDB with
#                              authentication on (the proxy logs in with
#                              SCRAM-SHA-256)
#   scripts/test.sh --asan     the same under AddressSanitizer + UBSan
#
# Nothing is skipped silently: the FerretDB pass not running (FerretDB did not
# build or start) makes the script exit non-zero unless it was opted out of.
#
# Environment:
#   MONGOPLEX_TEST_URI=mongodb://host:port/   run against this server (e.g. a
#       real mongod) instead of starting mongo-java-server; no FerretDB pass
#       (said so at the end)
#   MONGOPLEX_SKIP_FERRETDB=1                 opt out of the FerretDB pass
#       (.ci/run's ASan pass does: the Debug pass covers FerretDB)
#   MONGOPLEX_SKIP_INSTALL=1                  do not run scripts/install-deps.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
build_type=Debug
builddir=build
ctest_args=()
if [ "${1:-}" = "--asan" ]; then
  ctest_args=(-LE package)   # the package is built and tested once, in the Debug pass
  build_type=Asan
  builddir=build-asan
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=23}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
fi

[ -n "${MONGOPLEX_SKIP_INSTALL:-}" ] || scripts/install-deps.sh test package
cmake -S . -B "$builddir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
ninja -C "$builddir"
export MONGOPLEX_BIN="$ROOT/$builddir/mongoplex"

# Build the test backends once, before any test starts one (the backend
# authentication and driver-matrix tests start their own FerretDB): a build
# failure is reported here, loudly, not as a confusing test failure.
scripts/backend.sh build java
scripts/backend.sh build ferretdb

work="$(mktemp -d)"
cleanup() {
  for d in "$work"/*/; do [ -f "$d/pid" ] && scripts/backend.sh stop "$d" || true; done
  rm -rf "$work"
}
trap cleanup EXIT

ferret=0 ferret_note=""
if [ -z "${MONGOPLEX_TEST_URI:-}" ]; then
  MONGOPLEX_TEST_URI="$(scripts/backend.sh start java "$work/java")"
  export MONGOPLEX_TEST_URI
  export MONGOPLEX_TEST_BACKEND=mongo-java-server
  if [ -n "${MONGOPLEX_SKIP_FERRETDB:-}" ]; then
    ferret_note="not run: MONGOPLEX_SKIP_FERRETDB=$MONGOPLEX_SKIP_FERRETDB"
  else
    ferret=1
  fi
else
  export MONGOPLEX_TEST_BACKEND="${MONGOPLEX_TEST_BACKEND:-external}"
  ferret_note="not run: MONGOPLEX_TEST_URI names the server under test"
fi
echo "== suite against $MONGOPLEX_TEST_BACKEND at $MONGOPLEX_TEST_URI ($build_type)"
rc=0
(cd "$builddir" && ctest --output-on-failure "${ctest_args[@]}") || rc=$?

if [ "$ferret" = 1 ]; then
  if ferr="$(scripts/backend.sh build ferretdb 2>&1)" &&
     uri="$(scripts/backend.sh start ferretdb-auth "$work/ferretdb" 2>"$work/ferretdb-start.err")"; then
    # FerretDB with authentication on: the proxy logs in to it with
    # SCRAM-SHA-256 (backend_uri's credentials), the tests' direct
    # connections too (issue 11: the suite passes unchanged with auth on).
    MONGOPLEX_TEST_URI="${uri}?authSource=admin&authMechanism=SCRAM-SHA-256"
    export MONGOPLEX_TEST_URI MONGOPLEX_TEST_BACKEND=ferretdb
    echo "== integration suite against FerretDB (SCRAM-SHA-256) at ${MONGOPLEX_TEST_URI/:mongoplex-pw@/:***@}"
    (cd "$builddir" && ctest --output-on-failure -R '^integration$') || rc=$?
    ferret_note="ran"
  else
    echo "== FAILED: the FerretDB pass could not run (set MONGOPLEX_SKIP_FERRETDB=1 to opt out):"
    { echo "$ferr"; cat "$work/ferretdb-start.err" 2>/dev/null; } | tail -n 8 | sed 's/^/   /'
    ferret_note="FAILED to run"
    rc=1
  fi
fi
echo "== FerretDB pass: $ferret_note"
echo "== scripts/test.sh ($build_type): $([ "$rc" = 0 ] && echo PASSED || echo "FAILED (exit $rc)")"
exit "$rc"
