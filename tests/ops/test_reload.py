#!/usr/bin/env python3
"""Configuration reload (SIGHUP): pool_size changes under load without
dropping a client or failing a query; an invalid file is rejected (with its
line number) and the old settings stay; settings that cannot change at
runtime are logged and kept; log_level applies at once.

Backend: MONGOPLEX_TEST_URI.
"""

import os
import re
import signal
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opslib import (Fail, Load, Proxy, SlowBackend, backend_uri, check, check_eq,  # noqa: E402
                    free_port, port_open, run_subtests, wait_until)

# "C-12 127.0.0.1:5555: closing: ..." — a client connection closed by the proxy.
CLIENT_CLOSING = re.compile(r" C-\d+ \S+: closing: (.*)")
DEBUG_LINE = re.compile(r"^\S+ \[\d+\] debug ", re.M)


def base_settings(**kw):
    s = {"listen_addr": "127.0.0.1", "listen_port": 0, "backend_uri": backend_uri(),
         "pool_size": 2, "min_pool_size": 0, "log_level": "info"}
    s.update(kw)
    return s


def live(pool):
    return pool["idle"] + pool["active"] + pool["connecting"]


def one_query(p):
    """A fresh client connection doing one find (generates per-client log lines)."""
    c = p.client()
    try:
        c.mongoplex_ops.reload_probe.find_one({"probe": 1})
    finally:
        c.close()


# ---------------------------------------------------------------- under load

N_THREADS = 16
PHASE = 0.8  # seconds of load watched at each pool size


def test_under_load():
    coll = "reload_%s" % uuid.uuid4().hex[:8]
    p = Proxy("reload-load", base_settings()).start()
    p.stats()  # the stats client: a monitor connection + one pool connection
    load_client = p.client(maxPoolSize=32)
    load = Load(load_client, coll, threads=N_THREADS).start()
    try:
        # All load connections are open (16 + pymongo's monitor and RTT
        # connections: it streams, the proxy's hello has a topologyVersion;
        # + the stats client's monitor, RTT and pool connections) and the
        # load is running.
        want_clients = N_THREADS + 2 + 3
        wait_until(lambda: p.stats()["gauges"]["clients"] == want_clients and load.ok > 200,
                   15, "%d client connections and 200 queries" % want_clients)

        def sample(seconds, until=None, what=""):
            """Sample the pool for `seconds` (or until `until(live)`); returns the
            live counts seen."""
            seen = []
            deadline = time.monotonic() + seconds
            while True:
                n = live(p.pool())
                seen.append(n)
                if until is not None and until(n):
                    return seen
                if time.monotonic() > deadline:
                    if until is not None:
                        raise Fail("timed out waiting for %s; pool sizes seen: %s"
                                   % (what, seen[-20:]))
                    return seen
                time.sleep(0.02)

        # Phase A: pool_size 2 under load.
        seen = sample(PHASE)
        check(max(seen) == 2 and seen[-1] == 2,
              "pool_size 2 under load: live backend connections seen %s" % sorted(set(seen)))
        s0 = p.stats()
        c0 = s0["counters"]
        ok_a = load.ok

        # Phase B: grow to 8 (min_pool_size 8 makes it eager).
        p.reload(base_settings(pool_size=8, min_pool_size=8),
                 r"reloaded .*\(pool_size=8, ")
        seen = sample(5, until=lambda n: n == 8, what="8 live backend connections")
        seen += sample(PHASE)
        check(max(seen) <= 8, "pool exceeded pool_size 8: sizes seen %s" % sorted(set(seen)))
        check(seen[-1] == 8, "pool did not stay at 8: %s" % seen[-10:])
        # (a slow machine may still be completing handshakes)
        wait_until(lambda: p.pool()["connecting"] == 0, 5, "the 8 connections' handshakes")
        s1 = p.stats()
        check_eq(live(s1["pools"][0]), 8, "live backend connections at pool_size 8")
        check_eq(s1["pools"][0]["poolSize"], 8, "pools[0].poolSize after growing")
        check_eq(s1["counters"]["backend_connects"] - c0["backend_connects"], 6,
                 "backend connections opened while growing 2 -> 8")
        check_eq(s1["counters"]["backend_disconnects"] - c0["backend_disconnects"], 0,
                 "backend connections closed while growing")
        ok_b = load.ok
        check(ok_b > ok_a, "no query completed while the pool grew")

        # Phase C: shrink back to 2.
        p.reload(base_settings(pool_size=2, min_pool_size=0), r"reloaded .*\(pool_size=2, ")
        sample(5, until=lambda n: n <= 2, what="the pool to shrink to 2")
        seen = sample(PHASE)
        check(max(seen) <= 2, "pool above pool_size 2 after shrinking: sizes seen %s"
              % sorted(set(seen)))
        s2 = p.stats()
        check_eq(s2["pools"][0]["poolSize"], 2, "pools[0].poolSize after shrinking")
        check_eq(s2["counters"]["backend_disconnects"] - c0["backend_disconnects"], 6,
                 "backend connections closed while shrinking 8 -> 2")
        check_eq(s2["counters"]["backend_connects"] - c0["backend_connects"], 6,
                 "backend connections opened in all (none while shrinking)")
        check(load.ok > ok_b, "no query completed after the pool shrank")
        check_eq(len(re.findall(r"closing: pool shrank \(pool_size = 2\)", p.log_text())), 6,
                 "'pool shrank' lines in the log")
    finally:
        load.stop()
        try:
            load_client.mongoplex_ops.drop_collection(coll)
        except Exception:  # noqa: BLE001
            pass

    check(load.failed == 0, "%d of %d queries failed during the reloads; first errors: %s"
          % (load.failed, load.ok + load.failed, load.errors))
    check(load.ok >= 500, "only %d queries ran: the load was too light to mean anything"
          % load.ok)
    s3 = p.stats()
    c3, g3 = s3["counters"], s3["gauges"]
    # No client was dropped: pymongo would have reconnected, accepting a new one.
    check_eq(c3["clients_accepted"], c0["clients_accepted"],
             "clients_accepted (connections accepted since before the first reload)")
    check_eq(g3["clients"], want_clients, "gauges.clients after the reloads")
    check_eq(c3["clients_closed_error"], 0, "counters.clients_closed_error")
    check_eq(c3["requests_errors"], 0, "counters.requests_errors")
    check_eq(c3["backend_errors"], 0, "counters.backend_errors")
    check_eq(c3["reloads"], 2, "counters.reloads")
    check_eq(c3["reload_failures"], 0, "counters.reload_failures")
    closing = [ln for ln in p.log_lines() if CLIENT_CLOSING.search(ln)]
    check(not closing, "clients were closed during the reloads: %s" % closing[:5])
    load_client.close()


