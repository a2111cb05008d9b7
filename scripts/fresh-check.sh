#!/usr/bin/env bash
# fresh-check.sh — proves that the README's two commands work on a fresh
# Debian 12: debootstraps a bookworm root in a temporary folder, adds only git
# and ca-certificates (as a new user would), clones this repository's HEAD
# (what is committed, not the work tree) into it, and runs
#     scripts/demo.sh    then    scripts/test.sh
# inside it (chroot, with /proc, /sys, /dev, /dev/pts, /dev/shm and /run
# mounted), with CI=true. Prints each step's wall time and result and the
# ctest summary lines; the full output of each command is kept in
# .cache/fresh-check/ (demo.log, test.log). Everything mounted is unmounted and
# the root removed afterwards, also on failure or interrupt.
#
# What is copied from this machine into the root: its Debian apt sources and
# the apt.conf.d files no package owns (mirror/proxy settings), CA
# certificates it trusts beyond Debian's bundle, DNS and hosts, and registry
# client settings (pip.conf, npmrc, go env, Maven settings.xml, proxy and
# registry environment variables). No toolchain, no package, no cache.
#
# Needs root and debootstrap (installed from Debian if missing).
# Environment: FRESH_DIR [/var/tmp] where the root is made; FRESH_KEEP=1 keeps
# it (still unmounted) for inspection; FRESH_VERBOSE=1 streams the commands'
# output instead of only keeping it in the logs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOGDIR="$ROOT/.cache/fresh-check"
SUITE=bookworm
CLONE=/root/mongoplex   # path of the clone inside the root

say() { echo "fresh-check: $*"; }
die() { say "FAILED: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"
mkdir -p "$LOGDIR"
rm -f "$LOGDIR"/*.log

# ------------------------------------------------------------ host side helpers

# shellcheck source=scripts/lib/debian-mirror.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/debian-mirror.sh"

# timed NAME LOGFILE CMD...: runs CMD, output to LOGFILE (and stdout with
# FRESH_VERBOSE=1); prints the wall time and result. Returns CMD's status.
timed() {
  local name="$1" logf="$2" t0=$SECONDS rc=0
  shift 2
  say "$name ..."
  if [ -n "${FRESH_VERBOSE:-}" ]; then
    "$@" 2>&1 | tee "$logf" || rc=${PIPESTATUS[0]}
  else
    "$@" >"$logf" 2>&1 || rc=$?
  fi
  local secs=$((SECONDS - t0))
  if [ "$rc" -eq 0 ]; then
    say "$name: OK in $((secs / 60)) min $((secs % 60)) s"
  else
    say "$name: FAILED (exit $rc) after $((secs / 60)) min $((secs % 60)) s; last lines of $logf:"
    tail -n 60 "$logf" | sed 's/^/    /'
  fi
  TIMES+=("$(printf '%-32s %4d s  %s' "$name" "$secs" "$([ "$rc" -eq 0 ] && echo OK || echo "FAILED ($rc)")")")
  return "$rc"
}

TIMES=()
RFS=""
MOUNTS=()

# Kills what still runs inside the root (by pid: processes whose root is RFS),
# unmounts in reverse order, then removes the root, unless something is still
# mounted under it (then it is left, and said so).
cleanup() {
  local rc=$? pid m i
  trap - EXIT INT TERM
  if [ -n "$RFS" ] && [ -d "$RFS" ]; then
    for i in 1 2; do
      for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$RFS" ] || continue
        kill "-$([ "$i" = 1 ] && echo TERM || echo KILL)" "$pid" 2>/dev/null || true
      done
      sleep 1
    done
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
      m="${MOUNTS[$i]}"
      # -R: what the tests mounted below (e.g. ip netns' /run/netns) goes too.
      umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
    done
    if grep -q " $RFS" /proc/mounts; then
      say "something is still mounted under $RFS; not removing it:"
      grep " $RFS" /proc/mounts | sed 's/^/    /'
      rc=1
    elif [ -n "${FRESH_KEEP:-}" ]; then
      say "root kept in $RFS (FRESH_KEEP)"
    else
      rm -rf --one-file-system "$RFS"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mnt() { # mnt TARGET mount-args...: mounts and remembers TARGET for cleanup
  local target="$1"
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  MOUNTS+=("$target")
}

# Files apt reads for sources, but only those that name Debian's archive.
copy_apt_settings() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # skip sources of non-Debian repositories (toolchains such as nodesource)
    if grep -E '^(deb|URIs:)' "$f" | grep -vq '/debian'; then continue; fi
    [ "$(basename "$f")" != bookworm-backports.sources ] || continue  # install-deps adds it
    cp "$f" "$RFS$f"
  done
  # Machine-local apt configuration (proxies, mirror options): the files no package owns.
  for f in /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] || continue
    dpkg -S "$f" >/dev/null 2>&1 || cp "$f" "$RFS/etc/apt/apt.conf.d/"
  done
  [ ! -f /etc/apt/apt.conf ] || cp /etc/apt/apt.conf "$RFS/etc/apt/"
  # The debootstrap mirror line is replaced by the copied sources.
  if ls "$RFS"/etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then : >"$RFS/etc/apt/sources.list"; fi
}

# CA certificates this machine trusts beyond Debian's bundle (e.g. a proxy's),
# so that ca-certificates inside the root includes them.
copy_extra_cas() {
  /usr/bin/python3 - "$RFS/usr/local/share/ca-certificates" <<'EOF'
import glob, os, re, sys
pat = r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----"
def certs(path):
    try:
        return [c.strip() for c in re.findall(pat, open(path).read(), re.S)]
    except OSError:
        return []
known = set()
for f in glob.glob("/usr/share/ca-certificates/**/*.crt", recursive=True):
    known.update(certs(f))
extra = [c for c in certs("/etc/ssl/certs/ca-certificates.crt") if c not in known]
os.makedirs(sys.argv[1], exist_ok=True)
for i, c in enumerate(extra):
    open(os.path.join(sys.argv[1], "host-extra-%d.crt" % i), "w").write(c + "\n")
print(len(extra))
EOF
}

