#!/usr/bin/env python3
"""Statistics: mongoplexStats (read with mongosh and pymongo) and the
Prometheus endpoint (read with curl) count known traffic exactly and agree
with each other.

Backend: MONGOPLEX_TEST_URI. mongosh: tests/drivers/node_modules/.bin/mongosh.
"""

import json
import math
import os
import re
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opslib import (MONGOSH, Fail, Proxy, backend_uri, check, check_eq,  # noqa: E402
                    free_port, raw_command, raw_connect, run_subtests)

N_FIND, N_INSERT = 100, 20
# Requests mongosh forwards around a snapshot (its startup commands, endSessions)
# plus the traffic test's drop.
MONGOSH_ALLOWANCE = 30
# mongoplexStats is answered by the proxy: it counts itself here and nowhere else.
SELF = {"requests_total": 1, "requests_local": 1}
PHASES = ("clients_idle", "clients_waiting", "clients_running")


# ---------------------------------------------------------------- readers

def unlong(v):
    """mongosh's JSON.stringify renders int64 as {low, high, unsigned}."""
    if isinstance(v, dict):
        if set(v) == {"low", "high", "unsigned"}:
            return (v["high"] << 32) | (v["low"] & 0xFFFFFFFF)
        if set(v) == {"$numberLong"}:
            return int(v["$numberLong"])
        return {k: unlong(x) for k, x in v.items()}
    if isinstance(v, list):
        return [unlong(x) for x in v]
    return v


