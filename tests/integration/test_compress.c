/*
 * test_compress.c — OP_COMPRESSED through the proxy, on raw sockets.
 *
 * Client side (backend: the suite's MONGOPLEX_TEST_URI): the hello's
 * `compression` is answered with the common list; a compressed find with
 * each of snappy, zlib, zstd gets the same documents as the backend gives
 * directly, in a reply compressed with the request's algorithm (counted per
 * algorithm in mongoplexStats); an uncompressed request gets its reply with
 * the client's first common algorithm; hello is never compressed; with
 * compressors empty, compression is refused. Bad input: corrupt data, an
 * uncompressedSize above 48 MB and a zlib bomb each get an error reply and
 * the connection closed, while another client carries on.
 *
 * Backend side: FerretDB 1.24 offers no compression (its hello has no
 * `compression`), so a scripted backend here (a thread speaking OP_MSG and
 * OP_COMPRESSED, with core/compress.c) checks that the proxy offers
 * backend_uri's compressors, compresses its requests with the one agreed
 * and reads compressed replies, for each algorithm.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>

#include "core/compress.h"
#include "core/wire.h"
#include "harness.h"

#define NDOCS 20

/* ------------------------------------------------------------ helpers */

/* Send `cmd` as OP_MSG, wrapped with compressor id (or plain for COMPRESS_NONE). */
static void send_cmd(int fd, int32_t rid, const bson_t *cmd, int id)
{
	struct h_buf b;

	hb_init(&b);
	h_build_msg(&b, rid, 0, cmd);
	if (id == COMPRESS_NONE) {
		cr_assert(raw_send(fd, b.data, b.len));
	} else {
		struct evbuffer *w = evbuffer_new();

		cr_assert(compress_wrap(id, -1, b.data, b.len, w), "wrap with %s",
			  compress_name(id));
		cr_assert(raw_send(fd, evbuffer_pullup(w, -1), evbuffer_get_length(w)));
		evbuffer_free(w);
	}
	hb_free(&b);
}

/* Receive a reply; *id_out: its compressor, or COMPRESS_NONE; body copied to out. */
static void recv_reply(int fd, int32_t rid, int *id_out, bson_t *out)
{
	uint8_t *msg = NULL;
	size_t len = 0;
	struct raw_reply r;
	struct evbuffer *plain = evbuffer_new();
	struct wire_error err;
	enum raw_status st = raw_recv_msg(fd, &msg, &len, 20000);

	cr_assert_eq(st, RAW_OK, "no reply to %d (%s)", rid, raw_status_name(st));
	*id_out = COMPRESS_NONE;
	if (wire_read_i32(msg + 12) == OP_COMPRESSED) {
		cr_assert(compress_unwrap(msg, len, WIRE_MAX_MESSAGE, plain, id_out, &err),
			  "the proxy sent a bad OP_COMPRESSED: %s", err.msg);
		free(msg);
		len = evbuffer_get_length(plain);
		msg = malloc(len);
		evbuffer_remove(plain, msg, len);
	}
	cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc, "reply parses");
	cr_assert_eq(r.response_to, rid, "responseTo");
	bson_copy_to(&r.doc, out);
	free(msg);
	evbuffer_free(plain);
}

static void hello_with(int fd, const char *json_list, bson_t *reply)
{
	char json[256];
	bson_t *cmd;
	bson_error_t e;
	int id;

	snprintf(json, sizeof(json),
		 "{\"hello\": 1, \"compression\": %s, \"client\": {\"driver\": {\"name\": \"t\", "
		 "\"version\": \"1\"}, \"os\": {\"type\": \"Linux\"}}, \"$db\": \"admin\"}",
		 json_list);
	cmd = bson_new_from_json((const uint8_t *)json, -1, &e);
	cr_assert(cmd != NULL, "%s", e.message);
	send_cmd(fd, 1, cmd, COMPRESS_NONE);
	recv_reply(fd, 1, &id, reply);
	cr_assert_eq(id, COMPRESS_NONE, "a hello reply was compressed (%s)", compress_name(id));
	bson_destroy(cmd);
}

