/*
 * test_awaithello.c — the awaitable (streaming) hello of the server-monitoring
 * specification, on raw sockets: every hello carries the proxy's
 * topologyVersion; a hello with the current topologyVersion + maxAwaitTimeMS
 * is held (no backend connection) until maxAwaitTimeMS or a topology change;
 * a stale one is answered at once; exhaustAllowed gives a moreToCome stream
 * whose replies answer each other; SIGTERM answers held hellos with the drain
 * error (counter + 1) before the proxy exits; a reload that changes what the
 * hello advertises bumps the counter, and so does a switch of the backend
 * target (primary lost). Hang guards only, no timing thresholds:
 * a held hello waits 600 s unless the proxy answers it for the reason tested.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define LONG_WAIT_MS 600000 /* a held hello is not answered by its timer in a test */

/* The topologyVersion of a plain hello on fd (a copy; bson_destroy it). */
static bson_t *plain_hello_tv(int fd)
{
	bson_t *hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t reply, view;
	bson_iter_t it, f;
	const uint8_t *data;
	uint32_t len;
	char *js;

	cr_assert(raw_command(fd, 1, hello, &reply, 10000), "plain hello through the proxy");
	js = bson_as_relaxed_extended_json(&reply, NULL);
	cr_assert(bson_iter_init_find(&it, &reply, "topologyVersion") &&
		      BSON_ITER_HOLDS_DOCUMENT(&it),
		  "hello has no topologyVersion document: %s", js);
	bson_iter_document(&it, &len, &data);
	cr_assert(bson_init_static(&view, data, len));
	cr_assert(bson_iter_init_find(&f, &view, "processId") && BSON_ITER_HOLDS_OID(&f),
		  "topologyVersion.processId is not an ObjectId: %s", js);
	cr_assert(bson_iter_init_find(&f, &view, "counter") && BSON_ITER_HOLDS_INT64(&f),
		  "topologyVersion.counter is not an int64: %s", js);
	bson_free(js);
	bson_t *copy = bson_copy(&view);
	bson_destroy(&reply);
	bson_destroy(hello);
	return copy;
}

static int64_t tv_counter(const bson_t *tv)
{
	return h_get_int(tv, "counter", -1);
}

/* Send {hello: 1, topologyVersion: tv, maxAwaitTimeMS: ms} with flags. */
static void send_await(int fd, int32_t id, const bson_t *tv, int64_t ms, uint32_t flags)
{
	bson_t *cmd = BCON_NEW("hello", BCON_INT32(1), "topologyVersion", BCON_DOCUMENT(tv),
			       "maxAwaitTimeMS", BCON_INT64(ms), "$db", BCON_UTF8("admin"));
	struct h_buf b;

	hb_init(&b);
	h_build_msg(&b, id, flags, cmd);
	cr_assert(raw_send(fd, b.data, b.len), "send awaitable hello");
	hb_free(&b);
	bson_destroy(cmd);
}

/* One reply within timeout_ms (a hang guard): parsed into *r, bytes in *msg. */
static void recv_reply(int fd, struct raw_reply *r, uint8_t **msg, int timeout_ms, const char *what)
{
	size_t len = 0;
	enum raw_status st = raw_recv_msg(fd, msg, &len, timeout_ms);

	cr_assert_eq(st, RAW_OK, "%s: no reply (%s)", what, raw_status_name(st));
	cr_assert(raw_parse_reply(*msg, len, r) && r->have_doc, "%s: reply does not parse", what);
}

static int64_t reply_counter(const struct raw_reply *r)
{
	return h_get_int(&r->doc, "topologyVersion.counter", -1);
}

Test(awaithello, topology_version_in_every_hello, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	int a = raw_connect(p), b = raw_connect(p);
	bson_t *ta, *tb;
	bson_iter_t ia, ib;

	ta = plain_hello_tv(a);
	tb = plain_hello_tv(b);
	cr_assert(bson_iter_init_find(&ia, ta, "processId") &&
		  bson_iter_init_find(&ib, tb, "processId"));
	cr_assert(bson_oid_equal(bson_iter_oid(&ia), bson_iter_oid(&ib)),
		  "two connections see two processIds");
	cr_assert_eq(tv_counter(ta), tv_counter(tb), "counter differs between connections");
	bson_destroy(ta);
	bson_destroy(tb);
	close(a);
	close(b);
	proxy_stop(p);
}