# ---------------------------------------------------------------- saturated shrink

def test_shrink_saturated():
    """Shrinking must not depend on idle moments: with every backend exchange
    taking 20 ms and 16 clients on 8 connections, a request is always waiting
    when a connection finishes; the pool must still come down to pool_size."""
    be = SlowBackend({"sat": 0.02})
    load_client = None
    load = None
    try:
        p = Proxy("reload-saturated", base_settings(backend_uri=be.uri, pool_size=8)).start()
        load_client = p.client(maxPoolSize=32)
        load = Load(load_client, "sat", threads=N_THREADS, inserts=False).start()
        wait_until(lambda: p.pool()["active"] == 8 and p.pool()["waiting"] > 0, 10,
                   "8 busy backend connections with requests waiting")
        c0 = p.stats()["counters"]
        ok0 = load.ok
        p.reload(base_settings(backend_uri=be.uri, pool_size=2), r"reloaded .*\(pool_size=2, ")
        t0 = time.monotonic()
        seen = []

        def shrunk():
            q = p.pool()
            seen.append((live(q), q["waiting"]))
            return live(q) <= 2

        try:
            wait_until(shrunk, 3, "the saturated pool to shrink from 8 to pool_size 2")
        except Fail as e:
            raise Fail("%s: (live, waiting) seen %s (surplus connections are only retired "
                       "when idle, and under saturation they never are)"
                       % (e, sorted(set(seen))[-5:]))
        took = time.monotonic() - t0
        time.sleep(0.3)
        check(live(p.pool()) <= 2, "the pool grew back above 2: %r" % p.pool())
        check(load.ok > ok0, "no query completed after the shrink")
        load.stop()
        check(load.failed == 0, "%d queries failed; first errors: %s"
              % (load.failed, load.errors))
        c1 = p.stats()["counters"]
        check_eq(c1["backend_disconnects"] - c0["backend_disconnects"], 6,
                 "backend connections closed by the shrink (took %.2f s)" % took)
        check_eq(c1["clients_accepted"], c0["clients_accepted"], "clients_accepted")
    finally:
        if load is not None:
            load.stop()
        if load_client is not None:
            load_client.close()
        be.stop()


# ---------------------------------------------------------------- invalid file

def reject(p, settings, extra_lines, expect_msg):
    """Write settings + extra_lines (the last one bad), SIGHUP, expect the
    rejection naming the file and the bad line's number."""
    lines = p.write_config(settings, extra_lines)
    lineno = len(lines)  # the bad line is the last one
    mark = p.log_size()
    p.signal(signal.SIGHUP)
    p.wait_log(r"reload rejected, keeping the current config: %s:%d: %s"
               % (re.escape(p.cfg_path), lineno, re.escape(expect_msg)), 5, since=mark)
    check("reloaded" not in p.log_text(since=mark), "a rejected file was also 'reloaded'")


