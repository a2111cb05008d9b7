/*
 * test_protocol.c — wire-protocol behaviour of the proxy with valid input:
 * the handshake it answers itself (limits mirrored from the backend, client
 * metadata only in the first hello), pipelined requests on one connection,
 * exhaustAllowed cleared, and messages much larger than the per-client
 * buffer.
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

static void seed(mongoc_client_t *c, const char *db, const char *coll, int n)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	mongoc_bulk_operation_t *bulk =
	    mongoc_collection_create_bulk_operation_with_opts(col, NULL);
	bson_error_t err;
	bool ok;

	for (int i = 0; i < n; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i * 10));

		mongoc_bulk_operation_insert(bulk, d);
		bson_destroy(d);
	}
	ok = mongoc_bulk_operation_execute(bulk, NULL, &err) != 0;
	cr_assert(ok, "seeding %s.%s: %s", db, coll, err.message);
	mongoc_bulk_operation_destroy(bulk);
	mongoc_collection_destroy(col);
}

/* ------------------------------------------------------------- handshake */

Test(protocol, handshake_mirrors_the_backend, .timeout = 60)
{
	static const char *const limits[] = {"maxBsonObjectSize",
					     "maxMessageSizeBytes",
					     "maxWriteBatchSize",
					     "maxWireVersion",
					     "minWireVersion",
					     "logicalSessionTimeoutMinutes",
					     NULL};
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *dc = h_backend_client("itest-handshake-direct");
	bson_t *ismaster = BCON_NEW("isMaster", BCON_INT32(1));
	bson_t *hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t *legacy = BCON_NEW("isMaster", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t direct, via_hello, via_ismaster;
	bson_error_t err;
	int fd;

	cr_assert(h_cmd(dc, "admin", ismaster, &direct, &err), "isMaster on the backend: %s",
		  err.message);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	cr_assert(raw_command(fd, 1, hello, &via_hello, 5000), "hello through the proxy");
	cr_assert(raw_command(fd, 2, legacy, &via_ismaster, 5000), "isMaster through the proxy");
	close(fd);
	cr_log_info("backend isMaster: %s", json(&direct));
	cr_log_info("proxy hello: %s", json(&via_hello));

	cr_assert(h_get_bool(&via_hello, "isWritablePrimary"), "hello: %s", json(&via_hello));
	cr_assert(h_get_bool(&via_ismaster, "ismaster"), "isMaster: %s", json(&via_ismaster));
	for (int i = 0; limits[i] != NULL; i++) {
		int64_t d = h_get_int(&direct, limits[i], -1);
		int64_t want = d;

		if (strcmp(limits[i], "maxMessageSizeBytes") == 0 && d > 48000000)
			want = 48000000;
		if (d == -1 && strcmp(limits[i], "logicalSessionTimeoutMinutes") != 0)
			continue; /* the backend does not say; the proxy picks a default */
		cr_assert_eq(h_get_int(&via_hello, limits[i], -1), want,
			     "hello through the proxy says %s = %lld, the backend %lld", limits[i],
			     (long long)h_get_int(&via_hello, limits[i], -1), (long long)d);
		cr_assert_eq(h_get_int(&via_ismaster, limits[i], -1), want,
			     "isMaster through the proxy says %s = %lld, the backend %lld",
			     limits[i], (long long)h_get_int(&via_ismaster, limits[i], -1),
			     (long long)d);
	}
	/* A standalone backend is presented as a standalone. */
	if (h_get_str(&direct, "setName") == NULL && h_get_str(&direct, "msg") == NULL)
		cr_assert_null(h_get_str(&via_hello, "msg"), "standalone presented as %s",
			       h_get_str(&via_hello, "msg"));

	bson_destroy(&direct);
	bson_destroy(&via_hello);
	bson_destroy(&via_ismaster);
	bson_destroy(ismaster);
	bson_destroy(hello);
	bson_destroy(legacy);
	mongoc_client_destroy(dc);
	proxy_stop(p);
}

Test(protocol, client_metadata_only_in_first_hello, .timeout = 30)
{
	struct proxy *p = proxy_start(NULL);
	bson_t *with_meta =
	    BCON_NEW("hello", BCON_INT32(1), "client", "{", "application", "{", "name",
		     BCON_UTF8("itest"), "}", "}", "$db", BCON_UTF8("admin"));
	bson_t *heartbeat = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t r1, r2, r3;
	int fd = raw_connect(p);

	cr_assert(fd >= 0);
	cr_assert(raw_command(fd, 1, with_meta, &r1, 5000));
	cr_assert(raw_command(fd, 2, with_meta, &r2, 5000));
	cr_assert(raw_command(fd, 3, heartbeat, &r3, 5000));
	cr_assert_eq(h_get_int(&r1, "ok", 0), 1, "first hello: %s", json(&r1));
	cr_assert_eq(h_get_int(&r2, "ok", 1), 0, "second hello with metadata accepted: %s",
		     json(&r2));
	cr_assert_eq(h_get_int(&r2, "code", 0), 186, "second hello with metadata: %s", json(&r2));
	cr_assert_eq(h_get_int(&r3, "ok", 0), 1, "heartbeat hello: %s", json(&r3));
	cr_assert(raw_ping_ok(fd, 5000));
	close(fd);
	bson_destroy(&r1);
	bson_destroy(&r2);
	bson_destroy(&r3);
	bson_destroy(with_meta);
	bson_destroy(heartbeat);
	proxy_stop(p);
}

/* ------------------------------------------------------------- pipelining */

#define NPIPE 60

Test(protocol, pipelined_requests_on_one_connection, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-pipeline");
	struct h_buf all;
	char db[64];
	int seen[NPIPE] = {0};
	int fd;

	h_unique(db, sizeof(db), "it_pipe");
	seed(pc, db, "c", 30);
	hb_init(&all);
	/* One write carrying NPIPE requests: lookups by _id (batchable), finds
	 * by another field, counts. */
	for (int i = 0; i < NPIPE; i++) {
		struct h_buf b;
		bson_t *cmd;
		int k = i % 30;

		if (i % 3 == 0)
			cmd = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", BCON_INT32(k),
				       "}", "$db", BCON_UTF8(db));
		else if (i % 3 == 1)
			cmd = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "v",
				       BCON_INT32(k * 10), "}", "$db", BCON_UTF8(db));
		else
			cmd = BCON_NEW("count", BCON_UTF8("c"), "query", "{", "_id", "{", "$lt",
				       BCON_INT32(k), "}", "}", "$db", BCON_UTF8(db));
		hb_init(&b);
		h_build_msg(&b, 100 + i, 0, cmd);
		hb_add(&all, b.data, b.len);
		hb_free(&b);
		bson_destroy(cmd);
	}
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	cr_assert(raw_send(fd, all.data, all.len));
	for (int n = 0; n < NPIPE; n++) {
		struct raw_reply r;
		uint8_t *msg;
		size_t len;
		enum raw_status st = raw_recv_msg(fd, &msg, &len, 10000);
		int i, k;

		cr_assert_eq(st, RAW_OK, "reply %d of %d: %s", n + 1, NPIPE, raw_status_name(st));
		cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
		i = r.response_to - 100;
		cr_assert(i >= 0 && i < NPIPE, "reply to unknown request %d", r.response_to);
		cr_assert_eq(seen[i], 0, "request %d answered twice", r.response_to);
		seen[i] = 1;
		k = i % 30;
		cr_assert_eq(h_get_int(&r.doc, "ok", 0), 1, "request %d: %s", i, json(&r.doc));
		if (i % 3 == 2) {
			cr_assert_eq(h_get_int(&r.doc, "n", -1), k, "count %d: %s", i,
				     json(&r.doc));
		} else {
			cr_assert_eq(h_get_int(&r.doc, "cursor.firstBatch.0._id", -1), k,
				     "find %d got: %s", i, json(&r.doc));
			cr_assert_eq(h_get_int(&r.doc, "cursor.firstBatch.1._id", -1), -1,
				     "find %d got more than one document: %s", i, json(&r.doc));
		}
		free(msg);
	}
	close(fd);
	h_drop_db(pc, db);
	hb_free(&all);
	mongoc_client_destroy(pc);
	proxy_stop(p);
}

