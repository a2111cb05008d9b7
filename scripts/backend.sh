#!/usr/bin/env bash
# Test backends for mongoplex: real MongoDB-wire servers on free loopback ports.
#
#   scripts/backend.sh build [java|ferretdb|all]   build/cache the servers (default: all)
#   scripts/backend.sh start java|ferretdb|ferretdb-auth|ferretdb-rs|ferretdb-tls DIR
#                                                  start one; writes DIR/{uri,pid,log},
#                                                  prints the mongodb:// URI on stdout
#   scripts/backend.sh stop DIR                    stop the server started in DIR
#   scripts/backend.sh restart DIR                 ferretdb, ferretdb-rs: stop it and start it again
#                                                  on the same port with the same data dir
#                                                  (its SQLite data survives), print the URI
#
# java     = mongo-java-server (memory backend) via tests/backend/java (Maven Central)
# ferretdb = FerretDB v1.24.2, SQLite handler, data under DIR (Go module proxy)
# ferretdb-auth = the same with authentication on (SCRAM-SHA-256/SHA-1): user
#            $MONGOPLEX_FERRETDB_USER (default mongoplex) with password
#            $MONGOPLEX_FERRETDB_PASSWORD (default mongoplex-pw) in database admin;
#            the printed URI carries the credentials
# ferretdb-rs = FerretDB as a one-member replica set "rs0" (--repl-set-name); the
#            printed URI ends in ?replicaSet=rs0
# ferretdb-tls = ferretdb-auth that also listens with TLS on a second port:
#            certificate $MONGOPLEX_TLS_CERT, key $MONGOPLEX_TLS_KEY, CA
#            $MONGOPLEX_TLS_CA (tests/tls/mkcerts.sh makes them), client certificates
#            required (FerretDB does with a CA file): $MONGOPLEX_TLS_CLIENT (cert+key);
#            the printed URI is the TLS one (localhost:TLSPORT, tls=true, tlsCAFile,
#            tlsCertificateKeyFile); DIR/plain_uri holds the plain one
#
# MONGOPLEX_BACKEND_STARTS=FILE: each successful start appends "KIND DIR" to FILE.
# Artifacts live in ${MONGOPLEX_CACHE:-<repo>/.cache}. Extra JVM flags: MONGOPLEX_JAVA_OPTS.
# Readiness is checked over the wire with pymongo's `ping` (Debian python3-pymongo);
# PYTHON may name an interpreter that has pymongo.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MONGOPLEX_CACHE:-$ROOT/.cache}"
JAVA_SRC="$ROOT/tests/backend/java"
JAR="$CACHE/mongoplex-testserver.jar"
FERRETDB_VERSION="v1.24.2"
FERRETDB="$CACHE/bin/ferretdb"
PYTHON3=/usr/bin/python3
START_TIMEOUT="${MONGOPLEX_START_TIMEOUT:-60}"

die() { echo "backend.sh: $*" >&2; exit 1; }
log() { echo "backend.sh: $*" >&2; }

# ---------------------------------------------------------------- build

