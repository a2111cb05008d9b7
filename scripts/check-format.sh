#!/usr/bin/env bash
# Checks (or with --fix, applies) the checked-in .clang-format on all C sources.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' | grep -v '^tests/drivers/')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
else
  clang-format --dry-run --Werror "${files[@]}"
  echo "format: ${#files[@]} files OK"
fi
