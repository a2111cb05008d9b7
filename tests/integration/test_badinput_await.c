/*
 * test_badinput_await.c — the bad-input battery's awaitable-hello cases
 * (suite badinput, so a badinput filter runs them with the battery):
 * bad maxAwaitTimeMS types and values, topologyVersion garbage, one field
 * without the other, a counter from the future, exhaustAllowed on commands
 * that are not hellos. Each case gets mongod's error code (or, for exhaust on
 * a non-hello, one reply without moreToCome), the connection stays usable
 * (a ping answers), and the proxy stays up. Cases use cr_expect so that every
 * broken case is reported.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define EXHAUST_ALLOWED (1u << 16)
#define MORE_TO_COME	(1u << 1)

/* Send {hello: 1, <fields>, $db: admin} (fields: extended JSON without braces). */
static bool send_json(int fd, int32_t id, const char *cmd_json, uint32_t flags)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json((const uint8_t *)cmd_json, -1, &err);
	struct h_buf b;
	bool ok;

	cr_assert(cmd != NULL, "bad test JSON %s: %s", cmd_json, err.message);
	hb_init(&b);
	h_build_msg(&b, id, flags, cmd);
	ok = raw_send(fd, b.data, b.len);
	hb_free(&b);
	bson_destroy(cmd);
	return ok;
}

/* The reply to id, parsed; false (with a reason logged) if none came. */
static bool reply_to(int fd, int32_t id, struct raw_reply *r, uint8_t **msg, const char *name)
{
	size_t len = 0;
	enum raw_status st = raw_recv_msg(fd, msg, &len, 20000);

	if (st != RAW_OK) {
		cr_expect_fail("%s: no reply (%s)", name, raw_status_name(st));
		return false;
	}
	if (!raw_parse_reply(*msg, len, r) || !r->have_doc || r->response_to != id) {
		cr_expect_fail("%s: reply does not parse or answers another request", name);
		return false;
	}
	return true;
}

static char our_oid[25];
static long long our_counter;

static void learn_topology_version(int fd)
{
	bson_t *hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t reply;
	bson_iter_t it;

	cr_assert(raw_command(fd, 1, hello, &reply, 10000), "plain hello");
	cr_assert(bson_iter_init(&it, &reply) &&
		      bson_iter_find_descendant(&it, "topologyVersion.processId", &it) &&
		      BSON_ITER_HOLDS_OID(&it),
		  "the proxy's hello carries no topologyVersion.processId");
	bson_oid_to_string(bson_iter_oid(&it), our_oid);
	our_counter = (long long)h_get_int(&reply, "topologyVersion.counter", -1);
	bson_destroy(&reply);
	bson_destroy(hello);
}

