"""Shared helpers for the operational tests (tests/ops/test_*.py).

Each test starts its own mongoplex (MONGOPLEX_BIN, default build/mongoplex)
with its own config file in a temporary directory, on a port the proxy picks
(listen_port = 0, read back from the "listening on" log line), and reads the
proxy's stderr log. The backend is MONGOPLEX_TEST_URI unless a test brings its
own (mockupdb).

A test script is a list of subtests run in order by run_subtests(); each
prints one line, "PASS name (1.2 s)" or "FAIL name: reason", which
tests/ops/run.sh counts. On failure the tail of the proxy log is printed.
"""

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import bson
import pymongo

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("MONGOPLEX_BIN") or os.path.join(ROOT, "build", "mongoplex")
MONGOSH = os.environ.get("MONGOPLEX_MONGOSH") or os.path.join(
    ROOT, "tests", "drivers", "node_modules", ".bin", "mongosh")

# Every client the tests use: no retries (a retried failure would go
# unnoticed), short timeouts (a hang fails the test instead of the runner).
CLIENT_OPTS = dict(retryReads=False, retryWrites=False, serverSelectionTimeoutMS=5000,
                   connectTimeoutMS=5000, socketTimeoutMS=20000)


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def check_eq(actual, expected, what):
    if actual != expected:
        raise Fail("%s: expected %r, got %r" % (what, expected, actual))


def backend_uri():
    uri = os.environ.get("MONGOPLEX_TEST_URI")
    if not uri:
        raise Fail("MONGOPLEX_TEST_URI is not set (tests/ops/run.sh starts a backend)")
    return uri


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(pred, timeout, what, interval=0.02):
    """Poll pred() until it returns a true value; return it, or fail with `what`."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise Fail("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def port_open(port, host="127.0.0.1"):
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Proxy:
    """One mongoplex process with its config file and log in a temp dir."""

    instances = []  # the proxies of the running subtest (stopped after it)

    def __init__(self, name, settings):
        self.dir = tempfile.mkdtemp(prefix="mongoplex-ops-%s-" % name)
        self.cfg_path = os.path.join(self.dir, "mongoplex.ini")
        self.log_path = os.path.join(self.dir, "mongoplex.log")
        self.settings = dict(settings)
        self.proc = None
        self.port = None
        self._admin = None
        self.write_config(self.settings)
        Proxy.instances.append(self)

    # ---- config

    def write_config(self, settings, extra_lines=()):
        """Write [mongoplex] + `key = value` lines (+ raw extra lines) atomically.
        Returns the file's lines (index + 1 = line number)."""
        lines = ["[mongoplex]"]
        lines += ["%s = %s" % (k, v) for k, v in settings.items()]
        lines += list(extra_lines)
        tmp = self.cfg_path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, self.cfg_path)
        return lines

    def reload(self, settings, expect=r"reloaded ", timeout=5, extra_lines=()):
        """Rewrite the config, SIGHUP, wait for the log line matching `expect`
        that appears after the signal. Returns the match."""
        self.settings = dict(settings)
        self.write_config(settings, extra_lines)
        mark = self.log_size()
        self.proc.send_signal(signal.SIGHUP)
        return self.wait_log(expect, timeout, since=mark)

    # ---- process

    def start(self, timeout=10):
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen([BIN, "-c", self.cfg_path], stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=self.logf)
        m = self.wait_log(r"listening on 127\.0\.0\.1:(\d+)", timeout)
        self.port = int(m.group(1))
        return self

    @property
    def uri(self):
        return "mongodb://127.0.0.1:%d/" % self.port

    def client(self, **kw):
        opts = dict(CLIENT_OPTS)
        opts.update(kw)
        return pymongo.MongoClient(self.uri, **opts)

    def stats(self):
        """mongoplexStats over one long-lived pymongo connection (the request
        is answered by the proxy itself: it adds 1 to requests_total and
        requests_local, nothing else)."""
        if self._admin is None:
            self._admin = self.client(maxPoolSize=1, heartbeatFrequencyMS=60000)
        return self._admin.admin.command("mongoplexStats")

    def pool(self):
        return self.stats()["pools"][0]

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Fail("mongoplex did not exit within %.1f s" % timeout)

    def close_clients(self):
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def stop(self):
        """SIGINT if still running; returns a problem (str) or None: a non-zero
        exit status, or a sanitizer report in the log."""
        self.close_clients()
        if self.proc is None:
            return None
        problem = None
        if self.running():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                problem = "mongoplex did not exit within 10 s of SIGINT"
            if problem is None and self.proc.returncode != 0:
                problem = "mongoplex exited with status %d on SIGINT" % self.proc.returncode
        if not self.logf.closed:
            self.logf.close()
        m = re.search(r"(ERROR: \w+Sanitizer.*|runtime error: .*)", self.log_text())
        if m:
            problem = "sanitizer report in the log: %s" % m.group(1)
        return problem

    # ---- log

    def log_size(self):
        try:
            return os.path.getsize(self.log_path)
        except OSError:
            return 0

    def log_text(self, since=0):
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode("utf-8", "replace")

    def log_lines(self, since=0):
        return self.log_text(since).splitlines()

    def wait_log(self, pattern, timeout, since=0):
        rx = re.compile(pattern)

        def found():
            m = rx.search(self.log_text(since))
            if m is None and self.proc is not None and self.proc.poll() is not None:
                m = rx.search(self.log_text(since))
                if m is None:
                    raise Fail("mongoplex exited (status %s) before logging /%s/"
                               % (self.proc.returncode, pattern))
            return m

        return wait_until(found, timeout, "log line /%s/" % pattern)


