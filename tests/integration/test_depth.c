/*
 * test_depth.c — deeply nested documents against the running proxy (issue 8,
 * item 1: one 80 KB find nested 10,000 levels used to crash the proxy with a
 * stack overflow in libbson's recursive bson_validate).
 *
 *   depth/client_documents   raw OP_MSG finds and inserts (body array and
 *                            kind-1 sequence) whose deepest document sits at
 *                            100, 200, 201, 10,000 and 200,000 levels (depth
 *                            as in core/wire.h: a section document is 0),
 *                            all on ONE connection, in front of the real
 *                            backend: <= 200 gets the backend's reply, deeper
 *                            gets {ok: 0, code: 15, codeName: "Overflow"}; the
 *                            same connection then answers a ping; a second
 *                            client (libmongoc, own thread) works throughout;
 *                            the proxy stays alive
 *   depth/hostile_backend    a scripted backend (a thread here) whose find
 *                            replies nest 10,000 and 200,000 levels: the
 *                            client gets HostUnreachable, the proxy stays up
 *                            and a 205-level reply (within the 220 allowed
 *                            for replies) is delivered intact
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define WAIT_MS 20000 /* hang guard per reply (ASan builds are slow) */

/* {a: {a: ... {a: 1}}} with `levels` documents inside the outer one, built
 * without recursion (7 bytes of prefix and 1 EOO byte per level). */
static bson_t *chain(int levels)
{
	size_t total = 12 + 8 * (size_t)levels;
	uint8_t *p = malloc(total);
	bson_t *b;

	cr_assert_not_null(p);
	for (int i = 0; i <= levels; i++) {
		uint8_t *d = p + 7 * (size_t)i;
		uint32_t len = (uint32_t)(12 + 8 * (size_t)(levels - i));
		uint32_t le = BSON_UINT32_TO_LE(len);

		memcpy(d, &le, 4);
		if (i < levels)
			memcpy(d + 4,
			       "\x03"
			       "a",
			       3);
		else
			memcpy(d + 4,
			       "\x10"
			       "a\0\x01\0\0\0",
			       8);
		d[len - 1] = 0;
	}
	b = bson_new_from_data(p, total);
	cr_assert_not_null(b);
	free(p);
	return b;
}

enum shape { FIND_FILTER, INSERT_BODY, INSERT_SEQUENCE };
static const char *const shape_name[] = {"find filter", "insert body array",
					 "insert kind-1 sequence"};

/* An OP_MSG whose deepest document is at `depth` (>= 3), on collection coll. */
static void deep_msg(struct h_buf *b, int32_t id, enum shape s, int depth, const char *db,
		     const char *coll)
{
	bson_t body = BSON_INITIALIZER, doc = BSON_INITIALIZER, arr;
	bson_t *c;

	if (s == FIND_FILTER) {
		c = chain(depth - 1); /* body 0, filter 1 */
		BSON_APPEND_UTF8(&body, "find", coll);
		BSON_APPEND_DOCUMENT(&body, "filter", c);
	} else {
		/* body 0, documents 1, doc 2, x 3 / sequence doc 0, x 1 */
		c = chain(s == INSERT_BODY ? depth - 3 : depth - 1);
		BSON_APPEND_INT32(&doc, "_id", depth * 10 + (int)s);
		BSON_APPEND_DOCUMENT(&doc, "x", c);
		BSON_APPEND_UTF8(&body, "insert", coll);
		if (s == INSERT_BODY) {
			BSON_APPEND_ARRAY_BEGIN(&body, "documents", &arr);
			BSON_APPEND_DOCUMENT(&arr, "0", &doc);
			bson_append_array_end(&body, &arr);
		}
	}
	BSON_APPEND_UTF8(&body, "$db", db);
	hb_init(b);
	hb_header(b, id, 0, H_WIRE_OP_MSG);
	hb_i32(b, 0);
	hb_u8(b, 0);
	hb_doc(b, &body);
	if (s == INSERT_SEQUENCE) {
		hb_u8(b, 1);
		hb_i32(b, (int32_t)(4 + sizeof("documents") + doc.len));
		hb_cstr(b, "documents");
		hb_doc(b, &doc);
	}
	hb_finish(b, false);
	bson_destroy(&body);
	bson_destroy(&doc);
	bson_destroy(c);
}

