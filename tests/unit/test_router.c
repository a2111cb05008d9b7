/*
 * test_router.c — command classification (proxy/router.h).
 *
 * Which commands the proxy answers itself (handshake, ping, its stats), which
 * it refuses (authentication, per-connection state, no $db), which it
 * forwards, and for forwarded ones the flags that decide pinning: cursor
 * operations, transactions, retryable writes, batchable finds.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/router.h"

/* Classifies {<cmd>: 1, $db: "test"} and checks it succeeds. */
static struct route_info classify_cmd(const char *cmd)
{
	bson_t *body = BCON_NEW(cmd, BCON_INT32(1), "$db", BCON_UTF8("test"));
	struct route_info ri;

	cr_assert(router_classify(body, &ri), "%s: %s", cmd,
		  ri.refuse_msg ? ri.refuse_msg : "refused");
	cr_assert_str_eq(ri.cmd, cmd);
	bson_destroy(body);
	return ri;
}

static struct route_info classify_doc(bson_t *body, bool expect_ok)
{
	struct route_info ri;
	bool ok = router_classify(body, &ri);

	cr_assert_eq(ok, expect_ok, "router_classify returned %d (%s)", ok,
		     ri.refuse_msg ? ri.refuse_msg : "");
	bson_destroy(body);
	return ri;
}

Test(router, handshake_commands_answered_locally)
{
	static const char *const cmds[] = {"hello", "isMaster", "ismaster"};

	for (size_t i = 0; i < 3; i++)
		cr_assert_eq(classify_cmd(cmds[i]).route, ROUTE_HELLO, "%s", cmds[i]);
}

Test(router, ping_and_stats_answered_locally)
{
	cr_assert_eq(classify_cmd("ping").route, ROUTE_PING);
	cr_assert_eq(classify_cmd("mongoplexStats").route, ROUTE_STATS);
}

Test(router, console_control_commands_answered_locally)
{
	static const char *const cmds[] = {"mongoplexPause", "mongoplexResume",
					   "mongoplexReconnect", "mongoplexKill",
					   "mongoplexReload"};

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		cr_assert_eq(classify_cmd(cmds[i]).route, ROUTE_ADMIN, "%s", cmds[i]);
	/* every mongoplex* name is the proxy's (an unknown one gets CommandNotFound
	 * from admin_command), never forwarded to the backend */
	cr_assert_eq(classify_cmd("mongoplexPauseX").route, ROUTE_ADMIN);
	cr_assert_eq(classify_cmd("mongoplex").route, ROUTE_ADMIN);
}

Test(router, authentication_commands)
{
	static const char *const cmds[] = {"saslStart", "saslContinue", "authenticate", "logout",
					   "getnonce"};

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		cr_assert_eq(classify_cmd(cmds[i]).route, ROUTE_AUTH, "%s", cmds[i]);
}

Test(router, ordinary_commands_forwarded)
{
	static const char *const cmds[] = {"find",	    "insert", "update",	  "delete",
					   "aggregate",	    "count",  "distinct", "listCollections",
					   "createIndexes", "helloX", "pingpong"};

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		struct route_info ri = classify_cmd(cmds[i]);

		cr_assert_eq(ri.route, ROUTE_FORWARD, "%s", cmds[i]);
		cr_assert_not(ri.cursor_op, "%s", cmds[i]);
		cr_assert_not(ri.in_txn, "%s", cmds[i]);
		cr_assert_not(ri.retryable_write, "%s", cmds[i]);
		cr_assert_eq(ri.is_find, strcmp(cmds[i], "find") == 0, "%s", cmds[i]);
		cr_assert_null(ri.refuse_msg);
	}
}

Test(router, db_points_into_the_body)
{
	bson_t *body = BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "$db", BCON_UTF8("not this"),
				"}", "$db", BCON_UTF8("shop"));
	struct route_info ri;

	cr_assert(router_classify(body, &ri));
	cr_assert_str_eq(ri.db, "shop", "only the top-level $db counts");
	cr_assert_geq((const uint8_t *)ri.db, bson_get_data(body));
	cr_assert_lt((const uint8_t *)ri.db, bson_get_data(body) + body->len);
	bson_destroy(body);
}