Test(awaithello, held_without_backend_then_answered, .timeout = 90)
{
	struct proxy *p = proxy_start(NULL);
	int fd = raw_connect(p);
	mongoc_client_t *mc;
	struct raw_reply r;
	uint8_t *msg = NULL;
	size_t len = 0;
	bson_t *tv, st;
	int64_t forwarded;

	tv = plain_hello_tv(fd);
	mc = h_proxy_client(p, "awaithello-stats");
	h_stats(mc, &st);
	forwarded = h_get_int(&st, "counters.requests_forwarded", -1);
	bson_destroy(&st);
	send_await(fd, 41, tv, LONG_WAIT_MS, 0);
	cr_assert_eq(raw_recv_msg(fd, &msg, &len, 1000), RAW_TIMEOUT,
		     "an awaitable hello with the current topologyVersion was answered at once");
	h_stats(mc, &st);
	cr_log_info("while held: hellos_held=%lld servers_active=%lld hellos_awaited=%lld",
		    (long long)h_get_int(&st, "gauges.hellos_held", -1),
		    (long long)h_get_int(&st, "gauges.servers_active", -1),
		    (long long)h_get_int(&st, "counters.hellos_awaited", -1));
	cr_assert_eq(h_get_int(&st, "gauges.hellos_held", -1), 1, "gauge hellos_held");
	cr_assert_eq(h_get_int(&st, "gauges.servers_active", -1), 0,
		     "a held hello occupies a backend connection");
	cr_assert_eq(h_get_int(&st, "counters.requests_forwarded", -1), forwarded,
		     "the held hello was forwarded");
	bson_destroy(&st);
	/* The same on a short wait: answered by its timer, same topologyVersion. */
	send_await(fd, 42, tv, 300, 0); /* a second one on the connection: at once */
	recv_reply(fd, &r, &msg, 10000, "second awaitable hello on one connection");
	cr_assert_eq(r.response_to, 42);
	free(msg);
	close(fd);
	fd = raw_connect(p);
	send_await(fd, 43, tv, 300, 0);
	recv_reply(fd, &r, &msg, 10000, "awaitable hello, maxAwaitTimeMS 300");
	cr_assert_eq(r.response_to, 43);
	cr_assert_eq(h_get_int(&r.doc, "ok", 0), 1, "reply: ok");
	cr_assert_eq(r.flags & (1u << 1), 0, "moreToCome without exhaustAllowed");
	cr_assert_eq(reply_counter(&r), tv_counter(tv), "counter changed without a cause");
	free(msg);
	cr_assert(raw_ping_ok(fd, 5000), "connection usable after the held hello");
	bson_destroy(tv);
	close(fd);
	mongoc_client_destroy(mc);
	proxy_stop(p);
}

Test(awaithello, stale_answered_at_once, .timeout = 60)
{
	struct proxy *p = proxy_start(NULL);
	int fd = raw_connect(p);
	struct raw_reply r;
	uint8_t *msg = NULL;
	bson_t *tv, *other;
	bson_oid_t oid;

	tv = plain_hello_tv(fd);
	bson_oid_init(&oid, NULL); /* another process */
	other = BCON_NEW("processId", BCON_OID(&oid), "counter", BCON_INT64(0));
	send_await(fd, 51, other, LONG_WAIT_MS, 0);
	recv_reply(fd, &r, &msg, 20000, "awaitable hello from another processId");
	cr_assert_eq(r.response_to, 51);
	cr_assert_eq(h_get_int(&r.doc, "ok", 0), 1);
	cr_assert_eq(reply_counter(&r), tv_counter(tv));
	free(msg);
	bson_destroy(other);
	bson_destroy(tv);
	close(fd);
	proxy_stop(p);
}

Test(awaithello, exhaust_stream_chains_replies, .timeout = 90)
{
	struct proxy *p = proxy_start(NULL);
	int fd = raw_connect(p);
	struct raw_reply r;
	uint8_t *msg = NULL;
	bson_t *tv;
	int32_t expect_to = 61;

	tv = plain_hello_tv(fd);
	send_await(fd, 61, tv, 200, 1u << 16 /* exhaustAllowed */);
	for (int i = 0; i < 4; i++) {
		recv_reply(fd, &r, &msg, 20000, "exhaust hello stream");
		cr_assert_eq(r.response_to, expect_to, "stream reply %d: responseTo %d, want %d", i,
			     r.response_to, expect_to);
		cr_assert_neq(r.flags & (1u << 1), 0, "stream reply %d without moreToCome", i);
		cr_assert_eq(h_get_int(&r.doc, "ok", 0), 1, "stream reply %d: ok", i);
		expect_to = r.request_id;
		free(msg);
	}
	bson_destroy(tv);
	close(fd);
	proxy_stop(p);
}

