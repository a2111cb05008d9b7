#!/usr/bin/env bash
# ctest `drivers_modern_auth`: the modern-driver suite (run.sh) with client
# authentication on. Starts FerretDB with auth (scripts/backend.sh start
# ferretdb-auth), creates user "modern" on it through the admin identity the
# proxy uses (createUser, SCRAM-SHA-256 and SCRAM-SHA-1), starts mongoplex with
# auth_mode = scram and auth_query = on (scripts/with-proxy.sh; the user's
# verifier comes from the backend's usersInfo) in the default
# auth_pool_mode = per_user, so the proxy's backend connections log in AS
# that user with the ClientKey of its login, and runs every driver, direct
# and through the proxy, logged in as that user: once with SCRAM-SHA-256 and
# once with SCRAM-SHA-1, every driver in both passes (drivers authenticate
# speculatively, in the hello). libmongoc's logins with both mechanisms are
# in tests/integration/test_client_auth.c and test_per_user.c.
#
#   tests/drivers/modern/test_auth.sh [DRIVER...]     default: all of run.sh's
#   MODERN_AUTH_SHA1_DRIVERS="pymongo java"           narrows the SCRAM-SHA-1
#                                                     pass (default: the same
#                                                     drivers as SHA-256)
#
# The Rust driver 3.9 cannot log in to FerretDB 1.24 directly: FerretDB
# ignores saslStart's skipEmptyExchange (done: false after the server's final
# message) and that driver fails on it ("expected SCRAM authentication to have
# completed") where the others send the empty saslContinue; the proxy honours
# skipEmptyExchange. So rust's direct run (its reference transcript) goes to a
# second FerretDB without auth (MODERN_RUST_DIRECT_URI, see run.sh); its proxy
# run logs in through the proxy like every driver's.
#
# Fails -- never skips -- when FerretDB cannot start or a driver cannot run.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
. "$ROOT/tests/drivers/modern/env.sh"
BIN="${MONGOPLEX_BIN:-$ROOT/build/mongoplex}"
work="$(mktemp -d)"
cleanup() {
  "$ROOT/scripts/backend.sh" stop "$work/ferretdb" >/dev/null 2>&1 || true
  "$ROOT/scripts/backend.sh" stop "$work/ferretdb-plain" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

ADMIN_USER=mpadmin ADMIN_PW=Modern-admin-1 USER_PW=Modern-user-2
if ! uri="$(MONGOPLEX_FERRETDB_USER=$ADMIN_USER MONGOPLEX_FERRETDB_PASSWORD=$ADMIN_PW \
    "$ROOT/scripts/backend.sh" start ferretdb-auth "$work/ferretdb")"; then
  echo "FAIL drivers_modern_auth: FerretDB with auth did not start"
  exit 1
fi
hostport="${uri##*@}"; hostport="${hostport%/}"
if [ "$#" = 0 ] || [[ " $* ${MODERN_AUTH_SHA1_DRIVERS:-} " == *" rust "* ]]; then
  if ! MODERN_RUST_DIRECT_URI="$("$ROOT/scripts/backend.sh" start ferretdb "$work/ferretdb-plain")"; then
    echo "FAIL drivers_modern_auth: FerretDB without auth (rust's direct run) did not start"
    exit 1
  fi
  export MODERN_RUST_DIRECT_URI
fi
[ -x "$MODERN_PY" ] || { echo "FAIL drivers_modern_auth: no $MODERN_PY (run tests/drivers/install.sh)"; exit 1; }
"$MODERN_PY" - "$uri" "$USER_PW" <<'PY' || { echo "FAIL drivers_modern_auth: createUser"; exit 1; }
import sys, pymongo
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
c.admin.command("createUser", "modern", pwd=sys.argv[2], roles=[],
                mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-1"])
print("created user admin.modern on the backend")
PY

# Both mechanisms with every selected driver (run.sh's default: all of them);
# MODERN_AUTH_SHA1_DRIVERS, if set, narrows the SCRAM-SHA-1 pass.
rc=0
for mech in SCRAM-SHA-256 SCRAM-SHA-1; do
  drivers=("$@")
  if [ "$mech" = SCRAM-SHA-1 ] && [ -n "${MODERN_AUTH_SHA1_DRIVERS:-}" ]; then
    read -r -a drivers <<< "$MODERN_AUTH_SHA1_DRIVERS"
  fi
  echo "=== drivers_modern_auth: $mech ${drivers[*]}"
  # run.sh gets URIs with the user's credentials for both runs.
  MODERN_AUTH="modern:$USER_PW@" MODERN_MECH="$mech" MODERN_HOSTPORT="$hostport" \
  MODERN_CHECK="$ROOT/tests/drivers/modern/check_per_user.py" MODERN_CHECK_PY="$MODERN_PY" \
  "$ROOT/scripts/with-proxy.sh" "$uri" pool_size=4 auth_mode=scram \
      auth_query=on -- bash -c '
    p="${MONGOPLEX_PROXY_URI#mongodb://}"
    export MONGOPLEX_DIRECT_URI="mongodb://${MODERN_AUTH}${MODERN_HOSTPORT}/?authSource=admin&authMechanism=${MODERN_MECH}"
    export MONGOPLEX_PROXY_URI="mongodb://${MODERN_AUTH}${p%/}/?authSource=admin&authMechanism=${MODERN_MECH}"
    "$0" "$@" || exit 1
    exec "$MODERN_CHECK_PY" "$MODERN_CHECK" "$MONGOPLEX_PROXY_URI" modern' \
      "$ROOT/tests/drivers/modern/run.sh" "${drivers[@]}" || rc=1
done
exit $rc
