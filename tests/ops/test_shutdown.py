#!/usr/bin/env python3
"""Graceful shutdown (SIGTERM): in-flight requests finish, requests arriving
meanwhile on open connections get ShutdownInProgress (code 91, retryable),
new connections are refused, exit 0; and shutdown_timeout_ms bounds the wait.

The backend is a mockupdb server that answers the proxy's isMaster handshake
(maxWireVersion 8) and delays its reply to finds on chosen collections.
OPS_LOG_LEVEL=debug runs the drain test's proxy at debug level.
"""

import errno
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opslib import (Fail, Proxy, SlowBackend, check, check_eq, raw_command,  # noqa: E402
                    raw_connect, raw_recv, raw_send, run_subtests, wait_until)


def slow_finds(client, coll, n):
    """Start n threads each running one find on `coll`; returns (threads, results)
    where results[i] = (ok, doc_or_error, seconds)."""
    results = [None] * n

    def one(i):
        t0 = time.monotonic()
        try:
            doc = client.ops[coll].find_one({"n": i})
            results[i] = (True, doc, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001
            results[i] = (False, "%s: %s" % (type(e).__name__, e), time.monotonic() - t0)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results


def connect_refused(port):
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        return False
    except OSError as e:
        return e.errno == errno.ECONNREFUSED
    finally:
        s.close()


def check_shutdown_error(reply, what):
    check_eq(reply.get("ok"), 0, what + ": ok")
    check_eq(reply.get("code"), 91, what + ": code")
    check_eq(reply.get("codeName"), "ShutdownInProgress", what + ": codeName")
    labels = reply.get("errorLabels") or []
    check("RetryableError" in labels and "RetryableWriteError" in labels,
          "%s: errorLabels %r lack RetryableError/RetryableWriteError" % (what, labels))


N_SLOW = 4           # pymongo finds in flight at SIGTERM
DELAY = 1.5          # backend delay for them (and for the big one)
BIG = 8 * 1000 * 1000  # reply size of the slow reader's find
READ_LAG = 0.5       # the slow reader starts reading this long after its reply was sent


def test_drain():
    be = SlowBackend({"slow": DELAY, "bigslow": DELAY}, big={"bigslow": BIG})
    client = None
    try:
        p = Proxy("shutdown", {"listen_addr": "127.0.0.1", "listen_port": 0,
                               "backend_uri": be.uri, "pool_size": 8,
                               "shutdown_timeout_ms": 10000,
                               "log_level": os.environ.get("OPS_LOG_LEVEL", "info")}).start()
        # Connections opened before SIGTERM, used after it: `raw` sends new
        # requests during the drain; `reader` has a find in flight whose big
        # reply it reads slowly (small receive buffer, starts READ_LAG late).
        raw = raw_connect(p.port)
        check_eq(raw_command(raw, {"ping": 1, "$db": "admin"}).get("ok"), 1.0,
                 "ping before SIGTERM")
        reader = raw_connect(p.port, rcvbuf=64 * 1024)
        big_rid = raw_send(reader, {"find": "bigslow", "filter": {"n": 99}, "$db": "ops"})
        client = p.client(maxPoolSize=N_SLOW + 2)
        threads, results = slow_finds(client, "slow", N_SLOW)
        wait_until(lambda: be.count("slow") == N_SLOW and be.count("bigslow") == 1, 10,
                   "the %d slow finds and the big one to reach the backend" % N_SLOW)
        t_term = time.monotonic()
        p.signal(signal.SIGTERM)
        p.wait_log(r"SIGTERM: no longer accepting; draining in-flight requests "
                   r"\(up to 10000 ms\)", 2)

        # While draining: new requests on the open connection are refused...
        for doc, what in (({"ping": 1, "$db": "admin"}, "ping during drain"),
                          ({"find": "other", "filter": {}, "$db": "ops"},
                           "find during drain"),
                          ({"insert": "other", "documents": [{"x": 1}], "$db": "ops"},
                           "insert during drain")):
            check_shutdown_error(raw_command(raw, doc), what)
        # ...new connections are refused...
        check(connect_refused(p.port), "a new TCP connection to port %d was not refused "
              "during the drain" % p.port)
        # ...and all of that happened while the slow finds were still in flight.
        still = sum(1 for r in results if r is None)
        check(still == N_SLOW and p.running(),
              "the drain checks ran too late: %d of %d slow finds still in flight, proxy "
              "running: %s" % (still, N_SLOW, p.running()))

        for t in threads:
            t.join(15)
        lost = []
        for i, r in enumerate(results):
            check(r is not None, "slow find %d never returned" % i)
            if not r[0]:
                lost.append("find %d: %s" % (i, r[1]))
                continue
            check_eq(r[1], {"coll": "slow", "n": i}, "slow find %d result" % i)
            check(r[2] >= DELAY - 0.1, "slow find %d returned after %.2f s, before the "
                  "backend's %.1f s delay" % (i, r[2], DELAY))

        # The slow reader: its reply left the backend; read it READ_LAG later.
        sent = wait_until(lambda: be.replies("bigslow"), 10, "the big reply")[0]
        time.sleep(max(0.0, sent + READ_LAG - time.monotonic()))
        try:
            doc = raw_recv(reader, big_rid)
            batch = doc.get("cursor", {}).get("firstBatch", [{}])
            check(doc.get("ok") == 1 and len(batch[0].get("pad", "")) == BIG,
                  "the big reply is not the backend's: %r" % {k: v for k, v in doc.items()
                                                             if k != "cursor"})
        except Fail as e:
            lost.append("the big find (reader %.1f s late): %s" % (READ_LAG, e))
        check(not lost, "in-flight requests lost their reply during a graceful shutdown "
              "(the proxy exited with replies still unsent in client output buffers?): "
              + "; ".join(lost))

        rc = p.wait_exit(5)
        t_exit = time.monotonic() - t_term
        check_eq(rc, 0, "exit status after SIGTERM")
        check(t_exit < DELAY + READ_LAG + 1.5, "the proxy exited %.2f s after SIGTERM; "
              "the in-flight requests were done after ~%.1f s" % (t_exit, DELAY + READ_LAG))
        log = p.log_text()
        check("shutdown: all in-flight requests done, exiting" in log,
              "no 'all in-flight requests done' line in the log")
        check("expired" not in log, "the drain reported an expiry")
        raw.close()
        reader.close()
    finally:
        if client is not None:
            client.close()
        be.stop()


def test_timeout():
    be = SlowBackend({"slower": 5.0})
    client = None
    try:
        p = Proxy("shutdown-timeout", {"listen_addr": "127.0.0.1", "listen_port": 0,
                                       "backend_uri": be.uri, "pool_size": 4,
                                       "shutdown_timeout_ms": 500,
                                       "log_level": "info"}).start()
        client = p.client(maxPoolSize=4)
        threads, results = slow_finds(client, "slower", 2)
        wait_until(lambda: be.count("slower") == 2, 10, "the 2 finds to reach the backend")
        t_term = time.monotonic()
        p.signal(signal.SIGTERM)
        rc = p.wait_exit(5)
        elapsed = time.monotonic() - t_term
        check_eq(rc, 0, "exit status after SIGTERM with requests stuck")
        check(0.45 <= elapsed <= 1.5, "exited %.2f s after SIGTERM; shutdown_timeout_ms is "
              "500" % elapsed)
        p.wait_log(r"shutdown: shutdown_timeout_ms \(500\) expired with requests in flight, "
                   r"exiting", 1)
        check("all in-flight requests done" not in p.log_text(),
              "the log claims the requests were done")
        # The stuck clients are not left hanging until the backend answers (5 s):
        # their connections close when the proxy exits.
        for t in threads:
            t.join(3)
        for i, r in enumerate(results):
            check(r is not None, "stuck find %d still waiting 3 s after the proxy exited" % i)
            check(not r[0], "stuck find %d succeeded?! %r" % (i, r[1]))
    finally:
        if client is not None:
            client.close()
        be.stop()


if __name__ == "__main__":
    run_subtests([("shutdown_drain", test_drain),
                  ("shutdown_timeout_expiry", test_timeout)])
