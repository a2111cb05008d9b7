#!/usr/bin/env bash
# gen-docs.sh — regenerates the files in the tree that are derived from the
# built binary, so that none of them is ever written by hand:
#
#   docs/settings.md     mongoplex --write-settings-md    (the settings table, config/cfg.c)
#   docs/errors.md       mongoplex --write-errors-md      (MP_ERRORS, core/errors.h)
#   config/mongoplex.ini mongoplex --write-example-config (the settings table)
#
# The man pages (mongoplex.ini(5), mongoplex(8)) are not in the tree: the
# package build generates them (packaging/gen-docs.sh, from --help-config).
#
#   scripts/gen-docs.sh [BINARY]           rewrite the files (default: build/mongoplex,
#                                          rebuilt first with ninja if build/ exists)
#   scripts/gen-docs.sh --check [BINARY]   write nothing; exit 1 naming each file that
#                                          differs, with its diff and the command to fix it
#                                          (ctest docs_generated)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
bin="${1:-}"
if [ -z "$bin" ]; then
  bin="$ROOT/build/mongoplex"
  if [ -f "$ROOT/build/build.ninja" ]; then
    ninja -C "$ROOT/build" mongoplex >/dev/null
  fi
fi
[ -x "$bin" ] || {
  echo "gen-docs.sh: $bin is not an executable: build first (cmake -S . -B build -G Ninja && ninja -C build)" >&2
  exit 2
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# file in the tree, then the binary's option that generates it
gens=(
  "docs/settings.md --write-settings-md"
  "docs/errors.md --write-errors-md"
  "config/mongoplex.ini --write-example-config"
)
stale=0
for g in "${gens[@]}"; do
  read -r file opt <<<"$g"
  out="$tmp/$(basename "$file")"
  "$bin" "$opt" >"$out"
  [ -s "$out" ] || { echo "gen-docs.sh: $bin $opt printed nothing" >&2; exit 1; }
  if cmp -s "$out" "$ROOT/$file"; then
    continue
  fi
  if [ "$check" = 1 ]; then
    stale=1
    echo "gen-docs.sh: $file is out of date: it differs from what \`mongoplex $opt\` prints:"
    diff -u "$ROOT/$file" "$out" --label "$file (committed)" --label "$file (generated)" | head -n 40 || true
  else
    cp "$out" "$ROOT/$file"
    echo "gen-docs.sh: wrote $file"
  fi
done
if [ "$stale" = 1 ]; then
  echo "gen-docs.sh: FAILED: generated files are out of date; fix with: scripts/gen-docs.sh (then commit them)"
  exit 1
fi
[ "$check" = 1 ] && echo "gen-docs.sh: docs/settings.md, docs/errors.md, config/mongoplex.ini match the binary"
exit 0
