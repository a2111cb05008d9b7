// Cross-driver smoke test, mongosh flavour.  Run with:
//   mongosh --nodb --quiet --file smoke_mongosh.js
// It opens two connections itself with `new Mongo(uri)`: MONGOPLEX_PROXY_URI
// (through mongoplex) and MONGOPLEX_DIRECT_URI (straight to the backend), runs
// the same operations through both with mongosh's own shell API, and checks
// that every answer through the proxy is the same, in order, as the direct
// one.  Documents are read with promoteValues:false and compared as canonical
// Extended JSON, so BSON types (int32/int64/double/...) and field order count.
// Writes go through the proxy and are read back both ways, and vice versa.
//
// Exit status: 0 all matched, 1 some operation differed, 2 setup/connection error.

const DRIVER = 'mongosh';
const DEFAULT_DB = 'mongoplex_smoke';
// Fail fast instead of hanging on a broken proxy (unless the URI sets its own).
const URI_OPTIONS = { serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000, socketTimeoutMS: 20000 };
const N_PROXY_MANY = 300;
const N_DIRECT_MANY = 150;
const FIND_BATCH = 7;
const AGG_BATCH = 2;
const EXACT = { promoteValues: false };

class Mismatch extends Error {}

function dbNameFromUri(uri) {
  const m = /^mongodb(?:\+srv)?:\/\/[^/?]*\/([^?]*)/.exec(uri);
  const name = m ? decodeURIComponent(m[1]) : '';
  return name || DEFAULT_DB;
}

function withOptions(uri, appName) {
  let u = uri;
  if (!/^mongodb(?:\+srv)?:\/\/[^/?]*\//.test(u)) {
    // "mongodb://host:port" or "mongodb://host:port?x=y": add the "/" before options
    u = u.replace(/^(mongodb(?:\+srv)?:\/\/[^/?]*)/, '$1/');
  }
  const extra = [];
  for (const [name, value] of Object.entries({ ...URI_OPTIONS, appName })) {
    if (!new RegExp(`[?&]${name}=`, 'i').test(u)) extra.push(`${name}=${value}`);
  }
  if (extra.length === 0) return u;
  return `${u}${u.includes('?') ? (/[?&]$/.test(u) ? '' : '&') : '?'}${extra.join('&')}`;
}

function canon(doc) {
  if (doc === null || doc === undefined) return 'null';
  return EJSON.stringify(doc, { relaxed: false });
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

const asList = (x) => (Array.isArray(x) ? x : [x]);

function pad(n, width) {
  let s = String(n);
  while (s.length < width) s = `0${s}`;
  return s;
}

function makeDoc(i, src) {
  const base = Date.UTC(2021, 2, 4, 5, 6, 7, 123);
  return {
    _id: new ObjectId(),
    i: NumberInt(i),
    src,
    grp: NumberInt(i % 7),
    s: `str-${pad(i, 5)}-\u00fcnic\u00f8de-\u2603`,
    big: NumberLong(String(i * 10000000000 + 1)),
    f: Double(i / 4 + 0.1),
    flag: i % 3 === 0,
    nothing: null,
    when: new Date(base + i * 3600000 + i),
    bin: BinData(0, Buffer.from([i % 256, (i * 7) % 256, 0, 255]).toString('base64')),
    nested: {
      a: NumberInt(i),
      b: { c: `deep-${i}`, arr: [NumberInt(i), 'x', { k: NumberInt(i) }, { pair: [Double(1.5), null] }] },
      empty: {}
    },
    tags: [`t${i % 5}`, `t${i % 3}`, 'all'],
    ref: new ObjectId(),
    maybe: i % 4 === 0 ? null : (i % 2 ? 'odd' : NumberInt(i))
  };
}

// Plain-number views of a test document, for filters computed locally.
const num = (v) => (typeof v === 'number' ? v : Number(v.valueOf()));

const state = { checks: 0, failures: [], expected: new Map() };

function same(op, viaProxy, viaDirect, expected, checkExpected) {
  state.checks++;
  const p = asList(viaProxy);
  const d = asList(viaDirect);
  if (p.length !== d.length) {
    throw new Mismatch(`${op}: proxy returned ${p.length} document(s), direct returned ${d.length}`);
  }
  for (let i = 0; i < p.length; i++) {
    const pc = canon(p[i]);
    const dc = canon(d[i]);
    if (pc !== dc) {
      throw new Mismatch(`${op}: ${describe(i, pc, dc, 'proxy', 'direct')}`);
    }
  }
  if (checkExpected) {
    const e = asList(expected);
    if (e.length !== d.length) throw new Mismatch(`${op}: got ${d.length} document(s), expected ${e.length}`);
    for (let i = 0; i < e.length; i++) {
      const ec = canon(e[i]);
      const dc = canon(d[i]);
      if (ec !== dc) {
        throw new Mismatch(`${op}: not what was written: ${describe(i, dc, ec, 'got', 'expected')}`);
      }
    }
  }
}

function equal(op, got, want) {
  state.checks++;
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Mismatch(`${op}: got ${g}, expected ${w}`);
}

function step(name, fn) {
  try {
    fn();
    print(`  ok    ${name}`);
  } catch (err) {
    if (!(err instanceof Mismatch)) throw err;
    state.failures.push(err.message);
    print(`  DIFF  ${err.message}`);
  }
}

function expectedSorted(pred, key, reverse) {
  const out = [];
  for (const d of state.expected.values()) if (pred(d)) out.push(d);
  out.sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    const c = ka < kb ? -1 : ka > kb ? 1 : 0;
    return reverse ? -c : c;
  });
  return out;
}
const byI = (d) => num(d.i);
const all = () => true;

