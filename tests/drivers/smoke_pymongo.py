#!/usr/bin/env python3
"""Cross-driver smoke test, PyMongo flavour.

Runs the same operations against MONGOPLEX_PROXY_URI (through mongoplex) and
MONGOPLEX_DIRECT_URI (straight to the backend) and checks that every answer
through the proxy is byte-for-byte the same BSON as the answer obtained
directly.  Writes go through the proxy and are read back both ways, and vice
versa, so both paths carry reads and writes.

Exit status: 0 when everything matched, 1 when some operation differed,
2 on setup / connection errors.  The database is the one named in the URI
path (default "mongoplex_smoke"); the collection name is unique per run.
"""

import datetime
import os
import re
import sys
import time
import traceback
import uuid
from urllib.parse import unquote

try:
    import bson
    import pymongo
    from bson import SON
    from bson.binary import Binary
    from bson.codec_options import CodecOptions
    from bson.int64 import Int64
    from bson.objectid import ObjectId
    from bson.raw_bson import RawBSONDocument
    from pymongo import ASCENDING, DESCENDING, monitoring
except ImportError as exc:  # pragma: no cover - environment problem
    print("FAIL pymongo: cannot import pymongo/bson (%s); install python3-pymongo" % exc)
    sys.exit(2)

DRIVER = "pymongo"
DEFAULT_DB = "mongoplex_smoke"
TIMEOUTS = dict(serverSelectionTimeoutMS=5000, connectTimeoutMS=5000, socketTimeoutMS=20000)
RAW = CodecOptions(document_class=RawBSONDocument)

N_PROXY_MANY = 300   # insert_many through the proxy
N_DIRECT_MANY = 150  # insert_many directly
FIND_BATCH = 7       # small batch size so find needs several getMores
AGG_BATCH = 2


class Mismatch(Exception):
    pass


class CommandCounter(monitoring.CommandListener):
    def __init__(self):
        self.counts = {}

    def started(self, event):
        self.counts[event.command_name] = self.counts.get(event.command_name, 0) + 1

    def succeeded(self, event):
        pass

    def failed(self, event):
        pass


def db_name_from_uri(uri):
    m = re.match(r"^mongodb(?:\+srv)?://[^/?]*/([^?]*)", uri)
    name = unquote(m.group(1)) if m else ""
    return name or DEFAULT_DB


def show(doc, limit=600):
    if doc is None:
        return "None"
    if isinstance(doc, RawBSONDocument):
        doc = bson.decode(doc.raw, codec_options=CodecOptions(document_class=SON))
    text = repr(doc)
    return text if len(text) <= limit else text[:limit] + "...(%d chars)" % len(text)


def decoded(doc):
    """Decode both server answers and locally built documents the same way."""
    if doc is None:
        return None
    return bson.decode(raw_of(doc), codec_options=CodecOptions(document_class=SON))


def first_diff(a, b, path="$"):
    """Path of the first difference between two decoded documents (order- and type-sensitive)."""
    if type(a) is not type(b):
        return path, a, b
    if isinstance(a, dict):
        ka, kb = list(a.keys()), list(b.keys())
        for i in range(max(len(ka), len(kb))):
            if i >= len(ka) or i >= len(kb) or ka[i] != kb[i]:
                return path + " (field names/order)", ka, kb
            r = first_diff(a[ka[i]], b[kb[i]], "%s.%s" % (path, ka[i]))
            if r:
                return r
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return path + " (array length)", len(a), len(b)
        for i, (x, y) in enumerate(zip(a, b)):
            r = first_diff(x, y, "%s[%d]" % (path, i))
            if r:
                return r
        return None
    return None if a == b else (path, a, b)


def describe(i, a, b, a_name, b_name):
    """'document I differs at PATH: A_NAME x, B_NAME y' (or both documents in full)."""
    da, db = decoded(a), decoded(b)
    if da is not None and db is not None:
        r = first_diff(da, db)
        if r:
            where, x, y = r
            return "document %d (_id %r) differs at %s: %s %s, %s %s" % (
                i, da.get("_id"), where, a_name, show(x, 200), b_name, show(y, 200))
    return "document %d differs\n    %s: %s\n    %s: %s" % (i, a_name, show(a), b_name, show(b))


