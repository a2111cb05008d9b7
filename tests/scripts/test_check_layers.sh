#!/usr/bin/env bash
# Self-test of scripts/check-layers.sh: a fake tree that keeps the layers
# passes; each fake tree with one upward include fails (exit 1) and names the
# file:line and the rule. Run by ctest (test "check_layers").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
check=$here/scripts/check-layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# tree DIR: a small tree that respects the layers.
tree() {
  mkdir -p "$1"/core "$1"/config "$1"/pool "$1"/proxy "$1"/tests
  printf '#include "core/log.h"\n#include <stdio.h>\n#include "version.h"\n' >"$1"/core/log.c
  printf '#include "core/log.h"\n#include "config/secret.h"\n' >"$1"/config/cfg.c
  printf '#include "config/cfg.h"\n' >"$1"/config/secret.c
  printf '#include "core/list.h"\n#include "config/cfg.h"\n#include "pool/pool.h"\n' >"$1"/pool/pool.c
  printf '#include "pool/pool.h"\n#include "proxy/client.h"\n' >"$1"/proxy/client.c
  printf '#include "proxy/client.h"\n' >"$1"/tests/t.c
}

# expect_fail NAME FILE LINE TEXT: add TEXT as line LINE of FILE, expect a failure naming it.
expect_fail() {
  local d=$tmp/$1
  tree "$d"
  printf '%s\n' "$4" >>"$d/$2"
  if out=$("$check" "$d" 2>&1); then
    echo "FAIL $1: check-layers passed a tree where $2 has $4"
    fail=1
  elif ! grep -q "^$2:$3: includes" <<<"$out" || ! grep -q "may include only" <<<"$out"; then
    echo "FAIL $1: output does not name $2:$3 and the rule: $out"
    fail=1
  else
    echo "ok   $1: $(head -1 <<<"$out")"
  fi
}

tree "$tmp/clean"
if out=$("$check" "$tmp/clean" 2>&1); then
  echo "ok   clean: $out"
else
  echo "FAIL clean: a tree that keeps the layers was rejected: $out"
  fail=1
fi
expect_fail pool_proxy pool/pool.c 4 '#include "proxy/client.h"'
expect_fail core_pool core/log.c 4 '#  include "pool/pool.h"'
expect_fail config_proxy config/secret.c 2 '#include "proxy/admin.h"'
expect_fail trailing_comment pool/pool.c 4 '#include "proxy/cursor.h" /* note */'
expect_fail header pool/pool.h 1 '#include "proxy/janitor.h"'
exit $fail
