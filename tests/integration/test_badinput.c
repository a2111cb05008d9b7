/*
 * test_badinput.c — the live bad-input battery (TESTING.md, "Bad input gets a
 * clear error, and nothing is lost") against one running proxy. Each case
 * uses its own raw socket; a well-behaved libmongoc client runs finds in a
 * loop on another thread throughout and must see no failure. Checks are on
 * the reply bytes (parsed with libbson) and on the proxy's log lines.
 *
 * Cases use cr_expect (not cr_assert) so that one broken case is reported
 * and the others still run; each message names its case.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define READ_TIMEOUT_MS 1000
#define MAX_CONN	50
#define CLIENT_BUF	1048576
#define BIG_DOCS	64
#define BIG_DOC_BYTES	16384

static const char battery_cfg[] = "client_read_timeout_ms = 1000\n"
				  "max_client_conn = 50\n"
				  "max_client_buffer_bytes = 1048576\n";

struct ctx {
	struct proxy *p;
	char db[64];
	int32_t next_id;
	/* the well-behaved client */
	pthread_t bg;
	atomic_bool bg_stop;
	atomic_int bg_ok, bg_failed;
	pthread_mutex_t mu;
	char bg_error[512];
};

/* ------------------------------------------------------------ the good client */

static void *bg_main(void *arg)
{
	struct ctx *x = arg;
	mongoc_client_t *c = h_client_uri(x->p->uri, "itest-badinput-bystander");
	mongoc_collection_t *col = c ? mongoc_client_get_collection(c, x->db, "c") : NULL;

	for (int k = 0; !atomic_load(&x->bg_stop); k++) {
		bson_t *f = k % 3 == 2 ? BCON_NEW("v", "{", "$gte", BCON_INT32(0), "}")
				       : BCON_NEW("_id", BCON_INT32(k % 20));
		int want = k % 3 == 2 ? 20 : 1, n = 0;
		mongoc_cursor_t *cur;
		const bson_t *doc;
		bson_error_t err;
		bool good = true;

		if (col == NULL) {
			bson_set_error(&err, 0, 0, "no client");
			n = -1;
		} else {
			cur = mongoc_collection_find_with_opts(col, f, NULL, NULL);
			while (mongoc_cursor_next(cur, &doc)) {
				if (want == 1)
					good = good && h_get_int(doc, "v", -1) == k % 20;
				n++;
			}
			if (mongoc_cursor_error(cur, &err))
				n = -1;
			mongoc_cursor_destroy(cur);
		}
		if (n == want && good) {
			atomic_fetch_add(&x->bg_ok, 1);
		} else {
			atomic_fetch_add(&x->bg_failed, 1);
			pthread_mutex_lock(&x->mu);
			if (x->bg_error[0] == '\0')
				snprintf(x->bg_error, sizeof(x->bg_error),
					 "find #%d: %d docs (want %d), content %s: %s", k, n, want,
					 good ? "ok" : "WRONG", n < 0 ? err.message : "");
			pthread_mutex_unlock(&x->mu);
		}
		bson_destroy(f);
		h_sleep_ms(2);
	}
	if (col != NULL)
		mongoc_collection_destroy(col);
	if (c != NULL)
		mongoc_client_destroy(c);
	return NULL;
}

