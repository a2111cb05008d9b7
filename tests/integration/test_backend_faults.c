/*
 * test_backend_faults.c — what the proxy does when its BACKEND misbehaves:
 * resets mid-reply, closes before replying, stalls, answers garbage
 * (messageLength 5 or 60,000,000, OP_REPLY, a wrong responseTo, an exhaust
 * reply, invalid BSON, a wrong checksum), is down at startup, goes away
 * mid-run and comes back, replies to moreToCome writes, or reports an
 * unusable handshake (old wire version, secondary, {ok: 0}, no answer) — and
 * what a replica-set primary looks like to clients, and which seed of a
 * multi-host backend_uri is used before and after a failover.
 *
 * The backend here is a scriptable fake MongoDB server (fake_backend.[ch]): a
 * thread in this test process listening on a loopback port, speaking just
 * enough OP_MSG.
 * It answers the proxy's isMaster with the handshake the test configured
 * and every other command according to a fault chosen by the command's
 * first value (the collection name): {find: "f_reset"} resets mid-reply,
 * {insert: "f_stall"} never gets an answer, {find: "c"} is answered
 * normally. Putting the fault in the collection name survives the batcher
 * (which rebuilds find commands but keeps the collection). Normal replies
 * carry `conn` (which backend connection answered) and `echo` (the request's
 * `tag`), so a test can tell a fresh connection and the right reply.
 *
 * The fake thread never asserts: the test's main thread reads what the fake
 * saw through fake_* accessors. Clients are raw sockets (one thread can keep
 * many requests in flight on several sockets) and libmongoc where a real
 * driver's view matters. No timing assertion other than "the reply arrived
 * within 10 s" (far above the expected milliseconds) to detect hangs.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_backend.h"
#include "harness.h"

/* Upper bound for "it did not hang": far above any expected latency. */
#define HANG_MS 10000

/* ================================================================ proxy + clients */

/* A proxy in front of 127.0.0.1:port; `more` adds settings and replaces
 * these defaults when it sets the same keys. */
static struct proxy *proxy_for(int port, const char *more)
{
	char extra[1024], line[128];
	size_t n = 0;
	const char *dflt[][2] = {{"backend_uri", NULL},
				 {"pool_size", "1"},
				 {"reconnect_backoff_max_ms", "200"},
				 {"connect_timeout_ms", "2000"}};

	if (more == NULL)
		more = "";
	extra[0] = '\0';
	for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++) {
		if (strstr(more, dflt[i][0]) != NULL)
			continue;
		if (dflt[i][1] == NULL)
			snprintf(line, sizeof(line), "backend_uri = mongodb://127.0.0.1:%d/\n",
				 port);
		else
			snprintf(line, sizeof(line), "%s = %s\n", dflt[i][0], dflt[i][1]);
		n += (size_t)snprintf(extra + n, sizeof(extra) - n, "%s", line);
	}
	snprintf(extra + n, sizeof(extra) - n, "%s", more);
	return proxy_start(extra);
}

static int32_t next_rid = 100;

/* Send cmd (relaxed extended JSON, with $db) on fd; the reply body in *reply.
 * false: no well-formed reply to this request within HANG_MS. */
static bool bf_cmd(int fd, const char *json, bson_t *reply)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &err);
	bool ok;

	cr_assert(cmd != NULL, "bad JSON %s: %s", json, err.message);
	ok = raw_command(fd, next_rid++, cmd, reply, HANG_MS);
	bson_destroy(cmd);
	return ok;
}

/* Send without waiting for the reply; returns the requestID used. */
static int32_t bf_send(int fd, const char *json, uint32_t flags)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &err);
	struct h_buf b;
	int32_t id = next_rid++;

	cr_assert(cmd != NULL, "bad JSON %s: %s", json, err.message);
	hb_init(&b);
	h_build_msg(&b, id, flags, cmd);
	cr_assert(raw_send(fd, b.data, b.len), "send failed");
	hb_free(&b);
	bson_destroy(cmd);
	return id;
}

/* Receive the reply to request `id` on fd (fails the test otherwise, saying
 * whether nothing came, the connection closed, or what arrived was not a
 * well-formed reply). */
static void bf_recv(int fd, int32_t id, bson_t *reply, const char *what)
{
	uint8_t *msg;
	size_t len;
	struct raw_reply r;
	enum raw_status st = raw_recv_msg(fd, &msg, &len, HANG_MS);

	cr_assert(st == RAW_OK, "%s: no reply within %d ms (%s)", what, HANG_MS,
		  raw_status_name(st));
	if (!raw_parse_reply(msg, len, &r) || !r.have_doc) {
		char hex[3 * 48 + 1] = "";

		for (size_t i = 0; i < len && i < 48; i++)
			snprintf(hex + 3 * i, 4, "%02x ", msg[i]);
		cr_assert_fail("%s: the client got a malformed reply (%zu bytes, opcode %d, "
			       "responseTo %d, body not valid BSON): %s",
			       what, len, r.opcode, r.response_to, hex);
	}
	cr_assert_eq(r.response_to, id, "%s: reply to %d, expected %d", what, r.response_to, id);
	bson_copy_to(&r.doc, reply);
	free(msg);
}

/* Send and receive, failing the test if no well-formed reply arrives. */
static void bf_call(int fd, const char *json, bson_t *reply, const char *what)
{
	bf_recv(fd, bf_send(fd, json, 0), reply, what);
}

static char *bf_json(const bson_t *doc)
{
	return bson_as_relaxed_extended_json(doc, NULL);
}