Test(awaithello, sigterm_answers_held_hellos_first, .timeout = 90)
{
	struct proxy *p = proxy_start("shutdown_timeout_ms = 5000\n");
	int held = raw_connect(p), stream = raw_connect(p);
	struct raw_reply r;
	uint8_t *msg = NULL;
	bson_t *tv;
	int64_t deadline;

	tv = plain_hello_tv(held);
	send_await(held, 71, tv, LONG_WAIT_MS, 0);
	send_await(stream, 72, tv, LONG_WAIT_MS, 1u << 16);
	h_sleep_ms(300); /* both held (not a threshold: either order passes) */
	kill(p->pid, SIGTERM);
	recv_reply(held, &r, &msg, 20000, "held hello on SIGTERM");
	{
		char *js = bson_as_relaxed_extended_json(&r.doc, NULL);

		cr_log_info("held hello answered on SIGTERM: %s", js);
		bson_free(js);
	}
	cr_assert_eq(r.response_to, 71);
	cr_assert_eq(h_get_int(&r.doc, "ok", 1), 0, "drain answer is not the shutdown error");
	cr_assert_eq(h_get_int(&r.doc, "code", 0), 91, "drain answer: code ShutdownInProgress");
	cr_assert_eq(reply_counter(&r), tv_counter(tv) + 1, "drain did not bump the counter");
	free(msg);
	recv_reply(stream, &r, &msg, 20000, "exhaust stream on SIGTERM");
	cr_assert_eq(r.flags & (1u << 1), 0, "the drain answer keeps the exhaust stream open");
	cr_assert_eq(h_get_int(&r.doc, "code", 0), 91);
	cr_assert_eq(reply_counter(&r), tv_counter(tv) + 1);
	free(msg);
	deadline = h_now_ms() + 30000;
	while (proxy_alive(p) && h_now_ms() < deadline)
		h_sleep_ms(20);
	cr_assert_not(proxy_alive(p), "proxy still running 30 s after SIGTERM");
	bson_destroy(tv);
	close(held);
	close(stream);
	proxy_stop(p); /* asserts exit status 0 */
}

Test(awaithello, reload_changing_hello_bumps, .timeout = 90)
{
	struct proxy *p = proxy_start(NULL);
	int fd = raw_connect(p);
	struct raw_reply r;
	uint8_t *msg = NULL;
	bson_t *tv;
	FILE *f;

	if (!h_backend_is("mongo-java-server") && !h_backend_is("ferretdb"))
		cr_log_info("backend %s: advertise_mongos may already be in effect",
			    h_backend_name());
	tv = plain_hello_tv(fd);
	send_await(fd, 81, tv, LONG_WAIT_MS, 0);
	cr_assert_eq(raw_recv_msg(fd, &msg, &(size_t){0}, 500), RAW_TIMEOUT, "not held");
	f = fopen(p->cfg_path, "a");
	cr_assert(f != NULL);
	fprintf(f, "advertise_mongos = on\n");
	fclose(f);
	kill(p->pid, SIGHUP);
	recv_reply(fd, &r, &msg, 20000, "held hello on a reload that changes the hello");
	cr_assert_eq(r.response_to, 81);
	cr_assert_eq(h_get_int(&r.doc, "ok", 0), 1);
	cr_assert_eq(reply_counter(&r), tv_counter(tv) + 1, "reload did not bump the counter");
	cr_assert_str_eq(h_get_str(&r.doc, "msg") ? h_get_str(&r.doc, "msg") : "(none)", "isdbgrid",
			 "advertise_mongos = on: not presented as a mongos");
	free(msg);
	bson_destroy(tv);
	close(fd);
	proxy_stop(p);
}

/* The target switches to the next seed host (the first refuses connections):
 * that is "primary lost" for the clients, and the counter moves. */
Test(awaithello, target_switch_bumps, .timeout = 90)
{
	char cfg[512], host[256];
	int port, fd;
	struct proxy *p;
	bson_t *tv;

	h_backend_hostport(host, sizeof(host), &port);
	snprintf(cfg, sizeof(cfg), "backend_uri = mongodb://127.0.0.1:1,%s:%d/\n", host, port);
	p = proxy_start(cfg);
	fd = raw_connect(p);
	tv = plain_hello_tv(fd); /* answered once the second host's hello is in */
	cr_assert(log_contains(p, "backend primary lost: target switched"),
		  "no topologyVersion bump logged for the target switch");
	cr_assert_geq(tv_counter(tv), 1, "the target switched and the counter did not move");
	bson_destroy(tv);
	close(fd);
	proxy_stop(p);
}
