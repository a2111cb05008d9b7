//! The modern-driver workload (tests/drivers/modern/README.md) and the
//! monitoring probe (tests/drivers/monitoring) with the Rust driver 3.9.
//!
//!   mongoplex-modern-rust URI LABEL OUTFILE
//!       the 22 workload steps; writes the transcript (results and errors of
//!       every step, documents as canonical Extended JSON, command counts from
//!       the command event handler) to OUTFILE. Exit 0 when the workload ran to
//!       the end, 2 on setup failure.
//!   mongoplex-modern-rust monitor URI SECONDS HEARTBEAT_MS
//!       connects (default server monitoring mode: streaming when the server's
//!       hello carries topologyVersion), pings, stays idle for SECONDS and
//!       prints one JSON line {started, succeeded, awaited, failed, driver}:
//!       the heartbeat events of that window (awaited =
//!       ServerHeartbeatSucceededEvent.awaited).
//!
//! The driver has no collection-level bulk write for servers before 8.0 (its
//! Client::bulk_write sends MongoDB 8.0's bulkWrite command, which FerretDB
//! 1.24 does not have), so the bulk steps send the insert/update/delete
//! commands a bulk consists of with Database::run_command (see bulk()).
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{Error, ErrorKind, WriteFailure};
use mongodb::event::command::CommandEvent;
use mongodb::event::sdam::SdamEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, Cursor, Database};
use serde_json::{json, Value};

const NUM_DOCS: i32 = 300;
const WORKERS: i32 = 8;

/// The mongodb crate's version, from the committed Cargo.lock (the build is
/// --locked, so this is the version compiled in).
fn driver_version() -> &'static str {
    let lock = include_str!("../Cargo.lock");
    let at = lock.find("name = \"mongodb\"\nversion = \"").expect("mongodb in Cargo.lock");
    let rest = &lock[at + "name = \"mongodb\"\nversion = \"".len()..];
    &rest[..rest.find('"').unwrap()]
}

/// A failed step: its transcript error {code, codeName, errmsg}.
struct Fail(Value);

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail(error_of(&e))
    }
}

fn fail(msg: String) -> Fail {
    Fail(json!({"code": null, "codeName": null, "errmsg": msg}))
}

fn error_of(e: &Error) -> Value {
    match &*e.kind {
        ErrorKind::Command(c) => json!({"code": c.code, "codeName": c.code_name, "errmsg": c.message}),
        _ => json!({"code": null, "codeName": null, "errmsg": e.to_string()}),
    }
}

type Step = Result<Value, Fail>;

/// A document as canonical Extended JSON (field order and types kept).
fn ej(d: Document) -> Value {
    Bson::Document(d).into_canonical_extjson()
}

fn ej_opt(d: Option<Document>) -> Value {
    d.map(ej).unwrap_or(Value::Null)
}

async fn all(mut cur: Cursor<Document>) -> Result<Vec<Value>, Fail> {
    let mut out = Vec::new();
    while cur.advance().await? {
        out.push(ej(cur.deserialize_current()?));
    }
    Ok(out)
}

fn make_doc(i: i32) -> Document {
    doc! {"_id": i, "k": i % 10, "s": format!("s{:03}", i), "v": i as f64 + 0.5,
    "tags": [i % 3, i % 5], "sub": {"a": i, "b": format!("x{}", i % 7)}}
}

fn ids(n: i32, f: impl Fn(i32) -> i32) -> Vec<i32> {
    (0..n).map(f).collect()
}

async fn lookup_worker(coll: Collection<Document>, w: i32) -> Step {
    let mut single = Vec::new();
    for id in ids(20, |j| (w * 37 + j * 11) % 320) {
        single.push(ej_opt(coll.find_one(doc! {"_id": id}).await?));
    }
    let mut ins = Vec::new();
    for q in 0..5 {
        let mut cur = coll.find(doc! {"_id": {"$in": ids(10, |j| (w * 13 + j * 7 + q) % 320)}}).await?;
        let mut docs = Vec::new();
        while cur.advance().await? {
            docs.push(cur.deserialize_current()?);
        }
        docs.sort_by_key(|d| d.get_i32("_id").unwrap_or(i32::MAX));
        ins.push(Value::Array(docs.into_iter().map(ej).collect()));
    }
    Ok(json!({"single": single, "in": ins}))
}

async fn lookups(coll: &Collection<Document>) -> Step {
    let tasks: Vec<_> = (0..WORKERS).map(|w| tokio::spawn(lookup_worker(coll.clone(), w))).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.map_err(|e| fail(format!("lookup worker: {e}")))??);
    }
    Ok(Value::Array(out))
}