/* reply is {ok: 0, code, codeName} */
static void assert_error(const bson_t *reply, int code, const char *codename, const char *what)
{
	char *j = bf_json(reply);
	const char *cn = h_get_str(reply, "codeName");

	cr_assert_eq(h_get_int(reply, "ok", -1), 0, "%s: expected ok: 0, got %s", what, j);
	cr_assert_eq(h_get_int(reply, "code", -1), code, "%s: expected code %d, got %s", what, code,
		     j);
	cr_assert(cn != NULL && strcmp(cn, codename) == 0, "%s: expected codeName %s, got %s", what,
		  codename, j);
	cr_assert(h_get_str(reply, "errmsg") != NULL, "%s: no errmsg in %s", what, j);
	bson_free(j);
}

static void assert_ok(const bson_t *reply, const char *what)
{
	char *j = bf_json(reply);

	cr_assert_eq(h_get_int(reply, "ok", -1), 1, "%s: expected ok: 1, got %s", what, j);
	bson_free(j);
}

/* mongoplexStats over a raw socket (answered by the proxy itself, so it
 * works whatever the backend does). */
static void rstats(struct proxy *p, bson_t *out)
{
	int fd = raw_connect(p);
	bool ok;

	cr_assert(fd >= 0, "connect to the proxy");
	ok = bf_cmd(fd, "{\"mongoplexStats\": 1, \"$db\": \"admin\"}", out);
	close(fd);
	cr_assert(ok, "mongoplexStats failed");
}

static int64_t counter(struct proxy *p, const char *name)
{
	bson_t st;
	int64_t v;

	rstats(p, &st);
	v = h_counter(&st, name);
	bson_destroy(&st);
	return v;
}

/* A normal forwarded command answered by the fake: returns its conn serial. */
static int ok_roundtrip(int fd, const char *what)
{
	bson_t reply;
	int conn;
	bool got =
	    bf_cmd(fd, "{\"count\": \"c\", \"tag\": \"ok-roundtrip\", \"$db\": \"bf\"}", &reply);

	cr_assert(got, "%s: no reply", what);
	assert_ok(&reply, what);
	cr_assert_str_eq(h_get_str(&reply, "echo"), "ok-roundtrip", "%s: wrong reply", what);
	conn = (int)h_get_int(&reply, "conn", -1);
	bson_destroy(&reply);
	return conn;
}

/* Poll with fresh connections until a forwarded command succeeds. */
static bool wait_recovered(struct proxy *p, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;

	for (;;) {
		int fd = raw_connect(p);
		bson_t reply;
		bool ok = false;

		if (fd >= 0) {
			ok = bf_cmd(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply) &&
			     h_get_int(&reply, "ok", 0) == 1;
			bson_destroy(&reply);
			close(fd);
		}
		if (ok)
			return true;
		if (h_now_ms() > deadline)
			return false;
		h_sleep_ms(50);
	}
}

TestSuite(backend_faults, .timeout = 60);

/* ================================================================ handshake */

Test(backend_faults, handshake_appname_and_limits_mirrored)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	char app[64];
	int fd;
	mongoc_client_t *c;
	bson_error_t err;

	cfg.max_wire = 13;
	cfg.max_write_batch = 777;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);

	/* The proxy connects to the backend for the first hello and mirrors it. */
	bf_call(fd, "{\"hello\": 1, \"helloOk\": true, \"$db\": \"admin\"}", &reply, "hello");
	{
		char *j = bf_json(&reply);

		cr_assert_eq(h_get_int(&reply, "ok", 0), 1, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxWireVersion", -1), 13, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "minWireVersion", -1), 0, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxWriteBatchSize", -1), 777, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxBsonObjectSize", -1), 16777216, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxMessageSizeBytes", -1), 48000000, "hello: %s",
			     j);
		cr_assert(h_get_str(&reply, "msg") == NULL,
			  "a standalone is presented as a "
			  "standalone: %s",
			  j);
		bson_free(j);
	}
	bson_destroy(&reply);
	cr_assert_geq(FAKE_GET(f, hellos), 1);
	fake_appname(f, app, sizeof(app));
	cr_assert_str_eq(app, "mongoplex", "backend hello client.application.name");

	/* a real driver through the proxy to the fake: handshake and a command */
	c = h_proxy_client(p, "bf-driver");
	cr_assert(h_cmd_json(c, "bf", "{\"count\": \"c\", \"tag\": 7}", &reply, &err),
		  "driver command: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "echo", -1), 7);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	/* the driver's own appname never reaches the backend: only the proxy's */
	fake_appname(f, app, sizeof(app));
	cr_assert_str_eq(app, "mongoplex");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, handshake_old_wire_version_refused)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	const char *msg;

	cfg.max_wire = 5;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply, "command to a wire-5 backend");
	assert_error(&reply, 6, "HostUnreachable", "command to a wire-5 backend");
	msg = h_get_str(&reply, "errmsg");
	cr_assert(strstr(msg, "maxWireVersion 5") != NULL,
		  "errmsg should name the wire version: %s", msg);
	bson_destroy(&reply);
	cr_assert(log_wait(p, "maxWireVersion 5", 2000), "log should say why");
	cr_assert_eq(FAKE_GET(f, commands), 0, "nothing may be sent to a refused backend");

	/* a handshake is refused the same way (no backend info to mirror) */
	h_sleep_ms(250); /* past the reconnect backoff: a fresh attempt */
	bf_call(fd, "{\"hello\": 1, \"$db\": \"admin\"}", &reply, "hello with a wire-5 backend");
	assert_error(&reply, 6, "HostUnreachable", "hello with a wire-5 backend");
	bson_destroy(&reply);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, handshake_secondary_not_used)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;

	cfg.kind = FK_SECONDARY;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
		"command with a secondary backend");
	assert_error(&reply, 6, "HostUnreachable", "command with a secondary backend");
	bson_destroy(&reply);
	cr_assert(log_wait(p, "not a writable primary", 2000), "log should say why");
	cr_assert_eq(FAKE_GET(f, commands), 0, "nothing may be sent to a secondary");
	cr_assert_geq(FAKE_GET(f, hellos), 1);

	/* still refused later (a fresh connection attempt, same answer) */
	h_sleep_ms(250);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
		"second command with a secondary backend");
	assert_error(&reply, 6, "HostUnreachable", "second command with a secondary backend");
	bson_destroy(&reply);
	cr_assert_eq(FAKE_GET(f, commands), 0);

	/* the member becomes primary: used from then on */
	cfg.kind = FK_RS_PRIMARY;
	fake_set_cfg(f, &cfg);
	cr_assert(wait_recovered(p, 5000), "primary not used within 5 s");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, handshake_rs_primary_presented_as_mongos)
{
	bson_iter_t it;
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	const char *msg;

	cfg.kind = FK_RS_PRIMARY;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"isMaster\": 1, \"$db\": \"admin\"}", &reply,
		"isMaster with an RS primary backend");
	assert_ok(&reply, "isMaster");
	msg = h_get_str(&reply, "msg");
	cr_assert(msg != NULL && strcmp(msg, "isdbgrid") == 0, "msg: isdbgrid expected");
	cr_assert(h_get_str(&reply, "setName") == NULL, "a mongos has no setName");
	cr_assert(bson_iter_init_find(&it, &reply, "ismaster") && bson_iter_as_bool(&it),
		  "ismaster: true expected");
	bson_destroy(&reply);
	ok_roundtrip(fd, "command to an RS primary");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* The backend accepts but never answers the proxy's hello. */
