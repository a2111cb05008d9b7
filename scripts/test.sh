#!/usr/bin/env bash
# The test command: installs what is missing, builds, starts the test
# backends, runs the whole suite with ctest.
#
#   scripts/test.sh            Debug build, against mongo-java-server, then the
#                              integration suite again against FerretDB
#   scripts/test.sh --asan     the same under AddressSanitizer + UBSan
#
# Environment:
#   MONGOPLEX_TEST_URI=mongodb://host:port/   run against this server (e.g. a
#       real mongod) instead of starting mongo-java-server; FerretDB pass skipped
#   MONGOPLEX_SKIP_FERRETDB=1                 skip the FerretDB pass
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

scripts/install-deps.sh
cmake -S . -B "$builddir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
ninja -C "$builddir"
export MONGOPLEX_BIN="$ROOT/$builddir/mongoplex"

work="$(mktemp -d)"
cleanup() {
  for d in "$work"/*/; do [ -f "$d/pid" ] && scripts/backend.sh stop "$d" || true; done
  rm -rf "$work"
}
trap cleanup EXIT

ferret=0
if [ -z "${MONGOPLEX_TEST_URI:-}" ]; then
  MONGOPLEX_TEST_URI="$(scripts/backend.sh start java "$work/java")"
  export MONGOPLEX_TEST_URI
  export MONGOPLEX_TEST_BACKEND=mongo-java-server
  [ -n "${MONGOPLEX_SKIP_FERRETDB:-}" ] || ferret=1
else
  export MONGOPLEX_TEST_BACKEND="${MONGOPLEX_TEST_BACKEND:-external}"
fi
echo "== suite against $MONGOPLEX_TEST_BACKEND at $MONGOPLEX_TEST_URI ($build_type)"
(cd "$builddir" && ctest --output-on-failure "${ctest_args[@]}")

if [ "$ferret" = 1 ]; then
  if ferr="$(scripts/backend.sh build ferretdb 2>&1)"; then
    MONGOPLEX_TEST_URI="$(scripts/backend.sh start ferretdb "$work/ferretdb")"
    export MONGOPLEX_TEST_URI MONGOPLEX_TEST_BACKEND=ferretdb
    echo "== integration suite against FerretDB at $MONGOPLEX_TEST_URI"
    (cd "$builddir" && ctest --output-on-failure -R '^integration$')
  else
    echo "== SKIPPED FerretDB pass: FerretDB did not build:"
    echo "$ferr" | tail -5
  fi
fi