static void seed_data(struct ctx *x)
{
	mongoc_client_t *c = h_proxy_client(x->p, "itest-badinput-seed");
	mongoc_collection_t *col = mongoc_client_get_collection(c, x->db, "c");
	mongoc_collection_t *big = mongoc_client_get_collection(c, x->db, "big");
	char *filler = malloc(BIG_DOC_BYTES);
	bson_error_t err;

	memset(filler, 'z', BIG_DOC_BYTES - 1);
	filler[BIG_DOC_BYTES - 1] = '\0';
	for (int i = 0; i < 20; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i));

		cr_assert(mongoc_collection_insert_one(col, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	for (int i = 0; i < BIG_DOCS; i++) {
		bson_t *d = BCON_NEW("_id", BCON_INT32(i), "pad", BCON_UTF8(filler));

		cr_assert(mongoc_collection_insert_one(big, d, NULL, NULL, &err), "%s",
			  err.message);
		bson_destroy(d);
	}
	free(filler);
	mongoc_collection_destroy(col);
	mongoc_collection_destroy(big);
	mongoc_client_destroy(c);
}

/* ------------------------------------------------------------ helpers */

static int conn(struct ctx *x, const char *what)
{
	int fd = raw_connect(x->p);

	cr_assert(fd >= 0, "%s: cannot connect to the proxy: %s", what, strerror(errno));
	return fd;
}

static void send_buf(int fd, const struct h_buf *b, const char *what)
{
	cr_expect(raw_send(fd, b->data, b->len), "%s: send failed: %s", what, strerror(errno));
}

static bool contains_ci(const char *hay, const char *needle)
{
	return hay != NULL && strcasestr(hay, needle) != NULL;
}

static char *json(const bson_t *doc)
{
	return bson_as_relaxed_extended_json(doc, NULL);
}

/* Receive one reply and check it is an error: opcode, responseTo, ok: 0, a
 * code, an errmsg containing `keyword` (NULL: any). The document is copied
 * to *out when out != NULL. Returns true when all checks pass. */
static bool expect_error_reply(int fd, int32_t opcode, int32_t response_to, const char *keyword,
			       const char *what, bson_t *out)
{
	struct raw_reply r;
	enum raw_status st;
	uint8_t *msg;
	size_t len;
	const char *errmsg;
	bool good = true;

	if (out != NULL)
		bson_init(out);
	st = raw_recv_msg(fd, &msg, &len, 5000);
	if (st != RAW_OK) {
		cr_expect_fail("%s: expected an error reply, got %s", what, raw_status_name(st));
		return false;
	}
	if (!raw_parse_reply(msg, len, &r) || !r.have_doc) {
		cr_expect_fail("%s: the reply (%zu bytes, opcode %d) does not parse", what, len,
			       r.opcode);
		free(msg);
		return false;
	}
	errmsg = h_get_str(&r.doc, "errmsg");
	if (errmsg == NULL)
		errmsg = h_get_str(&r.doc, "$err");
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			good = false;                                                              \
			cr_expect_fail(__VA_ARGS__);                                               \
		}                                                                                  \
	} while (0)
	CHECK(r.opcode == opcode, "%s: reply opcode %d, expected %d", what, r.opcode, opcode);
	CHECK(response_to == 0 || r.response_to == response_to,
	      "%s: reply responseTo %d, expected %d", what, r.response_to, response_to);
	CHECK(h_get_int(&r.doc, "ok", 1) == 0, "%s: reply is not ok: 0: %s", what, json(&r.doc));
	CHECK(h_get_int(&r.doc, "code", 0) != 0, "%s: reply has no error code: %s", what,
	      json(&r.doc));
	CHECK(errmsg != NULL && *errmsg != '\0', "%s: reply has no errmsg: %s", what, json(&r.doc));
	CHECK(keyword == NULL || contains_ci(errmsg, keyword),
	      "%s: errmsg does not mention \"%s\": %s", what, keyword, json(&r.doc));
#undef CHECK
	if (good)
		cr_log_info("%s: error reply %s", what, json(&r.doc));
	if (out != NULL) {
		bson_destroy(out);
		bson_copy_to(&r.doc, out);
	}
	free(msg);
	return good;
}

/* A valid ping on fd after a refused message: the connection still works. */
static void expect_usable(int fd, const char *what)
{
	cr_expect(raw_ping_ok(fd, 5000), "%s: the connection is no longer usable after the error",
		  what);
}

/* The proxy logged a line about this socket's client containing `text`. */
static void expect_log(struct ctx *x, int fd, const char *text, const char *what)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char *tail;

	if (log_wait_client(x->p, fd, text, 5000))
		return;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	tail = proxy_log_tail(x->p, 3000);
	cr_expect_fail("%s: no log line about this client (local port %u) containing \"%s\"; "
		       "log tail:\n%s",
		       what, ntohs(sa.sin_port), text, tail);
	free(tail);
}

static void ping_msg(struct h_buf *b, int32_t id)
{
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8("admin"));

	hb_init(b);
	h_build_msg(b, id, 0, ping);
	bson_destroy(ping);
}

/* Header-level framing error: an error reply then close, or a close; and
 * a log line naming the length. */