Test(backend_faults, handshake_never_answered)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	int64_t t0;

	cfg.hello_stall = true;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, "connect_timeout_ms = 300\n");
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	t0 = h_now_ms();
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
		"request while the backend never answers its hello");
	cr_assert_lt(h_now_ms() - t0, HANG_MS);
	{
		char *j = bf_json(&reply);
		int64_t code = h_get_int(&reply, "code", -1);

		cr_assert_eq(h_get_int(&reply, "ok", -1), 0, "%s", j);
		/* docs/errors.md: 89 NetworkTimeout "connect plus handshake took longer". Checked
		 * with cr_expect so the recovery below is still exercised. */
		cr_expect_eq(code, 89,
			     "connect/handshake timeout: expected 89 NetworkTimeout "
			     "(docs/errors.md), got %s",
			     j);
		bson_free(j);
	}
	bson_destroy(&reply);
	cr_assert(log_wait(p, "timed out", 2000));

	/* the backend starts answering: the pool recovers */
	cfg.hello_stall = false;
	fake_set_cfg(f, &cfg);
	cr_assert(wait_recovered(p, 5000), "no recovery within 5 s");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ broken exchanges */

/* One request hits `fault` (collection name `coll`): the client gets error
 * `code`, the log says `why`, the client connection stays usable and the next
 * request succeeds on a fresh backend connection. */
static void check_fault_then_recover(const char *coll, int code, const char *codename,
				     const char *why, const char *settings)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, settings);
	char cmd[256], what[128];
	bson_t reply;
	int fd = raw_connect(p), conn1, conn2;
	int64_t disc0;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before the fault");
	disc0 = counter(p, "backend_disconnects");

	snprintf(what, sizeof(what), "request on %s", coll);
	snprintf(cmd, sizeof(cmd), "{\"find\": \"%s\", \"filter\": {\"x\": 1}, \"$db\": \"bf\"}",
		 coll);
	bf_call(fd, cmd, &reply, what);
	assert_error(&reply, code, codename, what);
	bson_destroy(&reply);
	if (why != NULL)
		cr_assert(log_wait(p, why, 2000), "%s: log should say \"%s\"", what, why);

	/* same client connection, next request fine, on a new backend connection */
	conn2 = ok_roundtrip(fd, "after the fault");
	cr_assert_neq(conn1, conn2, "%s: the broken backend connection was reused", what);
	cr_assert_geq(counter(p, "backend_disconnects"), disc0 + 1, "%s: backend_disconnects",
		      what);
	proxy_assert_alive(p, what);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, reset_mid_reply)
{
	check_fault_then_recover("f_reset", 6, "HostUnreachable", "closing: backend", NULL);
}

Test(backend_faults, close_before_reply)
{
	check_fault_then_recover("f_close", 6, "HostUnreachable", "backend closed the connection",
				 NULL);
}

Test(backend_faults, stall_query_timeout)
{
	struct proxy *p;
	struct fake *f;

	check_fault_then_recover("f_stall", 89, "NetworkTimeout", "query_timeout_ms",
				 "query_timeout_ms = 300\n");
	/* and half a reply, then silence */
	check_fault_then_recover("f_half", 89, "NetworkTimeout", "query_timeout_ms",
				 "query_timeout_ms = 300\n");
	/* the counter */
	f = fake_start();
	p = proxy_for(f->port, "query_timeout_ms = 300\n");
	{
		int fd = raw_connect(p);
		bson_t reply;

		bf_call(fd, "{\"count\": \"f_stall\", \"$db\": \"bf\"}", &reply, "stalled request");
		assert_error(&reply, 89, "NetworkTimeout", "stall");
		bson_destroy(&reply);
		cr_assert_eq(counter(p, "query_timeouts"), 1);
		close(fd);
	}
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, garbage_length_5)
{
	check_fault_then_recover("f_len5", 6, "HostUnreachable", "invalid messageLength 5", NULL);
}

