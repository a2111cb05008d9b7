#!/usr/bin/env bash
# The test command: installs what is missing, builds, starts the test
# backends, runs the whole suite with ctest.
#
#   scripts/test.sh            Debug build, against mongo-java-server, then the
#                              integration suite again against FerretDB with
#                              authentication on (the FerretDB pass, see
#                              MONGOPLEX_FERRETDB_VARIANT)
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
#   MONGOPLEX_FERRETDB_VARIANT=sha256|sha1-tls which FerretDB pass (default sha256):
#       sha256    FerretDB with auth (ferretdb-auth); the proxy and the tests'
#                 direct connections log in with SCRAM-SHA-256
#       sha1-tls  FerretDB with auth and TLS (ferretdb-tls, throwaway
#                 certificates from tests/tls/mkcerts.sh); the proxy's
#                 backend_uri is the TLS port with authMechanism=SCRAM-SHA-1
#                 and a client certificate (FerretDB requires one); the tests'
#                 own direct connections (raw sockets, libmongoc and pymongo
#                 probes) use the plain port of the SAME server, also with
#                 SCRAM-SHA-1 (MONGOPLEX_TEST_DIRECT_URI): they do not speak TLS
#       Either way backend_login/* checks the proxy's log: every backend
#       connection logged in with the variant's mechanism (and did TLS).
#   MONGOPLEX_SKIP_INSTALL=1                  do not run scripts/install-deps.sh
#   MONGOPLEX_FERRETDB_ONLY=1                 run only the FerretDB pass (not the
#       ctest run against mongo-java-server before it)
#   MONGOPLEX_FERRETDB_SUITES=all|backend      which integration suites the
#       FerretDB pass runs (default all). backend: the suites whose outcome
#       depends on the server the proxy talks to and how it logs in (backend
#       connections, login, TLS, the pool, cursors, batching; the list is
#       BACKEND_SUITES below); .ci/run's sha1-tls pass uses it
#   MONGOPLEX_TEST_JOBS=N                     criterion jobs of the parallel
#       integration entry and ctest -j (default: the number of CPUs)
#
# Every pass ends with its slowest 10 tests (criterion test cases and the ctest
# entries that are not criterion binaries), from the XML reports in
# $builddir/test-reports/PASS/.
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
  # tests/lsan.supp: criterion's own runner leaks when it runs tests in parallel.
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp}"
fi

# Suites of the FerretDB pass with MONGOPLEX_FERRETDB_SUITES=backend: what
# touches pool/ (connections, dispatch, pins, sticky order, backend auth,
# compression, topology) or core/tls.c. The suites left out run there
# against their own servers (client_auth, per_user: the run's shared FerretDB;
# badinput, depth, protocol, ...: the client side) or are checked
# by the whole sha256 pass of the fresh-machine check.
BACKEND_SUITES="adaptive,admin_ctl,admission,backend_auth,backend_faults,backend_login,batch_limits,batch_numeric,batching,compress,crud,cursors,lbpin,lbtier,lookup,membound,metrics_members,ordering,replset,replset_ferret,tls,tls_reneg"

