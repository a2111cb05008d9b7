/*
 * test_cursor.c — the cursor table (proxy/cursor_table.h) and cursor
 * ownership (proxy/cursor.h) without an event loop.
 *
 * The table: record / owner / forget, namespaces keep equal ids apart, a
 * reply without ns matches any namespace, an id handed out again moves to
 * its new owner, growth past many entries, a closing owner's entries leave.
 * Replies: only the top-level cursor {id, ns} counts (listCollections'
 * "db.$cmd.listCollections" like any other). Admission: a client's getMore
 * or killCursors passes only for its own cursors; foreign, unknown,
 * duplicated or mistyped ids are answered locally. The clients here are
 * placeholders in state CL_JUSTFREE, so answers are dropped, not sent.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/client.h"
#include "proxy/client_hooks.h"
#include "proxy/cursor.h"
#include "proxy/cursor_table.h"
#include "core/request.h"
#include "core/stats.h"
#include "core/wire.h"

static struct pool *const POOL = (struct pool *)0x1;

Test(cursor, record_owner_forget)
{
	cursor_table_record(7, POOL, 42, "db.c");
	cr_assert_eq(cursor_table_owner(42, "db.c"), 7);
	cr_assert_eq(cursor_table_owner(42, "db.d"), 0, "another namespace");
	cr_assert_eq(cursor_table_owner(43, "db.c"), 0, "another id");
	cr_assert_eq(cursor_open_count(), 1);
	cursor_table_forget(8, 42, "db.c"); /* not the owner: no effect */
	cr_assert_eq(cursor_table_owner(42, "db.c"), 7);
	cursor_table_forget(7, 42, "db.c");
	cr_assert_eq(cursor_table_owner(42, "db.c"), 0);
	cr_assert_eq(cursor_open_count(), 0);
}

Test(cursor, same_id_in_two_namespaces)
{
	cursor_table_record(1, POOL, 5, "db.a");
	cursor_table_record(2, POOL, 5, "db.b");
	cr_assert_eq(cursor_table_owner(5, "db.a"), 1);
	cr_assert_eq(cursor_table_owner(5, "db.b"), 2);
	cr_assert_eq(cursor_open_count(), 2);
}

Test(cursor, reply_without_ns_matches_any_namespace)
{
	cursor_table_record(3, POOL, 9, "");
	cr_assert_eq(cursor_table_owner(9, "db.x"), 3);
	cr_assert_eq(cursor_table_owner(9, "other.y"), 3);
	cursor_table_forget(3, 9, "db.x");
	cr_assert_eq(cursor_open_count(), 0);
}

Test(cursor, id_handed_out_again_moves)
{
	cursor_table_record(1, POOL, 77, "db.c");
	cursor_table_record(2, POOL, 77, "db.c");
	cr_assert_eq(cursor_table_owner(77, "db.c"), 2);
	cr_assert_eq(cursor_open_count(), 1);
	cursor_client_closed(1); /* owns nothing any more */
	cr_assert_eq(cursor_open_count(), 1);
	cursor_client_closed(2);
	cr_assert_eq(cursor_open_count(), 0);
}

Test(cursor, many_entries_and_owners)
{
	for (int64_t i = 1; i <= 20000; i++)
		cursor_table_record((uint64_t)(i % 50) + 1, POOL, i, i % 2 ? "db.odd" : "db.even");
	cr_assert_eq(cursor_open_count(), 20000);
	for (int64_t i = 1; i <= 20000; i++)
		cr_assert_eq(cursor_table_owner(i, i % 2 ? "db.odd" : "db.even"),
			     (uint64_t)(i % 50) + 1, "id %lld", (long long)i);
	cursor_client_closed(1); /* ids ≡ 0 mod 50 */
	cr_assert_eq(cursor_open_count(), 20000 - 400);
	cr_assert_eq(cursor_table_owner(50, "db.even"), 0);
	cr_assert_eq(cursor_table_owner(51, "db.odd"), 2);
	for (uint64_t o = 2; o <= 50; o++)
		cursor_client_closed(o);
	cr_assert_eq(cursor_open_count(), 0);
}

