"""Driver monitoring through mongoplex with real drivers (pymongo 4 and the
Node.js driver): streaming (awaitable) hello in effect, and a drain that the
drivers notice.

Subtests (tests/ops/opslib.py runner, one PASS/FAIL line each):
  heartbeats_pymongo   idle for MONITOR_IDLE_S (default 10) seconds with pymongo
                       in its default (streaming) mode and in polling mode;
                       streaming must show awaited heartbeats, polling none.
                       Prints heartbeat events and the messages the proxy got.
  heartbeats_node      the same with the Node.js driver (its default: stream).
  heartbeats_java      the same with the Java driver 5.14 (ServerMonitorListener,
                       ServerHeartbeatSucceededEvent.isAwaited; java/MonitorJava.java
                       in source-file mode on $MONITOR_JAVA_JAR, the modern jar).
  heartbeats_go        the same with the Go driver v2.8.2 (event.ServerMonitor,
                       ServerHeartbeatSucceededEvent.Awaited; go/, built by test.sh
                       into $MONITOR_GO_BIN).
  heartbeats_go1       the same with the Go driver v1.17.10 (the modern suite's
                       go1 binary, $MONITOR_GO1_BIN, in its monitor mode).
  heartbeats_rust      the same with the Rust driver 3.9.1 (SdamEvent handler,
                       ServerHeartbeatSucceededEvent.awaited; the monitor mode of
                       the modern suite's binary, $MONITOR_RUST_BIN).
  drain_pymongo        two proxies (advertise_mongos = on) in one seed list,
                       8 threads of find/insert; SIGTERM one; 0 failed
                       operations (the driver's own retries allowed), the
                       SIGTERMed proxy exits 0, the other serves the rest.
                       Prints the time from SIGTERM to the driver's last
                       command sent to the draining proxy.
  drain_pymongo_polling  the same with pymongo polling (serverMonitoringMode=poll):
                       the drivers learn from the retryable refusals instead.
  drain_node           the same with the Node.js driver.
  lb_pymongo, lb_node  loadBalanced=true URIs: accepted (serviceId), cursors of
                       many batches identical to direct, 12 concurrent cursors
                       each pinning a backend connection (pool_size 14) all
                       complete; the starvation case is test_lb_pin.c.

Run: MONGOPLEX_TEST_URI=... MONGOPLEX_BIN=... <pymongo4 venv>/bin/python
tests/drivers/monitoring/test_monitoring.py [SUBTEST...]
MONITOR_OLD_PROXY=1: leave out advertise_mongos (to measure a proxy before it,
e.g. the heartbeat subtests with MONGOPLEX_BIN=/work/base/build/mongoplex).
MONITOR_NODE_MODULES: node_modules holding the `mongodb` package (default
tests/drivers/node_modules, installed by tests/drivers' npm ci).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tests", "ops"))

import pymongo  # noqa: E402
from pymongo import monitoring  # noqa: E402

from opslib import Fail, Proxy, backend_uri, check, check_eq, run_subtests  # noqa: E402

IDLE_S = float(os.environ.get("MONITOR_IDLE_S", "10"))
# heartbeatFrequencyMS of the idle windows (drivers' default: 10000; CI: 2000
# so that a 10 s window sees several streamed replies).
HEARTBEAT_MS = int(os.environ.get("MONITOR_HEARTBEAT_MS", "2000"))
NODE_MODULES = os.environ.get("MONITOR_NODE_MODULES") or os.path.join(
    ROOT, "tests", "drivers", "node_modules")
NODE = os.environ.get("MONITOR_NODE", "node")


def proxy(name, **extra):
    settings = {"listen_addr": "127.0.0.1", "listen_port": 0, "backend_uri": backend_uri(),
                "pool_size": 4, "log_level": "info", "advertise_mongos": "on",
                "shutdown_timeout_ms": 10000}
    settings.update(extra)
    if os.environ.get("MONITOR_OLD_PROXY") == "1":  # a proxy without these settings
        del settings["advertise_mongos"]
    return Proxy(name, settings).start()


def counters(p):
    c = p.stats()["counters"]
    return {k: c.get(k, 0) for k in ("requests_total", "hellos_awaited",
                                      "hello_stream_replies")}


class Heartbeats(monitoring.ServerHeartbeatListener):
    """Counts heartbeat events; `awaited` ones are streaming replies."""

    def __init__(self):
        self.lock = threading.Lock()
        self.n = {"started": 0, "succeeded": 0, "awaited": 0, "failed": 0}

    def started(self, event):
        with self.lock:
            self.n["started"] += 1

    def succeeded(self, event):
        with self.lock:
            self.n["succeeded"] += 1
            if event.awaited:
                self.n["awaited"] += 1

    def failed(self, event):
        with self.lock:
            self.n["failed"] += 1

    def figures(self):
        with self.lock:
            return dict(self.n)


def idle_window(p, mode):
    """pymongo idle on p for IDLE_S seconds; heartbeat figures + proxy deltas."""
    hb = Heartbeats()
    kw = {} if mode == "stream" else {"serverMonitoringMode": "poll"}
    c = pymongo.MongoClient(p.uri, event_listeners=[hb], serverSelectionTimeoutMS=5000,
                            heartbeatFrequencyMS=HEARTBEAT_MS, **kw)
    c.admin.command("ping")
    before = counters(p)
    time.sleep(IDLE_S)
    after = counters(p)
    figs = hb.figures()
    c.close()
    # The two stats calls themselves are requests: one each.
    figs["proxy_requests"] = after["requests_total"] - before["requests_total"] - 1
    figs["proxy_stream_replies"] = after["hello_stream_replies"] - before["hello_stream_replies"]
    return figs


def t_heartbeats_pymongo():
    p = proxy("hb-py")
    stream = idle_window(p, "stream")
    poll = idle_window(p, "poll")
    print("FIGURES heartbeats_pymongo idle=%.0fs heartbeatFrequencyMS=%d streaming=%s polling=%s"
          % (IDLE_S, HEARTBEAT_MS, json.dumps(stream), json.dumps(poll)), flush=True)
    check(stream["awaited"] >= 1, "pymongo did not stream: no awaited heartbeat in %.0f s (%s)"
          % (IDLE_S, stream))
    check_eq(stream["failed"], 0, "failed heartbeats (streaming)")
    check_eq(poll["awaited"], 0, "awaited heartbeats in polling mode")
    check(poll["succeeded"] >= 1, "no heartbeat in polling mode: %s" % poll)


def run_node(mode, *args, timeout=120):
    script = os.path.join(HERE, "monitor_node.js")
    env = dict(os.environ, NODE_PATH=NODE_MODULES)
    if not os.path.isdir(os.path.join(NODE_MODULES, "mongodb")):
        raise Fail("the Node.js driver is not installed in %s (npm ci in tests/drivers, or set "
                   "MONITOR_NODE_MODULES)" % NODE_MODULES)
    r = subprocess.run([NODE, script, mode] + [str(a) for a in args], env=env,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise Fail("monitor_node.js %s exited %d: %s %s" % (mode, r.returncode,
                                                           r.stdout[-2000:], r.stderr[-2000:]))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    check(lines, "monitor_node.js printed no result: %s" % r.stdout[-2000:])
    return json.loads(lines[-1])


def t_heartbeats_node():
    p = proxy("hb-node")
    before = counters(p)
    figs = run_node("heartbeats", p.uri, IDLE_S, HEARTBEAT_MS)
    after = counters(p)
    figs["proxy_requests"] = after["requests_total"] - before["requests_total"] - 1
    figs["proxy_stream_replies"] = after["hello_stream_replies"] - before["hello_stream_replies"]
    print("FIGURES heartbeats_node idle=%.0fs heartbeatFrequencyMS=%d %s"
          % (IDLE_S, HEARTBEAT_MS, json.dumps(figs)), flush=True)
    check(figs["awaited"] >= 1, "the Node.js driver did not stream: %s" % figs)
    check_eq(figs["failed"], 0, "failed heartbeats")


def run_json(cmd, what, timeout=180):
    """Runs a driver's monitor program; its last stdout line starting with { as a dict."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise Fail("%s exited %d: %s %s" % (what, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    check(lines, "%s printed no result: %s" % (what, r.stdout[-2000:]))
    return json.loads(lines[-1])