static void case_bad_length(struct ctx *x, int32_t length, const char *what)
{
	int fd = conn(x, what);
	struct h_buf b;
	enum raw_status st;
	struct raw_reply r;
	uint8_t *msg;
	size_t len;
	char logtext[64];

	hb_init(&b);
	hb_header(&b, 21, 0, H_WIRE_OP_MSG);
	hb_set_i32(&b, 0, length);
	hb_i32(&b, 0);
	hb_u8(&b, 0);
	send_buf(fd, &b, what);
	st = raw_recv_msg(fd, &msg, &len, 5000);
	if (st == RAW_OK) {
		cr_expect(raw_parse_reply(msg, len, &r) && r.have_doc &&
			      h_get_int(&r.doc, "ok", 1) == 0 &&
			      contains_ci(h_get_str(&r.doc, "errmsg"), "messageLength"),
			  "%s: unexpected reply", what);
		if (r.have_doc)
			cr_log_info("%s: error reply %s", what, json(&r.doc));
		free(msg);
		cr_expect(raw_wait_closed(fd, 5000), "%s: not closed after the error reply", what);
	} else {
		cr_expect_eq(st, RAW_EOF, "%s: neither an error reply nor a close (%s)", what,
			     raw_status_name(st));
	}
	snprintf(logtext, sizeof(logtext), "messageLength %d", length);
	expect_log(x, fd, logtext, what);
	close(fd);
	hb_free(&b);
}

/* ------------------------------------------------------------ the cases */

static void case_truncated_header(struct ctx *x)
{
	const char *what = "truncated header then close";
	int fd = conn(x, what);
	struct h_buf b;
	uint8_t *msg;
	size_t len;

	ping_msg(&b, 20);
	cr_expect(raw_send(fd, b.data, 10), "%s: send", what);
	cr_expect_eq(raw_recv_msg(fd, &msg, &len, 300), RAW_TIMEOUT,
		     "%s: the proxy answered 10 bytes of a header", what);
	close(fd);
	hb_free(&b);
	h_sleep_ms(100);
	proxy_assert_alive(x->p, "after a truncated header");
}

static void case_length_longer_than_sent(struct ctx *x)
{
	const char *what = "messageLength longer than the bytes sent";
	int fd = conn(x, what);
	struct h_buf b;
	uint8_t *msg;
	size_t len;
	int64_t t0;

	ping_msg(&b, 22);
	hb_set_i32(&b, 0, (int32_t)b.len + 100);
	send_buf(fd, &b, what);
	cr_expect_eq(raw_recv_msg(fd, &msg, &len, 500), RAW_TIMEOUT,
		     "%s: expected the proxy to wait for the rest", what);
	t0 = h_now_ms();
	cr_expect(raw_wait_closed(fd, READ_TIMEOUT_MS + 3000),
		  "%s: not disconnected after client_read_timeout_ms", what);
	cr_log_info("%s: stalled, disconnected %lld ms later", what,
		    (long long)(h_now_ms() - t0 + 500));
	expect_log(x, fd, "client_read_timeout_ms", what);
	close(fd);
	hb_free(&b);
}

static void case_length_shorter_than_body(struct ctx *x)
{
	const char *what = "messageLength shorter than the body";
	int fd = conn(x, what);
	struct h_buf b;

	ping_msg(&b, 23);
	hb_set_i32(&b, 0, (int32_t)b.len - 4);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 23, NULL, what, NULL);
	close(fd);
	hb_free(&b);
}

static void case_invalid_bson(struct ctx *x)
{
	const char *what = "invalid BSON body";
	int fd = conn(x, what);
	struct h_buf b;
	/* {a: "x"} whose string length says 100 */
	static const uint8_t bad[] = {14, 0, 0, 0, 0x02, 'a', 0, 100, 0, 0, 0, 'x', 0, 0};

	hb_init(&b);
	hb_header(&b, 24, 0, H_WIRE_OP_MSG);
	hb_i32(&b, 0);
	hb_u8(&b, 0);
	hb_add(&b, bad, sizeof(bad));
	hb_finish(&b, false);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 24, "BSON", what, NULL);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
}

static void case_unknown_opcode(struct ctx *x, int32_t opcode, const char *keyword,
				const char *what)
{
	int fd = conn(x, what);
	struct h_buf b;

	hb_init(&b);
	hb_header(&b, 25, 0, opcode);
	hb_i64(&b, 0);
	hb_i64(&b, 0);
	hb_finish(&b, false);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 25, keyword, what, NULL);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
}

