// monitor_node.js — the Node.js driver's side of tests/drivers/monitoring:
//   node monitor_node.js heartbeats URI SECONDS HEARTBEAT_MS
//       idle for SECONDS (heartbeatFrequencyMS = HEARTBEAT_MS); prints {started, succeeded, awaited, failed}
//   node monitor_node.js drain URI SECONDS
//       8 concurrent loops of findOne/insertOne for SECONDS (the caller
//       SIGTERMs one proxy meanwhile); prints {ok, failed, errors,
//       starts: [[epoch ms, port], ...], failures: [[epoch ms, port, code]]}
//   node monitor_node.js lb URI DIRECT_URI
//       loadBalanced=true: a cursor of many batches vs direct, 12 concurrent
//       cursors; prints {same_as_direct, concurrent_counts, errors}
// The driver comes from NODE_PATH (tests/drivers/node_modules).
'use strict';
const { MongoClient } = require('mongodb');
const driverVersion = require('mongodb/package.json').version;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function heartbeats(uri, seconds, hbms) {
  const n = { started: 0, succeeded: 0, awaited: 0, failed: 0 };
  const c = new MongoClient(uri, { serverSelectionTimeoutMS: 5000, heartbeatFrequencyMS: hbms });
  c.on('serverHeartbeatStarted', () => n.started++);
  c.on('serverHeartbeatSucceeded', (e) => { n.succeeded++; if (e.awaited) n.awaited++; });
  c.on('serverHeartbeatFailed', () => n.failed++);
  await c.db('admin').command({ ping: 1 });
  for (const k of Object.keys(n)) n[k] = 0;
  await sleep(seconds * 1000);
  await c.close();
  n.driver = driverVersion;
  return n;
}

function portOf(address) {
  const m = /:(\d+)$/.exec(String(address));
  return m ? Number(m[1]) : 0;
}

async function drain(uri, seconds) {
  const out = { ok: 0, failed: 0, errors: [], starts: [], failures: [], driver: driverVersion };
  const c = new MongoClient(uri, { serverSelectionTimeoutMS: 10000, monitorCommands: true });
  c.on('commandStarted', (e) => out.starts.push([Date.now(), portOf(e.address)]));
  c.on('commandFailed', (e) =>
    out.failures.push([Date.now(), portOf(e.address), e.failure && e.failure.code]));
  const coll = c.db('mp_monitor').collection('drain_node');
  await coll.deleteMany({});
  const end = Date.now() + seconds * 1000;
  async function loop(t) {
    for (let i = 1; Date.now() < end; i++) {
      try {
        if (i % 4 === 0) await coll.insertOne({ t, i });
        else await coll.findOne({ t, i: i - 1 });
        out.ok++;
      } catch (e) {
        out.failed++;
        if (out.errors.length < 5) out.errors.push(`${e.name}: ${e.message}`);
      }
    }
  }
  await Promise.all([...Array(8).keys()].map(loop));
  await c.close();
  return out;
}

async function lb(uri, directUri) {
  const out = { errors: [], driver: driverVersion };
  const c = new MongoClient(uri, { serverSelectionTimeoutMS: 10000 });
  const d = new MongoClient(directUri, { serverSelectionTimeoutMS: 10000 });
  const coll = c.db('mp_monitor').collection('lb_node');
  await coll.deleteMany({});
  await coll.insertMany([...Array(200).keys()].map((i) => ({ _id: i, v: `x${i}` })));
  const via = await coll.find({}, { batchSize: 7 }).sort({ _id: 1 }).toArray();
  const dir = await d.db('mp_monitor').collection('lb_node').find({}, { batchSize: 7 })
    .sort({ _id: 1 }).toArray();
  out.same_as_direct = JSON.stringify(via) === JSON.stringify(dir);
  out.concurrent_counts = await Promise.all([...Array(12).keys()].map(async () => {
    try {
      return (await coll.find({}, { batchSize: 3 }).toArray()).length;
    } catch (e) {
      out.errors.push(`${e.name}: ${e.message}`);
      return -1;
    }
  }));
  await c.close();
  await d.close();
  return out;
}

(async () => {
  const [mode, uri, seconds, hbms] = process.argv.slice(2);
  let r;
  if (mode === 'heartbeats') r = await heartbeats(uri, Number(seconds), Number(hbms));
  else if (mode === 'lb') r = await lb(uri, seconds);
  else r = await drain(uri, Number(seconds));
  console.log(JSON.stringify(r));
})().catch((e) => { console.error(e); process.exit(1); });
