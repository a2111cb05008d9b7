/*
 * test_batch_limits.c — what a merged query asks of the backend (issue 8,
 * items 8 and 10):
 *
 *   no_getmore_for_a_full_batch   the merged find asked batchSize = number
 *                                 of ids, so a batch that filled exactly
 *                                 left the cursor open and cost a getMore
 *                                 (FerretDB: 40 getMores for 40 merged
 *                                 queries; mongo-java-server closes such a
 *                                 cursor itself); now batch_getmores stays
 *                                 0 and batch_getmores_saved counts the
 *                                 merged queries closed in their first batch
 *   merged_reply_above_48mb       20-id lookups of 1 MB documents merged
 *                                 into a reply above maxMessageSizeBytes
 *                                 (mongo-java-server sends it regardless):
 *                                 the proxy logged "invalid messageLength",
 *                                 reconnected and re-ran the lookups; now no
 *                                 connection is lost (backend_connects =
 *                                 pool_size) and every client gets its
 *                                 documents
 *
 * Worker threads never call criterion; the main thread asserts.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MB (1024 * 1024)

struct client_run {
	mongoc_client_t *c;
	const char *db, *coll;
	int nlookups, per_lookup, ndocs; /* ids drawn from 0..ndocs-1 */
	unsigned seed;
	pthread_barrier_t *start;
	int wrong; /* lookups whose documents were not exactly the ids asked */
	int errors;
	char first_error[200];
};

/* One $in lookup of `n` distinct ids; returns false on a wrong answer. */
static bool lookup_in(struct client_run *r, int n)
{
	mongoc_collection_t *col = mongoc_client_get_collection(r->c, r->db, r->coll);
	bool want[256] = {false}, ok = true;
	bson_t filter = BSON_INITIALIZER, cond, arr;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_error_t err;
	int got = 0;

	BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &cond);
	BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &arr);
	for (int i = 0; i < n;) {
		int id = (int)(rand_r(&r->seed) % (unsigned)r->ndocs);
		char key[8];

		if (want[id])
			continue;
		want[id] = true;
		snprintf(key, sizeof(key), "%d", i++);
		BSON_APPEND_INT32(&arr, key, id);
	}
	bson_append_array_end(&cond, &arr);
	bson_append_document_end(&filter, &cond);
	cur = mongoc_collection_find_with_opts(col, &filter, NULL, NULL);
	while (mongoc_cursor_next(cur, &doc)) {
		bson_iter_t it;

		if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_INT32(&it) ||
		    bson_iter_int32(&it) < 0 || bson_iter_int32(&it) >= r->ndocs ||
		    !want[bson_iter_int32(&it)])
			ok = false;
		else
			want[bson_iter_int32(&it)] = false;
		got++;
	}
	if (mongoc_cursor_error(cur, &err)) {
		if (r->errors++ == 0)
			snprintf(r->first_error, sizeof(r->first_error), "%s", err.message);
		ok = false;
	}
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
	bson_destroy(&filter);
	return ok && got == n;
}

static void *client_main(void *arg)
{
	struct client_run *r = arg;

	pthread_barrier_wait(r->start);
	for (int i = 0; i < r->nlookups; i++)
		r->wrong += !lookup_in(r, r->per_lookup);
	return NULL;
}

/* nclients threads at once; returns the wrong lookups, *errors the errors. */
static int run_clients(struct proxy *p, const char *db, const char *coll, int nclients,
		       int nlookups, int per_lookup, int ndocs, int *errors)
{
	struct client_run r[32];
	pthread_t th[32];
	pthread_barrier_t start;
	int wrong = 0;

	cr_assert_leq(nclients, 32);
	pthread_barrier_init(&start, NULL, (unsigned)nclients);
	*errors = 0;
	for (int i = 0; i < nclients; i++) {
		char app[32];

		snprintf(app, sizeof(app), "limits-%d", i);
		r[i] = (struct client_run){
		    h_proxy_client(p, app),   db,     coll, nlookups, per_lookup, ndocs,
		    (unsigned)(i * 7919 + 1), &start, 0,    0,	      ""};
		cr_assert_eq(pthread_create(&th[i], NULL, client_main, &r[i]), 0);
	}
	for (int i = 0; i < nclients; i++) {
		pthread_join(th[i], NULL);
		wrong += r[i].wrong;
		*errors += r[i].errors;
		if (r[i].errors)
			cr_log_warn("client %d: %d errors, the first: %s", i, r[i].errors,
				    r[i].first_error);
		mongoc_client_destroy(r[i].c);
	}
	pthread_barrier_destroy(&start);
	return wrong;
}

