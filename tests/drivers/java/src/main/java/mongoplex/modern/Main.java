/*
 * The modern-driver workload (tests/drivers/modern/README.md) with the MongoDB
 * Java sync driver 5.x.
 *
 *   java -jar mongoplex-modern-java.jar URI LABEL OUTFILE
 *
 * Writes the transcript (results and errors of every step, documents as
 * canonical Extended JSON, command counts from a CommandListener) to OUTFILE.
 * Exit 0 when the workload ran to the end, 2 on setup failure.
 */
package mongoplex.modern;

import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.gte;
import static com.mongodb.client.model.Filters.in;
import static com.mongodb.client.model.Filters.lt;
import static com.mongodb.client.model.Sorts.ascending;

import com.mongodb.ClientSessionOptions;
import com.mongodb.ConnectionString;
import com.mongodb.ErrorCategory;
import com.mongodb.MongoBulkWriteException;
import com.mongodb.MongoClientSettings;
import com.mongodb.MongoCommandException;
import com.mongodb.MongoException;
import com.mongodb.MongoWriteException;
import com.mongodb.bulk.BulkWriteError;
import com.mongodb.bulk.BulkWriteResult;
import com.mongodb.client.ClientSession;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Aggregates;
import com.mongodb.client.model.BulkWriteOptions;
import com.mongodb.client.model.DeleteOneModel;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.InsertOneModel;
import com.mongodb.client.model.ReplaceOneModel;
import com.mongodb.client.model.UpdateOneModel;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.WriteModel;
import com.mongodb.client.result.UpdateResult;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.bson.BsonArray;
import org.bson.BsonDocument;
import org.bson.BsonDouble;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.bson.conversions.Bson;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

public final class Main {
    private static final int N = 300;
    private static final int WORKERS = 8;
    private static final JsonWriterSettings CANONICAL =
            JsonWriterSettings.builder().outputMode(JsonMode.EXTENDED).build();

    /** A document already rendered as canonical Extended JSON. */
    private record Raw(String json) {}

    /** A step's body; may throw any driver exception. */
    private interface Body {
        Object run() throws Exception;
    }

    private Main() {}

    private static Raw ej(BsonDocument d) {
        return d == null ? null : new Raw(d.toJson(CANONICAL));
    }

    private static List<Object> all(Iterable<BsonDocument> it) {
        List<Object> out = new ArrayList<>();
        for (BsonDocument d : it) {
            out.add(ej(d));
        }
        return out;
    }

    private static BsonDocument makeDoc(int i) {
        return new BsonDocument("_id", new BsonInt32(i))
                .append("k", new BsonInt32(i % 10))
                .append("s", new BsonString(String.format("s%03d", i)))
                .append("v", new BsonDouble(i + 0.5))
                .append("tags", new BsonArray(List.of(new BsonInt32(i % 3), new BsonInt32(i % 5))))
                .append("sub", new BsonDocument("a", new BsonInt32(i)).append("b", new BsonString("x" + (i % 7))));
    }

    private static BsonDocument id(int i) {
        return new BsonDocument("_id", new BsonInt32(i));
    }

    private static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static Object bsonNumber(BsonValue v) {
        if (v == null) {
            return null;
        }
        return v.isInt32() ? (Object) v.asInt32().getValue() : v.toString();
    }

    private static Map<String, Object> upd(UpdateResult r) {
        return map("matched", r.getMatchedCount(), "modified", r.getModifiedCount(),
                "upserted_id", bsonNumber(r.getUpsertedId()));
    }

    private static Map<String, Object> bulkResult(BulkWriteResult r, List<BulkWriteError> errors) {
        List<Object> errs = new ArrayList<>();
        for (BulkWriteError e : errors) {
            errs.add(map("index", e.getIndex(), "code", e.getCode(), "errmsg", e.getMessage()));
        }
        return map("nInserted", r.getInsertedCount(), "nMatched", r.getMatchedCount(),
                "nModified", r.getModifiedCount(), "nDeleted", r.getDeletedCount(),
                "nUpserted", r.getUpserts().size(), "writeErrors", errs);
    }

    private static Object bulk(MongoCollection<BsonDocument> coll, boolean ordered,
            List<WriteModel<BsonDocument>> ops) {
        try {
            return bulkResult(coll.bulkWrite(ops, new BulkWriteOptions().ordered(ordered)), List.of());
        } catch (MongoBulkWriteException e) {
            return bulkResult(e.getWriteResult(), e.getWriteErrors());
        }
    }

    private static List<Object> indexList(MongoCollection<BsonDocument> coll) {
        List<BsonDocument> l = coll.listIndexes(BsonDocument.class).into(new ArrayList<>());
        l.sort(Comparator.comparing(d -> d.getString("name").getValue()));
        List<Object> out = new ArrayList<>();
        for (BsonDocument d : l) {
            out.add(map("name", d.getString("name").getValue(), "key", ej(d.getDocument("key"))));
        }
        return out;
    }

