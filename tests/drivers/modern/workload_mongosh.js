// The modern-driver workload (see README.md in this folder) in mongosh's
// shell API.
//
//   MODERN_URI=... MODERN_LABEL=... MODERN_OUT=... \
//     mongosh --nodb --norc --quiet --file workload_mongosh.js
//
// Writes the transcript (results and errors of every step, documents as
// canonical Extended JSON read with promoteValues:false) to MODERN_OUT.
// mongosh has no command monitoring, so "commands" is null; its shell API
// awaits each call, so the lookups run one after another (the other drivers
// run them from 8 concurrent workers). Exit 0 when the workload ran to the
// end, 2 on setup failure.
const fs = require('fs');

const N = 300;
const WORKERS = 8;

const ej = (doc) => (doc === null ? null : JSON.parse(EJSON.stringify(doc, { relaxed: false })));
const makeDoc = (i) => ({
  _id: NumberInt(i), k: NumberInt(i % 10), s: 's' + String(i).padStart(3, '0'), v: Double(i + 0.5),
  tags: [NumberInt(i % 3), NumberInt(i % 5)], sub: { a: NumberInt(i), b: 'x' + (i % 7) }
});
const singleIds = (w) => Array.from({ length: 20 }, (_, j) => (w * 37 + j * 11) % 320);
const inIds = (w, q) => Array.from({ length: 10 }, (_, j) => (w * 13 + j * 7 + q) % 320);
const idOf = (d) => Number(d._id.$numberInt);
const num = (x) => (x === null || x === undefined ? null : Number(x));

function writeError(e) {
  return { index: e.index, code: e.code, errmsg: e.errmsg };
}

function bulkResult(r) {
  const errs = r.getWriteErrors ? r.getWriteErrors() : [];
  return {
    nInserted: num(r.insertedCount), nMatched: num(r.matchedCount), nModified: num(r.modifiedCount),
    nDeleted: num(r.deletedCount), nUpserted: num(r.upsertedCount), writeErrors: errs.map(writeError)
  };
}

function toArray(cursor) {
  const out = [];
  while (cursor.hasNext()) out.push(ej(cursor.next()));
  return out;
}

