"""The load of test_lb_tier.c's drain tests: pymongo 4, 20 threads.

Usage: lbtier_pymongo.py URI DB OUT

Each thread loops: two finds of its last acknowledged document (it must come
back, with its t and i), then one insert {_id: "T-I", t: T, i: I}
(acknowledged, w: 1). The driver's own retries are allowed (retryReads,
retryWrites: the defaults); an exception is a failed operation. Prints
"running" once every thread has had an insert acknowledged, runs until its
stdin is closed, then writes {"ok", "failed", "errors", "acked": [per
thread]} as JSON to OUT and exits 0.
"""

import json
import sys
import threading

import pymongo

THREADS = 20


def main():
    uri, db, out = sys.argv[1:4]
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=30000, socketTimeoutMS=60000,
                                 connectTimeoutMS=10000, maxPoolSize=THREADS + 5,
                                 appname="mongoplex-lbtier-py")
    coll = client[db]["tier"]
    stop = threading.Event()
    lock = threading.Lock()
    res = {"ok": 0, "failed": 0, "errors": [], "acked": [0] * THREADS}
    started = threading.Barrier(THREADS + 1)

    def fail(what, e):
        with lock:
            res["failed"] += 1
            if len(res["errors"]) < 5:
                res["errors"].append("%s: %s: %s" % (what, type(e).__name__, e))

    def run(t):
        i, last, first = 0, 0, True
        while not stop.is_set():
            i += 1
            if i % 3 != 0:
                if last == 0:
                    continue
                try:
                    doc = coll.find_one({"_id": "%d-%d" % (t, last)})
                    if doc is None or doc["t"] != t or doc["i"] != last:
                        raise AssertionError("acknowledged document %d-%d not read back: %r"
                                             % (t, last, doc))
                    with lock:
                        res["ok"] += 1
                except Exception as e:  # noqa: BLE001 - every failure counts
                    fail("find", e)
                continue
            try:
                coll.insert_one({"_id": "%d-%d" % (t, i), "t": t, "i": i})
                with lock:
                    res["ok"] += 1
                    res["acked"][t] += 1
                last = i
            except Exception as e:  # noqa: BLE001
                fail("insert", e)
            if first:
                first = False
                started.wait()

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(THREADS)]
    for t in threads:
        t.start()
    started.wait()
    print("running", flush=True)
    sys.stdin.read()
    stop.set()
    for t in threads:
        t.join(120)
    if any(t.is_alive() for t in threads):
        res["errors"].append("load threads did not stop within 120 s")
        res["failed"] += 1
    client.close()
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
