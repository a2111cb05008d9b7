#!/usr/bin/env python3
"""Seed inputs for fuzz_scram_client: valid server-first-messages for both
mechanisms (the fuzzer mutates from there), some with a server-final after
a 0 byte. Usage: python3 seeds_scram_client.py DIR"""
import base64
import os
import sys

NONCE = "fyko+d2lbbFgONRv9qkxdawL"
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
salts = [b"salt-0123456789ab", b"\x00\xff" * 8, b"x"]
n = 0
for mech in (b"\x00", b"\x01"):
    for salt in salts:
        for extra in (b"", b",m=ext", b",e=other-error"):
            first = ("r=%s3rfcNHYJY1ZVvWVs7j,s=%s,i=4096" % (
                NONCE, base64.b64encode(salt).decode())).encode() + extra
            for tail in (b"", b"\x00v=" + base64.b64encode(b"\x01" * 32), b"\x00e=bad"):
                with open(os.path.join(out, "seed%03d" % n), "wb") as f:
                    f.write(mech + first + tail)
                n += 1
print(n)
