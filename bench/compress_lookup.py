#!/usr/bin/env python3
"""compress_lookup.py — wire bytes and proxy CPU per 20-id lookup, per compressor.

    python compress_lookup.py PROXY_URI PROXY_PID [N] [ALG...]

Seeds 2000 user-like documents (~330 bytes: names, e-mail, numbers, a short
text from a 300-word vocabulary, random seed 7) through the proxy, then for
each ALG (default: none snappy zlib zstd) runs N (default 3000) lookups
{_id: {$in: 20 random ids}} with pymongo compressors=ALG, one client, one
at a time. Per request it prints: request and reply bytes on the client
socket (from mongoplexStats: <alg>_decompressed_bytes_wire for requests,
<alg>_compressed_bytes_wire for replies; "none" reports the raw sizes, the
same as the *_bytes_raw counters), and the proxy's CPU (utime+stime of
PROXY_PID from /proc, clock ticks -> microseconds) per request. Replies the
proxy left uncompressed (below compression_min_bytes or not smaller) count
at their raw size. Short runs on a shared machine: the CPU figures are
indicative, the byte figures exact.
"""

import os
import random
import sys
import time

from pymongo import MongoClient

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "fox", "golf", "hotel", "india", "kilo"]
VOCAB = ["%s%s" % (a, b) for a in WORDS for b in ("", "s", "ed", "ing", "er", "ly")] * 5


def cpu_us(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks * 1e6 / os.sysconf("SC_CLK_TCK")


def counters(c):
    return c.admin.command("mongoplexStats")["counters"]


def seed(client):
    rnd = random.Random(7)
    col = client.cmpbench.users
    col.drop()
    docs = []
    for i in range(2000):
        docs.append({
            "_id": i,
            "name": "user%06d" % rnd.randrange(10**6),
            "email": "u%d@example%d.org" % (rnd.randrange(10**6), rnd.randrange(50)),
            "age": rnd.randrange(18, 90),
            "score": rnd.random() * 1000,
            "tags": rnd.sample(WORDS, 3),
            "bio": " ".join(rnd.choice(VOCAB) for _ in range(30)),
        })
    col.insert_many(docs)


def run(uri, pid, alg, n, plain):
    sep = "&" if "?" in uri else "?"
    c = MongoClient(uri + (sep + "compressors=" + alg if alg != "none" else ""))
    col = c.cmpbench.users
    rnd = random.Random(11)
    list(col.find({"_id": {"$in": [1, 2]}}))  # connect + handshake outside the window
    s0, t0, w0 = counters(plain), cpu_us(pid), time.time()
    for _ in range(n):
        ids = rnd.sample(range(2000), 20)
        got = list(col.find({"_id": {"$in": ids}}))
        assert len(got) == 20
    t1, w1, s1 = cpu_us(pid), time.time(), counters(plain)
    c.close()
    d = {k: s1[k] - s0[k] for k in s1 if isinstance(s1[k], int)}
    return d, (t1 - t0) / n, (w1 - w0) / n * 1e6


def main():
    uri, pid = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
    algs = sys.argv[4:] or ["none", "snappy", "zlib", "zstd"]
    plain = MongoClient(uri)
    seed(plain)
    raw_req = raw_rep = None
    print("%-7s %12s %12s %14s %12s" % ("alg", "req B/op", "reply B/op", "proxy CPU us/op",
                                        "wall us/op"))
    for alg in algs:
        d, cpu, wall = run(uri, pid, alg, n, plain)
        if alg == "none":
            print("%-7s %12s %12s %14.1f %12.0f" % (alg, "(raw)", "(raw)", cpu, wall))
            continue
        req = d[alg + "_decompressed_bytes_wire"] / n
        rep_msgs = d[alg + "_compressed_msgs"]
        rep = d[alg + "_compressed_bytes_wire"] / max(rep_msgs, 1)
        raw_req = d[alg + "_decompressed_bytes_raw"] / n
        raw_rep = d[alg + "_compressed_bytes_raw"] / max(rep_msgs, 1)
        print("%-7s %12.0f %12.0f %14.1f %12.0f   (raw: request %.0f, reply %.0f; %d/%d "
              "replies compressed)" % (alg, req, rep, cpu, wall, raw_req, raw_rep, rep_msgs, n))
    plain.close()


if __name__ == "__main__":
    main()