Test(router, cursor_operations)
{
	struct route_info ri;

	ri = classify_doc(BCON_NEW("getMore", BCON_INT64(12345), "collection", BCON_UTF8("c"),
				   "$db", BCON_UTF8("test")),
			  true);
	cr_assert_eq(ri.route, ROUTE_FORWARD);
	cr_assert(ri.cursor_op);
	cr_assert_not(ri.is_find);
	ri = classify_doc(BCON_NEW("killCursors", BCON_UTF8("c"), "cursors", "[", BCON_INT64(12345),
				   "]", "$db", BCON_UTF8("test")),
			  true);
	cr_assert_eq(ri.route, ROUTE_FORWARD);
	cr_assert(ri.cursor_op);
}

Test(router, transaction_pins)
{
	struct route_info ri;

	ri = classify_doc(BCON_NEW("insert", BCON_UTF8("c"), "lsid", "{", "id", BCON_INT32(1), "}",
				   "txnNumber", BCON_INT64(3), "startTransaction", BCON_BOOL(true),
				   "autocommit", BCON_BOOL(false), "$db", BCON_UTF8("test")),
			  true);
	cr_assert(ri.in_txn);
	cr_assert_not(ri.retryable_write);
	cr_assert_eq(ri.route, ROUTE_FORWARD);

	/* A find inside a transaction is still a find, but in_txn keeps it off the batcher. */
	ri = classify_doc(BCON_NEW("find", BCON_UTF8("c"), "txnNumber", BCON_INT64(3), "autocommit",
				   BCON_BOOL(false), "$db", BCON_UTF8("test")),
			  true);
	cr_assert(ri.in_txn);
	cr_assert(ri.is_find);
}

Test(router, txn_number_alone_is_a_retryable_write)
{
	struct route_info ri;

	ri = classify_doc(BCON_NEW("update", BCON_UTF8("c"), "txnNumber", BCON_INT64(9), "$db",
				   BCON_UTF8("test")),
			  true);
	cr_assert(ri.retryable_write);
	cr_assert_not(ri.in_txn);

	/* autocommit:false without txnNumber is neither. */
	ri = classify_doc(BCON_NEW("update", BCON_UTF8("c"), "autocommit", BCON_BOOL(false), "$db",
				   BCON_UTF8("test")),
			  true);
	cr_assert_not(ri.retryable_write);
	cr_assert_not(ri.in_txn);
}

Test(router, missing_db_refused)
{
	struct route_info ri;

	ri = classify_doc(BCON_NEW("find", BCON_UTF8("c")), false);
	cr_assert_eq(ri.route, ROUTE_REFUSE);
	cr_assert_not_null(ri.refuse_msg);
	cr_assert_not_null(strstr(ri.refuse_msg, "$db"), "%s", ri.refuse_msg);

	/* Even the handshake needs $db over OP_MSG. */
	ri = classify_doc(BCON_NEW("hello", BCON_INT32(1)), false);
	cr_assert_eq(ri.route, ROUTE_REFUSE);

	ri = classify_doc(BCON_NEW("ping", BCON_INT32(1), "$db", BCON_INT32(1)), false);
	cr_assert_not_null(strstr(ri.refuse_msg, "$db"), "a non-string $db is no $db");
}

Test(router, empty_command_refused)
{
	struct route_info ri;

	ri = classify_doc(bson_new(), false);
	cr_assert_eq(ri.route, ROUTE_REFUSE);
	cr_assert_not_null(ri.refuse_msg);
	cr_assert_not_null(strstr(ri.refuse_msg, "empty"), "%s", ri.refuse_msg);
}

Test(router, exhaust_refused_with_reason)
{
	struct route_info ri = classify_cmd("exhaust");

	cr_assert_eq(ri.route, ROUTE_REFUSE);
	cr_assert_not_null(ri.refuse_msg);
	cr_assert_not_null(strstr(ri.refuse_msg, "not supported"), "%s", ri.refuse_msg);
}

Test(router, long_command_name_truncated_safely)
{
	char name[200];
	struct route_info ri;

	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	ri = classify_doc(BCON_NEW(name, BCON_INT32(1), "$db", BCON_UTF8("test")), true);
	cr_assert_eq(strlen(ri.cmd), sizeof(ri.cmd) - 1);
	cr_assert_eq(ri.route, ROUTE_FORWARD);
}

/* ---- the session fields (core/session.h), parsed once here ---- */

static const uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* lsid = {id: UUID}. */
static void lsid_doc(bson_t *lsid)
{
	bson_init(lsid);
	bson_append_binary(lsid, "id", -1, BSON_SUBTYPE_UUID, uuid, 16);
}

