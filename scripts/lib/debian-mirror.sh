# shellcheck shell=bash
# debian_mirror: the Debian mirror this machine's apt already uses (deb822
# .sources first, then one-line .list entries for bookworm), else
# deb.debian.org. Sourced by scripts/install-deps.sh (bookworm-backports) and
# scripts/fresh-check.sh (debootstrap), so both use the same mirror.
debian_mirror() {
  local m
  m="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
       sed -n 's,^URIs:[[:space:]]*\([^[:space:]]*/debian\)/*$,\1,p' | head -n 1)"
  [ -n "$m" ] || m="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
       sed -n 's,^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*/debian\)/*[[:space:]]\+bookworm[[:space:]].*,\2,p' |
       head -n 1)"
  echo "${m:-http://deb.debian.org/debian}"
}
