#!/usr/bin/env bash
# srv_netns.sh — mongodb+srv:// against a real DNS server, for test_srv.c.
#
#   tests/integration/srv_netns.sh MONGOPLEX_BIN
#
# Makes a network namespace (root needed) whose /etc/netns/<ns>/resolv.conf
# points at a dnsmasq (Debian dnsmasq-base) started inside it, serving:
#   _mongodb._tcp.rs.mongoplex.test     SRV m0 and m1 only (m2 is found from
#                                       the members' hello "hosts")
#   rs.mongoplex.test                   TXT "replicaSet=rs0&authSource=authdb"
#   other.mongoplex.test                SRV m0..m2, TXT "replicaSet=rsX"
#   nosrv.mongoplex.test                no SRV record (NXDOMAIN)
#   _mongodb._tcp.sh.mongoplex.test     SRV m0, m1 of three mockupdb mongoses
#                                       (a sharded cluster: the SRV list is
#                                       the mongos list), TXT authSource
#   m0..m2.rs.mongoplex.test            A 127.0.0.1
# then srv_mock.py (three mockupdb members of rs0 requiring SCRAM on db
# "authdb") and three proxies inside the namespace, and drives them with
# srv_client.py (pymongo + raw OP_MSG). Prints the client's "OK" lines and
# "SRV-TEST PASSED"; any failure, including a namespace that cannot be
# made, exits non-zero with the reason. The namespace, /etc/netns/<ns> and
# every process started here are removed on exit (trap).
set -euo pipefail

BIN="${1:?usage: srv_netns.sh MONGOPLEX_BIN}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PY=/usr/bin/python3
NS="mpsrv$$"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mongoplex-srv-XXXXXX")"
PIDS=()

die() { echo "SRV-TEST FAILED: $*"; exit 1; }

cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.2
  for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  ip netns delete "$NS" 2>/dev/null || true
  rm -rf "/etc/netns/$NS" "$WORK"
}
trap cleanup EXIT

[[ $(id -u) -eq 0 ]] || die "needs root to create a network namespace (uid $(id -u))"
command -v ip >/dev/null || die "ip (iproute2) is not installed"
DNSMASQ="$(command -v dnsmasq || true)"
[[ -n "$DNSMASQ" ]] || die "dnsmasq is not installed (Debian dnsmasq-base; scripts/install-deps.sh)"
[[ -x "$BIN" ]] || die "no proxy binary $BIN"
out="$(ip netns add "$NS" 2>&1)" || die "ip netns add $NS failed: $out"
mkdir -p "/etc/netns/$NS"
echo "nameserver 127.0.0.1" >"/etc/netns/$NS/resolv.conf"
ip netns exec "$NS" ip link set lo up || die "cannot bring lo up in $NS"
# getaddrinfo's AI_ADDRCONFIG (the listener) wants a non-loopback IPv4
# address: a veth pair inside the namespace carries one (TEST-NET 198.18/15).
ip netns exec "$NS" sh -c 'ip link add mpsa type veth peer name mpsb &&
  ip addr add 198.18.9.1/30 dev mpsa && ip link set mpsa up && ip link set mpsb up' ||
  die "cannot make a veth pair in $NS"
in_ns() { ip netns exec "$NS" "$@"; }

# A srv_mock.py inside the namespace, its stdin a FIFO this script holds open
# (fd $4: it exits at EOF); waits for its "ready".
start_mock() { # name domain baseport fd [--mongos]
  mkfifo "$WORK/$1.in"
  ip netns exec "$NS" "$PY" "$HERE/srv_mock.py" "$2" "$3" mpuser mppass authdb "${@:5}" \
    <"$WORK/$1.in" >"$WORK/$1.out" 2>"$WORK/$1.err" &
  PIDS+=($!)
  eval "exec $4>\"\$WORK/$1.in\""
  for _ in $(seq 200); do
    grep -q '^ready' "$WORK/$1.out" 2>/dev/null && return 0
    sleep 0.1
  done
  die "srv_mock.py $1 did not start: $(tail -c 500 "$WORK/$1.err")"
}
# Replica set members 127.0.0.1:27017..27019; mongoses 27020..27022.
start_mock rs rs.mongoplex.test 27017 7
start_mock mongos sh.mongoplex.test 27020 8 --mongos

D=rs.mongoplex.test
args=(--no-daemon --port=53 --listen-address=127.0.0.1 --bind-interfaces --no-resolv
  --no-hosts --conf-file=/dev/null --user=root --local=/mongoplex.test/
  --log-queries --log-facility="$WORK/dns.log"
  "--srv-host=_mongodb._tcp.$D,m0.$D,27017" "--srv-host=_mongodb._tcp.$D,m1.$D,27018"
  "--txt-record=$D,replicaSet=rs0&authSource=authdb"
  "--srv-host=_mongodb._tcp.other.mongoplex.test,m0.$D,27017"
  "--srv-host=_mongodb._tcp.other.mongoplex.test,m1.$D,27018"
  "--txt-record=other.mongoplex.test,replicaSet=rsX&authSource=authdb")