Test(router_session, driver_shape_parsed_once)
{
	bson_t body = BSON_INITIALIZER, lsid, rp;
	struct route_info ri;
	const struct req_session *s = &ri.session;

	lsid_doc(&lsid);
	bson_init(&rp);
	BSON_APPEND_UTF8(&rp, "mode", "secondary");
	BSON_APPEND_UTF8(&body, "insert", "c");
	BSON_APPEND_DOCUMENT(&body, "lsid", &lsid);
	BSON_APPEND_INT64(&body, "txnNumber", 7);
	BSON_APPEND_BOOL(&body, "startTransaction", true);
	BSON_APPEND_BOOL(&body, "autocommit", false);
	BSON_APPEND_DOCUMENT(&body, "$readPreference", &rp);
	BSON_APPEND_UTF8(&body, "$db", "test");
	cr_assert(router_classify(&body, &ri));
	cr_assert(s->has_lsid && s->has_lsid_uuid);
	cr_assert_eq(memcmp(s->lsid_uuid, uuid, 16), 0);
	cr_assert_eq(s->lsid_len, lsid.len);
	cr_assert_eq(memcmp(s->lsid_doc, bson_get_data(&lsid), lsid.len), 0);
	cr_assert(s->has_txn && s->txn_numeric);
	cr_assert_eq(s->txn_number, 7);
	cr_assert(s->start_txn && s->autocommit_false);
	cr_assert(ri.in_txn && !ri.retryable_write);
	cr_assert_eq(s->read_pref_len, rp.len);
	cr_assert_eq(memcmp(s->read_pref_doc, bson_get_data(&rp), rp.len), 0);
	bson_destroy(&rp);
	bson_destroy(&lsid);
	bson_destroy(&body);
}

Test(router_session, plain_command_has_none)
{
	bson_t *body =
	    BCON_NEW("find", BCON_UTF8("c"), "limit", BCON_INT32(1), "singleBatch", BCON_BOOL(true),
		     "sort", "{", "a", BCON_INT32(1), "}", "$db", BCON_UTF8("test"));
	struct route_info ri;

	cr_assert(router_classify(body, &ri));
	cr_assert(!ri.session.has_lsid && !ri.session.has_txn && !ri.session.start_txn);
	cr_assert(!ri.session.autocommit_false && ri.session.read_pref_doc == NULL);
	bson_destroy(body);
}

Test(router_session, lsid_not_a_document)
{
	bson_t *body = BCON_NEW("find", BCON_UTF8("c"), "lsid", BCON_UTF8("x"), "$readPreference",
				"[", "]", "$db", BCON_UTF8("test"));
	struct route_info ri;

	cr_assert(router_classify(body, &ri));
	cr_assert(!ri.session.has_lsid && !ri.session.has_lsid_uuid);
	cr_assert_null(ri.session.read_pref_doc, "an array is no $readPreference document");
	bson_destroy(body);
}

Test(router_session, lsid_id_not_a_uuid)
{
	static const uint8_t short_id[8] = {1};
	bson_t lsid;
	struct route_info ri;
	/* subtype 0 of 16 bytes, subtype 4 of 8 bytes, an int, no id at all */
	for (int shape = 0; shape < 4; shape++) {
		bson_t body = BSON_INITIALIZER;

		bson_init(&lsid);
		if (shape == 0)
			bson_append_binary(&lsid, "id", -1, BSON_SUBTYPE_BINARY, uuid, 16);
		else if (shape == 1)
			bson_append_binary(&lsid, "id", -1, BSON_SUBTYPE_UUID, short_id, 8);
		else if (shape == 2)
			BSON_APPEND_INT32(&lsid, "id", 1);
		else
			BSON_APPEND_INT32(&lsid, "uid", 1);
		BSON_APPEND_UTF8(&body, "find", "c");
		BSON_APPEND_DOCUMENT(&body, "lsid", &lsid);
		BSON_APPEND_INT64(&body, "txnNumber", 1); /* the UUID is read with one */
		BSON_APPEND_UTF8(&body, "$db", "test");
		cr_assert(router_classify(&body, &ri));
		cr_assert(ri.session.has_lsid, "shape %d: still a document", shape);
		cr_assert(!ri.session.has_lsid_uuid, "shape %d: no UUID", shape);
		bson_destroy(&lsid);
		bson_destroy(&body);
	}
}

