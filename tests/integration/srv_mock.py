#!/usr/bin/python3
"""srv_mock.py — three mockupdb members of replica set "rs0" that require
SCRAM-SHA-256 on one database, for srv_netns.sh (the mongodb+srv:// test).

    /usr/bin/python3 srv_mock.py DOMAIN BASEPORT USER PASSWORD AUTHDB [--mongos]

Member K (0..2) listens on 127.0.0.1:BASEPORT+K and calls itself
mK.DOMAIN:BASEPORT+K in its hello ("me", "hosts"); member 0 is the primary.
With --mongos the three are mongoses instead (hello msg: "isdbgrid").
Prints "ready" once listening; serves until stdin reaches EOF.

  hello/isMaster  the replica-set view; saslSupportedMechs: [SCRAM-SHA-256]
                  (speculativeAuthenticate is ignored)
  saslStart       only on database AUTHDB with user USER (else 18); every
                  saslStart's $db is recorded
  saslContinue    verifies the client proof, replies the server signature
  anything else   13 Unauthorized before login; then:
    find            {cursor: {id: 0, firstBatch: [{_id: 1, member: K}]}}
    srvMockStats    {authDbs: [every saslStart $db], logins: [per member]}
    others          {ok: 1, member: K}
Authentication state is per backend connection (mockupdb client port). The
server-side SCRAM is mocklib.Scram256 (test scaffolding), as in scram_server.py.
"""

import datetime
import sys
import threading

import mockupdb
from mockupdb import MockupDB

import mocklib

# libmongoc's monitors set exhaustAllowed (bit 16), unknown to this mockupdb.
mockupdb._ALL_OP_MSG_FLAGS |= 1 << 16

lock = threading.Lock()
auth_dbs = []
logins = [0, 0, 0]


def main():
    domain, base = sys.argv[1], int(sys.argv[2])
    user, password, authdb = sys.argv[3], sys.argv[4], sys.argv[5]
    scram = mocklib.Scram256(password)
    authed = set()
    hosts = ["m%d.%s:%d" % (k, domain, base + k) for k in range(3)]
    mongos = "--mongos" in sys.argv[6:]

    def hello_doc(k):
        now = datetime.datetime.now(datetime.timezone.utc)
        if mongos:
            return {"ismaster": True, "isWritablePrimary": True, "msg": "isdbgrid",
                    "minWireVersion": 0, "maxWireVersion": 13,
                    "maxBsonObjectSize": 16 * 1024 * 1024, "maxMessageSizeBytes": 48000000,
                    "maxWriteBatchSize": 100000, "logicalSessionTimeoutMinutes": 30,
                    "localTime": now, "saslSupportedMechs": ["SCRAM-SHA-256"]}
        return {"ismaster": k == 0, "isWritablePrimary": k == 0, "secondary": k != 0,
                "setName": "rs0", "setVersion": 1, "hosts": hosts, "me": hosts[k],
                "primary": hosts[0], "minWireVersion": 0, "maxWireVersion": 13,
                "maxBsonObjectSize": 16 * 1024 * 1024, "maxMessageSizeBytes": 48000000,
                "maxWriteBatchSize": 100000, "logicalSessionTimeoutMinutes": 30,
                "lastWrite": {"lastWriteDate": now}, "localTime": now,
                "saslSupportedMechs": ["SCRAM-SHA-256"]}

    def start(doc, port):
        with lock:
            auth_dbs.append(doc.get("$db"))
        n = mocklib.scram_user(doc)
        if doc.get("$db") != authdb or n != user:
            return mocklib.auth_failed("Authentication failed (user %s on %s)" %
                                       (n, doc.get("$db")))
        return dict({"ok": 1}, **scram.start(doc))

    def cont(doc, port, k):
        r, proof_ok = scram.finish(doc)
        if not proof_ok:
            return r
        with lock:
            authed.add((k, port))
            logins[k] += 1
        return dict({"ok": 1}, **r)

    def handler(k):
        def handle(req):
            name = (req.command_name or "").lower()
            port = req.client_port
            if name in ("ismaster", "hello"):
                return req.ok(hello_doc(k))
            if name == "saslstart":
                return req.reply(start(req.doc, port))
            if name == "saslcontinue":
                return req.reply(cont(req.doc, port, k))
            if (k, port) not in authed:
                return req.reply({"ok": 0, "code": 13, "codeName": "Unauthorized",
                                  "errmsg": "command %s requires authentication" % name})
            if name == "find":
                ns = "%s.%s" % (req.doc.get("$db", "test"), req.doc.get("find"))
                return req.ok(cursor={"id": 0, "ns": ns,
                                      "firstBatch": [{"_id": 1, "member": k}]})
            if name == "srvmockstats":
                with lock:
                    return req.ok(authDbs=list(auth_dbs), logins=list(logins))
            return req.ok(member=k)
        return handle

    servers = []
    for k in range(3):
        s = MockupDB(port=base + k, request_timeout=60)
        s.autoresponds(handler(k))
        s.run()
        servers.append(s)
    mocklib.serve_until_stdin_eof("ready")


if __name__ == "__main__":
    main()
