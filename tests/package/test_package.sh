#!/usr/bin/env bash
# Package test: builds the Debian package, installs it, checks what it put on
# the system, runs the installed proxy the way mongoplex.service would, and
# purges it again.
#
#   tests/package/test_package.sh
#
# Needs root (it installs a package and creates a system user); prints
# "SKIP: ..." and exits 0 otherwise, except under CI=true, where not being
# root is a failure (CI runs as root; the skip must not hide there). Prints one PASS/FAIL line per check and
# exits 1 if any check failed.
#
# Environment:
#   MONGOPLEX_TEST_URI   backend for the end-to-end check (mongodb://host:port/);
#                        if unset, a mongo-java-server is started with
#                        scripts/backend.sh for the duration of the test
#   MONGOPLEX_PKG_DEB    test this .deb instead of running scripts/build-deb.sh
#   MONGOPLEX_PKG_KEEP=1 leave the package installed at the end (default:
#                        purge, and check what purging leaves behind)
#
# Without a running systemd (containers) the unit itself is not started:
# the test runs /usr/bin/mongoplex with the unit's ExecStartPre/ExecStart
# command lines, as User=mongoplex with no capabilities and no_new_privs, with
# LimitNOFILE, UMask and a NOTIFY_SOCKET of its own to check the sd_notify
# protocol (READY=1, RELOADING=1 on SIGHUP, STOPPING=1 on SIGTERM).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY=/usr/bin/python3 # Debian's python3, which has python3-pymongo
UNIT=/lib/systemd/system/mongoplex.service
CONF=/etc/mongoplex/mongoplex.ini

