#!/usr/bin/env bash
# Builds the mongoplex Debian package into dist/ and runs lintian on it.
#
#   scripts/build-deb.sh [--head] [--keep] [--quiet] [--no-deps] [--no-lintian]
#
#   (default)     package the working tree as it is on disk, uncommitted and
#                 untracked files included (everything `git ls-files --cached
#                 --others --exclude-standard` lists, i.e. minus .gitignore'd
#                 build*/, .cache/, node_modules/, dist/); outside a git
#                 checkout, a tar copy minus those directories
#   --head        package the committed tree instead (git archive HEAD)
#   --keep        keep the temporary build tree and print where it is
#   --quiet       send dpkg-buildpackage's output to dist/build.log only
#                 (its tail is printed if the build fails)
#   --no-deps     don't run scripts/install-deps.sh first
#   --no-lintian  skip lintian
#
# debian/ is packaging/debian/ copied to the root of a temporary copy of the
# source tree (the repository itself never gets a debian/ directory); then
# `dpkg-buildpackage -us -uc -b` runs there. Results in dist/:
#   mongoplex_<version>_<arch>.deb, mongoplex-dbgsym_<version>_<arch>.deb,
#   mongoplex_<version>_<arch>.{changes,buildinfo}, build.log, lintian.txt
# The packaged unit is checked with `systemd-analyze verify` (scripts/verify-unit.sh).
# Exits non-zero if the build fails, the unit does not verify cleanly, or
# lintian reports an error (E:).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIST="$ROOT/dist"
source_mode=worktree
keep=0 quiet=0 deps=1 run_lintian=1
for a in "$@"; do
  case "$a" in
    --head) source_mode=head ;;
    --worktree) source_mode=worktree ;;
    --keep) keep=1 ;;
    --quiet) quiet=1 ;;
    --no-deps) deps=0 ;;
    --no-lintian) run_lintian=0 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-deb.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
  esac
done

die() { echo "build-deb.sh: $*" >&2; exit 1; }
log() { echo "build-deb.sh: $*" >&2; }
start=$SECONDS

[ "$deps" = 0 ] || "$ROOT/scripts/install-deps.sh"
for t in dpkg-buildpackage dpkg-parsechangelog dh; do
  command -v "$t" >/dev/null || die "$t not found (run scripts/install-deps.sh)"
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mongoplex-deb.XXXXXX")"
if [ "$keep" = 1 ]; then
  trap 'log "build tree kept in $tmp"' EXIT
else
  trap 'rm -rf "$tmp"' EXIT
fi
src="$tmp/mongoplex"
mkdir -p "$src"

# ---------------------------------------------------------------- source copy
if [ "$source_mode" = head ]; then
  git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null || die "--head: $ROOT is not a git checkout with commits"
  log "source: git archive HEAD ($(git -C "$ROOT" rev-parse --short HEAD))"
  git -C "$ROOT" archive --format=tar HEAD | tar -xf - -C "$src"
elif git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  log "source: working tree (tracked + untracked, minus .gitignore'd files)"
  # Files deleted on disk but still in the index are skipped; so is any
  # debian/ at the root (it comes from packaging/debian/ below).
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
      case "$f" in debian/* | dist/*) continue ;; esac
      if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
    done | tar --null -T - -cf -) | tar -xf - -C "$src"
else
  log "source: directory copy (not a git checkout)"
  (cd "$ROOT" && tar --exclude='./build*' --exclude=./.cache --exclude=./dist \
    --exclude=./debian --exclude=node_modules --exclude=./.git -cf - .) | tar -xf - -C "$src"
fi
[ -f "$src/CMakeLists.txt" ] || die "source copy has no CMakeLists.txt"
# debian/ comes from the same tree as the sources (so --head uses the
# committed packaging too).
[ -d "$src/packaging/debian" ] || die "the $source_mode tree has no packaging/debian (not committed yet? try without --head)"
cp -a "$src/packaging/debian" "$src/debian"

# The Debian version's upstream part must be the CMake project version.
deb_version="$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)"
upstream="${deb_version%-*}"
cmake_version="$(sed -n 's/^project(mongoplex VERSION \([^ )]*\).*/\1/p' "$src/CMakeLists.txt")"
[ "$upstream" = "$cmake_version" ] ||
  die "packaging/debian/changelog says $deb_version but CMakeLists.txt says $cmake_version (add a changelog entry: dch -c packaging/debian/changelog)"

