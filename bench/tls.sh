#!/usr/bin/env bash
# bench/tls.sh — the TLS path, measured briefly: client -> mongoplex (TLS) ->
# FerretDB (TLS + SCRAM) vs the client straight to FerretDB over TLS, and the
# same two without TLS; the proxy's CPU time per request with and without
# TLS; TLS handshakes per second the proxy sustains (openssl s_time, new
# session each time).
#
# Part A (client side, mongo-java-server backend): proxy plain vs proxy with
# client TLS. Part B (FerretDB with TLS + SCRAM, slow: F_QUERIES): direct TLS
# vs client -TLS-> proxy -TLS-> FerretDB.
# Settings: DOCS [2000] QUERIES [2000] F_QUERIES [30] per thread  THREADS [1,4]  IDS [1]
#   REPEAT [1]  S_TIME [5] seconds of handshakes  BUILD_DIR [build]
#   OUT [bench/out/tls-<timestamp>]
# Needs scripts/backend.sh's FerretDB (MONGOPLEX_CACHE) and openssl.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
DOCS="${DOCS:-2000}" QUERIES="${QUERIES:-2000}" F_QUERIES="${F_QUERIES:-30}" THREADS="${THREADS:-1,4}"
IDS="${IDS:-1}" REPEAT="${REPEAT:-1}" S_TIME="${S_TIME:-5}"
OUT="${OUT:-$ROOT/bench/out/tls-$(date +%Y%m%d-%H%M%S)}"
BENCH="$BUILD_DIR/bench/mongoplex-bench"
MP="$BUILD_DIR/mongoplex"
mkdir -p "$OUT"
C="$(mktemp -d /tmp/mpb-XXXXXX)"
cleanup() {
  local p
  # (start_ini_proxy runs in a command substitution: its pids are in $C/*.pid)
  for f in "$C"/*.pid; do [ -f "$f" ] && kill -INT "$(cat "$f")" 2>/dev/null || true; done
  "$ROOT/scripts/backend.sh" stop "$C/fer" >/dev/null 2>&1 || true
  "$ROOT/scripts/backend.sh" stop "$C/java" >/dev/null 2>&1 || true
  rm -rf "$C"
}
trap cleanup EXIT
trap 'exit 2' INT TERM

"$ROOT/tests/tls/mkcerts.sh" "$C" && cp "$C/client-combined.pem" "$C/cc.pem"
TLS_URI="$(MONGOPLEX_TLS_CERT=$C/server.pem MONGOPLEX_TLS_KEY=$C/server.key MONGOPLEX_TLS_CA=$C/ca.pem \
  MONGOPLEX_TLS_CLIENT=$C/cc.pem "$ROOT/scripts/backend.sh" start ferretdb-tls "$C/fer")"
PLAIN_URI="$(cat "$C/fer/plain_uri")"

# start_ini_proxy (prints the port; pid in $C/NAME.pid) and cpu_ticks:
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

# Part A, the client side on a fast backend (mongo-java-server, plain):
# proxy without TLS vs proxy with client TLS (requireTLS).
J_URI="$("$ROOT/scripts/backend.sh" start java "$C/java")"
P_JPLAIN="$(start_ini_proxy jplain "backend_uri = $J_URI")"
P_JTLS="$(start_ini_proxy jtls "backend_uri = $J_URI" "client_tls_mode = requireTLS" \
  "client_tls_cert_file = $C/server.pem" "client_tls_key_file = $C/server.key")"
# Part B, both sides on FerretDB (TLS + SCRAM; slow, so fewer queries):
# direct over TLS vs proxy with client TLS and backend TLS.
P_TLS="$(start_ini_proxy tls "backend_uri = $TLS_URI" "client_tls_mode = requireTLS" \
  "client_tls_cert_file = $C/server.pem" "client_tls_key_file = $C/server.key")"
CA="tls=true&tlsCAFile=$C/ca.pem"

run_path() { # name uri queries
  "$BENCH" run --path "$1=$2" --docs "$DOCS" --threads "$THREADS" --ids "$IDS" \
    --queries "$3" --repeat "$REPEAT" --warmup 100 --json "$OUT/$1.json" > "$OUT/$1.txt" 2>"$OUT/$1.err"
}
per_request() { # name pidfile uri queries
  local pid t0 t1 n hz
  pid="$(cat "$2")"; hz="$(getconf CLK_TCK)"
  t0="$(cpu_ticks "$pid")"; run_path "$1" "$3" "$4"; t1="$(cpu_ticks "$pid")"
  n=$(( $4 * REPEAT * ( $(tr ',' '+' <<<"$THREADS") ) ))
  echo "$1: proxy CPU $(( (t1 - t0) * 1000000 / hz / n )) us/request over $n requests ($(( t1 - t0 )) ticks of 1/$hz s)"
}
"$BENCH" load --uri "$J_URI" --docs "$DOCS" >/dev/null 2>&1
"$BENCH" load --uri "$PLAIN_URI" --docs "$DOCS" >/dev/null 2>&1
per_request java-proxy-plain "$C/jplain.pid" "mongodb://127.0.0.1:$P_JPLAIN/" "$QUERIES" | tee "$OUT/cpu.txt"
per_request java-proxy-clienttls "$C/jtls.pid" "mongodb://localhost:$P_JTLS/?$CA" "$QUERIES" | tee -a "$OUT/cpu.txt"
run_path ferret-direct-tls "$TLS_URI" "$F_QUERIES"
per_request ferret-proxy-tls-both "$C/tls.pid" "mongodb://localhost:$P_TLS/?$CA" "$F_QUERIES" | tee -a "$OUT/cpu.txt"
for n in java-proxy-plain java-proxy-clienttls ferret-direct-tls ferret-proxy-tls-both; do
  echo "== $n"; grep -E "threads|^ +[0-9]|q/s|p50|^[a-z]" "$OUT/$n.txt" | head -n 30
done
pid="$(cat "$C/jtls.pid")"; t0="$(cpu_ticks "$pid")"
openssl s_time -connect "127.0.0.1:$P_JTLS" -new -time "$S_TIME" -CAfile "$C/ca.pem" 2>&1 | grep -E "connections" | tee "$OUT/s_time.txt"
t1="$(cpu_ticks "$pid")"
echo "proxy CPU during s_time: $(( (t1 - t0) * 1000 / $(getconf CLK_TCK) )) ms over ${S_TIME} s" | tee -a "$OUT/s_time.txt"
echo "results in $OUT"