static void load_docs(mongoc_client_t *direct, const char *db, const char *coll, int n,
		      size_t pad_len)
{
	mongoc_collection_t *col = mongoc_client_get_collection(direct, db, coll);
	char *pad = malloc(pad_len + 1);
	bson_error_t err;

	memset(pad, 'p', pad_len);
	for (int i = 0; i < n; i++) {
		bson_t *doc = bson_new();

		BSON_APPEND_INT32(doc, "_id", i);
		bson_append_utf8(doc, "pad", 3, pad, (int)pad_len);
		cr_assert(mongoc_collection_insert_one(col, doc, NULL, NULL, &err), "insert %d: %s",
			  i, err.message);
		bson_destroy(doc);
	}
	free(pad);
	mongoc_collection_destroy(col);
}

Test(batch_limits, no_getmore_for_a_full_batch, .timeout = 300)
{
	mongoc_client_t *direct = h_backend_client("limits-direct");
	struct proxy *p;
	char db[64];
	int wrong, errors;
	bson_t st;
	int64_t getmores, saved, merged, sent;

	h_unique(db, sizeof(db), "batch_limits");
	load_docs(direct, db, "small", 200, 64);
	p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 20000\n");
	/* every id exists: each merged query finds exactly as many documents as ids */
	wrong = run_clients(p, db, "small", 16, 40, 3, 200, &errors);
	proxy_stats(p, &st);
	getmores = h_get_int(&st, "counters.batch_getmores", -1);
	saved = h_get_int(&st, "counters.batch_getmores_saved", -1);
	merged = h_get_int(&st, "counters.batch_lookups_merged", -1);
	sent = h_get_int(&st, "counters.batches_sent", -1);
	cr_log_info("batch_limits (%s): 640 lookups of 3 ids by 16 clients: batches_sent %lld, "
		    "batch_lookups_merged %lld, batch_getmores %lld, batch_getmores_saved %lld",
		    h_backend_name(), (long long)sent, (long long)merged, (long long)getmores,
		    (long long)saved);
	bson_destroy(&st);
	cr_expect_eq(wrong, 0, "%d lookups got wrong documents (%d errors)", wrong, errors);
	cr_expect_gt(merged, 0, "no lookups were merged: the test proves nothing");
	cr_expect_eq(getmores, 0, "%lld getMores for merged queries whose ids all exist",
		     (long long)getmores);
	cr_expect_eq(saved, sent, "every merged query closed its cursor in the first batch");
	proxy_stop(p);
	h_drop_db(direct, db);
	mongoc_client_destroy(direct);
}

Test(batch_limits, merged_reply_above_48mb, .timeout = 600)
{
	mongoc_client_t *direct = h_backend_client("limits-direct");
	struct proxy *p;
	char db[64];
	int wrong, errors;
	bson_t st;
	int64_t connects, discarded, fallbacks;
	bool invalid;

	h_unique(db, sizeof(db), "batch_limits");
	load_docs(direct, db, "big", 60, MB);
	/* queue_timeout_ms: a 20 MB lookup takes seconds on a loaded FerretDB */
	p = proxy_start("pool_size = 2\nbatching = on\nbatch_max_wait_us = 20000\n"
			"queue_timeout_ms = 300000\n");
	/* 8 clients x 20 of 60 ids: merged, up to 60 documents of 1 MB */
	wrong = run_clients(p, db, "big", 8, 3, 20, 60, &errors);
	proxy_stats(p, &st);
	connects = h_get_int(&st, "counters.backend_connects", -1);
	discarded = h_get_int(&st, "counters.batch_replies_discarded", -1);
	fallbacks = h_get_int(&st, "counters.batch_fallbacks", -1);
	invalid = log_contains(p, "invalid messageLength");
	cr_log_info("batch_limits (%s): 24 lookups of 20 x 1 MB documents by 8 clients: "
		    "backend_connects %lld (pool_size 2), batch_replies_discarded %lld, "
		    "batch_fallbacks %lld, batches_sent %lld, \"invalid messageLength\" in the "
		    "log: %s",
		    h_backend_name(), (long long)connects, (long long)discarded,
		    (long long)fallbacks, (long long)h_get_int(&st, "counters.batches_sent", -1),
		    invalid ? "yes" : "no");
	bson_destroy(&st);
	cr_expect_eq(wrong, 0, "%d lookups got wrong documents (%d errors)", wrong, errors);
	cr_expect_not(invalid, "a merged reply broke the backend connection's framing");
	cr_expect_eq(connects, 2, "backend connections were lost and re-made (%lld connects)",
		     (long long)connects);
	proxy_stop(p);
	h_drop_db(direct, db);
	mongoc_client_destroy(direct);
}