/* Send one message on fd and read its reply body into *reply (a copy). */
static bool exchange(int fd, struct h_buf *b, int32_t id, bson_t *reply, char *why, size_t wl)
{
	uint8_t *msg = NULL;
	size_t len = 0;
	struct raw_reply r;
	enum raw_status st;
	bool ok = false;

	bson_init(reply);
	if (!raw_send(fd, b->data, b->len)) {
		snprintf(why, wl, "send failed: %s", strerror(errno));
		return false;
	}
	st = raw_recv_msg(fd, &msg, &len, WAIT_MS);
	if (st != RAW_OK) {
		snprintf(why, wl, "no reply: %s", raw_status_name(st));
	} else if (!raw_parse_reply(msg, len, &r) || !r.have_doc) {
		snprintf(why, wl, "unparsable reply of %zu bytes", len);
	} else if (r.response_to != id) {
		snprintf(why, wl, "reply to %d, expected %d", r.response_to, id);
	} else {
		bson_destroy(reply);
		bson_copy_to(&r.doc, reply);
		ok = true;
	}
	free(msg);
	return ok;
}

/* ------------------------------------------------------------ bystander */

struct bystander {
	struct proxy *p;
	char db[64];
	pthread_t th;
	atomic_bool stop;
	atomic_int ok, failed;
	char error[256];
};

static void *bystander_main(void *arg)
{
	struct bystander *x = arg;
	mongoc_client_t *c = h_client_uri(x->p->uri, "itest-depth-bystander");
	mongoc_collection_t *col = mongoc_client_get_collection(c, x->db, "plain");

	for (int k = 0; !atomic_load(&x->stop); k++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(k));
		bson_error_t err;
		int64_t n;

		n = mongoc_collection_insert_one(col, d, NULL, NULL, &err)
			? mongoc_collection_count_documents(col, d, NULL, NULL, NULL, &err)
			: -1;
		if (n == 1) {
			atomic_fetch_add(&x->ok, 1);
		} else {
			if (atomic_fetch_add(&x->failed, 1) == 0)
				snprintf(x->error, sizeof(x->error), "round %d: %s", k,
					 err.message);
		}
		bson_destroy(d);
		h_sleep_ms(5);
	}
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	return NULL;
}

/* ------------------------------------------------------------ client side */

static const int depths[] = {100, 200, 201, 10000, 200000};

static void check_one(struct proxy *p, int fd, int32_t id, enum shape s, int depth, const char *db)
{
	struct h_buf b;
	bson_t reply;
	char why[128] = "";
	bool sent_ok;

	deep_msg(&b, id, s, depth, db, "deep");
	sent_ok = exchange(fd, &b, id, &reply, why, sizeof(why));
	cr_assert(sent_ok, "%s at depth %d (%zu bytes): %s; proxy alive: %d", shape_name[s], depth,
		  b.len, why, proxy_alive(p));
	if (depth > 200) {
		cr_expect_eq(h_get_int(&reply, "ok", -1), 0, "%s at depth %d: ok", shape_name[s],
			     depth);
		cr_expect_eq(h_get_int(&reply, "code", -1), 15, "%s at depth %d: code",
			     shape_name[s], depth);
		cr_expect_str_eq(h_get_str(&reply, "codeName") ? h_get_str(&reply, "codeName")
							       : "(none)",
				 "Overflow", "%s at depth %d", shape_name[s], depth);
	} else {
		/* the backend's answer, whatever it is: never the proxy's refusal */
		cr_expect_neq(h_get_int(&reply, "code", -1), 15, "%s at depth %d refused",
			      shape_name[s], depth);
		cr_expect_neq(h_get_int(&reply, "code", -1), 22, "%s at depth %d refused",
			      shape_name[s], depth);
	}
	cr_log_info("%s depth %6d (%7zu bytes): ok %lld code %lld %s", shape_name[s], depth, b.len,
		    (long long)h_get_int(&reply, "ok", -1), (long long)h_get_int(&reply, "code", 0),
		    h_get_str(&reply, "codeName") ? h_get_str(&reply, "codeName") : "");
	bson_destroy(&reply);
	hb_free(&b);
	/* the same connection is still usable */
	cr_assert(raw_ping_ok(fd, WAIT_MS), "ping after %s at depth %d", shape_name[s], depth);
}