# Fingerprint of the launcher's sources; the jar is rebuilt only when it changes.
java_stamp() { cat "$JAVA_SRC/pom.xml" "$JAVA_SRC"/src/main/java/mongoplex/testserver/*.java | sha256sum | cut -d' ' -f1; }

build_java() {
  local stamp; stamp="$(java_stamp)"
  if [[ -f "$JAR" && "$(cat "$JAR.stamp" 2>/dev/null)" == "$stamp" ]]; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (run scripts/install-deps.sh)"
  mkdir -p "$CACHE"
  log "building mongo-java-server launcher (mvn package)..."
  # Build output goes into the cache, not the source tree.
  # (sed drops the stray colour-reset codes Debian's mvn prints even with -q -B)
  mvn -q -B -f "$JAVA_SRC/pom.xml" -Dtestserver.buildDir="$CACHE/java-build" package 2>&1 \
    | sed 's/\x1b\[[0-9;]*m//g' >&2 || die "mvn package failed"
  cp "$CACHE/java-build/mongoplex-testserver.jar" "$JAR.tmp" && mv "$JAR.tmp" "$JAR"
  echo "$stamp" > "$JAR.stamp"
  log "built $JAR"
}

# `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2` builds, but the binary
# panics at start: the release module lacks build/version/version.txt (normally made by
# FerretDB's own `task gen-version`). So: fetch the module through the Go module proxy
# (go mod download), copy it, write version.txt, and `go build` the cmd from the copy.
#
# Go: the first go >= 1.22 of PATH's `go` and Debian's /usr/lib/go-1.2x/bin/go
# (golang-1.23 from bookworm-backports, installed by scripts/install-deps.sh test);
# never a downloaded toolchain (GOTOOLCHAIN=local). FerretDB v1.24.2's go.mod says
# `go 1.24` but builds with 1.23: in the build copy the directive is lowered to the
# Go in use when that is older.
build_ferretdb() {
  # grep without -q reads all of --version: an early exit could SIGPIPE ferretdb, and
  # pipefail would then take the cached binary for missing and rebuild it.
  if [[ -x "$FERRETDB" ]] && "$FERRETDB" --version 2>/dev/null | grep "version: $FERRETDB_VERSION" >/dev/null; then
    return 0
  fi
  local go gover
  go="$(find_go)" || { log "no Go >= 1.22 found (PATH, /usr/lib/go-1.2x; scripts/install-deps.sh test installs golang-1.23)"; return 1; }
  gover="$(GOTOOLCHAIN=local "$go" env GOVERSION)"; gover="${gover#go}"
  log "building FerretDB $FERRETDB_VERSION with $go ($gover; go mod download + go build)..."
  local json mod zip src="$CACHE/ferretdb-src" want
  json="$(cd / && GOTOOLCHAIN=local "$go" mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION" 2>&1)" || true
  mod="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")"
  rm -rf "$src" "$src.unzip"; mkdir -p "$CACHE/bin"
  if [[ -n "$mod" && -d "$mod" ]]; then
    cp -r "$mod" "$src" && chmod -R u+w "$src" || return 1
  elif zip="$(sed -n 's/^[[:space:]]*"Zip": "\(.*\)",$/\1/p' <<<"$json")" && [[ -f "$zip" ]]; then
    # An older go downloads and verifies the module (go.sum database) but
    # refuses to unpack one whose go.mod wants a newer go: unpack its zip here.
    log "go $gover did not unpack the module (its go.mod wants a newer go); using $zip"
    "$PYTHON3" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
      "$zip" "$src.unzip" || return 1
    mv "$src.unzip/github.com/FerretDB/FerretDB@$FERRETDB_VERSION" "$src" && rm -rf "$src.unzip"
  else
    log "go mod download failed: $json"; return 1
  fi
  echo "$FERRETDB_VERSION" > "$src/build/version/version.txt"
  want="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")"
  if ! version_ge "$gover" "$want"; then
    log "go.mod wants go $want; lowering it to $gover in the build copy"
    (cd "$src" && GOTOOLCHAIN=local "$go" mod edit -go="$gover" -toolchain=none) >&2 || return 1
  fi
  # Fetch the dependencies first, retrying: on a cold module cache a transient
  # registry error fails `go build` part-way (seen on a fresh machine).
  local try
  for try in 1 2 3 4 5; do
    (cd "$src" && GOWORK=off GOTOOLCHAIN=local "$go" mod download) >&2 && break
    [[ $try -lt 5 ]] || { log "go mod download of FerretDB's dependencies failed 5 times"; return 1; }
    log "go mod download failed (attempt $try of 5); retrying in $((try * 5)) s"
    sleep $((try * 5))
  done
  # -buildvcs=false: the copy may sit inside this repo's git tree; don't stamp our commit.
  (cd "$src" && GOWORK=off GOTOOLCHAIN=local "$go" build -buildvcs=false -trimpath -o "$FERRETDB.tmp" ./cmd/ferretdb) >&2 || return 1
  mv "$FERRETDB.tmp" "$FERRETDB"
  rm -rf "$src"
  log "built $FERRETDB"
}

# True when dotted version $1 >= $2 (1.23.5 >= 1.22).
version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" == "$2" ]]; }

# Prints the path of a go >= 1.22, preferring the one on PATH.
find_go() {
  local g v
  for g in "$(command -v go 2>/dev/null || true)" /usr/lib/go-1.2[2-9]/bin/go; do
    [[ -n "$g" && -x "$g" ]] || continue
    v="$(GOTOOLCHAIN=local "$g" env GOVERSION 2>/dev/null)" || continue
    if version_ge "${v#go}" 1.22; then echo "$g"; return 0; fi
  done
  return 1
}

# Run a build step holding the cache lock, so parallel starts on a cold cache build once.
locked() { mkdir -p "$CACHE"; ( flock 9; "$@" ) 9>"$CACHE/build.lock"; }

cmd_build() {
  case "${1:-all}" in
    java) locked build_java ;;
    ferretdb) locked build_ferretdb || die "FerretDB build failed (see go output above)" ;;
    all)
      locked build_java
      # FerretDB is the optional second backend: its failure must not fail `all`.
      locked build_ferretdb || log "WARNING: FerretDB build failed (see go output above); only the java backend is available"
      ;;
    *) die "build: unknown backend '$1' (java|ferretdb|all)" ;;
  esac
}

# ---------------------------------------------------------------- start / stop

# An interpreter that can import pymongo (the pyenv python3 may lack Debian's package).
find_python() {
  local p
  for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import pymongo' 2>/dev/null; then echo "$p"; return 0; fi
  done
  die "no python3 with pymongo found (install python3-pymongo or set PYTHON)"
}

# A free loopback port (the OS picks one; a small race remains, start retries on it).
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# True while PID runs (a dead child of ours stays a zombie until reaped: count that as dead).
alive() { [[ -r "/proc/$1/stat" ]] && [[ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" != Z ]]; }

# Wait until URI answers `ping` over the wire while PID runs, up to DEADLINE (epoch s).
# Exit codes: 0 ready, 1 timeout, 2 process died.
wait_ping() {
  "$PY" - "$1" "$2" "$3" <<'EOF'
import sys, time, pymongo
uri, pid, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3])
def alive():
    try:
        return open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
while time.time() < deadline:
    if not alive():
        sys.exit(2)
    try:
        c = pymongo.MongoClient(uri, serverSelectionTimeoutMS=300, connectTimeoutMS=300)
        c.admin.command("ping")
        c.close()
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit(1)
EOF
}

# Java: wait for the launcher's "READY host:port" line and print the port.
# Exit codes as wait_ping.
wait_ready_line() {
  local dir="$1" pid="$2" deadline="$3" port
  while (( $(date +%s) < deadline )); do
    port="$(sed -n 's/^READY [^ ]*:\([0-9][0-9]*\)$/\1/p' "$dir/log")"
    [[ -n "$port" ]] && { echo "$port"; return 0; }
    alive "$pid" || return 2
    sleep 0.1
  done
  return 1
}

# Launch one server in the background; sets PID and writes DIR/pid. Args: kind dir port.
launch() {
  local kind="$1" dir="$2" port="$3"
  case "$kind" in
    java)
      # shellcheck disable=SC2086
      java ${MONGOPLEX_JAVA_OPTS:-} -jar "$JAR" --host 127.0.0.1 --port "$port" \
        </dev/null >"$dir/log" 2>&1 &
      ;;
    ferretdb)
      mkdir -p "$dir/data" "$dir/state"
      "$FERRETDB" --listen-addr="127.0.0.1:$port" --handler=sqlite \
        --sqlite-url="file:$dir/data/" --state-dir="$dir/state" \
        --telemetry=disable --debug-addr=- --log-level="${MONGOPLEX_FERRETDB_LOG_LEVEL:-error}" \
        </dev/null >"$dir/log" 2>&1 &
      ;;
    ferretdb-rs)
      mkdir -p "$dir/data" "$dir/state"
      "$FERRETDB" --listen-addr="127.0.0.1:$port" --handler=sqlite \
        --sqlite-url="file:$dir/data/" --state-dir="$dir/state" \
        --telemetry=disable --debug-addr=- --log-level="${MONGOPLEX_FERRETDB_LOG_LEVEL:-error}" \
        --repl-set-name=rs0 \
        </dev/null >"$dir/log" 2>&1 &
      ;;
    ferretdb-auth)
      mkdir -p "$dir/data" "$dir/state"
      "$FERRETDB" --listen-addr="127.0.0.1:$port" --handler=sqlite \
        --sqlite-url="file:$dir/data/" --state-dir="$dir/state" \
        --telemetry=disable --debug-addr=- --log-level="${MONGOPLEX_FERRETDB_LOG_LEVEL:-error}" \
        --test-enable-new-auth --setup-database=admin \
        --setup-username="$AUTH_USER" --setup-password="$AUTH_PASSWORD" \
        </dev/null >"$dir/log" 2>&1 &
      ;;
    ferretdb-tls)
      mkdir -p "$dir/data" "$dir/state"
      "$FERRETDB" --listen-addr="127.0.0.1:$port" --handler=sqlite \
        --listen-tls="127.0.0.1:$TLS_PORT" --listen-tls-cert-file="$MONGOPLEX_TLS_CERT" \
        --listen-tls-key-file="$MONGOPLEX_TLS_KEY" --listen-tls-ca-file="$MONGOPLEX_TLS_CA" \
        --sqlite-url="file:$dir/data/" --state-dir="$dir/state" \
        --telemetry=disable --debug-addr=- --log-level="${MONGOPLEX_FERRETDB_LOG_LEVEL:-error}" \
        --test-enable-new-auth --setup-database=admin \
        --setup-username="$AUTH_USER" --setup-password="$AUTH_PASSWORD" \
        </dev/null >"$dir/log" 2>&1 &
      ;;
  esac
  PID=$!
  echo "$PID" > "$dir/pid"
}

cmd_start() {
  local kind="${1:-}" dir="${2:-}"
  [[ -n "$kind" && -n "$dir" ]] || die "usage: start java|ferretdb|ferretdb-auth|ferretdb-rs|ferretdb-tls DIR"
  case "$kind" in
    java) locked build_java ;;
    ferretdb|ferretdb-auth|ferretdb-rs|ferretdb-tls) locked build_ferretdb || die "FerretDB is not built and could not be built" ;;
    *) die "start: unknown backend '$kind' (java|ferretdb|ferretdb-auth|ferretdb-rs|ferretdb-tls)" ;;
  esac
  # ferretdb-rs: a one-member replica set "rs0"; its URI says replicaSet=rs0.
  local opts=""
  [[ "$kind" != ferretdb-rs ]] || opts="?replicaSet=rs0"
  # URI credentials part (user:password@), empty without auth.
  local cred=""
  AUTH_USER="${MONGOPLEX_FERRETDB_USER:-mongoplex}"
  AUTH_PASSWORD="${MONGOPLEX_FERRETDB_PASSWORD:-mongoplex-pw}"
  [[ "$kind" != ferretdb-auth && "$kind" != ferretdb-tls ]] || cred="$AUTH_USER:$AUTH_PASSWORD@"
  if [[ "$kind" == ferretdb-tls ]]; then
    [[ -r "${MONGOPLEX_TLS_CERT:-}" && -r "${MONGOPLEX_TLS_KEY:-}" && -r "${MONGOPLEX_TLS_CA:-}" && -r "${MONGOPLEX_TLS_CLIENT:-}" ]] ||
      die "ferretdb-tls needs readable MONGOPLEX_TLS_CERT, MONGOPLEX_TLS_KEY, MONGOPLEX_TLS_CA, MONGOPLEX_TLS_CLIENT"
  fi

  mkdir -p "$dir"; dir="$(cd "$dir" && pwd)"
  if [[ -f "$dir/pid" ]] && alive "$(cat "$dir/pid")"; then
    die "a server is already running in $dir (pid $(cat "$dir/pid"))"
  fi
  rm -f "$dir/uri" "$dir/pid"
  PY="$(find_python)"
  local deadline=$(( $(date +%s) + START_TIMEOUT )) attempt port rc
  # java binds port 0 and reports it; ferretdb gets a port picked here, so a
  # startup failure (port taken meanwhile) is retried with another port.
  for attempt in 1 2 3; do
    rc=0
    if [[ "$kind" == java ]]; then
      launch java "$dir" 0
      port="$(wait_ready_line "$dir" "$PID" "$deadline")" || rc=$?
    else
      port="$(free_port)"
      TLS_PORT="$(free_port)"
      launch "$kind" "$dir" "$port"
    fi
    [[ "$rc" != 0 ]] || wait_ping "mongodb://${cred}127.0.0.1:$port/" "$PID" "$deadline" || rc=$?
    case "$rc" in
      0) if [[ "$kind" == ferretdb-tls ]]; then
           echo "mongodb://${cred}127.0.0.1:$port/" > "$dir/plain_uri"
           echo "mongodb://${cred}localhost:$TLS_PORT/?tls=true&tlsCAFile=$MONGOPLEX_TLS_CA&tlsCertificateKeyFile=$MONGOPLEX_TLS_CLIENT" > "$dir/uri"
         else
           echo "mongodb://${cred}127.0.0.1:$port/$opts" > "$dir/uri"
         fi
         # One line per server started, for scripts/test.sh's count per pass.
         [[ -z "${MONGOPLEX_BACKEND_STARTS:-}" ]] || echo "$kind $dir" >> "$MONGOPLEX_BACKEND_STARTS"
         echo "$kind" > "$dir/kind"
         cat "$dir/uri"; return 0 ;;
      2) log "$kind exited during startup (attempt $attempt); last log lines:"
         tail -n 20 "$dir/log" >&2; rm -f "$dir/pid"
         [[ "$kind" != java ]] && (( $(date +%s) < deadline )) || break ;;
      *) kill -KILL "$PID" 2>/dev/null || true; rm -f "$dir/pid"
         die "$kind did not answer ping within ${START_TIMEOUT}s; see $dir/log" ;;
    esac
  done
  die "$kind failed to start; see $dir/log"
}

cmd_stop() {
  local dir="${1:-}" pid i
  [[ -n "$dir" ]] || die "usage: stop DIR"
  [[ -f "$dir/pid" ]] || { log "no pid file in $dir; nothing to stop"; return 0; }
  pid="$(cat "$dir/pid")"
  # Only signal the process if it is still one of ours (guards against a reused pid).
  if alive "$pid" && grep -qaE 'mongoplex-testserver|ferretdb' "/proc/$pid/cmdline" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      log "pid $pid ignored SIGTERM for 10s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    fi
  fi
  rm -f "$dir/pid"
}

# Stop a plain FerretDB and start it again on the same port and data directory
# (a database restart for maintenance: the tests' proxy pause, issue 24).
cmd_restart() {
  local dir="${1:-}" kind port
  [[ -n "$dir" && -f "$dir/uri" && -f "$dir/kind" ]] || die "restart: no server started in ${dir:-(none)}"
  dir="$(cd "$dir" && pwd)"
  kind="$(cat "$dir/kind")"
  [[ "$kind" == ferretdb || "$kind" == ferretdb-rs ]] ||
    die "restart: only ferretdb and ferretdb-rs (got $kind): java forgets its data, the auth kinds need their identity"
  port="$(sed -n 's#^mongodb://127\.0\.0\.1:\([0-9][0-9]*\)/.*#\1#p' "$dir/uri")"
  [[ -n "$port" ]] || die "restart: no port in $dir/uri"
  cmd_stop "$dir"
  PY="$(find_python)"
  local deadline=$(( $(date +%s) + START_TIMEOUT )) attempt rc
  # The port was just released: a bind that loses a race is retried (same port).
  for attempt in 1 2 3 4 5; do
    rc=0
    launch "$kind" "$dir" "$port"
    wait_ping "mongodb://127.0.0.1:$port/" "$PID" "$deadline" || rc=$?
    case "$rc" in
      0) cat "$dir/uri"; return 0 ;;
      2) log "$kind exited during restart (attempt $attempt); last log lines:"
         tail -n 20 "$dir/log" >&2; rm -f "$dir/pid"; sleep 0.2 ;;
      *) kill -KILL "$PID" 2>/dev/null || true; rm -f "$dir/pid"
         die "$kind did not answer ping within ${START_TIMEOUT}s after restart; see $dir/log" ;;
    esac
  done
  die "$kind failed to restart on port $port; see $dir/log"
}

case "${1:-}" in
  build) shift; cmd_build "$@" ;;
  restart) shift; cmd_restart "$@" ;;
  start) shift; cmd_start "$@" ;;
  stop)  shift; cmd_stop "$@" ;;
  *) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