Test(backend_faults, garbage_length_60m)
{
	check_fault_then_recover("f_len60m", 6, "HostUnreachable", "invalid messageLength 60000000",
				 NULL);
}

Test(backend_faults, garbage_op_reply)
{
	check_fault_then_recover("f_opreply", 6, "HostUnreachable", "expected OP_MSG", NULL);
}

Test(backend_faults, garbage_header_only)
{
	check_fault_then_recover("f_hdronly", 6, "HostUnreachable", "closing: backend", NULL);
}

Test(backend_faults, exhaust_reply_refused)
{
	check_fault_then_recover("f_exhaust", 6, "HostUnreachable", "exhaust", NULL);
}

/* A reply the client cannot use (body not valid BSON, checksum wrong) must not
 * reach it as is: the request gets error 6, like any other garbage. */
static void check_garbage_not_forwarded(const char *coll, const char *what)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p);
	char cmd[160];
	int32_t id;
	uint8_t *msg;
	size_t len;
	struct raw_reply r;
	enum raw_status st;

	cr_assert(fd >= 0);
	ok_roundtrip(fd, "before");
	snprintf(cmd, sizeof(cmd), "{\"count\": \"%s\", \"$db\": \"bf\"}", coll);
	id = bf_send(fd, cmd, 0);
	st = raw_recv_msg(fd, &msg, &len, HANG_MS);
	cr_assert(st == RAW_OK, "%s: no reply within %d ms (%s)", what, HANG_MS,
		  raw_status_name(st));
	if (!raw_parse_reply(msg, len, &r) || !r.have_doc) {
		cr_expect_fail("%s: forwarded to the client as is (%zu bytes, opcode %d, flags "
			       "0x%x): the client gets bytes it cannot parse instead of an error",
			       what, len, r.opcode, r.flags);
	} else {
		char *j = bf_json(&r.doc);

		cr_expect_eq(r.response_to, id);
		cr_expect_eq(h_get_int(&r.doc, "code", -1), 6,
			     "%s: expected error 6 HostUnreachable, got %s", what, j);
		bson_free(j);
	}
	free(msg);
	/* whatever happened, the proxy and this client connection carry on */
	ok_roundtrip(fd, "after");
	proxy_assert_alive(p, what);
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, garbage_invalid_bson_body)
{
	check_garbage_not_forwarded("f_badbson", "reply body with an invalid BSON type");
}

Test(backend_faults, garbage_bad_checksum)
{
	check_garbage_not_forwarded("f_crcbad", "reply with a wrong CRC-32C");
}

/* A correct checksummed reply is delivered, checksum stripped, well-formed. */
Test(backend_faults, checksummed_reply_delivered)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p), conn1;
	bson_t reply;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	bf_call(fd, "{\"count\": \"f_crcok\", \"tag\": 9, \"$db\": \"bf\"}", &reply,
		"checksummed reply");
	assert_ok(&reply, "checksummed reply");
	cr_assert_eq(h_get_int(&reply, "echo", -1), 9);
	bson_destroy(&reply);
	cr_assert_eq(ok_roundtrip(fd, "after"), conn1);
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, wrong_response_to_then_nothing)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "query_timeout_ms = 300\n");
	int fd = raw_connect(p);
	bson_t reply;
	int64_t stale0;

	cr_assert(fd >= 0);
	ok_roundtrip(fd, "before");
	stale0 = counter(p, "stale_replies");
	bf_call(fd, "{\"count\": \"f_wrongto\", \"$db\": \"bf\"}", &reply,
		"wrong responseTo, then silence");
	assert_error(&reply, 89, "NetworkTimeout", "wrong responseTo, then silence");
	bson_destroy(&reply);
	cr_assert_eq(counter(p, "stale_replies"), stale0 + 1);
	ok_roundtrip(fd, "after");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, stray_reply_dropped_right_one_delivered)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p), conn1;
	bson_t reply;
	int64_t stale0, disc0;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	stale0 = counter(p, "stale_replies");
	disc0 = counter(p, "backend_disconnects");
	bf_call(fd, "{\"count\": \"f_stray\", \"tag\": \"mine\", \"$db\": \"bf\"}", &reply,
		"stray reply, then the right one");
	assert_ok(&reply, "stray then right");
	cr_assert_str_eq(h_get_str(&reply, "echo"), "mine", "the stray reply was delivered");
	bson_destroy(&reply);
	cr_assert_eq(counter(p, "stale_replies"), stale0 + 1);
	cr_assert_eq(counter(p, "backend_disconnects"), disc0,
		     "a stray reply is no reason to close");
	cr_assert_eq(ok_roundtrip(fd, "after"), conn1, "same backend connection expected");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* A backend error reply is the backend's: it reaches the client unchanged. */
Test(backend_faults, backend_error_passed_through)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p), conn1;
	bson_t reply;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	bf_call(fd, "{\"count\": \"f_cmderr\", \"$db\": \"bf\"}", &reply, "backend error");
	assert_error(&reply, 2, "BadValue", "backend error");
	cr_assert_str_eq(h_get_str(&reply, "errmsg"), "fake backend says no");
	bson_destroy(&reply);
	cr_assert_eq(ok_roundtrip(fd, "after"), conn1);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* The backend refuses the proxy's hello ({ok: 0}): error 6 saying so. */