def heartbeats_program(name, cmd, what):
    """An idle window of an external driver program on a fresh proxy: awaited heartbeats."""
    p = proxy("hb-" + name)
    before = counters(p)
    figs = run_json(cmd + [p.uri, str(IDLE_S), str(HEARTBEAT_MS)], what)
    after = counters(p)
    figs["proxy_requests"] = after["requests_total"] - before["requests_total"] - 1
    figs["proxy_stream_replies"] = after["hello_stream_replies"] - before["hello_stream_replies"]
    print("FIGURES heartbeats_%s idle=%.0fs heartbeatFrequencyMS=%d %s"
          % (name, IDLE_S, HEARTBEAT_MS, json.dumps(figs)), flush=True)
    check(figs["awaited"] >= 1, "the %s driver did not stream: no awaited heartbeat: %s" % (name, figs))
    check(figs["proxy_stream_replies"] >= 1, "the proxy streamed no hello reply: %s" % figs)
    check_eq(figs["failed"], 0, "failed heartbeats")


def t_heartbeats_java():
    jar = os.environ.get("MONITOR_JAVA_JAR", "")
    if not os.path.isfile(jar):
        raise Fail("no Java driver jar %r (MONITOR_JAVA_JAR; tests/drivers/install.sh builds "
                   "mongoplex-modern-java.jar)" % jar)
    heartbeats_program("java", ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", jar,
                                os.path.join(HERE, "java", "MonitorJava.java")], "MonitorJava.java")