Test(router_session, lsid_uuid_read_with_a_txn_number_only)
{
	bson_t body = BSON_INITIALIZER, lsid;
	struct route_info ri;

	lsid_doc(&lsid);
	BSON_APPEND_UTF8(&body, "find", "c");
	BSON_APPEND_DOCUMENT(&body, "lsid", &lsid);
	BSON_APPEND_UTF8(&body, "$db", "test");
	cr_assert(router_classify(&body, &ri));
	cr_assert(ri.session.has_lsid && !ri.session.has_lsid_uuid,
		  "no transaction, no routing by session: its id is not read");
	cr_assert_eq(ri.session.lsid_len, lsid.len);
	bson_destroy(&lsid);
	bson_destroy(&body);
}

Test(router_session, txn_number_not_a_number)
{
	bson_t *body = BCON_NEW("insert", BCON_UTF8("c"), "txnNumber", BCON_UTF8("7"), "$db",
				BCON_UTF8("test"));
	struct route_info ri;

	cr_assert(router_classify(body, &ri));
	cr_assert(ri.session.has_txn && !ri.session.txn_numeric);
	cr_assert(ri.retryable_write, "classified by presence, as before");
	bson_destroy(body);
	body = BCON_NEW("insert", BCON_UTF8("c"), "txnNumber", BCON_DOUBLE(1e300), "$db",
			BCON_UTF8("test"));
	cr_assert(router_classify(body, &ri));
	cr_assert(!ri.session.txn_numeric, "a double outside int64 is no number");
	bson_destroy(body);
	body = BCON_NEW("insert", BCON_UTF8("c"), "txnNumber", BCON_DOUBLE(5.0), "$db",
			BCON_UTF8("test"));
	cr_assert(router_classify(body, &ri));
	cr_assert(ri.session.txn_numeric && ri.session.txn_number == 5);
	bson_destroy(body);
	body = BCON_NEW("insert", BCON_UTF8("c"), "txnNumber", BCON_INT32(-3), "$db",
			BCON_UTF8("test"));
	cr_assert(router_classify(body, &ri));
	cr_assert(ri.session.txn_numeric && ri.session.txn_number == -3);
	bson_destroy(body);
}

Test(router_session, duplicate_keys_first_counts)
{
	static const uint8_t other[16] = {9};
	bson_t body = BSON_INITIALIZER, lsid, lsid2;
	struct route_info ri;

	lsid_doc(&lsid);
	bson_init(&lsid2);
	bson_append_binary(&lsid2, "id", -1, BSON_SUBTYPE_UUID, other, 16);
	BSON_APPEND_UTF8(&body, "insert", "c");
	BSON_APPEND_DOCUMENT(&body, "lsid", &lsid);
	BSON_APPEND_DOCUMENT(&body, "lsid", &lsid2);
	BSON_APPEND_INT64(&body, "txnNumber", 1);
	BSON_APPEND_INT64(&body, "txnNumber", 2);
	BSON_APPEND_BOOL(&body, "startTransaction", false);
	BSON_APPEND_BOOL(&body, "startTransaction", true);
	BSON_APPEND_BOOL(&body, "autocommit", false);
	BSON_APPEND_BOOL(&body, "autocommit", true);
	BSON_APPEND_UTF8(&body, "$db", "test");
	cr_assert(router_classify(&body, &ri));
	cr_assert_eq(memcmp(ri.session.lsid_uuid, uuid, 16), 0);
	cr_assert_eq(ri.session.txn_number, 1);
	cr_assert(!ri.session.start_txn);
	cr_assert(ri.session.autocommit_false && ri.in_txn);
	bson_destroy(&lsid);
	bson_destroy(&lsid2);
	bson_destroy(&body);
}

Test(router_session, start_transaction_truthiness)
{
	bson_t *body = BCON_NEW("insert", BCON_UTF8("c"), "startTransaction", BCON_INT32(0), "$db",
				BCON_UTF8("test"));
	struct route_info ri;

	cr_assert(router_classify(body, &ri));
	cr_assert(!ri.session.start_txn);
	bson_destroy(body);
	body = BCON_NEW("insert", BCON_UTF8("c"), "startTransaction", BCON_UTF8("yes"), "$db",
			BCON_UTF8("test"));
	cr_assert(router_classify(body, &ri));
	cr_assert(ri.session.start_txn, "as bson_iter_as_bool: a string is true");
	bson_destroy(body);
}
