#!/usr/bin/env bash
# bench/run.sh — one full benchmark run of mongoplex, side by side with the
# alternatives, reproducing the user's original experiment (see README.md).
#
# Steps: build mongoplex-bench (and mongoplex) with cmake; start a backend
# (scripts/backend.sh, mongo-java-server by default); load the documents;
# start the paths — HAProxy `mode tcp` relay, mongoplex with batching off
# and on, mongobetween if it can be had; run `mongoplex-bench run` over all
# paths; stop everything it started on exit.
#
# Settings (environment variables, defaults in brackets):
#   DOCS [1000000; 20000000 with BACKEND=curve]  QUERIES [10000] per thread
#   CELL_QUERIES []  queries per run split among its threads (the seed's 10000)
#   THREADS [1,5,10,20,50,100]
#   IDS [1,10,20]   REPEAT [3]  WARMUP [1000]  POOL_MODE [per-thread|shared10]
#   OUT [bench/out/<timestamp>]     where report, JSON, plot and logs go
#   BUILD_DIR [build]  BUILD [1]    BUILD=0: use the binaries as they are
#   BACKEND [java]                  kind passed to scripts/backend.sh start, or
#                                   curve: mongoplex-curvemodel, a model of the
#                                   user's server (CURVE, CURVE_RTT_US: bench/common.sh)
#   BACKEND_URI []                  use this server instead of starting one
#   MONGOPLEX [on|off]              the mongoplex paths
#   MONGOPLEX_BIN [$BUILD_DIR/mongoplex]  MONGOPLEX_POOL_SIZE [4]
#   BATCH_MAX_IDS [100]   (see docs/benchmark-results.md for why these two)
#   HAPROXY [on|off]  HAPROXY_THREADS [1]
#   MONGOBETWEEN [auto|off|/path/to/binary]  MONGOBETWEEN_POOL_SIZE [16]
#   MONGOBETWEEN_SRC []             auto: build mongobetween from this checkout / git dir
#   UNIX [on|off]                   the mongoplex-unix path (clients over its unix socket)
#   AUTH [on|off]                   the mongoplex-auth path: client SCRAM on (see README.md)
#   AUTH_MECH [SCRAM-SHA-256]       its clients' mechanism (or SCRAM-SHA-1)
#   PLACEMENT [shared|split|netns]  where the backend runs (see README.md):
#     split: backend pinned to BACKEND_CPU [0], everything else to CLIENT_CPUS [1]
#     netns: backend in its own network namespace behind a veth pair with
#            RTT_US [200] of round-trip time (tc netem, half each way),
#            clients and proxies in a second namespace; both made and removed here
# Exit status: that of mongoplex-bench run (1 = some queries failed), or 2
# when the run could not be set up.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MONGOPLEX_CACHE:-$ROOT/.cache}"
BACKEND="${BACKEND:-java}"
if [[ "$BACKEND" == curve ]]; then DOCS="${DOCS:-20000000}"; else DOCS="${DOCS:-1000000}"; fi
CELL_QUERIES="${CELL_QUERIES:-}"
CURVE_PID=""     # the curve model's pid (BACKEND=curve)
QUERIES="${QUERIES:-10000}"
THREADS="${THREADS:-1,5,10,20,50,100}"
IDS="${IDS:-1,10,20}"
REPEAT="${REPEAT:-3}"
WARMUP="${WARMUP:-1000}"
POOL_MODE="${POOL_MODE:-per-thread}"
OUT="${OUT:-$ROOT/bench/out/$(date +%Y%m%d-%H%M%S)}"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BUILD="${BUILD:-1}"
BACKEND_URI="${BACKEND_URI:-}"
MONGOPLEX="${MONGOPLEX:-on}"
MONGOPLEX_BIN="${MONGOPLEX_BIN:-$BUILD_DIR/mongoplex}"
MONGOPLEX_POOL_SIZE="${MONGOPLEX_POOL_SIZE:-4}"
BATCH_MAX_IDS="${BATCH_MAX_IDS:-100}"
HAPROXY="${HAPROXY:-on}"
HAPROXY_THREADS="${HAPROXY_THREADS:-1}"
MONGOBETWEEN="${MONGOBETWEEN:-auto}"
MONGOBETWEEN_POOL_SIZE="${MONGOBETWEEN_POOL_SIZE:-16}"
MONGOBETWEEN_SRC="${MONGOBETWEEN_SRC:-}"
MB_BIN="" MB_SRC_REV=""
MONGOBETWEEN_MODULE="github.com/coinbase/mongobetween"
UNIX="${UNIX:-on}"
AUTH="${AUTH:-on}"
AUTH_MECH="${AUTH_MECH:-SCRAM-SHA-256}"
AUTH_USER="bench" AUTH_PW="bench-Pw-1"  # the mongoplex-auth path's one user
PLACEMENT="${PLACEMENT:-shared}"
BACKEND_CPU="${BACKEND_CPU:-0}"
CLIENT_CPUS="${CLIENT_CPUS:-1}"
RTT_US="${RTT_US:-200}"
# Set by the netns placement for its inner run (inside the clients' namespace):
# the pid of the backend it started in the other namespace.
NETNS_BACKEND_PID="${NETNS_BACKEND_PID:-}"
NETNS_NAMES=()   # network namespaces this script created (removed on exit)