/* The `compression` array of a hello reply as "a,b,c". */
static void list_str(const bson_t *reply, char *buf, size_t len)
{
	bson_iter_t it, a;

	buf[0] = '\0';
	cr_assert(bson_iter_init_find(&it, reply, "compression") && BSON_ITER_HOLDS_ARRAY(&it) &&
		      bson_iter_recurse(&it, &a),
		  "hello reply has no compression array");
	while (bson_iter_next(&a))
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "," : "",
			 bson_iter_utf8(&a, NULL));
}

/* {find: coll, filter: {_id: {$in: [0..19]}}, sort: {_id: 1}, comment: <padding>} */
static bson_t *find_cmd(const char *db, const char *coll)
{
	bson_t *cmd = bson_new(), f, in, arr, sort;
	char pad[1200], k[16];
	const char *key;

	memset(pad, 'p', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	BSON_APPEND_UTF8(cmd, "find", coll);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &f);
	BSON_APPEND_DOCUMENT_BEGIN(&f, "_id", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (uint32_t i = 0; i < NDOCS; i++) {
		bson_uint32_to_string(i, &key, k, sizeof(k));
		bson_append_int32(&arr, key, -1, (int32_t)i);
	}
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&f, &in);
	bson_append_document_end(cmd, &f);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "sort", &sort);
	BSON_APPEND_INT32(&sort, "_id", 1);
	bson_append_document_end(cmd, &sort);
	BSON_APPEND_UTF8(cmd, "comment", pad);
	BSON_APPEND_UTF8(cmd, "$db", db);
	return cmd;
}

static void seed(const char *db, const char *coll)
{
	mongoc_client_t *c = h_backend_client("compress-seed");
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	char pad[301];
	bson_error_t e;

	memset(pad, 'd', 300);
	pad[300] = '\0';
	h_drop_db(c, db);
	for (int i = 0; i < NDOCS + 5; i++) {
		bson_t *d =
		    BCON_NEW("_id", BCON_INT32(i), "pad", BCON_UTF8(pad), "n", BCON_INT32(i));

		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &e), "%s", e.message);
		bson_destroy(d);
	}
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
}

static void first_batch(const bson_t *reply, bson_t *out)
{
	bson_iter_t it;
	const uint8_t *d;
	uint32_t l;
	bson_t tmp;

	cr_assert(bson_iter_init(&it, reply) &&
		      bson_iter_find_descendant(&it, "cursor.firstBatch", &it) &&
		      BSON_ITER_HOLDS_ARRAY(&it),
		  "no cursor.firstBatch in the reply");
	bson_iter_array(&it, &l, &d);
	cr_assert(bson_init_static(&tmp, d, l));
	bson_copy_to(&tmp, out);
}

/* ------------------------------------------------------------ client side */

