#!/usr/bin/env python3
"""seeds_compress.py DIR — seed inputs for fuzz_compress.c.

Unwrap stage (first byte even): [mode][originalOpcode selector][uncompressedSize
LE32][compressor id][body]. Seeds: valid zlib streams (the only codec in
Python's standard library) of BSON-like bodies with the right size, one byte
short, one too long, truncated; noop bodies. Round-trip stage (first byte odd):
a few OP_MSG bodies.
"""
import os
import struct
import sys
import zlib

out = sys.argv[1] if len(sys.argv) > 1 else "fuzz-seeds"
os.makedirs(out, exist_ok=True)


def put(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


body = b"\x00\x00\x00\x00\x00" + b"\x25\x00\x00\x00\x02find\x00\x02\x00\x00\x00c\x00" + b"x" * 300
for i, (size, stream) in enumerate([
        (len(body), zlib.compress(body)),
        (len(body) - 1, zlib.compress(body)),
        (len(body) + 1, zlib.compress(body)),
        (len(body), zlib.compress(body)[:-5]),
        (len(body), zlib.compress(body, 9) + b"junk"),
        (60000, zlib.compress(b"\x00" * 60000, 9)),
        (100, zlib.compress(b"\x00" * 60000, 9))]):
    put("zlib%d" % i, b"\x00\x01" + struct.pack("<i", size) + b"\x02" + stream)
put("noop", b"\x00\x01" + struct.pack("<i", len(body)) + b"\x00" + body)
put("nested", b"\x00\x80" + struct.pack("<i", len(body)) + b"\x00" + body)
put("rt0", b"\x01" + body)
put("rt1", b"\x01" + bytes(range(256)) * 4)
