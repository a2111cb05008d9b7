#!/usr/bin/python3
"""mock_backend.py — a scripted MongoDB-wire backend (Debian python3-mockupdb)
for the admission tests (test_admission.c, retry_pymongo.py).

    /usr/bin/python3 mock_backend.py [--wire N]

Prints "port N" on stdout once listening, then serves until SIGTERM/SIGINT
or until stdin reaches EOF (so it dies with the test that started it).

Behaviour:
  hello / isMaster     a standalone primary, maxWireVersion N (default 9: the
                       highest the Debian pymongo 3.11 accepts and the lowest
                       pymongo 4.x accepts), 16 MB / 48 MB / 100000 limits,
                       logicalSessionTimeoutMinutes 30
  a command on a collection named "d<MS>_<anything>"
                       answered after MS milliseconds (from a thread: mockupdb
                       runs one handler at a time); if the proxy has closed
                       the connection by then (query_timeout_ms), the late
                       reply is dropped
  find                 {cursor: {id: 0, ns, firstBatch: [{_id: 1, coll, n}]}}
                       where n echoes filter.n (null when absent)
  insert               {n: <number of documents>}
  count                {n: 1}
  anything else        {ok: 1}
"""

import os
import re
import signal
import sys
import threading
import time

from mockupdb import MockupDB

DELAYED = re.compile(r"^d(\d+)_")


def main():
    wire = 9
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--wire":
        wire = int(args[1])
    elif args:
        sys.exit("usage: mock_backend.py [--wire N]")

    def reply_doc(req, name):
        coll = req.doc.get(req.command_name)
        if name == "find":
            n = (req.doc.get("filter") or {}).get("n")
            ns = "%s.%s" % (req.doc.get("$db", "test"), coll)
            return {"cursor": {"id": 0, "ns": ns,
                               "firstBatch": [{"_id": 1, "coll": coll, "n": n}]}}
        if name == "insert":
            return {"n": len(req.docs or req.doc.get("documents") or [])}
        if name == "count":
            return {"n": 1}
        return {}

    def handle(req):
        name = req.command_name or ""
        if name.lower() in ("ismaster", "hello"):
            return req.ok(ismaster=True, isWritablePrimary=True, minWireVersion=0,
                          maxWireVersion=wire, maxBsonObjectSize=16 * 1024 * 1024,
                          maxMessageSizeBytes=48000000, maxWriteBatchSize=100000,
                          logicalSessionTimeoutMinutes=30)
        coll = req.doc.get(name)
        m = DELAYED.match(coll) if isinstance(coll, str) else None
        doc = reply_doc(req, name)
        if m is None:
            return req.ok(doc)

        def later():
            time.sleep(int(m.group(1)) / 1000.0)
            try:
                req.ok(doc)
            except Exception:  # noqa: BLE001 — the proxy closed this connection
                pass

        threading.Thread(target=later, daemon=True).start()
        return True

    server = MockupDB(request_timeout=60)
    server.autoresponds(handle)
    port = server.run()
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    signal.signal(signal.SIGINT, lambda *a: os._exit(0))
    sys.stdout.write("port %d\n" % port)
    sys.stdout.flush()
    try:
        sys.stdin.read()
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