def t_heartbeats_go():
    exe = os.environ.get("MONITOR_GO_BIN", "")
    if not os.access(exe, os.X_OK):
        raise Fail("no Go monitor binary %r: %s" % (exe, os.environ.get("MONITOR_GO_ERR", "set MONITOR_GO_BIN")))
    heartbeats_program("go", [exe], "mongoplex-monitor-go")


def t_heartbeats_go1():
    exe = os.environ.get("MONITOR_GO1_BIN", "")
    if not os.access(exe, os.X_OK):
        raise Fail("no Go driver v1 binary %r (MONITOR_GO1_BIN; tests/drivers/install.sh builds "
                   "mongoplex-modern-go1)" % exe)
    heartbeats_program("go1", [exe, "monitor"], "mongoplex-modern-go1 monitor")


def t_heartbeats_rust():
    exe = os.environ.get("MONITOR_RUST_BIN", "")
    if not os.access(exe, os.X_OK):
        raise Fail("no Rust driver binary %r: %s" % (exe, os.environ.get(
            "MONITOR_RUST_ERR", "set MONITOR_RUST_BIN (tests/drivers/install.sh builds mongoplex-modern-rust)")))
    heartbeats_program("rust", [exe, "monitor"], "mongoplex-modern-rust monitor")


class Commands(monitoring.CommandListener):
    """When each command started, and where."""

    def __init__(self):
        self.lock = threading.Lock()
        self.starts = []  # (monotonic, port)
        self.failures = []  # (monotonic, port, code)

    def started(self, e):
        with self.lock:
            self.starts.append((time.monotonic(), e.connection_id[1]))

    def succeeded(self, e):
        pass

    def failed(self, e):
        with self.lock:
            code = getattr(e.failure, "get", lambda k, d=None: d)("code") \
                if isinstance(e.failure, dict) else None
            self.failures.append((time.monotonic(), e.connection_id[1], code))


class Load:
    def __init__(self, client, threads=8):
        self.coll = client.get_database("mp_monitor")["drain"]
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.ok = self.failed = 0
        self.errors = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True)
                        for i in range(threads)]

    def run(self, idx):
        i = 0
        while not self.stop_ev.is_set():
            i += 1
            try:
                if i % 4 == 0:
                    self.coll.insert_one({"t": idx, "i": i})
                else:
                    self.coll.find_one({"t": idx, "i": i - 1})
                with self.lock:
                    self.ok += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                with self.lock:
                    self.failed += 1
                    if len(self.errors) < 5:
                        self.errors.append("%s: %s" % (type(e).__name__, e))

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(60)
        check(not any(t.is_alive() for t in self.threads), "load threads did not stop")


