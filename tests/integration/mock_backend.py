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
  a command on a collection named "h_<KEY>_<anything>"
                       held (not answered) until a {mockRelease: "<KEY>"}
                       command arrives (on another connection: the proxy's
                       own one is busy with the held request), then answered;
                       once KEY is released, later ones are answered at once.
                       So a test can keep the proxy's pool busy for exactly as
                       long as it needs, with no timing involved.
  mockRelease: KEY     releases KEY; {ok: 1, released: <held replies sent>}
  find                 {cursor: {id: 0, ns, firstBatch: [{_id: 1, coll, n}]}}
                       where n echoes filter.n (null when absent)
  insert               {n: <number of documents>}
  count                {n: 1}
  usersInfo            {ok: 0, code: 13}: the identity lacks viewUser (auth_query
                       tests); a user named "held..." is never answered
  anything else        {ok: 1}
"""

import re
import sys
import threading
import time

import mocklib

DELAYED = re.compile(r"^d(\d+)_")
HELD = re.compile(r"^h_([A-Za-z0-9]+)_")


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

    lock = threading.Lock()
    held = {}        # KEY -> [(request, reply document)] not answered yet
    released = set()  # KEYs released: answer at once

    def send(req, doc):
        try:
            req.ok(doc)
        except Exception:  # noqa: BLE001 — the proxy closed this connection
            pass

    def release(key):
        with lock:
            released.add(key)
            waiting = held.pop(key, [])
        for req, doc in waiting:
            send(req, doc)
        return len(waiting)

    def handle(req):
        name = req.command_name or ""
        if name == "mockRelease":
            return req.ok(released=release(str(req.doc.get("mockRelease"))))
        if name.lower() in ("ismaster", "hello"):
            return req.ok(mocklib.standalone_hello(wire))
        asked = req.doc.get("usersInfo") if name == "usersInfo" else None
        if isinstance(asked, dict) and str(asked.get("user", "")).startswith("held"):
            return True  # never answered: the proxy's own bound must end the wait
        if name == "usersInfo":  # as mongod answers an identity without viewUser
            # (req.fail would set QueryFailure, which is moreToCome in OP_MSG)
            return req.replies(ok=0, code=13, codeName="Unauthorized",
                               errmsg="not authorized on %s to execute command "
                               "{ usersInfo: ... }" % req.doc.get("$db"))
        coll = req.doc.get(name)
        doc = reply_doc(req, name)
        h = HELD.match(coll) if isinstance(coll, str) else None
        if h is not None:
            with lock:
                if h.group(1) not in released:
                    held.setdefault(h.group(1), []).append((req, doc))
                    return True
            return req.ok(doc)
        m = DELAYED.match(coll) if isinstance(coll, str) else None
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

    mocklib.serve_port(handle)


if __name__ == "__main__":
    main()
