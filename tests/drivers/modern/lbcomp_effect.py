#!/usr/bin/env python3
# The proxy side of run.sh's lbcomp pass (MODERN_LB_COMPRESS=1): proves that a
# driver's run with loadBalanced=true&compressors=... really was load-balanced
# and compressed, from mongoplexStats counter deltas around that one run.
#
#   lbcomp_effect.py snapshot PROXY_URI FILE          counters -> FILE (JSON)
#   lbcomp_effect.py check PROXY_URI FILE LIST   prints one line, exit 1 on FAIL
#
# check requires, since the snapshot: at least one client connection that said
# loadBalanced: true (lb_clients; the proxy answered its hello with serviceId),
# at least one pinned cursor (lb_pins_opened; the workload's cursors run
# pinned), and, for ALGORITHM = the first of the run's compressors= LIST (the
# one the driver uses), at least one client message decompressed with it and
# at least one reply compressed with it. The reading client itself is a plain
# pymongo connection (no compression, not load-balanced), so it adds nothing
# to those counters. The backend URI has no compressors, so the ALGORITHM
# counters only count the client side.
import json
import sys

import pymongo


def counters(uri):
    c = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
    try:
        return c.admin.command("mongoplexStats")["counters"]
    finally:
        c.close()


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("snapshot", "check"):
        print("usage: lbcomp_effect.py snapshot URI FILE | check URI FILE LIST", file=sys.stderr)
        return 2
    now = counters(sys.argv[2])
    if sys.argv[1] == "snapshot":
        with open(sys.argv[3], "w") as f:
            json.dump(now, f)
        return 0
    algo = sys.argv[4].split(",")[0]
    with open(sys.argv[3]) as f:
        before = json.load(f)
    d = {k: now.get(k, 0) - before.get(k, 0) for k in now}
    names = ["lb_clients", "lb_pins_opened", "lb_pin_shared", "lb_pin_waits", "lb_pin_refusals",
             algo + "_decompressed_msgs", algo + "_compressed_msgs", algo + "_compressed_bytes_raw",
             algo + "_compressed_bytes_wire", "compress_refused", "clients_closed_error", "backend_errors"]
    need = ["lb_clients", "lb_pins_opened", algo + "_decompressed_msgs", algo + "_compressed_msgs"]
    bad = [n + "=0" for n in need if d.get(n, 0) <= 0]
    bad += [n + "=%d" % d[n] for n in ("compress_refused", "lb_pin_refusals") if d.get(n, 0)]
    line = ", ".join("%s %d" % (n, d.get(n, 0)) for n in names)
    print("%s compressors=%s: %s" % ("FAIL " + ", ".join(bad) if bad else "ok", sys.argv[4], line))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
