"""Seeds for fuzz_topover: hello commands with awaitable fields, valid and
not (pure-Python BSON, no pymongo needed). Usage: seeds_topover.py DIR"""
import os
import struct
import sys


def cstr(s):
    return s.encode() + b"\0"


def elem(name, v):
    if isinstance(v, bool):
        return b"\x08" + cstr(name) + (b"\1" if v else b"\0")
    if isinstance(v, int) and -2**31 <= v < 2**31 and not isinstance(v, Long):
        return b"\x10" + cstr(name) + struct.pack("<i", v)
    if isinstance(v, int):
        return b"\x12" + cstr(name) + struct.pack("<q", v)
    if isinstance(v, float):
        return b"\x01" + cstr(name) + struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode() + b"\0"
        return b"\x02" + cstr(name) + struct.pack("<i", len(b)) + b
    if isinstance(v, Oid):
        return b"\x07" + cstr(name) + v.raw
    if isinstance(v, list):
        return b"\x04" + cstr(name) + doc({str(i): x for i, x in enumerate(v)})
    if isinstance(v, dict):
        return b"\x03" + cstr(name) + doc(v)
    if v is None:
        return b"\x0a" + cstr(name)
    raise TypeError(v)


class Long(int):
    pass


class Oid:
    def __init__(self, raw):
        self.raw = raw


def doc(d):
    body = b"".join(elem(k, v) for k, v in d.items()) + b"\0"
    return struct.pack("<i", len(body) + 4) + body


def main(out):
    os.makedirs(out, exist_ok=True)
    oid = Oid(bytes(range(12)))
    tvs = [{"processId": oid, "counter": Long(0)}, {"processId": oid, "counter": -1},
           {"processId": "x", "counter": 0}, {"processId": oid}, {}, "garbage", [1],
           {"processId": oid, "counter": Long(2**62)}, {"counter": Long(0), "processId": oid}]
    mats = [0, 10000, -1, 1.5, float("nan"), "10", None, Long(2**63 - 1), 1e300]
    n = 0
    for tv in tvs:
        for mat in mats:
            for d in ({"hello": 1, "topologyVersion": tv, "maxAwaitTimeMS": mat, "$db": "admin"},
                      {"hello": 1, "topologyVersion": tv, "$db": "admin"},
                      {"hello": 1, "maxAwaitTimeMS": mat, "$db": "admin"}):
                n += 1
                with open(os.path.join(out, "seed%03d" % n), "wb") as f:
                    f.write(doc(d))


if __name__ == "__main__":
    main(sys.argv[1])