function run(conn, db, coll, steps) {
  function step(op, fn) {
    try {
      steps.push({ op, result: fn() });
    } catch (e) {
      steps.push({ op, error: { code: e.code ?? null, codeName: e.codeName ?? null, errmsg: e.message } });
    }
  }
  step('insert_many', () => ({
    inserted: Object.keys(coll.insertMany(Array.from({ length: N }, (_, i) => makeDoc(i))).insertedIds).length
  }));
  step('lookups', () => {
    // plain loops: mongosh's async rewriter does not await calls inside array callbacks
    const out = [];
    for (let w = 0; w < WORKERS; w++) {
      const single = [];
      for (const i of singleIds(w)) single.push(ej(coll.findOne({ _id: i }, {}, { promoteValues: false })));
      const ins = [];
      for (let q = 0; q < 5; q++) {
        ins.push(toArray(coll.find({ _id: { $in: inIds(w, q) } }, {}, { promoteValues: false })).sort((a, b) => idOf(a) - idOf(b)));
      }
      out.push({ single, in: ins });
    }
    return out;
  });
  step('cursor', () => toArray(coll.find({ k: { $gte: 0 } }, {}, { promoteValues: false }).sort({ _id: 1 }).batchSize(7)));
  const upd = (r) => ({ matched: num(r.matchedCount), modified: num(r.modifiedCount), upserted_id: num(r.insertedId) }); // mongosh names it insertedId
  step('update_one', () => upd(coll.updateOne({ _id: 5 }, { $set: { s: 'upd' } })));
  step('update_many', () => upd(coll.updateMany({ k: 3 }, { $inc: { v: 100 } })));
  step('upsert', () => upd(coll.updateOne({ _id: 1000 }, { $set: { k: NumberInt(99) } }, { upsert: true })));
  step('delete_one', () => ({ deleted: num(coll.deleteOne({ _id: 7 }).deletedCount) }));
  step('delete_many', () => ({ deleted: num(coll.deleteMany({ k: 9 }).deletedCount) }));
  step('aggregate', () => toArray(coll.aggregate([
    { $match: { k: { $lt: 5 } } }, { $group: { _id: '$k', n: { $sum: 1 } } }, { $sort: { _id: 1 } }
  ], { promoteValues: false })));
  step('aggregate_batches', () => toArray(coll.aggregate([
    { $match: { k: { $in: [1, 2] } } }, { $sort: { _id: 1 } }, { $project: { _id: 1, s: 1 } }
  ], { promoteValues: false, batchSize: 5 })));
  step('count', () => ({
    all: num(coll.countDocuments({})), k3: num(coll.countDocuments({ k: 3 })),
    estimated: num(coll.estimatedDocumentCount())
  }));
  const indexList = () => coll.getIndexes().map((i) => ({ name: i.name, key: ej(i.key) }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  step('create_index', () => ({ name: coll.createIndex({ k: 1, s: -1 }) }));
  step('list_indexes', indexList);
  step('drop_index', () => { coll.dropIndex('k_1_s_-1'); return null; });
  step('list_indexes_after_drop', indexList);
  step('duplicate_key', () => {
    try {
      coll.insertOne({ _id: 1, k: 1 });
    } catch (e) {
      if (e.code === undefined) throw e;
      return { code: e.code, codeName: e.codeName ?? null, errmsg: e.errmsg ?? e.message };
    }
    throw new Error('no duplicate-key error');
  });
  step('command_error', () => {
    try {
      coll.findOne({ $bogus: 1 });
    } catch (e) {
      if (e.code === undefined) throw e;
      return { code: e.code, codeName: e.codeName ?? null, errmsg: e.errmsg ?? e.message };
    }
    throw new Error('no error for an unknown operator');
  });
  const bulk = (ordered, ops) => {
    try {
      return bulkResult(coll.bulkWrite(ops, { ordered }));
    } catch (e) {
      if (!e.result) throw e;
      return bulkResult(e.result);
    }
  };
  step('bulk_ok', () => bulk(true, [
    { insertOne: { document: { _id: 4000, k: 40 } } },
    { updateOne: { filter: { _id: 4000 }, update: { $set: { k: 41 } } } },
    { replaceOne: { filter: { _id: 10 }, replacement: { k: 10, s: 'replaced' } } },
    { deleteOne: { filter: { _id: 11 } } },
    { updateOne: { filter: { _id: 4001 }, update: { $set: { k: 42 } }, upsert: true } }
  ]));
  step('bulk_ordered_error', () => bulk(true, [2000, 2001, 1, 2002].map((i) => ({ insertOne: { document: { _id: i } } }))));
  step('bulk_unordered_error', () => bulk(false, [
    { insertOne: { document: { _id: 3000 } } },
    { insertOne: { document: { _id: 1 } } },
    { insertOne: { document: { _id: 3001 } } },
    { updateOne: { filter: { _id: 3000 }, update: { $set: { k: 1 } } } },
    { deleteOne: { filter: { _id: 3001 } } }
  ]));
  step('session', () => {
    const s = conn.startSession({ causalConsistency: true });
    try {
      const sc = s.getDatabase(db.getName()).getCollection(coll.getName());
      sc.insertOne({ _id: 5000, k: 50 });
      const found = ej(sc.findOne({ _id: 5000 }, {}, { promoteValues: false }));
      const count = num(sc.countDocuments({ k: 50 }));
      return { found, count, operationTime: s.getOperationTime() != null };
    } finally {
      s.endSession();
    }
  });
  step('final', () => toArray(coll.find({}, {}, { promoteValues: false }).sort({ _id: 1 })));
}

function main() {
  const uri = process.env.MODERN_URI;
  const label = process.env.MODERN_LABEL || 'mongosh';
  const out = process.env.MODERN_OUT;
  if (!uri || !out) {
    print('workload_mongosh: set MODERN_URI and MODERN_OUT');
    return 2;
  }
  const steps = [];
  let conn;
  try {
    const u = new URL(uri);
    u.searchParams.set('appName', 'mongoplex-modern-' + label);
    u.searchParams.set('serverSelectionTimeoutMS', '5000');
    u.searchParams.set('connectTimeoutMS', '5000');
    u.searchParams.set('socketTimeoutMS', '20000');
    conn = new Mongo(u.toString());
    const db = conn.getDB(u.pathname.slice(1) || 'mongoplex_modern');
    const coll = db.getCollection('modern');
    try { coll.drop(); } catch (e) { /* not there */ }
    run(conn, db, coll, steps);
    coll.drop();
  } catch (e) {
    print('workload_mongosh: setup failed: ' + (e.stack || e));
    return 2;
  }
  const shellVersion = version();
  fs.writeFileSync(out, JSON.stringify({ driver: 'mongosh', version: shellVersion, steps, commands: null }, null, 1));
  try { conn.close(); } catch (e) { /* ignore */ }
  return 0;
}

quit(main());
