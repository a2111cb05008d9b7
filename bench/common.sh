# bench/common.sh — shell functions shared by bench/run.sh, bench/profile.sh,
# bench/tls.sh, bench/ceiling.sh, bench/workers.sh and bench/threads_vs_procs.sh
# (sourced, not run): free ports, waiting for a listener, starting the backend
# they measure against, starting a mongoplex (start_ini_proxy), reading a
# process's CPU time (cpu_ticks), and the scaffolding of bench/ceiling.sh and
# bench/workers.sh (bench_init).
#
# The caller defines log() and die() and sets ROOT (the checkout), OUT (its
# output folder) and these (defaults in brackets):
#   BACKEND [java]     kind passed to scripts/backend.sh start, or `curve`:
#                      mongoplex-curvemodel (a model of the user's server,
#                      never MongoDB; bench/README.md) with these:
#     CURVE [bench/curves/seed.csv]  its curve file
#     CURVE_RTT_US [0]               its --rtt-us (a network round trip)
#     CURVE_ARGS []                  more model flags, e.g. "--think-compensation off"
#     CURVEMODEL_BIN [$BUILD_DIR/bench/mongoplex-curvemodel]
#     DOCS                           its --docs
#   BACKEND_URI []     use this server instead of starting one
#   PLACEMENT [shared] split: the backend is started on BACKEND_CPU [0]
# start_backend sets URI, and BACKEND_DIR when it started a server (the
# caller stops it with scripts/backend.sh stop "$BACKEND_DIR" on exit); for
# the curve model it sets CURVE_PID and adds it to PIDS (the caller stops
# those by pid on exit).

# start_ini_proxy NAME INI-LINES...: starts $MP (default $BUILD_DIR/mongoplex)
# with listen_port = 0, pool_size = 8 and the given lines; config $C/NAME.ini,
# log $OUT/NAME.log, pid in $C/NAME.pid; prints the port (callers run it in a
# command substitution, so the pid is only in the file: stop $C/*.pid on exit).
start_ini_proxy() {
  local name="$1" port mp="${MP:-${BUILD_DIR:-$ROOT/build}/mongoplex}"; shift
  { echo "[mongoplex]"; echo "listen_port = 0"; echo "pool_size = 8"; printf '%s\n' "$@"; } > "$C/$name.ini"
  "$mp" -c "$C/$name.ini" >"$OUT/$name.log" 2>&1 &
  echo $! > "$C/$name.pid"
  for _ in $(seq 1 100); do
    port="$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$OUT/$name.log" | head -n 1)"
    [ -n "$port" ] && { echo "$port"; return 0; }
    sleep 0.1
  done
  echo "proxy $name did not start" >&2; cat "$OUT/$name.log" >&2; exit 2
}

# CPU time (user + system) of PID in clock ticks (getconf CLK_TCK), from /proc.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# A free loopback port chosen by the kernel (a small race remains).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until 127.0.0.1:PORT accepts connections while PID lives (SECS max).
wait_port() {
  local port="$1" pid="$2" secs="$3" i
  for i in $(seq 1 $((secs * 10))); do
    kill -0 "$pid" 2>/dev/null || return 1
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}

# BACKEND=curve: starts mongoplex-curvemodel on a free port with output in
# $OUT/backend (pinned like any backend); sets URI and CURVE_PID.
start_curve_model() {
  local bin="${CURVEMODEL_BIN:-${BUILD_DIR:-$ROOT/build}/bench/mongoplex-curvemodel}"
  local curve="${CURVE:-$ROOT/bench/curves/seed.csv}" pin=() i
  [[ -x "$bin" ]] || die "BACKEND=curve: no model binary at $bin (ninja -C build mongoplex-curvemodel)"
  mkdir -p "$OUT/backend"
  [[ "${PLACEMENT:-shared}" != split ]] || pin=(taskset -c "${BACKEND_CPU:-0}")
  log "starting the curve model (a model of the user's table, not MongoDB): $curve," \
      "rtt ${CURVE_RTT_US:-0} us, docs ${DOCS:-20000000}"
  # shellcheck disable=SC2086  # CURVE_ARGS: words on purpose
  "${pin[@]}" "$bin" --curve "$curve" --port 0 --docs "${DOCS:-20000000}" \
    --rtt-us "${CURVE_RTT_US:-0}" ${CURVE_ARGS:-} </dev/null >"$OUT/backend/uri" 2>"$OUT/backend/log" &
  CURVE_PID=$!
  PIDS+=("$CURVE_PID")
  for i in $(seq 1 100); do
    [[ ! -s "$OUT/backend/uri" ]] || break
    kill -0 "$CURVE_PID" 2>/dev/null || die "the curve model died; see $OUT/backend/log"
    sleep 0.1
  done
  URI="$(head -n 1 "$OUT/backend/uri")"
  [[ "$URI" == mongodb://* ]] || die "the curve model printed no URI in 10 s; see $OUT/backend/log"
}

# Sets URI: BACKEND_URI, the curve model (BACKEND=curve), or a server
# started through scripts/backend.sh in $OUT/backend (pinned to
# BACKEND_CPU with PLACEMENT=split).
start_backend() {
  if [[ -n "${BACKEND_URI:-}" ]]; then
    URI="$BACKEND_URI"
    log "using the server at BACKEND_URI"
    return 0
  fi
  if [[ "${BACKEND:-java}" == curve ]]; then
    start_curve_model
    return 0
  fi
  [[ -x "$ROOT/scripts/backend.sh" ]] || die "scripts/backend.sh not found; set BACKEND_URI=mongodb://..."
  BACKEND_DIR="$OUT/backend"
  log "starting the ${BACKEND:-java} backend (scripts/backend.sh start ${BACKEND:-java})"
  local pin=()
  [[ "${PLACEMENT:-shared}" != split ]] || pin=(taskset -c "${BACKEND_CPU:-0}")
  "${pin[@]}" "$ROOT/scripts/backend.sh" start "${BACKEND:-java}" "$BACKEND_DIR" >/dev/null ||
    die "backend did not start; see $BACKEND_DIR/log"
  URI="$(cat "$BACKEND_DIR/uri")"
}

# bench_init NAME PREFIX: the scaffolding of a script that starts its own
# java backend ($C/java) and proxies ($C/*.pid, start_ini_proxy): log() and
# die() named NAME, $C a temporary directory /tmp/PREFIX-XXXXXX, $OUT made,
# and on exit every proxy sent SIGINT (a workers master passes it on), the
# backend stopped and $C removed; dies unless $BENCH is built.
bench_init() {
  BENCH_NAME="$1"
  mkdir -p "$OUT"
  C="$(mktemp -d "/tmp/$2-XXXXXX")"
  log() { echo "$BENCH_NAME: $*" >&2; }
  die() { log "$*"; exit 2; }
  bench_cleanup() {
    local f
    for f in "$C"/*.pid; do [ -f "$f" ] && kill -INT "$(cat "$f")" 2>/dev/null || true; done
    "$ROOT/scripts/backend.sh" stop "$C/java" >/dev/null 2>&1 || true
    rm -rf "$C"
  }
  trap bench_cleanup EXIT
  trap 'exit 2' INT TERM
  [ -x "$BENCH" ] || die "no $BENCH (ninja -C $BUILD_DIR)"
}
