/*
 * test_errors.c — the errors the proxy itself returns, as a client reads them
 * (core/errors.h): every errmsg starts with "mongoplex: " (the framer's
 * messages too), and the codeName is mongod's for its code (getMore's
 * duplicated or missing fields: 40413 IDLDuplicateField, 40414
 * IDLFailedToParse). Raw sockets, so the exact reply bytes are checked.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define REPLY_TIMEOUT_MS 5000

/* Sends the OP_MSG built in b and checks its error reply. */
static void expect_error(int fd, struct h_buf *b, const char *what, int code, const char *name)
{
	struct raw_reply r;
	uint8_t *msg = NULL;
	size_t len = 0;
	enum raw_status st;
	const char *errmsg, *cn;

	cr_assert(raw_send(fd, b->data, b->len), "%s: send failed", what);
	st = raw_recv_msg(fd, &msg, &len, REPLY_TIMEOUT_MS);
	cr_assert_eq(st, RAW_OK, "%s: no reply (%s)", what, raw_status_name(st));
	cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc, "%s: unparseable reply", what);
	errmsg = h_get_str(&r.doc, "errmsg");
	cn = h_get_str(&r.doc, "codeName");
	cr_expect_eq(h_get_int(&r.doc, "code", 0), code, "%s: code %d, want %d", what,
		     (int)h_get_int(&r.doc, "code", 0), code);
	cr_expect(cn != NULL && strcmp(cn, name) == 0, "%s: codeName %s, want %s", what,
		  cn ? cn : "(none)", name);
	cr_expect(errmsg != NULL && strncmp(errmsg, "mongoplex: ", 11) == 0 &&
		      strncmp(errmsg + 11, "mongoplex: ", 11) != 0,
		  "%s: errmsg does not start with one \"mongoplex: \": %s", what,
		  errmsg ? errmsg : "(none)");
	free(msg);
}

Test(errors, framer_errors_carry_the_prefix, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	int fd = raw_connect(p);
	bson_t *body = BCON_NEW("ping", BCON_INT32(1), "$db", "admin");
	struct h_buf b;

	cr_assert_geq(fd, 0);
	hb_init(&b);
	h_build_msg(&b, 11, 1u << 4, body); /* an unknown required flag bit */
	expect_error(fd, &b, "unknown flag bit", 2, "BadValue");
	hb_free(&b);

	hb_init(&b);
	h_build_msg(&b, 12, H_MSG_CHECKSUM, body);
	b.data[b.len - 1] ^= 0xff; /* checksum mismatch */
	expect_error(fd, &b, "checksum mismatch", 2, "BadValue");
	hb_free(&b);

	cr_expect(raw_ping_ok(fd, REPLY_TIMEOUT_MS), "the connection stays usable");
	bson_destroy(body);
	close(fd);
	proxy_stop(p);
}

Test(errors, getmore_codenames_are_mongods, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	int fd = raw_connect(p);
	bson_t *missing = BCON_NEW("getMore", BCON_INT64(42), "$db", "test");
	bson_t dup = BSON_INITIALIZER;
	struct h_buf b;

	cr_assert_geq(fd, 0);
	hb_init(&b);
	h_build_msg(&b, 21, 0, missing);
	expect_error(fd, &b, "getMore without collection", 40414, "IDLFailedToParse");
	hb_free(&b);

	BSON_APPEND_INT64(&dup, "getMore", 42);
	BSON_APPEND_UTF8(&dup, "collection", "c");
	BSON_APPEND_UTF8(&dup, "collection", "c");
	BSON_APPEND_UTF8(&dup, "$db", "test");
	hb_init(&b);
	h_build_msg(&b, 22, 0, &dup);
	expect_error(fd, &b, "getMore with a duplicated field", 40413, "IDLDuplicateField");
	hb_free(&b);

	bson_destroy(&dup);
	bson_destroy(missing);
	close(fd);
	proxy_stop(p);
}