S=sh.mongoplex.test
args+=("--srv-host=_mongodb._tcp.$S,m0.$S,27020" "--srv-host=_mongodb._tcp.$S,m1.$S,27021"
  "--txt-record=$S,authSource=authdb")
for k in 0 1 2; do args+=("--host-record=m$k.$D,127.0.0.1" "--host-record=m$k.$S,127.0.0.1"); done
in_ns "$DNSMASQ" "${args[@]}" >"$WORK/dnsmasq.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do
  in_ns "$PY" -c "import socket; socket.getaddrinfo('m0.$D', 1)" 2>/dev/null && break
  sleep 0.1
done
in_ns "$PY" -c "import socket; socket.getaddrinfo('m0.$D', 1)" 2>/dev/null ||
  die "dnsmasq does not answer in $NS: $(tail -c 500 "$WORK/dnsmasq.out")"

start_proxy() { # name port uri
  cat >"$WORK/$1.ini" <<EOF
[mongoplex]
listen_addr = 127.0.0.1
listen_port = $2
backend_uri = $3
log_level = info
pool_size = 4
metrics_listen = 127.0.0.1:$(($2 + 100))
EOF
  ip netns exec "$NS" "$BIN" -c "$WORK/$1.ini" >"$WORK/$1.log" 2>&1 &
  PIDS+=($!)
  PROXIES+=("$1:$!")
}
PROXIES=()
O="tls=false&heartbeatFrequencyMS=500"
start_proxy good 27100 "mongodb+srv://mpuser:mppass@$D/?$O&serverSelectionTimeoutMS=10000"
start_proxy nosrv 27101 "mongodb+srv://nosrv.mongoplex.test/?$O&serverSelectionTimeoutMS=2000"
start_proxy wrongset 27102 "mongodb+srv://mpuser:mppass@other.mongoplex.test/?$O&serverSelectionTimeoutMS=2000"
start_proxy mongos 27103 "mongodb+srv://mpuser:mppass@$S/?$O&serverSelectionTimeoutMS=10000"
# --test-config accepts the URI without looking the name up, and says so.
out="$("$BIN" --test-config -c "$WORK/nosrv.ini" 2>&1)" ||
  die "--test-config refused a mongodb+srv:// backend_uri: $out"
[[ "$out" == *"SRV and TXT records are not looked up here"* ]] ||
  die "--test-config does not say that DNS is not checked: $out"
echo "OK --test-config: $(echo "$out" | head -n 1)"
for p in 27100 27101 27102 27103; do
  for _ in $(seq 100); do
    in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null && break
    sleep 0.1
  done
done

show_logs() { for f in good nosrv wrongset mongos; do echo "--- $f.log"; tail -n 30 "$WORK/$f.log"; done; }
run_client() {
  in_ns timeout 60 "$PY" "$HERE/srv_client.py" "$1" "$2" || { show_logs; die "srv_client.py $1"; }
}
run_client good 27100
run_client nosrv 27101
run_client wrongset 27102
run_client mongos 27103

seeds="$(grep -o 'rs.mongoplex.test resolved: seed list [^;]*' "$WORK/good.log" || true)"
[[ "$seeds" == *m0.$D:27017* && "$seeds" == *m1.$D:27018* && "$seeds" != *m2.* ]] ||
  { show_logs; die "good proxy did not log the SRV seed list m0, m1: '$seeds'"; }
echo "OK $seeds"
grep -q 'DNS lookup failed' "$WORK/nosrv.log" || { show_logs; die "nosrv proxy logged no clear DNS error"; }
grep -q 'belongs to replica set "rs0", not "rsX"' "$WORK/wrongset.log" ||
  { show_logs; die "wrongset proxy did not refuse the members of another set"; }
echo "OK logs: $(grep -h -o 'DNS lookup failed: .*' "$WORK/nosrv.log" | head -n 1)"
# Stop each proxy (SIGTERM): it exits 0 and its log has no sanitizer report.
for np in "${PROXIES[@]}"; do
  kill -TERM "${np#*:}" 2>/dev/null || true
done
for np in "${PROXIES[@]}"; do
  st=0
  wait "${np#*:}" || st=$?
  [[ $st -eq 0 ]] || { show_logs; die "proxy ${np%%:*} exited with status $st on SIGTERM"; }
  ! grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$WORK/${np%%:*}.log" ||
    { grep -E -A12 'AddressSanitizer|LeakSanitizer|runtime error' "$WORK/${np%%:*}.log" | head -40;
      die "sanitizer report in ${np%%:*}.log"; }
done
echo "OK four proxies stopped cleanly (exit 0, no sanitizer report)"
echo "SRV-TEST PASSED"