PIDS=()          # processes this script started (stopped by pid on exit)
PATHS=()         # --path NAME=URI arguments for mongoplex-bench
PROCS=()         # --proc NAME=PID (the process serving a path) and --backend-* arguments
SKIPPED=()       # "path: reason" for every path that could not run
BACKEND_DIR=""   # set once scripts/backend.sh started a server
BENCH=""         # the mongoplex-bench binary

log() { echo "run.sh: $*" >&2; }
die() { log "$*"; exit 2; }
skip() { SKIPPED+=("$1: $2"); log "SKIP $1: $2"; }
# free_port, wait_port, start_backend (shared with bench/profile.sh)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

# ------------------------------------------------------------ cleanup

# Stops what this script started: its own children by pid, then the backend.
cleanup() {
  local pid i
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || continue
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [[ -n "$BACKEND_DIR" ]]; then
    "$ROOT/scripts/backend.sh" stop "$BACKEND_DIR" || true
  fi
  for i in "${NETNS_NAMES[@]}"; do
    # whatever still runs in a namespace made here was started here
    for pid in $(ip netns pids "$i" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$i" 2>/dev/null || log "could not delete network namespace $i"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ helpers

# Starts a command in the background with output to LOG; remembers its pid
# in STARTED_PID and in PIDS.
start_bg() {
  local logf="$1"; shift
  "$@" </dev/null >"$logf" 2>&1 &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
}

# ------------------------------------------------------------ build

# Builds mongoplex-bench and (best effort) mongoplex; sets BENCH.
build_all() {
  if [[ "$BUILD" != 1 ]]; then
    BENCH="$BUILD_DIR/bench/mongoplex-bench"
    [[ -x "$BENCH" ]] || BENCH="$BUILD_DIR/bench-only/mongoplex-bench"
    return 0
  fi
  if [[ -f "$ROOT/CMakeLists.txt" ]] &&
       cmake -S "$ROOT" -B "$BUILD_DIR" >"$OUT/cmake-configure.log" 2>&1 &&
       cmake --build "$BUILD_DIR" --target mongoplex-bench -j "$(nproc)" >"$OUT/build-bench.log" 2>&1; then
    BENCH="$BUILD_DIR/bench/mongoplex-bench"
    cmake --build "$BUILD_DIR" --target mongoplex -j "$(nproc)" >"$OUT/build-mongoplex.log" 2>&1 ||
      log "mongoplex did not build (see $OUT/build-mongoplex.log); an older binary, if any, is used"
    if [[ "$BACKEND" == curve ]]; then
      cmake --build "$BUILD_DIR" --target mongoplex-curvemodel -j "$(nproc)" \
        >"$OUT/build-curvemodel.log" 2>&1 ||
        die "mongoplex-curvemodel did not build; see $OUT/build-curvemodel.log"
    fi
  else
    log "top-level cmake project unusable (see $OUT/cmake-configure.log, build-bench.log);" \
        "building the bench tool on its own"
    cmake -S "$ROOT/bench" -B "$BUILD_DIR/bench-only" >"$OUT/cmake-configure-bench-only.log" 2>&1 &&
      cmake --build "$BUILD_DIR/bench-only" -j "$(nproc)" >"$OUT/build-bench-only.log" 2>&1 ||
      die "mongoplex-bench did not build; see $OUT/build-bench-only.log"
    BENCH="$BUILD_DIR/bench-only/mongoplex-bench"
  fi
}

# ------------------------------------------------------------ backend

# /proc figures for the backend: its pid (when started here) and its port.
backend_procs() {
  local hp
  if [[ -n "$BACKEND_DIR" && -f "$BACKEND_DIR/pid" ]]; then
    PROCS+=(--backend-pid "$(cat "$BACKEND_DIR/pid")")
  elif [[ -n "$NETNS_BACKEND_PID" ]]; then
    PROCS+=(--backend-pid "$NETNS_BACKEND_PID")
  elif [[ -n "$CURVE_PID" ]]; then
    PROCS+=(--backend-pid "$CURVE_PID")
  fi
  hp="$(uri_hostport "$URI")"
  [[ -z "$hp" || "${hp##*:}" == "$hp" ]] || PROCS+=(--backend-port "${hp##*:}")
}

# ------------------------------------------------------------ placement

# PLACEMENT=split: this script (so every client, proxy and relay it starts)
# on CLIENT_CPUS; start_backend puts the backend on BACKEND_CPU.
placement_split() {
  command -v taskset >/dev/null || die "PLACEMENT=split: taskset is not installed (util-linux)"
  (( $(nproc --all) >= 2 )) || die "PLACEMENT=split needs 2 CPUs, this machine has $(nproc --all)"
  taskset -p -c "$CLIENT_CPUS" $$ >/dev/null || die "PLACEMENT=split: taskset -p -c $CLIENT_CPUS failed"
  [[ -z "$BACKEND_URI" ]] || log "PLACEMENT=split with BACKEND_URI: only the clients and proxies are pinned"
  log "placement split: backend on CPU $BACKEND_CPU, clients and proxies on CPU $CLIENT_CPUS"
}

# Why tc netem may be missing: the kernel's configuration, when it says.
netem_reason() {
  if [[ -r /proc/config.gz ]] && zcat /proc/config.gz | grep -q '^# CONFIG_NET_SCH_NETEM is not set'; then
    echo "this kernel ($(uname -r)) is built without it (CONFIG_NET_SCH_NETEM is not set)"
  else
    echo "is the sch_netem module available?"
  fi
}

# Runs "$@" inside network namespace $1 (ip netns exec execs, so $! is the command).
in_ns() { local ns="$1"; shift; ip netns exec "$ns" "$@"; }

# PLACEMENT=netns: makes two namespaces joined by a veth pair with netem
# delay RTT_US/2 on each end (198.18.0.1 backend, 198.18.0.2 clients, from
# the benchmarking range 198.18.0.0/15), starts the Java backend in the
# first, then reruns this script inside the second with the backend given
# (NETNS_BACKEND_PID, BACKEND_URI). Everything is removed on exit.
placement_netns() {
  local nsb="mpbench-b-$$" nsc="mpbench-c-$$" vb="mpb${$}b" vc="mpb${$}c" half=$((RTT_US / 2))
  local jar="$CACHE/mongoplex-testserver.jar" port="" i rc=0
  command -v ip >/dev/null || die "PLACEMENT=netns: ip (iproute2) is not installed"
  command -v tc >/dev/null || die "PLACEMENT=netns: tc (iproute2) is not installed"
  [[ -z "$BACKEND_URI" ]] || die "PLACEMENT=netns starts its own backend; unset BACKEND_URI"
  [[ "$BACKEND" == java ]] || die "PLACEMENT=netns supports BACKEND=java only"
  [[ -f "$jar" ]] || die "PLACEMENT=netns: no $jar (run scripts/backend.sh start java DIR once)"
  ip netns add "$nsb" || die "PLACEMENT=netns: ip netns add failed (root and CAP_SYS_ADMIN needed)"
  NETNS_NAMES+=("$nsb")
  ip netns add "$nsc" || die "PLACEMENT=netns: ip netns add $nsc failed"
  NETNS_NAMES+=("$nsc")
  ip link add "$vb" netns "$nsb" type veth peer name "$vc" netns "$nsc" ||
    die "PLACEMENT=netns: could not create the veth pair"
  ip -n "$nsb" addr add 198.18.0.1/30 dev "$vb" && ip -n "$nsc" addr add 198.18.0.2/30 dev "$vc" &&
    ip -n "$nsb" link set lo up && ip -n "$nsc" link set lo up &&
    ip -n "$nsb" link set "$vb" up && ip -n "$nsc" link set "$vc" up ||
    die "PLACEMENT=netns: could not configure the veth pair"
  if (( half > 0 )); then
    tc -n "$nsb" qdisc add dev "$vb" root netem delay "${half}us" limit 100000 &&
      tc -n "$nsc" qdisc add dev "$vc" root netem delay "${half}us" limit 100000 ||
      die "PLACEMENT=netns: tc netem failed: $(netem_reason) (RTT_US=0 runs without the delay)"
  fi
  log "placement netns: backend in $nsb (198.18.0.1), clients and proxies in $nsc (198.18.0.2), RTT ${RTT_US} us"
  mkdir -p "$OUT/backend"
  # a simple command (not a function) so that $! is the server itself
  # shellcheck disable=SC2086
  ip netns exec "$nsb" java ${MONGOPLEX_JAVA_OPTS:-} -jar "$jar" --host 198.18.0.1 --port 0 \
    </dev/null >"$OUT/backend/log" 2>&1 &
  local bpid=$!
  PIDS+=("$bpid")
  for i in $(seq 1 600); do
    port="$(sed -n 's/^READY [^ ]*:\([0-9][0-9]*\)$/\1/p' "$OUT/backend/log")"
    [[ -z "$port" ]] || break
    kill -0 "$bpid" 2>/dev/null || die "PLACEMENT=netns: the backend died; see $OUT/backend/log"
    sleep 0.1
  done
  [[ -n "$port" ]] || die "PLACEMENT=netns: the backend did not report READY in 60 s"
  in_ns "$nsc" bash -c "exec 3<>/dev/tcp/198.18.0.1/$port" ||
    die "PLACEMENT=netns: the backend at 198.18.0.1:$port is not reachable from $nsc"
  ip netns exec "$nsc" env NETNS_BACKEND_PID="$bpid" BACKEND_URI="mongodb://198.18.0.1:$port/" \
    OUT="$OUT" PLACEMENT=netns RTT_US="$RTT_US" "$ROOT/bench/run.sh" &
  local inner=$!
  PIDS+=("$inner")
  wait "$inner" || rc=$?
  return "$rc"
}

# ------------------------------------------------------------ paths

# The relay path: HAProxy in `mode tcp`, the floor cost of one extra hop.
start_relay() {
  [[ "$HAPROXY" == on ]] || { skip relay "HAPROXY=$HAPROXY"; return 0; }
  command -v haproxy >/dev/null || { skip relay "haproxy is not installed"; return 0; }
  local hp port cfg="$OUT/haproxy.cfg"
  hp="$(uri_hostport "$URI")"
  [[ -n "$hp" ]] || { skip relay "backend URI is not a single-host mongodb:// URI"; return 0; }
  port="$(free_port)"
  relay_cfg "$cfg" "$port" "$hp" "$HAPROXY_THREADS"
  start_bg "$OUT/haproxy.log" haproxy -db -f "$cfg"
  if wait_port "$port" "$STARTED_PID" 10; then
    PATHS+=(--path "relay=$(uri_via_port "$URI" "$hp" "$port")")
    PROCS+=(--proc "relay=$STARTED_PID")
  else
    skip relay "haproxy did not start; see $OUT/haproxy.log"
  fi
}

# One mongoplex instance, NAME with batching on|off; with a third argument,
# a socket path, it also listens there and serves the path NAME-unix. A
# fourth adds ini lines; a fifth, "user:password@?options", is the clients'
# login (the path's URI carries it).
start_mongoplex() {
  local name="$1" batching="$2" sock="${3:-}" more="${4:-}" login="${5:-}" port cfg="$OUT/$1.ini"
  local cred="${login%%\?*}" opts=""
  [[ "$login" != *\?* ]] || opts="?${login#*\?}"
  port="$(free_port)"
  cat >"$cfg" <<EOF
; generated by bench/run.sh
[mongoplex]
listen_addr = 127.0.0.1
listen_port = $port
backend_uri = $URI
pool_size = $MONGOPLEX_POOL_SIZE
batching = $batching
batch_max_ids = $BATCH_MAX_IDS
log_level = warning
EOF
  [[ -z "$sock" ]] || echo "unix_socket = $sock" >>"$cfg"
  [[ -z "$more" ]] || printf '%s\n' "$more" >>"$cfg"
  start_bg "$OUT/$name.log" "$MONGOPLEX_BIN" -c "$cfg"
  if wait_port "$port" "$STARTED_PID" 20; then
    PATHS+=(--path "$name=mongodb://${cred}127.0.0.1:$port/$opts")
    PROCS+=(--proc "$name=$STARTED_PID")
    if [[ -n "$sock" && -S "$sock" ]]; then
      # libmongoc takes a socket path as the host, %-encoded; the same
      # process serves both paths (its /proc figures are taken per run).
      PATHS+=(--path "$name-unix=mongodb://${sock//\//%2F}/")
      PROCS+=(--proc "$name-unix=$STARTED_PID")
    elif [[ -n "$sock" ]]; then
      skip "$name-unix" "mongoplex did not create its unix socket $sock; see $OUT/$name.log"
    fi
  else
    skip "$name" "mongoplex did not start listening; last log lines: $(tail -n 3 "$OUT/$name.log" | tr '\n' ' ')"
  fi
}

start_mongoplexes() {
  if [[ "$MONGOPLEX" != on ]]; then
    local n
    for n in mongoplex mongoplex-batch mongoplex-unix mongoplex-auth; do skip "$n" "MONGOPLEX=$MONGOPLEX"; done
    return 0
  fi
  if [[ ! -x "$MONGOPLEX_BIN" ]]; then
    skip mongoplex "no binary at $MONGOPLEX_BIN"
    skip mongoplex-batch "no binary at $MONGOPLEX_BIN"
    return 0
  fi
  local sock=""
  if [[ "$UNIX" != on ]]; then
    skip mongoplex-unix "UNIX=$UNIX"
  else
    sock="$OUT/mongoplex.sock"
    # sun_path holds 107 bytes: fall back to a private directory under /tmp.
    (( ${#sock} < 100 )) || sock="$(mktemp -d /tmp/mpbench.XXXXXX)/mongoplex.sock"
  fi
  start_mongoplex mongoplex off "$sock"
  start_mongoplex mongoplex-batch on
  start_mongoplex_auth
}

# The mongoplex-auth path: the mongoplex path's settings plus client
# authentication (auth_mode = scram) with one user in a users file made by
# `mongoplex --scram-secret`, auth_pool_mode = shared (the backend needs no
# users: every client runs on backend_uri's identity). Each client connection
# logs in once (AUTH_MECH, speculatively in its hello); see README.md.
start_mongoplex_auth() {
  [[ "$AUTH" == on ]] || { skip mongoplex-auth "AUTH=$AUTH"; return 0; }
  local users="$OUT/mongoplex-auth.users"
  if ! printf '%s\n' "$AUTH_PW" | "$MONGOPLEX_BIN" --scram-secret "admin.$AUTH_USER" >"$users" \
       2>"$OUT/mongoplex-auth-secret.log"; then
    skip mongoplex-auth "mongoplex --scram-secret failed: $(head -n 2 "$OUT/mongoplex-auth-secret.log" | tr '\n' ' ')"
    return 0
  fi
  chmod 0600 "$users"
  start_mongoplex mongoplex-auth off "" \
    "$(printf 'auth_mode = scram\nauth_users_file = %s\nauth_pool_mode = shared' "$users")" \
    "$AUTH_USER:$AUTH_PW@?authSource=admin&authMechanism=$AUTH_MECH"
}

# Builds mongobetween from the source in MONGOBETWEEN_SRC (a checkout with its
# go.mod, or a git directory such as the one `git clone --mirror` or a fetched
# snapshot gives: its HEAD is exported) into $OUT/mongobetween-build/; its Go
# dependencies come from GOPROXY as `go build` fetches them. The source is
# copied to a temporary folder first, so the checkout is never modified.
# Sets MB_BIN, or MB_REASON to why not.
build_mongobetween() {
  local src="$MONGOBETWEEN_SRC" tmp bin="$OUT/mongobetween-build/mongobetween"
  local logf="$OUT/mongobetween-build.log"
  command -v go >/dev/null || { MB_REASON="go is not installed"; return 0; }
  tmp="$(mktemp -d /tmp/mpbench-mb.XXXXXX)"
  if [[ -f "$src/go.mod" ]]; then
    cp -a "$src/." "$tmp/"
  elif git --git-dir="$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
    git --git-dir="$src" archive HEAD | tar -x -C "$tmp"
  else
    rm -rf "$tmp"
    MB_REASON="MONGOBETWEEN_SRC=$src is neither a source tree with go.mod nor a git directory"
    return 0
  fi
  mkdir -p "${bin%/*}"
  MB_SRC_REV="$(git --git-dir="$src" rev-parse --short HEAD 2>/dev/null \
    || git -C "$src" rev-parse --short HEAD 2>/dev/null || echo 'no git')"
  log "building mongobetween from $src ($MB_SRC_REV)"
  if (cd "$tmp" && timeout 900 go build -o "$bin" .) >"$logf" 2>&1; then
    MB_BIN="$bin"
  else
    MB_REASON="go build of MONGOBETWEEN_SRC=$src failed: $(grep -v '^go: downloading' "$logf" \
      | head -n 3 | tr -s ' \t\n' ' ')"
  fi
  rm -rf "$tmp"
}

# Sets MB_BIN to a mongobetween binary, or MB_REASON to why there is none.
# auto: build from MONGOBETWEEN_SRC when it is set, else a binary left in
# $CACHE/bin by an earlier `go install`, else try `go install ...@latest`.
find_mongobetween() {
  MB_BIN="" MB_REASON=""
  case "$MONGOBETWEEN" in
    off) MB_REASON="MONGOBETWEEN=off"; return 0 ;;
    auto) ;;
    *) if [[ -x "$MONGOBETWEEN" ]]; then MB_BIN="$MONGOBETWEEN"
       else MB_REASON="MONGOBETWEEN=$MONGOBETWEEN is not an executable"; fi
       return 0 ;;
  esac
  if [[ -n "$MONGOBETWEEN_SRC" ]]; then build_mongobetween; return 0; fi
  if [[ -x "$CACHE/bin/mongobetween" ]]; then MB_BIN="$CACHE/bin/mongobetween"; return 0; fi
  command -v go >/dev/null || { MB_REASON="go is not installed"; return 0; }
  mkdir -p "$CACHE/bin"
  log "trying: go install $MONGOBETWEEN_MODULE@latest"
  if (cd / && GOBIN="$CACHE/bin" timeout 600 go install "$MONGOBETWEEN_MODULE@latest") \
       >"$OUT/mongobetween-install.log" 2>&1; then
    MB_BIN="$CACHE/bin/mongobetween"
  else
    MB_REASON="go install $MONGOBETWEEN_MODULE@latest failed: $(grep -v '^go: downloading' \
      "$OUT/mongobetween-install.log" | head -n 3 | tr -s ' \t\n' ' ') (a source checkout" \
      "builds instead: MONGOBETWEEN_SRC=dir, see bench/README.md)"
  fi
}

# mongobetween (Go, Coinbase): a pooling proxy to compare with, when available.
start_mongobetween() {
  local port sep="?"
  find_mongobetween
  [[ -n "$MB_BIN" ]] || { skip mongobetween "$MB_REASON"; return 0; }
  [[ -n "$(uri_hostport "$URI")" ]] || { skip mongobetween "backend URI is not single-host"; return 0; }
  [[ "$URI" != *\?* ]] || sep="&"
  port="$(free_port)"
  # -statsd: its metrics go to the discard port; nothing listens for them here.
  start_bg "$OUT/mongobetween.log" "$MB_BIN" -network tcp4 -loglevel warn -statsd 127.0.0.1:9 \
    "127.0.0.1:$port=${URI}${sep}maxpoolsize=$MONGOBETWEEN_POOL_SIZE&label=bench"
  if wait_port "$port" "$STARTED_PID" 20; then
    PATHS+=(--path "mongobetween=mongodb://127.0.0.1:$port/")
    PROCS+=(--proc "mongobetween=$STARTED_PID")
  else
    skip mongobetween "did not start listening; see $OUT/mongobetween.log"
  fi
}

# ------------------------------------------------------------ main

# What was measured, where, with which versions: kept with the results.
write_env() {
  {
    echo "date: $(date -Is)"
    echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "host: $(uname -srm), $(nproc --all) cores ($(nproc) usable here), $(free -g | awk '/Mem:/{print $2}') GiB"
    echo "settings: DOCS=$DOCS QUERIES=$QUERIES CELL_QUERIES=$CELL_QUERIES THREADS=$THREADS IDS=$IDS REPEAT=$REPEAT" \
         "WARMUP=$WARMUP POOL_MODE=$POOL_MODE BACKEND=${BACKEND_URI:+uri}${BACKEND_URI:-$BACKEND}" \
         "MONGOPLEX_POOL_SIZE=$MONGOPLEX_POOL_SIZE BATCH_MAX_IDS=$BATCH_MAX_IDS" \
         "HAPROXY_THREADS=$HAPROXY_THREADS MONGOBETWEEN_POOL_SIZE=$MONGOBETWEEN_POOL_SIZE" \
         "AUTH=$AUTH AUTH_MECH=$AUTH_MECH"
    case "$PLACEMENT" in
      split) echo "placement: split (backend on CPU $BACKEND_CPU, clients and proxies on CPU $CLIENT_CPUS)" ;;
      netns) echo "placement: netns (backend 198.18.0.1 in its own namespace, RTT_US=$RTT_US)" ;;
      *) echo "placement: shared (everything on every CPU)" ;;
    esac
    [[ "$BACKEND" != curve || -n "$BACKEND_URI" ]] ||
      echo "backend: mongoplex-curvemodel, a model of the user's server (not MongoDB):" \
           "CURVE=${CURVE:-$ROOT/bench/curves/seed.csv} CURVE_RTT_US=${CURVE_RTT_US:-0}"
    echo "haproxy: $(haproxy -v 2>/dev/null | head -n 1 || echo none)"
    echo "mongobetween: ${MB_BIN:-none}${MB_SRC_REV:+ (built from MONGOBETWEEN_SRC=$MONGOBETWEEN_SRC at $MB_SRC_REV)}"
    local s
    for s in "${SKIPPED[@]}"; do echo "skipped $s"; done
  } >"$OUT/env.txt"
}