def test_invalid_file():
    p = Proxy("reload-invalid", base_settings()).start()
    one_query(p)
    check_eq(live(p.pool()), 1, "backend connections after one query")
    # Valid new values first, then one bad line: nothing of it may apply.
    bad = base_settings(pool_size=5, min_pool_size=5, log_level="debug")
    reject(p, bad, ["pool_size = banana"], 'pool_size: "banana" is not an integer')
    reject(p, bad, ["this line is not a setting"],
           "syntax error (expected key = value or [section])")
    reject(p, bad, ["pool_sizee = 4"], 'unknown setting "pool_sizee"')
    reject(p, bad, ["max_queue = 0"], "max_queue: 0 is out of range")
    mark = p.log_size()
    time.sleep(0.5)  # 5 janitor ticks: min_pool_size 5, if applied, would connect
    one_query(p)
    s = p.stats()
    check_eq(s["pools"][0]["poolSize"], 2, "pools[0].poolSize after rejected reloads")
    check_eq(live(s["pools"][0]), 1, "backend connections after rejected reloads "
             "(min_pool_size 5 from a rejected file must not apply)")
    check_eq(s["counters"]["reload_failures"], 4, "counters.reload_failures")
    check_eq(s["counters"]["reloads"], 0, "counters.reloads")
    check(not DEBUG_LINE.search(p.log_text(since=mark)),
          "debug lines appeared: log_level=debug from a rejected file applied")
    # Still reloadable afterwards.
    p.reload(base_settings(pool_size=3), r"reloaded .*\(pool_size=3, ")
    s = p.stats()
    check_eq(s["pools"][0]["poolSize"], 3, "pools[0].poolSize after a valid reload")
    check_eq(s["counters"]["reloads"], 1, "counters.reloads after a valid reload")


# ---------------------------------------------------------------- static settings

def test_static_settings():
    p = Proxy("reload-static", base_settings()).start()
    old_port = p.port
    one_query(p)
    new_port, new_metrics = free_port(), free_port()
    mark = p.log_size()
    p.reload(base_settings(listen_port=new_port, backend_uri="mongodb://127.0.0.1:1/",
                           metrics_listen="127.0.0.1:%d" % new_metrics, pool_size=3),
             r"reloaded .*\(pool_size=3, ")
    log = p.log_text(since=mark)
    for key, kept, ignored in (("listen_port", "0", str(new_port)),
                               ("backend_uri", backend_uri(), "mongodb://127.0.0.1:1/"),
                               ("metrics_listen", "", "127.0.0.1:%d" % new_metrics)):
        line = ('reload: %s cannot change at runtime (restart needed); keeping "%s", '
                'ignoring "%s"' % (key, kept, ignored))
        check(line in log, "missing log line: %s" % line)
    check(port_open(old_port), "the proxy no longer listens on its port %d" % old_port)
    check(not port_open(new_port), "the proxy listens on the new listen_port %d" % new_port)
    check(not port_open(new_metrics), "the proxy opened the new metrics_listen port")
    one_query(p)  # through the old port, to the old backend
    s = p.stats()
    check_eq(s["pools"][0]["poolSize"], 3, "pools[0].poolSize (reloadable part applied)")
    check_eq(s["pools"][0]["host"], backend_uri().split("//")[1].rstrip("/"),
             "pools[0].host (backend kept)")
    check_eq(s["counters"]["backend_connect_failures"], 0, "backend_connect_failures")


# ---------------------------------------------------------------- log level

def test_log_level():
    p = Proxy("reload-loglevel", base_settings()).start()
    one_query(p)
    check(not DEBUG_LINE.search(p.log_text()), "debug lines at log_level=info")
    m = p.reload(base_settings(log_level="debug"), r"reloaded .*log_level=debug\)\n")
    after = p.log_size()
    one_query(p)
    p.wait_log(r"debug C-\d+ \S+: connected", 3, since=after)
    m = p.reload(base_settings(log_level="info"), r"reloaded .*log_level=info\)\n")
    text = p.log_text()
    quiet_from = text.rindex(m.group(0)) + len(m.group(0))
    one_query(p)
    time.sleep(0.2)
    later = p.log_text()[quiet_from:]
    check(not DEBUG_LINE.search(later), "debug lines after switching back to info: %s"
          % DEBUG_LINE.findall(later)[:3])


if __name__ == "__main__":
    run_subtests([("reload_under_load", test_under_load),
                  ("reload_shrink_saturated", test_shrink_saturated),
                  ("reload_invalid_file", test_invalid_file),
                  ("reload_static_settings", test_static_settings),
                  ("reload_log_level", test_log_level)])