Test(cursor, reply_cursor_top_level_only)
{
	bson_t *r = BCON_NEW("cursor", "{", "firstBatch", "[", "]", "id", BCON_INT64(12), "ns",
			     BCON_UTF8("db.$cmd.listCollections"), "}", "ok", BCON_DOUBLE(1));
	bson_t *nested = BCON_NEW("result", "{", "cursor", "{", "id", BCON_INT64(5), "ns",
				  BCON_UTF8("db.c"), "}", "}", "ok", BCON_DOUBLE(1));
	bson_t *no_ns = BCON_NEW("cursor", "{", "id", BCON_INT32(3), "}");
	bson_t *bad_id =
	    BCON_NEW("cursor", "{", "id", BCON_UTF8("12"), "ns", BCON_UTF8("db.c"), "}");
	int64_t id;
	const char *ns;

	cr_assert(cursor_reply_cursor(r, &id, &ns));
	cr_assert_eq(id, 12);
	cr_assert_str_eq(ns, "db.$cmd.listCollections");
	cr_assert(!cursor_reply_cursor(nested, &id, &ns), "a nested cursor is not the reply's");
	cr_assert(cursor_reply_cursor(no_ns, &id, &ns));
	cr_assert(id == 3 && ns == NULL);
	cr_assert(!cursor_reply_cursor(bad_id, &id, &ns));
	bson_destroy(r);
	bson_destroy(nested);
	bson_destroy(no_ns);
	bson_destroy(bad_id);
}

/* ---- admission and replies through real requests --------------------- */

static struct client *fake_client(uint64_t id)
{
	struct client *c = calloc(1, sizeof(*c));

	client_hooks_install(); /* a request's cursor note is freed through it */
	c->id = id;
	c->state = CL_JUSTFREE; /* answers are dropped by client_send */
	request_owner_init(&c->owner, id, &client_owner_ops);
	return c;
}

/* In place: a static bson_t must not be copied (it points into itself). */
static void msg_of(struct wire_msg *m, const bson_t *body)
{
	memset(m, 0, sizeof(*m));
	cr_assert(bson_init_static(&m->body, bson_get_data(body), body->len));
}

/* cursor_admit on a fresh request; *out gets the request when it was
 * forwarded (caller frees), NULL when it was answered. */
static bool admit(struct client *c, const char *cmd, bson_t *body, struct request **out)
{
	struct request *req = client_request_new(c);
	struct wire_msg m;
	bool taken;

	msg_of(&m, body);
	snprintf(req->cmd, sizeof(req->cmd), "%s", cmd);
	taken = cursor_admit(req, &m);
	*out = taken ? NULL : req;
	bson_destroy(body);
	return taken;
}

static bson_t *getmore_cmd(int64_t id, const char *coll)
{
	return BCON_NEW("getMore", BCON_INT64(id), "collection", BCON_UTF8(coll), "$db",
			BCON_UTF8("db"));
}

Test(cursor, getmore_only_for_the_owner)
{
	struct client *a = fake_client(1), *b = fake_client(2);
	struct request *req;
	uint64_t refusals = stats.cursor_refusals;

	cursor_table_record(1, POOL, 100, "db.c");
	cr_assert(!admit(a, "getMore", getmore_cmd(100, "c"), &req), "the owner's getMore");
	request_free(req);
	cr_assert(admit(b, "getMore", getmore_cmd(100, "c"), &req), "another client's");
	cr_assert(admit(a, "getMore", getmore_cmd(101, "c"), &req), "an unknown id");
	cr_assert(admit(a, "getMore", getmore_cmd(100, "d"), &req), "another namespace");
	cr_assert(admit(b, "getMore",
			BCON_NEW("getMore", BCON_INT32(100), "collection", BCON_UTF8("c"), "$db",
				 BCON_UTF8("db")),
			&req),
		  "int32 id");
	cr_assert(admit(b, "getMore",
			BCON_NEW("getMore", BCON_DOUBLE(100.0), "collection", BCON_UTF8("c"), "$db",
				 BCON_UTF8("db")),
			&req),
		  "double id");
	cr_assert(admit(b, "getmore",
			BCON_NEW("getmore", BCON_INT64(100), "collection", BCON_UTF8("c"), "$db",
				 BCON_UTF8("db")),
			&req),
		  "lowercase getmore");
	cr_assert_eq(stats.cursor_refusals - refusals, 6);
	cr_assert(admit(a, "getMore",
			BCON_NEW("getMore", BCON_INT64(100), "collection", BCON_UTF8("c"),
				 "getMore", BCON_INT64(100), "$db", BCON_UTF8("db")),
			&req),
		  "duplicate field");
	cr_assert(admit(a, "getMore",
			BCON_NEW("getMore", BCON_INT64(100), "collection", BCON_UTF8("c"),
				 "GETMORE", BCON_INT64(100), "$db", BCON_UTF8("db")),
			&req),
		  "duplicate field in another case");
	cr_assert(admit(a, "getMore",
			BCON_NEW("getMore", BCON_UTF8("100"), "collection", BCON_UTF8("c"), "$db",
				 BCON_UTF8("db")),
			&req),
		  "string id");
	cr_assert(
	    admit(a, "getMore", BCON_NEW("getMore", BCON_INT64(100), "$db", BCON_UTF8("db")), &req),
	    "no collection");
	cr_assert_eq(cursor_table_owner(100, "db.c"), 1, "refusals change nothing");
	free(a);
	free(b);
}

