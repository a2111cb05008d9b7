#!/usr/bin/python3
"""rs_mock.py — a scripted three-member replica set (Debian python3-mockupdb)
plus one spare member, for test_replset.c.

    /usr/bin/python3 rs_mock.py

Prints "ports P0 P1 P2 P3" once listening. Members 0..2 form replica set
"rs0" (member 0 primary); member 3 is not in the set until "add 3". Then
reads control lines on stdin, each answered with one line on stdout:

  elect K        member K becomes primary: new electionId, every member's
                 topologyVersion counter moves; the old primary becomes a
                 secondary (refuses writes with 10107 NotWritablePrimary)
  down K NEW     member K dies (listener and connections closed), NEW is
                 elected
  nopri          no primary (every member a secondary)
  hide K / add K member K leaves / joins the hosts list (setVersion + 1)
  refuse K on|off member K answers writes with 10107 although its hello
                 still says primary (a stale view)
  stats          "stats {json}": per-member command counts, applied writes,
                 transaction routing
  quit           exit

Serving (every member; "member" tells which one answered):
  hello/isMaster the replica-set view above; an awaitable hello
                 (maxAwaitTimeMS) is answered when the view changes or after
                 maxAwaitTimeMS
  find           {cursor: {id: 0, firstBatch: [{_id: 1, member: K}]}};
                 on collection "cur": cursor id 7000+K and a getMore that
                 answers nextBatch [{member: K}], id 0
  insert         primary only (else 10107): applies each _id into one store
                 shared by the members (a replicated collection); a retried
                 (lsid, txnNumber) gets the first result, not applied twice
  anything else  {ok: 1, member: K}
"""

import datetime
import json
import sys
import threading
import time

from bson import ObjectId
import mockupdb
from mockupdb import MockupDB

# libmongoc's monitors send awaitable hellos with exhaustAllowed (bit 16),
# which this mockupdb does not know; the mock answers them one at a time.
mockupdb._ALL_OP_MSG_FLAGS |= 1 << 16

lock = threading.Condition()
state = {
    "primary": 0,
    "hosts": [0, 1, 2],
    "set_version": 1,
    "election": 1,
    "refuse": set(),
}
counters = []          # per member: {command: count}
applied = {}           # _id -> times applied
retried = {}           # (lsid, txnNumber) -> reply document
txn_members = {}       # "lsid:txn" -> sorted list of members that saw it
servers = []
process_ids = []
tv_counter = [0]


def host(k):
    return "127.0.0.1:%d" % servers[k].port


def hello_doc(k):
    pri = state["primary"]
    in_set = k in state["hosts"]
    doc = {
        "ismaster": in_set and pri == k,
        "isWritablePrimary": in_set and pri == k,
        "secondary": in_set and pri != k,
        "setName": "rs0",
        "setVersion": state["set_version"],
        "hosts": [host(i) for i in state["hosts"]],
        "me": host(k),
        "topologyVersion": {"processId": process_ids[k], "counter": tv_counter[0]},
        "minWireVersion": 0, "maxWireVersion": 13,
        "maxBsonObjectSize": 16 * 1024 * 1024, "maxMessageSizeBytes": 48000000,
        "maxWriteBatchSize": 100000, "logicalSessionTimeoutMinutes": 30,
        "lastWrite": {"lastWriteDate": datetime.datetime.now(datetime.timezone.utc)},
        "localTime": datetime.datetime.now(datetime.timezone.utc),
    }
    if k == 3:
        doc["tags"] = {"dc": "east"}
    if not in_set:
        doc.pop("hosts")
        doc["secondary"] = False
        doc["isreplicaset"] = True
    if pri is not None and pri in state["hosts"]:
        doc["primary"] = host(pri)
    if in_set and pri == k:
        doc["electionId"] = ObjectId("7fffffff%016x" % state["election"])
    return doc


def changed():
    """Under lock: the view changed; wake awaitable hellos."""
    tv_counter[0] += 1
    lock.notify_all()


def count(k, name):
    c = counters[k]
    c[name] = c.get(name, 0) + 1


def reply_later(req, k, max_await_ms, seen_counter):
    def run():
        deadline = time.time() + max_await_ms / 1000.0
        with lock:
            while tv_counter[0] == seen_counter and time.time() < deadline:
                lock.wait(deadline - time.time())
            doc = hello_doc(k)
        try:
            req.ok(doc)
        except Exception:  # noqa: BLE001 — the monitor closed the connection
            pass
    threading.Thread(target=run, daemon=True).start()
    return True