# ---------------------------------------------------------------- build
mkdir -p "$DIST"
buildlog="$DIST/build.log"
jobs="$(nproc 2>/dev/null || echo 2)"
export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-parallel=$jobs}"
log "dpkg-buildpackage -us -uc -b in $src (DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS)"
set +e
if [ "$quiet" = 1 ]; then
  (cd "$src" && dpkg-buildpackage -us -uc -b) >"$buildlog" 2>&1
  rc=$?
else
  (cd "$src" && dpkg-buildpackage -us -uc -b) 2>&1 | tee "$buildlog"
  rc=${PIPESTATUS[0]}
fi
set -e
if [ "$rc" != 0 ]; then
  [ "$quiet" = 0 ] || tail -40 "$buildlog" >&2
  die "dpkg-buildpackage failed (exit $rc); full log: $buildlog"
fi

arch="$(dpkg-architecture -qDEB_HOST_ARCH)"
changes="$tmp/mongoplex_${deb_version}_${arch}.changes"
[ -f "$changes" ] || die "no $changes after the build"
rm -f "$DIST"/mongoplex_*.deb "$DIST"/mongoplex-dbgsym_*.deb "$DIST"/mongoplex_*.changes \
  "$DIST"/mongoplex_*.buildinfo "$DIST/lintian.txt"
cp "$tmp"/mongoplex_"${deb_version}"_*.deb "$tmp"/mongoplex_"${deb_version}"_*.changes \
  "$tmp"/mongoplex_"${deb_version}"_*.buildinfo "$DIST/"
cp "$tmp"/mongoplex-dbgsym_"${deb_version}"_*.deb "$DIST/" 2>/dev/null || true

# ---------------------------------------------------------------- unit check
# systemd-analyze verify on the unit and binary as packaged (scratch root).
if command -v systemd-analyze >/dev/null; then
  dpkg-deb -x "$DIST/mongoplex_${deb_version}_${arch}.deb" "$tmp/pkgroot"
  "$ROOT/scripts/verify-unit.sh" "$tmp/pkgroot/lib/systemd/system/mongoplex.service" \
    "$tmp/pkgroot/usr/bin/mongoplex" >&2 || die "the packaged unit does not verify"
else
  log "systemd-analyze not found: unit not verified (apt-get install systemd)"
fi

# ---------------------------------------------------------------- lintian
lintian_rc=0
if [ "$run_lintian" = 1 ]; then
  command -v lintian >/dev/null || die "lintian not found (run scripts/install-deps.sh)"
  # --info: explain each tag; -I: show info (I:) tags too; --pedantic: and
  # pedantic (P:) ones; overridden tags are listed as O: with their reason.
  log "lintian on $(basename "$changes")"
  set +e
  lintian --info --display-info --pedantic --show-overrides --tag-display-limit 0 \
    "$DIST/$(basename "$changes")" >"$DIST/lintian.txt" 2>&1
  lintian_rc=$?
  set -e
  if [ -s "$DIST/lintian.txt" ]; then
    grep -E '^[EWIPXO]: ' "$DIST/lintian.txt" >&2 || true
  else
    log "lintian: no tags"
  fi
  if grep -q '^E: ' "$DIST/lintian.txt"; then
    die "lintian reported errors (see $DIST/lintian.txt)"
  fi
  [ "$lintian_rc" = 0 ] || log "lintian exited $lintian_rc (no E: tags; see $DIST/lintian.txt)"
fi

log "done in $((SECONDS - start)) s:"
ls -1 "$DIST"/mongoplex*_"${deb_version}"_* >&2