Test(depth, client_documents, .timeout = 600)
{
	struct proxy *p = proxy_start(NULL);
	struct bystander x;
	mongoc_client_t *c;
	int fd;
	int32_t id = 100;

	memset(&x, 0, sizeof(x));
	x.p = p;
	h_unique(x.db, sizeof(x.db), "depth");
	cr_assert_eq(pthread_create(&x.th, NULL, bystander_main, &x), 0);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	for (int s = FIND_FILTER; s <= INSERT_SEQUENCE; s++)
		for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++)
			check_one(p, fd, id++, (enum shape)s, depths[i], x.db);
	proxy_assert_alive(p, "after the nested documents");
	close(fd);
	h_sleep_ms(200);
	atomic_store(&x.stop, true);
	pthread_join(x.th, NULL);
	cr_expect_eq(atomic_load(&x.failed), 0, "bystander: %d failed (%s)", atomic_load(&x.failed),
		     x.error);
	cr_expect_gt(atomic_load(&x.ok), 0, "bystander made no progress");
	cr_expect(log_contains(p, "exceeds maximum nested object depth"), "the refusal is logged");
	cr_log_info("bystander: %d insert+count rounds ok", atomic_load(&x.ok));
	c = h_proxy_client(p, "itest-depth-cleanup");
	h_drop_db(c, x.db);
	mongoc_client_destroy(c);
	proxy_stop(p);
}

/* ------------------------------------------------------------ hostile backend */

/* A scripted backend: answers hello as a standalone, a find on "deep10k" /
 * "deep200k" / "ok205" with a reply whose deepest document is at 10,000 /
 * 200,000 / 205 levels ({cursor: {firstBatch: [doc]}} puts the document at
 * depth 3), anything else with {ok: 1}. One thread per connection. */
struct hostile {
	int lfd, port;
	pthread_t th;
	atomic_bool stop;
	atomic_int finds;
};

static bool read_full(struct hostile *h, int fd, uint8_t *p, size_t n)
{
	while (n > 0) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (atomic_load(&h->stop))
			return false;
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		r = read(fd, p, n);
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

static void hostile_reply_body(struct hostile *h, const bson_t *cmd, bson_t *out)
{
	bson_iter_t it;
	const char *name, *coll;
	int depth = 0;

	bson_init(out);
	if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) {
		BSON_APPEND_DOUBLE(out, "ok", 1.0);
		return;
	}
	name = bson_iter_key(&it);
	if (strcmp(name, "hello") == 0 || strcasecmp(name, "isMaster") == 0) {
		BSON_APPEND_BOOL(out, "isWritablePrimary", true);
		BSON_APPEND_BOOL(out, "ismaster", true);
		BSON_APPEND_INT32(out, "maxBsonObjectSize", 16 * 1024 * 1024);
		BSON_APPEND_INT32(out, "maxMessageSizeBytes", 48000000);
		BSON_APPEND_INT32(out, "maxWriteBatchSize", 100000);
		BSON_APPEND_INT32(out, "minWireVersion", 0);
		BSON_APPEND_INT32(out, "maxWireVersion", 17);
		BSON_APPEND_INT32(out, "logicalSessionTimeoutMinutes", 30);
	} else if (strcmp(name, "find") == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
		coll = bson_iter_utf8(&it, NULL);
		depth = strcmp(coll, "deep10k") == 0	? 10000
			: strcmp(coll, "deep200k") == 0 ? 200000
			: strcmp(coll, "ok205") == 0	? 205
							: 0;
		atomic_fetch_add(&h->finds, 1);
	}
	if (depth > 0) {
		bson_t cur, arr, *c = chain(depth - 3);

		BSON_APPEND_DOCUMENT_BEGIN(out, "cursor", &cur);
		BSON_APPEND_INT64(&cur, "id", 0);
		BSON_APPEND_UTF8(&cur, "ns", "test.deep");
		BSON_APPEND_ARRAY_BEGIN(&cur, "firstBatch", &arr);
		BSON_APPEND_DOCUMENT(&arr, "0", c);
		bson_append_array_end(&cur, &arr);
		bson_append_document_end(out, &cur);
		bson_destroy(c);
	}
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
}

struct hostile_conn {
	struct hostile *h;
	int fd;
};