Test(backend_faults, handshake_refused_by_backend)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	const char *msg;

	cfg.hello_error = true;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply, "hello refused");
	assert_error(&reply, 6, "HostUnreachable", "hello refused");
	msg = h_get_str(&reply, "errmsg");
	cr_assert(strstr(msg, "fake says not now") != NULL, "errmsg: %s", msg);
	bson_destroy(&reply);
	cr_assert_eq(FAKE_GET(f, commands), 0);
	cfg.hello_error = false;
	fake_set_cfg(f, &cfg);
	cr_assert(wait_recovered(p, 5000));
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* One client pipelines requests over two backend connections; one of them
 * resets: that request gets error 6, the others their own replies. */
Test(backend_faults, pipelined_requests_one_reset)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "pool_size = 2\n");
	int fd = raw_connect(p);
	int32_t ids[4];
	bool seen[4] = {false};

	cr_assert(fd >= 0);
	ok_roundtrip(fd, "before");
	ids[0] = bf_send(fd, "{\"count\": \"c\", \"tag\": 0, \"$db\": \"bf\"}", 0);
	ids[1] = bf_send(fd, "{\"count\": \"f_reset\", \"tag\": 1, \"$db\": \"bf\"}", 0);
	ids[2] = bf_send(fd, "{\"count\": \"c\", \"tag\": 2, \"$db\": \"bf\"}", 0);
	ids[3] = bf_send(fd, "{\"count\": \"c\", \"tag\": 3, \"$db\": \"bf\"}", 0);
	for (int n = 0; n < 4; n++) {
		uint8_t *msg;
		size_t len;
		struct raw_reply r;
		enum raw_status st = raw_recv_msg(fd, &msg, &len, HANG_MS);
		int k = -1;

		cr_assert(st == RAW_OK, "reply %d of 4: %s", n + 1, raw_status_name(st));
		cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc, "malformed reply");
		for (int i = 0; i < 4; i++)
			if (r.response_to == ids[i])
				k = i;
		cr_assert(k >= 0 && !seen[k], "reply to an unknown or answered request %d",
			  r.response_to);
		seen[k] = true;
		if (k == 1) {
			assert_error(&r.doc, 6, "HostUnreachable", "the reset request");
		} else {
			assert_ok(&r.doc, "a pipelined request");
			cr_assert_eq(h_get_int(&r.doc, "echo", -1), k, "reply for another request");
		}
		free(msg);
	}
	ok_roundtrip(fd, "after");
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ stalls and concurrency */

Test(backend_faults, stalled_backend_does_not_block_others)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "pool_size = 2\nquery_timeout_ms = 0\n");
	int stalled = raw_connect(p), fds[4];
	int32_t sid;
	bson_t reply;

	cr_assert(stalled >= 0);
	sid = bf_send(stalled, "{\"count\": \"f_stall\", \"$db\": \"bf\"}", 0);
	/* wait until the stalled request holds a backend connection */
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 1; i++)
		h_sleep_ms(10);
	cr_assert_eq(FAKE_GET(f, faults_done), 1, "stalled request never reached the backend");

	for (int i = 0; i < 4; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
	}
	/* sequential and concurrent requests from other clients: all served */
	for (int round = 0; round < 5; round++)
		for (int i = 0; i < 4; i++)
			ok_roundtrip(fds[i], "other client while one request stalls");
	{
		int32_t ids[4];

		for (int i = 0; i < 4; i++)
			ids[i] = bf_send(fds[i], "{\"count\": \"c\", \"$db\": \"bf\"}", 0);
		for (int i = 0; i < 4; i++) {
			bf_recv(fds[i], ids[i], &reply, "concurrent other client");
			assert_ok(&reply, "concurrent other client");
			bson_destroy(&reply);
		}
	}
	/* the stalled client is still waiting: nothing arrived for it */
	{
		uint8_t *msg;
		size_t len;

		cr_assert_eq(raw_recv_msg(stalled, &msg, &len, 100), RAW_TIMEOUT);
	}
	/* the backend goes away: the stalled request gets its error */
	fake_stop(f);
	bf_recv(stalled, sid, &reply, "stalled request when the backend went away");
	assert_error(&reply, 6, "HostUnreachable", "stalled request when the backend went away");
	bson_destroy(&reply);

	for (int i = 0; i < 4; i++)
		close(fds[i]);
	close(stalled);
	proxy_stop(p);
}

/* ================================================================ unacknowledged writes */

static void check_more_to_come_reply(enum mtc_reply mode)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	int fd, conn1, conn2;
	int64_t stale0;
	bson_t reply;

	cfg.mtc = mode;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL); /* pool_size 1: one backend connection */
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	stale0 = counter(p, "stale_replies");

	/* w: 0 insert with moreToCome: no reply to the client */
	bf_send(fd,
		"{\"insert\": \"c\", \"documents\": [{\"_id\": 1}], \"writeConcern\": {\"w\": 0}, "
		"\"$db\": \"bf\"}",
		H_MSG_MORE_TO_COME);
	for (int i = 0; i < 200 && FAKE_GET(f, mtc_seen) < 1; i++)
		h_sleep_ms(10);
	cr_assert_eq(FAKE_GET(f, mtc_seen), 1, "the moreToCome write never reached the backend");

	/* the next request on the same backend connection gets its own reply */
	for (int i = 0; i < 3; i++) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "{\"count\": \"c\", \"tag\": %d, \"$db\": \"bf\"}", i);
		bf_call(fd, cmd, &reply, "request after the moreToCome write");
		{
			char *j = bf_json(&reply);

			cr_assert_eq(h_get_int(&reply, "echo", -1), i,
				     "wrong reply delivered (the unsolicited one?): %s", j);
			bson_free(j);
		}
		conn2 = (int)h_get_int(&reply, "conn", -1);
		bson_destroy(&reply);
		cr_assert_eq(conn2, conn1, "same backend connection expected");
	}
	cr_assert_eq(counter(p, "stale_replies"), stale0 + 1, "the unsolicited reply is dropped");
	{
		uint8_t *msg;
		size_t len;

		cr_assert_eq(raw_recv_msg(fd, &msg, &len, 100), RAW_TIMEOUT,
			     "nothing else may reach the client");
	}

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, more_to_come_reply_immediate_dropped)
{
	check_more_to_come_reply(MTC_IMMEDIATE);
}

