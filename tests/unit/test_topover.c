/*
 * test_topover.c — the proxy's topologyVersion (core/topover.h): the hello
 * reply carries it (and serviceId only for loadBalanced clients), a bump
 * moves the counter and calls the listener, and topover_parse_await reads an
 * awaitable hello with mongod's checks and codes for each bad field.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/handshake.h"
#include "core/topover.h"
#include "core/wire.h"

static int heard;
static void listener(void)
{
	heard++;
}

Test(topover, hello_carries_topology_version_and_service_id)
{
	struct backend_info bi = {
	    .known = true, .kind = BACKEND_STANDALONE, .max_wire_version = 13};
	bson_t *plain = BCON_NEW("hello", BCON_INT32(1));
	bson_t *lb = BCON_NEW("hello", BCON_INT32(1), "loadBalanced", BCON_BOOL(true));
	bson_t out;
	bson_iter_t it;

	cr_assert(handshake_client_reply(plain, "hello", &bi, 1, true, &out));
	cr_assert(bson_iter_init(&it, &out) &&
		  bson_iter_find_descendant(&it, "topologyVersion.processId", &it));
	cr_assert(BSON_ITER_HOLDS_OID(&it));
	cr_assert(bson_oid_equal(bson_iter_oid(&it), topover_process_id()));
	cr_assert_not(bson_iter_init_find(&it, &out, "serviceId"),
		      "serviceId without loadBalanced");
	bson_destroy(&out);
	cr_assert(handshake_client_reply(lb, "hello", &bi, 1, true, &out));
	cr_assert(bson_iter_init_find(&it, &out, "serviceId") && BSON_ITER_HOLDS_OID(&it),
		  "loadBalanced hello without serviceId");
	bson_destroy(&out);
	bson_destroy(plain);
	bson_destroy(lb);
}

Test(topover, bump_counts_and_notifies)
{
	int64_t before = topover_counter();

	topover_set_listener(listener);
	heard = 0;
	topover_bump("test");
	cr_assert_eq(topover_counter(), before + 1);
	cr_assert_eq(heard, 1);
	topover_set_listener(NULL);
}

/* Parse {hello: 1, <json fields>}; returns the kind, *code the error code. */
static enum topover_await_kind parse(const char *json_fields, int *code, struct topover_await *a)
{
	char buf[512];
	bson_error_t berr;
	bson_t *cmd;
	struct wire_error err = {0};
	enum topover_await_kind k;

	snprintf(buf, sizeof(buf), "{\"hello\": 1%s%s}", json_fields[0] ? ", " : "", json_fields);
	cmd = bson_new_from_json((const uint8_t *)buf, -1, &berr);
	cr_assert(cmd != NULL, "bad test JSON %s: %s", buf, berr.message);
	k = topover_parse_await(cmd, a, &err);
	*code = err.code;
	bson_destroy(cmd);
	return k;
}

Test(topover, parse_await_fields)
{
	struct topover_await a;
	char ours[200], fields[400];
	char oid[25];
	int code;
	static const struct {
		const char *fields;
		int code;
	} bad[] = {
	    {"\"maxAwaitTimeMS\": 10", 31368},
	    {"\"topologyVersion\": {\"processId\": {\"$oid\": \"000000000000000000000000\"}, "
	     "\"counter\": {\"$numberLong\": \"0\"}}",
	     31368},
	    {"\"maxAwaitTimeMS\": \"x\", \"topologyVersion\": {}", 14},
	    {"\"maxAwaitTimeMS\": -1, \"topologyVersion\": {}", 31373},
	    {"\"maxAwaitTimeMS\": 1.5, \"topologyVersion\": {}", 2},
	    {"\"maxAwaitTimeMS\": 10, \"topologyVersion\": \"garbage\"", 14},
	    {"\"maxAwaitTimeMS\": 10, \"topologyVersion\": []", 14},
	    {"\"maxAwaitTimeMS\": 10, \"topologyVersion\": {\"processId\": 1, \"counter\": 0}", 14},
	    {"\"maxAwaitTimeMS\": 10, \"topologyVersion\": {\"processId\": {\"$oid\": "
	     "\"000000000000000000000000\"}}",
	     14},
	    {"\"maxAwaitTimeMS\": 10, \"topologyVersion\": {\"processId\": {\"$oid\": "
	     "\"000000000000000000000000\"}, \"counter\": \"1\"}",
	     14},
	    {"\"maxAwaitTimeMS\": 10, \"topologyVersion\": {\"processId\": {\"$oid\": "
	     "\"000000000000000000000000\"}, \"counter\": -1}",
	     31372},
	};

	cr_assert_eq(parse("", &code, &a), TOPOVER_PLAIN);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(parse(bad[i].fields, &code, &a), TOPOVER_REFUSE, "accepted: %s",
			     bad[i].fields);
		cr_assert_eq(code, bad[i].code, "%s: code %d, want %d", bad[i].fields, code,
			     bad[i].code);
	}
	bson_oid_to_string(topover_process_id(), oid);
	snprintf(ours, sizeof(ours), "{\"processId\": {\"$oid\": \"%s\"}, \"counter\": %lld}", oid,
		 (long long)topover_counter());
	snprintf(fields, sizeof(fields), "\"maxAwaitTimeMS\": 10000, \"topologyVersion\": %s",
		 ours);
	cr_assert_eq(parse(fields, &code, &a), TOPOVER_AWAIT);
	cr_assert(a.same_process);
	cr_assert_eq(a.counter, topover_counter());
	cr_assert_eq(a.max_await_ms, 10000);
	/* A counter above ours from our own process: 31382. */
	snprintf(fields, sizeof(fields),
		 "\"maxAwaitTimeMS\": 10, \"topologyVersion\": {\"processId\": {\"$oid\": \"%s\"}, "
		 "\"counter\": %lld}",
		 oid, (long long)topover_counter() + 5);
	cr_assert_eq(parse(fields, &code, &a), TOPOVER_REFUSE);
	cr_assert_eq(code, 31382);
	/* Another process, any counter: awaitable, not ours (answered at once). */
	cr_assert_eq(
	    parse("\"maxAwaitTimeMS\": 10, \"topologyVersion\": {\"processId\": {\"$oid\": "
		  "\"000000000000000000000000\"}, \"counter\": 99}",
		  &code, &a),
	    TOPOVER_AWAIT);
	cr_assert_not(a.same_process);
}