# Registry client settings: files, and environment variables passed to the chroot.
copy_registry_settings() {
  local f
  for f in /etc/pip.conf /etc/npmrc /root/.npmrc /root/.config/pip/pip.conf /root/.pip/pip.conf \
           /root/.config/go/env /root/.m2/settings.xml /etc/gitconfig /root/.gitconfig; do
    [ -f "$f" ] || continue
    mkdir -p "$RFS$(dirname "$f")"
    cp -p "$f" "$RFS$f"
  done
  CHROOT_ENV=()
  local v
  while IFS='=' read -r v _; do
    case "$v" in
      http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY|ALL_PROXY|all_proxy | \
      PIP_INDEX_URL|PIP_EXTRA_INDEX_URL|PIP_TRUSTED_HOST|PIP_CERT|PIP_DEFAULT_TIMEOUT | \
      PIP_DISABLE_PIP_VERSION_CHECK|NPM_CONFIG_*|npm_config_*|GOPROXY|GOSUMDB|GONOSUMDB | \
      GOPRIVATE|GONOPROXY|GOFLAGS|GOINSECURE|MAVEN_OPTS|MAVEN_ARGS | \
      SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_EXTRA_CA_CERTS|GIT_SSL_CAINFO)
        CHROOT_ENV+=("$v=${!v}") ;;
    esac
  done < <(env)
}

# in_root CMD: runs a bash command line inside the root as root, with a clean
# environment like a login shell's plus CI=true and the registry settings.
in_root() {
  chroot "$RFS" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb \
    CI=true "${CHROOT_ENV[@]}" /bin/bash -c "$1"
}

# ------------------------------------------------------------ main