/* An OP_COMPRESSED that cannot be unwrapped (never negotiated, sizes 0):
 * an error reply, then the connection is closed with a logged reason (its
 * content is lost, as in mongod); more cases in test_compress.c. */
static void case_compressed_garbage(struct ctx *x)
{
	const char *what = "OP_COMPRESSED (never negotiated, garbage)";
	int fd = conn(x, what);
	struct h_buf b;

	hb_init(&b);
	hb_header(&b, 25, 0, H_WIRE_OP_COMPRESSED);
	hb_i64(&b, 0);
	hb_i64(&b, 0);
	hb_finish(&b, false);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 25, "OP_COMPRESSED", what, NULL);
	expect_log(x, fd, "bad OP_COMPRESSED", what);
	cr_expect(raw_wait_closed(fd, 10000), "%s: connection left open", what);
	close(fd);
	hb_free(&b);
}

/* Legacy opcodes other than the handshake: an error reply or a logged
 * disconnect; nothing reaches the backend. */
static void case_legacy(struct ctx *x, int32_t opcode, const char *name)
{
	char what[64];
	int fd;
	struct h_buf b;
	bson_t *doc = BCON_NEW("_id", BCON_UTF8("legacy"));
	char ns[100];
	enum raw_status st;
	struct raw_reply r;
	uint8_t *msg;
	size_t len;

	snprintf(what, sizeof(what), "legacy %s", name);
	fd = conn(x, what);
	snprintf(ns, sizeof(ns), "%s.c", x->db);
	hb_init(&b);
	hb_header(&b, 26, 0, opcode);
	hb_i32(&b, 0);
	hb_cstr(&b, ns);
	if (opcode == H_WIRE_OP_INSERT) {
		hb_doc(&b, doc);
	} else {
		hb_i32(&b, 0);
		hb_i64(&b, 123456789);
	}
	hb_finish(&b, false);
	send_buf(fd, &b, what);
	st = raw_recv_msg(fd, &msg, &len, 5000);
	if (st == RAW_OK) {
		bool parsed = raw_parse_reply(msg, len, &r) && r.have_doc;

		cr_expect(parsed, "%s: unparseable reply", what);
		if (parsed) {
			cr_expect_eq(h_get_int(&r.doc, "ok", 1), 0, "%s: %s", what, json(&r.doc));
			cr_expect(contains_ci(h_get_str(&r.doc, "errmsg"), name),
				  "%s: errmsg does not name %s: %s", what, name, json(&r.doc));
			cr_expect_eq(r.response_to, 26);
			cr_log_info("%s: error reply %s", what, json(&r.doc));
		}
		free(msg);
		expect_usable(fd, what);
	} else {
		cr_expect_eq(st, RAW_EOF, "%s: neither a reply nor a close (%s)", what,
			     raw_status_name(st));
	}
	expect_log(x, fd, name, what);
	close(fd);
	hb_free(&b);
	bson_destroy(doc);
}

static void case_op_query_not_handshake(struct ctx *x)
{
	const char *what = "OP_QUERY that is not the handshake";
	int fd = conn(x, what);
	struct h_buf b;
	bson_t *q = BCON_NEW("v", BCON_INT32(1));
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1));
	char ns[100];

	snprintf(ns, sizeof(ns), "%s.c", x->db);
	hb_init(&b);
	h_build_query(&b, 27, ns, q);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_REPLY, 27, "OP_QUERY", "OP_QUERY find on a collection",
			   NULL);
	hb_free(&b);
	h_build_query(&b, 28, "admin.$cmd", ping);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_REPLY, 28, "OP_QUERY", "OP_QUERY ping command", NULL);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
	bson_destroy(q);
	bson_destroy(ping);
}