Test(compress, each_algorithm_same_results, .timeout = 120)
{
	struct proxy *p = proxy_start("compression_min_bytes = 0\n");
	char db[64], list[64], name[64];
	mongoc_client_t *direct = h_backend_client("compress-direct");
	bson_t *cmd, want, dreply, reply;
	bson_error_t e;
	int fd = raw_connect(p), id;

	h_unique(db, sizeof(db), "compress");
	seed(db, "c");
	cmd = find_cmd(db, "c");
	cr_assert(mongoc_client_command_simple(direct, db, cmd, NULL, &dreply, &e), "%s",
		  e.message);
	first_batch(&dreply, &want);
	cr_assert_eq(bson_count_keys(&want), NDOCS, "direct: %u documents", bson_count_keys(&want));

	hello_with(fd, "[\"zstd\", \"lz4\", \"snappy\", \"zlib\"]", &reply);
	list_str(&reply, list, sizeof(list));
	cr_assert_str_eq(list, "zstd,snappy,zlib", "negotiated list (client's order, lz4 dropped)");
	bson_destroy(&reply);

	for (int a = COMPRESS_SNAPPY; a <= COMPRESS_ZSTD; a++) {
		int64_t in0, out0, raw0, wire0;
		bson_t got;

		snprintf(name, sizeof(name), "%s_decompressed_msgs", compress_name(a));
		in0 = proxy_counter(p, name);
		snprintf(name, sizeof(name), "%s_compressed_msgs", compress_name(a));
		out0 = proxy_counter(p, name);
		snprintf(name, sizeof(name), "%s_compressed_bytes_raw", compress_name(a));
		raw0 = proxy_counter(p, name);
		snprintf(name, sizeof(name), "%s_compressed_bytes_wire", compress_name(a));
		wire0 = proxy_counter(p, name);
		send_cmd(fd, 100 + a, cmd, a);
		recv_reply(fd, 100 + a, &id, &reply);
		cr_assert_eq(id, a, "reply to a %s request came with %s", compress_name(a),
			     compress_name(id));
		first_batch(&reply, &got);
		cr_assert(bson_equal(&got, &want), "%s: documents differ from direct",
			  compress_name(a));
		snprintf(name, sizeof(name), "%s_decompressed_msgs", compress_name(a));
		cr_assert_eq(proxy_counter(p, name), in0 + 1, "%s", name);
		snprintf(name, sizeof(name), "%s_compressed_msgs", compress_name(a));
		cr_assert_eq(proxy_counter(p, name), out0 + 1, "%s", name);
		snprintf(name, sizeof(name), "%s_compressed_bytes_raw", compress_name(a));
		raw0 = proxy_counter(p, name) - raw0;
		snprintf(name, sizeof(name), "%s_compressed_bytes_wire", compress_name(a));
		wire0 = proxy_counter(p, name) - wire0;
		cr_assert_lt(wire0, raw0, "%s: reply not smaller", compress_name(a));
		cr_log_info("%s: 20-id reply %" PRId64 " bytes -> %" PRId64 " on the wire",
			    compress_name(a), raw0, wire0);
		bson_destroy(&got);
		bson_destroy(&reply);
	}
	/* Uncompressed request: the reply uses the client's first common (zstd). */
	send_cmd(fd, 200, cmd, COMPRESS_NONE);
	recv_reply(fd, 200, &id, &reply);
	cr_assert_eq(id, COMPRESS_ZSTD, "reply to a plain request: %s", compress_name(id));
	bson_destroy(&reply);
	close(fd);
	bson_destroy(cmd);
	bson_destroy(&want);
	bson_destroy(&dreply);
	mongoc_client_destroy(direct);
	proxy_stop(p);
}

Test(compress, hello_never_compressed_and_threshold, .timeout = 60)
{
	struct proxy *p = proxy_start("compressors = zlib\n");
	bson_t reply, *hello;
	char list[64], pad[2000];
	int fd = raw_connect(p), id;

	hello_with(fd, "[\"snappy\", \"zlib\"]", &reply);
	list_str(&reply, list, sizeof(list));
	cr_assert_str_eq(list, "zlib");
	bson_destroy(&reply);
	/* A compressed, padded hello: unwrapped and answered, its reply plain. */
	memset(pad, 'h', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	hello =
	    BCON_NEW("hello", BCON_INT32(1), "comment", BCON_UTF8(pad), "$db", BCON_UTF8("admin"));
	send_cmd(fd, 5, hello, COMPRESS_ZLIB);
	recv_reply(fd, 5, &id, &reply);
	cr_assert_eq(id, COMPRESS_NONE, "hello reply compressed with %s", compress_name(id));
	cr_assert(h_get_bool(&reply, "isWritablePrimary"));
	bson_destroy(&reply);
	/* A ping's reply is below compression_min_bytes (512): plain. */
	{
		bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "comment", BCON_UTF8(pad), "$db",
					BCON_UTF8("admin"));

		send_cmd(fd, 6, ping, COMPRESS_ZLIB);
		recv_reply(fd, 6, &id, &reply);
		cr_assert_eq(id, COMPRESS_NONE, "a small reply was compressed");
		cr_assert_eq(h_get_int(&reply, "ok", 0), 1);
		bson_destroy(&reply);
		bson_destroy(ping);
	}
	bson_destroy(hello);
	close(fd);
	proxy_stop(p);
}