/* ------------------------------------------------------------- exhaust */

Test(protocol, exhaust_allowed_is_cleared, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	mongoc_client_t *pc = h_proxy_client(p, "itest-exhaust");
	bson_t *find, *getmore, first;
	struct h_buf b;
	struct raw_reply r;
	uint8_t *msg;
	size_t len;
	char db[64];
	int64_t id;
	int fd;

	h_unique(db, sizeof(db), "it_exh");
	seed(pc, db, "c", 20);
	find = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "}", "sort", "{", "_id",
			BCON_INT32(1), "}", "batchSize", BCON_INT32(2), "$db", BCON_UTF8(db));
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	cr_assert(raw_command(fd, 1, find, &first, 5000));
	id = h_get_int(&first, "cursor.id", 0);
	cr_assert_neq(id, 0, "no cursor: %s", json(&first));

	/* getMore with exhaustAllowed: exactly one reply, without moreToCome. */
	getmore = BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8("c"), "batchSize",
			   BCON_INT32(2), "$db", BCON_UTF8(db));
	hb_init(&b);
	h_build_msg(&b, 2, 1u << 16, getmore);
	cr_assert(raw_send(fd, b.data, b.len));
	cr_assert_eq(raw_recv_msg(fd, &msg, &len, 5000), RAW_OK);
	cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
	cr_assert_eq(r.response_to, 2);
	cr_assert_eq(r.flags & H_MSG_MORE_TO_COME, 0, "an exhaust stream reached the client");
	cr_assert_eq(h_get_int(&r.doc, "ok", 0), 1, "%s", json(&r.doc));
	cr_assert_eq(h_get_int(&r.doc, "cursor.nextBatch.0._id", -1), 2, "%s", json(&r.doc));
	free(msg);
	cr_assert_eq(raw_recv_msg(fd, &msg, &len, 500), RAW_TIMEOUT,
		     "more than one reply to an exhaustAllowed getMore");
	/* The cursor continues normally. */
	hb_free(&b);
	h_build_msg(&b, 3, 0, getmore);
	cr_assert(raw_send(fd, b.data, b.len));
	cr_assert_eq(raw_recv_msg(fd, &msg, &len, 5000), RAW_OK);
	cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc && r.response_to == 3);
	cr_assert_eq(h_get_int(&r.doc, "cursor.nextBatch.0._id", -1), 4, "%s", json(&r.doc));
	free(msg);
	close(fd);

	h_drop_db(pc, db);
	hb_free(&b);
	bson_destroy(find);
	bson_destroy(getmore);
	bson_destroy(&first);
	mongoc_client_destroy(pc);
	proxy_stop(p);
}

