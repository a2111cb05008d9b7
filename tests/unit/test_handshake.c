/*
 * test_handshake.c — the handshake in both directions (core/handshake.h).
 *
 * Towards clients: the proxy's hello/isMaster reply must use the key names of
 * the command asked, echo helloOk only when asked, present replica sets and
 * mongos as mongos ("isdbgrid") and standalones as standalones, mirror every
 * limit and wire version from the backend (tested with values no server
 * default has, so nothing hard-coded can pass), and refuse client metadata on
 * a later hello. Towards the backend: parsing each kind of hello reply, the
 * refusals, and the proxy's own hello.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "core/handshake.h"

/* ---- helpers ------------------------------------------------------------- */

/* A backend with limits no real server reports by default. */
static struct backend_info unusual_backend(enum backend_kind kind)
{
	struct backend_info bi = {
	    .known = true,
	    .kind = kind,
	    .min_wire_version = 7,
	    .max_wire_version = 13,
	    .max_bson_object_size = 12345678,
	    .max_message_size_bytes = 30000001,
	    .max_write_batch_size = 1000,
	    .logical_session_timeout_minutes = 17,
	};
	return bi;
}

static bool has(const bson_t *doc, const char *key)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, doc, key);
}

static int64_t int_of(const bson_t *doc, const char *key)
{
	bson_iter_t it;

	cr_assert(bson_iter_init_find(&it, doc, key), "no \"%s\"", key);
	cr_assert(BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it),
		  "\"%s\" is not an integer", key);
	return bson_iter_as_int64(&it);
}

static bool bool_of(const bson_t *doc, const char *key)
{
	bson_iter_t it;

	cr_assert(bson_iter_init_find(&it, doc, key), "no \"%s\"", key);
	cr_assert(BSON_ITER_HOLDS_BOOL(&it), "\"%s\" is not a bool", key);
	return bson_iter_bool(&it);
}

static const char *str_of(const bson_t *doc, const char *key)
{
	bson_iter_t it;

	cr_assert(bson_iter_init_find(&it, doc, key), "no \"%s\"", key);
	cr_assert(BSON_ITER_HOLDS_UTF8(&it), "\"%s\" is not a string", key);
	return bson_iter_utf8(&it, NULL);
}

static double ok_of(const bson_t *doc)
{
	bson_iter_t it;

	cr_assert(bson_iter_init_find(&it, doc, "ok"), "no ok");
	cr_assert(BSON_ITER_HOLDS_NUMBER(&it));
	return bson_iter_as_double(&it);
}

/* The reply to `cmd` sent as command `name` on a connection's first hello. */
static void reply_to(const bson_t *cmd, const char *name, const struct backend_info *bi,
		     bson_t *out)
{
	cr_assert(handshake_client_reply(cmd, name, bi, 77, true, out), "hello refused");
}

/* ---- replies to clients --------------------------------------------------- */

Test(client_reply, hello_uses_is_writable_primary)
{
	struct backend_info bi = unusual_backend(BACKEND_STANDALONE);
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t out;

	reply_to(cmd, "hello", &bi, &out);
	cr_assert(bool_of(&out, "isWritablePrimary"));
	cr_assert_not(has(&out, "ismaster"), "hello replies do not say ismaster");
	cr_assert_eq(ok_of(&out), 1.0);
	bson_destroy(&out);
	bson_destroy(cmd);
}

Test(client_reply, is_master_uses_ismaster)
{
	static const char *const names[] = {"isMaster", "ismaster"};
	struct backend_info bi = unusual_backend(BACKEND_STANDALONE);

	for (size_t i = 0; i < 2; i++) {
		bson_t *cmd = BCON_NEW(names[i], BCON_INT32(1), "$db", BCON_UTF8("admin"));
		bson_t out;

		reply_to(cmd, names[i], &bi, &out);
		cr_assert(bool_of(&out, "ismaster"), "%s", names[i]);
		cr_assert_not(has(&out, "isWritablePrimary"), "%s", names[i]);
		bson_destroy(&out);
		bson_destroy(cmd);
	}
}

