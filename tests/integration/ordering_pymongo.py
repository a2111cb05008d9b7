#!/usr/bin/python3
"""ordering_pymongo.py — a client's unacknowledged writes keep their order.

    python3 ordering_pymongo.py PROXY_URI DIRECT_URI DB [BULK_RUNS COUNT_RUNS]

Run by test_ordering.c (ordering::pymongo_*) with Debian's pymongo 3.11.
One MongoClient per path, maxPoolSize=1 and w=0, so every operation goes
over one connection, as a driver user would expect to be ordered:

  bulk   an unordered w:0 bulk: insert a:1 and a:2, upsert a:3, delete a:1
         (three moreToCome messages), then an acknowledged count on the same
         client: 2 documents.
  count  a w:0 insert then an acknowledged count of it: 1 document.

What a backend does with moreToCome writes is probed first on one raw
socket: FerretDB runs them ("runs"); mongo-java-server closes the connection
without running them ("drops"), so there the right outcome is 0 documents
and the count must still be answered (through the proxy; directly pymongo
gets a connection error, which is reported, not counted).

Output: one line per path and sequence, "RESULT path seq wrong=N/RUNS ...".
Exit status 0 when the proxy had no wrong outcome and no error.
"""

import socket
import struct
import sys

import bson
import pymongo
from pymongo import DeleteOne, InsertOne, UpdateOne
from pymongo.errors import PyMongoError


def probe(direct_uri, db):
    """'runs' or 'drops': what the backend does with a moreToCome insert, on
    a raw socket (pymongo 3.11 trips over FerretDB's replies to moreToCome
    messages). Without credentials only: test_ordering.c passes its own
    (logged-in) probe's answer as the 6th argument."""
    hostport = direct_uri.split("//", 1)[1].split("/", 1)[0]
    host, port = hostport.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)

    def msg(rid, flags, doc):
        body = struct.pack("<I", flags) + b"\x00" + bson.BSON.encode(doc)
        return struct.pack("<iiii", 16 + len(body), rid, 0, 2013) + body

    s.sendall(msg(1, 2, {"insert": "probe", "documents": [{"p": 1}], "$db": db}) +
              msg(2, 0, {"count": "probe", "query": {"p": 1}, "$db": db}))
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return "drops"
            data += chunk
            # replies: a stray one to the moreToCome message may come first
            while len(data) >= 16:
                ln, _, rto = struct.unpack("<iii", data[:12])
                if len(data) < ln:
                    break
                if rto == 2:
                    return "runs"
                data = data[ln:]
    except socket.timeout:
        return "drops"
    finally:
        s.close()


def run(uri, db, path, bulk_runs, count_runs, behaviour):
    client = pymongo.MongoClient(uri, maxPoolSize=1, w=0, serverSelectionTimeoutMS=10000)
    coll = client[db]["ord_" + path]
    ack = coll.with_options(write_concern=pymongo.WriteConcern(w=1))
    ack.insert_one({"create": 1})
    want_bulk = 2 if behaviour == "runs" else 0
    want_count = 1 if behaviour == "runs" else 0
    results = {}
    for seq, runs in (("bulk", bulk_runs), ("count", count_runs)):
        wrong = errors = 0
        hist = {}
        for i in range(runs):
            try:
                if seq == "bulk":
                    coll.bulk_write([InsertOne({"a": 1, "run": i}), InsertOne({"a": 2, "run": i}),
                                     UpdateOne({"a": 3, "run": i}, {"$set": {"b": 1}},
                                               upsert=True),
                                     DeleteOne({"a": 1, "run": i})], ordered=False)
                    n = coll.count_documents({"run": i})
                    want = want_bulk
                else:
                    coll.insert_one({"k": i})
                    n = coll.count_documents({"k": i})
                    want = want_count
            except PyMongoError as e:
                errors += 1
                if errors <= 3:
                    print("ERROR %s %s run %d: %r" % (path, seq, i, e), flush=True)
                continue
            hist[n] = hist.get(n, 0) + 1
            if n != want:
                wrong += 1
        print("RESULT %s %s wrong=%d/%d errors=%d counts=%s (backend %s moreToCome writes)" %
              (path, seq, wrong, runs, errors, dict(sorted(hist.items())), behaviour), flush=True)
        results[seq] = (wrong, errors)
    client.close()
    return results


def main():
    proxy_uri, direct_uri, db = sys.argv[1:4]
    bulk_runs = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    count_runs = int(sys.argv[5]) if len(sys.argv) > 5 else 300
    behaviour = sys.argv[6] if len(sys.argv) > 6 else probe(direct_uri, db)
    print("backend %s moreToCome writes (direct raw probe)" % behaviour, flush=True)
    if behaviour == "runs":
        run(direct_uri, db, "direct", bulk_runs, count_runs, behaviour)
    else:
        print("direct: skipped (each w:0 write closes the connection; pymongo reconnects "
              "slowly)", flush=True)
    proxy = run(proxy_uri, db, "proxy", bulk_runs, count_runs, behaviour)
    # Only the proxy is held to this: straight to FerretDB pymongo 3.11 trips
    # over the replies FerretDB sends to moreToCome messages (ProtocolError),
    # straight to mongo-java-server the connection closes; the raw-socket
    # tests in test_ordering.c give the direct reference.
    ok = all(w == 0 and e == 0 for w, e in proxy.values())
    print("OK" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)


main()
