"""Seeds for fuzz_cursor_reply: find/getMore/killCursors replies, valid and
odd, in fuzz_cursor_reply.c's layout (u8 k, k int64 ids, the body; BSON from
seeds_topover.py). Usage: seeds_cursor_reply.py DIR"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeds_topover import Long, doc  # noqa: E402


def main(out):
    os.makedirs(out, exist_ok=True)
    ids = [Long(0), Long(123456789012), 7, 3.0, 2.5, float("nan"), 9.3e18, "x", None,
           Long(-2**63)]
    replies = []
    for i in ids:
        replies += [
            {"cursor": {"id": i, "ns": "db.coll", "firstBatch": [{"_id": 1}]}, "ok": 1.0},
            {"cursor": {"nextBatch": [], "id": i, "ns": "db.c"}, "ok": 1},
            {"ok": 1, "cursor": {"id": i}},
            {"cursor": {"id": i, "id2": 1, "ns": 5}, "ok": 0, "code": 43},
        ]
    replies += [
        {"cursorsKilled": [Long(1)], "cursorsNotFound": [Long(2)], "cursorsAlive": [],
         "cursorsUnknown": [], "ok": 1.0},
        {"cursorsNotFound": "x", "ok": 1},
        {"cursorsNotFound": [], "cursorsNotFound2": [1], "ok": 1},
        {"ok": 0, "code": Long(43), "errmsg": "x"},
        {"cursor": "notadoc", "ok": True},
        {"ok": "yes"},
    ]
    n = 0
    for r in replies:
        for k in (0, 1, 3):
            n += 1
            with open(os.path.join(out, "seed%03d" % n), "wb") as f:
                f.write(bytes([k]) + b"".join(struct.pack("<q", 1000 + j) for j in range(k))
                        + doc(r))


if __name__ == "__main__":
    main(sys.argv[1])