static void expect_ismaster_reply(int fd, int32_t id, const char *what)
{
	struct raw_reply r;
	enum raw_status st;
	uint8_t *msg;
	size_t len;

	st = raw_recv_msg(fd, &msg, &len, 5000);
	cr_expect_eq(st, RAW_OK, "%s: no reply (%s)", what, raw_status_name(st));
	if (st != RAW_OK)
		return;
	if (!raw_parse_reply(msg, len, &r) || !r.have_doc) {
		cr_expect_fail("%s: unparseable reply", what);
		free(msg);
		return;
	}
	cr_expect_eq(r.opcode, H_WIRE_OP_REPLY, "%s: answered with opcode %d", what, r.opcode);
	cr_expect_eq(r.response_to, id);
	cr_expect_eq(r.n_returned, 1);
	cr_expect_eq(h_get_int(&r.doc, "ok", 0), 1, "%s: %s", what, json(&r.doc));
	cr_expect(h_get_bool(&r.doc, "ismaster"), "%s: no ismaster: true: %s", what, json(&r.doc));
	cr_expect_gt(h_get_int(&r.doc, "maxWireVersion", 0), 0, "%s: %s", what, json(&r.doc));
	cr_expect_gt(h_get_int(&r.doc, "maxBsonObjectSize", 0), 0);
	free(msg);
}

static void case_op_query_ismaster(struct ctx *x)
{
	const char *what = "OP_QUERY isMaster (legacy handshake)";
	int fd = conn(x, what);
	struct h_buf b;
	bson_t *q = BCON_NEW("isMaster", BCON_INT32(1), "client", "{", "application", "{", "name",
			     BCON_UTF8("itest-legacy"), "}", "}");
	bson_t *wrapped = BCON_NEW("$query", "{", "ismaster", BCON_INT32(1), "}");

	hb_init(&b);
	h_build_query(&b, 29, "admin.$cmd", q);
	send_buf(fd, &b, what);
	expect_ismaster_reply(fd, 29, what);
	hb_free(&b);
	h_build_query(&b, 30, "admin.$cmd", wrapped);
	send_buf(fd, &b, what);
	expect_ismaster_reply(fd, 30, "OP_QUERY {$query: {ismaster: 1}}");
	/* drivers switch to OP_MSG after the legacy handshake */
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
	bson_destroy(q);
	bson_destroy(wrapped);
}

static void case_bad_section_kind(struct ctx *x)
{
	const char *what = "OP_MSG with an unknown section kind";
	int fd = conn(x, what);
	struct h_buf b;
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8("admin"));

	hb_init(&b);
	hb_header(&b, 31, 0, H_WIRE_OP_MSG);
	hb_i32(&b, 0);
	hb_u8(&b, 0);
	hb_doc(&b, ping);
	hb_u8(&b, 9);
	hb_i32(&b, 9);
	hb_u8(&b, 'x');
	hb_finish(&b, false);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 31, "kind", what, NULL);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
	bson_destroy(ping);
}

static void case_missing_body(struct ctx *x)
{
	const char *what = "OP_MSG without a body section";
	int fd = conn(x, what);
	struct h_buf b;
	bson_t *doc = BCON_NEW("_id", BCON_INT32(1));
	size_t start;

	hb_init(&b);
	hb_header(&b, 32, 0, H_WIRE_OP_MSG);
	hb_i32(&b, 0);
	hb_u8(&b, 1);
	start = b.len;
	hb_i32(&b, 0);
	hb_cstr(&b, "documents");
	hb_doc(&b, doc);
	hb_set_i32(&b, start, (int32_t)(b.len - start));
	hb_finish(&b, false);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 32, "body", what, NULL);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
	bson_destroy(doc);
}

static void case_two_bodies(struct ctx *x)
{
	const char *what = "OP_MSG with two body sections";
	int fd = conn(x, what);
	struct h_buf b;
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8("admin"));

	hb_init(&b);
	hb_header(&b, 33, 0, H_WIRE_OP_MSG);
	hb_i32(&b, 0);
	hb_u8(&b, 0);
	hb_doc(&b, ping);
	hb_u8(&b, 0);
	hb_doc(&b, ping);
	hb_finish(&b, false);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 33, "body", what, NULL);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
	bson_destroy(ping);
}

