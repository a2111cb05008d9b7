/*
 * test_sessionwide.c — issue 20 ("Also"): commands that see or end every
 * session and operation of the backend identity are refused when that
 * identity is shared by all clients (auth_mode = none here, against
 * mongo-java-server or any MONGOPLEX_TEST_URI): killAllSessions,
 * killAllSessionsByPattern, killSessions, currentOp, and aggregations with
 * $currentOp, $listSessions or $listLocalSessions (also inside a
 * $unionWith sub-pipeline). Each gets code 13 with the proxy's reason and
 * never reaches the backend (refused_sessionwide counts them); the
 * connection stays usable, and a pipeline that only mentions a stage name
 * as a string value, and endSessions, still pass. Shared-mode SCRAM and
 * per_user (where they pass) are in test_per_user.c.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define UUID_JSON "{\"$binary\": {\"base64\": \"3q2+78r+ur6+7u/K/rq+vg==\", \"subType\": \"04\"}}"

/* A raw command; its reply in *reply (caller destroys). */
static void run(int fd, const char *json, const char *db, bson_t *reply)
{
	bson_error_t berr;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &berr);

	cr_assert(cmd != NULL, "%s: %s", json, berr.message);
	BSON_APPEND_UTF8(cmd, "$db", db);
	cr_assert(raw_command(fd, 4242, cmd, reply, 10000), "%s: no reply", json);
	bson_destroy(cmd);
}

static bool refused_here(const bson_t *reply)
{
	const char *msg = h_get_str(reply, "errmsg");

	return !h_get_bool(reply, "ok") && h_get_int(reply, "code", -1) == 13 && msg != NULL &&
	       strstr(msg, "one shared identity") != NULL;
}

Test(sessionwide, refused_through_a_shared_identity, .timeout = 60)
{
	char db[64], json[600];
	const char *cmds[][2] = {
	    {"{\"killAllSessions\": []}", "admin"},
	    {"{\"killAllSessionsByPattern\": []}", "admin"},
	    {"{\"killSessions\": [{\"id\": " UUID_JSON "}]}", "admin"},
	    {"{\"currentOp\": 1}", "admin"},
	    {"{\"aggregate\": 1, \"pipeline\": [{\"$currentOp\": {}}], \"cursor\": {}}", "admin"},
	    {"{\"aggregate\": \"system.sessions\", \"pipeline\": [{\"$listSessions\": {}}], "
	     "\"cursor\": {}}",
	     "config"},
	    {"{\"aggregate\": 1, \"pipeline\": [{\"$listLocalSessions\": {\"allUsers\": true}}], "
	     "\"cursor\": {}}",
	     "admin"},
	    {"{\"aggregate\": \"c\", \"pipeline\": [{\"$match\": {}}, {\"$unionWith\": {\"coll\": "
	     "\"d\", \"pipeline\": [{\"$currentOp\": {\"allUsers\": true}}]}}], \"cursor\": {}}",
	     NULL},
	};
	size_t n = sizeof(cmds) / sizeof(cmds[0]);
	struct proxy *p = proxy_start(NULL);
	bson_t reply;
	int fd = raw_connect(p);

	cr_assert(fd >= 0);
	h_unique(db, sizeof(db), "sesswide");
	for (size_t i = 0; i < n; i++) {
		run(fd, cmds[i][0], cmds[i][1] ? cmds[i][1] : db, &reply);
		cr_assert(refused_here(&reply), "%s: not refused with 13 by the proxy", cmds[i][0]);
		bson_destroy(&reply);
		cr_assert(raw_ping_ok(fd, 10000), "%s: the connection is not usable after",
			  cmds[i][0]);
	}
	cr_assert_eq(proxy_counter(p, "refused_sessionwide"), (int64_t)n);
	/* Still forwarded: ordinary commands, a stage name as a value, endSessions. */
	run(fd, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": \"$currentOp\"}]}", db,
	    &reply);
	cr_assert(h_get_bool(&reply, "ok"), "insert after the refusals failed");
	bson_destroy(&reply);
	snprintf(json, sizeof(json), "%s",
		 "{\"aggregate\": \"c\", \"pipeline\": [{\"$match\": {\"a\": \"$currentOp\"}}], "
		 "\"cursor\": {}}");
	run(fd, json, db, &reply);
	cr_assert(h_get_bool(&reply, "ok"), "a $match on a string value was refused");
	cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.0._id", -1), 1);
	bson_destroy(&reply);
	run(fd, "{\"endSessions\": [{\"id\": " UUID_JSON "}]}", "admin", &reply);
	cr_assert(!refused_here(&reply), "endSessions was refused");
	bson_destroy(&reply);
	cr_assert_eq(proxy_counter(p, "refused_sessionwide"), (int64_t)n);
	close(fd);
	proxy_stop(p);
}