# ---- raw OP_MSG on a plain socket (a connection that stays open across a signal)

OP_MSG = 2013
_req_id = [1000]


def op_msg(doc, request_id=None):
    if request_id is None:
        _req_id[0] += 1
        request_id = _req_id[0]
    body = struct.pack("<I", 0) + b"\x00" + bson.BSON.encode(doc)
    return struct.pack("<iiii", 16 + len(body), request_id, 0, OP_MSG) + body, request_id


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise Fail("connection closed by mongoplex after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return buf


def raw_send(sock, doc):
    """Send one OP_MSG command; returns its requestID."""
    msg, rid = op_msg(doc)
    sock.sendall(msg)
    return rid


def raw_recv(sock, rid):
    """Read one OP_MSG reply (must answer `rid`); returns the document."""
    hdr = _recv_exact(sock, 16)
    length, _, response_to, opcode = struct.unpack("<iiii", hdr)
    rest = _recv_exact(sock, length - 16)
    check_eq(opcode, OP_MSG, "reply opcode")
    check_eq(response_to, rid, "reply responseTo")
    check_eq(rest[4], 0, "reply section kind")
    return bson.BSON(rest[5:]).decode()


def raw_command(sock, doc):
    """Send one OP_MSG command, return the reply document."""
    return raw_recv(sock, raw_send(sock, doc))


def raw_connect(port, timeout=10, rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


# ---- a backend with slow replies

class SlowBackend:
    """mockupdb backend: a find on a collection in `delays` is answered after
    that many seconds (from a thread: mockupdb serialises its handlers), with
    one document {coll, n} echoing the filter's n (plus a `pad` string of
    big[coll] bytes if given). Everything else: ok: 1."""

    def __init__(self, delays, big=None):
        self.delays = delays
        self.big = big or {}
        self.lock = threading.Lock()
        self.received = {c: 0 for c in delays}
        self.replied_at = {c: [] for c in delays}
        from mockupdb import MockupDB  # python3-mockupdb; only the tests that need it

        self.server = MockupDB(request_timeout=30)
        self.server.autoresponds(self._handle)
        self.port = self.server.run()
        self.uri = "mongodb://127.0.0.1:%d/" % self.port

    def _handle(self, req):
        name = (req.command_name or "").lower()
        if name in ("ismaster", "hello"):
            return req.ok(ismaster=True, isWritablePrimary=True, minWireVersion=0,
                          maxWireVersion=8, maxBsonObjectSize=16 * 1024 * 1024,
                          maxMessageSizeBytes=48000000, maxWriteBatchSize=100000)
        if name == "find" and req.doc.get("find") in self.delays:
            coll = req.doc["find"]
            n = (req.doc.get("filter") or {}).get("n")
            with self.lock:
                self.received[coll] += 1

            def later():
                time.sleep(self.delays[coll])
                doc = {"coll": coll, "n": n}
                if coll in self.big:
                    doc["pad"] = "x" * self.big[coll]
                try:
                    req.ok(cursor={"id": 0, "ns": "ops.%s" % coll, "firstBatch": [doc]})
                    with self.lock:
                        self.replied_at[coll].append(time.monotonic())
                except OSError:
                    pass  # the proxy is gone (shutdown_timeout test)

            threading.Thread(target=later, daemon=True).start()
            return True
        return req.ok()

    def count(self, coll):
        with self.lock:
            return self.received[coll]

    def replies(self, coll):
        with self.lock:
            return list(self.replied_at[coll])

    def stop(self):
        self.server.stop()


# ---- load generator

class Load:
    """`threads` threads doing find_one (and every 4th time insert_one) in a
    loop through one MongoClient; counts operations and failures (with the
    first few errors)."""

    def __init__(self, client, coll, threads=16, inserts=True):
        self.client = client
        self.inserts = inserts
        self.coll = coll
        self.nthreads = threads
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.failed = 0
        self.errors = []
        self.threads = []

    def _run(self, idx):
        coll = self.client.get_database("mongoplex_ops")[self.coll]
        i = 0
        while not self.stop_ev.is_set():
            i += 1
            try:
                if self.inserts and i % 4 == 0:
                    coll.insert_one({"t": idx, "i": i})
                else:
                    coll.find_one({"t": idx, "i": i - 1})
                with self.lock:
                    self.ok += 1
            except Exception as e:  # noqa: BLE001 - every failure counts
                with self.lock:
                    self.failed += 1
                    if len(self.errors) < 5:
                        self.errors.append("%s: %s" % (type(e).__name__, e))

    def start(self):
        for i in range(self.nthreads):
            t = threading.Thread(target=self._run, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(30)
        check(not any(t.is_alive() for t in self.threads), "load threads did not stop")


# ---- subtest runner

def run_subtests(subtests):
    """Run (name, fn) pairs in order; print PASS/FAIL lines; exit 1 if any failed.
    A subtest also fails if one of its proxies then exits uncleanly on SIGINT or
    logged a sanitizer report (ASan builds)."""
    failed = 0
    for name, fn in subtests:
        Proxy.instances = []
        t0 = time.monotonic()
        reason = None
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            if isinstance(e, Fail):
                reason = str(e)
            else:
                reason = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
        for p in Proxy.instances:
            try:
                problem = p.stop()
            except Exception as e:  # noqa: BLE001
                problem = "stopping mongoplex: %s" % e
            if problem and reason is None:
                reason = problem
        if reason is None:
            print("PASS %s (%.1f s)" % (name, time.monotonic() - t0), flush=True)
            for p in Proxy.instances:
                shutil.rmtree(p.dir, ignore_errors=True)
            continue
        failed += 1
        print("FAIL %s: %s" % (name, reason), flush=True)
        for p in Proxy.instances:  # their directories are kept
            if not os.path.exists(p.log_path):
                continue
            lines = p.log_lines()
            print("  --- last %d of %d lines of %s" % (min(40, len(lines)), len(lines),
                                                      p.log_path))
            for line in lines[-40:]:
                print("  | " + line)
    sys.exit(1 if failed else 0)
