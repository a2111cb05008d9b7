#!/usr/bin/env python3
# The modern-driver workload (see README.md in this folder) with PyMongo 4.x.
#
#   workload_pymongo.py URI LABEL OUTFILE
#
# Runs every step against the database in URI (default mongoplex_modern),
# collection "modern" (LABEL names the client: appname), and writes the transcript (results and errors
# of every step, documents as canonical Extended JSON, command counts from
# command monitoring) to OUTFILE as JSON. Exit 0 when the workload ran to the
# end (the transcript may still contain errors), 2 on setup failure.
import json
import sys
import threading
from collections import Counter

import pymongo
from bson import json_util
from bson.json_util import CANONICAL_JSON_OPTIONS
from pymongo import monitoring
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, PyMongoError

N = 300
WORKERS = 8


class Counts(monitoring.CommandListener):
    """Counts started commands by name (all threads). The login's SASL
    commands are not the workload: a backend without speculative
    authentication (FerretDB) needs a saslStart that a proxy with it does not."""

    def __init__(self):
        self.counts = Counter()
        self.lock = threading.Lock()

    def started(self, event):
        if event.command_name in ("saslStart", "saslContinue"):
            return
        with self.lock:
            self.counts[event.command_name] += 1

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def ej(doc):
    """A document as canonical Extended JSON (a JSON value)."""
    if doc is None:
        return None
    return json.loads(json_util.dumps(doc, json_options=CANONICAL_JSON_OPTIONS))


def make_doc(i):
    return {"_id": i, "k": i % 10, "s": "s%03d" % i, "v": i + 0.5,
            "tags": [i % 3, i % 5], "sub": {"a": i, "b": "x%d" % (i % 7)}}


def single_ids(w):
    return [(w * 37 + j * 11) % 320 for j in range(20)]


def in_ids(w, q):
    return [(w * 13 + j * 7 + q) % 320 for j in range(10)]


def write_error(e):
    return {"index": e.get("index"), "code": e.get("code"), "errmsg": e.get("errmsg")}


def bulk_result(res):
    """Counts and writeErrors of a bulk result (a BulkWriteResult or an error's details)."""
    return {"nInserted": res["nInserted"], "nMatched": res["nMatched"],
            "nModified": res["nModified"], "nDeleted": res["nRemoved"],
            "nUpserted": res["nUpserted"],
            "writeErrors": [write_error(e) for e in res.get("writeErrors", [])]}


