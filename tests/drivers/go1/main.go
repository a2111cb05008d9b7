// Command modern-go1 runs the modern-driver workload (tests/drivers/modern/README.md)
// with the Go driver v1 (go.mongodb.org/mongo-driver 1.17), the same steps as
// ../go (the v2 driver) written against the v1 API.
//
//	modern-go1 URI LABEL OUTFILE
//	modern-go1 monitor URI SECONDS HEARTBEAT_MS   (monitor.go)
//
// It writes the transcript (results and errors of every step, documents as
// canonical Extended JSON, command counts from command monitoring) to OUTFILE.
// Exit 0 when the workload ran to the end, 2 on setup failure.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/event"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/version"
)

const (
	numDocs = 300
	workers = 8
)

type m = map[string]any

// step is one transcript entry: {"op", "result"} or, when the step failed, {"op", "error"}.
type step struct {
	Op     string
	Result any
	Error  any
}

func (s step) MarshalJSON() ([]byte, error) {
	if s.Error != nil {
		return json.Marshal(m{"op": s.Op, "error": s.Error})
	}
	return json.Marshal(m{"op": s.Op, "result": s.Result})
}

// ej renders a document as canonical Extended JSON (nil for no document).
func ej(raw bson.Raw) any {
	if raw == nil {
		return nil
	}
	b, err := bson.MarshalExtJSON(raw, true, false)
	if err != nil {
		panic(err)
	}
	return json.RawMessage(b)
}

func all(ctx context.Context, cur *mongo.Cursor, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	out := []any{}
	for cur.Next(ctx) {
		out = append(out, ej(append(bson.Raw(nil), cur.Current...)))
	}
	return out, cur.Err()
}

func makeDoc(i int) bson.D {
	return bson.D{{Key: "_id", Value: int32(i)}, {Key: "k", Value: int32(i % 10)},
		{Key: "s", Value: fmt.Sprintf("s%03d", i)}, {Key: "v", Value: float64(i) + 0.5},
		{Key: "tags", Value: bson.A{int32(i % 3), int32(i % 5)}},
		{Key: "sub", Value: bson.D{{Key: "a", Value: int32(i)}, {Key: "b", Value: fmt.Sprintf("x%d", i%7)}}}}
}

func ids(n int, f func(j int) int) bson.A {
	a := bson.A{}
	for j := 0; j < n; j++ {
		a = append(a, int32(f(j)))
	}
	return a
}

func idOf(doc any) int {
	var d struct {
		ID struct {
			N string `json:"$numberInt"`
		} `json:"_id"`
	}
	_ = json.Unmarshal(doc.(json.RawMessage), &d)
	var n int
	fmt.Sscan(d.ID.N, &n)
	return n
}

func writeErrors(errs []mongo.BulkWriteError) []any {
	out := []any{}
	for _, e := range errs {
		out = append(out, m{"index": e.Index, "code": e.Code, "errmsg": e.Message})
	}
	return out
}

func bulkResult(r *mongo.BulkWriteResult, err error) (any, error) {
	var bwe mongo.BulkWriteException
	errs := []any{}
	if err != nil {
		if !errors.As(err, &bwe) || r == nil {
			return nil, err
		}
		errs = writeErrors(bwe.WriteErrors)
	}
	return m{"nInserted": r.InsertedCount, "nMatched": r.MatchedCount, "nModified": r.ModifiedCount,
		"nDeleted": r.DeletedCount, "nUpserted": r.UpsertedCount, "writeErrors": errs}, nil
}

func upd(r *mongo.UpdateResult, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return m{"matched": r.MatchedCount, "modified": r.ModifiedCount, "upserted_id": r.UpsertedID}, nil
}

func errorOf(err error) m {
	var ce mongo.CommandError
	out := m{"code": nil, "codeName": nil, "errmsg": err.Error()}
	if errors.As(err, &ce) {
		out["code"], out["codeName"], out["errmsg"] = ce.Code, ce.Name, ce.Message
	}
	return out
}

func lookups(ctx context.Context, coll *mongo.Collection) (any, error) {
	out := make([]any, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			single := []any{}
			for _, id := range ids(20, func(j int) int { return (w*37 + j*11) % 320 }) {
				raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
				if errors.Is(err, mongo.ErrNoDocuments) {
					single = append(single, nil)
					continue
				} else if err != nil {
					errs[w] = err
					return
				}
				single = append(single, ej(raw))
			}
			ins := []any{}
			for q := 0; q < 5; q++ {
				in := ids(10, func(j int) int { return (w*13 + j*7 + q) % 320 })
				cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}})
				docs, err := all(ctx, cur, err)
				if err != nil {
					errs[w] = err
					return
				}
				sort.SliceStable(docs, func(a, b int) bool { return idOf(docs[a]) < idOf(docs[b]) })
				ins = append(ins, docs)
			}
			out[w] = m{"single": single, "in": ins}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func indexList(ctx context.Context, coll *mongo.Collection) (any, error) {
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	type idx struct {
		name string
		key  any
	}
	var l []idx
	for cur.Next(ctx) {
		l = append(l, idx{cur.Current.Lookup("name").StringValue(), ej(cur.Current.Lookup("key").Document())})
	}
	sort.Slice(l, func(a, b int) bool { return l[a].name < l[b].name })
	out := []any{}
	for _, i := range l {
		out = append(out, m{"name": i.name, "key": i.key})
	}
	return out, cur.Err()
}

