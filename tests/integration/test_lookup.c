/*
 * test_lookup.c — finds by _id (the shapes the proxy may merge into one
 * {_id: {$in: [...]}} query) give exactly the documents the backend gives
 * directly: one at a time, and all at once from separate connections so
 * that they are merged (batch_max_wait_us holds each lookup for the others).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <string.h>
#include <unistd.h>

#include "harness.h"

static char *json(const bson_t *doc)
{
	return bson_as_relaxed_extended_json(doc, NULL);
}

/* find commands (without $db): lookup shapes and near misses */
static const char *const lookup_cases[] = {
    "{\"find\": \"c\", \"filter\": {\"_id\": 3}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$eq\": 4}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [5, 1, 3, 99]}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [7, 7, 8]}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": []}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": 12345}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [9, 10, 11, 12, 13]}}, \"batchSize\": 2}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [0, 1, 2, 3]}}, \"limit\": 2}",
    "{\"find\": \"c\", \"filter\": {\"_id\": 6}, \"limit\": 1, \"singleBatch\": true}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [8, 9]}}, \"batchSize\": 5, "
    "\"singleBatch\": true}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [2, 4]}}, \"projection\": {\"v\": 1}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [{\"$numberDouble\": \"1.0\"}, "
    "{\"$numberLong\": \"2\"}, 100]}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [\"s1\", \"s2\", \"S1\"]}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$oid\": \"65a1b2c3d4e5f60718293a4b\"}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": 1.5}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"a\": 1}}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [18, 19]}}, \"sort\": {\"_id\": -1}}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [0, 19]}}, \"skip\": 1}",
    "{\"find\": \"other\", \"filter\": {\"_id\": 3}}",
};

/* singleBatch with a batchSize below the number of ids: the backend returns
 * batchSize documents and no cursor to continue. */
static const char *const single_batch_cases[] = {
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [14, 15, 16, 17]}}, \"batchSize\": 2, "
    "\"singleBatch\": true}",
    "{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [1, 2, 3]}}, \"batchSize\": 1, "
    "\"singleBatch\": true}",
};

#define MAX_CASES 32

struct case_set {
	const char *const *cases;
	size_t n;
};

#define CASE_SET(a) ((struct case_set){a, sizeof(a) / sizeof(a[0])})

static void seed(mongoc_client_t *c, const char *db)
{
	static const char *const extra[] = {
	    "{\"_id\": \"s1\", \"v\": \"s1\"}",
	    "{\"_id\": \"s2\", \"v\": \"s2\"}",
	    "{\"_id\": {\"$oid\": \"65a1b2c3d4e5f60718293a4b\"}, \"v\": \"oid\"}",
	    "{\"_id\": 1.5, \"v\": \"double\"}",
	    "{\"_id\": {\"$numberLong\": \"100\"}, \"v\": \"long\"}",
	    "{\"_id\": {\"a\": 1}, \"v\": \"doc\"}",
	};
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, "c");
	mongoc_collection_t *other = mongoc_client_get_collection(c, db, "other");
	bson_error_t err;

	for (int i = 0; i < 20; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i * 10), "w",
				     BCON_UTF8("payload"));

		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		bson_t *d = bson_new_from_json((const uint8_t *)extra[i], -1, &err);

		cr_assert(d != NULL, "%s", err.message);
		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	{
		bson_t *d = BCON_NEW("_id", BCON_INT32(3), "v", BCON_UTF8("other collection"));

		cr_assert(mongoc_collection_insert_one(other, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	mongoc_collection_destroy(col);
	mongoc_collection_destroy(other);
}

static bson_t *case_cmd(struct case_set cs, size_t i, const char *db)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json((const uint8_t *)cs.cases[i], -1, &err);

	cr_assert(cmd != NULL, "case %zu: %s", i, err.message);
	BSON_APPEND_UTF8(cmd, "$db", db);
	return cmd;
}

/* The documents of a find reply, as an array document; with drain, all
 * batches (getMore through `next` until the cursor is exhausted). */
typedef bool (*getmore_fn)(void *ctx, const bson_t *cmd, bson_t *reply);

static void collect(const bson_t *reply, const char *db, bool drain, getmore_fn next, void *ctx,
		    bson_t *docs, const char *what)
{
	bson_iter_t it, arr;
	int64_t id = h_get_int(reply, "cursor.id", -1);
	const char *batch = "cursor.firstBatch";
	bson_t cur;
	int n = 0;

	bson_init(docs);
	bson_copy_to(reply, &cur);
	for (;;) {
		cr_assert_eq(h_get_int(&cur, "ok", 0), 1, "%s: %s", what, json(&cur));
		cr_assert(bson_iter_init(&it, &cur) &&
			      bson_iter_find_descendant(&it, batch, &arr) &&
			      BSON_ITER_HOLDS_ARRAY(&arr),
			  "%s: no %s in %s", what, batch, json(&cur));
		bson_iter_recurse(&arr, &it);
		while (bson_iter_next(&it)) {
			char key[16];
			const char *k;

			bson_uint32_to_string((uint32_t)n++, &k, key, sizeof(key));
			bson_append_iter(docs, k, -1, &it);
		}
		id = h_get_int(&cur, "cursor.id", -1);
		bson_destroy(&cur);
		if (id == 0 || !drain)
			break;
		{
			/* batchSize: mongo-java-server refuses a getMore without one */
			bson_t *gm =
			    BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8("c"),
				     "batchSize", BCON_INT32(2), "$db", BCON_UTF8(db));

			cr_assert(next(ctx, gm, &cur), "%s: getMore failed", what);
			bson_destroy(gm);
		}
		batch = "cursor.nextBatch";
	}
}