static void case_checksum(struct ctx *x)
{
	const char *what = "OP_MSG with a bad checksum";
	int fd = conn(x, what);
	struct h_buf b;
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t reply;
	struct raw_reply r;
	uint8_t *msg;
	size_t len;

	/* A correct checksum is accepted. */
	hb_init(&b);
	h_build_msg(&b, 34, H_MSG_CHECKSUM, ping);
	send_buf(fd, &b, what);
	cr_expect_eq(raw_recv_msg(fd, &msg, &len, 5000), RAW_OK, "good checksum: no reply");
	if (msg != NULL) {
		cr_expect(raw_parse_reply(msg, len, &r) && r.have_doc &&
			      h_get_int(&r.doc, "ok", 0) == 1,
			  "a ping with a correct CRC-32C was not answered ok: 1");
		free(msg);
	}
	/* A wrong one is refused. */
	b.data[b.len - 1] ^= 0x5a;
	hb_set_i32(&b, 4, 35);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 35, "checksum", what, &reply);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
	bson_destroy(&reply);
	bson_destroy(ping);
}

static void case_unknown_required_flag(struct ctx *x)
{
	const char *what = "OP_MSG with an unknown required flag bit";
	int fd = conn(x, what);
	struct h_buf b;
	bson_t *ping = BCON_NEW("ping", BCON_INT32(1), "$db", BCON_UTF8("admin"));

	hb_init(&b);
	h_build_msg(&b, 36, 1u << 5, ping);
	send_buf(fd, &b, what);
	expect_error_reply(fd, H_WIRE_OP_MSG, 36, "flag", what, NULL);
	expect_usable(fd, what);
	close(fd);
	hb_free(&b);
	bson_destroy(ping);
}

static void case_half_message_stall(struct ctx *x)
{
	const char *what = "half a message, then a stall";
	int fd = conn(x, what);
	struct h_buf b;
	int64_t t0 = h_now_ms();
	bool closed;

	ping_msg(&b, 37);
	cr_expect(raw_send(fd, b.data, b.len / 2), "%s: send", what);
	closed = raw_wait_closed(fd, READ_TIMEOUT_MS + 3000);
	cr_expect(closed, "%s: still connected %d ms after stalling (client_read_timeout_ms = %d)",
		  what, READ_TIMEOUT_MS + 3000, READ_TIMEOUT_MS);
	if (closed) {
		int64_t ms = h_now_ms() - t0;

		cr_expect_geq(ms, READ_TIMEOUT_MS - 100, "%s: disconnected after only %lld ms",
			      what, (long long)ms);
		cr_log_info("%s: disconnected after %lld ms", what, (long long)ms);
	}
	expect_log(x, fd, "client_read_timeout_ms", what);
	close(fd);
	hb_free(&b);
}

/* Requests whose replies are never read: the proxy stops reading the
 * socket instead of buffering without bound. */
static void case_never_reads(struct ctx *x)
{
	const char *what = "a client that never reads its replies";
	const int nreq = 300;
	int fd = conn(x, what);
	bson_t *find =
	    BCON_NEW("find", BCON_UTF8("big"), "filter", "{", "}", "$db", BCON_UTF8(x->db));
	long rss0 = proxy_rss_kb(x->p), rss_max = rss0;
	int sent = 0, ok_before;
	int64_t deadline;
	long limit_kb;

	for (int i = 0; i < nreq; i++) {
		struct h_buf b;

		hb_init(&b);
		h_build_msg(&b, 1000 + i, 0, find);
		/* Non-blocking: if the proxy stops reading, our send buffer fills. */
		if (send(fd, b.data, b.len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)b.len) {
			hb_free(&b);
			break;
		}
		sent++;
		hb_free(&b);
	}
	ok_before = atomic_load(&x->bg_ok);
	deadline = h_now_ms() + 3000;
	while (h_now_ms() < deadline) {
		long rss = proxy_rss_kb(x->p);

		if (rss > rss_max)
			rss_max = rss;
		h_sleep_ms(50);
	}
	/* Unbounded buffering would be sent * ~1 MB; the bound is the output
	 * buffer plus the replies in flight plus slack. */
	limit_kb = 64 * 1024;
	cr_log_info("%s: sent %d finds (%d KB of replies each, none read); proxy RSS %ld kB "
		    "before, peak %ld kB (+%ld kB); limit +%ld kB",
		    what, sent, BIG_DOCS * BIG_DOC_BYTES / 1024, rss0, rss_max, rss_max - rss0,
		    limit_kb);
	cr_expect_leq(rss_max - rss0, limit_kb,
		      "%s: the proxy's RSS grew by %ld kB (max_client_buffer_bytes = %d)", what,
		      rss_max - rss0, CLIENT_BUF);
	cr_expect_gt(atomic_load(&x->bg_ok), ok_before,
		     "%s: the other client made no progress meanwhile", what);
	proxy_assert_alive(x->p, "with a client that never reads");
	close(fd);
	bson_destroy(find);
}