func run(ctx context.Context, client *mongo.Client, coll *mongo.Collection) []step {
	var steps []step
	do := func(op string, fn func() (any, error)) {
		r, err := fn()
		if err != nil {
			steps = append(steps, step{Op: op, Error: errorOf(err)})
		} else {
			steps = append(steps, step{Op: op, Result: r})
		}
	}
	find := func(filter any, opts ...*options.FindOptions) (any, error) {
		cur, err := coll.Find(ctx, filter, opts...)
		return all(ctx, cur, err)
	}
	do("insert_many", func() (any, error) {
		docs := []any{}
		for i := 0; i < numDocs; i++ {
			docs = append(docs, makeDoc(i))
		}
		r, err := coll.InsertMany(ctx, docs)
		if err != nil {
			return nil, err
		}
		return m{"inserted": len(r.InsertedIDs)}, nil
	})
	do("lookups", func() (any, error) { return lookups(ctx, coll) })
	do("cursor", func() (any, error) {
		return find(bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: int32(0)}}}},
			options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(7))
	})
	do("update_one", func() (any, error) {
		return upd(coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 5}}, bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: "upd"}}}}))
	})
	do("update_many", func() (any, error) {
		return upd(coll.UpdateMany(ctx, bson.D{{Key: "k", Value: 3}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "v", Value: int32(100)}}}}))
	})
	do("upsert", func() (any, error) {
		return upd(coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: int32(1000)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "k", Value: int32(99)}}}},
			options.Update().SetUpsert(true)))
	})
	do("delete_one", func() (any, error) {
		r, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: 7}})
		if err != nil {
			return nil, err
		}
		return m{"deleted": r.DeletedCount}, nil
	})
	do("delete_many", func() (any, error) {
		r, err := coll.DeleteMany(ctx, bson.D{{Key: "k", Value: 9}})
		if err != nil {
			return nil, err
		}
		return m{"deleted": r.DeletedCount}, nil
	})
	do("aggregate", func() (any, error) {
		cur, err := coll.Aggregate(ctx, mongo.Pipeline{
			{{Key: "$match", Value: bson.D{{Key: "k", Value: bson.D{{Key: "$lt", Value: 5}}}}}},
			{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$k"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
			{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}}})
		return all(ctx, cur, err)
	})
	do("aggregate_batches", func() (any, error) {
		cur, err := coll.Aggregate(ctx, mongo.Pipeline{
			{{Key: "$match", Value: bson.D{{Key: "k", Value: bson.D{{Key: "$in", Value: bson.A{1, 2}}}}}}},
			{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
			{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: 1}}}}},
			options.Aggregate().SetBatchSize(5))
		return all(ctx, cur, err)
	})
	do("count", func() (any, error) {
		a, err := coll.CountDocuments(ctx, bson.D{})
		if err != nil {
			return nil, err
		}
		k3, err := coll.CountDocuments(ctx, bson.D{{Key: "k", Value: 3}})
		if err != nil {
			return nil, err
		}
		est, err := coll.EstimatedDocumentCount(ctx)
		if err != nil {
			return nil, err
		}
		return m{"all": a, "k3": k3, "estimated": est}, nil
	})
	do("create_index", func() (any, error) {
		name, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "k", Value: 1}, {Key: "s", Value: -1}}})
		return m{"name": name}, err
	})
	do("list_indexes", func() (any, error) { return indexList(ctx, coll) })
	do("drop_index", func() (any, error) {
		_, err := coll.Indexes().DropOne(ctx, "k_1_s_-1")
		return nil, err
	})
	do("list_indexes_after_drop", func() (any, error) { return indexList(ctx, coll) })
	do("duplicate_key", func() (any, error) {
		_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: int32(1)}, {Key: "k", Value: int32(1)}})
		var we mongo.WriteException
		if errors.As(err, &we) && len(we.WriteErrors) == 1 && mongo.IsDuplicateKeyError(err) {
			e := we.WriteErrors[0]
			return m{"code": e.Code, "codeName": nil, "errmsg": e.Message}, nil
		}
		return nil, fmt.Errorf("no duplicate-key error: %v", err)
	})
	do("command_error", func() (any, error) {
		err := coll.FindOne(ctx, bson.D{{Key: "$bogus", Value: int32(1)}}).Err()
		var ce mongo.CommandError
		if errors.As(err, &ce) {
			return m{"code": ce.Code, "codeName": ce.Name, "errmsg": ce.Message}, nil
		}
		return nil, fmt.Errorf("no command error for an unknown operator: %v", err)
	})
	bulk := func(ordered bool, models []mongo.WriteModel) (any, error) {
		return bulkResult(coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(ordered)))
	}
	ins := func(doc bson.D) mongo.WriteModel { return mongo.NewInsertOneModel().SetDocument(doc) }
	id := func(i int) bson.D { return bson.D{{Key: "_id", Value: int32(i)}} }
	set := func(k string, v int) bson.D { return bson.D{{Key: "$set", Value: bson.D{{Key: k, Value: int32(v)}}}} }
	do("bulk_ok", func() (any, error) {
		return bulk(true, []mongo.WriteModel{
			ins(bson.D{{Key: "_id", Value: int32(4000)}, {Key: "k", Value: int32(40)}}),
			mongo.NewUpdateOneModel().SetFilter(id(4000)).SetUpdate(set("k", 41)),
			mongo.NewReplaceOneModel().SetFilter(id(10)).SetReplacement(bson.D{{Key: "k", Value: int32(10)}, {Key: "s", Value: "replaced"}}),
			mongo.NewDeleteOneModel().SetFilter(id(11)),
			mongo.NewUpdateOneModel().SetFilter(id(4001)).SetUpdate(set("k", 42)).SetUpsert(true)})
	})
	do("bulk_ordered_error", func() (any, error) {
		return bulk(true, []mongo.WriteModel{ins(id(2000)), ins(id(2001)), ins(id(1)), ins(id(2002))})
	})
	do("bulk_unordered_error", func() (any, error) {
		return bulk(false, []mongo.WriteModel{ins(id(3000)), ins(id(1)), ins(id(3001)),
			mongo.NewUpdateOneModel().SetFilter(id(3000)).SetUpdate(set("k", 1)),
			mongo.NewDeleteOneModel().SetFilter(id(3001))})
	})
	do("session", func() (any, error) {
		sess, err := client.StartSession(options.Session().SetCausalConsistency(true))
		if err != nil {
			return nil, err
		}
		defer sess.EndSession(ctx)
		var out m
		err = mongo.WithSession(ctx, sess, func(sc mongo.SessionContext) error {
			if _, err := coll.InsertOne(sc, bson.D{{Key: "_id", Value: int32(5000)}, {Key: "k", Value: int32(50)}}); err != nil {
				return err
			}
			raw, err := coll.FindOne(sc, id(5000)).Raw()
			if err != nil {
				return err
			}
			n, err := coll.CountDocuments(sc, bson.D{{Key: "k", Value: 50}})
			if err != nil {
				return err
			}
			out = m{"found": ej(raw), "count": n, "operationTime": sess.OperationTime() != nil}
			return nil
		})
		return out, err
	})
	do("final", func() (any, error) { return find(bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})) })
	return steps
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == "monitor" {
		monitor(os.Args[2:])
		return
	}
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: modern-go1 URI LABEL OUTFILE | modern-go1 monitor URI SECONDS HEARTBEAT_MS")
		os.Exit(2)
	}
	uri, label, outfile := os.Args[1], os.Args[2], os.Args[3]
	var mu sync.Mutex
	counting := false
	counts := map[string]int{}
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		if counting {
			counts[e.CommandName]++
		}
		mu.Unlock()
	}}
	client, err := mongo.Connect(context.Background(), options.Client().ApplyURI(uri).SetAppName("mongoplex-modern-"+label).
		SetMonitor(mon).SetServerSelectionTimeout(5*time.Second).SetConnectTimeout(5*time.Second).
		SetTimeout(20*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "modern-go1: connect:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	defer client.Disconnect(ctx)
	dbName := "mongoplex_modern"
	if u, err := url.Parse(uri); err == nil && strings.Trim(u.Path, "/") != "" {
		dbName = strings.Trim(u.Path, "/")
	}
	coll := client.Database(dbName).Collection("modern")
	if err := coll.Drop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "modern-go1: setup failed:", err)
		os.Exit(2)
	}
	mu.Lock()
	counting = true
	mu.Unlock()
	steps := run(ctx, client, coll)
	mu.Lock()
	counting = false
	mu.Unlock()
	if err := coll.Drop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "modern-go1: drop failed:", err)
		os.Exit(2)
	}
	b, err := json.MarshalIndent(m{"driver": "go1", "version": version.Driver, "steps": steps, "commands": counts}, "", " ")
	if err == nil {
		err = os.WriteFile(outfile, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "modern-go:", err)
		os.Exit(2)
	}
}
