"""Seeds for fuzz_readpref: $readPreference documents, valid and not, with
member tags and staleness figures, in fuzz_readpref.c's input layout
(pure-Python BSON from seeds_topover.py). Usage: seeds_readpref.py DIR"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeds_topover import Long, doc  # noqa: E402


def main(out):
    os.makedirs(out, exist_ok=True)
    modes = ["primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest",
             "Secondary", "", 5, None]
    tags = [None, [], [{}], [{"dc": "east"}, {}], [{"dc": "east", "rack": "1"}], [{"dc": 1}],
            ["x"], {"dc": "east"}]
    stal = [None, 0, -1, 90, 89, 120.5, float("nan"), float("inf"), 1e300, Long(2**62), "90",
            Long(-2**63)]
    members = [b"", doc({"dc": "east"}), doc({"dc": "east", "rack": "1"}), doc({"dc": 1})]
    figures = [(0, 0, 10000), (2**62, -2**62, 2**62), (-2**63, 2**63 - 1, 2**63 - 1)]
    n = 0
    for m in modes:
        for t in tags:
            for s in stal:
                d = {}
                if m is not None:
                    d["mode"] = m
                if t is not None:
                    d["tags"] = t
                if s is not None:
                    d["maxStalenessSeconds"] = s
                if n % 3 == 0:
                    d["hedge"] = {"enabled": True} if n % 2 else True
                rp = doc(d)
                mem = members[n % len(members)]
                fig = figures[n % len(figures)]
                n += 1
                with open(os.path.join(out, "seed%04d" % n), "wb") as f:
                    f.write(struct.pack("<H", len(rp)) + rp + struct.pack("<qqq", *fig) + mem)


if __name__ == "__main__":
    main(sys.argv[1])