Test(backend_faults, more_to_come_reply_late_dropped)
{
	/* the unsolicited reply arrives while the next request is in flight */
	check_more_to_come_reply(MTC_DEFERRED);
}

/* ================================================================ backend down, backend gone */

Test(backend_faults, backend_down_at_startup)
{
	struct fake_cfg dflt = fake_default_cfg();
	/* held until the backend comes up: a port picked free and released at
	 * once was once taken by another parallel test's socket, which answered
	 * the proxy's connect but not its hello (a timeout, 89, not 6) */
	int hold, port = fake_hold_port(&hold);
	struct proxy *p = proxy_for(port, NULL);
	struct fake *f;
	bson_t reply;
	int fd = raw_connect(p);
	int64_t t0;
	mongoc_client_t *c;
	bson_error_t err;
	bool ok;

	cr_assert(fd >= 0, "the proxy starts without its backend");
	proxy_assert_alive(p, "with the backend down");

	/* a request: error 6, fast */
	t0 = h_now_ms();
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply, "request with the backend down");
	cr_assert_lt(h_now_ms() - t0, 2000 + HANG_MS, "slower than connect_timeout_ms + margin");
	assert_error(&reply, 6, "HostUnreachable", "request with the backend down");
	bson_destroy(&reply);
	/* a handshake: error 6 too (nothing to mirror) */
	t0 = h_now_ms();
	bf_call(fd, "{\"hello\": 1, \"$db\": \"admin\"}", &reply, "hello with the backend down");
	cr_assert_lt(h_now_ms() - t0, 2000 + HANG_MS);
	assert_error(&reply, 6, "HostUnreachable", "hello with the backend down");
	bson_destroy(&reply);
	/* a fresh driver: fails, and fast */
	c = h_proxy_client(p, "bf-down");
	t0 = h_now_ms();
	ok = h_cmd_json(c, "bf", "{\"count\": \"c\"}", &reply, &err);
	cr_assert(!ok, "a command succeeded with the backend down");
	cr_assert_lt(h_now_ms() - t0, 2000 + HANG_MS, "driver: slower than connect timeout");
	/* the handshake error the proxy sent reaches the application */
	cr_assert(strstr(err.message, "cannot reach backend") != NULL, "driver error: %s",
		  err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	proxy_assert_alive(p, "after failed requests");

	/* the backend comes up on that port: recovery within the backoff */
	close(hold);
	f = fake_start_cfg(port, &dflt);
	cr_assert(wait_recovered(p, 5000), "no recovery within 5 s of the backend coming up");
	ok_roundtrip(fd, "old client connection after recovery");
	bf_call(fd, "{\"hello\": 1, \"$db\": \"admin\"}", &reply, "hello after recovery");
	assert_ok(&reply, "hello after recovery");
	bson_destroy(&reply);
	c = h_proxy_client(p, "bf-up");
	cr_assert(h_cmd_json(c, "bf", "{\"count\": \"c\", \"tag\": 3}", &reply, &err),
		  "fresh driver after recovery: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "echo", -1), 3);
	bson_destroy(&reply);
	mongoc_client_destroy(c);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, backend_goes_away_mid_run)
{
	struct fake_cfg dflt = fake_default_cfg();
	struct fake *f = fake_start();
	int port = f->port;
	struct proxy *p = proxy_for(port, "pool_size = 4\n");
	enum { N = 10 };
	int fds[N];
	int32_t ids[N];
	bson_t reply;
	int64_t t0;

	for (int i = 0; i < N; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
		ok_roundtrip(fds[i], "before");
	}
	/* every client has a request in flight: 4 at the backend, 6 queued */
	for (int i = 0; i < N; i++)
		ids[i] = bf_send(fds[i], "{\"count\": \"f_stall\", \"$db\": \"bf\"}", 0);
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 4; i++)
		h_sleep_ms(10);
	cr_assert_eq(FAKE_GET(f, faults_done), 4, "4 requests should be at the backend");

	t0 = h_now_ms();
	fake_stop(f); /* listener and every connection closed */
	for (int i = 0; i < N; i++) {
		bf_recv(fds[i], ids[i], &reply, "in-flight request when the backend went away");
		assert_error(&reply, 6, "HostUnreachable", "in-flight request, backend gone");
		bson_destroy(&reply);
	}
	cr_assert_lt(h_now_ms() - t0, HANG_MS);
	proxy_assert_alive(p, "after the backend went away");

	/* while it is away: fast errors, client connections stay usable */
	for (int i = 0; i < N; i++) {
		bf_call(fds[i], "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
			"request while the backend is away");
		assert_error(&reply, 6, "HostUnreachable", "request while the backend is away");
		bson_destroy(&reply);
	}
	/* lookups while it is away: with no connection each opens a merged
	 * batch, which the pool fails at once and frees inside its submit (an
	 * ASan build caught a use of that freed batch after the submit) */
	for (int i = 0; i < N; i++) {
		bf_call(fds[i], "{\"find\": \"c\", \"filter\": {\"_id\": 7}, \"$db\": \"bf\"}",
			&reply, "lookup while the backend is away");
		assert_error(&reply, 6, "HostUnreachable", "lookup while the backend is away");
		bson_destroy(&reply);
	}
	proxy_assert_alive(p, "after lookups with the backend away");

	/* it comes back on the same port: the pool recovers */
	f = fake_start_cfg(port, &dflt);
	cr_assert(wait_recovered(p, 5000), "no recovery within 5 s");
	for (int i = 0; i < N; i++)
		ok_roundtrip(fds[i], "after recovery");

	for (int i = 0; i < N; i++)
		close(fds[i]);
	proxy_stop(p);
	fake_stop(f);
}

