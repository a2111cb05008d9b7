#!/usr/bin/env bash
# Installs what mongoplex needs on Debian 12, by purpose. Idempotent: what is
# present is skipped quickly. Everything comes from Debian (Go from
# bookworm-backports, pinned so that nothing else is taken from there), plus
# PyPI for a current pymongo and tests/drivers/install.sh for the driver matrix.
#
#   scripts/install-deps.sh [PURPOSE]...     (default: all)
#
#   demo     build (compiler, cmake, ninja, libmongoc, libevent, inih, ...),
#            Java + Maven for the demo backend (mongo-java-server), python3-pymongo
#   test     demo + criterion, clang-format, mockupdb, dnsmasq-base + iproute2 (the
#            mongodb+srv test's DNS server and network namespace), Node.js + npm, Go >= 1.22
#            (golang-1.23, to build FerretDB), Rust >= 1.88 (rustc-web + cargo-web,
#            bookworm-security: the Rust driver), clang + libclang-rt-14-dev
#            (fuzzing), strace, haproxy (tests/integration/test_lb_tier.c and
#            bench/run.sh's TCP relay), the pymongo 4 venv ($MONGOPLEX_CACHE, default
#            .cache: pymongo4-venv) and
#            tests/drivers/install.sh (the pinned driver matrix)
#   package  debhelper devscripts lintian fakeroot dpkg-dev systemd man-db
#   bench    haproxy gnuplot-nox (bench/run.sh)
#   all      all of the above
#
# apt/dpkg/pip output goes to .cache/install-deps.log (its tail is printed on
# failure); stdout gets one line per step with its elapsed time.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG="$ROOT/.cache/install-deps.log"
PYMONGO4_VERSION="4.20.1"
GO_PKG="golang-1.23"
mkdir -p "$ROOT/.cache"
: >"$LOG"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

say() { echo "install-deps: $*"; }

# step NAME CMD...: runs CMD with its output in the log; prints NAME and the
# elapsed time, or the log's tail and exits on failure.
step() {
  local name="$1" t0=$SECONDS rc=0
  shift
  echo "== $name" >>"$LOG"
  "$@" >>"$LOG" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    say "$name: FAILED (exit $rc) after $((SECONDS - t0)) s; last lines of $LOG:"
    tail -n 30 "$LOG" | sed 's/^/    /'
    exit 1
  fi
  say "$name: $((SECONDS - t0)) s"
}

# ------------------------------------------------------------ package lists

pkgs_demo=(
  build-essential cmake ninja-build pkg-config git
  libevent-dev libmongoc-dev libbson-dev libinih-dev libsystemd-dev libssl-dev libgsasl-dev
  libsnappy-dev libzstd-dev zlib1g-dev
  openjdk-17-jdk-headless maven
  python3 python3-pymongo curl procps ca-certificates
)
pkgs_test=(
  clang-format libcriterion-dev python3-mockupdb python3-venv
  clang libclang-rt-14-dev strace
  haproxy
  dnsmasq-base iproute2
  "$GO_PKG"
  # Rust 1.96 (bookworm-security; bookworm's rustc 1.85 is older than the
  # mongodb crate 3.9's 1.88): /usr/bin/cargo builds tests/drivers/rust.
  rustc-web cargo-web
)
pkgs_package=(debhelper devscripts lintian fakeroot dpkg-dev systemd man-db)
pkgs_bench=(haproxy gnuplot-nox)

purposes=("$@")
[ "${#purposes[@]}" -gt 0 ] || purposes=(all)
want=() do_test=0
for p in "${purposes[@]}"; do
  case "$p" in
    demo) want+=("${pkgs_demo[@]}") ;;
    test) want+=("${pkgs_demo[@]}" "${pkgs_test[@]}"); do_test=1 ;;
    package) want+=("${pkgs_package[@]}") ;;
    bench) want+=("${pkgs_bench[@]}") ;;
    all) want+=("${pkgs_demo[@]}" "${pkgs_test[@]}" "${pkgs_package[@]}" "${pkgs_bench[@]}"); do_test=1 ;;
    *) echo "usage: $0 [demo|test|package|bench|all]..." >&2; exit 2 ;;
  esac
done

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# Node.js >= 18 and npm: Debian's nodejs/npm unless a node and npm are already
# there (another nodejs package, e.g. one that bundles npm and conflicts with
# Debian's npm, must not be replaced).
node_ok() {
  command -v node >/dev/null && command -v npm >/dev/null &&
    [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 18 ]
}

missing=()
for p in "${want[@]}"; do
  installed "$p" || [[ " ${missing[*]} " == *" $p "* ]] || missing+=("$p")
done
if [ "$do_test" = 1 ] && ! node_ok; then
  missing+=(nodejs npm)
fi

# ------------------------------------------------------------ bookworm-backports

# shellcheck source=scripts/lib/debian-mirror.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/debian-mirror.sh"

# Adds bookworm-backports at priority 100 (never chosen over bookworm) and
# gives only the golang-1.23 packages priority 500 there.
add_backports() {
  local src=/etc/apt/sources.list.d/bookworm-backports.sources
  local pref=/etc/apt/preferences.d/mongoplex-backports
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    $SUDO tee "$src" >/dev/null <<EOF
# added by mongoplex scripts/install-deps.sh (for $GO_PKG); pinned in $pref
Types: deb
URIs: $(debian_mirror)
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  fi
  if [ ! -f "$pref" ]; then
    $SUDO tee "$pref" >/dev/null <<EOF
# added by mongoplex scripts/install-deps.sh: nothing comes from
# bookworm-backports unless asked for, except the Go toolchain below.
Package: *
Pin: release n=bookworm-backports
Pin-Priority: 100

Package: $GO_PKG*
Pin: release n=bookworm-backports
Pin-Priority: 500
EOF
  fi
}

apt_install() {
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends --no-remove \
    -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0 "$@"
}

if [ "${#missing[@]}" -gt 0 ]; then
  [[ " ${missing[*]} " != *" $GO_PKG "* ]] || add_backports
  # apt's lists may be absent (a fresh machine) or stale: update when installing.
  step "apt-get update" $SUDO apt-get update -q -o DPkg::Lock::Timeout=600
  step "apt-get install ${#missing[@]} packages (${missing[*]})" apt_install "${missing[@]}"
else
  say "Debian packages for ${purposes[*]}: all present"
fi

# ------------------------------------------------------------ test extras

if [ "$do_test" = 1 ]; then
  # A current pymongo (PyPI) beside Debian's 3.11, for the test that checks
  # drivers back off and retry on mongoplex's overload labels (pymongo >= 4.17).
  venv="${MONGOPLEX_CACHE:-$ROOT/.cache}/pymongo4-venv"
  if ! "$venv/bin/python" -c "import pymongo; assert pymongo.version == '$PYMONGO4_VERSION'" 2>/dev/null; then
    rm -rf "$venv"
    make_venv() { /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q "pymongo==$PYMONGO4_VERSION"; }
    step "pymongo $PYMONGO4_VERSION venv in $venv (PyPI)" make_venv
  fi
  # The pinned driver matrix (PyPI, npm, Maven Central, Go module proxy, the Rust package registry).
  if [ -x "$ROOT/tests/drivers/install.sh" ]; then
    step "tests/drivers/install.sh (driver matrix)" "$ROOT/tests/drivers/install.sh"
  fi
fi
