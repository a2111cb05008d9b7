#!/usr/bin/env bash
# Checks the one-way layers of the product code: a file may include only
# headers of its own layer or of a lower one (see docs/architecture.md).
#   bottom  core/, config/   may include core/, config/
#   middle  pool/            may include core/, config/, pool/
#   top     proxy/           may include anything
# tests/ and bench/ are not checked. Exits 1 and prints file:line and the rule
# for every violation. Usage: scripts/check-layers.sh [ROOT] (default: the
# repository this script lives in; the self-test passes a fake tree).
set -euo pipefail
root=${1:-"$(dirname "${BASH_SOURCE[0]}")/.."}
cd "$root"

# Exceptions, one "file:included-header" a line. Keep it EMPTY: a lower layer
# that needs something from above gets a callback, not an include.
allow=()

# allowed_dirs LAYER: the layers a file in LAYER may include.
allowed_dirs() {
  case $1 in
  core | config) echo "core config" ;;
  pool) echo "core config pool" ;;
  *) echo "" ;;
  esac
}

violations=0
checked=0
for layer in core config pool; do
  [ -d "$layer" ] || continue
  ok=$(allowed_dirs "$layer")
  while IFS= read -r file; do
    checked=$((checked + 1))
    while IFS=: read -r line hdr; do
      dir=${hdr%%/*}
      [ "$dir" = "$hdr" ] && continue # no folder: own dir or generated
      case " $ok " in *" $dir "*) continue ;; esac
      case "$dir" in core | config | pool | proxy) ;; *) continue ;; esac
      for a in "${allow[@]+"${allow[@]}"}"; do
        [ "$a" = "$file:$hdr" ] && continue 2
      done
      echo "$file:$line: includes \"$hdr\": $layer/ may include only ${ok// /\/, }/" >&2
      violations=$((violations + 1))
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
      sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
  done < <(find "$layer" -type f \( -name '*.c' -o -name '*.h' \) | sort)
done

if [ "$violations" -gt 0 ]; then
  echo "layers: $violations violation(s) in $checked files" >&2
  exit 1
fi
echo "layers: $checked files OK"
