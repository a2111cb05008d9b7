#!/usr/bin/python3
"""retry_pymongo.py — what pymongo does with mongoplex's overload refusal.

    python3 retry_pymongo.py PROXY_URI --expect no-retry|backpressure --mock MOCK_URI

Run by test_admission.c (admission::pymongo_*) against a proxy with
pool_size = 1 and max_queue = 1 in front of mock_backend.py (maxWireVersion 9),
once with Debian's pymongo 3.11 (/usr/bin/python3, --expect no-retry) and,
when available, once with a pymongo >= 4.17 from PyPI (--expect backpressure).
Exit status 0 = the observed behaviour is the expected one documented below
(so a pymongo upgrade that changes it fails the test); output: one line per
finding.

How the overload is produced, with no timing involved: two helper clients
(retries off) send finds; the first is on a collection "h_<KEY>_..." that
the mock holds unanswered until this script sends {mockRelease: KEY} to the
mock directly (MOCK_URI), so it holds the proxy's only backend connection for
exactly as long as the script needs; the second waits behind it and fills
the queue (max_queue = 1). Any further request is refused at once by the
proxy with

    {ok: 0, code: 462, codeName: "IngressRequestRateLimitExceeded",
     errorLabels: ["SystemOverloadedError", "RetryableError"], errmsg: "... max_queue ..."}

and never reaches the backend. The number of attempts a driver made is
counted twice: by a pymongo CommandListener (commands started) and by the
proxy's counters.refused_queue_full. The overload lasts until released, so
the counts do not depend on the driver's random backoff or on machine load;
the "brief overload" case releases it from the CommandListener's failed
event of the first refused attempt (before the driver backs off) and waits
until the proxy's pool and queue are empty, so the retry finds the overload
gone: exactly 2 attempts, 1 refused.

Observed behaviour (asserted here, so a change of pymongo fails the test):

pymongo 3.11 (Debian python3-pymongo 3.11.0), retryReads/retryWrites on (the
default):
  - find: raises OperationFailure(code 462) after ONE attempt. Its retryable
    reads (MongoClient._retryable_read) retry once only on ConnectionFailure
    or on an OperationFailure whose code is in helpers._RETRYABLE_ERROR_CODES
    (NotMaster/shutdown codes, 6, 7, 89, 9001, 262); error labels are not
    consulted for reads, and 462 is not in the list.
  - insert: raises after ONE attempt. Retryable writes need sessions on a
    replica set or mongos (not this standalone), and even there 3.11 retries
    only on RetryableWriteError (labels, wire >= 9) or the code list (wire
    < 9); SystemOverloadedError/RetryableError are unknown to it.
  The labels are still visible to the application: exc.has_error_label(
  "SystemOverloadedError") is True, so an application can back off itself.

pymongo 4.0 .. 4.16 behave like 3.11 here (4.16.0 source: reads retry on
the same code list, writes only on RetryableWriteError).

pymongo >= 4.17 (checked with the 4.17.0 source and 4.20.1 at run time)
implements the client-backpressure spec: MongoClient option
max_adaptive_retries (default 2), backoff = random() * min(0.1 s *
2^attempt, 10 s) (4.20 also takes the 0.1 s from a baseBackoffMS field of
the error document; 4.17 does not):
  - find with SystemOverloadedError + RetryableError: retried with backoff, up
    to max_adaptive_retries times (3 attempts in all by default), then raises
    the 462 error if the overload persists.
  - insert: the same, even on a standalone without retryable writes: the
    RetryableError label says the operation was not executed, so any write
    is retried (mongoplex only attaches it to requests it never forwarded).
  - when the overload clears during the backoff, the retried read succeeds
    (second attempt).
  - retryReads=False turns the read retries off.
"""

import sys
import threading
import time

import pymongo
from pymongo import monitoring
from pymongo.errors import OperationFailure

failures = []


def note(msg):
    print(msg, flush=True)


def check(cond, msg):
    if not cond:
        failures.append(msg)
        note("FAIL " + msg)
    return cond


