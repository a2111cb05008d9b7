// compress_node.js — the Node.js driver with wire compression through mongoplex.
//
//   node compress_node.js PROXY_URI DIRECT_URI ALG [ALG...]
//
// The driver: $MONGOPLEX_NODE_MONGODB (a path), else modern/node_modules/mongodb7,
// else node_modules/mongodb beside this file. zlib needs nothing more; snappy
// and zstd need the driver's optional packages (snappy, @mongodb-js/zstd): a
// missing one fails. For each ALG: the same workload through the proxy with
// compressors=ALG and straight to the backend, identical results required,
// and the proxy's counters must show ALG used in both directions. The
// databases: PREFIX_direct and PREFIX_proxy, PREFIX from
// MONGOPLEX_CMP_DB_PREFIX (default cmpn; the test on a shared server makes it unique).
'use strict';
const path = require('path');
const fs = require('fs');

function loadDriver() {
  const cands = [process.env.MONGOPLEX_NODE_MONGODB,
    path.join(__dirname, 'modern/node_modules/mongodb7'),
    path.join(__dirname, 'node_modules/mongodb')].filter(Boolean);
  for (const c of cands) if (fs.existsSync(c)) return require(c);
  throw new Error('no mongodb driver found in ' + cands.join(', '));
}
const { MongoClient } = loadDriver();

async function counters(c) {
  return (await c.db('admin').command({ mongoplexStats: 1 })).counters;
}

async function workload(db, tag) {
  const c = db.collection('cmpn_' + tag);
  await c.drop().catch(() => {});
  const out = [];
  const docs = [];
  for (let i = 0; i < 200; i++) docs.push({ _id: i, n: i, s: ('w' + i).repeat(40) });
  await c.insertMany(docs);
  for (let s = 0; s < 200; s += 20) {
    const ids = [...Array(20).keys()].map((k) => k + s);
    out.push(await c.find({ _id: { $in: ids } }).sort({ _id: 1 }).toArray());
  }
  out.push(await c.aggregate([{ $match: { n: { $lt: 50 } } },
    { $group: { _id: null, t: { $sum: '$n' } } }]).toArray());
  out.push(await c.countDocuments({ n: { $gte: 100 } }));
  out.push((await c.updateMany({ n: { $lt: 10 } }, { $set: { u: 1 } })).modifiedCount);
  out.push((await c.deleteMany({ n: { $gte: 190 } })).deletedCount);
  out.push(await c.find({}).sort({ _id: 1 }).toArray());
  return JSON.stringify(out);
}

async function main() {
  const [proxyUri, directUri, ...algs] = process.argv.slice(2);
  const sep = proxyUri.includes('?') ? '&' : '?';
  const direct = new MongoClient(directUri, { serverSelectionTimeoutMS: 10000 });
  const stats = new MongoClient(proxyUri, { serverSelectionTimeoutMS: 10000 });
  const prefix = process.env.MONGOPLEX_CMP_DB_PREFIX || 'cmpn';
  let ok = true;
  for (const alg of algs) {
    const prox = new MongoClient(proxyUri + sep + 'compressors=' + alg,
      { serverSelectionTimeoutMS: 10000 });
    const want = await workload(direct.db(prefix + '_direct'), alg);
    const before = await counters(stats);
    const got = await workload(prox.db(prefix + '_proxy'), alg);
    const after = await counters(stats);
    const dIn = after[alg + '_decompressed_msgs'] - before[alg + '_decompressed_msgs'];
    const dOut = after[alg + '_compressed_msgs'] - before[alg + '_compressed_msgs'];
    if (got !== want) { console.log(`${alg}: results differ from direct`); ok = false; }
    if (dIn < 10 || dOut < 10) {
      console.log(`${alg}: compression not used (decompressed ${dIn}, compressed ${dOut})`);
      ok = false;
    } else {
      console.log(`${alg}: results identical to direct; ${dIn} requests decompressed, ` +
        `${dOut} replies compressed`);
    }
    await prox.close();
  }
  await stats.close();
  await direct.close();
  process.exit(ok ? 0 : 1);
}
main().catch((e) => { console.log('error: ' + (e && e.stack || e)); process.exit(1); });