/* Clients that hang up while their requests run on the backend: the
 * replies must be dropped, not delivered to whoever uses that backend
 * connection next. */
static void case_disconnect_in_flight(struct ctx *x)
{
	const char *what = "clients closing with requests in flight";
	bson_t *find =
	    BCON_NEW("find", BCON_UTF8("big"), "filter", "{", "}", "$db", BCON_UTF8(x->db));
	bson_t *lookup = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", BCON_INT32(7), "}",
				  "$db", BCON_UTF8(x->db));
	int failed_before = atomic_load(&x->bg_failed);

	for (int i = 0; i < 40; i++) {
		int fd = conn(x, what);
		struct h_buf b;

		hb_init(&b);
		for (int k = 0; k < 4; k++)
			h_build_msg(&b, 2000 + i * 4 + k, 0, k % 2 ? lookup : find);
		send_buf(fd, &b, what);
		if (i % 2 == 1)
			h_sleep_ms(1); /* some reach the backend, some not yet */
		close(fd);
		hb_free(&b);
	}
	h_sleep_ms(500);
	proxy_assert_alive(x->p, "after clients closed with requests in flight");
	{
		int fd = conn(x, what);
		bson_t reply;

		for (int i = 0; i < 10; i++) {
			bool ok = raw_command(fd, 3000 + i, lookup, &reply, 5000);

			cr_expect(ok && h_get_int(&reply, "cursor.firstBatch.0.v", -1) == 7,
				  "%s: a later lookup got %s", what,
				  ok ? json(&reply) : "no reply");
			bson_destroy(&reply);
		}
		close(fd);
	}
	cr_expect_eq(atomic_load(&x->bg_failed), failed_before, "%s: the other client saw failures",
		     what);
	bson_destroy(find);
	bson_destroy(lookup);
}

static void raw_stats(int fd, bson_t *out)
{
	bson_t *cmd = BCON_NEW("mongoplexStats", BCON_INT32(1), "$db", BCON_UTF8("admin"));

	cr_assert(raw_command(fd, 99, cmd, out, 5000), "mongoplexStats over a raw socket failed");
	bson_destroy(cmd);
}

