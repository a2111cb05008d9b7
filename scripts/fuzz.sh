#!/usr/bin/env bash
# Builds and runs every libFuzzer target tests/fuzz/fuzz_*.c (see
# tests/fuzz/README.md for the conventions a target declares in its header:
# FUZZ_SOURCES, and optionally FUZZ_SEEDS, FUZZ_ARGS, FUZZ_PKGS).
#
#   scripts/fuzz.sh [TARGET...]        default: every tests/fuzz/fuzz_*.c
#   FUZZ_SECONDS=60                    fuzzing time per target
#   FUZZ_JOBS=N                        targets run at once (default: nproc)
#
# Per target: builds build-fuzz/TARGET with clang -fsanitize=fuzzer,address,
# undefined; replays every regression input in tests/fuzz/regressions/TARGET/
# (whole files, no length cap); then fuzzes for FUZZ_SECONDS from a corpus
# seeded by FUZZ_SEEDS and the regressions, and prints executions, exec/s and
# coverage (cov/ft of libFuzzer's final line). Exits non-zero on any crash,
# sanitizer report or failed check; the input is kept in
# build-fuzz/artifacts/TARGET/ (add it to the regressions once fixed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds="${FUZZ_SECONDS:-60}"
out=build-fuzz
cc="${FUZZ_CC:-clang}"
mkdir -p "$out"

# The value of "KEY: ..." in a target's header comment (empty when absent).
header_value() {
  sed -n "s|^.*$2:[[:space:]]*\\(.*[^[:space:]/*]\\)[[:space:]/*]*\$|\\1|p" "$1" | head -n 1
}

build_target() {
  local src="$1" name="$2" sources pkgs
  sources="$(header_value "$src" FUZZ_SOURCES)"
  if [ -z "$sources" ]; then
    echo "fuzz: $src has no FUZZ_SOURCES line (see tests/fuzz/README.md)" >&2
    return 1
  fi
  pkgs="$(header_value "$src" FUZZ_PKGS)"
  pkgs="${pkgs:-libbson-1.0 libevent}"
  # shellcheck disable=SC2046,SC2086
  "$cc" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer -I. -I"$out" $(pkg-config --cflags $pkgs) \
    "$src" $sources $(pkg-config --libs $pkgs) -lpthread -o "$out/$name"
}

replay_regressions() {
  local name="$1" dir="tests/fuzz/regressions/$1"
  [ -d "$dir" ] || return 0
  local files=("$dir"/*)
  [ -e "${files[0]}" ] || return 0
  echo "fuzz: $name: replaying ${#files[@]} regression input(s) from $dir"
  "$out/$name" -runs=1 "${files[@]}" >"$out/$name.replay.log" 2>&1 || {
    tail -n 40 "$out/$name.replay.log" >&2
    echo "fuzz: $name: a regression input fails again" >&2
    return 1
  }
}

run_target() {
  local src="$1" name seeds args corpus log dirs=() rc=0
  name="$(basename "$src" .c)"
  echo "=== fuzz: $name (${seconds} s) ==="
  build_target "$src" "$name" || return 1
  replay_regressions "$name" || return 1
  corpus="$out/corpus/$name"
  mkdir -p "$corpus" "$out/seeds/$name" "$out/artifacts/$name"
  seeds="$(header_value "$src" FUZZ_SEEDS)"
  if [ -n "$seeds" ]; then
    python3 "$seeds" "$out/seeds/$name" >/dev/null
    dirs+=("$out/seeds/$name")
  fi
  [ -d "tests/fuzz/regressions/$name" ] && dirs+=("tests/fuzz/regressions/$name")
  args="$(header_value "$src" FUZZ_ARGS)"
  log="$out/$name.log"
  # shellcheck disable=SC2086
  "$out/$name" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$name/" $args "$corpus" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  local final runs eps
  final="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  eps="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  if [ -z "$eps" ] || [ "$eps" = 0 ]; then
    eps="$(echo "$final" | grep -oE 'exec/s: [0-9]+' | grep -oE '[0-9]+' || true)"
  fi
  echo "fuzz: $name: executions ${runs:-?}, exec/s ${eps:-?}," \
    "$(echo "$final" | grep -oE 'cov: [0-9]+ ft: [0-9]+' || echo 'cov: ? ft: ?')," \
    "corpus $(find "$corpus" -type f | wc -l) files"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|Test unit written|deadly signal' "$log" >&2 || tail -n 40 "$log" >&2
    echo "fuzz: $name FAILED (exit $rc); input in $out/artifacts/$name/, log $log" >&2
    return 1
  fi
}

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(tests/fuzz/fuzz_*.c)
fi
# FUZZ_JOBS targets at a time (default: one per core; each libFuzzer run is
# one process on one core). Each target's lines go to build-fuzz/NAME.out and
# are printed whole, in target order, when it ends.
jobs="${FUZZ_JOBS:-$(nproc)}"
failed=0 running=0 names=()
for t in "${targets[@]}"; do
  [ -f "$t" ] || t="tests/fuzz/$t.c"
  name="$(basename "$t" .c)"
  names+=("$name")
  if [ "$running" -ge "$jobs" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
  ( run_target "$t" >"$out/$name.out" 2>&1 ) &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
for name in "${names[@]}"; do cat "$out/$name.out"; done
exit "$failed"
