/*
 * test_curvemodel.c — the benchmark's curve model (bench/curvemodel.c,
 * a model of the user's server, never MongoDB) answers a real client
 * correctly: libmongoc's handshake, find by _id ($in with existing,
 * missing and non-numeric ids; find_one), count, the buildInfo label, and a
 * SIGHUP with a bad curve keeping the old one while a good one replaces it.
 * It is never a correctness backend for the proxy; this only checks that
 * the model itself is right enough to benchmark with. No backend needed:
 * each test starts its own model on a free port, with its own curve files.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_model.h"

static const char curve_a[] = "ids,threads,queries_per_second\n1,1,2000\n1,10,8000\n"
			      "20,1,1000\n20,10,4000\n";

/* The _ids of a find, in reply order, into ids[]; returns how many. */
static int find_ids(mongoc_collection_t *coll, const char *filter_json, const char *opts_json,
		    int64_t *ids, int max)
{
	bson_error_t err;
	bson_t *filter = bson_new_from_json((const uint8_t *)filter_json, -1, &err);
	bson_t *opts = opts_json ? bson_new_from_json((const uint8_t *)opts_json, -1, &err) : NULL;
	mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
	const bson_t *doc;
	int n = 0;

	while (mongoc_cursor_next(cur, &doc)) {
		bson_iter_t it;

		cr_assert(bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_INT64(&it));
		cr_assert(n < max);
		ids[n++] = bson_iter_int64(&it);
		cr_assert(bson_iter_init_find(&it, doc, "payload"), "a whole document");
	}
	cr_assert(!mongoc_cursor_error(cur, &err), "find %s: %s", filter_json, err.message);
	mongoc_cursor_destroy(cur);
	bson_destroy(filter);
	if (opts)
		bson_destroy(opts);
	return n;
}

Test(curvemodel, answers_libmongoc_find_by_id)
{
	struct h_model m;
	char db[64], name[64];
	int64_t ids[300];
	bson_error_t err;
	bson_t reply;

	h_model_start(&m, curve_a, "1000", "0");
	h_unique(db, sizeof db, "cm");
	h_unique(name, sizeof name, "docs");
	mongoc_client_t *c = h_client_uri(m.uri, "test_curvemodel");
	mongoc_collection_t *coll = mongoc_client_get_collection(c, db, name);

	cr_assert(h_cmd_json(c, "admin", "{\"buildInfo\": 1}", &reply, &err), "%s", err.message);
	cr_assert(h_get_str(&reply, "version") &&
		      strstr(h_get_str(&reply, "version"), "not MongoDB"),
		  "labelled as a model");
	bson_destroy(&reply);
	/* existing ids ascending, once; 1000 (out of range), -1 and "x" are not found */
	cr_assert_eq(find_ids(coll,
			      "{\"_id\": {\"$in\": [{\"$numberLong\": \"99\"}, 5, 3, 999, 5, "
			      "1000, -1, \"x\", 7.0]}}",
			      NULL, ids, 300),
		     5);
	cr_assert(ids[0] == 3 && ids[1] == 5 && ids[2] == 7 && ids[3] == 99 && ids[4] == 999);
	cr_assert_eq(
	    find_ids(coll, "{\"_id\": 42}", "{\"limit\": 1, \"singleBatch\": true}", ids, 300), 1);
	cr_assert_eq(ids[0], 42);
	cr_assert_eq(find_ids(coll, "{\"_id\": {\"$eq\": 1000}}", NULL, ids, 300), 0);
	/* more than one batch: the rest through getMore */
	cr_assert_eq(find_ids(coll,
			      "{\"_id\": {\"$in\": [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,"
			      "19,20,21,22,23,24]}}",
			      "{\"batchSize\": 4}", ids, 300),
		     25);
	cr_assert(ids[0] == 0 && ids[24] == 24);
	cr_assert_eq(mongoc_collection_estimated_document_count(coll, NULL, NULL, NULL, &err), 1000,
		     "%s", err.message);
	cr_assert(!h_cmd_json(c, db, "{\"serverStatus\": 1}", &reply, &err));
	cr_assert_eq(err.code, 59, "CommandNotFound: %s", err.message);
	bson_destroy(&reply);
	mongoc_collection_destroy(coll);
	mongoc_client_destroy(c);
	h_model_stop(&m);
}

Test(curvemodel, sighup_keeps_the_old_curve_on_a_bad_file)
{
	struct h_model m;

	h_model_start(&m, curve_a, "100", "0");
	h_write_file(m.curve, "ids,threads,queries_per_second\n1,1,2000\n1,zero,5\n");
	kill(m.pid, SIGHUP);
	cr_assert(h_model_status_wait(&m, "reloadFailures", 1), "the bad file was refused");
	cr_assert_eq(h_model_status(&m, "reloads"), 0);
	cr_assert(h_model_status(&m, "cells") == 4, "the old curve is in force");
	cr_assert(strstr(h_model_log(&m), "line 3: threads \"zero\""), "the log says why:\n%s",
		  h_model_log(&m));
	h_write_file(m.curve, "1,1,500\n1,40,20000\n");
	kill(m.pid, SIGHUP);
	cr_assert(h_model_status_wait(&m, "reloads", 1), "the good file was taken");
	cr_assert_eq(h_model_status(&m, "cells"), 2);
	h_model_stop(&m);
}

/* --rtt-us delays every reply, a ping included: a lower bound only (a
 * timer is armed early by at most the mean lateness, capped at 2 ms). */
Test(curvemodel, rtt_delays_every_reply)
{
	struct h_model m;
	char host[64];
	int port, fd;

	h_model_start(&m, curve_a, "10", "300000");
	cr_assert(sscanf(m.uri, "mongodb://%63[0-9.]:%d/", host, &port) == 2);
	fd = raw_connect_to(host, port);
	cr_assert(fd >= 0);
	int64_t t0 = h_now_ms();
	cr_assert(raw_ping_ok(fd, 10000), "ping answered");
	int64_t took = h_now_ms() - t0;
	cr_assert(took >= 290, "ping took %lld ms with --rtt-us 300000", (long long)took);
	close(fd);
	h_model_stop(&m);
}