Test(client_reply, hello_ok_echoed_only_when_asked)
{
	struct backend_info bi = unusual_backend(BACKEND_STANDALONE);
	bson_t *asked = BCON_NEW("isMaster", BCON_INT32(1), "helloOk", BCON_BOOL(true));
	bson_t *declined = BCON_NEW("isMaster", BCON_INT32(1), "helloOk", BCON_BOOL(false));
	bson_t *silent = BCON_NEW("isMaster", BCON_INT32(1));
	bson_t out;

	reply_to(asked, "isMaster", &bi, &out);
	cr_assert(bool_of(&out, "helloOk"));
	bson_destroy(&out);
	reply_to(declined, "isMaster", &bi, &out);
	cr_assert_not(has(&out, "helloOk"));
	bson_destroy(&out);
	reply_to(silent, "isMaster", &bi, &out);
	cr_assert_not(has(&out, "helloOk"));
	bson_destroy(&out);
	bson_destroy(asked);
	bson_destroy(declined);
	bson_destroy(silent);
}

Test(client_reply, replica_set_and_mongos_presented_as_mongos)
{
	static const enum backend_kind kinds[] = {BACKEND_RS_PRIMARY, BACKEND_MONGOS};
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1));

	for (size_t i = 0; i < 2; i++) {
		struct backend_info bi = unusual_backend(kinds[i]);
		bson_t out;

		reply_to(cmd, "hello", &bi, &out);
		cr_assert_str_eq(str_of(&out, "msg"), "isdbgrid", "%s",
				 handshake_kind_name(kinds[i]));
		cr_assert_not(has(&out, "setName"), "a mongos has no setName");
		cr_assert_not(has(&out, "hosts"), "a mongos lists no hosts");
		bson_destroy(&out);
	}
	bson_destroy(cmd);
}

Test(client_reply, standalone_presented_as_standalone)
{
	struct backend_info bi = unusual_backend(BACKEND_STANDALONE);
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1));
	bson_t out;

	reply_to(cmd, "hello", &bi, &out);
	cr_assert_not(has(&out, "msg"));
	cr_assert_not(has(&out, "setName"));
	bson_destroy(&out);
	bson_destroy(cmd);
}

Test(client_reply, limits_and_versions_mirrored)
{
	struct backend_info bi = unusual_backend(BACKEND_MONGOS);
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1));
	bson_t out;
	struct timeval tv;
	bson_iter_t it;
	int64_t now_ms;

	reply_to(cmd, "hello", &bi, &out);
	cr_assert_eq(int_of(&out, "minWireVersion"), 7);
	cr_assert_eq(int_of(&out, "maxWireVersion"), 13);
	cr_assert_eq(int_of(&out, "maxBsonObjectSize"), 12345678);
	cr_assert_eq(int_of(&out, "maxMessageSizeBytes"), 30000001);
	cr_assert_eq(int_of(&out, "maxWriteBatchSize"), 1000);
	cr_assert_eq(int_of(&out, "logicalSessionTimeoutMinutes"), 17);
	cr_assert_eq(int_of(&out, "connectionId"), 77);
	cr_assert_not(bool_of(&out, "readOnly"));
	cr_assert(bson_iter_init_find(&it, &out, "localTime") && BSON_ITER_HOLDS_DATE_TIME(&it));
	gettimeofday(&tv, NULL);
	now_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	cr_assert(llabs(bson_iter_date_time(&it) - now_ms) < 60000, "localTime is now");
	bson_destroy(&out);

	/* Other values give other replies: nothing above is a constant. */
	bi.max_wire_version = 21;
	bi.max_write_batch_size = 100000;
	reply_to(cmd, "hello", &bi, &out);
	cr_assert_eq(int_of(&out, "maxWireVersion"), 21);
	cr_assert_eq(int_of(&out, "maxWriteBatchSize"), 100000);
	bson_destroy(&out);
	bson_destroy(cmd);
}