Test(badinput, awaitable_hello_cases, .timeout = 180)
{
	struct proxy *p = proxy_start(NULL);
	int fd = raw_connect(p);
	char future[300], ours_str_counter[300];
	struct {
		const char *name;
		const char *json;
		int code;
	} cases[] = {
	    {"maxAwaitTimeMS without topologyVersion",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"$db\": \"admin\"}", 31368},
	    {"topologyVersion without maxAwaitTimeMS",
	     "{\"hello\": 1, \"topologyVersion\": {\"processId\": {\"$oid\": "
	     "\"000000000000000000000000\"}, \"counter\": {\"$numberLong\": \"0\"}}, \"$db\": "
	     "\"admin\"}",
	     31368},
	    {"maxAwaitTimeMS a string",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": \"100\", \"topologyVersion\": {}, \"$db\": "
	     "\"admin\"}",
	     14},
	    {"maxAwaitTimeMS null",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": null, \"topologyVersion\": {}, \"$db\": "
	     "\"admin\"}",
	     14},
	    {"maxAwaitTimeMS negative",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": -5, \"topologyVersion\": {}, \"$db\": \"admin\"}",
	     31373},
	    {"maxAwaitTimeMS fractional",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 0.5, \"topologyVersion\": {}, \"$db\": \"admin\"}",
	     2},
	    {"maxAwaitTimeMS NaN",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": {\"$numberDouble\": \"NaN\"}, "
	     "\"topologyVersion\": "
	     "{}, \"$db\": \"admin\"}",
	     2},
	    {"topologyVersion a string",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": \"garbage\", \"$db\": "
	     "\"admin\"}",
	     14},
	    {"topologyVersion an array",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": [1, 2], \"$db\": "
	     "\"admin\"}",
	     14},
	    {"topologyVersion empty",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": {}, \"$db\": \"admin\"}",
	     14},
	    {"processId not an ObjectId",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": {\"processId\": \"x\", "
	     "\"counter\": 0}, \"$db\": \"admin\"}",
	     14},
	    {"counter missing",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": {\"processId\": "
	     "{\"$oid\": "
	     "\"000000000000000000000000\"}}, \"$db\": \"admin\"}",
	     14},
	    {"counter negative",
	     "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": {\"processId\": "
	     "{\"$oid\": "
	     "\"000000000000000000000000\"}, \"counter\": -1}, \"$db\": \"admin\"}",
	     31372},
	    {"counter from the future", future, 31382},
	    {"counter a string", ours_str_counter, 14},
	};
	int32_t id = 100;

	cr_assert(fd >= 0);
	learn_topology_version(fd);
	snprintf(
	    future, sizeof(future),
	    "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": {\"processId\": "
	    "{\"$oid\": \"%s\"}, \"counter\": {\"$numberLong\": \"%lld\"}}, \"$db\": \"admin\"}",
	    our_oid, our_counter + 10);
	snprintf(ours_str_counter, sizeof(ours_str_counter),
		 "{\"hello\": 1, \"maxAwaitTimeMS\": 100, \"topologyVersion\": {\"processId\": "
		 "{\"$oid\": \"%s\"}, \"counter\": \"0\"}, \"$db\": \"admin\"}",
		 our_oid);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct raw_reply r;
		uint8_t *msg = NULL;

		id++;
		cr_assert(send_json(fd, id, cases[i].json, 0), "%s: send", cases[i].name);
		if (reply_to(fd, id, &r, &msg, cases[i].name)) {
			cr_expect_eq(h_get_int(&r.doc, "ok", 1), 0, "%s: accepted", cases[i].name);
			cr_expect_eq(h_get_int(&r.doc, "code", 0), cases[i].code,
				     "%s: code %lld, want %d (%s)", cases[i].name,
				     (long long)h_get_int(&r.doc, "code", 0), cases[i].code,
				     h_get_str(&r.doc, "errmsg"));
			cr_log_info("%s: %s", cases[i].name, h_get_str(&r.doc, "errmsg"));
		}
		free(msg);
		cr_expect(raw_ping_ok(fd, 10000), "%s: connection not usable after it",
			  cases[i].name);
	}
	/* The same bad fields with exhaustAllowed: an error, no stream. */
	{
		struct raw_reply r;
		uint8_t *msg = NULL;

		cr_assert(send_json(fd, 300, cases[4].json, EXHAUST_ALLOWED));
		if (reply_to(fd, 300, &r, &msg, "negative maxAwaitTimeMS with exhaustAllowed")) {
			cr_expect_eq(h_get_int(&r.doc, "code", 0), 31373);
			cr_expect_eq(r.flags & MORE_TO_COME, 0, "an error reply with moreToCome");
		}
		free(msg);
		cr_expect(raw_ping_ok(fd, 10000), "usable after exhaust + bad fields");
	}
	/* exhaustAllowed on commands that are not hellos: one reply, no stream. */
	{
		const char *others[] = {"{\"ping\": 1, \"$db\": \"admin\"}",
					"{\"find\": \"mp_await_exhaust\", \"$db\": \"mp_await\"}",
					"{\"hello\": 1, \"$db\": \"admin\"}"};

		for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
			struct raw_reply r;
			uint8_t *msg = NULL, *extra = NULL;
			size_t elen = 0;

			cr_assert(send_json(fd, 400 + (int32_t)i, others[i], EXHAUST_ALLOWED));
			if (reply_to(fd, 400 + (int32_t)i, &r, &msg, others[i])) {
				cr_expect_eq(h_get_int(&r.doc, "ok", 0), 1,
					     "%s with exhaustAllowed: %s", others[i],
					     h_get_str(&r.doc, "errmsg"));
				cr_expect_eq(r.flags & MORE_TO_COME, 0,
					     "%s with exhaustAllowed: moreToCome set", others[i]);
			}
			free(msg);
			cr_expect_eq(raw_recv_msg(fd, &extra, &elen, 500), RAW_TIMEOUT,
				     "%s with exhaustAllowed: a second reply", others[i]);
			free(extra);
			cr_expect(raw_ping_ok(fd, 10000), "%s: connection not usable after it",
				  others[i]);
		}
	}
	proxy_assert_alive(p, "after the awaitable-hello cases");
	close(fd);
	proxy_stop(p);
}