async fn index_list(coll: &Collection<Document>) -> Step {
    let mut cur = coll.list_indexes().await?;
    let mut l = Vec::new();
    while cur.advance().await? {
        let m = cur.deserialize_current()?;
        let name = m.options.and_then(|o| o.name).unwrap_or_default();
        l.push((name, ej(m.keys)));
    }
    l.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Value::Array(l.into_iter().map(|(n, k)| json!({"name": n, "key": k})).collect()))
}

fn upd(r: mongodb::results::UpdateResult) -> Value {
    json!({"matched": r.matched_count, "modified": r.modified_count,
           "upserted_id": r.upserted_id.map(Bson::into_relaxed_extjson)})
}

/// One write of a bulk.
enum Op {
    Insert(Document),
    /// filter, update or replacement, upsert
    Update(Document, Document, bool),
    Delete(Document),
}

impl Op {
    fn kind(&self) -> &'static str {
        match self {
            Op::Insert(_) => "insert",
            Op::Update(..) => "update",
            Op::Delete(_) => "delete",
        }
    }

    fn item(&self) -> Document {
        match self {
            Op::Insert(d) => d.clone(),
            Op::Update(q, u, up) => doc! {"q": q.clone(), "u": u.clone(), "upsert": *up, "multi": false},
            Op::Delete(q) => doc! {"q": q.clone(), "limit": 1},
        }
    }
}

fn num(d: &Document, key: &str) -> i64 {
    match d.get(key) {
        Some(Bson::Int32(n)) => *n as i64,
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => 0,
    }
}

/// A bulk as the spec defines it: consecutive writes of one kind go in one
/// insert/update/delete command; an ordered bulk stops after the first
/// command with a write error. Counts and writeErrors (index into OPS) as
/// pymongo's bulk_api_result reports them.
async fn bulk(db: &Database, coll: &str, ordered: bool, ops: Vec<Op>) -> Step {
    let (mut ins, mut matched, mut modified, mut deleted, mut upserted) = (0, 0, 0, 0, 0);
    let mut errs = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        let (kind, start) = (ops[i].kind(), i);
        let mut items = Vec::new();
        while i < ops.len() && ops[i].kind() == kind {
            items.push(ops[i].item());
            i += 1;
        }
        let field = match kind {
            "insert" => "documents",
            "update" => "updates",
            _ => "deletes",
        };
        let r = db.run_command(doc! {kind: coll, field: items, "ordered": ordered}).await?;
        let n = num(&r, "n");
        match kind {
            "insert" => ins += n,
            "update" => {
                let ups = r.get_array("upserted").map(|a| a.len() as i64).unwrap_or(0);
                upserted += ups;
                matched += n - ups;
                modified += num(&r, "nModified");
            }
            _ => deleted += n,
        }
        let we = r.get_array("writeErrors").cloned().unwrap_or_default();
        for e in &we {
            let e = e.as_document().ok_or_else(|| fail("writeErrors entry is not a document".into()))?;
            errs.push(json!({"index": start as i64 + num(e, "index"), "code": num(e, "code"),
                             "errmsg": e.get_str("errmsg").unwrap_or_default()}));
        }
        if ordered && !we.is_empty() {
            break;
        }
    }
    Ok(json!({"nInserted": ins, "nMatched": matched, "nModified": modified, "nDeleted": deleted,
              "nUpserted": upserted, "writeErrors": errs}))
}

async fn duplicate_key(coll: &Collection<Document>) -> Step {
    match coll.insert_one(doc! {"_id": 1, "k": 1}).await {
        Err(e) => match &*e.kind {
            ErrorKind::Write(WriteFailure::WriteError(we)) if we.code == 11000 => {
                Ok(json!({"code": we.code, "codeName": we.code_name, "errmsg": we.message}))
            }
            _ => Err(fail(format!("no duplicate-key error: {e}"))),
        },
        Ok(_) => Err(fail("no duplicate-key error".into())),
    }
}

async fn command_error(coll: &Collection<Document>) -> Step {
    match coll.find_one(doc! {"$bogus": 1}).await {
        Err(e) => match &*e.kind {
            ErrorKind::Command(c) => Ok(json!({"code": c.code, "codeName": c.code_name, "errmsg": c.message})),
            _ => Err(fail(format!("no command error for an unknown operator: {e}"))),
        },
        Ok(_) => Err(fail("no command error for an unknown operator".into())),
    }
}

async fn session(client: &Client, coll: &Collection<Document>) -> Step {
    let mut s = client.start_session().causal_consistency(true).await?;
    coll.insert_one(doc! {"_id": 5000, "k": 50}).session(&mut s).await?;
    let found = coll.find_one(doc! {"_id": 5000}).session(&mut s).await?;
    let n = coll.count_documents(doc! {"k": 50}).session(&mut s).await?;
    Ok(json!({"found": ej_opt(found), "count": n, "operationTime": s.operation_time().is_some()}))
}

