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

/* A find of k ids (0..k-1) on raw fd as OP_MSG, request id rid. */
static void send_find(int fd, int32_t rid, int k)
{
	bson_t cmd = BSON_INITIALIZER, filter, id, in;
	struct h_buf b;
	char key[16];
	const char *kp;

	BSON_APPEND_UTF8(&cmd, "find", "docs");
	BSON_APPEND_DOCUMENT_BEGIN(&cmd, "filter", &filter);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &id);
	BSON_APPEND_ARRAY_BEGIN(&id, "$in", &in);
	for (int i = 0; i < k; i++) {
		bson_uint32_to_string((uint32_t)i, &kp, key, sizeof key);
		bson_append_int64(&in, kp, -1, i);
	}
	bson_append_array_end(&id, &in);
	bson_append_document_end(&filter, &id);
	bson_append_document_end(&cmd, &filter);
	BSON_APPEND_UTF8(&cmd, "$db", "cm");
	hb_init(&b);
	h_build_msg(&b, rid, 0, &cmd);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
	bson_destroy(&cmd);
}

/* The deadline heaps write replies by due time across connections, not in
 * arrival order: 5 connections send finds of 20, 15, 10, 5 and 1 ids one
 * after another; on this curve a query's latency depends on its ids only
 * (100 ms a id: 2 s at 20 ids, 100 ms at 1), so the replies must come back
 * in the reverse order, ascending ids. The dues are 400-500 ms apart, so a
 * loaded machine (the ASan build beside a parallel suite) that stalls the
 * model or this client for a few hundred ms between two sends cannot
 * reorder them; CI saw a spacing of 42 ms reordered once. */
Test(curvemodel, replies_leave_by_due_time_across_connections, .timeout = 60)
{
	static const char flat[] = "ids,threads,queries_per_second\n1,1,10\n1,100,1000\n"
				   "20,1,0.5\n20,100,50\n";
	enum { N = 5 };
	static const int nids[N] = {20, 15, 10, 5, 1};
	struct h_model m;
	struct pollfd pfd[N];
	char host[64];
	int port, order[N], got = 0;

	h_model_start(&m, flat, "1000", "0");
	cr_assert(sscanf(m.uri, "mongodb://%63[0-9.]:%d/", host, &port) == 2);
	for (int i = 0; i < N; i++) {
		pfd[i].fd = raw_connect_to(host, port);
		pfd[i].events = POLLIN;
		cr_assert(pfd[i].fd >= 0);
	}
	for (int i = 0; i < N; i++)
		send_find(pfd[i].fd, 100 + i, nids[i]);
	while (got < N) {
		int n = poll(pfd, N, 10000);

		cr_assert(n > 0, "a reply within 10 s (%d of %d so far)", got, N);
		/* replies ready in the same poll cannot be told apart: take them
		 * in the expected order (a loaded machine may deliver two at once) */
		for (int i = N - 1; i >= 0; i--) {
			uint8_t *msg;
			size_t len;
			struct raw_reply r;

			if (!(pfd[i].revents & POLLIN))
				continue;
			cr_assert_eq(raw_recv_msg(pfd[i].fd, &msg, &len, 5000), RAW_OK);
			cr_assert(raw_parse_reply(msg, len, &r) && r.response_to == 100 + i);
			cr_assert(got < N);
			order[got++] = i;
			free(msg);
			pfd[i].events = 0;
		}
	}
	for (int i = 0; i < N; i++) {
		cr_assert_eq(order[i], N - 1 - i, "reply %d came from connection %d (%d ids)", i,
			     order[i], nids[order[i]]);
		close(pfd[i].fd);
	}
	cr_assert_eq(h_model_status(&m, "maxInService"), N, "all five were in service together");
	h_model_stop(&m);
}

/* The new flags reach curveModelStatus: defaults, then both changed. */
Test(curvemodel, status_reports_slack_and_think_compensation)
{
	static const char *const off[] = {"--think-compensation", "off", "--timer-slack-us", "0",
					  NULL};
	struct h_model m;
	mongoc_client_t *c;
	bson_error_t err;
	bson_t reply;
	bson_iter_t it;

	h_model_start(&m, curve_a, "10", "0");
	cr_assert_eq(h_model_status(&m, "timerSlackUs"), 500);
	c = h_client_uri(m.uri, "test_curvemodel");
	cr_assert(h_cmd_json(c, "admin", "{\"curveModelStatus\": 1}", &reply, &err), "%s",
		  err.message);
	cr_assert(bson_iter_init_find(&it, &reply, "thinkCompensation") &&
		  BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it));
	cr_assert(bson_iter_init_find(&it, &reply, "wakeups") && BSON_ITER_HOLDS_INT64(&it));
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	h_model_stop(&m);

	h_model_start_args(&m, curve_a, "10", "0", off);
	cr_assert_eq(h_model_status(&m, "timerSlackUs"), 0);
	c = h_client_uri(m.uri, "test_curvemodel");
	cr_assert(h_cmd_json(c, "admin", "{\"curveModelStatus\": 1}", &reply, &err), "%s",
		  err.message);
	cr_assert(bson_iter_init_find(&it, &reply, "thinkCompensation") &&
		  BSON_ITER_HOLDS_BOOL(&it) && !bson_iter_bool(&it));
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	h_model_stop(&m);
}

/* A closed-loop client counts once in c: with the think-time compensation
 * its reply goes out before its query's service ends, and its next query
 * ends that service on arrival instead of finding it still in service
 * (which would serve it at c = 2). 200 sequential finds on one connection:
 * at most 1 in service ever. */
Test(curvemodel, closed_loop_client_counts_once_in_service)
{
	struct h_model m;
	int64_t ids[4];

	h_model_start(&m, curve_a, "1000", "0");
	mongoc_client_t *c = h_client_uri(m.uri, "test_curvemodel");
	mongoc_collection_t *coll = mongoc_client_get_collection(c, "cm", "docs");

	for (int i = 0; i < 200; i++)
		cr_assert_eq(find_ids(coll, "{\"_id\": 7}", NULL, ids, 4), 1);
	mongoc_collection_destroy(coll);
	mongoc_client_destroy(c);
	cr_assert_eq(h_model_status(&m, "queries"), 200);
	cr_assert_eq(h_model_status(&m, "maxInService"), 1);
	h_model_stop(&m);
}
