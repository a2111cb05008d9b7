#!/usr/bin/env python3
"""Seeds for fuzz_sessionwide: a command byte, then a BSON body (pure-Python
BSON from seeds_topover.py). Usage: seeds_sessionwide.py DIR"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeds_topover import doc  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
bodies = [
    (0, {"aggregate": 1, "pipeline": [{"$currentOp": {}}]}),
    (0, {"aggregate": "c", "pipeline": [{"$match": {"x": "$currentOp"}},
                                        {"$lookup": {"from": "d", "pipeline": [{"$listSessions": {}}]}}]}),
    (0, {"aggregate": "c", "pipeline": [{"$facet": {"a": [{"$listLocalSessions": {}}]}}]}),
    (0, {"aggregate": "c", "pipeline": [{"$match": {}}], "cursor": {}}),
    (200, {"killAllSessions": []}),
    (201, {"currentOp": 1, "$all": True}),
    (202, {"find": "c", "filter": {"$currentOp": 1}}),
]
for i, (b, body) in enumerate(bodies):
    with open(os.path.join(out, f"seed{i}"), "wb") as f:
        f.write(bytes([b]) + doc(body))