    private static Object lookups(MongoCollection<BsonDocument> coll) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
        try {
            List<Future<Object>> futures = new ArrayList<>();
            for (int w = 0; w < WORKERS; w++) {
                final int fw = w;
                futures.add(pool.submit(() -> {
                    List<Object> single = new ArrayList<>();
                    for (int j = 0; j < 20; j++) {
                        single.add(ej(coll.find(eq("_id", (fw * 37 + j * 11) % 320)).first()));
                    }
                    List<Object> ins = new ArrayList<>();
                    for (int q = 0; q < 5; q++) {
                        List<Integer> ids = new ArrayList<>();
                        for (int j = 0; j < 10; j++) {
                            ids.add((fw * 13 + j * 7 + q) % 320);
                        }
                        List<BsonDocument> docs = coll.find(in("_id", ids)).into(new ArrayList<>());
                        docs.sort(Comparator.comparingInt(d -> d.getInt32("_id").getValue()));
                        ins.add(all(docs));
                    }
                    return map("in", ins, "single", single);
                }));
            }
            List<Object> out = new ArrayList<>();
            for (Future<Object> f : futures) {
                out.add(f.get());
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    private static Object duplicateKey(MongoCollection<BsonDocument> coll) {
        try {
            coll.insertOne(new BsonDocument("_id", new BsonInt32(1)).append("k", new BsonInt32(1)));
        } catch (MongoWriteException e) {
            if (e.getError().getCategory() == ErrorCategory.DUPLICATE_KEY) {
                return map("code", e.getError().getCode(), "codeName", null, "errmsg", e.getError().getMessage());
            }
            throw e;
        }
        throw new IllegalStateException("no duplicate-key error");
    }

    private static Object session(MongoClient client, MongoCollection<BsonDocument> coll) {
        try (ClientSession s = client.startSession(ClientSessionOptions.builder().causallyConsistent(true).build())) {
            coll.insertOne(s, new BsonDocument("_id", new BsonInt32(5000)).append("k", new BsonInt32(50)));
            Raw found = ej(coll.find(s, id(5000)).first());
            long n = coll.countDocuments(s, eq("k", 50));
            return map("count", n, "found", found, "operationTime", s.getOperationTime() != null);
        }
    }

    private static List<Object> run(MongoClient client, MongoCollection<BsonDocument> coll) {
        List<Object> steps = new ArrayList<>();
        java.util.function.BiConsumer<String, Body> step = (op, body) -> {
            try {
                steps.add(map("op", op, "result", body.run()));
            } catch (MongoCommandException e) {
                steps.add(map("op", op, "error", map("code", e.getErrorCode(), "codeName", e.getErrorCodeName(),
                        "errmsg", e.getErrorMessage())));
            } catch (Exception e) {
                Integer code = e instanceof MongoException me ? me.getCode() : null;
                steps.add(map("op", op, "error", map("code", code, "codeName", null, "errmsg", e.toString())));
            }
        };
        step.accept("insert_many", () -> {
            List<BsonDocument> docs = new ArrayList<>();
            for (int i = 0; i < N; i++) {
                docs.add(makeDoc(i));
            }
            return map("inserted", coll.insertMany(docs).getInsertedIds().size());
        });
        step.accept("lookups", () -> lookups(coll));
        step.accept("cursor", () -> all(coll.find(gte("k", 0)).sort(ascending("_id")).batchSize(7)));
        step.accept("update_one", () -> upd(coll.updateOne(eq("_id", 5), Updates.set("s", "upd"))));
        step.accept("update_many", () -> upd(coll.updateMany(eq("k", 3), Updates.inc("v", 100))));
        step.accept("upsert", () -> upd(coll.updateOne(eq("_id", 1000), Updates.set("k", 99),
                new UpdateOptions().upsert(true))));
        step.accept("delete_one", () -> map("deleted", coll.deleteOne(eq("_id", 7)).getDeletedCount()));
        step.accept("delete_many", () -> map("deleted", coll.deleteMany(eq("k", 9)).getDeletedCount()));
        step.accept("aggregate", () -> all(coll.aggregate(List.of(
                Aggregates.match(lt("k", 5)),
                BsonDocument.parse("{\"$group\": {\"_id\": \"$k\", \"n\": {\"$sum\": 1}}}"),
                Aggregates.sort(ascending("_id"))))));
        step.accept("aggregate_batches", () -> all(coll.aggregate(List.<Bson>of(
                Aggregates.match(in("k", 1, 2)), Aggregates.sort(ascending("_id")),
                BsonDocument.parse("{\"$project\": {\"_id\": 1, \"s\": 1}}"))).batchSize(5)));
        step.accept("count", () -> map("all", coll.countDocuments(), "k3", coll.countDocuments(eq("k", 3)),
                "estimated", coll.estimatedDocumentCount()));
        step.accept("create_index", () -> map("name",
                coll.createIndex(Indexes.compoundIndex(Indexes.ascending("k"), Indexes.descending("s")))));
        step.accept("list_indexes", () -> indexList(coll));
        step.accept("drop_index", () -> {
            coll.dropIndex("k_1_s_-1");
            return null;
        });
        step.accept("list_indexes_after_drop", () -> indexList(coll));
        step.accept("duplicate_key", () -> duplicateKey(coll));
        step.accept("command_error", () -> {
            try {
                coll.find(new BsonDocument("$bogus", new BsonInt32(1))).first();
            } catch (MongoCommandException e) {
                return map("code", e.getErrorCode(), "codeName", e.getErrorCodeName(), "errmsg", e.getErrorMessage());
            }
            throw new IllegalStateException("no error for an unknown operator");
        });
        step.accept("bulk_ok", () -> bulk(coll, true, List.of(
                new InsertOneModel<>(new BsonDocument("_id", new BsonInt32(4000)).append("k", new BsonInt32(40))),
                new UpdateOneModel<>(id(4000), Updates.set("k", 41)),
                new ReplaceOneModel<>(id(10),
                        new BsonDocument("k", new BsonInt32(10)).append("s", new BsonString("replaced"))),
                new DeleteOneModel<>(id(11)),
                new UpdateOneModel<>(id(4001), Updates.set("k", 42), new UpdateOptions().upsert(true)))));
        step.accept("bulk_ordered_error", () -> bulk(coll, true, List.of(
                new InsertOneModel<>(id(2000)), new InsertOneModel<>(id(2001)),
                new InsertOneModel<>(id(1)), new InsertOneModel<>(id(2002)))));
        step.accept("bulk_unordered_error", () -> bulk(coll, false, List.of(
                new InsertOneModel<>(id(3000)), new InsertOneModel<>(id(1)), new InsertOneModel<>(id(3001)),
                new UpdateOneModel<>(id(3000), Updates.set("k", 1)), new DeleteOneModel<>(id(3001)))));
        step.accept("session", () -> session(client, coll));
        step.accept("final", () -> all(coll.find().sort(ascending("_id"))));
        return steps;
    }

    // ------------------------------------------------------------ JSON output

    private static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Raw r) {
            sb.append(r.json());
        } else if (v instanceof String s) {
            sb.append(quote(s));
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                sb.append(first ? "" : ",").append(quote((String) e.getKey())).append(':');
                json(sb, e.getValue());
                first = false;
            }
            sb.append('}');
        } else if (v instanceof List<?> l) {
            sb.append('[');
            for (int i = 0; i < l.size(); i++) {
                sb.append(i == 0 ? "" : ",");
                json(sb, l.get(i));
            }
            sb.append(']');
        } else {
            throw new IllegalArgumentException("no JSON for " + v.getClass());
        }
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 3) {
            System.err.println("usage: java -jar mongoplex-modern-java.jar URI LABEL OUTFILE");
            System.exit(2);
        }
        java.util.logging.LogManager.getLogManager().reset(); // the driver's JUL INFO lines
        ConnectionString cs = new ConnectionString(args[0]);
        Map<String, Integer> counts = new TreeMap<>();
        boolean[] counting = {false};
        CommandListener listener = new CommandListener() {
            @Override
            public void commandStarted(CommandStartedEvent e) {
                synchronized (counts) {
                    if (counting[0]) {
                        counts.merge(e.getCommandName(), 1, Integer::sum);
                    }
                }
            }
        };
        MongoClientSettings settings = MongoClientSettings.builder().applyConnectionString(cs)
                .applicationName("mongoplex-modern-" + args[1]).addCommandListener(listener)
                .applyToClusterSettings(b -> b.serverSelectionTimeout(5, TimeUnit.SECONDS))
                .applyToSocketSettings(b -> b.connectTimeout(5, TimeUnit.SECONDS).readTimeout(20, TimeUnit.SECONDS))
                .build();
        List<Object> steps;
        try (MongoClient client = MongoClients.create(settings)) {
            String dbName = cs.getDatabase() != null ? cs.getDatabase() : "mongoplex_modern";
            MongoCollection<BsonDocument> coll = client.getDatabase(dbName).getCollection("modern", BsonDocument.class);
            coll.drop();
            synchronized (counts) {
                counting[0] = true;
            }
            steps = run(client, coll);
            synchronized (counts) {
                counting[0] = false;
            }
            coll.drop();
        } catch (MongoException e) {
            System.err.println("modern-java: setup failed: " + e);
            System.exit(2);
            return;
        }
        String version = com.mongodb.internal.build.MongoDriverVersion.VERSION;
        StringBuilder sb = new StringBuilder();
        json(sb, map("driver", "java", "version", version, "steps", steps, "commands", counts));
        Files.writeString(Path.of(args[2]), sb.append('\n').toString(), StandardCharsets.UTF_8);
        System.exit(0);
    }
}
