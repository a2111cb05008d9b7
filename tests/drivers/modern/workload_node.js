// The modern-driver workload (see README.md in this folder) with the Node.js
// driver; the same script runs 6.x and 7.x (installed side by side as the npm
// aliases mongodb6 and mongodb7).
//
//   node workload_node.js MODULE URI LABEL OUTFILE     (MODULE: mongodb6 | mongodb7)
//
// Writes the transcript (results and errors of every step, documents as
// canonical Extended JSON read with promoteValues:false, command counts from
// command monitoring) to OUTFILE. Exit 0 when the workload ran to the end,
// 2 on setup failure.
'use strict';
const fs = require('fs');
const path = require('path');

const [moduleName, uri, label, outfile] = process.argv.slice(2);
if (!outfile || !['mongodb6', 'mongodb7'].includes(moduleName)) {
  console.error('usage: node workload_node.js mongodb6|mongodb7 URI LABEL OUTFILE');
  process.exit(2);
}
const mongodb = require(moduleName);
const { MongoClient, MongoServerError, MongoBulkWriteError } = mongodb;
const { EJSON } = mongodb.BSON;
const version = require(path.join(moduleName, 'package.json')).version;

const N = 300;
const WORKERS = 8;
const RAW = { promoteValues: false };

const ej = (doc) => (doc === null ? null : JSON.parse(EJSON.stringify(doc, { relaxed: false })));
const makeDoc = (i) => ({
  _id: i, k: i % 10, s: 's' + String(i).padStart(3, '0'), v: new mongodb.Double(i + 0.5),
  tags: [i % 3, i % 5], sub: { a: i, b: 'x' + (i % 7) }
});
const singleIds = (w) => Array.from({ length: 20 }, (_, j) => (w * 37 + j * 11) % 320);
const inIds = (w, q) => Array.from({ length: 10 }, (_, j) => (w * 13 + j * 7 + q) % 320);
const idOf = (d) => Number(d._id.$numberInt);

function writeError(e) {
  return { index: e.index, code: e.code, errmsg: e.errmsg };
}

function bulkResult(r) {
  const errs = r.getWriteErrors ? r.getWriteErrors() : [];
  return {
    nInserted: r.insertedCount, nMatched: r.matchedCount, nModified: r.modifiedCount,
    nDeleted: r.deletedCount, nUpserted: r.upsertedCount, writeErrors: errs.map(writeError)
  };
}

