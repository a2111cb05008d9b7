# bench/common.sh — shell functions shared by bench/run.sh and
# bench/profile.sh (sourced, not run): free ports, waiting for a listener,
# and starting the backend both measure against.
#
# The caller defines log() and die() and sets ROOT (the checkout), OUT (its
# output folder) and these (defaults in brackets):
#   BACKEND [java]     kind passed to scripts/backend.sh start
#   BACKEND_URI []     use this server instead of starting one
#   PLACEMENT [shared] split: the backend is started on BACKEND_CPU [0]
# start_backend sets URI, and BACKEND_DIR when it started a server (the
# caller stops it with scripts/backend.sh stop "$BACKEND_DIR" on exit).

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

# Sets URI: BACKEND_URI, or a server started through scripts/backend.sh in
# $OUT/backend (pinned to BACKEND_CPU with PLACEMENT=split).
start_backend() {
  if [[ -n "${BACKEND_URI:-}" ]]; then
    URI="$BACKEND_URI"
    log "using the server at BACKEND_URI"
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