def do_insert(req, k):
    lsid = req.doc.get("lsid")
    key = None
    if lsid is not None and "txnNumber" in req.doc and req.doc.get("autocommit") is None:
        key = (str(lsid["id"]), int(req.doc["txnNumber"]))
    with lock:
        if k != state["primary"] or k in state["refuse"]:
            err = {"ok": 0, "code": 10107, "codeName": "NotWritablePrimary",
                   "errmsg": "not primary", "member": k}
            if key is not None:  # as a 4.4+ server labels it
                err["errorLabels"] = ["RetryableWriteError"]
            return req.reply(err)
        if key is not None and key in retried:
            return req.ok(retried[key])
        docs = req.doc.get("documents") or []
        for d in docs:
            applied[str(d.get("_id"))] = applied.get(str(d.get("_id")), 0) + 1
        out = {"n": len(docs), "member": k}
        if key is not None:
            retried[key] = out
    return req.ok(out)


def note_txn(req, k):
    lsid = req.doc.get("lsid")
    if lsid is None or req.doc.get("autocommit") is not False:
        return
    key = "%s:%d" % (lsid["id"], int(req.doc.get("txnNumber", 0)))
    with lock:
        members = txn_members.setdefault(key, [])
        members.append(k)


def handler(k):
    def handle(req):
        name = req.command_name or ""
        lname = name.lower()
        with lock:
            count(k, lname)
        note_txn(req, k)
        if lname in ("ismaster", "hello"):
            with lock:
                if "maxAwaitTimeMS" in req.doc and "topologyVersion" in req.doc:
                    seen = req.doc["topologyVersion"].get("counter")
                    return reply_later(req, k, req.doc["maxAwaitTimeMS"], seen)
                return req.ok(hello_doc(k))
        if lname == "insert":
            return do_insert(req, k)
        coll = req.doc.get(name)
        if lname == "find":
            ns = "%s.%s" % (req.doc.get("$db", "test"), coll)
            cid = 7000 + k if coll == "cur" else 0
            return req.ok(cursor={"id": cid, "ns": ns,
                                  "firstBatch": [{"_id": 1, "member": k}]})
        if lname == "getmore":
            ns = "%s.%s" % (req.doc.get("$db", "test"), req.doc.get("collection"))
            return req.ok(cursor={"id": 0, "ns": ns, "nextBatch": [{"member": k}]})
        return req.ok(member=k)
    return handle


def control(line):
    words = line.split()
    if not words:
        return "ok"
    cmd = words[0]
    with lock:
        if cmd == "elect":
            state["primary"] = int(words[1])
            state["election"] += 1
        elif cmd == "down":
            # member K dies (listener and connections closed); NEW is elected
            state["primary"] = int(words[2])
            state["election"] += 1
            threading.Thread(target=servers[int(words[1])].stop, daemon=True).start()
        elif cmd == "nopri":
            state["primary"] = None
        elif cmd == "hide":
            state["hosts"].remove(int(words[1]))
            state["set_version"] += 1
        elif cmd == "add":
            state["hosts"].append(int(words[1]))
            state["set_version"] += 1
        elif cmd == "refuse":
            if words[2] == "on":
                state["refuse"].add(int(words[1]))
            else:
                state["refuse"].discard(int(words[1]))
            return "ok"
        elif cmd == "stats":
            return "stats " + json.dumps({"counters": counters, "applied": applied,
                                          "txn": txn_members})
        elif cmd == "quit":
            sys.stdout.write("ok\n")
            sys.stdout.flush()
            import os
            os._exit(0)
        else:
            return "error unknown command %s" % cmd
        changed()
    return "ok"


def main():
    for k in range(4):
        counters.append({})
        process_ids.append(ObjectId())
        s = MockupDB(request_timeout=60)
        s.autoresponds(handler(k))
        servers.append(s)
    for s in servers:
        s.run()
    sys.stdout.write("ports %s\n" % " ".join(str(s.port) for s in servers))
    sys.stdout.flush()
    for line in sys.stdin:
        sys.stdout.write(control(line) + "\n")
        sys.stdout.flush()
    import os
    os._exit(0)


if __name__ == "__main__":
    main()