macro_rules! step {
    ($steps:ident, $op:expr, $body:expr) => {{
        let r: Step = async { $body }.await;
        $steps.push(match r {
            Ok(v) => json!({"op": $op, "result": v}),
            Err(Fail(e)) => json!({"op": $op, "error": e}),
        });
    }};
}

async fn run(client: &Client, db: &Database, coll: &Collection<Document>) -> Vec<Value> {
    let mut steps = Vec::new();
    step!(steps, "insert_many", {
        let r = coll.insert_many((0..NUM_DOCS).map(make_doc)).await?;
        Ok(json!({"inserted": r.inserted_ids.len()}))
    });
    step!(steps, "lookups", lookups(coll).await);
    step!(steps, "cursor", {
        Ok(json!(all(coll.find(doc! {"k": {"$gte": 0}}).sort(doc! {"_id": 1}).batch_size(7).await?).await?))
    });
    step!(steps, "update_one", Ok(upd(coll.update_one(doc! {"_id": 5}, doc! {"$set": {"s": "upd"}}).await?)));
    step!(steps, "update_many", Ok(upd(coll.update_many(doc! {"k": 3}, doc! {"$inc": {"v": 100}}).await?)));
    step!(steps, "upsert", {
        Ok(upd(coll.update_one(doc! {"_id": 1000}, doc! {"$set": {"k": 99}}).upsert(true).await?))
    });
    step!(steps, "delete_one", Ok(json!({"deleted": coll.delete_one(doc! {"_id": 7}).await?.deleted_count})));
    step!(steps, "delete_many", Ok(json!({"deleted": coll.delete_many(doc! {"k": 9}).await?.deleted_count})));
    step!(steps, "aggregate", {
        let p = [doc! {"$match": {"k": {"$lt": 5}}}, doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}},
                 doc! {"$sort": {"_id": 1}}];
        Ok(json!(all(coll.aggregate(p).await?).await?))
    });
    step!(steps, "aggregate_batches", {
        let p = [doc! {"$match": {"k": {"$in": [1, 2]}}}, doc! {"$sort": {"_id": 1}},
                 doc! {"$project": {"_id": 1, "s": 1}}];
        Ok(json!(all(coll.aggregate(p).batch_size(5).await?).await?))
    });
    step!(steps, "count", {
        let a = coll.count_documents(doc! {}).await?;
        let k3 = coll.count_documents(doc! {"k": 3}).await?;
        let est = coll.estimated_document_count().await?;
        Ok(json!({"all": a, "k3": k3, "estimated": est}))
    });
    step!(steps, "create_index", {
        let m = mongodb::IndexModel::builder().keys(doc! {"k": 1, "s": -1}).build();
        Ok(json!({"name": coll.create_index(m).await?.index_name}))
    });
    step!(steps, "list_indexes", index_list(coll).await);
    step!(steps, "drop_index", {
        coll.drop_index("k_1_s_-1").await?;
        Ok(Value::Null)
    });
    step!(steps, "list_indexes_after_drop", index_list(coll).await);
    step!(steps, "duplicate_key", duplicate_key(coll).await);
    step!(steps, "command_error", command_error(coll).await);
    let name = coll.name();
    let id = |i: i32| doc! {"_id": i};
    step!(steps, "bulk_ok", {
        bulk(db, name, true, vec![
            Op::Insert(doc! {"_id": 4000, "k": 40}),
            Op::Update(id(4000), doc! {"$set": {"k": 41}}, false),
            Op::Update(id(10), doc! {"k": 10, "s": "replaced"}, false),
            Op::Delete(id(11)),
            Op::Update(id(4001), doc! {"$set": {"k": 42}}, true),
        ])
        .await
    });
    step!(steps, "bulk_ordered_error", {
        let ops = [2000, 2001, 1, 2002].into_iter().map(|i| Op::Insert(id(i))).collect();
        bulk(db, name, true, ops).await
    });
    step!(steps, "bulk_unordered_error", {
        bulk(db, name, false, vec![
            Op::Insert(id(3000)),
            Op::Insert(id(1)),
            Op::Insert(id(3001)),
            Op::Update(id(3000), doc! {"$set": {"k": 1}}, false),
            Op::Delete(id(3001)),
        ])
        .await
    });
    step!(steps, "session", session(client, coll).await);
    step!(steps, "final", Ok(json!(all(coll.find(doc! {}).sort(doc! {"_id": 1}).await?).await?)));
    steps
}