/* Driver threads keep working through a backend outage: each command
 * either succeeds or fails (never hangs), and they succeed again after. */
struct driver_worker {
	pthread_t thr;
	const char *uri;
	volatile bool *stop;
	int ok, failed, hung; /* hung: a command took longer than HANG_MS */
	int ok_after_mark;
	volatile bool *mark;
};

static void *driver_worker_main(void *arg)
{
	struct driver_worker *w = arg;
	mongoc_client_t *c = h_client_uri(w->uri, "bf-worker");
	bson_t *cmd = BCON_NEW("count", BCON_UTF8("c"));

	if (c == NULL) {
		w->hung = -1;
		return NULL;
	}
	while (!*w->stop) {
		bson_t reply;
		bson_error_t err;
		int64_t t0 = h_now_ms();
		bool ok = mongoc_client_command_simple(c, "bf", cmd, NULL, &reply, &err);

		if (h_now_ms() - t0 > HANG_MS)
			w->hung++;
		if (ok) {
			w->ok++;
			if (*w->mark)
				w->ok_after_mark++;
		} else {
			w->failed++;
			h_sleep_ms(20);
		}
		bson_destroy(&reply);
	}
	bson_destroy(cmd);
	mongoc_client_destroy(c);
	return NULL;
}

Test(backend_faults, driver_clients_through_an_outage)
{
	struct fake_cfg dflt = fake_default_cfg();
	struct fake *f = fake_start();
	int port = f->port;
	struct proxy *p = proxy_for(port, "pool_size = 2\n");
	enum { W = 4 };
	struct driver_worker w[W];
	volatile bool stop = false, mark = false;
	int64_t deadline;

	memset(w, 0, sizeof(w));
	for (int i = 0; i < W; i++) {
		w[i].uri = p->uri;
		w[i].stop = &stop;
		w[i].mark = &mark;
		cr_assert(pthread_create(&w[i].thr, NULL, driver_worker_main, &w[i]) == 0);
	}
	h_sleep_ms(300);
	fake_stop(f);
	h_sleep_ms(500);
	f = fake_start_cfg(port, &dflt);
	mark = true;
	deadline = h_now_ms() + 8000;
	for (;;) {
		bool all = true;

		for (int i = 0; i < W; i++)
			all = all && w[i].ok_after_mark > 0;
		if (all || h_now_ms() > deadline)
			break;
		h_sleep_ms(50);
	}
	stop = true;
	for (int i = 0; i < W; i++)
		pthread_join(w[i].thr, NULL);
	for (int i = 0; i < W; i++) {
		cr_log_info("worker %d: ok %d, failed %d, ok after recovery %d", i, w[i].ok,
			    w[i].failed, w[i].ok_after_mark);
		cr_assert_eq(w[i].hung, 0, "worker %d: a command hung (or no client)", i);
		cr_assert_gt(w[i].failed, 0, "worker %d never saw the outage", i);
		cr_assert_gt(w[i].ok_after_mark, 0, "worker %d: no success after recovery", i);
	}
	proxy_assert_alive(p, "after the outage");
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ batcher under faults */

/* n raw connections to the proxy. */
static void connect_n(struct proxy *p, int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
	}
}

/* Lookup i of _id i on collection `coll`, one per connection, sent at once
 * (the first is forwarded alone on the only backend connection, the others
 * queue up behind it and merge); each must get the error `code`. */
static void lookups_expect_error(const int *fds, int n, const char *coll, int code,
				 const char *codename, const char *what)
{
	int32_t ids[16];
	bson_t reply;

	cr_assert(n <= 16);
	for (int i = 0; i < n; i++) {
		char cmd[160];

		snprintf(cmd, sizeof(cmd),
			 "{\"find\": \"%s\", \"filter\": {\"_id\": %d}, \"$db\": \"bf\"}", coll, i);
		ids[i] = bf_send(fds[i], cmd, 0);
	}
	for (int i = 0; i < n; i++) {
		bf_recv(fds[i], ids[i], &reply, what);
		assert_error(&reply, code, codename, what);
		bson_destroy(&reply);
	}
}

/* Concurrent _id lookups merged into one query on a backend that resets
 * every find on that collection: each lookup gets an error, none hangs. */
Test(backend_faults, batched_lookups_on_resetting_backend)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "batching = on\n");
	enum { N = 6 };
	int fds[N];
	int32_t ids[N];
	bson_t reply;

	connect_n(p, fds, N);
	ok_roundtrip(fds[0], "warm up");
	lookups_expect_error(fds, N, "f_reset", 6, "HostUnreachable",
			     "batched lookup on a resetting backend");
	/* normal lookups afterwards, merged or not, get their documents */
	for (int i = 0; i < N; i++) {
		char cmd[160];

		snprintf(cmd, sizeof(cmd),
			 "{\"find\": \"c\", \"filter\": {\"_id\": %d}, \"$db\": \"bf\"}", i);
		ids[i] = bf_send(fds[i], cmd, 0);
	}
	for (int i = 0; i < N; i++) {
		char *j;

		bf_recv(fds[i], ids[i], &reply, "lookup after the resets");
		j = bf_json(&reply);
		assert_ok(&reply, "lookup after the resets");
		cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.0._id", -1), i, "%s", j);
		cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.1._id", -1), -1, "%s", j);
		bson_free(j);
		bson_destroy(&reply);
	}
	cr_log_info("batches_sent %" PRId64, counter(p, "batches_sent"));

	for (int i = 0; i < N; i++)
		close(fds[i]);
	proxy_stop(p);
	fake_stop(f);
}