# Runs mongoplex-bench over all paths in the background (so that a signal
# reaches this script at once and cleanup can stop it by pid), showing its
# progress live; returns its exit status.
measure() {
  : >"$OUT/progress.log"  # exists before tail follows it
  "$BENCH" run "${PATHS[@]}" "${PROCS[@]}" --docs "$DOCS" --threads "$THREADS" --ids "$IDS" \
    --queries "$QUERIES" --repeat "$REPEAT" --warmup "$WARMUP" --pool-mode "$POOL_MODE" \
    ${CELL_QUERIES:+--cell-queries "$CELL_QUERIES"} \
    --json "$OUT/results.json" --plot "$OUT/throughput.png" \
    >"$OUT/report.txt" 2>"$OUT/progress.log" &
  local pid=$! tail_pid rc=0
  PIDS+=("$pid")
  tail -n +1 -f --pid="$pid" "$OUT/progress.log" >&2 &
  tail_pid=$!
  PIDS+=("$tail_pid")
  wait "$pid" || rc=$?
  wait "$tail_pid" || true  # tail ends within a second of the bench: all progress shown
  return "$rc"
}

main() {
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  log "output in $OUT"
  local t0=$SECONDS rc=0
  case "$PLACEMENT" in
    shared) ;;
    split) placement_split ;;
    netns) if [[ -z "$NETNS_BACKEND_PID" ]]; then
             build_all  # outside the namespaces, once
             placement_netns || rc=$?
             return "$rc"
           fi
           BUILD=0 ;;
    *) die "PLACEMENT=$PLACEMENT: want shared, split or netns" ;;
  esac
  build_all
  [[ -x "$BENCH" ]] || die "no mongoplex-bench binary at $BENCH"
  start_backend
  log "loading $DOCS docs"
  "$BENCH" load --uri "$URI" --docs "$DOCS"
  PATHS=(--path "direct=$URI")
  start_relay
  start_mongoplexes
  start_mongobetween
  backend_procs
  write_env
  log "measuring $(( ${#PATHS[@]} / 2 )) paths: $(printf '%s ' "${PATHS[@]}" | sed 's/--path //g')"
  measure || rc=$?
  # Per-repeat ratios to the relay (bench/paired.py): on a machine whose
  # speed drifts between repeats they say more than the medians above.
  if [[ "$REPEAT" -ge 2 && -s "$OUT/results.json" ]] && grep -q '"relay"' "$OUT/results.json"; then
    { echo; python3 "$ROOT/bench/paired.py" "$OUT/results.json"; } >>"$OUT/report.txt" 2>&1 || true
  fi
  cat "$OUT/report.txt"
  local s
  for s in "${SKIPPED[@]}"; do echo "skipped $s"; done | tee -a "$OUT/report.txt"
  log "done in $((SECONDS - t0)) s; report, results.json and throughput.png in $OUT"
  return "$rc"
}

main "$@"
