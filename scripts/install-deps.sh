#!/usr/bin/env bash
# Installs everything mongoplex needs to build, test, benchmark and package
# on Debian 12. Idempotent: packages already present are skipped quickly.
set -euo pipefail

need_apt=(
  build-essential cmake ninja-build pkg-config clang-format
  libevent-dev libmongoc-dev libbson-dev libcriterion-dev libinih-dev
  libsystemd-dev libssl-dev
  openjdk-17-jdk-headless maven
  python3 python3-pymongo python3-mockupdb
  haproxy gnuplot-nox curl procps
  debhelper devscripts lintian fakeroot dpkg-dev systemd man-db strace
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