/* Merged query on a stalling backend with query_timeout: every lookup gets
 * an error within bounded time. */
Test(backend_faults, batched_lookups_on_stalling_backend)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "batching = on\nquery_timeout_ms = 300\n");
	enum { N = 5 };
	int fds[N];

	connect_n(p, fds, N);
	ok_roundtrip(fds[0], "warm up");
	lookups_expect_error(fds, N, "f_stall", 89, "NetworkTimeout",
			     "batched lookup on a stalling backend");
	ok_roundtrip(fds[0], "after");
	for (int i = 0; i < N; i++)
		close(fds[i]);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ clients that leave */

/* The client goes away while its request runs: the late reply is dropped and
 * the backend connection goes on serving others. */
Test(backend_faults, client_gone_before_slow_reply)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL); /* pool_size 1 */
	int a = raw_connect(p), b = raw_connect(p), conn1;
	int64_t disc0;

	cr_assert(a >= 0 && b >= 0);
	conn1 = ok_roundtrip(b, "before");
	disc0 = counter(p, "backend_disconnects");
	bf_send(a, "{\"count\": \"f_slow\", \"$db\": \"bf\"}", 0);
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 1; i++)
		h_sleep_ms(10);
	close(a);
	/* b waits for the only connection, then gets its own reply on it */
	cr_assert_eq(ok_roundtrip(b, "after the slow reply"), conn1);
	cr_assert_eq(counter(p, "backend_disconnects"), disc0);
	proxy_assert_alive(p, "after a reply to a departed client");
	close(b);
	proxy_stop(p);
	fake_stop(f);
}

/* The client goes away while its request stalls; the query timeout then
 * fails a request nobody waits for. */
Test(backend_faults, client_gone_before_query_timeout)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "query_timeout_ms = 300\n");
	int a = raw_connect(p), b = raw_connect(p);

	cr_assert(a >= 0 && b >= 0);
	ok_roundtrip(b, "before");
	bf_send(a, "{\"count\": \"f_stall\", \"$db\": \"bf\"}", 0);
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 1; i++)
		h_sleep_ms(10);
	close(a);
	cr_assert(log_wait(p, "query_timeout_ms", HANG_MS), "the stalled exchange never timed out");
	ok_roundtrip(b, "after the timeout");
	proxy_assert_alive(p, "after a timeout for a departed client");
	close(b);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ replica set seeds */

/* backend_uri lists a secondary first and the primary second: requests are
 * served by the primary, including the very first ones. */
Test(backend_faults, replica_set_first_seed_secondary)
{
	struct fake_cfg sec = fake_default_cfg(), pri = fake_default_cfg();
	struct fake *a, *b;
	struct proxy *p;
	char more[200];
	bson_t reply;
	int fd;
	bool first_ok;

	sec.kind = FK_SECONDARY;
	pri.kind = FK_RS_PRIMARY;
	a = fake_start_cfg(0, &sec);
	b = fake_start_cfg(0, &pri);
	snprintf(more, sizeof(more), "backend_uri = mongodb://127.0.0.1:%d,127.0.0.1:%d/\n",
		 a->port, b->port);
	p = proxy_for(0, more);
	fd = raw_connect(p);
	cr_assert(fd >= 0);

	bf_call(fd, "{\"count\": \"c\", \"tag\": 1, \"$db\": \"bf\"}", &reply, "first request");
	first_ok = h_get_int(&reply, "ok", 0) == 1;
	{
		char *j = bf_json(&reply);

		cr_expect(first_ok,
			  "first request failed although the second seed is a writable primary: "
			  "%s",
			  j);
		bson_free(j);
	}
	bson_destroy(&reply);
	/* from then on the primary serves */
	cr_assert(wait_recovered(p, 5000), "the primary (second seed) is never used");
	cr_assert_eq(FAKE_GET(a, commands), 0, "a command was sent to the secondary");
	cr_assert_gt(FAKE_GET(b, commands), 0);
	close(fd);
	proxy_stop(p);
	fake_stop(a);
	fake_stop(b);
}

/* Failover: the primary (second seed) dies, the other member becomes
 * primary: the proxy must find it. */
Test(backend_faults, replica_set_failover_to_other_seed)
{
	struct fake_cfg sec = fake_default_cfg(), pri = fake_default_cfg();
	struct fake *a, *b;
	struct proxy *p;
	char more[200];
	int fd;

	sec.kind = FK_SECONDARY;
	pri.kind = FK_RS_PRIMARY;
	a = fake_start_cfg(0, &sec);
	b = fake_start_cfg(0, &pri);
	snprintf(more, sizeof(more), "backend_uri = mongodb://127.0.0.1:%d,127.0.0.1:%d/\n",
		 a->port, b->port);
	p = proxy_for(0, more);
	cr_assert(wait_recovered(p, 5000), "the primary is never used");

	/* b dies, a is elected */
	fake_stop(b);
	fake_set_cfg(a, &pri);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	cr_expect(wait_recovered(p, 5000),
		  "after failover the new primary (first seed) is never used; log:\n%s",
		  proxy_log_tail(p, 3000));
	close(fd);
	proxy_stop(p);
	fake_stop(a);
}