async function run(client, db, coll, steps) {
  async function step(op, fn) {
    try {
      steps.push({ op, result: await fn() });
    } catch (e) {
      steps.push({ op, error: { code: e.code ?? null, codeName: e.codeName ?? null, errmsg: e.message } });
    }
  }
  await step('insert_many', async () => ({
    inserted: (await coll.insertMany(Array.from({ length: N }, (_, i) => makeDoc(i)))).insertedCount
  }));
  await step('lookups', () => Promise.all(Array.from({ length: WORKERS }, async (_, w) => {
    const single = await Promise.all(singleIds(w).map(async (i) => ej(await coll.findOne({ _id: i }, RAW))));
    const ins = await Promise.all(Array.from({ length: 5 }, async (_, q) =>
      (await coll.find({ _id: { $in: inIds(w, q) } }, RAW).toArray()).map(ej).sort((a, b) => idOf(a) - idOf(b))));
    return { single, in: ins };
  })));
  await step('cursor', async () =>
    (await coll.find({ k: { $gte: 0 } }, RAW).sort({ _id: 1 }).batchSize(7).toArray()).map(ej));
  const upd = (r) => ({ matched: r.matchedCount, modified: r.modifiedCount, upserted_id: r.upsertedId ?? null });
  await step('update_one', async () => upd(await coll.updateOne({ _id: 5 }, { $set: { s: 'upd' } })));
  await step('update_many', async () => upd(await coll.updateMany({ k: 3 }, { $inc: { v: 100 } })));
  await step('upsert', async () => upd(await coll.updateOne({ _id: 1000 }, { $set: { k: 99 } }, { upsert: true })));
  await step('delete_one', async () => ({ deleted: (await coll.deleteOne({ _id: 7 })).deletedCount }));
  await step('delete_many', async () => ({ deleted: (await coll.deleteMany({ k: 9 })).deletedCount }));
  await step('aggregate', async () => (await coll.aggregate([
    { $match: { k: { $lt: 5 } } }, { $group: { _id: '$k', n: { $sum: 1 } } }, { $sort: { _id: 1 } }
  ], RAW).toArray()).map(ej));
  await step('aggregate_batches', async () => (await coll.aggregate([
    { $match: { k: { $in: [1, 2] } } }, { $sort: { _id: 1 } }, { $project: { _id: 1, s: 1 } }
  ], { ...RAW, batchSize: 5 }).toArray()).map(ej));
  await step('count', async () => ({
    all: await coll.countDocuments({}), k3: await coll.countDocuments({ k: 3 }),
    estimated: await coll.estimatedDocumentCount()
  }));
  const indexList = async () => (await coll.listIndexes(RAW).toArray())
    .map((i) => ({ name: i.name, key: ej(i.key) })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  await step('create_index', async () => ({ name: await coll.createIndex({ k: 1, s: -1 }) }));
  await step('list_indexes', indexList);
  await step('drop_index', async () => { await coll.dropIndex('k_1_s_-1'); return null; });
  await step('list_indexes_after_drop', indexList);
  await step('duplicate_key', async () => {
    try {
      await coll.insertOne({ _id: 1, k: 1 });
    } catch (e) {
      if (!(e instanceof MongoServerError)) throw e;
      return { code: e.code, codeName: e.codeName ?? null, errmsg: e.errmsg ?? e.message };
    }
    throw new Error('no duplicate-key error');
  });
  await step('command_error', async () => {
    try {
      await coll.findOne({ $bogus: 1 });
    } catch (e) {
      if (!(e instanceof MongoServerError)) throw e;
      return { code: e.code, codeName: e.codeName ?? null, errmsg: e.errmsg ?? e.message };
    }
    throw new Error('no error for an unknown operator');
  });
  const bulk = async (ordered, ops) => {
    try {
      return bulkResult(await coll.bulkWrite(ops, { ordered }));
    } catch (e) {
      if (!(e instanceof MongoBulkWriteError)) throw e;
      return bulkResult(e.result);
    }
  };
  await step('bulk_ok', () => bulk(true, [
    { insertOne: { document: { _id: 4000, k: 40 } } },
    { updateOne: { filter: { _id: 4000 }, update: { $set: { k: 41 } } } },
    { replaceOne: { filter: { _id: 10 }, replacement: { k: 10, s: 'replaced' } } },
    { deleteOne: { filter: { _id: 11 } } },
    { updateOne: { filter: { _id: 4001 }, update: { $set: { k: 42 } }, upsert: true } }
  ]));
  await step('bulk_ordered_error', () => bulk(true, [2000, 2001, 1, 2002].map((i) => ({ insertOne: { document: { _id: i } } }))));
  await step('bulk_unordered_error', () => bulk(false, [
    { insertOne: { document: { _id: 3000 } } },
    { insertOne: { document: { _id: 1 } } },
    { insertOne: { document: { _id: 3001 } } },
    { updateOne: { filter: { _id: 3000 }, update: { $set: { k: 1 } } } },
    { deleteOne: { filter: { _id: 3001 } } }
  ]));
  await step('session', async () => {
    const s = client.startSession({ causalConsistency: true });
    try {
      await coll.insertOne({ _id: 5000, k: 50 }, { session: s });
      const found = ej(await coll.findOne({ _id: 5000 }, { ...RAW, session: s }));
      const count = await coll.countDocuments({ k: 50 }, { session: s });
      return { found, count, operationTime: s.operationTime != null };
    } finally {
      await s.endSession();
    }
  });
  await step('final', async () => (await coll.find({}, RAW).sort({ _id: 1 }).toArray()).map(ej));
}

async function main() {
  const counts = {};
  const client = new MongoClient(uri, {
    appName: 'mongoplex-modern-' + label, monitorCommands: true,
    serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000, socketTimeoutMS: 20000
  });
  let counting = false;
  client.on('commandStarted', (e) => {
    if (counting) counts[e.commandName] = (counts[e.commandName] || 0) + 1;
  });
  const steps = [];
  try {
    const db = client.db(new URL(uri).pathname.slice(1) || 'mongoplex_modern');
    const coll = db.collection('modern');
    await coll.drop().catch(() => {});
    counting = true;
    await run(client, db, coll, steps);
    counting = false;
    await coll.drop();
  } catch (e) {
    console.error('workload_node: setup failed: ' + e.stack);
    await client.close().catch(() => {});
    return 2;
  }
  await client.close();
  fs.writeFileSync(outfile, JSON.stringify({ driver: 'node', version, steps, commands: counts }, null, 1));
  return 0;
}

main().then((rc) => process.exit(rc), (e) => { console.error(e); process.exit(2); });