t_all=$SECONDS
commit="$(git -C "$ROOT" rev-parse HEAD)"
say "checking commit $commit ($(git -C "$ROOT" log -1 --format=%s | cut -c1-60))"
if ! command -v debootstrap >/dev/null; then
  timed "apt-get install debootstrap" "$LOGDIR/host-apt.log" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --no-remove \
    -o DPkg::Lock::Timeout=600 debootstrap || die "debootstrap could not be installed"
fi
mkdir -p "${FRESH_DIR:-/var/tmp}"
RFS="$(mktemp -d "${FRESH_DIR:-/var/tmp}/mongoplex-fresh.XXXXXX")"
chmod 755 "$RFS"
mirror="$(debian_mirror)"
timed "debootstrap $SUITE ($mirror)" "$LOGDIR/debootstrap.log" \
  debootstrap --merged-usr "$SUITE" "$RFS" "$mirror" || die "debootstrap failed"

copy_apt_settings
n_ca="$(copy_extra_cas)"
copy_registry_settings
cp /etc/resolv.conf "$RFS/etc/resolv.conf"
cp /etc/hosts "$RFS/etc/hosts"
# A chroot has no init: package scripts must not start services on this machine.
printf '#!/bin/sh\nexit 101\n' >"$RFS/usr/sbin/policy-rc.d"
chmod 755 "$RFS/usr/sbin/policy-rc.d"
say "copied into the root: apt sources and local apt settings, $n_ca extra CA certificate(s)," \
    "DNS, registry settings (${#CHROOT_ENV[@]} environment variables)"

# The root is a mount point of its own, as / is on a real machine: `ip netns
# exec` (the mongodb+srv test's DNS namespace) remounts / as a slave, which
# fails with EINVAL when the chroot's / is a plain directory.
mnt "$RFS" --bind "$RFS"
mount --make-private "$RFS"   # mounts below it must not reach this machine
mnt "$RFS/proc" -t proc proc
mnt "$RFS/sys" -t sysfs sysfs
mnt "$RFS/dev" --bind /dev
mount --make-private "$RFS/dev"   # mounts below it must not reach this machine's /dev
mnt "$RFS/dev/pts" -t devpts -o newinstance,ptmxmode=0666 devpts
mnt "$RFS/dev/shm" -t tmpfs -o mode=1777 shm
mnt "$RFS/run" -t tmpfs -o mode=755 run
mkdir -p "$RFS/run/lock"; chmod 1777 "$RFS/run/lock"

timed "apt-get install git ca-certificates" "$LOGDIR/root-apt.log" in_root \
  'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q git ca-certificates' ||
  die "git + ca-certificates could not be installed in the root"

git clone -q --no-checkout "$ROOT" "$RFS$CLONE"
git -C "$RFS$CLONE" checkout -q --detach "$commit"
say "cloned $commit into $CLONE"

rc=0
timed "scripts/demo.sh" "$LOGDIR/demo.log" in_root "cd $CLONE && scripts/demo.sh" || rc=1
sed -n '/^What this run shows/,$p' "$LOGDIR/demo.log" | sed 's/^/    /'
timed "scripts/test.sh" "$LOGDIR/test.log" in_root "cd $CLONE && scripts/test.sh" || rc=1
grep -aE '^== (suite|integration suite|FerretDB pass|scripts/test.sh|test servers)|tests passed|tests failed|Total Test time|\*\*\*Failed|\(Failed\)|\(Timeout\)' \
  "$LOGDIR/test.log" | sed 's/^/    /' || true
# Each pass's slowest tests (scripts/test.sh prints them after its ctest run).
sed -n '/^== the [0-9]* slowest/,/^== test servers/{/^== test servers/!p}' "$LOGDIR/test.log" | sed 's/^/    /' || true
grep -a '^install-deps:' "$LOGDIR/demo.log" "$LOGDIR/test.log" | sed 's/^/    /' || true

echo
say "summary (commit ${commit:0:12}, total $(( (SECONDS - t_all) / 60 )) min):"
for l in "${TIMES[@]}"; do echo "    $l"; done
[ "$rc" -eq 0 ] && say "PASSED" || say "FAILED"
exit "$rc"