def wait_served(p, n=20, timeout=60):
    """Until p has forwarded n requests (the load reached it)."""
    deadline = time.monotonic() + timeout
    while p.stats()["counters"]["requests_forwarded"] < n:
        check(time.monotonic() < deadline, "the load did not reach %s within %d s" % (p.uri, timeout))
        time.sleep(0.1)
    p.close_clients()


def drain_check(a, b, figs):
    """Common assertions after a drain: a exited 0, b served, 0 failures."""
    print("FIGURES %s" % json.dumps(figs), flush=True)
    check_eq(figs["failed_ops"], 0, "failed operations (%s)" % figs.get("errors"))
    check(figs["ops_to_b_after_sigterm"] > 0, "the other proxy served nothing after the SIGTERM")
    rc = a.wait_exit(30)
    check_eq(rc, 0, "exit status of the drained proxy")


def t_drain_pymongo(mode="stream"):
    a, b = proxy("drain-a"), proxy("drain-b")
    cmds = Commands()
    uri = "mongodb://127.0.0.1:%d,127.0.0.1:%d/?localThresholdMS=1000" % (a.port, b.port)
    kw = {} if mode == "stream" else {"serverMonitoringMode": "poll"}
    c = pymongo.MongoClient(uri, event_listeners=[cmds], serverSelectionTimeoutMS=10000, **kw)
    c.mp_monitor.drain.drop()
    load = Load(c)
    load.start()
    wait_served(a)
    with cmds.lock:
        check(any(port == a.port for _, port in cmds.starts),
              "the driver sent nothing to the first proxy before the SIGTERM")
    t0 = time.monotonic()
    a.signal(signal.SIGTERM)
    time.sleep(4)
    load.stop()
    c.close()
    with cmds.lock:
        to_a = [t for t, port in cmds.starts if port == a.port and t >= t0]
        to_b = [t for t, port in cmds.starts if port == b.port and t >= t0]
        fails_a = [f for f in cmds.failures if f[1] == a.port and f[0] >= t0]
    figs = {"driver": "pymongo %s (%s)" % (pymongo.version, mode), "ok_ops": load.ok,
            "failed_ops": load.failed, "errors": load.errors,
            "commands_to_a_after_sigterm": len(to_a),
            "command_errors_at_a_after_sigterm (retried)": len(fails_a),
            "ms_until_last_command_to_a": round((max(to_a) - t0) * 1000, 1) if to_a else 0.0,
            "ops_to_b_after_sigterm": len(to_b)}
    drain_check(a, b, figs)


def t_drain_node():
    a, b = proxy("drain-na"), proxy("drain-nb")
    uri = "mongodb://127.0.0.1:%d,127.0.0.1:%d/?localThresholdMS=1000" % (a.port, b.port)
    res = {}

    def kill_later():
        wait_served(a)
        res["t0"] = time.time() * 1000
        a.signal(signal.SIGTERM)

    k = threading.Thread(target=kill_later)
    k.start()
    out = run_node("drain", uri, 12.0)
    k.join()
    t0 = res["t0"]
    to_a = [t for t, port in out["starts"] if port == a.port and t >= t0]
    to_b = [t for t, port in out["starts"] if port == b.port and t >= t0]
    before_a = [t for t, port in out["starts"] if port == a.port and t < t0]
    check(before_a, "the driver sent nothing to the first proxy before the SIGTERM")
    figs = {"driver": "node %s" % out["driver"], "ok_ops": out["ok"],
            "failed_ops": out["failed"], "errors": out["errors"],
            "commands_to_a_after_sigterm": len(to_a),
            "command_errors_at_a_after_sigterm (retried)":
                len([f for f in out["failures"] if f[1] == a.port and f[0] >= t0]),
            "ms_until_last_command_to_a": round(max(to_a) - t0, 1) if to_a else 0.0,
            "ops_to_b_after_sigterm": len(to_b)}
    drain_check(a, b, figs)


# ---- load-balanced mode (load-balancers.md): the proxy is the load balancer

def lb_uri(p):
    return "mongodb://127.0.0.1:%d/?loadBalanced=true" % p.port


