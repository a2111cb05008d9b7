#!/usr/bin/env node
// Cross-driver smoke test, Node.js driver flavour.
//
// Runs the same operations against MONGOPLEX_PROXY_URI (through mongoplex) and
// MONGOPLEX_DIRECT_URI (straight to the backend) and checks that every answer
// through the proxy is byte-for-byte the same BSON as the answer obtained
// directly (documents are fetched with `raw: true`).  Writes go through the
// proxy and are read back both ways, and vice versa.
//
// Exit status: 0 all matched, 1 some operation differed, 2 setup/connection error.
'use strict';

const crypto = require('crypto');
const {
  MongoClient, ObjectId, Long, Double, Binary, BSON
} = require('mongodb');

const DRIVER = 'node';
const DEFAULT_DB = 'mongoplex_smoke';
const TIMEOUTS = { serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000, socketTimeoutMS: 20000 };
const N_PROXY_MANY = 300;
const N_DIRECT_MANY = 150;
const FIND_BATCH = 7;
const AGG_BATCH = 2;
const RAW = { raw: true };

class Mismatch extends Error {}

function dbNameFromUri(uri) {
  const m = /^mongodb(?:\+srv)?:\/\/[^/?]*\/([^?]*)/.exec(uri);
  const name = m ? decodeURIComponent(m[1]) : '';
  return name || DEFAULT_DB;
}

function canon(doc) {
  if (doc === null || doc === undefined) return 'null';
  const obj = Buffer.isBuffer(doc) ? BSON.deserialize(doc, { promoteValues: false }) : doc;
  return BSON.EJSON.stringify(obj, { relaxed: false });
}

function clip(text, limit = 600) {
  return text.length <= limit ? text : `${text.slice(0, limit)}...(${text.length} chars)`;
}

// Path of the first difference between two documents given as canonical
// Extended JSON strings (field order and BSON types both count).
function firstDiff(a, b, path = '$') {
  const kind = (x) => (Array.isArray(x) ? 'array' : x === null ? 'null' : typeof x);
  if (kind(a) !== kind(b)) return [path, a, b];
  if (kind(a) === 'array') {
    if (a.length !== b.length) return [`${path} (array length)`, a.length, b.length];
    for (let i = 0; i < a.length; i++) {
      const r = firstDiff(a[i], b[i], `${path}[${i}]`);
      if (r) return r;
    }
    return null;
  }
  if (kind(a) === 'object') {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    for (let i = 0; i < Math.max(ka.length, kb.length); i++) {
      if (ka[i] !== kb[i]) return [`${path} (field names/order)`, ka, kb];
      const r = firstDiff(a[ka[i]], b[kb[i]], `${path}.${ka[i]}`);
      if (r) return r;
    }
    return null;
  }
  return a === b ? null : [path, a, b];
}

function describe(i, aText, bText, aName, bName) {
  if (aText !== 'null' && bText !== 'null') {
    const a = JSON.parse(aText);
    const b = JSON.parse(bText);
    const r = firstDiff(a, b);
    if (r) {
      const id = JSON.stringify(a._id);
      return `document ${i} (_id ${id}) differs at ${r[0]}: ${aName} ${clip(JSON.stringify(r[1]), 200)}, ${bName} ${clip(JSON.stringify(r[2]), 200)}`;
    }
  }
  return `document ${i} differs\n    ${aName}: ${clip(aText)}\n    ${bName}: ${clip(bText)}`;
}

function rawOf(doc) {
  if (doc === null || doc === undefined) return null;
  return Buffer.isBuffer(doc) ? doc : BSON.serialize(doc);
}

const asList = (x) => (Array.isArray(x) ? x : [x]);
const dec = (buf) => BSON.deserialize(buf);