def run(db, coll, steps):
    def step(name, fn):
        try:
            steps.append({"op": name, "result": fn()})
        except PyMongoError as e:
            steps.append({"op": name, "error": {"code": getattr(e, "code", None),
                                                "codeName": (getattr(e, "details", None) or {}).get("codeName"),
                                                "errmsg": str(e)}})

    step("insert_many", lambda: {"inserted": len(coll.insert_many([make_doc(i) for i in range(N)]).inserted_ids)})

    def lookups():
        out = [None] * WORKERS

        def worker(w):
            single = [ej(coll.find_one({"_id": i})) for i in single_ids(w)]
            ins = [sorted((ej(d) for d in coll.find({"_id": {"$in": in_ids(w, q)}})),
                          key=lambda d: int(d["_id"]["$numberInt"])) for q in range(5)]
            out[w] = {"single": single, "in": ins}

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if any(o is None for o in out):
            raise RuntimeError("a lookup worker failed")
        return out

    step("lookups", lookups)
    step("cursor", lambda: [ej(d) for d in coll.find({"k": {"$gte": 0}}).sort("_id", 1).batch_size(7)])

    def upd(r):
        return {"matched": r.matched_count, "modified": r.modified_count, "upserted_id": r.upserted_id}

    step("update_one", lambda: upd(coll.update_one({"_id": 5}, {"$set": {"s": "upd"}})))
    step("update_many", lambda: upd(coll.update_many({"k": 3}, {"$inc": {"v": 100}})))
    step("upsert", lambda: upd(coll.update_one({"_id": 1000}, {"$set": {"k": 99}}, upsert=True)))
    step("delete_one", lambda: {"deleted": coll.delete_one({"_id": 7}).deleted_count})
    step("delete_many", lambda: {"deleted": coll.delete_many({"k": 9}).deleted_count})
    step("aggregate", lambda: [ej(d) for d in coll.aggregate([
        {"$match": {"k": {"$lt": 5}}}, {"$group": {"_id": "$k", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}])])
    step("aggregate_batches", lambda: [ej(d) for d in coll.aggregate([
        {"$match": {"k": {"$in": [1, 2]}}}, {"$sort": {"_id": 1}}, {"$project": {"_id": 1, "s": 1}}],
        batchSize=5)])
    step("count", lambda: {"all": coll.count_documents({}), "k3": coll.count_documents({"k": 3}),
                           "estimated": coll.estimated_document_count()})

    def index_list():
        return sorted(({"name": i["name"], "key": ej(i["key"])} for i in coll.list_indexes()),
                      key=lambda i: i["name"])

    step("create_index", lambda: {"name": coll.create_index([("k", 1), ("s", -1)])})
    step("list_indexes", index_list)
    step("drop_index", lambda: coll.drop_index("k_1_s_-1"))
    step("list_indexes_after_drop", index_list)

    def dup():
        try:
            coll.insert_one({"_id": 1, "k": 1})
        except DuplicateKeyError as e:
            return {"code": e.code, "codeName": (e.details or {}).get("codeName"),
                    "errmsg": (e.details or {}).get("errmsg")}
        raise RuntimeError("no duplicate-key error")

    step("duplicate_key", dup)

    def command_error():
        try:
            coll.find_one({"$bogus": 1})
        except OperationFailure as e:
            return {"code": e.code, "codeName": e.details.get("codeName"), "errmsg": e.details.get("errmsg")}
        raise RuntimeError("no error for an unknown operator")

    step("command_error", command_error)

    def bulk(ordered, ops):
        try:
            return bulk_result(coll.bulk_write(ops, ordered=ordered).bulk_api_result)
        except BulkWriteError as e:
            return bulk_result(e.details)

    step("bulk_ok", lambda: bulk(True, [
        pymongo.InsertOne({"_id": 4000, "k": 40}), pymongo.UpdateOne({"_id": 4000}, {"$set": {"k": 41}}),
        pymongo.ReplaceOne({"_id": 10}, {"k": 10, "s": "replaced"}), pymongo.DeleteOne({"_id": 11}),
        pymongo.UpdateOne({"_id": 4001}, {"$set": {"k": 42}}, upsert=True)]))
    step("bulk_ordered_error", lambda: bulk(True, [
        pymongo.InsertOne({"_id": 2000}), pymongo.InsertOne({"_id": 2001}), pymongo.InsertOne({"_id": 1}),
        pymongo.InsertOne({"_id": 2002})]))
    step("bulk_unordered_error", lambda: bulk(False, [
        pymongo.InsertOne({"_id": 3000}), pymongo.InsertOne({"_id": 1}), pymongo.InsertOne({"_id": 3001}),
        pymongo.UpdateOne({"_id": 3000}, {"$set": {"k": 1}}), pymongo.DeleteOne({"_id": 3001})]))

    def session():
        with db.client.start_session(causal_consistency=True) as s:
            coll.insert_one({"_id": 5000, "k": 50}, session=s)
            found = ej(coll.find_one({"_id": 5000}, session=s))
            n = coll.count_documents({"k": 50}, session=s)
            return {"found": found, "count": n, "operationTime": s.operation_time is not None}

    step("session", session)
    step("final", lambda: [ej(d) for d in coll.find().sort("_id", 1)])


def main():
    if len(sys.argv) != 4:
        print("usage: workload_pymongo.py URI LABEL OUTFILE", file=sys.stderr)
        return 2
    uri, label, outfile = sys.argv[1:]
    counts = Counts()
    client = pymongo.MongoClient(uri, event_listeners=[counts], appname="mongoplex-modern-" + label,
                                 serverSelectionTimeoutMS=5000, connectTimeoutMS=5000,
                                 socketTimeoutMS=20000)
    try:
        db = client.get_default_database("mongoplex_modern")
        coll = db["modern"]
        coll.drop()
        counts.counts.clear()
        steps = []
        run(db, coll, steps)
        commands = dict(counts.counts)
        coll.drop()
    except PyMongoError as e:
        print("workload_pymongo: setup failed: %s" % e, file=sys.stderr)
        return 2
    finally:
        client.close()
    with open(outfile, "w") as f:
        json.dump({"driver": "pymongo", "version": pymongo.version, "steps": steps,
                   "commands": commands}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