Test(client_reply, session_timeout_omitted_without_sessions)
{
	struct backend_info bi = unusual_backend(BACKEND_STANDALONE);
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1));
	bson_t out;

	bi.logical_session_timeout_minutes = -1;
	reply_to(cmd, "hello", &bi, &out);
	cr_assert_not(has(&out, "logicalSessionTimeoutMinutes"));
	bson_destroy(&out);
	bi.logical_session_timeout_minutes = 0;
	reply_to(cmd, "hello", &bi, &out);
	cr_assert_eq(int_of(&out, "logicalSessionTimeoutMinutes"), 0);
	bson_destroy(&out);
	bson_destroy(cmd);
}

Test(client_reply, metadata_only_in_first_hello)
{
	struct backend_info bi = unusual_backend(BACKEND_RS_PRIMARY);
	bson_t *with_meta = BCON_NEW("hello", BCON_INT32(1), "client", "{", "application", "{",
				     "name", BCON_UTF8("app"), "}", "}");
	bson_t *heartbeat = BCON_NEW("hello", BCON_INT32(1));
	bson_t out;

	cr_assert(handshake_client_reply(with_meta, "hello", &bi, 1, true, &out));
	cr_assert(bool_of(&out, "isWritablePrimary"));
	bson_destroy(&out);

	cr_assert_not(handshake_client_reply(with_meta, "hello", &bi, 1, false, &out),
		      "metadata on a later hello must be refused");
	cr_assert_eq(ok_of(&out), 0.0);
	cr_assert_eq(int_of(&out, "code"), 186);
	cr_assert_str_eq(str_of(&out, "codeName"), "ClientMetadataCannotBeMutated");
	cr_assert_not_null(strstr(str_of(&out, "errmsg"), "first hello"));
	bson_destroy(&out);

	cr_assert(handshake_client_reply(heartbeat, "hello", &bi, 1, false, &out),
		  "a later hello without metadata is a heartbeat");
	cr_assert_eq(ok_of(&out), 1.0);
	bson_destroy(&out);
	bson_destroy(with_meta);
	bson_destroy(heartbeat);
}

/* ---- backend hello replies ------------------------------------------------ */

static bool parse_backend(const bson_t *reply, struct backend_info *bi, char *err, size_t n)
{
	err[0] = '\0';
	return handshake_parse_backend(reply, bi, err, n);
}

Test(backend, standalone)
{
	bson_t *reply = BCON_NEW(
	    "ismaster", BCON_BOOL(true), "maxBsonObjectSize", BCON_INT32(12345678),
	    "maxMessageSizeBytes", BCON_INT32(30000001), "maxWriteBatchSize", BCON_INT32(1000),
	    "logicalSessionTimeoutMinutes", BCON_INT32(17), "minWireVersion", BCON_INT32(7),
	    "maxWireVersion", BCON_INT32(13), "ok", BCON_DOUBLE(1.0));
	struct backend_info bi;
	char err[256];

	cr_assert(parse_backend(reply, &bi, err, sizeof(err)), "%s", err);
	cr_assert(bi.known);
	cr_assert_eq(bi.kind, BACKEND_STANDALONE);
	cr_assert_eq(bi.min_wire_version, 7);
	cr_assert_eq(bi.max_wire_version, 13);
	cr_assert_eq(bi.max_bson_object_size, 12345678);
	cr_assert_eq(bi.max_message_size_bytes, 30000001);
	cr_assert_eq(bi.max_write_batch_size, 1000);
	cr_assert_eq(bi.logical_session_timeout_minutes, 17);
	cr_assert_str_eq(bi.set_name, "");
	bson_destroy(reply);
}

