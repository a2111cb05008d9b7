#!/usr/bin/env python3
"""Smoke test + fact probe for a MongoDB-wire test backend (see scripts/backend.sh).

Usage: probe.py mongodb://127.0.0.1:PORT/
Asserts basic CRUD, `_id`/`$in` lookups, aggregate and getMore work, then prints
what the server says in hello/isMaster and which commands it supports.
Exit 0 when the basic checks pass. Needs pymongo (Debian python3-pymongo 3.11).
"""
import socket
import struct
import sys
import uuid

import bson
import pymongo
from bson.son import SON
from pymongo import monitoring

OP_MSG, MORE_TO_COME = 2013, 1 << 1


class Commands(monitoring.CommandListener):
    """Counts the commands pymongo sends (to see getMore / killCursors go out)."""
    def __init__(self):
        self.names = []
    def started(self, event):
        self.names.append(event.command_name)
    def succeeded(self, event):
        pass
    def failed(self, event):
        pass


def raw_msg(sock, doc, flags=0, request_id=1, timeout=2.0):
    """Send one OP_MSG (kind-0 body); return the reply body, or None if none arrives."""
    body = struct.pack("<IB", flags, 0) + bson.BSON.encode(doc)
    sock.sendall(struct.pack("<iiii", 16 + len(body), request_id, 0, OP_MSG) + body)
    sock.settimeout(timeout)
    try:
        header = sock.recv(16, socket.MSG_WAITALL)
    except socket.timeout:
        return None
    if len(header) < 16:
        return None
    length, _, _, opcode = struct.unpack("<iiii", header)
    rest = sock.recv(length - 16, socket.MSG_WAITALL)
    assert opcode == OP_MSG, opcode
    return bson.BSON(rest[5:]).decode()  # skip flagBits + section kind


def try_cmd(db, cmd):
    try:
        r = db.command(cmd)
        return "ok %s" % {k: v for k, v in r.items() if k not in ("ok", "cursor")}
    except pymongo.errors.OperationFailure as e:
        return "ERROR code=%s %s" % (e.code, str(e)[:100])


def main(uri):
    listener = Commands()
    client = pymongo.MongoClient(uri, event_listeners=[listener], serverSelectionTimeoutMS=5000)
    db = client.probe
    coll = db.docs
    coll.drop()

    # --- basic checks (asserted) ---------------------------------------------
    coll.insert_many([{"_id": i, "v": i * 10} for i in range(10)])
    assert coll.find_one({"_id": 3}) == {"_id": 3, "v": 30}
    got = sorted(d["_id"] for d in coll.find({"_id": {"$in": [1, 4, 7, 42]}}))
    assert got == [1, 4, 7], got
    # one accumulator only: FerretDB 1.24.2 gets a $group with two $sum fields wrong
    agg = list(coll.aggregate([{"$match": {"v": {"$gte": 50}}},
                               {"$group": {"_id": None, "s": {"$sum": "$v"}}}]))
    assert agg == [{"_id": None, "s": 350}], agg
    before = listener.names.count("getMore")
    assert len(list(coll.find().sort("_id", 1).batch_size(3))) == 10
    assert listener.names.count("getMore") - before >= 3, listener.names
    print("basic: insert, find _id, find $in, aggregate, getMore(batch 3): OK")

    # --- facts (printed) ------------------------------------------------------
    for name in ("hello", "isMaster"):
        try:
            r = client.admin.command(name)
            print("%-8s maxWireVersion=%s minWireVersion=%s maxBsonObjectSize=%s "
                  "maxMessageSizeBytes=%s maxWriteBatchSize=%s logicalSessionTimeoutMinutes=%s" % (
                      name, r.get("maxWireVersion"), r.get("minWireVersion"),
                      r.get("maxBsonObjectSize"), r.get("maxMessageSizeBytes"),
                      r.get("maxWriteBatchSize"), r.get("logicalSessionTimeoutMinutes")))
            print("%-8s keys: %s" % (name, sorted(r)))
        except pymongo.errors.OperationFailure as e:
            print("%-8s ERROR %s" % (name, e))
    print("buildInfo version:", client.server_info().get("version"))

    # hello over OP_MSG as the very first message of a fresh connection
    host, port = client.address
    with socket.create_connection((host, port)) as s:
        meta = {"driver": {"name": "probe", "version": "1"}}
        hello = SON([("hello", 1), ("client", meta), ("$db", "admin")])
        r = raw_msg(s, hello)
        print("raw OP_MSG hello (with client metadata) as first message:",
              "ok" if r and r.get("ok") == 1 else r)
        # a second hello carrying client metadata on the same connection
        # (real mongod: code 186 ClientMetadataCannotBeMutated)
        r = raw_msg(s, hello, request_id=2)
        print("second hello with client metadata:", "ok" if r and r.get("ok") == 1 else r)
        # moreToCome: the server must not reply (w:0 insert)
        r = raw_msg(s, SON([("insert", "docs"), ("documents", [{"_id": 100}]),
                            ("writeConcern", {"w": 0}), ("$db", "probe")]),
                    flags=MORE_TO_COME, request_id=3, timeout=1.0)
        print("moreToCome insert w:0 -> reply:", "none (correct)" if r is None else r)

    # does a cursor outlive the connection that opened it?
    with socket.create_connection((host, port)) as s:
        r = raw_msg(s, SON([("find", "docs"), ("batchSize", 2), ("$db", "probe")]))
        orphan = r["cursor"]["id"]
    print("getMore on a cursor whose connection closed:",
          try_cmd(db, SON([("getMore", orphan), ("collection", "docs"), ("batchSize", 2)])))
    print("count:", try_cmd(db, SON([("count", "docs"), ("query", {})])))
    print("listCollections:", try_cmd(db, SON([("listCollections", 1)])))
    cur = db.command(SON([("find", "docs"), ("batchSize", 2)]))["cursor"]
    print("getMore (raw):", try_cmd(db, SON([("getMore", cur["id"]), ("collection", "docs"),
                                             ("batchSize", 2)])))
    # (mongo-java-server 1.47 fails a getMore without batchSize: "Illegal number to return: 0")
    print("getMore without batchSize:", try_cmd(db, SON([("getMore", cur["id"]), ("collection", "docs")])))
    print("killCursors:", try_cmd(db, SON([("killCursors", "docs"), ("cursors", [cur["id"]])])))
    print("endSessions:", try_cmd(client.admin, SON([("endSessions",
                                                       [{"id": bson.Binary(uuid.uuid4().bytes, 4)}])])))
    # cursor.close() from pymongo (killCursors command on wire >= 4)
    c = coll.find().batch_size(2)
    next(c)
    c.close()
    print("pymongo cursor.close sent:", [n for n in listener.names if n == "killCursors"][-1:])
    coll.drop()
    client.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/")