static bool direct_getmore(void *ctx, const bson_t *cmd, bson_t *reply)
{
	bson_t no_db;
	bson_iter_t it;
	const char *db = NULL;
	bson_error_t err;
	bool ok;

	bson_init(&no_db);
	bson_iter_init(&it, cmd);
	while (bson_iter_next(&it)) {
		if (strcmp(bson_iter_key(&it), "$db") == 0)
			db = bson_iter_utf8(&it, NULL);
		else
			bson_append_iter(&no_db, bson_iter_key(&it), -1, &it);
	}
	ok = h_cmd(ctx, db, &no_db, reply, &err);
	if (!ok)
		cr_log_error("direct getMore %s: %s", json(&no_db), err.message);
	bson_destroy(&no_db);
	return ok;
}

static int32_t next_raw_id = 5000;

static bool raw_getmore(void *ctx, const bson_t *cmd, bson_t *reply)
{
	return raw_command(*(int *)ctx, next_raw_id++, cmd, reply, 10000) &&
	       h_get_int(reply, "ok", 0) == 1;
}

static bool is_single_batch(struct case_set cs, size_t i)
{
	return strstr(cs.cases[i], "singleBatch") != NULL;
}

/* What the backend answers for each case, straight. */
static void direct_answers(struct case_set cs, const char *db, bson_t *answers)
{
	mongoc_client_t *dc = h_backend_client("itest-lookup-direct");

	for (size_t i = 0; i < cs.n; i++) {
		bson_t *cmd = case_cmd(cs, i, db), reply;
		bson_error_t err;
		char what[64];

		bson_iter_t it;
		bson_t no_db;

		bson_init(&no_db);
		bson_iter_init(&it, cmd);
		while (bson_iter_next(&it))
			if (strcmp(bson_iter_key(&it), "$db") != 0)
				bson_append_iter(&no_db, bson_iter_key(&it), -1, &it);
		snprintf(what, sizeof(what), "direct case %zu", i);
		cr_assert(h_cmd(dc, db, &no_db, &reply, &err), "%s (%s): %s", what, cs.cases[i],
			  err.message);
		collect(&reply, db, !is_single_batch(cs, i), direct_getmore, dc, &answers[i], what);
		bson_destroy(&reply);
		bson_destroy(&no_db);
		bson_destroy(cmd);
	}
	mongoc_client_destroy(dc);
}

static void compare(struct case_set cs, size_t i, const bson_t *via_proxy, const bson_t *direct,
		    const char *how)
{
	cr_expect(bson_equal(via_proxy, direct),
		  "%s, case %zu %s:\nthrough the proxy: %s\ndirect:            %s", how, i,
		  cs.cases[i], json(via_proxy), json(direct));
}

/* Every case on its own socket, all sent before any reply is read. */
static void run_concurrently(struct proxy *p, struct case_set cs, const char *db,
			     const bson_t *answers, const char *how)
{
	int fds[MAX_CASES];

	for (size_t i = 0; i < cs.n; i++) {
		bson_t *cmd = case_cmd(cs, i, db);
		struct h_buf b;

		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
		hb_init(&b);
		h_build_msg(&b, 100 + (int32_t)i, 0, cmd);
		cr_assert(raw_send(fds[i], b.data, b.len));
		hb_free(&b);
		bson_destroy(cmd);
	}
	for (size_t i = 0; i < cs.n; i++) {
		struct raw_reply r;
		uint8_t *msg;
		size_t len;
		bson_t docs;
		char what[96];

		snprintf(what, sizeof(what), "%s, case %zu", how, i);
		cr_assert_eq(raw_recv_msg(fds[i], &msg, &len, 10000), RAW_OK, "%s: no reply", what);
		cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
		cr_assert_eq(r.response_to, 100 + (int32_t)i);
		collect(&r.doc, db, !is_single_batch(cs, i), raw_getmore, &fds[i], &docs, what);
		compare(cs, i, &docs, &answers[i], how);
		bson_destroy(&docs);
		free(msg);
		close(fds[i]);
	}
}

/* Each case one at a time, then all at once (several rounds) so that they
 * are merged; every answer compared with the backend's. */
