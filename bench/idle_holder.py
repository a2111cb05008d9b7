#!/usr/bin/env python3
"""bench/idle_holder.py: holds N idle client connections open to a proxy.

Used by bench/idle_clients.sh (issue 15 item 6). Each connection is bound
to a source address 127.0.0.x, x from FIRST_ADDR on (PER_ADDR connections
per address, so the ephemeral ports of one address are never exhausted),
connects, sends one OP_MSG hello (what every driver does first) and reads the reply, so the
proxy holds a real handshaken client; then it stays idle. Prints
"READY <n>" on stdout when all are open (or "FAILED <n> <reason>" and exits
1), then sleeps until it is killed.
"""
import resource
import socket
import struct
import sys
import time


def bson_hello():
    """{hello: 1, $db: "admin"} as BSON bytes."""
    body = b"\x10hello\x00" + struct.pack("<i", 1)
    body += b"\x02$db\x00" + struct.pack("<i", 6) + b"admin\x00"
    return struct.pack("<i", 4 + len(body) + 1) + body + b"\x00"


def op_msg(request_id, doc):
    payload = struct.pack("<I", 0) + b"\x00" + doc
    return struct.pack("<iiii", 16 + len(payload), request_id, 0, 2013) + payload


def read_reply(sock):
    head = b""
    while len(head) < 16:
        chunk = sock.recv(16 - len(head))
        if not chunk:
            raise OSError("connection closed before the hello reply")
        head += chunk
    left = struct.unpack("<i", head[:4])[0] - 16
    while left > 0:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise OSError("connection closed inside the hello reply")
        left -= len(chunk)


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: idle_holder.py PORT N PER_ADDR FIRST_ADDR")
    port, count, per_addr = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    first = int(sys.argv[4])
    if first + (count - 1) // per_addr > 254:
        print("FAILED 0 not enough 127.0.0.x addresses", flush=True)
        sys.exit(1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 100:
        print("FAILED 0 RLIMIT_NOFILE %d < %d" % (soft, count + 100), flush=True)
        sys.exit(1)
    hello = bson_hello()
    socks = []
    t0 = time.monotonic()
    try:
        for i in range(count):
            src = "127.0.0.%d" % (first + i // per_addr)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(30)
            s.bind((src, 0))
            s.connect(("127.0.0.1", port))
            s.sendall(op_msg(i + 1, hello))
            read_reply(s)
            socks.append(s)
            if (i + 1) % 10000 == 0:
                print("opened %d in %.1f s" % (i + 1, time.monotonic() - t0),
                      file=sys.stderr, flush=True)
    except OSError as e:
        print("FAILED %d %s" % (len(socks), e), flush=True)
        sys.exit(1)
    print("READY %d %.1f" % (len(socks), time.monotonic() - t0), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
