#!/usr/bin/env python3
"""The /metrics endpoint faces whatever can reach metrics_listen: it must not
buffer what it is sent, must not keep connections open for clients that never
finish, serves only GET/HEAD of /metrics, and logs the address it really
bound (port 0).

Requests are sent on raw sockets (the point is to send what a browser or
Prometheus would not). Figures (RSS growth, time until a connection is cut)
are printed; the only time limits asserted are generous hang guards.

Backend: MONGOPLEX_TEST_URI (not used by the endpoint; the proxy needs one).
"""

import os
import re
import select
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opslib import Fail, Proxy, backend_uri, check, check_eq, free_port, run_subtests  # noqa: E402

GUARD_S = 30  # hang guard: a connection the proxy should cut is cut well before
TIMEOUT_MS = 2000  # metrics_timeout_ms in the timeout subtests


def start_proxy(name, **settings):
    mport = settings.pop("mport", None) or free_port()
    cfg = {"listen_addr": "127.0.0.1", "listen_port": 0, "backend_uri": backend_uri(),
           "pool_size": 2, "metrics_listen": "127.0.0.1:%s" % mport, "log_level": "info"}
    cfg.update(settings)
    p = Proxy(name, cfg).start()
    m = p.wait_log(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", 10)
    p.mport = int(m.group(1))
    return p


def status_kb(p, field):
    with open("/proc/%d/status" % p.proc.pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise Fail("no %s in /proc/%d/status" % (field, p.proc.pid))


def connect(p, timeout=GUARD_S):
    s = socket.create_connection(("127.0.0.1", p.mport), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_response(s, head_only=False):
    """One reply: up to the end of its body (Content-Length; `head_only`: none)
    or until the proxy closes. Returns (status, or None if closed without a
    reply; headers dict; body)."""
    data = b""
    status, headers, body = None, {}, b""
    while True:
        if b"\r\n\r\n" in data:
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
            check(m is not None, "not an HTTP status line: %r" % lines[0])
            status = int(m.group(1))
            headers = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                headers[k.strip().lower()] = v.strip()
            want = 0 if head_only else int(headers.get("content-length", -1))
            if want >= 0 and len(body) >= want:
                return status, headers, body
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return status, headers, body
        data += chunk


def request(p, raw, head_only=False):
    s = connect(p)
    try:
        s.sendall(raw)
        return read_response(s, head_only)
    finally:
        s.close()


def wait_closed(s, guard=GUARD_S):
    """Seconds until the peer closes s (EOF or reset), reading and discarding
    whatever it sends; fails after `guard` seconds."""
    t0 = time.monotonic()
    s.setblocking(False)
    while True:
        left = guard - (time.monotonic() - t0)
        if left <= 0:
            raise Fail("the proxy kept the connection open for more than %d s" % guard)
        r, _, _ = select.select([s], [], [], left)
        if r:
            try:
                if not s.recv(65536):
                    return time.monotonic() - t0
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - t0
            except BlockingIOError:
                pass


def get(p, path="/metrics", method="GET"):
    return request(p, ("%s %s HTTP/1.1\r\nHost: x\r\n\r\n" % (method, path)).encode(),
                   head_only=method == "HEAD")


# ---------------------------------------------------------------- subtests

def test_huge_post_not_buffered():
    """A 300 MB POST (streamed, with Content-Length) is refused when its
    headers arrive: the proxy does not read the body, let alone buffer it."""
    p = start_proxy("metrics-post")
    hwm0, rss0 = status_kb(p, "VmHWM"), status_kb(p, "VmRSS")
    total = 300 * 1024 * 1024
    chunk = b"x" * (1 << 16)
    s = connect(p)
    s.sendall(("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
               "Content-Type: application/octet-stream\r\n\r\n" % total).encode())
    sent, closed_early = 0, False
    t0 = time.monotonic()
    try:
        while sent < total:
            check(time.monotonic() - t0 < 120, "still sending the body after 120 s")
            s.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        closed_early = True
    status, _, _ = read_response(s) if not closed_early else (None, {}, b"")
    s.close()
    hwm1, rss1 = status_kb(p, "VmHWM"), status_kb(p, "VmRSS")
    print("  300 MB POST: sent %.1f MB before the proxy %s; status %s; proxy VmRSS %d -> %d kB,"
          " peak (VmHWM) %d -> %d kB (+%d kB)"
          % (sent / 1048576.0, "closed the connection" if closed_early else "read it all",
             status, rss0, rss1, hwm0, hwm1, hwm1 - hwm0), flush=True)
    check(closed_early or status in (405, 413),
          "the whole 300 MB body was accepted (status %s)" % status)
    check(hwm1 - hwm0 < 8 * 1024,
          "proxy peak RSS grew by %d kB during a 300 MB POST" % (hwm1 - hwm0))
    check_eq(get(p)[0], 200, "GET /metrics after the POST")


def test_huge_chunked_post_not_buffered():
    """The same without Content-Length: chunked transfer encoding, 1 MB chunks."""
    p = start_proxy("metrics-chunked")
    hwm0 = status_kb(p, "VmHWM")
    s = connect(p)
    s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n" % (1 << 20) + b"y" * (1 << 20) + b"\r\n"
    sent, closed_early = 0, False
    try:
        while sent < 300 * (1 << 20):
            s.sendall(piece)
            sent += 1 << 20
        s.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        closed_early = True
    status = None if closed_early else read_response(s)[0]
    s.close()
    hwm1 = status_kb(p, "VmHWM")
    print("  chunked POST: sent %.1f MB; status %s; peak RSS +%d kB"
          % (sent / 1048576.0, status, hwm1 - hwm0), flush=True)
    check(closed_early or status in (405, 413), "300 MB chunked body accepted (%s)" % status)
    check(hwm1 - hwm0 < 8 * 1024, "proxy peak RSS grew by %d kB" % (hwm1 - hwm0))


def test_oversized_headers():
    p = start_proxy("metrics-headers")
    s = connect(p)
    closed_early = False
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        for i in range(64):
            s.sendall(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000))
        s.sendall(b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        closed_early = True
    status = None if closed_early else read_response(s)[0]
    s.close()
    print("  64 KB of headers: %s" % ("closed while sending" if closed_early
                                       else "status %s" % status), flush=True)
    check(closed_early or status is None or 400 <= status < 500,
          "64 KB of headers answered %s" % status)
    # One huge request line, too.
    status, _, _ = request(p, b"GET /metrics?" + b"q" * 65536 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    check(status is None or 400 <= status < 500, "64 KB request line answered %s" % status)
    check_eq(get(p)[0], 200, "GET /metrics after them")


def test_methods_and_paths():
    p = start_proxy("metrics-methods")
    for method in ("PUT", "DELETE", "POST", "PATCH", "OPTIONS"):
        raw = "%s /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" % method
        status, headers, _ = request(p, raw.encode())
        check_eq(status, 405, "%s /metrics status" % method)
        check_eq(headers.get("allow"), "GET, HEAD", "%s /metrics Allow header" % method)
    for path in ("/other", "/", "/metricsx"):
        check_eq(get(p, path)[0], 404, "GET %s status" % path)
    s = connect(p)
    s.sendall(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    status, headers, body = read_response(s, head_only=True)
    check_eq(status, 200, "HEAD /metrics status")
    check(int(headers.get("content-length", 0)) > 0, "HEAD /metrics Content-Length")
    rest = body
    while True:  # the reply closes the connection: nothing may follow the headers
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    s.close()
    check_eq(rest[:60], b"", "HEAD /metrics body")
    status, headers, body = get(p)
    check_eq(status, 200, "GET /metrics status")
    check(b"mongoplex_requests_total" in body, "GET /metrics body lacks the counters")
    check_eq(headers.get("connection"), "close", "Connection header of a reply")


def test_half_sent_request_cut():
    p = start_proxy("metrics-halfsent", metrics_timeout_ms=TIMEOUT_MS)
    s = connect(p)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
    t = wait_closed(s)
    s.close()
    print("  half-sent request closed after %.2f s (metrics_timeout_ms = %d)" % (t, TIMEOUT_MS),
          flush=True)
    idle = connect(p)  # sends nothing at all
    t = wait_closed(idle)
    idle.close()
    print("  idle connection closed after %.2f s" % t, flush=True)
    p.wait_log(r"metrics: 127\.0\.0\.1:\d+: closed: not done after %d ms" % TIMEOUT_MS, 5)


def test_half_sent_request_cut_by_default():
    """Without any metrics setting: the default timeout applies."""
    p = start_proxy("metrics-halfsent-default")
    s = connect(p)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    t = wait_closed(s)
    s.close()
    print("  half-sent request closed after %.2f s (default metrics_timeout_ms)" % t, flush=True)


def test_slowloris_cut():
    """A header byte every 0.5 s: each read comes well within any per-read
    timeout, so only a total deadline cuts it."""
    p = start_proxy("metrics-slowloris", metrics_timeout_ms=TIMEOUT_MS)
    s = connect(p)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    t0 = time.monotonic()
    sent = 0
    closed = False
    s.setblocking(False)
    while time.monotonic() - t0 < GUARD_S:
        r, _, _ = select.select([s], [], [], 0.5)
        if r:
            try:
                if not s.recv(65536):
                    closed = True
                    break
            except (ConnectionResetError, BlockingIOError):
                closed = True
                break
        try:
            s.send(b"a")
            sent += 1
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
    t = time.monotonic() - t0
    s.close()
    check(closed, "a client sending a header byte every 0.5 s was served for %d s" % GUARD_S)
    print("  slowloris (1 byte / 0.5 s) cut after %.2f s, %d bytes sent" % (t, sent), flush=True)


def test_connection_bound():
    p = start_proxy("metrics-bound", metrics_max_connections=2, metrics_timeout_ms=60000)
    held = [connect(p), connect(p)]
    for s in held:  # half-sent: open until metrics_timeout_ms
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
    third = connect(p)
    third.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    status, _, _ = read_response(third)
    third.close()
    check_eq(status, None, "reply on a connection over metrics_max_connections")
    p.wait_log(r"closed at once: 2 connections open \(metrics_max_connections\)", 5)
    for s in held:
        s.close()

    def served():
        return get(p)[0] == 200
    deadline = time.monotonic() + GUARD_S
    while not served():
        check(time.monotonic() < deadline, "GET /metrics refused after the held connections closed")
        time.sleep(0.1)


def test_port_zero_logged():
    p = start_proxy("metrics-port0", mport="0")
    check(p.mport != 0, "the log names port 0")
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://127.0.0.1:%d/metrics" % p.mport], capture_output=True,
                       text=True, timeout=GUARD_S)
    check_eq(r.stdout, "200", "curl on the logged port")


if __name__ == "__main__":
    run_subtests([("metrics_huge_post_not_buffered", test_huge_post_not_buffered),
                  ("metrics_huge_chunked_post_not_buffered", test_huge_chunked_post_not_buffered),
                  ("metrics_oversized_headers", test_oversized_headers),
                  ("metrics_methods_and_paths", test_methods_and_paths),
                  ("metrics_half_sent_request_cut", test_half_sent_request_cut),
                  ("metrics_half_sent_request_cut_by_default",
                   test_half_sent_request_cut_by_default),
                  ("metrics_slowloris_cut", test_slowloris_cut),
                  ("metrics_connection_bound", test_connection_bound),
                  ("metrics_port_zero_logged", test_port_zero_logged)])