function remember(doc) { state.expected.set(doc._id.toHexString(), doc); }

function findById(coll, id) {
  return coll.findOne({ _id: id }, {}, EXACT);
}

// Drains a cursor, counting how often the client had to go back to the
// server for another batch (a getMore), as seen by the cursor itself.
function drain(cursor) {
  const docs = [];
  let refills = 0;
  for (;;) {
    const left = cursor.objsLeftInBatch();
    if (!cursor.hasNext()) break;
    if (docs.length > 0 && left === 0) refills++;
    docs.push(cursor.next());
  }
  return { docs, refills };
}

function smoke(P, D, pDb, dDb, collName) {
  const docA = makeDoc(0, 'proxy-one');
  const docB = makeDoc(1, 'direct-one');

  step('insertOne via proxy, find by _id both ways', () => {
    const r = P.insertOne(docA);
    equal('insertOne via proxy: insertedId', r.insertedId.toHexString(), docA._id.toHexString());
    remember(docA);
    same('findOne by _id after proxy insertOne', findById(P, docA._id), findById(D, docA._id), docA, true);
  });

  step('insertOne via direct, find by _id both ways', () => {
    const r = D.insertOne(docB);
    equal('insertOne via direct: insertedId', r.insertedId.toHexString(), docB._id.toHexString());
    remember(docB);
    same('findOne by _id after direct insertOne', findById(P, docB._id), findById(D, docB._id), docB, true);
  });

  const manyP = [];
  for (let i = 2; i < 2 + N_PROXY_MANY; i++) manyP.push(makeDoc(i, 'proxy-many'));
  const manyD = [];
  for (let i = 2 + N_PROXY_MANY; i < 2 + N_PROXY_MANY + N_DIRECT_MANY; i++) manyD.push(makeDoc(i, 'direct-many'));
  const hexIds = (docs) => docs.map((d) => d._id.toHexString());
  const insertedHex = (r) => Object.keys(r.insertedIds).sort((a, b) => a - b).map((k) => r.insertedIds[k].toHexString());

  step(`insertMany via proxy (${N_PROXY_MANY} docs)`, () => {
    const r = P.insertMany(manyP);
    equal('insertMany via proxy: insertedIds', insertedHex(r), hexIds(manyP));
    for (const d of manyP) remember(d);
  });

  step(`insertMany via direct (${N_DIRECT_MANY} docs)`, () => {
    const r = D.insertMany(manyD);
    equal('insertMany via direct: insertedIds', insertedHex(r), hexIds(manyD));
    for (const d of manyD) remember(d);
  });

  step('countDocuments after inserts', () => {
    equal('countDocuments({}) via proxy', P.countDocuments({}), state.expected.size);
    equal('countDocuments({}) via direct', D.countDocuments({}), state.expected.size);
  });

  step('find by _id (sample of proxy- and direct-written docs)', () => {
    const ids = [];
    for (let k = 0; k < manyP.length; k += 37) ids.push(manyP[k]._id);
    ids.push(manyP[manyP.length - 1]._id);
    for (let k = 0; k < manyD.length; k += 29) ids.push(manyD[k]._id);
    for (const id of ids) {
      same(`findOne({_id: ${id.toHexString()}})`, findById(P, id), findById(D, id),
        state.expected.get(id.toHexString()), true);
    }
    const hex = new Set(hexIds(ids.map((x) => ({ _id: x }))));
    same('find({_id: {$in: [...]}}) sorted by i',
      P.find({ _id: { $in: ids } }, {}, EXACT).sort({ i: 1 }).toArray(),
      D.find({ _id: { $in: ids } }, {}, EXACT).sort({ i: 1 }).toArray(),
      expectedSorted((d) => hex.has(d._id.toHexString()), byI, false), true);
  });

  step(`find with filter + sort + batchSize ${FIND_BATCH} (getMore)`, () => {
    const flt = { grp: { $in: [1, 2, 3] }, i: { $gte: 10 } };
    const p = drain(P.find(flt, {}, EXACT).sort({ s: -1 }).batchSize(FIND_BATCH));
    const d = drain(D.find(flt, {}, EXACT).sort({ s: -1 }).batchSize(FIND_BATCH));
    const want = expectedSorted((x) => [1, 2, 3].includes(num(x.grp)) && num(x.i) >= 10, (x) => x.s, true);
    same(`find(grp in [1,2,3], i>=10).sort(s:-1).batchSize(${FIND_BATCH})`, p.docs, d.docs, want, true);
    if (p.refills < 2) {
      throw new Mismatch(`find with batchSize ${FIND_BATCH}: expected several getMores through the proxy, cursor saw ${p.refills}`);
    }
  });

  const fullScan = (label) => () => {
    const p = P.find({}, {}, EXACT).sort({ i: 1 }).batchSize(50).toArray();
    const d = D.find({}, {}, EXACT).sort({ i: 1 }).batchSize(50).toArray();
    same(`full scan sorted by i (${label})`, p, d, expectedSorted(all, byI, false), true);
  };
  step('full scan, every document both ways', fullScan('after inserts'));

  step(`aggregate $match/$group/$sort (batchSize ${AGG_BATCH})`, () => {
    // One accumulator per $group: FerretDB 1.24 has only $sum/$count and
    // computes just the first accumulator of a $group correctly.
    const cases = [
      ['aggregate($match flag/$group grp $sum i/$sort _id)',
        [{ $match: { flag: true } }, { $group: { _id: '$grp', total: { $sum: '$i' } } }, { $sort: { _id: 1 } }],
        'total', (x) => x.flag, (x) => num(x.grp), (x) => num(x.i), false],
      ['aggregate($match i<200/$group src $sum 1/$sort _id desc)',
        [{ $match: { i: { $lt: 200 } } }, { $group: { _id: '$src', n: { $sum: 1 } } }, { $sort: { _id: -1 } }],
        'n', (x) => num(x.i) < 200, (x) => x.src, () => 1, true]
    ];
    for (const [label, pipeline, field, pred, key, val, reverse] of cases) {
      const p = drain(P.aggregate(pipeline, { batchSize: AGG_BATCH, promoteValues: false }));
      const d = drain(D.aggregate(pipeline, { batchSize: AGG_BATCH, promoteValues: false }));
      same(label, p.docs, d.docs);
      const want = new Map();
      for (const x of state.expected.values()) {
        if (pred(x)) want.set(key(x), (want.get(key(x)) || 0) + val(x));
      }
      const wantList = [...want.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      if (reverse) wantList.reverse();
      const got = [];
      for (const x of p.docs) got.push([typeof x._id === 'string' ? x._id : num(x._id), num(x[field])]);
      equal(`${label} values`, got, wantList);
    }
  });

  step('updateMany via proxy, read back both ways', () => {
    const flt = { grp: 4 };
    const want = expectedSorted((d) => num(d.grp) === 4, byI, false);
    const r = P.updateMany(flt, { $set: { upd: 'via-proxy' }, $inc: { 'nested.a': NumberInt(1000) }, $push: { tags: 'updated' } });
    equal('updateMany via proxy: matchedCount', r.matchedCount, want.length);
    equal('updateMany via proxy: modifiedCount', r.modifiedCount, want.length);
    for (const d of want) {
      d.nested.a = NumberInt(num(d.nested.a) + 1000);
      d.tags.push('updated');
      d.upd = 'via-proxy';
    }
    same('find(grp=4) after updateMany via proxy',
      P.find(flt, {}, EXACT).sort({ i: 1 }).batchSize(10).toArray(),
      D.find(flt, {}, EXACT).sort({ i: 1 }).batchSize(10).toArray(), want, true);
  });

  step('updateOne via direct, read back both ways', () => {
    const r = D.updateOne({ _id: docB._id }, { $set: { s: 'changed-directly', extra: [NumberInt(1), 'two'] } });
    equal('updateOne via direct: matchedCount', r.matchedCount, 1);
    equal('updateOne via direct: modifiedCount', r.modifiedCount, 1);
    docB.s = 'changed-directly';
    docB.extra = [NumberInt(1), 'two'];
    same('findOne by _id after updateOne via direct', findById(P, docB._id), findById(D, docB._id), docB, true);
  });

  step('deleteMany via direct, checked both ways', () => {
    const gone = [];
    for (const [k, d] of state.expected.entries()) if (num(d.grp) === 5) gone.push(k);
    const r = D.deleteMany({ grp: 5 });
    equal('deleteMany via direct: deletedCount', r.deletedCount, gone.length);
    for (const k of gone) state.expected.delete(k);
    equal('countDocuments(grp=5) via proxy after delete', P.countDocuments({ grp: 5 }), 0);
    equal('countDocuments(grp=5) via direct after delete', D.countDocuments({ grp: 5 }), 0);
  });

  step('deleteOne via proxy, checked both ways', () => {
    const r = P.deleteOne({ _id: docA._id });
    equal('deleteOne via proxy: deletedCount', r.deletedCount, 1);
    state.expected.delete(docA._id.toHexString());
    same('findOne by _id after deleteOne via proxy', findById(P, docA._id), findById(D, docA._id), null, true);
  });

  step('countDocuments with filters', () => {
    const cases = [
      ['{}', {}, all],
      ['{flag: true}', { flag: true }, (d) => d.flag],
      ['{upd: via-proxy}', { upd: 'via-proxy' }, (d) => d.upd === 'via-proxy'],
      ['{i: {$lt: 100}, tags: t1}', { i: { $lt: 100 }, tags: 't1' }, (d) => num(d.i) < 100 && d.tags.includes('t1')]
    ];
    for (const [label, flt, pred] of cases) {
      const want = expectedSorted(pred, byI, false).length;
      const p = P.countDocuments(flt);
      const d = D.countDocuments(flt);
      equal(`countDocuments(${label}): proxy vs direct`, p, d);
      equal(`countDocuments(${label})`, p, want);
    }
  });

  step('full scan again after updates/deletes', fullScan('after updates/deletes'));

  step('drop collection via proxy, checked directly', () => {
    P.drop();
    if (dDb.getCollectionNames().includes(collName)) {
      throw new Mismatch('drop via proxy: collection still listed directly');
    }
    equal('countDocuments after drop via direct', D.countDocuments({}), 0);
  });
}

function main() {
  const directUri = process.env.MONGOPLEX_DIRECT_URI;
  const proxyUri = process.env.MONGOPLEX_PROXY_URI;
  if (!directUri || !proxyUri) {
    print(`FAIL ${DRIVER}: MONGOPLEX_DIRECT_URI and MONGOPLEX_PROXY_URI must both be set`);
    return 2;
  }
  const started = Date.now();
  const collName = `smoke_${DRIVER}_${Math.floor(started / 1000)}_${process.pid}_${Math.random().toString(16).slice(2, 10)}`;
  let dConn = null;
  let pConn = null;
  let P = null;
  let D = null;
  try {
    dConn = new Mongo(withOptions(directUri, 'mongoplex-smoke-direct'));
    pConn = new Mongo(withOptions(proxyUri, 'mongoplex-smoke-proxy'));
    const dDb = dConn.getDB(dbNameFromUri(directUri));
    const pDb = pConn.getDB(dbNameFromUri(proxyUri));
    D = dDb.getCollection(collName);
    P = pDb.getCollection(collName);
    print(`${DRIVER}: mongosh ${version()}, collection ${pDb.getName()}.${collName}`);
    dDb.adminCommand({ ping: 1 });
    pDb.adminCommand({ ping: 1 });
    smoke(P, D, pDb, dDb, collName);
  } catch (err) {
    print(err && err.stack ? err.stack : String(err));
    print(`FAIL ${DRIVER}: error: ${err && err.name}: ${err && err.message}`);
    return 2;
  } finally {
    // Normally already dropped by the last step.  (mongo-java-server answers
    // "ns not found" to dropping a missing collection, which mongosh rethrows.)
    for (const coll of [D, P]) {
      if (coll === null) continue;
      try { coll.drop(); } catch (_) { /* ignore */ }
    }
    for (const conn of [dConn, pConn]) {
      if (conn === null) continue;
      try { conn.close(); } catch (_) { /* ignore */ }
    }
  }
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  if (state.failures.length) {
    print(`FAIL ${DRIVER}: ${state.failures.length} operation(s) differed between proxy and direct (${secs}s):`);
    for (const f of state.failures) print(`  - ${f.split('\n')[0]}`);
    return 1;
  }
  print(`PASS ${DRIVER}: ${state.checks} checks, proxy and direct agree (${secs}s)`);
  return 0;
}

quit(main());