def mongosh(uri, js, timeout=60):
    if not os.access(MONGOSH, os.X_OK):
        raise Fail("mongosh not found at %s (cd tests/drivers && npm ci --ignore-scripts)"
                   % MONGOSH)
    env = dict(os.environ, MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING="1")
    r = subprocess.run([MONGOSH, uri, "--quiet", "--norc", "--eval", js], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    check(r.returncode == 0, "mongosh failed (%d): %s %s" % (r.returncode, r.stdout[-500:],
                                                             r.stderr[-500:]))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    check(lines, "no JSON in mongosh output: %r" % r.stdout[-500:])
    return unlong(json.loads(lines[-1]))


def mongosh_stats(p):
    return mongosh(p.uri, "JSON.stringify(db.adminCommand({mongoplexStats: 1}))")


def curl(url):
    """GET url; returns (status, content_type, body)."""
    r = subprocess.run(["curl", "-sS", "--max-time", "5", "-o", "-", "-w",
                        "\n%{http_code} %{content_type}", url],
                       capture_output=True, text=True, timeout=15)
    check(r.returncode == 0, "curl %s failed: %s" % (url, r.stderr))
    body, _, tail = r.stdout.rpartition("\n")
    status, _, ctype = tail.partition(" ")
    return int(status), ctype, body


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
# Per-member families (labelled member="host:port"), from mongoplexStats' pools.
MEMBER_GAUGES = {"member_pool_size": "poolSize", "member_in_use": "inUse",
                 "member_idle": "idle", "member_connecting": "connecting",
                 "member_queued": "queued"}
# Per-pool families of the adaptive limit (pool/limit.c), labelled with the
# member (and db.user for per-user pools); their BSON twins in pools[].
POOL_GAUGES = {"pool_limit": "limit", "pool_inflight": "inflight", "pool_queued": "queued"}
POOL_FAMILIES = list(POOL_GAUGES) + ["pool_min_rtt_seconds"]


def parse_prom(text):
    """-> (samples {name or (name, le): float}, help {family: text},
    type {family: type}, problems [str])."""
    samples, helps, types, problems = {}, {}, {}, []
    for ln in text.splitlines():
        if ln.startswith("# HELP "):
            fam, _, txt = ln[7:].partition(" ")
            if fam in helps:
                problems.append("second HELP for %s" % fam)
            helps[fam] = txt
        elif ln.startswith("# TYPE "):
            fam, _, typ = ln[7:].partition(" ")
            if fam in types:
                problems.append("second TYPE for %s" % fam)
            types[fam] = typ
        elif ln.startswith("#") or not ln.strip():
            continue
        else:
            m = SAMPLE.match(ln)
            if m is None:
                problems.append("unparsable line %r" % ln)
                continue
            name, labels, val = m.groups()
            le = None
            if labels is not None:
                pairs = LABEL.findall(labels)
                if ",".join('%s="%s"' % kv for kv in pairs) != labels:
                    problems.append("unparsable labels %r" % ln)
                if [k for k, _ in pairs] == ["le"]:
                    le = pairs[0][1]
                else:
                    le = tuple(sorted(pairs))
            fam = name
            if isinstance(le, str) or re.search(r"_(sum|count)$", name):
                fam = re.sub(r"_(bucket|sum|count)$", "", name)
            if fam not in helps or fam not in types:
                problems.append("sample %s before/without HELP and TYPE of %s" % (name, fam))
            key = (name, le) if le is not None else name
            if key in samples:
                problems.append("duplicate sample %s" % (key,))
            samples[key] = float(val)
    return samples, helps, types, problems


def compare(prom_text, s, adjust_self):
    """Differences between Prometheus text and a mongoplexStats document taken
    with no traffic in between. With adjust_self, the client that sent the
    mongoplexStats request may appear in another phase than idle in `s`
    (it was busy sending that request); everything else must be equal."""
    samples, _, _, problems = parse_prom(prom_text)
    diffs = list(problems)
    for name, v in s["counters"].items():
        key = "mongoplex_%s_total" % name
        if key not in samples:
            diffs.append("%s missing" % key)
        elif samples[key] != v:
            diffs.append("%s = %s, counters.%s = %s" % (key, samples[key], name, v))
    g = dict(s["gauges"])
    if adjust_self:
        moved = [ph for ph in PHASES[1:]
                 if g[ph] == samples.get("mongoplex_" + ph, -1) + 1]
        if g["clients_idle"] == samples.get("mongoplex_clients_idle", -1) - 1 and moved:
            g["clients_idle"] += 1
            g[moved[0]] -= 1
    for name, v in g.items():
        key = "mongoplex_" + name
        if key not in samples:
            diffs.append("%s missing" % key)
        elif samples[key] != v:
            diffs.append("%s = %s, gauges.%s = %s" % (key, samples[key], name, v))
    for hname, h in s["histograms"].items():
        base = "mongoplex_" + hname
        cum = 0
        les = sorted((k for k in h["le"] if k != "+Inf"), key=float) + ["+Inf"]
        for le in les:
            cum += h["le"][le]
            if samples.get((base + "_bucket", le)) != cum:
                diffs.append('%s_bucket{le="%s"} = %s, cumulative BSON = %s'
                             % (base, le, samples.get((base + "_bucket", le)), cum))
        prom_les = {k[1] for k in samples if isinstance(k, tuple) and k[0] == base + "_bucket"}
        if prom_les != set(les):
            diffs.append("%s buckets %s, BSON %s" % (base, sorted(prom_les), les))
        if samples.get(base + "_count") != h["count"]:
            diffs.append("%s_count = %s, BSON count = %s" % (base, samples.get(base + "_count"),
                                                             h["count"]))
        psum = samples.get(base + "_sum")
        if psum is None or not math.isclose(psum, h["sum"], rel_tol=1e-5, abs_tol=1e-9):
            diffs.append("%s_sum = %s, BSON sum = %s" % (base, psum, h["sum"]))
    for pool in s["pools"]:
        for fam, field in MEMBER_GAUGES.items():
            key = ("mongoplex_" + fam, (("member", pool["host"]),))
            if samples.get(key) != pool[field]:
                diffs.append("%s = %s, pools[%s].%s = %s" % (key, samples.get(key),
                                                             pool["host"], field, pool[field]))
        for fam, field in POOL_GAUGES.items():
            key = ("mongoplex_" + fam, (("member", pool["host"]),))
            if samples.get(key) != pool[field]:
                diffs.append("%s = %s, pools[%s].%s = %s" % (key, samples.get(key),
                                                             pool["host"], field, pool[field]))
        key = ("mongoplex_pool_min_rtt_seconds", (("member", pool["host"]),))
        if samples.get(key) is None or not math.isclose(samples[key], pool["minRttMicros"] / 1e6,
                                                        abs_tol=1e-6):
            diffs.append("%s = %s, pools[%s].minRttMicros = %s" % (key, samples.get(key),
                                                                   pool["host"],
                                                                   pool["minRttMicros"]))
        key = ("mongoplex_member_info", (("member", pool["host"]), ("type", pool["type"])))
        if samples.get(key) != 1:
            diffs.append("%s missing" % (key,))
    return diffs


def quiet_window(s1, s2):
    """s1 and s2 bracket a scrape: nothing but the second mongoplexStats
    request may have changed anything."""
    changed = []
    for name, v in s1["counters"].items():
        if s2["counters"][name] - v != SELF.get(name, 0):
            changed.append("%s +%d" % (name, s2["counters"][name] - v))
    for name, v in s1["gauges"].items():
        if s2["gauges"][name] != v:
            changed.append("gauge %s %d -> %d" % (name, v, s2["gauges"][name]))
    if s1["histograms"] != s2["histograms"]:
        changed.append("histograms")
    return changed


def hist_consistent(h, what):
    check_eq(sum(h["le"].values()), h["count"], "%s: sum of buckets vs count" % what)
    check(h["sum"] >= 0 and (h["count"] > 0 or h["sum"] == 0),
          "%s: sum %s with count %s" % (what, h["sum"], h["count"]))


def start_proxy(name):
    mport = free_port()
    p = Proxy(name, {"listen_addr": "127.0.0.1", "listen_port": 0,
                     "backend_uri": backend_uri(), "pool_size": 4, "batching": "off",
                     "metrics_listen": "127.0.0.1:%d" % mport, "log_level": "info"}).start()
    p.metrics_url = "http://127.0.0.1:%d/metrics" % mport
    return p


def delta(a, b, name):
    return b["counters"][name] - a["counters"][name]


# ---------------------------------------------------------------- subtests

def traffic_command(sock, doc, what):
    r = raw_command(sock, doc)
    check_eq(r.get("ok"), 1.0, "%s: %r" % (what, r))
    return r


def test_traffic_counts():
    p = start_proxy("stats-traffic")
    m0 = mongosh_stats(p)
    coll = "stats_%s" % uuid.uuid4().hex[:8]
    # The measured traffic is the only connection to the proxy: one raw
    # socket, sending what pymongo's insert_one and find_one send. A driver
    # adds connections and requests of its own whenever its threads run:
    # pymongo's monitor and RTT monitor each open a connection and send
    # hellos, and the RTT monitor is started by the monitor thread after it
    # has woken up server selection, so on a busy machine it could connect
    # between the snapshots (clients_accepted +1, requests_local +1). Here
    # nothing but the requests below can change a counter: every delta is
    # exact.
    s = raw_connect(p.port)
    traffic_command(s, {"hello": 1, "$db": "admin"}, "hello")
    # Exact: the same connection reads the stats around the traffic.
    p0 = traffic_command(s, {"mongoplexStats": 1, "$db": "admin"}, "mongoplexStats")
    for i in range(N_INSERT):
        r = traffic_command(s, {"insert": coll, "documents": [{"n": i}], "ordered": True,
                                "$db": "mongoplex_ops"}, "insert")
        check_eq(r.get("n"), 1, "documents inserted by insert %d" % i)
    found = 0
    for i in range(N_FIND):
        r = traffic_command(s, {"find": coll, "filter": {"n": i % (N_INSERT * 2)}, "limit": 1,
                                "singleBatch": True, "$db": "mongoplex_ops"}, "find")
        check_eq(r["cursor"]["id"], 0, "cursor id of a single-batch find")
        found += len(r["cursor"]["firstBatch"])
    check_eq(found, sum(1 for i in range(N_FIND) if i % (N_INSERT * 2) < N_INSERT),
             "finds that matched")
    p1 = traffic_command(s, {"mongoplexStats": 1, "$db": "admin"}, "mongoplexStats")
    n = N_FIND + N_INSERT
    check_eq(delta(p0, p1, "requests_forwarded"), n, "requests_forwarded for %d finds + %d "
             "inserts (raw snapshots)" % (N_FIND, N_INSERT))
    # Local requests: the second stats request, and nothing else (no
    # driver monitors here).
    local = delta(p0, p1, "requests_local")
    check_eq(local, 1, "requests_local (the stats request)")
    check_eq(delta(p0, p1, "requests_total") - local, n,
             "requests_total - requests_local (the forwarded traffic)")
    for name in ("requests_errors", "backend_errors", "cursor_requests", "clients_accepted",
                 "batches_sent", "bad_messages", "stale_replies"):
        check_eq(delta(p0, p1, name), 0, "counters.%s during plain traffic" % name)
    check_eq(p1["pools"][0]["requestsDispatched"] - p0["pools"][0]["requestsDispatched"], n,
             "pools[0].requestsDispatched")
    traffic_command(s, {"drop": coll, "$db": "mongoplex_ops"}, "drop")
    q0, q1 = p0["histograms"]["queue_wait_ms"], p1["histograms"]["queue_wait_ms"]
    check_eq(q1["count"] - q0["count"], 0, "queue_wait_ms count for one-at-a-time traffic "
             "on a pool with an idle connection (nothing waited)")
    s.close()
    m1 = mongosh_stats(p)
    d = delta(m0, m1, "requests_forwarded")
    check(n <= d < n + MONGOSH_ALLOWANCE, "requests_forwarded grew by %d between the mongosh "
          "snapshots; expected %d..%d" % (d, n, n + MONGOSH_ALLOWANCE - 1))
    mc = m1["counters"]
    check_eq(mc["requests_errors"], 0, "counters.requests_errors (mongosh snapshot)")
    check_eq(mc["requests_total"], mc["requests_local"] + mc["requests_forwarded"]
             + mc["bad_messages"], "requests_total vs local + forwarded + bad_messages")
    check(m1["pools"][0]["requestsDispatched"] <= mc["requests_forwarded"],
          "pools[0].requestsDispatched above requests_forwarded (batching off)")
    for hname, h in m1["histograms"].items():
        hist_consistent(h, hname)
    check(m1["histograms"]["queue_wait_ms"]["count"] <= m1["counters"]["requests_forwarded"],
          "queue_wait_ms count above requests_forwarded")


MONGOSH_BRACKET = r"""
const cp = require("child_process");
const url = %s;
let last = null;
for (let i = 0; i < 30; i++) {
  const s1 = db.adminCommand({mongoplexStats: 1});
  const prom = cp.execFileSync("curl", ["-sS", "--max-time", "5", url]).toString();
  const s2 = db.adminCommand({mongoplexStats: 1});
  last = {attempt: i, s1: s1, prom: prom, s2: s2};
  // quiet: only the second stats request itself changed the counters
  const c1 = s1.counters, c2 = s2.counters;
  let quiet = JSON.stringify(s1.gauges) === JSON.stringify(s2.gauges);
  for (const k of Object.keys(c1)) {
    const d = Number(c2[k]) - Number(c1[k]);
    if (d !== ((k === "requests_total" || k === "requests_local") ? 1 : 0)) quiet = false;
  }
  if (quiet) break;
  sleep(100);
}
print(JSON.stringify(last));
"""


def test_prometheus_equals_bson_mongosh():
    p = start_proxy("stats-mongosh")
    c = p.client()
    c.mongoplex_ops.stats_probe.find_one({"x": 1})  # something in every counter family
    r = mongosh(p.uri, MONGOSH_BRACKET % json.dumps(p.metrics_url))
    s1, s2 = r["s1"], r["s2"]
    changed = quiet_window(s1, s2)
    check(not changed, "no quiet window in %d mongosh attempts; last one changed: %s"
          % (r["attempt"] + 1, changed))
    diffs = compare(r["prom"], s1, adjust_self=True)
    check(not diffs, "/metrics differs from mongoplexStats read by mongosh just before it: "
          + "; ".join(diffs[:10]))
    c.close()


def test_prometheus_equals_bson_pymongo():
    p = start_proxy("stats-pymongo")
    c = p.client()
    c.mongoplex_ops.stats_probe.find_one({"x": 1})
    p.stats()
    for attempt in range(20):
        s1 = p.stats()
        _, _, prom = curl(p.metrics_url)
        s2 = p.stats()
        if not quiet_window(s1, s2):
            break
    check(not quiet_window(s1, s2), "no quiet window: %s" % quiet_window(s1, s2))
    diffs = compare(prom, s1, adjust_self=True)
    check(not diffs, "/metrics differs from mongoplexStats just before it: "
          + "; ".join(diffs[:10]))
    # A scrape changes nothing: two scrapes in a row are identical.
    _, _, prom2 = curl(p.metrics_url)
    _, _, prom3 = curl(p.metrics_url)
    check(prom2 == prom3, "two consecutive scrapes differ")
    c.close()


def test_idle_gauges():
    """On an idle proxy the only request is the mongoplexStats being answered:
    it is not waiting for a backend connection nor running on one."""
    p = start_proxy("stats-idle")
    c = p.client()
    c.mongoplex_ops.stats_probe.find_one({"x": 1})
    p.stats()
    s = p.stats()
    g = s["gauges"]
    _, _, prom = curl(p.metrics_url)
    samples = parse_prom(prom)[0]
    check_eq(g["requests_waiting"], 0, "gauges.requests_waiting on an idle proxy")
    check_eq(g["servers_active"], 0, "gauges.servers_active on an idle proxy")
    check_eq(samples["mongoplex_clients_waiting"], 0, "mongoplex_clients_waiting (idle proxy)")
    bad = ["%s=%d" % (ph, g[ph]) for ph in ("clients_waiting", "clients_running") if g[ph]]
    check(not bad and g["clients_idle"] == g["clients"],
          "mongoplexStats on an idle proxy reports %s (clients=%d, clients_idle=%d, "
          "requests_waiting=0): the stats request counts itself as a client waiting for a "
          "backend connection" % (", ".join(bad) or "-", g["clients"], g["clients_idle"]))
    c.close()


def test_metrics_format():
    p = start_proxy("stats-format")
    c = p.client()
    c.mongoplex_ops.stats_probe.find_one({"x": 1})
    s = p.stats()
    status, ctype, body = curl(p.metrics_url)
    check_eq(status, 200, "GET /metrics status")
    check(ctype.startswith("text/plain") and "version=0.0.4" in ctype,
          "GET /metrics Content-Type %r" % ctype)
    samples, helps, types, problems = parse_prom(body)
    check(not problems, "format problems: %s" % problems[:10])
    want = {}
    want.update({"mongoplex_%s_total" % k: "counter" for k in s["counters"]})
    want.update({"mongoplex_%s" % k: "gauge" for k in s["gauges"]})
    want.update({"mongoplex_%s" % k: "histogram" for k in s["histograms"]})
    want.update({"mongoplex_%s" % k: "gauge" for k in list(MEMBER_GAUGES) + ["member_info"]})
    want.update({"mongoplex_%s" % k: "gauge" for k in POOL_FAMILIES})
    check_eq(types, want, "metric families and their TYPE (one per BSON counter, gauge, "
             "histogram)")
    check_eq(set(helps), set(want), "families with a HELP line")
    empty = [f for f, t in helps.items() if not t.strip()]
    check(not empty, "empty HELP text for %s" % empty)
    sample_fams = set()
    for key in samples:
        name = key[0] if isinstance(key, tuple) else key
        fam = name if name in want else re.sub(r"_(bucket|sum|count)$", "", name)
        sample_fams.add(fam)
    check_eq(sample_fams, set(want), "families with samples")
    for path in ("/", "/metricsx", "/metrics/extra", "/stats"):
        st, _, _ = curl(p.metrics_url.replace("/metrics", path))
        check_eq(st, 404, "GET %s status" % path)
    c.close()


if __name__ == "__main__":
    run_subtests([("stats_traffic_counts", test_traffic_counts),
                  ("stats_prometheus_equals_bson_mongosh", test_prometheus_equals_bson_mongosh),
                  ("stats_prometheus_equals_bson_pymongo", test_prometheus_equals_bson_pymongo),
                  ("stats_metrics_format", test_metrics_format),
                  ("stats_idle_gauges", test_idle_gauges)])