/* --------------------------------------------- messages >> client buffer */

Test(protocol, messages_larger_than_the_client_buffer, .timeout = 120)
{
	/* 64 KiB is the smallest max_client_buffer_bytes allowed. */
	struct proxy *p = proxy_start("max_client_buffer_bytes = 65536\n");
	mongoc_client_t *pc = h_proxy_client(p, "itest-smallbuf");
	mongoc_collection_t *col;
	const size_t slen = 6 * 1024 * 1024;
	char *s = malloc(slen + 1);
	bson_t *doc, *filter;
	mongoc_cursor_t *cur;
	const bson_t *got;
	bson_error_t err;
	char db[64];
	int n = 0;

	h_unique(db, sizeof(db), "it_smallbuf");
	col = mongoc_client_get_collection(pc, db, "c");
	for (size_t i = 0; i < slen; i++)
		s[i] = (char)('A' + i % 23);
	s[slen] = '\0';
	/* one 6 MB document: request and reply far above the buffer */
	doc = BCON_NEW("_id", BCON_INT32(1), "s", BCON_UTF8(s));
	cr_assert(mongoc_collection_insert_one(col, doc, NULL, NULL, &err), "insert: %s",
		  err.message);
	filter = BCON_NEW("_id", BCON_INT32(1));
	cur = mongoc_collection_find_with_opts(col, filter, NULL, NULL);
	cr_assert(mongoc_cursor_next(cur, &got), "read back: %s",
		  mongoc_cursor_error(cur, &err) ? err.message : "not found");
	cr_assert(bson_equal(got, doc), "the 6 MB document came back different");
	mongoc_cursor_destroy(cur);
	bson_destroy(filter);
	/* 300 documents of 32 KB: ~10 MB of replies */
	for (int i = 2; i < 302; i++) {
		bson_t *d;

		s[32768] = '\0';
		d = BCON_NEW("_id", BCON_INT32(i), "s", BCON_UTF8(s));
		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	filter = bson_new();
	cur = mongoc_collection_find_with_opts(col, filter, NULL, NULL);
	while (mongoc_cursor_next(cur, &got))
		n++;
	cr_assert(!mongoc_cursor_error(cur, &err), "%s", err.message);
	cr_assert_eq(n, 301);
	mongoc_cursor_destroy(cur);
	bson_destroy(filter);

	h_drop_db(pc, db);
	free(s);
	bson_destroy(doc);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(pc);
	proxy_stop(p);
}

/* The optional unix socket listener serves clients like the TCP one, and
 * the socket file is removed when the proxy exits. */
Test(protocol, unix_socket_listener, .timeout = 60)
{
	char path[96], extra[160], uri[256];
	struct proxy *p;
	mongoc_client_t *c;
	bson_t reply, cmd;
	bson_error_t err;

	snprintf(path, sizeof(path), "/tmp/mongoplex-itest-%d.sock", (int)getpid());
	snprintf(extra, sizeof(extra), "unix_socket = %s\n", path);
	p = proxy_start(extra);
	cr_assert(log_wait(p, "listening on unix socket", 5000), "no unix socket log line");
	cr_assert_eq(access(path, F_OK), 0, "socket file %s missing", path);
	snprintf(uri, sizeof(uri), "mongodb://%%2Ftmp%%2Fmongoplex-itest-%d.sock/", (int)getpid());
	c = h_client_uri(uri, "unix-socket-test");
	cr_assert(h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err),
		  "ping over unix socket: %s", err.message);
	bson_destroy(&reply);
	bson_init(&cmd);
	BSON_APPEND_UTF8(&cmd, "count", "nothing_here");
	cr_assert(h_cmd(c, "mp_unix", &cmd, &reply, &err), "count over unix socket: %s",
		  err.message);
	cr_assert_eq(h_get_int(&reply, "n", -1), 0, "count through the unix socket");
	bson_destroy(&reply);
	bson_destroy(&cmd);
	mongoc_client_destroy(c);
	proxy_stop(p);
	cr_assert_neq(access(path, F_OK), 0, "socket file %s left behind", path);
}