static void *hostile_conn_main(void *arg)
{
	struct hostile_conn *hc = arg;
	uint8_t hdr[16];

	while (read_full(hc->h, hc->fd, hdr, 16)) {
		int32_t len, id;
		uint8_t *msg;
		bson_t cmd, body;
		struct h_buf b;

		memcpy(&len, hdr, 4);
		memcpy(&id, hdr + 4, 4);
		len = (int32_t)BSON_UINT32_FROM_LE((uint32_t)len);
		id = (int32_t)BSON_UINT32_FROM_LE((uint32_t)id);
		if (len < 26 || len > 48000000)
			break;
		msg = malloc((size_t)len);
		memcpy(msg, hdr, 16);
		if (!read_full(hc->h, hc->fd, msg + 16, (size_t)len - 16) || msg[20] != 0 ||
		    !bson_init_static(&cmd, msg + 21,
				      (size_t)msg[21] | (size_t)msg[22] << 8 |
					  (size_t)msg[23] << 16 | (size_t)msg[24] << 24)) {
			free(msg);
			break;
		}
		hostile_reply_body(hc->h, &cmd, &body);
		hb_init(&b);
		hb_header(&b, 1, id, H_WIRE_OP_MSG);
		hb_i32(&b, 0);
		hb_u8(&b, 0);
		hb_doc(&b, &body);
		hb_finish(&b, false);
		(void)raw_send(hc->fd, b.data, b.len);
		hb_free(&b);
		bson_destroy(&body);
		free(msg);
	}
	close(hc->fd);
	free(hc);
	return NULL;
}

static void *hostile_main(void *arg)
{
	struct hostile *h = arg;

	while (!atomic_load(&h->stop)) {
		struct pollfd pfd = {.fd = h->lfd, .events = POLLIN};
		struct hostile_conn *hc;
		pthread_t th;
		int fd;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		fd = accept(h->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		hc = malloc(sizeof(*hc));
		hc->h = h;
		hc->fd = fd;
		if (pthread_create(&th, NULL, hostile_conn_main, hc) == 0)
			pthread_detach(th);
		else
			close(fd), free(hc);
	}
	return NULL;
}

static void hostile_start(struct hostile *h)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);

	memset(h, 0, sizeof(*h));
	h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(h->lfd >= 0);
	cr_assert_eq(bind(h->lfd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
	cr_assert_eq(listen(h->lfd, 16), 0);
	cr_assert_eq(getsockname(h->lfd, (struct sockaddr *)&a, &al), 0);
	h->port = ntohs(a.sin_port);
	cr_assert_eq(pthread_create(&h->th, NULL, hostile_main, h), 0);
}

static void find_on(int fd, int32_t id, const char *coll, bson_t *reply)
{
	bson_t *cmd = BCON_NEW("find", BCON_UTF8(coll), "$db", BCON_UTF8("test"));

	cr_assert(raw_command(fd, id, cmd, reply, WAIT_MS), "find on %s: no reply", coll);
	bson_destroy(cmd);
}

Test(depth, hostile_backend, .timeout = 300)
{
	struct hostile h;
	struct proxy *p;
	char extra[128];
	bson_t reply;
	int fd;
	int32_t id = 1;
	const char *deep[] = {"deep10k", "deep200k"};

	hostile_start(&h);
	snprintf(extra, sizeof(extra), "backend_uri = mongodb://127.0.0.1:%d/\n", h.port);
	p = proxy_start(extra);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 2; i++) {
			find_on(fd, id++, deep[i], &reply);
			cr_expect_eq(h_get_int(&reply, "ok", -1), 0, "%s delivered", deep[i]);
			cr_expect_eq(h_get_int(&reply, "code", -1), 6, "%s: code", deep[i]);
			cr_log_info("backend reply nested %s: code %lld, %s", deep[i],
				    (long long)h_get_int(&reply, "code", -1),
				    h_get_str(&reply, "errmsg") ? h_get_str(&reply, "errmsg") : "");
			bson_destroy(&reply);
			proxy_assert_alive(p, "after a deeply nested backend reply");
		}
		find_on(fd, id++, "ok205", &reply);
		cr_expect_eq(h_get_int(&reply, "ok", -1), 1, "205-level reply refused");
		bson_destroy(&reply);
		cr_assert(raw_ping_ok(fd, WAIT_MS));
	}
	cr_expect_geq(atomic_load(&h.finds), 6, "the finds reached the scripted backend");
	cr_expect(log_contains(p, "exceeds maximum nested object depth"),
		  "the backend's refusal is logged");
	close(fd);
	proxy_stop(p);
	atomic_store(&h.stop, true);
	pthread_join(h.th, NULL);
	close(h.lfd);
}
