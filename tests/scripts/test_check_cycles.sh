#!/usr/bin/env bash
# Self-test of scripts/check-cycles.py on fake builds: object files compiled
# here from tiny pool/ and proxy/ sources. A circle of 3 files passes; a
# circle of 4 fails (exit 1) naming the files and the calls; the same 4 files
# with the circle broken by a callback pass; calls into another layer or a
# symbol nobody defines make no edge. Run by ctest (test "check_cycles_selftest").
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
check=$here/scripts/check-cycles.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cc=${CC:-cc}

# obj BUILD LAYER NAME DEFINES CALLS...: BUILD/LAYER/NAME.c.o defining
# function DEFINES and calling each of CALLS.
obj() {
  local b=$1 layer=$2 name=$3 def=$4 src
  shift 4
  mkdir -p "$b/$layer"
  src="$b/$layer/$name.c"
  {
    for f in "$@"; do echo "void $f(void);"; done
    echo "void $def(void);"
    echo "void $def(void) {"
    for f in "$@"; do echo "  $f();"; done
    echo "}"
  } >"$src"
  "$cc" -c -o "$b/$layer/$name.c.o" "$src"
}

expect() { # expect NAME RC-WANTED BUILD [TEXT]
  local out rc=0
  out=$("$check" --strict "$3" 2>&1) || rc=$?
  if [ "$rc" != "$2" ]; then
    echo "FAIL $1: exit $rc, wanted $2:"
    echo "$out"
    fail=1
  elif [ -n "${4:-}" ] && ! grep -qF -- "$4" <<<"$out"; then
    echo "FAIL $1: output lacks '$4':"
    echo "$out"
    fail=1
  else
    echo "ok $1"
  fi
}

b=$tmp/three
obj "$b" pool a fa fb
obj "$b" pool b fb fc
obj "$b" pool c fc fa
obj "$b" proxy p fp fa missing_symbol
expect three-files-pass 0 "$b" "cycles: 4 objects OK"

b=$tmp/four
obj "$b" pool a fa fb
obj "$b" pool b fb fc
obj "$b" pool c fc fd
obj "$b" pool d fd fa
expect four-files-fail 1 "$b" "pool/: 4 files call each other in a circle (at most 3): a b c d"
expect four-files-name-the-call 1 "$b" "d.c -> a.c: fa"

b=$tmp/broken
obj "$b" pool a fa fb
obj "$b" pool b fb fc
obj "$b" pool c fc fd
obj "$b" pool d fd # calls a through a callback now: no symbol
expect circle-broken-passes 0 "$b" "cycles: 4 objects OK"

b=$tmp/proxy
obj "$b" proxy a fa fb
obj "$b" proxy b fb fc
obj "$b" proxy c fc fd
obj "$b" proxy d fd fa
obj "$b" pool e fe
expect proxy-checked-too 1 "$b" "proxy/: 4 files"

expect no-build-dir 2 "$tmp/none"
exit $fail