def lb_docs(client, coll, n):
    c = client.get_database("mp_monitor")[coll]
    c.drop()
    c.insert_many([{"_id": i, "v": "x%d" % i} for i in range(n)])
    return c


def t_lb_pymongo():
    """loadBalanced=true: serviceId accepted (the driver refuses a hello
    without it), cursors of many batches, identical to direct; 12 cursors
    open at once, each pinning a backend connection (pool_size 14 leaves
    room for 13 pins): all complete. The starvation case (more cursors than
    pool_size) is tests/integration/test_lb_pin.c."""
    p = proxy("lb-py", pool_size=14)
    c = pymongo.MongoClient(lb_uri(p), serverSelectionTimeoutMS=10000, socketTimeoutMS=60000)
    direct = pymongo.MongoClient(backend_uri(), serverSelectionTimeoutMS=10000)
    coll = lb_docs(c, "lb_py", 200)
    check_eq(c.topology_description.topology_type_name, "LoadBalanced", "topology type")
    via = list(coll.find({}, batch_size=7).sort("_id", 1))
    dir_ = list(direct.mp_monitor.lb_py.find({}, batch_size=7).sort("_id", 1))
    check_eq(via, dir_, "200 documents in batches of 7 through the proxy vs direct")
    # 12 cursors open at once, each read one batch at a time, interleaved.
    curs = [coll.find({}, batch_size=5).sort("_id", 1) for _ in range(12)]
    got = [[] for _ in curs]
    for _ in range(45):
        for i, cur in enumerate(curs):
            if len(got[i]) < 200:
                got[i].append(next(cur))
    for i, cur in enumerate(curs):
        got[i].extend(cur)
    for g in got:
        check_eq([d["_id"] for d in g], list(range(200)), "an interleaved cursor's documents")
    # The same with 12 threads at once, each draining its own cursor.
    errs, results = [], []

    def reader():
        try:
            results.append(len(list(coll.find({}, batch_size=3))))
        except Exception as e:  # noqa: BLE001
            errs.append("%s: %s" % (type(e).__name__, e))

    ts = [threading.Thread(target=reader) for _ in range(12)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    check(not any(t.is_alive() for t in ts), "concurrent cursors deadlocked")
    check_eq(errs, [], "errors of concurrent cursors")
    check_eq(results, [200] * 12, "documents per concurrent cursor")
    st = p.stats()
    print("FIGURES lb_pymongo cursors=25 pool_size=14 backend_connects=%s cursor_requests=%s "
          "lb_pins_opened=%s" % (st["pools"][0]["connectsOk"], st["counters"]["cursor_requests"],
                                 st["counters"].get("lb_pins_opened")), flush=True)
    check(st["pools"][0]["connectsOk"] <= 14, "more backend connections than pool_size")
    check(st["counters"].get("lb_pins_opened", 0) >= 12, "the cursors did not pin")
    c.close()
    direct.close()


def t_lb_node():
    p = proxy("lb-node", pool_size=14)
    out = run_node("lb", lb_uri(p), backend_uri())
    print("FIGURES lb_node %s" % json.dumps(out), flush=True)
    check_eq(out["same_as_direct"], True, "200 documents in batches of 7, proxy vs direct")
    check_eq(out["concurrent_counts"], [200] * 12, "12 concurrent cursors")
    check_eq(out["errors"], [], "errors")


SUBTESTS = [("heartbeats_pymongo", t_heartbeats_pymongo), ("heartbeats_node", t_heartbeats_node),
            ("heartbeats_java", t_heartbeats_java), ("heartbeats_go", t_heartbeats_go),
            ("heartbeats_go1", t_heartbeats_go1),
            ("heartbeats_rust", t_heartbeats_rust),
            ("drain_pymongo", t_drain_pymongo),
            ("drain_pymongo_polling", lambda: t_drain_pymongo("poll")),
            ("drain_node", t_drain_node),
            ("lb_pymongo", t_lb_pymongo), ("lb_node", t_lb_node)]

if __name__ == "__main__":
    want = sys.argv[1:]
    run_subtests([s for s in SUBTESTS if not want or s[0] in want])