jobs="${MONGOPLEX_TEST_JOBS:-$(nproc)}"
export MONGOPLEX_TEST_JOBS="$jobs"
# run_ctest PASS ARGS...: ctest -j with the XML reports in
# $builddir/test-reports/PASS, then the slowest 10 tests of the pass.
run_ctest() {
  local pass="$1" rc=0 dir
  shift
  dir="$ROOT/$builddir/test-reports/$pass"
  rm -rf "$dir" && mkdir -p "$dir" && : >"$dir/backend-starts"
  (cd "$builddir" && MONGOPLEX_TEST_REPORT_DIR="$dir" MONGOPLEX_BACKEND_STARTS="$dir/backend-starts" \
     ctest --output-on-failure -j "$jobs" --output-junit "$dir/ctest.xml" "$@") || rc=$?
  python3 scripts/lib/slowest.py 10 "$dir"/*.xml || true
  echo "== test servers started by the tests of this pass: $(wc -l <"$dir/backend-starts")" \
    "($(awk '{print $1}' "$dir/backend-starts" | sort | uniq -c | awk '{printf "%s%s %s", s, $1, $2; s=", "}'))"
  return "$rc"
}

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
  rm -rf "$work" ${certs:+"$certs"}
}
trap cleanup EXIT

ferret=0 ferret_note="" certs=""
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
if [ -n "${MONGOPLEX_FERRETDB_ONLY:-}" ]; then
  echo "== not run: ctest against $MONGOPLEX_TEST_BACKEND (MONGOPLEX_FERRETDB_ONLY=$MONGOPLEX_FERRETDB_ONLY)"
else
  run_ctest "$MONGOPLEX_TEST_BACKEND" "${ctest_args[@]}" || rc=$?
fi

# Starts the FerretDB of the chosen variant in $work/ferretdb and exports
# MONGOPLEX_TEST_URI (the proxy's backend_uri) and, for sha1-tls,
# MONGOPLEX_TEST_DIRECT_URI (the tests' direct connections: the plain port).
ferret_start() {
  local uri
  case "$variant" in
    sha256)
      uri="$(scripts/backend.sh start ferretdb-auth "$work/ferretdb")" || return 1
      MONGOPLEX_TEST_URI="${uri}?authSource=admin&authMechanism=SCRAM-SHA-256"
      unset MONGOPLEX_TEST_DIRECT_URI ;;
    sha1-tls)
      # Short certificate paths: a config line holds at most 198 characters
      # (inih) and backend_uri carries two of them.
      certs="$(mktemp -d /tmp/mpf-XXXXXX)"
      tests/tls/mkcerts.sh "$certs" >&2 && cp "$certs/client-combined.pem" "$certs/cc.pem" || return 1
      uri="$(MONGOPLEX_TLS_CERT="$certs/server.pem" MONGOPLEX_TLS_KEY="$certs/server.key" \
             MONGOPLEX_TLS_CA="$certs/ca.pem" MONGOPLEX_TLS_CLIENT="$certs/cc.pem" \
             scripts/backend.sh start ferretdb-tls "$work/ferretdb")" || return 1
      MONGOPLEX_TEST_URI="${uri}&authSource=admin&authMechanism=SCRAM-SHA-1"
      MONGOPLEX_TEST_DIRECT_URI="$(cat "$work/ferretdb/plain_uri")?authSource=admin&authMechanism=SCRAM-SHA-1"
      export MONGOPLEX_TEST_DIRECT_URI
      if (( ${#MONGOPLEX_TEST_URI} > 184 )); then
        echo "backend_uri is ${#MONGOPLEX_TEST_URI} characters; a config line holds 198" >&2
        return 1
      fi ;;
    *) echo "MONGOPLEX_FERRETDB_VARIANT=$variant: want sha256 or sha1-tls" >&2; return 1 ;;
  esac
  export MONGOPLEX_TEST_URI MONGOPLEX_TEST_BACKEND=ferretdb MONGOPLEX_FERRETDB_VARIANT="$variant"
}

if [ "$ferret" = 1 ]; then
  variant="${MONGOPLEX_FERRETDB_VARIANT:-sha256}"
  t_ferret=$SECONDS
  if ferr="$(scripts/backend.sh build ferretdb 2>&1)" && ferret_start 2>"$work/ferretdb-start.err"; then
    # FerretDB with authentication on (issue 11: the suite passes unchanged
    # with auth on, with SCRAM-SHA-256 and again with SCRAM-SHA-1 over TLS).
    echo "== integration suite against FerretDB ($variant) at ${MONGOPLEX_TEST_URI/:mongoplex-pw@/:***@}"
    [ -z "${MONGOPLEX_TEST_DIRECT_URI:-}" ] ||
      echo "   the tests' direct connections: ${MONGOPLEX_TEST_DIRECT_URI/:mongoplex-pw@/:***@}"
    case "${MONGOPLEX_FERRETDB_SUITES:-all}" in
      all) unset MONGOPLEX_INTEG_SUITES ;;
      backend) export MONGOPLEX_INTEG_SUITES="$BACKEND_SUITES"
               # The batching differentials at a quarter of their size (16
               # threads x 20 queries instead of 32 x 80 on FerretDB): this
               # pass proves batching over another login and transport; the
               # whole sha256 pass and the java passes run them full size.
               export MONGOPLEX_BATCH_THREADS="${MONGOPLEX_BATCH_THREADS:-16}"
               export MONGOPLEX_BATCH_QUERIES="${MONGOPLEX_BATCH_QUERIES:-20}"
               echo "   suites (MONGOPLEX_FERRETDB_SUITES=backend): $BACKEND_SUITES"
               echo "   batching differentials: $MONGOPLEX_BATCH_THREADS threads x $MONGOPLEX_BATCH_QUERIES queries" ;;
      *) echo "MONGOPLEX_FERRETDB_SUITES=$MONGOPLEX_FERRETDB_SUITES: want all or backend" >&2; exit 2 ;;
    esac
    run_ctest "ferretdb-$variant" -R '^integration(_serial)?$' || rc=$?
    unset MONGOPLEX_INTEG_SUITES MONGOPLEX_BATCH_THREADS MONGOPLEX_BATCH_QUERIES
    ferret_note="ran ($variant, $(( SECONDS - t_ferret )) s)"
  else
    echo "== FAILED: the FerretDB pass ($variant) could not run (set MONGOPLEX_SKIP_FERRETDB=1 to opt out):"
    { echo "$ferr"; cat "$work/ferretdb-start.err" 2>/dev/null; } | tail -n 8 | sed 's/^/   /'
    ferret_note="FAILED to run ($variant)"
    rc=1
  fi
fi
echo "== FerretDB pass: $ferret_note"
echo "== scripts/test.sh ($build_type): $([ "$rc" = 0 ] && echo PASSED || echo "FAILED (exit $rc)")"
exit "$rc"