static void case_connection_flood(struct ctx *x)
{
	const char *what = "connections above max_client_conn";
	const int nflood = 80;
	int sfd = conn(x, what), fds[80], admitted = 0, refused = 0, expect_admitted;
	bson_t st, *hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	int64_t n0 = -1, refused0, refused1, deadline = h_now_ms() + 5000;

	/* Wait until only the bystander and this stats socket are open. */
	do {
		raw_stats(sfd, &st);
		n0 = h_get_int(&st, "gauges.clients", -1);
		refused0 = h_get_int(&st, "counters.clients_refused", -1);
		bson_destroy(&st);
		if (n0 == 2)
			break;
		h_sleep_ms(50);
	} while (h_now_ms() < deadline);
	cr_expect_eq(n0, 2, "%s: %lld clients open before the flood, expected 2", what,
		     (long long)n0);
	expect_admitted = MAX_CONN - (int)n0;
	for (int i = 0; i < nflood; i++) {
		bson_t reply;
		bool got;

		fds[i] = conn(x, what);
		got = raw_command(fds[i], 5000 + i, hello, &reply, 5000);
		if (i < expect_admitted) {
			cr_expect(got && h_get_int(&reply, "ok", 0) == 1,
				  "%s: connection %d (of %d allowed) was refused: %s", what,
				  i + 1 + (int)n0, MAX_CONN, json(&reply));
			admitted++;
		} else {
			bool good = got && h_get_int(&reply, "ok", 1) == 0 &&
				    h_get_int(&reply, "code", 0) != 0 &&
				    contains_ci(h_get_str(&reply, "errmsg"), "max_client_conn") &&
				    h_has_label(&reply, "SystemOverloadedError") &&
				    h_has_label(&reply, "RetryableError");

			cr_expect(good,
				  "%s: connection %d (over the limit of %d) got %s instead of an "
				  "overload error with SystemOverloadedError and RetryableError",
				  what, i + 1 + (int)n0, MAX_CONN, got ? json(&reply) : "no reply");
			if (i == expect_admitted)
				cr_log_info("%s: refusal %s", what, json(&reply));
			cr_expect(raw_wait_closed(fds[i], 5000),
				  "%s: refused connection %d was not closed", what, i + 1);
			if (i == expect_admitted)
				expect_log(x, fds[i], "max_client_conn", what);
			close(fds[i]);
			fds[i] = -1;
			refused++;
		}
		bson_destroy(&reply);
	}
	/* The admitted ones keep working. */
	for (int i = 0; i < nflood; i++) {
		if (fds[i] < 0)
			continue;
		cr_expect(raw_ping_ok(fds[i], 5000), "%s: admitted connection %d stopped working",
			  what, i + 1);
	}
	raw_stats(sfd, &st);
	refused1 = h_get_int(&st, "counters.clients_refused", -1);
	bson_destroy(&st);
	cr_expect_eq(refused1 - refused0, nflood - expect_admitted,
		     "%s: clients_refused went up by %lld, expected %d", what,
		     (long long)(refused1 - refused0), nflood - expect_admitted);
	cr_log_info("%s: %d admitted, %d refused with a retryable overload error and closed", what,
		    admitted, refused);
	for (int i = 0; i < nflood; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	close(sfd);
	bson_destroy(hello);
}

/* ------------------------------------------------------------ the test */

Test(badinput, battery, .timeout = 180)
{
	struct ctx x;
	int fd, ok_before;

	memset(&x, 0, sizeof(x));
	x.p = proxy_start(battery_cfg);
	h_unique(x.db, sizeof(x.db), "it_bad");
	pthread_mutex_init(&x.mu, NULL);
	seed_data(&x);
	cr_assert_eq(pthread_create(&x.bg, NULL, bg_main, &x), 0);
	h_sleep_ms(200);
	cr_assert_gt(atomic_load(&x.bg_ok), 0, "the well-behaved client is not working: %s",
		     x.bg_error);

	case_truncated_header(&x);
	case_bad_length(&x, 8, "messageLength 8");
	case_bad_length(&x, 60000000, "messageLength 60,000,000");
	case_bad_length(&x, -1, "messageLength -1");
	case_length_longer_than_sent(&x);
	case_length_shorter_than_body(&x);
	case_invalid_bson(&x);
	case_unknown_opcode(&x, 9999, "9999", "unknown opcode 9999");
	case_compressed_garbage(&x);
	case_legacy(&x, H_WIRE_OP_INSERT, "OP_INSERT");
	case_legacy(&x, H_WIRE_OP_GET_MORE, "OP_GET_MORE");
	case_op_query_not_handshake(&x);
	case_op_query_ismaster(&x);
	case_bad_section_kind(&x);
	case_missing_body(&x);
	case_two_bodies(&x);
	case_checksum(&x);
	case_unknown_required_flag(&x);
	case_half_message_stall(&x);
	case_never_reads(&x);
	case_disconnect_in_flight(&x);
	case_connection_flood(&x);

	/* Still alive, still answering, and nobody else noticed. */
	proxy_assert_alive(x.p, "after the battery");
	fd = raw_connect(x.p);
	cr_assert(fd >= 0);
	cr_assert(raw_ping_ok(fd, 5000), "the proxy no longer answers a ping");
	close(fd);
	ok_before = atomic_load(&x.bg_ok);
	h_sleep_ms(100);
	atomic_store(&x.bg_stop, true);
	pthread_join(x.bg, NULL);
	cr_log_info("the well-behaved client ran %d finds during the battery, %d failed",
		    atomic_load(&x.bg_ok), atomic_load(&x.bg_failed));
	cr_assert_gt(atomic_load(&x.bg_ok), ok_before, "the well-behaved client stalled");
	cr_assert_eq(atomic_load(&x.bg_failed), 0,
		     "the well-behaved client saw %d failures during the battery; first: %s",
		     atomic_load(&x.bg_failed), x.bg_error);
	{
		mongoc_client_t *c = h_proxy_client(x.p, "itest-badinput-cleanup");

		h_drop_db(c, x.db);
		mongoc_client_destroy(c);
	}
	pthread_mutex_destroy(&x.mu);
	proxy_stop(x.p);
}