class Attempts(monitoring.CommandListener):
    """Counts commands started, by name."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.on_overload = None  # called once, from the first 462 failure

    def started(self, event):
        with self.lock:
            self.counts[event.command_name] = self.counts.get(event.command_name, 0) + 1

    def succeeded(self, event):
        pass

    def failed(self, event):
        hook = self.on_overload
        if hook is not None and (event.failure or {}).get("code") == 462:
            self.on_overload = None
            hook()

    def take(self, name):
        with self.lock:
            return self.counts.pop(name, 0)


def plain_client(uri, **kw):
    opts = dict(retryReads=False, retryWrites=False, serverSelectionTimeoutMS=10000,
                connectTimeoutMS=10000, socketTimeoutMS=60000)
    opts.update(kw)
    return pymongo.MongoClient(uri, **opts)


class Proxy:
    def __init__(self, uri, mock_uri):
        self.uri = uri
        self.admin = plain_client(uri)
        self.mock = plain_client(mock_uri)

    def release(self, key):
        """Lets the mock answer the requests held under KEY (sent to it directly)."""
        return self.mock.admin.command("mockRelease", key)["released"]

    def wait_drained(self, timeout=10):
        """Until no backend connection is busy and nothing waits (after a release)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.stats()
            if st["pools"][0]["active"] == 0 and st["gauges"]["requests_waiting"] == 0:
                return True
            time.sleep(0.01)
        return False

    def stats(self):
        return self.admin.admin.command("mongoplexStats")

    def refused(self):
        return self.stats()["counters"]["refused_queue_full"]

    def wait_saturated(self, timeout=10):
        """Until the only connection is busy and the queue (max_queue 1) is full."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.stats()
            if st["pools"][0]["active"] == 1 and st["gauges"]["requests_waiting"] == 1:
                return True
            time.sleep(0.01)
        return False


def saturate(proxy, key):
    """Start the two blockers, the first held by the mock until proxy.release(key);
    returns their threads and results (join after the release)."""
    results = {}

    def one(k):
        c = plain_client(proxy.uri)
        # k = 0 holds the connection until released; k = 1 only sits in the queue
        coll = ("h_%s_0" % key) if k == 0 else ("fast_%s1" % key)
        try:
            results[k] = c.adm[coll].find_one({"n": k})
        except Exception as e:  # noqa: BLE001
            results[k] = e
        finally:
            c.close()

    threads = []
    for k in range(2):
        t = threading.Thread(target=one, args=(k,), daemon=True)
        t.start()
        threads.append(t)
        # the first takes the connection, the second the queue slot
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            st = proxy.stats()
            if st["pools"][0]["active"] + st["gauges"]["requests_waiting"] >= k + 1:
                break
            time.sleep(0.01)
    ok = check(proxy.wait_saturated(), "%s: proxy never saturated (pool busy + queue full)" % key)
    return threads, results, ok


def unblock(proxy, key, threads, results):
    """Release KEY, wait for the blockers, check they got their answers."""
    proxy.release(key)
    for t in threads:
        t.join(30)
    for k in range(2):
        r = results.get(k)
        check(isinstance(r, dict) and r.get("n") == k,
              "%s: blocker %d did not get its answer: %s" % (key, k, describe(r)))


def attempt(proxy, listener, name, op):
    """Run op(); returns (result or exception, attempts by listener, refusals by proxy, s)."""
    listener.take(name)
    r0 = proxy.refused()
    t0 = time.monotonic()
    try:
        out = op()
    except Exception as e:  # noqa: BLE001
        out = e
    secs = time.monotonic() - t0
    return out, listener.take(name), proxy.refused() - r0, secs


def describe(out):
    if isinstance(out, OperationFailure):
        return "OperationFailure code %s labels %s" % (
            out.code, (out.details or {}).get("errorLabels"))
    if isinstance(out, Exception):
        return "%s: %s" % (type(out).__name__, out)
    return "result %r" % (out,)


def is_overload(out):
    return (isinstance(out, OperationFailure) and out.code == 462
            and out.has_error_label("SystemOverloadedError")
            and out.has_error_label("RetryableError")
            and "max_queue" in str(out))


def main():
    if len(sys.argv) != 6 or sys.argv[2] != "--expect" or \
            sys.argv[3] not in ("no-retry", "backpressure") or sys.argv[4] != "--mock":
        sys.exit("usage: retry_pymongo.py PROXY_URI --expect no-retry|backpressure --mock MOCK_URI")
    uri = sys.argv[1]
    backpressure = sys.argv[3] == "backpressure"
    note("pymongo %s (%s): expecting %s" % (
        pymongo.version, pymongo.__file__,
        "retries with backoff on SystemOverloadedError (client backpressure)" if backpressure
        else "no retry on the 462 overload error"))
    proxy = Proxy(uri, sys.argv[5])
    listener = Attempts()
    # The defaults: retryReads=True, retryWrites=True.
    app = pymongo.MongoClient(uri, event_listeners=[listener], serverSelectionTimeoutMS=10000)
    app.admin.command("ping")  # handshake done before the overload
    check(app.adm.fast.find_one({"n": 0}) is not None, "find before the overload failed")

    # ---- persistent overload (held until released): read, then write
    threads, results, ok = saturate(proxy, "hold")
    if ok:
        out, n, refused, secs = attempt(proxy, listener, "find",
                                        lambda: app.adm.fast.find_one({"n": 1}))
        note("find under overload: %s after %d attempt(s), %d refused by the proxy, %.2f s"
             % (describe(out), n, refused, secs))
        check(is_overload(out), "find: expected the 462 overload error, got " + describe(out))
        want = 3 if backpressure else 1
        check(n == want, "find: %d attempts, expected %d" % (n, want))
        check(refused == n, "find: proxy refused %d, driver attempted %d" % (refused, n))

        out, n, refused, secs = attempt(proxy, listener, "insert",
                                        lambda: app.adm.fast.insert_one({"n": 2}))
        note("insert under overload: %s after %d attempt(s), %d refused by the proxy, %.2f s"
             % (describe(out), n, refused, secs))
        check(is_overload(out), "insert: expected the 462 overload error, got " + describe(out))
        check(n == want, "insert: %d attempts, expected %d" % (n, want))
        check(refused == n, "insert: proxy refused %d, driver attempted %d" % (refused, n))

        if backpressure:
            noretry = pymongo.MongoClient(uri, event_listeners=[listener], retryReads=False,
                                          serverSelectionTimeoutMS=10000)
            noretry.admin.command("ping")
            out, n, refused, secs = attempt(proxy, listener, "find",
                                            lambda: noretry.adm.fast.find_one({"n": 3}))
            note("find with retryReads=False: %s after %d attempt(s)" % (describe(out), n))
            check(is_overload(out) and n == 1,
                  "retryReads=False: expected one attempt and the 462 error")
            noretry.close()
    unblock(proxy, "hold", threads, results)

    # ---- brief overload (backpressure drivers only): cleared right after the
    # first refusal, before the driver backs off; the retry succeeds.
    if backpressure:
        threads, results, ok = saturate(proxy, "brief")
        if ok:
            drained = []

            def clear():
                proxy.release("brief")
                drained.append(proxy.wait_drained())

            listener.on_overload = clear
            out, n, refused, secs = attempt(proxy, listener, "find",
                                            lambda: app.adm.fast.find_one({"n": 4}))
            listener.on_overload = None
            note("find under an overload cleared after its first refusal: %s after %d "
                 "attempt(s), %d refused, %.2f s" % (describe(out), n, refused, secs))
            check(drained == [True], "the proxy did not drain after the release: %r" % drained)
            check(isinstance(out, dict) and out.get("n") == 4,
                  "the retried find did not succeed: " + describe(out))
            check(n == 2 and refused == 1,
                  "expected 1 refused attempt then success: %d attempts, %d refused"
                  % (n, refused))
        unblock(proxy, "brief", threads, results)

    check(app.adm.fast.find_one({"n": 5}) is not None, "find after the overload failed")
    app.close()
    note("%s: %d problem(s)" % ("FAIL" if failures else "PASS", len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
