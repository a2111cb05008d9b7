#!/usr/bin/env python3
"""Writes a small seed corpus for fuzz_wire into the directory given (default
./fuzz-seeds): valid OP_MSG messages (body, sequences, checksum) and legacy
OP_QUERY handshakes, so the fuzzer starts from well-formed BSON. Stdlib only."""
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def element(key, value):
    k = key.encode() + b"\0"
    if isinstance(value, bool):
        return b"\x08" + k + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x10" + k + struct.pack("<i", value)
    if isinstance(value, float):
        return b"\x01" + k + struct.pack("<d", value)
    if isinstance(value, str):
        s = value.encode() + b"\0"
        return b"\x02" + k + struct.pack("<i", len(s)) + s
    if isinstance(value, list):
        return b"\x04" + k + doc({str(i): v for i, v in enumerate(value)})
    return b"\x03" + k + doc(value)


def doc(d):
    body = b"".join(element(k, v) for k, v in d.items()) + b"\0"
    return struct.pack("<i", len(body) + 4) + body


def op_msg(flags, sections, checksum=False):
    payload = struct.pack("<I", flags | (1 if checksum else 0)) + b"".join(sections)
    length = 16 + len(payload) + (4 if checksum else 0)
    msg = struct.pack("<iiii", length, 7, 0, 2013) + payload
    return msg + (struct.pack("<I", crc32c(msg)) if checksum else b"")


def body(d):
    return b"\0" + doc(d)


def seq(ident, docs):
    data = ident.encode() + b"\0" + b"".join(doc(d) for d in docs)
    return b"\x01" + struct.pack("<i", len(data) + 4) + data


def op_query(coll, q):
    payload = struct.pack("<i", 0) + coll.encode() + b"\0" + struct.pack("<ii", 0, -1) + doc(q)
    return struct.pack("<iiii", 16 + len(payload), 9, 0, 2004) + payload


find = {"find": "c", "filter": {"_id": {"$in": [1, 2, 3]}}, "$db": "test"}
seeds = {
    "msg_body": op_msg(0, [body(find)]),
    "msg_checksum": op_msg(0, [body(find)], checksum=True),
    "msg_seqs": op_msg(0, [body({"insert": "c", "$db": "test"}),
                           seq("documents", [{"_id": 1, "x": "a"}, {"_id": 2.5}]),
                           seq("u", [{"q": {}, "u": {"$set": {"y": True}}}])]),
    "msg_seq_first": op_msg(1 << 16, [seq("documents", [{"_id": 1}]),
                                      body({"insert": "c", "$db": "t"})], checksum=True),
    "query_plain": op_query("admin.$cmd", {"isMaster": 1, "helloOk": True}),
    "query_wrapped": op_query("admin.$cmd", {"$query": {"ismaster": 1},
                                             "$readPreference": {"mode": "primary"}}),
}
seeds["pipelined"] = seeds["msg_body"] + seeds["query_plain"]


def nested(levels, kind=b"\x03"):
    """{a: {a: ... {}}} with `levels` containers, built without recursion."""
    inner = struct.pack("<i", 5) + b"\0"
    for _ in range(levels):
        body = kind + b"a\0" + inner + b"\0"
        inner = struct.pack("<i", len(body) + 4) + body
    return inner


# Nesting around mongod's limit (200): the body is depth 0, filter 1.
for depth in (199, 200, 201, 221):
    filt = nested(depth - 1)
    b = b"\x02find\0" + struct.pack("<i", 2) + b"c\0" + b"\x03filter\0" + filt
    b += b"\x02$db\0" + struct.pack("<i", 5) + b"test\0"
    seeds["msg_nested_%d" % depth] = op_msg(0, [b"\0" + struct.pack("<i", len(b) + 5) + b + b"\0"])
# deep_stage inputs of fuzz_wire.c: 'D', depth (LE16 % 512), x20 flag, corrupt flag, kinds
seeds["deep_stage_200"] = b"D" + struct.pack("<H", 200) + b"\0\0" + b"\x00\x55\xaa"
seeds["deep_stage_cws"] = b"D" + struct.pack("<H", 150) + b"\0\0" + b"\xff\x00"
seeds["deep_stage_x20"] = b"D" + struct.pack("<H", 100) + b"\xff\0" + b"\x00"

out = sys.argv[1] if len(sys.argv) > 1 else "fuzz-seeds"
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {out}")