Test(cursor, killcursors_all_foreign_answered_here)
{
	struct client *a = fake_client(1), *b = fake_client(2);
	struct request *req;

	cursor_table_record(1, POOL, 100, "db.c");
	cr_assert(admit(b, "killCursors",
			BCON_NEW("killCursors", BCON_UTF8("c"), "cursors", "[", BCON_INT64(100),
				 BCON_INT64(555), "]", "$db", BCON_UTF8("db")),
			&req));
	cr_assert_eq(cursor_table_owner(100, "db.c"), 1);
	cr_assert(!admit(a, "killCursors",
			 BCON_NEW("killCursors", BCON_UTF8("c"), "cursors", "[", BCON_INT64(100),
				  "]", "$db", BCON_UTF8("db")),
			 &req),
		  "the owner's own killCursors goes to the backend");
	request_free(req);
	cr_assert(admit(a, "killCursors",
			BCON_NEW("killCursors", BCON_UTF8("c"), "cursors", "[", BCON_UTF8("x"), "]",
				 "$db", BCON_UTF8("db")),
			&req),
		  "mistyped id");
	free(a);
	free(b);
}

/* Replies feed the table: a find opens, the owner's getMore to id 0 and
 * its killCursors close; a reply for a client gone is never recorded. */
Test(cursor, replies_open_and_close)
{
	struct client *a = fake_client(1);
	bson_t *find_reply =
	    BCON_NEW("cursor", "{", "firstBatch", "[", "]", "id", BCON_INT64(9), "ns",
		     BCON_UTF8("db.$cmd.listIndexes"), "}", "ok", BCON_DOUBLE(1));
	bson_t *done = BCON_NEW("cursor", "{", "nextBatch", "[", "]", "id", BCON_INT64(0), "ns",
				BCON_UTF8("db.$cmd.listIndexes"), "}", "ok", BCON_DOUBLE(1));
	bson_t *killed = BCON_NEW("cursorsKilled", "[", BCON_INT64(9), "]", "ok", BCON_DOUBLE(1));
	struct request *req = client_request_new(a);
	struct wire_msg m;

	snprintf(req->cmd, sizeof(req->cmd), "listIndexes");
	msg_of(&m, find_reply);
	cr_assert(!cursor_on_reply(req, &m));
	request_free(req);
	cr_assert_eq(cursor_table_owner(9, "db.$cmd.listIndexes"), 1);

	cr_assert(!admit(a, "getMore", getmore_cmd(9, "$cmd.listIndexes"), &req));
	msg_of(&m, done);
	cr_assert(!cursor_on_reply(req, &m));
	request_free(req);
	cr_assert_eq(cursor_open_count(), 0, "exhausted by its getMore");

	cursor_table_record(1, POOL, 9, "db.$cmd.listIndexes");
	cr_assert(!admit(a, "killCursors",
			 BCON_NEW("killCursors", BCON_UTF8("$cmd.listIndexes"), "cursors", "[",
				  BCON_INT64(9), "]", "$db", BCON_UTF8("db")),
			 &req));
	msg_of(&m, killed);
	cr_assert(!cursor_on_reply(req, &m));
	request_free(req);
	cr_assert_eq(cursor_open_count(), 0, "killed by its owner");

	req = client_request_new(NULL); /* its client is gone */
	msg_of(&m, find_reply);
	cr_assert(!cursor_on_reply(req, &m));
	request_free(req);
	cr_assert_eq(cursor_open_count(), 0, "no owner to record");
	bson_destroy(find_reply);
	bson_destroy(done);
	bson_destroy(killed);
	free(a);
}
