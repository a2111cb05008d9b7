#!/usr/bin/env bash
# Checks a mongoplex systemd unit with `systemd-analyze verify` without
# installing anything:
#
#   scripts/verify-unit.sh [UNIT [BINARY]]
#       UNIT    default packaging/systemd/mongoplex.service
#       BINARY  default build/mongoplex; placed at /usr/bin/mongoplex in the
#               scratch root, since verify checks that ExecStart* exist
#
# `systemd-analyze verify --root=DIR` resolves the unit, its dependencies
# (multi-user.target, network.target, ...) and its command paths inside DIR,
# so DIR gets a copy of this machine's /lib/systemd/system, the unit and the
# binary. It works without a running systemd (containers). Documentation=
# man pages are not checked here (--man=no); tests/package checks them on the
# installed package, where they exist.
#
# systemd-analyze exits 0 even for unknown keys or bad values (it only prints
# them), so any output counts as a failure. Exit 0 = clean.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
unit="${1:-$ROOT/packaging/systemd/mongoplex.service}"
bin="${2:-$ROOT/build/mongoplex}"
die() { echo "verify-unit.sh: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || die "systemd-analyze not found (apt-get install systemd)"
[ -f "$unit" ] || die "no unit file $unit"
[ -x "$bin" ] || die "no executable $bin (build it, or pass its path)"
[ -d /lib/systemd/system ] || die "no /lib/systemd/system on this machine to take the standard units from"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/lib/systemd/system" "$scratch/usr/bin"
cp -a /lib/systemd/system/. "$scratch/lib/systemd/system/"
name="$(basename "$unit")"
rm -f "$scratch/lib/systemd/system/$name"
cp "$unit" "$scratch/lib/systemd/system/$name"
cp "$bin" "$scratch/usr/bin/mongoplex"

set +e
out="$(cd / && systemd-analyze verify --root="$scratch" --man=no "$name" 2>&1)"
rc=$?
set -e
if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
  printf '%s\n' "$out" | sed "s|$scratch||g" >&2
  die "systemd-analyze verify $name: exit $rc${out:+, with the messages above}"
fi
echo "verify-unit.sh: systemd-analyze verify $name: clean"
