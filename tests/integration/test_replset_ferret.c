/*
 * test_replset_ferret.c — the real read/write path through a replica-set
 * URI: FerretDB started as a one-member replica set "rs0"
 * (scripts/backend.sh start ferretdb-rs DIR; the test FAILS if FerretDB
 * cannot be started) and the proxy with backend_uri ...?replicaSet=rs0, so
 * every request goes through pool/topology.c and pool/select.c.
 *
 * Asserts: the proxy's monitor sees the member as RSPrimary; insert, find
 * (no read preference, primaryPreferred, secondaryPreferred falls back to
 * the primary), update, delete and a multi-batch cursor (getMore to the
 * cursor's member) through the proxy; a `secondary` read fails with 133
 * FailedToSatisfyReadPreference after serverSelectionTimeoutMS (there is
 * no secondary).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

/* A FerretDB replica set of one ("rs0"), for one test: its own, not a shared
 * server (h_ferret_shared): a replica set (the only test that uses one). */
static void frs_start(struct h_ferret *f)
{
	h_ferret_start(f, "ferretdb-rs", NULL, NULL);
	cr_assert(strstr(f->uri, "replicaSet=rs0") != NULL, "uri: %s", f->uri);
}

static void wait_primary(struct proxy *p)
{
	int64_t deadline = h_now_ms() + 20000;
	const char *t = NULL;

	while (h_now_ms() < deadline) {
		bson_t st;
		bool ok;

		proxy_stats(p, &st);
		t = h_get_str(&st, "pools.0.memberType");
		ok = t != NULL && strcmp(t, "RSPrimary") == 0;
		bson_destroy(&st);
		if (ok)
			return;
		h_sleep_ms(50);
	}
	cr_assert_fail("the proxy's monitor never saw FerretDB as RSPrimary");
}

static int64_t count_with(mongoc_collection_t *col, mongoc_read_mode_t mode, bson_error_t *err)
{
	mongoc_read_prefs_t *rp = mongoc_read_prefs_new(mode);
	bson_t filter = BSON_INITIALIZER;
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(col, &filter, NULL, rp);
	const bson_t *doc;
	int64_t n = 0;

	while (mongoc_cursor_next(cur, &doc))
		n++;
	if (mongoc_cursor_error(cur, err))
		n = -1;
	mongoc_cursor_destroy(cur);
	mongoc_read_prefs_destroy(rp);
	return n;
}

Test(replset_ferret, crud_through_a_replica_set_uri, .timeout = 180)
{
	struct h_ferret f;
	struct proxy *p;
	mongoc_client_t *c;
	mongoc_collection_t *col;
	bson_error_t err;
	char cfg[400], coll[64];
	bson_t *docs[250], *sel, *upd;

	frs_start(&f);
	snprintf(cfg, sizeof(cfg),
		 "backend_uri = %s&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=1500\n",
		 f.uri);
	p = proxy_start(cfg);
	wait_primary(p);
	c = h_proxy_client(p, "replset-ferret");
	h_unique(coll, sizeof(coll), "rs");
	col = mongoc_client_get_collection(c, "rsdb", coll);
	for (int i = 0; i < 250; i++)
		docs[i] = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i));
	cr_assert(mongoc_collection_insert_many(col, (const bson_t **)docs, 250, NULL, NULL, &err),
		  "insert: %s", err.message);
	for (int i = 0; i < 250; i++)
		bson_destroy(docs[i]);
	/* 250 documents: more than one batch, so getMore follows the cursor. */
	cr_expect_eq(count_with(col, MONGOC_READ_PRIMARY, &err), 250, "%s", err.message);
	cr_expect_eq(count_with(col, MONGOC_READ_PRIMARY_PREFERRED, &err), 250, "%s", err.message);
	cr_expect_eq(count_with(col, MONGOC_READ_SECONDARY_PREFERRED, &err), 250,
		     "secondaryPreferred with no secondary: %s", err.message);
	sel = BCON_NEW("_id", BCON_INT32(1));
	upd = BCON_NEW("$set", "{", "v", BCON_INT32(-1), "}");
	cr_expect(mongoc_collection_update_one(col, sel, upd, NULL, NULL, &err), "update: %s",
		  err.message);
	cr_expect(mongoc_collection_delete_one(col, sel, NULL, NULL, &err), "delete: %s",
		  err.message);
	cr_expect_eq(count_with(col, MONGOC_READ_PRIMARY, &err), 249, "%s", err.message);
	/* No secondary exists: 133 after serverSelectionTimeoutMS. */
	cr_expect_eq(count_with(col, MONGOC_READ_SECONDARY, &err), -1);
	cr_expect_eq(err.code, 133, "secondary read: code %u (%s)", err.code, err.message);
	bson_destroy(sel);
	bson_destroy(upd);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	proxy_stop(p);
	h_ferret_stop(&f);
}