Test(compress, disabled_refuses, .timeout = 60)
{
	struct proxy *p = proxy_start("compressors =\n");
	bson_t reply, *ping;
	char list[64], pad[2000];
	int fd = raw_connect(p), id;

	hello_with(fd, "[\"snappy\", \"zlib\", \"zstd\"]", &reply);
	list_str(&reply, list, sizeof(list));
	cr_assert_str_eq(list, "", "compressors empty: nothing in common");
	bson_destroy(&reply);
	memset(pad, 'h', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	ping =
	    BCON_NEW("ping", BCON_INT32(1), "comment", BCON_UTF8(pad), "$db", BCON_UTF8("admin"));
	send_cmd(fd, 7, ping, COMPRESS_SNAPPY);
	recv_reply(fd, 7, &id, &reply);
	cr_assert_eq(h_get_int(&reply, "ok", 1), 0);
	cr_assert(strstr(h_get_str(&reply, "errmsg"), "not enabled") != NULL, "%s",
		  h_get_str(&reply, "errmsg"));
	cr_assert(raw_wait_closed(fd, 10000), "connection left open");
	bson_destroy(&reply);
	bson_destroy(ping);
	close(fd);
	proxy_stop(p);
}

/* Raw OP_COMPRESSED bytes with any header fields. */
static void send_raw_compressed(int fd, int32_t rid, int32_t usize, int id, const void *body,
				size_t n)
{
	struct h_buf b;

	hb_init(&b);
	hb_header(&b, rid, 0, OP_COMPRESSED);
	hb_i32(&b, OP_MSG);
	hb_i32(&b, usize);
	hb_u8(&b, (uint8_t)id);
	hb_add(&b, body, n);
	hb_finish(&b, false);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
}

static void expect_error_then_closed(int fd, int32_t rid, int code, const char *words)
{
	bson_t reply;
	int id;

	recv_reply(fd, rid, &id, &reply);
	cr_assert_eq(h_get_int(&reply, "ok", 1), 0, "%s: not an error", words);
	cr_assert_eq(h_get_int(&reply, "code", 0), code, "%s: code %" PRId64, words,
		     h_get_int(&reply, "code", 0));
	cr_assert(strstr(h_get_str(&reply, "errmsg"), words) != NULL, "errmsg \"%s\" lacks \"%s\"",
		  h_get_str(&reply, "errmsg"), words);
	cr_assert(strncmp(h_get_str(&reply, "errmsg"), "mongoplex: ", 11) == 0);
	cr_log_info("refused: %s", h_get_str(&reply, "errmsg"));
	cr_assert(raw_wait_closed(fd, 10000), "%s: connection left open", words);
	bson_destroy(&reply);
}

Test(compress, bad_input_closes_others_unaffected, .timeout = 120)
{
	struct proxy *p = proxy_start(NULL);
	int other = raw_connect(p), fd;
	static const uint8_t junk[] = {0x78, 0x9c, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x11};
	size_t n = 40 * 1000 * 1000;
	uLongf zl = compressBound((uLong)n);
	uint8_t *zeros = calloc(1, n), *z = malloc(zl);
	int64_t refused0 = proxy_counter(p, "compress_refused");

	cr_assert(raw_ping_ok(other, 5000));
	/* corrupt zlib */
	fd = raw_connect(p);
	send_raw_compressed(fd, 11, 100, COMPRESS_ZLIB, junk, sizeof(junk));
	expect_error_then_closed(fd, 11, 2, "corrupt zlib data");
	close(fd);
	/* corrupt zstd and snappy */
	fd = raw_connect(p);
	send_raw_compressed(fd, 12, 100, COMPRESS_ZSTD, junk, sizeof(junk));
	expect_error_then_closed(fd, 12, 2, "zstd");
	close(fd);
	fd = raw_connect(p);
	send_raw_compressed(fd, 13, 100, COMPRESS_SNAPPY, junk, sizeof(junk));
	expect_error_then_closed(fd, 13, 2, "snappy");
	close(fd);
	/* uncompressedSize above 48 MB: refused before anything is allocated */
	fd = raw_connect(p);
	send_raw_compressed(fd, 14, WIRE_MAX_MESSAGE, COMPRESS_ZLIB, junk, sizeof(junk));
	expect_error_then_closed(fd, 14, 10334, "out of range");
	close(fd);
	/* a zip bomb: 40 MB of zeros (~40 KB deflated) claiming 100000 bytes */
	cr_assert_eq(compress2(z, &zl, zeros, (uLong)n, 9), Z_OK);
	fd = raw_connect(p);
	send_raw_compressed(fd, 15, 100000, COMPRESS_ZLIB, z, zl);
	expect_error_then_closed(fd, 15, 2, "inflates past uncompressedSize");
	close(fd);
	cr_assert_eq(proxy_counter(p, "compress_refused"), refused0 + 5);
	cr_assert(raw_ping_ok(other, 5000), "another client was affected");
	cr_assert(log_contains(p, "bad OP_COMPRESSED"), "no logged reason");
	proxy_assert_alive(p, "after bad compressed input");
	close(other);
	free(zeros);
	free(z);
	proxy_stop(p);
}

/* ------------------------------------------------------------ backend side */

/* A scripted backend: one thread per connection; hello offers every
 * algorithm the proxy lists (answering with the proxy's list as is), find
 * answers NDOCS documents; replies compressed with the request's algorithm.
 * It counts what it received. */
struct fake {
	int lfd, port;
	pthread_t th;
	int offered;		    /* ids the proxy offered in its first hello (bitmask) */
	int compressed_requests[4]; /* by id */
	int plain_requests;	    /* non-hello requests received uncompressed */
	pthread_mutex_t mu;
};

static void fake_reply(int fd, int32_t rid, int id, const bson_t *doc)
{
	struct h_buf b;

	hb_init(&b);
	h_build_msg(&b, 900, 0, doc);
	hb_set_i32(&b, 8, rid);
	if (id > COMPRESS_NOOP) {
		struct evbuffer *w = evbuffer_new();

		if (compress_wrap(id, -1, b.data, b.len, w))
			(void)!raw_send(fd, evbuffer_pullup(w, -1), evbuffer_get_length(w));
		else
			(void)!raw_send(fd, b.data, b.len);
		evbuffer_free(w);
	} else {
		(void)!raw_send(fd, b.data, b.len);
	}
	hb_free(&b);
}

static void fake_answer(struct fake *f, int fd, int32_t rid, int id, const bson_t *cmd)
{
	bson_iter_t it;
	const char *name =
	    bson_iter_init(&it, cmd) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
	bson_t r = BSON_INITIALIZER, cur, batch, arr;
	char pad[301];

	memset(pad, 'b', 300);
	pad[300] = '\0';
	if (strcasecmp(name, "isMaster") == 0 || strcmp(name, "hello") == 0) {
		bson_iter_t a;

		BSON_APPEND_BOOL(&r, "ismaster", true);
		BSON_APPEND_INT32(&r, "maxWireVersion", 17);
		BSON_APPEND_INT32(&r, "minWireVersion", 0);
		if (bson_iter_init_find(&it, cmd, "compression") && bson_iter_recurse(&it, &a)) {
			BSON_APPEND_ARRAY_BEGIN(&r, "compression", &arr);
			pthread_mutex_lock(&f->mu);
			while (bson_iter_next(&a)) {
				int cid = compress_id_by_name(bson_iter_utf8(&a, NULL));

				f->offered |= 1 << cid;
				bson_append_utf8(&arr, bson_iter_key(&a), -1,
						 bson_iter_utf8(&a, NULL), -1);
			}
			pthread_mutex_unlock(&f->mu);
			bson_append_array_end(&r, &arr);
		}
	} else {
		pthread_mutex_lock(&f->mu);
		if (id > COMPRESS_NOOP)
			f->compressed_requests[id]++;
		else
			f->plain_requests++;
		pthread_mutex_unlock(&f->mu);
		if (strcmp(name, "find") == 0) {
			char k[16];
			const char *key;

			BSON_APPEND_DOCUMENT_BEGIN(&r, "cursor", &cur);
			BSON_APPEND_INT64(&cur, "id", 0);
			BSON_APPEND_UTF8(&cur, "ns", "fake.c");
			BSON_APPEND_ARRAY_BEGIN(&cur, "firstBatch", &batch);
			for (uint32_t i = 0; i < NDOCS; i++) {
				bson_t d;

				bson_uint32_to_string(i, &key, k, sizeof(k));
				bson_append_document_begin(&batch, key, -1, &d);
				BSON_APPEND_INT32(&d, "_id", (int32_t)i);
				BSON_APPEND_UTF8(&d, "pad", pad);
				bson_append_document_end(&batch, &d);
			}
			bson_append_array_end(&cur, &batch);
			bson_append_document_end(&r, &cur);
		}
	}
	BSON_APPEND_DOUBLE(&r, "ok", 1.0);
	fake_reply(fd, rid, id, &r);
	bson_destroy(&r);
}

static void *fake_conn(void *arg)
{
	struct fake *f = ((void **)arg)[0];
	int fd = (int)(intptr_t)((void **)arg)[1];

	free(arg);
	for (;;) {
		uint8_t *msg = NULL;
		size_t len = 0;
		int id = COMPRESS_NONE;
		struct raw_reply r;
		struct evbuffer *plain = evbuffer_new();
		struct wire_error err;

		if (raw_recv_msg(fd, &msg, &len, 60000) != RAW_OK) {
			evbuffer_free(plain);
			break;
		}
		if (wire_read_i32(msg + 12) == OP_COMPRESSED) {
			if (!compress_unwrap(msg, len, WIRE_MAX_MESSAGE, plain, &id, &err)) {
				free(msg);
				evbuffer_free(plain);
				break; /* the test sees the missing counts */
			}
			free(msg);
			len = evbuffer_get_length(plain);
			msg = malloc(len);
			evbuffer_remove(plain, msg, len);
		}
		if (raw_parse_reply(msg, len, &r) && r.have_doc)
			fake_answer(f, fd, r.request_id, id, &r.doc);
		free(msg);
		evbuffer_free(plain);
	}
	close(fd);
	return NULL;
}

static void *fake_accept(void *arg)
{
	struct fake *f = arg;
	int fd;

	while ((fd = accept(f->lfd, NULL, NULL)) >= 0) {
		void **a = malloc(2 * sizeof(void *));
		pthread_t t;

		a[0] = f;
		a[1] = (void *)(intptr_t)fd;
		pthread_create(&t, NULL, fake_conn, a);
		pthread_detach(t);
	}
	return NULL;
}

/* Static: detached connection threads may outlive a test's use of it. */
static struct fake fakes[COMPRESS_ZSTD + 1];

static struct fake *fake_start(int slot)
{
	struct fake *f = &fakes[slot];
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	pthread_mutex_init(&f->mu, NULL);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(f->lfd >= 0 && bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  listen(f->lfd, 16) == 0 && getsockname(f->lfd, (struct sockaddr *)&a, &al) == 0);
	f->port = ntohs(a.sin_port);
	pthread_create(&f->th, NULL, fake_accept, f);
	return f;
}

Test(compress, backend_uses_uri_compressors, .timeout = 120)
{
	for (int a = COMPRESS_SNAPPY; a <= COMPRESS_ZSTD; a++) {
		struct fake *f = fake_start(a);
		char extra[256];
		struct proxy *p;
		bson_t *cmd = find_cmd("fake", "c"), reply, got;
		int fd, id;

		/* The chosen algorithm first; the client itself asks for none. */
		snprintf(extra, sizeof(extra),
			 "backend_uri = mongodb://127.0.0.1:%d/?compressors=%s,zlib\n"
			 "compression_min_bytes = 0\npool_size = 2\n",
			 f->port, compress_name(a));
		p = proxy_start(extra);
		fd = raw_connect(p);
		send_cmd(fd, 42, cmd, COMPRESS_NONE);
		recv_reply(fd, 42, &id, &reply);
		cr_assert_eq(id, COMPRESS_NONE, "client negotiated nothing: plain reply");
		first_batch(&reply, &got);
		cr_assert_eq(bson_count_keys(&got), NDOCS, "%s: %u documents", compress_name(a),
			     bson_count_keys(&got));
		pthread_mutex_lock(&f->mu);
		cr_assert(f->offered & (1 << a), "%s: proxy did not offer it (mask %x)",
			  compress_name(a), f->offered);
		cr_assert_eq(f->compressed_requests[a], 1,
			     "%s: backend got %d compressed finds, %d plain", compress_name(a),
			     f->compressed_requests[a], f->plain_requests);
		pthread_mutex_unlock(&f->mu);
		cr_assert_geq(proxy_counter(p, "backend_compressed_requests"), 1);
		cr_assert_geq(proxy_counter(p, "backend_compressed_replies"), 1);
		cr_log_info("backend %s: request compressed, compressed reply read",
			    compress_name(a));
		bson_destroy(&got);
		bson_destroy(&reply);
		bson_destroy(cmd);
		close(fd);
		proxy_stop(p);
		shutdown(f->lfd, SHUT_RDWR);
		close(f->lfd);
		pthread_join(f->th, NULL);
		/* connection threads end when the proxy's sockets close */
	}
}
