#!/usr/bin/python3
"""srv_client.py — the client side of srv_netns.sh, run inside its network
namespace with pymongo (Debian python3-pymongo 3.11) and raw OP_MSG.

    /usr/bin/python3 srv_client.py good PORT       proxy of mongodb+srv://rs...
    /usr/bin/python3 srv_client.py nosrv PORT      proxy of a name without SRV
    /usr/bin/python3 srv_client.py wrongset PORT   TXT says replicaSet=rsX
    /usr/bin/python3 srv_client.py mongos PORT     SRV lists two of three mongoses

Prints "OK ..." lines; exits 1 with "FAIL: reason" on the first failure.
"""

import socket
import struct
import sys
import time

import urllib.request

import bson
from pymongo import MongoClient
from pymongo.errors import ServerSelectionTimeoutError


def fail(msg):
    print("FAIL: %s" % msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def raw_command(port, doc, timeout_s=30):
    """One OP_MSG on a fresh socket, no hello first; the reply document."""
    body = b"\x00\x00\x00\x00" + b"\x00" + bson.BSON.encode(doc)
    msg = struct.pack("<iiii", 16 + len(body), 1, 0, 2013) + body
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
    s.sendall(msg)
    head = b""
    while len(head) < 16:
        chunk = s.recv(16 - len(head))
        check(chunk, "proxy closed the connection without a reply")
        head += chunk
    length = struct.unpack("<i", head[:4])[0]
    rest = b""
    while len(rest) < length - 16:
        chunk = s.recv(length - 16 - len(rest))
        check(chunk, "short reply")
        rest += chunk
    s.close()
    return bson.BSON(rest[5:]).decode()


def good(port):
    c = MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000)
    db = c.test
    check(db.command("ping")["ok"] == 1, "ping")
    doc = db.srvq.find_one({"_id": 1})
    check(doc is not None and doc.get("member") == 0, "primary find: %r" % doc)
    print("OK find through mongodb+srv:// went to the primary m0")
    # m2 is not in the SRV records: the proxy learns it from the members' hosts.
    deadline = time.time() + 20
    while True:
        stats = db.command("mongoplexStats")
        members = {p["host"]: p.get("memberType") for p in stats["pools"] if p.get("member")}
        if len(members) == 3 and sorted(members.values()).count("RSSecondary") == 2:
            break
        check(time.time() < deadline, "members seen: %r" % members)
        time.sleep(0.2)
    print("OK members %s" % ", ".join("%s=%s" % kv for kv in sorted(members.items())))
    seen = set()
    for _ in range(40):
        d = db.get_collection("srvq", read_preference=__import__(
            "pymongo").ReadPreference.SECONDARY).find_one({"_id": 1})
        seen.add(d["member"])
    check(seen <= {1, 2} and seen, "secondary reads landed on %r" % seen)
    print("OK secondary reads landed on members %s" % sorted(seen))
    metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % (port + 100),
                                     timeout=10).read().decode()
    for k, t in ((0, "RSPrimary"), (1, "RSSecondary"), (2, "RSSecondary")):
        m = "m%d.rs.mongoplex.test:%d" % (k, 27017 + k)
        line = 'mongoplex_member_info{member="%s",type="%s"} 1' % (m, t)
        check(line in metrics.splitlines(), "/metrics lacks %s" % line)
        for fam in ("member_rtt_seconds", "member_pool_size", "member_in_use",
                    "member_queued"):
            check(('mongoplex_%s{member="%s"} ' % (fam, m)) in metrics,
                  "/metrics lacks mongoplex_%s for %s" % (fam, m))
    check("mongodb+srv" not in metrics, "/metrics shows the SRV placeholder as a member")
    print("OK /metrics: " + "; ".join(
        ln for ln in metrics.splitlines()
        if ln.startswith(("mongoplex_member_info", "mongoplex_member_rtt"))))
    st = db.command("srvMockStats")
    check(st["authDbs"] and set(st["authDbs"]) == {"authdb"},
          "saslStart databases %r (TXT authSource=authdb not applied)" % st["authDbs"])
    print("OK every backend login used authSource authdb (from TXT): %d logins, per member %r"
          % (len(st["authDbs"]), st["logins"]))


def expect_133(port, what):
    t0 = time.time()
    r = raw_command(port, {"find": "srvq", "filter": {}, "$db": "test"})
    ms = (time.time() - t0) * 1000
    check(r.get("ok") == 0 and r.get("code") == 133,
          "%s: raw find should fail with 133, got %r" % (what, r))
    print("OK %s: raw find failed with 133 after %.0f ms: %s" % (what, ms, r.get("errmsg")))
    return r


def nosrv(port):
    r = expect_133(port, "no SRV record")
    check("DNS lookup" in r["errmsg"] or "SRV" in r["errmsg"],
          "errmsg does not name the lookup: %r" % r["errmsg"])
    c = MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=3000)
    try:
        c.test.command("ping")
        fail("ping through a proxy whose SRV name does not resolve succeeded")
    except ServerSelectionTimeoutError as e:
        check("SRV" in str(e), "pymongo's error does not carry the proxy's reason: %s" % e)
        print("OK pymongo: %s" % str(e)[:300])


def wrongset(port):
    expect_133(port, "TXT replicaSet=rsX, members of rs0")


def mongos(port):
    c = MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000)
    seen = set()
    for _ in range(20):
        d = c.test.srvq.find_one({"_id": 1})
        check(d is not None, "find through the mongos SRV name")
        seen.add(d["member"])
    check(seen <= {0, 1}, "a mongos not in the SRV records served: %r" % seen)
    metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % (port + 100),
                                     timeout=10).read().decode()
    lines = [ln for ln in metrics.splitlines() if ln.startswith("mongoplex_member_info")]
    want = ['mongoplex_member_info{member="m%d.sh.mongoplex.test:%d",type="Mongos"} 1'
            % (k, 27020 + k) for k in (0, 1)]
    check(sorted(lines) == sorted(want), "mongos members %r" % lines)
    print("OK mongos: finds served by mongoses %s; members %s" % (sorted(seen), lines))


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    {"good": good, "nosrv": nosrv, "wrongset": wrongset, "mongos": mongos}[mode](port)


if __name__ == "__main__":
    main()