if [ "$(id -u)" -ne 0 ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: not root under CI=true (the package test installs and purges a package)"
    exit 1
  fi
  echo "SKIP: not root (the test installs and purges a package and creates a system user)"
  exit 0
fi

fails=0
pass() { echo "PASS: $*"; }
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
# check DESCRIPTION COMMAND...: PASS if the command succeeds, else FAIL with
# its output indented.
check() {
  local desc="$1" out
  shift
  if out="$("$@" 2>&1)"; then
    pass "$desc"
  else
    fail "$desc"
    [ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/    /'
  fi
}
fatal() {
  fail "$*"
  echo "RESULT: FAILED ($fails check(s)); stopped early"
  exit 1
}

tmp="$(mktemp -d /tmp/mongoplex-pkgtest.XXXXXX)"
chmod 0755 "$tmp" # the service user must reach the config and notify socket
proxy_pid="" notify_pid="" backend_dir=""
cleanup() {
  [ -z "$proxy_pid" ] || kill -KILL "$proxy_pid" 2>/dev/null
  [ -z "$notify_pid" ] || kill "$notify_pid" 2>/dev/null
  [ -z "$backend_dir" ] || "$ROOT/scripts/backend.sh" stop "$backend_dir" >/dev/null 2>&1
  if [ "${MONGOPLEX_PKG_KEEP:-0}" != 1 ] && dpkg-query -W -f='${Status}' mongoplex 2>/dev/null | grep -q ' installed$'; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq mongoplex >/dev/null 2>&1
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

is_installed() { dpkg-query -W -f='${Status}' mongoplex 2>/dev/null | grep -q ' installed$'; }

# ---------------------------------------------------------------- (a) build
if [ -n "${MONGOPLEX_PKG_DEB:-}" ]; then
  deb="$(readlink -f "$MONGOPLEX_PKG_DEB")"
  [ -f "$deb" ] || fatal "MONGOPLEX_PKG_DEB=$MONGOPLEX_PKG_DEB does not exist"
  echo "== using $deb"
else
  echo "== scripts/build-deb.sh --quiet"
  t0=$SECONDS
  if "$ROOT/scripts/build-deb.sh" --quiet >"$tmp/build-deb.out" 2>&1; then
    pass "scripts/build-deb.sh builds the package ($((SECONDS - t0)) s)"
  else
    sed 's/^/    /' "$tmp/build-deb.out"
    fatal "scripts/build-deb.sh failed"
  fi
  if grep -q '^E: ' "$ROOT/dist/lintian.txt"; then
    fail "lintian reports no errors"
    grep '^E: ' "$ROOT/dist/lintian.txt" | sed 's/^/    /'
  else
    pass "lintian reports no errors ($(grep -c '^[WIP]: ' "$ROOT/dist/lintian.txt") warning/info tag(s), see dist/lintian.txt)"
  fi
  shopt -s nullglob
  debs=("$ROOT"/dist/mongoplex_*.deb)
  shopt -u nullglob
  [ "${#debs[@]}" -eq 1 ] || fatal "expected exactly one dist/mongoplex_*.deb, found ${#debs[@]}"
  deb="${debs[0]}"
fi
deb_version="$(dpkg-deb -f "$deb" Version)"
mkdir -p "$tmp/debroot"
dpkg-deb -x "$deb" "$tmp/debroot"
check "systemd-analyze verify on the packaged unit before installing (scripts/verify-unit.sh)" \
  "$ROOT/scripts/verify-unit.sh" "$tmp/debroot/lib/systemd/system/mongoplex.service" "$tmp/debroot/usr/bin/mongoplex"

# ---------------------------------------------------------------- (b) install
echo "== install $(basename "$deb")"
if is_installed; then
  echo "   (mongoplex is already installed: purging it first)"
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq mongoplex >/dev/null 2>&1 ||
    fatal "could not purge the previously installed mongoplex"
fi
# A purge leaves the system user behind (on purpose, see below), so a
# previous run's user is removed here to check that installing creates it.
# Only a user that looks like ours: system uid, home /nonexistent.
if pw="$(getent passwd mongoplex)"; then
  IFS=: read -r _ _ uid _ _ home _ <<<"$pw"
  if [ "$uid" -lt 1000 ] && [ "$home" = /nonexistent ]; then
    echo "   (removing the system user mongoplex left by an earlier purge)"
    userdel mongoplex 2>/dev/null
    getent group mongoplex >/dev/null && groupdel mongoplex 2>/dev/null
  fi
fi
had_user=0
getent passwd mongoplex >/dev/null && had_user=1

if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$tmp/apt.out" 2>&1; then
  pass "apt-get install $(basename "$deb")"
else
  sed 's/^/    /' "$tmp/apt.out"
  fatal "apt-get install failed"
fi
check "dpkg reports mongoplex $deb_version installed" \
  test "$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' mongoplex)" = "ii  $deb_version"

# ---------------------------------------------------------------- (c) files
echo "== installed files"
upstream="${deb_version%-*}"
check "/usr/bin/mongoplex --version prints $upstream" \
  test "$(/usr/bin/mongoplex --version 2>&1)" = "mongoplex $upstream"

check "$CONF exists" test -f "$CONF"
check "$CONF is a conffile (dpkg-query \${Conffiles})" \
  bash -c "dpkg-query -W -f='\${Conffiles}\n' mongoplex | awk '{print \$1}' | grep -qx '$CONF'"
check "$CONF is root:mongoplex 0640" test "$(stat -c '%U:%G %a' "$CONF" 2>&1)" = "root:mongoplex 640"
check "$CONF is the binary's --write-example-config (after the package header)" \
  diff <(/usr/bin/mongoplex --write-example-config | sed 's/[[:space:]]*$//') \
  <(awk 'body { print } /^;$/ && !body { body = 1 }' "$CONF")

if [ "$had_user" = 1 ]; then
  echo "   (user mongoplex existed before the install: creation not checked)"
fi
if pw="$(getent passwd mongoplex)"; then
  IFS=: read -r _ _ uid gid _ home shell <<<"$pw"
  uid_min="$(awk '$1 == "UID_MIN" {print $2}' /etc/login.defs 2>/dev/null)"
  uid_min="${uid_min:-1000}"
  check "user mongoplex is a system user (uid $uid < $uid_min)" test "$uid" -lt "$uid_min"
  check "user mongoplex has shell $shell (no login) and home $home (none)" \
    bash -c "[ '$shell' = /usr/sbin/nologin ] && [ '$home' = /nonexistent ] && [ ! -e /nonexistent ]"
  check "group mongoplex exists and is the user's primary group" \
    test "$(getent group mongoplex | cut -d: -f3)" = "$gid"
else
  fail "user mongoplex exists (getent passwd)"
fi
check "sysusers.d entry /usr/lib/sysusers.d/mongoplex.conf installed" \
  grep -q '^u mongoplex ' /usr/lib/sysusers.d/mongoplex.conf

check "man -w mongoplex finds mongoplex(8)" \
  bash -c 'test "$(man -w 8 mongoplex)" = /usr/share/man/man8/mongoplex.8.gz'
check "man -w mongoplex.ini finds mongoplex.ini(5)" \
  bash -c 'test "$(man -w 5 mongoplex.ini)" = /usr/share/man/man5/mongoplex.ini.5.gz'
for page in /usr/share/man/man8/mongoplex.8.gz /usr/share/man/man5/mongoplex.ini.5.gz; do
  check "$(basename "$page") renders without groff warnings" \
    bash -c "out=\$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z '$page' 2>&1 >/dev/null); [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
done
missing=""
for name in $(/usr/bin/mongoplex --help-config | awk '/^[a-z_][a-z0-9_]* \(default: /{print $1}'); do
  zcat /usr/share/man/man5/mongoplex.ini.5.gz | grep -qx ".B $name" || missing="$missing $name"
done
check "mongoplex.ini(5) documents every setting of --help-config" test -z "$missing"
[ -z "$missing" ] || echo "    missing:$missing"

check "unit $UNIT installed" test -f "$UNIT"
check "unit enabled the Debian way (multi-user.target.wants symlink)" \
  test "$(readlink /etc/systemd/system/multi-user.target.wants/mongoplex.service)" = "$UNIT"
verify_out="$(cd / && systemd-analyze verify "$UNIT" 2>&1)"
verify_rc=$?
if [ "$verify_rc" = 0 ] && [ -z "$verify_out" ]; then
  pass "systemd-analyze verify $UNIT (no output, exit 0)"
else
  fail "systemd-analyze verify $UNIT (exit $verify_rc)"
  printf '%s\n' "$verify_out" | sed 's/^/    /'
fi

# ---------------------------------------------------------------- (d) run
echo "== run as the unit would"
unit_value() { sed -n "s/^$1=//p" "$UNIT"; }
pre="$(unit_value ExecStartPre)"
start="$(unit_value ExecStart)"
check "unit ExecStartPre is '/usr/bin/mongoplex --test-config -c $CONF'" \
  test "$pre" = "/usr/bin/mongoplex --test-config -c $CONF"
check "unit ExecStart is '/usr/bin/mongoplex -c $CONF'" test "$start" = "/usr/bin/mongoplex -c $CONF"
check "unit runs as User=mongoplex Group=mongoplex, Type=notify" \
  test "$(unit_value User) $(unit_value Group) $(unit_value Type)" = "mongoplex mongoplex notify"
# shellcheck disable=SC2086 # the unit's command line, split as systemd would
check "ExecStartPre as user mongoplex: runuser -u mongoplex -- $pre" runuser -u mongoplex -- $pre

# Backend.
if [ -z "${MONGOPLEX_TEST_URI:-}" ]; then
  backend_dir="$tmp/backend"
  if MONGOPLEX_TEST_URI="$("$ROOT/scripts/backend.sh" start java "$backend_dir" 2>"$tmp/backend.err")"; then
    echo "   (started mongo-java-server at $MONGOPLEX_TEST_URI)"
  else
    sed 's/^/    /' "$tmp/backend.err"
    fatal "could not start a test backend (scripts/backend.sh start java)"
  fi
fi
backend_uri="$MONGOPLEX_TEST_URI"

# The installed config with only backend_uri and listen_port changed.
port="$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
conf="$tmp/mongoplex.ini"
sed -e "s|^backend_uri *=.*|backend_uri = $backend_uri|" -e "s|^listen_port *=.*|listen_port = $port|" \
  "$CONF" >"$conf"
chown root:mongoplex "$conf"
chmod 0640 "$conf"
check "test config (installed one, backend_uri and listen_port changed) passes --test-config as mongoplex" \
  runuser -u mongoplex -- /usr/bin/mongoplex --test-config -c "$conf"

# Secrets: with the package's mode (0640 root:mongoplex) a password in
# backend_uri stays private and --test-config does not warn; a world-readable
# copy of the same file gets the warning (and never echoes the password).
secret_conf="$tmp/secret.ini"
sed -e "s|^backend_uri *=.*|backend_uri = mongodb://u:pkg-secret-pw@127.0.0.1:1/|" "$CONF" >"$secret_conf"
chown root:mongoplex "$secret_conf"
chmod 0640 "$secret_conf"
check "password in backend_uri, mode 0640 root:mongoplex: --test-config does not warn" \
  bash -c "! runuser -u mongoplex -- /usr/bin/mongoplex --test-config -c '$secret_conf' 2>&1 | grep -q 'readable by other users'"
chmod 0644 "$secret_conf"
check "password in backend_uri, mode 0644: --test-config warns without printing the password" \
  bash -c "out=\$(/usr/bin/mongoplex --test-config -c '$secret_conf' 2>&1); grep -q 'readable by other users' <<<\"\$out\" && ! grep -q pkg-secret-pw <<<\"\$out\""
rm -f "$secret_conf"

# sd_notify receiver: logs each datagram as a line.
cat >"$tmp/notify.py" <<'EOF'
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o777)
with open(log, "a", buffering=1) as f:
    while True:
        for line in s.recv(4096).decode(errors="replace").splitlines():
            f.write(line + "\n")
EOF
: >"$tmp/notify.log"
$PY "$tmp/notify.py" "$tmp/notify.sock" "$tmp/notify.log" &
notify_pid=$!
for _ in $(seq 50); do [ -S "$tmp/notify.sock" ] && break; sleep 0.1; done
[ -S "$tmp/notify.sock" ] || fatal "notify socket receiver did not start"

# wait_notify PATTERN COUNT SECONDS: until PATTERN occurs COUNT times in the log.
wait_notify() {
  local i
  for i in $(seq $(($3 * 10))); do
    [ "$(grep -cx "$1" "$tmp/notify.log")" -ge "$2" ] && return 0
    [ -n "$proxy_pid" ] && ! kill -0 "$proxy_pid" 2>/dev/null && return 1
    sleep 0.1
  done
  return 1
}

# Start it: uid/gid mongoplex, no capabilities (CapabilityBoundingSet=),
# NoNewPrivileges, LimitNOFILE=65536, UMask=0077, cwd /.
# (A container's hard limit may be below LimitNOFILE: then the hard limit.)
nofile="$(unit_value LimitNOFILE)"
hard="$(ulimit -Hn)"
if [ "$hard" != unlimited ] && [ "$hard" -lt "$nofile" ]; then
  echo "   (LimitNOFILE=$nofile is above this machine's hard limit: using $hard)"
  nofile="$hard"
fi
# Under strace (if installed) to check the unit's SystemCallFilter below:
# strace runs as root, traces setpriv and the mongoplex it execs, and exits
# with mongoplex's status.
tracer=()
if command -v strace >/dev/null; then
  tracer=(strace -f -qq -o "$tmp/strace.out")
fi
# shellcheck disable=SC2086
(
  cd / && ulimit -n "$nofile" && umask 0077 &&
    exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NOTIFY_SOCKET="$tmp/notify.sock" \
      "${tracer[@]}" setpriv --reuid=mongoplex --regid=mongoplex --init-groups --no-new-privs \
      --inh-caps=-all --bounding-set=-all -- ${start/$CONF/$conf}
) >"$tmp/proxy.log" 2>&1 &
launcher_pid=$!
proxy_pid=$launcher_pid
if [ "${#tracer[@]}" -gt 0 ]; then
  # mongoplex is strace's child (setpriv execs it): signal that one.
  proxy_pid=""
  for _ in $(seq 100); do
    proxy_pid="$(pgrep -P "$launcher_pid" | head -1)"
    [ -n "$proxy_pid" ] && break
    sleep 0.1
  done
  [ -n "$proxy_pid" ] || fatal "no traced child under strace (pid $launcher_pid)"
fi
if wait_notify READY=1 1 20; then
  pass "proxy started as mongoplex and sent READY=1 (pid $proxy_pid, port $port)"
else
  sed 's/^/    /' "$tmp/proxy.log"
  fatal "proxy did not send READY=1 within 20 s"
fi
check "proxy process runs as user mongoplex" test "$(ps -o user= -p "$proxy_pid" | tr -d ' ')" = mongoplex

cat >"$tmp/client.py" <<'EOF'
import os, sys
import pymongo

proxy_port, backend_uri = int(sys.argv[1]), sys.argv[2]
kw = dict(serverSelectionTimeoutMS=10000, connectTimeoutMS=10000, socketTimeoutMS=30000)
proxy = pymongo.MongoClient("127.0.0.1", proxy_port, **kw)
direct = pymongo.MongoClient(backend_uri, **kw)
name = "pkgtest_%d" % os.getpid()

r = proxy.admin.command("ping")
assert r.get("ok") == 1, r
print("ping through the proxy: %r" % (r,))

docs = [{"_id": i, "n": i * i, "s": "doc %d" % i} for i in range(1, 21)]
direct.mp_pkgtest[name].insert_many(docs)
pc = proxy.mp_pkgtest[name]
got = list(pc.find({"n": {"$gte": 100}}).sort("_id", 1))
assert [d["_id"] for d in got] == list(range(10, 21)), got
one = pc.find_one({"_id": 7})
assert one == docs[6], one
many = list(pc.find({"_id": {"$in": [3, 1, 2]}}).sort("_id", 1))
assert [d["_id"] for d in many] == [1, 2, 3], many
print("find through the proxy: %d + 1 + %d documents as inserted" % (len(got), len(many)))

pc.insert_one({"_id": 100, "via": "proxy"})
assert direct.mp_pkgtest[name].find_one({"_id": 100}) == {"_id": 100, "via": "proxy"}
print("insert through the proxy reached the backend")

st = proxy.admin.command("mongoplexStats")
assert st.get("ok") == 1, st
direct.mp_pkgtest[name].drop()
EOF
check "ping, find and insert through the installed proxy (pymongo)" \
  $PY "$tmp/client.py" "$port" "$backend_uri"

# Reload as systemctl reload would: ExecReload lines in order.
sed -i "s|^pool_size *=.*|pool_size = 4|" "$conf"
check "ExecReload check passes as mongoplex (--test-config)" \
  runuser -u mongoplex -- /usr/bin/mongoplex --test-config -c "$conf"
kill -HUP "$proxy_pid"
if wait_notify RELOADING=1 1 10 && wait_notify READY=1 2 10; then
  pass "SIGHUP: RELOADING=1 then READY=1 sent"
else
  fail "SIGHUP: RELOADING=1 then READY=1 sent"
  sed 's/^/    /' "$tmp/notify.log"
fi
check "SIGHUP: proxy logged the reload with pool_size=4" grep -q 'reloaded.*pool_size=4' "$tmp/proxy.log"
check "ping through the proxy after the reload" \
  $PY -c "import pymongo; assert pymongo.MongoClient('127.0.0.1', $port, serverSelectionTimeoutMS=10000).admin.command('ping')['ok'] == 1"

# Stop as systemctl stop would: SIGTERM, then wait (TimeoutStopSec).
stop_timeout="$(unit_value TimeoutStopSec | tr -dc 0-9)"
kill -TERM "$proxy_pid"
for _ in $(seq $((stop_timeout * 10))); do kill -0 "$proxy_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$proxy_pid" 2>/dev/null; then
  fail "SIGTERM: proxy exits within TimeoutStopSec=${stop_timeout}s"
else
  wait "$launcher_pid"
  rc=$?
  check "SIGTERM: proxy exits with status 0 (got $rc)" test "$rc" = 0
fi
proxy_pid=""
check "SIGTERM: STOPPING=1 sent" grep -qx STOPPING=1 "$tmp/notify.log"
echo "   notify messages: $(tr '\n' ' ' <"$tmp/notify.log")"

# Every system call mongoplex made above (from its execve on: startup,
# sd_notify, traffic, reload, drain) must pass the unit's SystemCallFilter=.
# syscall_set TOKEN...: the calls named, with @groups expanded recursively.
syscall_set() {
  local t
  for t in "$@"; do
    case "$t" in
      @*) syscall_set $(systemd-analyze syscall-filter "$t" 2>/dev/null |
        awk 'NR > 1 && $1 !~ /^#/ && NF { print $1 }') ;;
      *) echo "$t" ;;
    esac
  done
}
if [ "${#tracer[@]}" -gt 0 ]; then
  awk '/ execve\("\/usr\/bin\/mongoplex"/ && / = 0$/ { on = 1; next }
       on && match($0, /^[0-9]+ +[a-z_0-9]+\(/) { s = substr($0, 1, RLENGTH - 1); sub(/^[0-9]+ +/, "", s); print s }' \
    "$tmp/strace.out" | sort -u >"$tmp/used"
  : >"$tmp/allow"
  : >"$tmp/deny"
  while IFS= read -r v; do
    case "$v" in
      "~"*) syscall_set ${v#\~} >>"$tmp/deny" ;;
      ?*) syscall_set $v >>"$tmp/allow" ;;
    esac
  done < <(unit_value SystemCallFilter)
  sort -u "$tmp/allow" -o "$tmp/allow"
  sort -u "$tmp/deny" -o "$tmp/deny"
  comm -23 "$tmp/allow" "$tmp/deny" >"$tmp/allowed"
  denied="$(comm -23 "$tmp/used" "$tmp/allowed" | tr '\n' ' ')"
  if [ ! -s "$tmp/used" ] || [ ! -s "$tmp/allowed" ]; then
    fail "SystemCallFilter covers the calls mongoplex made (no strace data or empty filter)"
  elif [ -z "$denied" ]; then
    pass "SystemCallFilter allows all $(wc -l <"$tmp/used") system calls mongoplex made (strace)"
  else
    fail "SystemCallFilter allows all system calls mongoplex made; would get EPERM: $denied"
  fi