def raw_of(doc):
    if doc is None:
        return None
    if isinstance(doc, RawBSONDocument):
        return doc.raw
    return bson.encode(doc)


class Smoke:
    def __init__(self, direct_uri, proxy_uri):
        self.counter = CommandCounter()
        self.direct_client = pymongo.MongoClient(direct_uri, appname="mongoplex-smoke-direct", **TIMEOUTS)
        self.proxy_client = pymongo.MongoClient(
            proxy_uri, appname="mongoplex-smoke-proxy", event_listeners=[self.counter], **TIMEOUTS)
        self.coll_name = "smoke_%s_%d_%d_%s" % (DRIVER, int(time.time()), os.getpid(), uuid.uuid4().hex[:8])
        self.D = self.direct_client[db_name_from_uri(direct_uri)].get_collection(self.coll_name, codec_options=RAW)
        self.P = self.proxy_client[db_name_from_uri(proxy_uri)].get_collection(self.coll_name, codec_options=RAW)
        self.expected = {}  # _id -> SON document as the backend should now hold it
        self.failures = []
        self.checks = 0

    # ---- comparison helpers -------------------------------------------------

    def same(self, op, via_proxy, via_direct, expected=None, check_expected=False):
        """Deep, ordered, type-exact comparison (raw BSON bytes)."""
        self.checks += 1
        p_list = via_proxy if isinstance(via_proxy, list) else [via_proxy]
        d_list = via_direct if isinstance(via_direct, list) else [via_direct]
        p_raw = [raw_of(d) for d in p_list]
        d_raw = [raw_of(d) for d in d_list]
        if len(p_raw) != len(d_raw):
            raise Mismatch("%s: proxy returned %d document(s), direct returned %d"
                           % (op, len(p_raw), len(d_raw)))
        for i, (p, d) in enumerate(zip(p_raw, d_raw)):
            if p != d:
                raise Mismatch("%s: %s" % (op, describe(i, p_list[i], d_list[i], "proxy", "direct")))
        if check_expected:
            e_list = expected if isinstance(expected, list) else [expected]
            e_raw = [raw_of(d) for d in e_list]
            if len(e_raw) != len(d_raw):
                raise Mismatch("%s: got %d document(s), expected %d" % (op, len(d_raw), len(e_raw)))
            for i, (e, d) in enumerate(zip(e_raw, d_raw)):
                if e != d:
                    raise Mismatch("%s: not what was written: %s"
                                   % (op, describe(i, d_list[i], e_list[i], "got", "expected")))

    def equal(self, op, got, want):
        self.checks += 1
        if got != want:
            raise Mismatch("%s: got %r, expected %r" % (op, got, want))

    def step(self, name, fn):
        try:
            fn()
            print("  ok    %s" % name)
        except Mismatch as exc:
            self.failures.append(str(exc))
            print("  DIFF  %s" % exc)

    # ---- test data ----------------------------------------------------------

    @staticmethod
    def make_doc(i, src):
        base = datetime.datetime(2021, 3, 4, 5, 6, 7, 123000)  # ms precision: BSON dates are ms
        return SON([
            ("_id", ObjectId()),
            ("i", i),
            ("src", src),
            ("grp", i % 7),
            ("s", "str-%05d-\u00fcnic\u00f8de-\u2603" % i),
            ("big", Int64(i * 10000000000 + 1)),
            ("f", i / 4.0 + 0.1),
            ("flag", i % 3 == 0),
            ("nothing", None),
            ("when", base + datetime.timedelta(hours=i, milliseconds=i)),
            ("bin", Binary(bytes([i % 256, (i * 7) % 256, 0, 255]))),
            ("nested", SON([
                ("a", i),
                ("b", SON([("c", "deep-%d" % i), ("arr", [i, "x", SON([("k", i)]), SON([("pair", [1.5, None])])])])),
                ("empty", SON()),
            ])),
            ("tags", ["t%d" % (i % 5), "t%d" % (i % 3), "all"]),
            ("ref", ObjectId()),
            ("maybe", None if i % 4 == 0 else ("odd" if i % 2 else i)),  # mixed types across docs
        ])

    def sorted_expected(self, pred=lambda d: True, key=lambda d: d["i"], reverse=False):
        return sorted((d for d in self.expected.values() if pred(d)), key=key, reverse=reverse)

    # ---- the operations -----------------------------------------------------

    def run(self):
        P, D = self.P, self.D
        print("%s: pymongo %s, collection %s.%s" % (DRIVER, pymongo.version, P.database.name, self.coll_name))
        # Fail fast (and clearly) when either side is unreachable.
        self.direct_client.admin.command("ping")
        self.proxy_client.admin.command("ping")

        doc_a = self.make_doc(0, "proxy-one")
        doc_b = self.make_doc(1, "direct-one")

        def insert_one_proxy():
            r = P.insert_one(doc_a)
            self.equal("insert_one via proxy: inserted_id", r.inserted_id, doc_a["_id"])
            self.expected[doc_a["_id"]] = doc_a
            self.same("find_one by _id after proxy insert_one",
                      P.find_one({"_id": doc_a["_id"]}), D.find_one({"_id": doc_a["_id"]}), doc_a, True)
        self.step("insert_one via proxy, find by _id both ways", insert_one_proxy)

        def insert_one_direct():
            r = D.insert_one(doc_b)
            self.equal("insert_one via direct: inserted_id", r.inserted_id, doc_b["_id"])
            self.expected[doc_b["_id"]] = doc_b
            self.same("find_one by _id after direct insert_one",
                      P.find_one({"_id": doc_b["_id"]}), D.find_one({"_id": doc_b["_id"]}), doc_b, True)
        self.step("insert_one via direct, find by _id both ways", insert_one_direct)

        many_p = [self.make_doc(i, "proxy-many") for i in range(2, 2 + N_PROXY_MANY)]
        many_d = [self.make_doc(i, "direct-many")
                  for i in range(2 + N_PROXY_MANY, 2 + N_PROXY_MANY + N_DIRECT_MANY)]

        def insert_many_proxy():
            r = P.insert_many(many_p)
            self.equal("insert_many via proxy: inserted_ids", r.inserted_ids, [d["_id"] for d in many_p])
            for d in many_p:
                self.expected[d["_id"]] = d
        self.step("insert_many via proxy (%d docs)" % N_PROXY_MANY, insert_many_proxy)

        def insert_many_direct():
            r = D.insert_many(many_d)
            self.equal("insert_many via direct: inserted_ids", r.inserted_ids, [d["_id"] for d in many_d])
            for d in many_d:
                self.expected[d["_id"]] = d
        self.step("insert_many via direct (%d docs)" % N_DIRECT_MANY, insert_many_direct)

        def count_all():
            n = len(self.expected)
            self.equal("count_documents({}) via proxy", P.count_documents({}), n)
            self.equal("count_documents({}) via direct", D.count_documents({}), n)
        self.step("count_documents after inserts", count_all)

        def find_by_id():
            ids = [d["_id"] for d in many_p[::37]] + [many_p[-1]["_id"]] + [d["_id"] for d in many_d[::29]]
            for _id in ids:
                self.same("find_one({_id: %s})" % _id, P.find_one({"_id": _id}), D.find_one({"_id": _id}),
                          self.expected[_id], True)
            self.same("find({_id: {$in: [...]}}) sorted by i",
                      list(P.find({"_id": {"$in": ids}}).sort("i", ASCENDING)),
                      list(D.find({"_id": {"$in": ids}}).sort("i", ASCENDING)),
                      self.sorted_expected(lambda d: d["_id"] in ids), True)
        self.step("find by _id (sample of proxy- and direct-written docs)", find_by_id)

        def find_filter_sort_batch():
            flt = {"grp": {"$in": [1, 2, 3]}, "i": {"$gte": 10}}
            before = self.counter.counts.get("getMore", 0)
            p = list(P.find(flt).sort([("s", DESCENDING)]).batch_size(FIND_BATCH))
            d = list(D.find(flt).sort([("s", DESCENDING)]).batch_size(FIND_BATCH))
            want = self.sorted_expected(lambda x: x["grp"] in (1, 2, 3) and x["i"] >= 10,
                                        key=lambda x: x["s"], reverse=True)
            self.same("find(grp in [1,2,3], i>=10).sort(s:-1).batch_size(%d)" % FIND_BATCH, p, d, want, True)
            getmores = self.counter.counts.get("getMore", 0) - before
            if getmores < 2:
                raise Mismatch("find with batch_size %d: expected several getMore commands through the "
                               "proxy, saw %d" % (FIND_BATCH, getmores))
        self.step("find with filter + sort + batch_size %d (getMore)" % FIND_BATCH, find_filter_sort_batch)

        def full_scan(label):
            def fn():
                p = list(P.find({}).sort("i", ASCENDING).batch_size(50))
                d = list(D.find({}).sort("i", ASCENDING).batch_size(50))
                self.same("full scan sorted by i (%s)" % label, p, d, self.sorted_expected(), True)
            return fn
        self.step("full scan, every document both ways", full_scan("after inserts"))

        def aggregate():
            # One accumulator per $group: FerretDB 1.24 has only $sum/$count and
            # computes just the first accumulator of a $group correctly.
            cases = [
                ("aggregate($match flag/$group grp $sum i/$sort _id)",
                 [{"$match": {"flag": True}},
                  {"$group": {"_id": "$grp", "total": {"$sum": "$i"}}},
                  {"$sort": SON([("_id", ASCENDING)])}],
                 "total", lambda x: x["flag"], lambda x: x["grp"], lambda x: x["i"], False),
                ("aggregate($match i<200/$group src $sum 1/$sort _id desc)",
                 [{"$match": {"i": {"$lt": 200}}},
                  {"$group": {"_id": "$src", "n": {"$sum": 1}}},
                  {"$sort": SON([("_id", DESCENDING)])}],
                 "n", lambda x: x["i"] < 200, lambda x: x["src"], lambda x: 1, True),
            ]
            for label, pipeline, field, pred, key, val, reverse in cases:
                p = list(P.aggregate(pipeline, batchSize=AGG_BATCH))
                d = list(D.aggregate(pipeline, batchSize=AGG_BATCH))
                self.same(label, p, d)
                want = {}
                for x in self.expected.values():
                    if pred(x):
                        want[key(x)] = want.get(key(x), 0) + val(x)
                self.equal(label + " values", [(x["_id"], x[field]) for x in p],
                           sorted(want.items(), reverse=reverse))
        self.step("aggregate $match/$group/$sort (batchSize %d)" % AGG_BATCH, aggregate)

        def update_many_proxy():
            flt = {"grp": 4}
            want = [d for d in self.expected.values() if d["grp"] == 4]
            r = P.update_many(flt, {"$set": {"upd": "via-proxy"}, "$inc": {"nested.a": 1000},
                                    "$push": {"tags": "updated"}})
            self.equal("update_many via proxy: matched_count", r.matched_count, len(want))
            self.equal("update_many via proxy: modified_count", r.modified_count, len(want))
            for d in want:
                d["nested"]["a"] += 1000
                d["tags"].append("updated")
                d["upd"] = "via-proxy"
            self.same("find(grp=4) after update_many via proxy",
                      list(P.find(flt).sort("i", ASCENDING).batch_size(10)),
                      list(D.find(flt).sort("i", ASCENDING).batch_size(10)),
                      sorted(want, key=lambda x: x["i"]), True)
        self.step("update_many via proxy, read back both ways", update_many_proxy)

        def update_one_direct():
            r = D.update_one({"_id": doc_b["_id"]}, {"$set": {"s": "changed-directly", "extra": [1, "two"]}})
            self.equal("update_one via direct: matched_count", r.matched_count, 1)
            self.equal("update_one via direct: modified_count", r.modified_count, 1)
            doc_b["s"] = "changed-directly"
            doc_b["extra"] = [1, "two"]
            self.same("find_one by _id after update_one via direct",
                      P.find_one({"_id": doc_b["_id"]}), D.find_one({"_id": doc_b["_id"]}), doc_b, True)
        self.step("update_one via direct, read back both ways", update_one_direct)

        def delete_many_direct():
            gone = [k for k, d in self.expected.items() if d["grp"] == 5]
            r = D.delete_many({"grp": 5})
            self.equal("delete_many via direct: deleted_count", r.deleted_count, len(gone))
            for k in gone:
                del self.expected[k]
            self.equal("count_documents(grp=5) via proxy after delete", P.count_documents({"grp": 5}), 0)
            self.equal("count_documents(grp=5) via direct after delete", D.count_documents({"grp": 5}), 0)
        self.step("delete_many via direct, checked both ways", delete_many_direct)

        def delete_one_proxy():
            r = P.delete_one({"_id": doc_a["_id"]})
            self.equal("delete_one via proxy: deleted_count", r.deleted_count, 1)
            del self.expected[doc_a["_id"]]
            self.same("find_one by _id after delete_one via proxy",
                      P.find_one({"_id": doc_a["_id"]}), D.find_one({"_id": doc_a["_id"]}), None, True)
        self.step("delete_one via proxy, checked both ways", delete_one_proxy)

        def counts():
            for label, flt, pred in [
                ("{}", {}, lambda d: True),
                ("{flag: true}", {"flag": True}, lambda d: d["flag"]),
                ("{upd: via-proxy}", {"upd": "via-proxy"}, lambda d: d.get("upd") == "via-proxy"),
                ("{i: {$lt: 100}, tags: t1}", {"i": {"$lt": 100}, "tags": "t1"},
                 lambda d: d["i"] < 100 and "t1" in d["tags"]),
            ]:
                want = sum(1 for d in self.expected.values() if pred(d))
                p, d = P.count_documents(flt), D.count_documents(flt)
                self.equal("count_documents(%s): proxy vs direct" % label, p, d)
                self.equal("count_documents(%s)" % label, p, want)
        self.step("count_documents with filters", counts)

        self.step("full scan again after updates/deletes", full_scan("after updates/deletes"))

        def drop():
            P.drop()
            names = D.database.list_collection_names()
            if self.coll_name in names:
                raise Mismatch("drop via proxy: collection still listed directly")
            self.equal("count_documents after drop via direct", D.count_documents({}), 0)
        self.step("drop collection via proxy, checked directly", drop)

    def cleanup(self):
        for coll in (self.D, self.P):  # normally already dropped by the last step
            try:
                coll.drop()
            except Exception:
                pass
        self.direct_client.close()
        self.proxy_client.close()


def main():
    direct_uri = os.environ.get("MONGOPLEX_DIRECT_URI")
    proxy_uri = os.environ.get("MONGOPLEX_PROXY_URI")
    if not direct_uri or not proxy_uri:
        print("FAIL %s: MONGOPLEX_DIRECT_URI and MONGOPLEX_PROXY_URI must both be set" % DRIVER)
        return 2
    started = time.time()
    smoke = None
    try:
        smoke = Smoke(direct_uri, proxy_uri)
        smoke.run()
    except Exception as exc:
        traceback.print_exc()
        print("FAIL %s: error: %s: %s" % (DRIVER, type(exc).__name__, exc))
        return 2
    finally:
        if smoke is not None:
            smoke.cleanup()
    secs = time.time() - started
    if smoke.failures:
        print("FAIL %s: %d operation(s) differed between proxy and direct (%.1fs):" % (
            DRIVER, len(smoke.failures), secs))
        for f in smoke.failures:
            print("  - " + f.splitlines()[0])
        return 1
    print("PASS %s: %d checks, proxy and direct agree (%.1fs)" % (DRIVER, smoke.checks, secs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