/// Started commands by name while `on`; the login's SASL commands are not the
/// workload (as in workload_pymongo.py).
#[derive(Default)]
struct Counts {
    on: AtomicBool,
    n: Mutex<HashMap<String, u64>>,
}

fn exit_with(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("modern-rust: {what}: {e}");
    std::process::exit(2)
}

async fn workload(uri: &str, label: &str, outfile: &str) {
    let counts = Arc::new(Counts::default());
    let mut opts = ClientOptions::parse(uri).await.unwrap_or_else(|e| exit_with("URI", e));
    let c = counts.clone();
    opts.command_event_handler = Some(EventHandler::callback(move |ev: CommandEvent| {
        if let CommandEvent::Started(e) = ev {
            if c.on.load(Ordering::SeqCst) && e.command_name != "saslStart" && e.command_name != "saslContinue" {
                *c.n.lock().unwrap().entry(e.command_name).or_default() += 1;
            }
        }
    }));
    opts.app_name = Some(format!("mongoplex-modern-{label}"));
    opts.server_selection_timeout = Some(Duration::from_secs(5));
    opts.connect_timeout = Some(Duration::from_secs(5));
    let db_name = opts.default_database.clone().unwrap_or_else(|| "mongoplex_modern".into());
    let client = Client::with_options(opts).unwrap_or_else(|e| exit_with("connect", e));
    let db = client.database(&db_name);
    let coll = db.collection::<Document>("modern");
    coll.drop().await.unwrap_or_else(|e| exit_with("setup failed", e));
    counts.on.store(true, Ordering::SeqCst);
    let steps = run(&client, &db, &coll).await;
    counts.on.store(false, Ordering::SeqCst);
    coll.drop().await.unwrap_or_else(|e| exit_with("drop failed", e));
    client.shutdown().await;
    let commands: serde_json::Map<String, Value> = {
        let mut v: Vec<_> = counts.n.lock().unwrap().drain().collect();
        v.sort();
        v.into_iter().map(|(k, n)| (k, json!(n))).collect()
    };
    let t = json!({"driver": "rust", "version": driver_version(), "steps": steps, "commands": commands});
    let text = serde_json::to_string_pretty(&t).unwrap();
    std::fs::write(outfile, text).unwrap_or_else(|e| exit_with(outfile, e));
}

async fn monitor(uri: &str, secs: f64, hb_ms: u64) {
    // started, succeeded, awaited, failed
    let n: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
    let on = Arc::new(AtomicBool::new(false));
    let mut opts = ClientOptions::parse(uri).await.unwrap_or_else(|e| exit_with("URI", e));
    let (c, o) = (n.clone(), on.clone());
    opts.sdam_event_handler = Some(EventHandler::callback(move |ev: SdamEvent| {
        if !o.load(Ordering::SeqCst) {
            return;
        }
        match ev {
            SdamEvent::ServerHeartbeatStarted(_) => c[0].fetch_add(1, Ordering::SeqCst),
            SdamEvent::ServerHeartbeatSucceeded(e) => {
                if e.awaited {
                    c[2].fetch_add(1, Ordering::SeqCst);
                }
                c[1].fetch_add(1, Ordering::SeqCst)
            }
            SdamEvent::ServerHeartbeatFailed(_) => c[3].fetch_add(1, Ordering::SeqCst),
            _ => 0,
        };
    }));
    opts.heartbeat_freq = Some(Duration::from_millis(hb_ms));
    opts.server_selection_timeout = Some(Duration::from_secs(5));
    let client = Client::with_options(opts).unwrap_or_else(|e| exit_with("connect", e));
    if let Err(e) = client.database("admin").run_command(doc! {"ping": 1}).await {
        exit_with("ping", e);
    }
    on.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    on.store(false, Ordering::SeqCst);
    let g = |i: usize| n[i].load(Ordering::SeqCst);
    let out = json!({"started": g(0), "succeeded": g(1), "awaited": g(2), "failed": g(3),
                     "driver": format!("rust {}", driver_version())});
    client.shutdown().await;
    println!("{out}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() == 5 && a[1] == "monitor" {
        let secs = a[3].parse::<f64>().unwrap_or_else(|e| exit_with("bad SECONDS", e));
        let hb = a[4].parse::<u64>().unwrap_or_else(|e| exit_with("bad HEARTBEAT_MS", e));
        monitor(&a[2], secs, hb).await;
    } else if a.len() == 4 {
        workload(&a[1], &a[2], &a[3]).await;
    } else {
        eprintln!("usage: mongoplex-modern-rust URI LABEL OUTFILE | mongoplex-modern-rust monitor URI SECONDS HEARTBEAT_MS");
        std::process::exit(2);
    }
}