else
  fail "SystemCallFilter check: strace not installed (scripts/install-deps.sh test installs it)"
fi

# ---------------------------------------------------------------- (e) reinstall, remove, purge
echo "== reinstall, remove, purge"
echo "; local edit by the package test" >>"$CONF"
if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "$deb" >"$tmp/apt.out" 2>&1; then
  pass "apt-get install --reinstall (with a locally edited conffile, no prompt)"
else
  sed 's/^/    /' "$tmp/apt.out"
  fail "apt-get install --reinstall"
fi
check "reinstall keeps the local edit of $CONF" grep -qx '; local edit by the package test' "$CONF"
check "reinstall keeps $CONF root:mongoplex 0640" test "$(stat -c '%U:%G %a' "$CONF" 2>&1)" = "root:mongoplex 640"

check "apt-get remove" env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq mongoplex
check "after remove: /usr/bin/mongoplex and the unit are gone" bash -c "[ ! -e /usr/bin/mongoplex ] && [ ! -e $UNIT ]"
check "after remove: $CONF is kept, with the local edit (state rc)" \
  bash -c "grep -qx '; local edit by the package test' $CONF && [ \"\$(dpkg-query -W -f='\${db:Status-Abbrev}' mongoplex)\" = 'rc ' ]"

check "apt-get purge" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq mongoplex
check "after purge: dpkg no longer has mongoplex (not installed, no conffiles)" \
  bash -c "s=\$(dpkg-query -W -f='\${db:Status-Abbrev}' mongoplex 2>/dev/null); [ -z \"\$s\" ] || [ \"\$s\" = 'pn ' ]"
check "after purge: /etc/mongoplex is gone" test ! -e /etc/mongoplex
check "after purge: enable symlink and deb-systemd-helper state are gone" \
  bash -c "[ ! -e /etc/systemd/system/multi-user.target.wants/mongoplex.service ] && [ ! -e /var/lib/systemd/deb-systemd-helper-enabled/mongoplex.service.dsh-also ]"
# Debian does not delete system users on purge: files (logs, sockets, data
# copied by an admin) may still belong to the uid, and a reused uid would
# inherit them. Reinstalling reuses the user.
check "after purge: system user mongoplex is kept (Debian practice; reinstall reuses it)" \
  getent passwd mongoplex

if [ "${MONGOPLEX_PKG_KEEP:-0}" = 1 ]; then
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$tmp/apt.out" 2>&1; then
    pass "MONGOPLEX_PKG_KEEP=1: reinstalled, left installed"
  else
    fail "MONGOPLEX_PKG_KEEP=1: reinstall"
  fi
fi

if [ "$fails" -eq 0 ]; then
  echo "RESULT: PASSED"
  exit 0
fi
echo "RESULT: FAILED ($fails check(s))"
exit 1
