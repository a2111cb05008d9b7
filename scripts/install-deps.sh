#!/usr/bin/env bash
# Installs everything mongoplex needs to build, test, benchmark and package
# on Debian 12. Idempotent: packages already present are skipped quickly.
set -euo pipefail

need_apt=(
  build-essential cmake ninja-build pkg-config clang-format
  libevent-dev libmongoc-dev libbson-dev libcriterion-dev libinih-dev
  libsystemd-dev libssl-dev libgsasl-dev
  openjdk-17-jdk-headless maven
  python3 python3-pymongo python3-mockupdb python3-venv
  haproxy gnuplot-nox curl procps
  debhelper devscripts lintian fakeroot dpkg-dev systemd man-db strace
  # fuzzing (scripts/fuzz.sh): clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
)

missing=()
for p in "${need_apt[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A current pymongo (PyPI) beside Debian's 3.11, for the test that checks
# drivers back off and retry on mongoplex's overload labels (pymongo >= 4.17
# implements that; 3.11 does not).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$ROOT/.cache/pymongo4-venv"
if ! "$venv/bin/python" -c 'import pymongo; assert pymongo.version == "4.20.1"' 2>/dev/null; then
  rm -rf "$venv"
  if /usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install -q 'pymongo==4.20.1'; then
    echo "install-deps: pymongo 4.20.1 in $venv"
  else
    echo "install-deps: WARNING: could not install pymongo 4.20.1 from PyPI; the pymongo 4 retry test will be skipped" >&2
    rm -rf "$venv"
  fi
fi