Test(backend, replica_set_primary)
{
	bson_t *hello =
	    BCON_NEW("isWritablePrimary", BCON_BOOL(true), "secondary", BCON_BOOL(false), "setName",
		     BCON_UTF8("rs-test"), "maxWireVersion", BCON_INT32(17), "ok", BCON_INT32(1));
	bson_t *legacy = BCON_NEW("ismaster", BCON_BOOL(true), "setName", BCON_UTF8("rs0"),
				  "maxWireVersion", BCON_INT32(8), "ok", BCON_DOUBLE(1.0));
	struct backend_info bi;
	char err[256];

	cr_assert(parse_backend(hello, &bi, err, sizeof(err)), "%s", err);
	cr_assert_eq(bi.kind, BACKEND_RS_PRIMARY);
	cr_assert_str_eq(bi.set_name, "rs-test");
	cr_assert_eq(bi.max_wire_version, 17);
	cr_assert_eq(bi.logical_session_timeout_minutes, -1, "absent means no sessions");
	cr_assert(parse_backend(legacy, &bi, err, sizeof(err)), "%s", err);
	cr_assert_eq(bi.kind, BACKEND_RS_PRIMARY);
	cr_assert_str_eq(bi.set_name, "rs0");
	bson_destroy(hello);
	bson_destroy(legacy);
}

Test(backend, replica_set_secondary)
{
	bson_t *reply =
	    BCON_NEW("isWritablePrimary", BCON_BOOL(false), "secondary", BCON_BOOL(true), "setName",
		     BCON_UTF8("rs0"), "maxWireVersion", BCON_INT32(13), "ok", BCON_DOUBLE(1.0));
	bson_t *ghost = BCON_NEW("ismaster", BCON_BOOL(false), "isreplicaset", BCON_BOOL(true),
				 "maxWireVersion", BCON_INT32(13), "ok", BCON_DOUBLE(1.0));
	struct backend_info bi;
	char err[256];

	cr_assert(parse_backend(reply, &bi, err, sizeof(err)), "%s", err);
	cr_assert_eq(bi.kind, BACKEND_RS_OTHER);
	cr_assert_str_eq(bi.set_name, "rs0");
	cr_assert(parse_backend(ghost, &bi, err, sizeof(err)), "%s", err);
	cr_assert_eq(bi.kind, BACKEND_RS_OTHER, "a member without a config is not standalone");
	bson_destroy(reply);
	bson_destroy(ghost);
}

Test(backend, mongos)
{
	bson_t *reply = BCON_NEW("ismaster", BCON_BOOL(true), "msg", BCON_UTF8("isdbgrid"),
				 "maxWireVersion", BCON_INT32(13), "ok", BCON_DOUBLE(1.0));
	struct backend_info bi;
	char err[256];

	cr_assert(parse_backend(reply, &bi, err, sizeof(err)), "%s", err);
	cr_assert_eq(bi.kind, BACKEND_MONGOS);
	bson_destroy(reply);
}

Test(backend, message_size_capped_at_wire_limit)
{
	bson_t *reply =
	    BCON_NEW("ismaster", BCON_BOOL(true), "maxWireVersion", BCON_INT32(13),
		     "maxMessageSizeBytes", BCON_INT32(64000000), "ok", BCON_DOUBLE(1.0));
	struct backend_info bi;
	char err[256];

	cr_assert(parse_backend(reply, &bi, err, sizeof(err)), "%s", err);
	cr_assert_eq(bi.max_message_size_bytes, 48000000);
	bson_destroy(reply);
}

Test(backend, ok_zero_refused)
{
	bson_t *reply = BCON_NEW("ok", BCON_DOUBLE(0.0), "errmsg", BCON_UTF8("node is recovering"),
				 "code", BCON_INT32(91));
	struct backend_info bi;
	char err[256];

	cr_assert_not(parse_backend(reply, &bi, err, sizeof(err)));
	cr_assert_not(bi.known);
	cr_assert_not_null(strstr(err, "refused hello"), "%s", err);
	cr_assert_not_null(strstr(err, "node is recovering"), "%s", err);
	bson_destroy(reply);
}