static void run_cases(struct case_set cs, bool require_merge)
{
	struct proxy *p = proxy_start("batch_max_wait_us = 50000\n");
	mongoc_client_t *pc = h_proxy_client(p, "itest-lookup");
	bson_t answers[MAX_CASES], st0, st1;
	char db[64];
	int64_t merged;
	int fd;

	cr_assert_leq(cs.n, MAX_CASES);
	h_unique(db, sizeof(db), "it_lookup");
	seed(pc, db);
	direct_answers(cs, db, answers);

	fd = raw_connect(p);
	cr_assert(fd >= 0);
	for (size_t i = 0; i < cs.n; i++) {
		bson_t *cmd = case_cmd(cs, i, db), reply, docs;
		char what[64];

		snprintf(what, sizeof(what), "one at a time, case %zu", i);
		cr_assert(raw_command(fd, 10 + (int32_t)i, cmd, &reply, 10000), "%s: no reply",
			  what);
		collect(&reply, db, !is_single_batch(cs, i), raw_getmore, &fd, &docs, what);
		compare(cs, i, &docs, &answers[i], "one at a time");
		bson_destroy(&reply);
		bson_destroy(&docs);
		bson_destroy(cmd);
	}
	close(fd);

	h_stats(pc, &st0);
	for (int round = 0; round < 5; round++)
		run_concurrently(p, cs, db, answers, "all at once");
	h_stats(pc, &st1);
	merged = h_get_int(&st1, "counters.batch_lookups_merged", 0) -
		 h_get_int(&st0, "counters.batch_lookups_merged", 0);
	cr_log_info("lookups: %lld answered through the batcher, %lld of them merged, in %lld "
		    "merged queries",
		    (long long)(h_get_int(&st1, "counters.batch_lookups", 0) -
				h_get_int(&st0, "counters.batch_lookups", 0)),
		    (long long)merged,
		    (long long)(h_get_int(&st1, "counters.batches_sent", 0) -
				h_get_int(&st0, "counters.batches_sent", 0)));
	if (require_merge)
		cr_assert_gt(merged, 0, "no lookups were merged: the batcher was not exercised");

	h_drop_db(pc, db);
	for (size_t i = 0; i < cs.n; i++)
		bson_destroy(&answers[i]);
	bson_destroy(&st0);
	bson_destroy(&st1);
	mongoc_client_destroy(pc);
	proxy_stop(p);
}

Test(lookup, finds_by_id_match_direct, .timeout = 120)
{
	run_cases(CASE_SET(lookup_cases), true);
}

/* singleBatch + batchSize cut the result like a limit does. */
Test(lookup, single_batch_with_small_batch_size, .timeout = 60)
{
	run_cases(CASE_SET(single_batch_cases), false);
}

/* A lookup that finds nothing, alone and merged (under the Asan build type,
 * UBSan aborts the proxy if the batcher sorts an empty result as NULL). */
Test(lookup, missing_ids, .timeout = 60)
{
	struct proxy *p = proxy_start("batch_max_wait_us = 20000\n");
	mongoc_client_t *pc = h_proxy_client(p, "itest-lookup-missing");
	bson_t *find, reply;
	char db[64];
	int fds[4];

	h_unique(db, sizeof(db), "it_missing");
	seed(pc, db);
	find = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", BCON_UTF8("no such id"), "}",
			"$db", BCON_UTF8(db));
	for (int round = 0; round < 2; round++) {
		int n = round == 0 ? 1 : 4; /* alone, then merged */

		for (int i = 0; i < n; i++) {
			struct h_buf b;

			fds[i] = raw_connect(p);
			cr_assert(fds[i] >= 0);
			hb_init(&b);
			h_build_msg(&b, 7 + i, 0, find);
			cr_assert(raw_send(fds[i], b.data, b.len));
			hb_free(&b);
		}
		for (int i = 0; i < n; i++) {
			struct raw_reply r;
			uint8_t *msg;
			size_t len;
			enum raw_status st = raw_recv_msg(fds[i], &msg, &len, 10000);

			if (st != RAW_OK) {
				h_sleep_ms(300); /* let it finish dying, to report why */
				proxy_assert_alive(p, "after a lookup that found nothing");
			}
			cr_assert_eq(st, RAW_OK, "lookup of a missing _id: %s",
				     raw_status_name(st));
			cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
			cr_assert_eq(h_get_int(&r.doc, "ok", 0), 1, "%s", json(&r.doc));
			cr_assert_eq(h_get_int(&r.doc, "cursor.firstBatch.0._id", -1), -1,
				     "found something: %s", json(&r.doc));
			free(msg);
			close(fds[i]);
		}
	}
	proxy_assert_alive(p, "after lookups that found nothing");
	cr_assert(h_cmd_json(pc, "admin", "{\"ping\": 1}", &reply, NULL));
	bson_destroy(&reply);
	h_drop_db(pc, db);
	bson_destroy(find);
	mongoc_client_destroy(pc);
	proxy_stop(p);
}