function makeDoc(i, src) {
  const base = Date.UTC(2021, 2, 4, 5, 6, 7, 123);
  return {
    _id: new ObjectId(),
    i,
    src,
    grp: i % 7,
    s: `str-${String(i).padStart(5, '0')}-\u00fcnic\u00f8de-\u2603`,
    big: Long.fromNumber(i * 10000000000 + 1),
    f: new Double(i / 4 + 0.1),
    flag: i % 3 === 0,
    nothing: null,
    when: new Date(base + i * 3600000 + i),
    bin: new Binary(Buffer.from([i % 256, (i * 7) % 256, 0, 255])),
    nested: {
      a: i,
      b: { c: `deep-${i}`, arr: [i, 'x', { k: i }, { pair: [new Double(1.5), null] }] },
      empty: {}
    },
    tags: [`t${i % 5}`, `t${i % 3}`, 'all'],
    ref: new ObjectId(),
    maybe: i % 4 === 0 ? null : (i % 2 ? 'odd' : i)
  };
}

class Smoke {
  constructor(directUri, proxyUri) {
    this.counts = {};
    this.directClient = new MongoClient(directUri, { appName: 'mongoplex-smoke-direct', ...TIMEOUTS });
    this.proxyClient = new MongoClient(proxyUri, {
      appName: 'mongoplex-smoke-proxy', monitorCommands: true, ...TIMEOUTS
    });
    this.proxyClient.on('commandStarted', (e) => {
      this.counts[e.commandName] = (this.counts[e.commandName] || 0) + 1;
    });
    this.collName = `smoke_${DRIVER}_${Math.floor(Date.now() / 1000)}_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
    this.dDb = this.directClient.db(dbNameFromUri(directUri));
    this.pDb = this.proxyClient.db(dbNameFromUri(proxyUri));
    this.D = this.dDb.collection(this.collName);
    this.P = this.pDb.collection(this.collName);
    this.expected = new Map(); // _id hex -> doc as the backend should now hold it
    this.failures = [];
    this.checks = 0;
  }

  // Deep, ordered, type-exact comparison (raw BSON bytes).
  same(op, viaProxy, viaDirect, expected, checkExpected = false) {
    this.checks++;
    const p = asList(viaProxy);
    const d = asList(viaDirect);
    if (p.length !== d.length) {
      throw new Mismatch(`${op}: proxy returned ${p.length} document(s), direct returned ${d.length}`);
    }
    for (let i = 0; i < p.length; i++) {
      const pr = rawOf(p[i]);
      const dr = rawOf(d[i]);
      if ((pr === null) !== (dr === null) || (pr !== null && !pr.equals(dr))) {
        throw new Mismatch(`${op}: ${describe(i, canon(p[i]), canon(d[i]), 'proxy', 'direct')}`);
      }
    }
    if (checkExpected) {
      const e = asList(expected);
      if (e.length !== d.length) {
        throw new Mismatch(`${op}: got ${d.length} document(s), expected ${e.length}`);
      }
      for (let i = 0; i < e.length; i++) {
        const er = rawOf(e[i]);
        const dr = rawOf(d[i]);
        if ((er === null) !== (dr === null) || (er !== null && !er.equals(dr))) {
          throw new Mismatch(`${op}: not what was written: ${describe(i, canon(d[i]), canon(e[i]), 'got', 'expected')}`);
        }
      }
    }
  }

  equal(op, got, want) {
    this.checks++;
    const g = JSON.stringify(got);
    const w = JSON.stringify(want);
    if (g !== w) throw new Mismatch(`${op}: got ${g}, expected ${w}`);
  }

  async step(name, fn) {
    try {
      await fn();
      console.log(`  ok    ${name}`);
    } catch (err) {
      if (!(err instanceof Mismatch)) throw err;
      this.failures.push(err.message);
      console.log(`  DIFF  ${err.message}`);
    }
  }

  sortedExpected(pred = () => true, key = (d) => d.i, reverse = false) {
    const out = [...this.expected.values()].filter(pred);
    out.sort((a, b) => {
      const ka = key(a);
      const kb = key(b);
      const c = ka < kb ? -1 : ka > kb ? 1 : 0;
      return reverse ? -c : c;
    });
    return out;
  }

  remember(doc) { this.expected.set(doc._id.toHexString(), doc); }

  async run() {
    const { P, D } = this;
    const pkg = require('mongodb/package.json');
    console.log(`${DRIVER}: mongodb (Node.js driver) ${pkg.version}, collection ${this.pDb.databaseName}.${this.collName}`);
    await this.directClient.connect();
    await this.proxyClient.connect();
    await this.dDb.admin().command({ ping: 1 });
    await this.pDb.admin().command({ ping: 1 });

    const docA = makeDoc(0, 'proxy-one');
    const docB = makeDoc(1, 'direct-one');

    await this.step('insertOne via proxy, find by _id both ways', async () => {
      const r = await P.insertOne(docA);
      this.equal('insertOne via proxy: insertedId', r.insertedId.toHexString(), docA._id.toHexString());
      this.remember(docA);
      this.same('findOne by _id after proxy insertOne',
        await P.findOne({ _id: docA._id }, RAW), await D.findOne({ _id: docA._id }, RAW), docA, true);
    });

    await this.step('insertOne via direct, find by _id both ways', async () => {
      const r = await D.insertOne(docB);
      this.equal('insertOne via direct: insertedId', r.insertedId.toHexString(), docB._id.toHexString());
      this.remember(docB);
      this.same('findOne by _id after direct insertOne',
        await P.findOne({ _id: docB._id }, RAW), await D.findOne({ _id: docB._id }, RAW), docB, true);
    });

    const manyP = [];
    for (let i = 2; i < 2 + N_PROXY_MANY; i++) manyP.push(makeDoc(i, 'proxy-many'));
    const manyD = [];
    for (let i = 2 + N_PROXY_MANY; i < 2 + N_PROXY_MANY + N_DIRECT_MANY; i++) manyD.push(makeDoc(i, 'direct-many'));

    await this.step(`insertMany via proxy (${N_PROXY_MANY} docs)`, async () => {
      const r = await P.insertMany(manyP);
      this.equal('insertMany via proxy: insertedCount', r.insertedCount, manyP.length);
      this.equal('insertMany via proxy: insertedIds',
        Object.values(r.insertedIds).map((x) => x.toHexString()), manyP.map((d) => d._id.toHexString()));
      manyP.forEach((d) => this.remember(d));
    });

    await this.step(`insertMany via direct (${N_DIRECT_MANY} docs)`, async () => {
      const r = await D.insertMany(manyD);
      this.equal('insertMany via direct: insertedCount', r.insertedCount, manyD.length);
      this.equal('insertMany via direct: insertedIds',
        Object.values(r.insertedIds).map((x) => x.toHexString()), manyD.map((d) => d._id.toHexString()));
      manyD.forEach((d) => this.remember(d));
    });

    await this.step('countDocuments after inserts', async () => {
      this.equal('countDocuments({}) via proxy', await P.countDocuments({}), this.expected.size);
      this.equal('countDocuments({}) via direct', await D.countDocuments({}), this.expected.size);
    });

    await this.step('find by _id (sample of proxy- and direct-written docs)', async () => {
      const ids = [
        ...manyP.filter((_, k) => k % 37 === 0).map((d) => d._id), manyP[manyP.length - 1]._id,
        ...manyD.filter((_, k) => k % 29 === 0).map((d) => d._id)
      ];
      for (const id of ids) {
        this.same(`findOne({_id: ${id.toHexString()}})`,
          await P.findOne({ _id: id }, RAW), await D.findOne({ _id: id }, RAW),
          this.expected.get(id.toHexString()), true);
      }
      const hex = new Set(ids.map((x) => x.toHexString()));
      this.same('find({_id: {$in: [...]}}) sorted by i',
        await P.find({ _id: { $in: ids } }, RAW).sort({ i: 1 }).toArray(),
        await D.find({ _id: { $in: ids } }, RAW).sort({ i: 1 }).toArray(),
        this.sortedExpected((d) => hex.has(d._id.toHexString())), true);
    });

    await this.step(`find with filter + sort + batchSize ${FIND_BATCH} (getMore)`, async () => {
      const flt = { grp: { $in: [1, 2, 3] }, i: { $gte: 10 } };
      const before = this.counts.getMore || 0;
      const p = await P.find(flt, RAW).sort({ s: -1 }).batchSize(FIND_BATCH).toArray();
      const d = await D.find(flt, RAW).sort({ s: -1 }).batchSize(FIND_BATCH).toArray();
      const want = this.sortedExpected((x) => [1, 2, 3].includes(x.grp) && x.i >= 10, (x) => x.s, true);
      this.same(`find(grp in [1,2,3], i>=10).sort(s:-1).batchSize(${FIND_BATCH})`, p, d, want, true);
      const getMores = (this.counts.getMore || 0) - before;
      if (getMores < 2) {
        throw new Mismatch(`find with batchSize ${FIND_BATCH}: expected several getMore commands through the proxy, saw ${getMores}`);
      }
    });

    const fullScan = (label) => async () => {
      const p = await P.find({}, RAW).sort({ i: 1 }).batchSize(50).toArray();
      const d = await D.find({}, RAW).sort({ i: 1 }).batchSize(50).toArray();
      this.same(`full scan sorted by i (${label})`, p, d, this.sortedExpected(), true);
    };
    await this.step('full scan, every document both ways', fullScan('after inserts'));

    await this.step(`aggregate $match/$group/$sort (batchSize ${AGG_BATCH})`, async () => {
      // One accumulator per $group: FerretDB 1.24 has only $sum/$count and
      // computes just the first accumulator of a $group correctly.
      const cases = [
        ['aggregate($match flag/$group grp $sum i/$sort _id)',
          [{ $match: { flag: true } }, { $group: { _id: '$grp', total: { $sum: '$i' } } }, { $sort: { _id: 1 } }],
          'total', (x) => x.flag, (x) => x.grp, (x) => x.i, false],
        ['aggregate($match i<200/$group src $sum 1/$sort _id desc)',
          [{ $match: { i: { $lt: 200 } } }, { $group: { _id: '$src', n: { $sum: 1 } } }, { $sort: { _id: -1 } }],
          'n', (x) => x.i < 200, (x) => x.src, () => 1, true]
      ];
      for (const [label, pipeline, field, pred, key, val, reverse] of cases) {
        const p = await P.aggregate(pipeline, { batchSize: AGG_BATCH, raw: true }).toArray();
        const d = await D.aggregate(pipeline, { batchSize: AGG_BATCH, raw: true }).toArray();
        this.same(label, p, d);
        const want = new Map();
        for (const x of this.expected.values()) {
          if (pred(x)) want.set(key(x), (want.get(key(x)) || 0) + val(x));
        }
        const wantList = [...want.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
        if (reverse) wantList.reverse();
        this.equal(`${label} values`, p.map(dec).map((x) => [x._id, x[field]]), wantList);
      }
    });

    await this.step('updateMany via proxy, read back both ways', async () => {
      const flt = { grp: 4 };
      const want = [...this.expected.values()].filter((d) => d.grp === 4);
      const r = await P.updateMany(flt, {
        $set: { upd: 'via-proxy' }, $inc: { 'nested.a': 1000 }, $push: { tags: 'updated' }
      });
      this.equal('updateMany via proxy: matchedCount', r.matchedCount, want.length);
      this.equal('updateMany via proxy: modifiedCount', r.modifiedCount, want.length);
      for (const d of want) {
        d.nested.a += 1000;
        d.tags.push('updated');
        d.upd = 'via-proxy';
      }
      this.same('find(grp=4) after updateMany via proxy',
        await P.find(flt, RAW).sort({ i: 1 }).batchSize(10).toArray(),
        await D.find(flt, RAW).sort({ i: 1 }).batchSize(10).toArray(),
        want.sort((a, b) => a.i - b.i), true);
    });

    await this.step('updateOne via direct, read back both ways', async () => {
      const r = await D.updateOne({ _id: docB._id }, { $set: { s: 'changed-directly', extra: [1, 'two'] } });
      this.equal('updateOne via direct: matchedCount', r.matchedCount, 1);
      this.equal('updateOne via direct: modifiedCount', r.modifiedCount, 1);
      docB.s = 'changed-directly';
      docB.extra = [1, 'two'];
      this.same('findOne by _id after updateOne via direct',
        await P.findOne({ _id: docB._id }, RAW), await D.findOne({ _id: docB._id }, RAW), docB, true);
    });

    await this.step('deleteMany via direct, checked both ways', async () => {
      const gone = [...this.expected.entries()].filter(([, d]) => d.grp === 5).map(([k]) => k);
      const r = await D.deleteMany({ grp: 5 });
      this.equal('deleteMany via direct: deletedCount', r.deletedCount, gone.length);
      gone.forEach((k) => this.expected.delete(k));
      this.equal('countDocuments(grp=5) via proxy after delete', await P.countDocuments({ grp: 5 }), 0);
      this.equal('countDocuments(grp=5) via direct after delete', await D.countDocuments({ grp: 5 }), 0);
    });

    await this.step('deleteOne via proxy, checked both ways', async () => {
      const r = await P.deleteOne({ _id: docA._id });
      this.equal('deleteOne via proxy: deletedCount', r.deletedCount, 1);
      this.expected.delete(docA._id.toHexString());
      this.same('findOne by _id after deleteOne via proxy',
        await P.findOne({ _id: docA._id }, RAW), await D.findOne({ _id: docA._id }, RAW), null, true);
    });

    await this.step('countDocuments with filters', async () => {
      const cases = [
        ['{}', {}, () => true],
        ['{flag: true}', { flag: true }, (d) => d.flag],
        ['{upd: via-proxy}', { upd: 'via-proxy' }, (d) => d.upd === 'via-proxy'],
        ['{i: {$lt: 100}, tags: t1}', { i: { $lt: 100 }, tags: 't1' }, (d) => d.i < 100 && d.tags.includes('t1')]
      ];
      for (const [label, flt, pred] of cases) {
        const want = [...this.expected.values()].filter(pred).length;
        const p = await P.countDocuments(flt);
        const d = await D.countDocuments(flt);
        this.equal(`countDocuments(${label}): proxy vs direct`, p, d);
        this.equal(`countDocuments(${label})`, p, want);
      }
    });

    await this.step('full scan again after updates/deletes', fullScan('after updates/deletes'));

    await this.step('drop collection via proxy, checked directly', async () => {
      await P.drop();
      const names = (await this.dDb.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
      if (names.includes(this.collName)) throw new Mismatch('drop via proxy: collection still listed directly');
      this.equal('countDocuments after drop via direct', await D.countDocuments({}), 0);
    });
  }

  async cleanup() {
    for (const coll of [this.D, this.P]) { // normally already dropped by the last step
      try { await coll.drop(); } catch (_) { /* ignore */ }
    }
    await this.directClient.close().catch(() => {});
    await this.proxyClient.close().catch(() => {});
  }
}

async function main() {
  const directUri = process.env.MONGOPLEX_DIRECT_URI;
  const proxyUri = process.env.MONGOPLEX_PROXY_URI;
  if (!directUri || !proxyUri) {
    console.log(`FAIL ${DRIVER}: MONGOPLEX_DIRECT_URI and MONGOPLEX_PROXY_URI must both be set`);
    return 2;
  }
  const started = Date.now();
  let smoke;
  try {
    smoke = new Smoke(directUri, proxyUri);
    await smoke.run();
  } catch (err) {
    console.error(err);
    console.log(`FAIL ${DRIVER}: error: ${err.name}: ${err.message}`);
    return 2;
  } finally {
    if (smoke) await smoke.cleanup();
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  if (smoke.failures.length) {
    console.log(`FAIL ${DRIVER}: ${smoke.failures.length} operation(s) differed between proxy and direct (${secs}s):`);
    for (const f of smoke.failures) console.log(`  - ${f.split('\n')[0]}`);
    return 1;
  }
  console.log(`PASS ${DRIVER}: ${smoke.checks} checks, proxy and direct agree (${secs}s)`);
  return 0;
}

main().then((code) => { process.exitCode = code; }, (err) => {
  console.error(err);
  console.log(`FAIL ${DRIVER}: error: ${err && err.message}`);
  process.exitCode = 2;
});