Test(backend, old_wire_version_refused)
{
	bson_t *old = BCON_NEW("ismaster", BCON_BOOL(true), "minWireVersion", BCON_INT32(0),
			       "maxWireVersion", BCON_INT32(5), "ok", BCON_DOUBLE(1.0));
	bson_t *missing = BCON_NEW("ismaster", BCON_BOOL(true), "ok", BCON_DOUBLE(1.0));
	bson_t *six = BCON_NEW("ismaster", BCON_BOOL(true), "maxWireVersion", BCON_INT32(6), "ok",
			       BCON_DOUBLE(1.0));
	struct backend_info bi;
	char err[256];

	cr_assert_not(parse_backend(old, &bi, err, sizeof(err)));
	cr_assert_not(bi.known);
	cr_assert_not_null(strstr(err, "maxWireVersion 5"), "%s", err);
	cr_assert_not(parse_backend(missing, &bi, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "maxWireVersion 0"), "%s", err);
	cr_assert(parse_backend(six, &bi, err, sizeof(err)), "6 (MongoDB 3.6) is enough: %s", err);
	bson_destroy(old);
	bson_destroy(missing);
	bson_destroy(six);
}

Test(backend, parsed_info_feeds_client_reply)
{
	bson_t *reply =
	    BCON_NEW("isWritablePrimary", BCON_BOOL(true), "setName", BCON_UTF8("rs0"),
		     "maxWriteBatchSize", BCON_INT32(1000), "minWireVersion", BCON_INT32(0),
		     "maxWireVersion", BCON_INT32(13), "ok", BCON_DOUBLE(1.0));
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1));
	struct backend_info bi;
	char err[256];
	bson_t out;

	cr_assert(parse_backend(reply, &bi, err, sizeof(err)), "%s", err);
	reply_to(cmd, "hello", &bi, &out);
	cr_assert_eq(int_of(&out, "maxWireVersion"), 13);
	cr_assert_eq(int_of(&out, "maxWriteBatchSize"), 1000);
	cr_assert_str_eq(str_of(&out, "msg"), "isdbgrid");
	cr_assert_not(has(&out, "logicalSessionTimeoutMinutes"));
	bson_destroy(&out);
	bson_destroy(cmd);
	bson_destroy(reply);
}

/* ---- the proxy's own hello -------------------------------------------------- */

Test(backend_hello, names_itself_mongoplex)
{
	bson_t cmd;
	bson_iter_t it, sub;

	handshake_backend_hello(&cmd);
	cr_assert(bson_iter_init(&it, &cmd) && bson_iter_next(&it));
	cr_assert(strcmp(bson_iter_key(&it), "isMaster") == 0 ||
		      strcmp(bson_iter_key(&it), "hello") == 0,
		  "command is \"%s\"", bson_iter_key(&it));
	cr_assert(bson_iter_init_find(&it, &cmd, "client"));
	cr_assert(bson_iter_recurse(&it, &sub));
	cr_assert(bson_iter_find_descendant(&sub, "application.name", &it));
	cr_assert_str_eq(bson_iter_utf8(&it, NULL), "mongoplex");
	cr_assert(bson_iter_init_find(&it, &cmd, "client"));
	cr_assert(bson_iter_recurse(&it, &sub));
	cr_assert(bson_iter_find_descendant(&sub, "driver.name", &it));
	cr_assert_str_eq(bson_iter_utf8(&it, NULL), "mongoplex");
	cr_assert_str_eq(str_of(&cmd, "$db"), "admin");
	cr_assert(bool_of(&cmd, "helloOk"));
	bson_destroy(&cmd);
}

Test(backend_hello, kind_names_distinct)
{
	static const enum backend_kind kinds[] = {BACKEND_UNKNOWN, BACKEND_STANDALONE,
						  BACKEND_RS_PRIMARY, BACKEND_RS_OTHER,
						  BACKEND_MONGOS};

	for (size_t i = 0; i < 5; i++)
		for (size_t j = i + 1; j < 5; j++)
			cr_assert_str_neq(handshake_kind_name(kinds[i]),
					  handshake_kind_name(kinds[j]));
	cr_assert_str_eq(handshake_kind_name(BACKEND_MONGOS), "mongos");
}
