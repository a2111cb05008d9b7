/*
 * test_awaithello_nonreader.c — a client that sends an exhaustAllowed
 * awaitable hello and never reads the moreToCome stream is closed once its
 * unsent replies reach max_client_buffer_bytes (proxy/awaithello.c), with
 * the reason logged, while other clients are served all along.
 *
 * The non-reader's socket has a tiny receive buffer, but the proxy's socket
 * still takes megabytes (its send buffer autotunes to tcp_wmem's maximum), so
 * at one reply per 100 ms (maxAwaitTimeMS 0) the close would take many
 * minutes: the test makes the stream fast by reloading with a change the
 * hello shows (advertise_mongos on/off), which answers held hellos at once.
 * The figures (replies streamed, reloads, time to the close) are printed
 * with --verbose; nothing is asserted on time (hang guard only).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define GUARD_MS 120000

/* A socket to the proxy whose receive buffer is as small as the kernel allows. */
static int small_rcvbuf_connect(struct proxy *p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = 1;

	cr_assert(fd >= 0);
	cr_assert(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) == 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect to the proxy");
	return fd;
}

static bson_t *hello_tv(int fd)
{
	bson_t *hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"));
	bson_t reply, view;
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	bson_t *tv;

	cr_assert(raw_command(fd, 1, hello, &reply, 10000), "plain hello");
	cr_assert(bson_iter_init_find(&it, &reply, "topologyVersion") &&
		  BSON_ITER_HOLDS_DOCUMENT(&it));
	bson_iter_document(&it, &len, &data);
	cr_assert(bson_init_static(&view, data, len));
	tv = bson_copy(&view);
	bson_destroy(&reply);
	bson_destroy(hello);
	return tv;
}

Test(awaithello, exhaust_non_reader_closed, .timeout = 300)
{
	struct proxy *p = proxy_start("max_client_buffer_bytes = 65536\n");
	int fd = small_rcvbuf_connect(p), other = raw_connect(p);
	mongoc_client_t *mc = h_proxy_client(p, "nonreader-other");
	bson_t *tv = hello_tv(fd), *cmd, reply, st;
	bson_error_t err;
	struct h_buf b;
	int64_t t0, pings = 0, reloads = 0;
	char *base = NULL;
	size_t base_len = 0;
	FILE *cf = fopen(p->cfg_path, "r");

	cr_assert(cf != NULL);
	cr_assert(getdelim(&base, &base_len, '\0', cf) > 0, "read %s", p->cfg_path);
	fclose(cf);

	cmd = BCON_NEW("hello", BCON_INT32(1), "topologyVersion", BCON_DOCUMENT(tv),
		       "maxAwaitTimeMS", BCON_INT64(0), "$db", BCON_UTF8("admin"));
	hb_init(&b);
	h_build_msg(&b, 7, 1u << 16 /* exhaustAllowed */, cmd);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
	bson_destroy(cmd);
	t0 = h_now_ms();
	/* never read fd; the others keep being served */
	while (!log_contains(p, "does not read its exhaust hello stream")) {
		cr_assert(h_now_ms() - t0 < GUARD_MS, "the non-reader was never closed");
		for (int i = 0; i < 200; i++, reloads++) { /* each reload: one stream reply */
			cf = fopen(p->cfg_path, "w");
			cr_assert(cf != NULL);
			fprintf(cf, "%s%s", base, reloads % 2 ? "" : "advertise_mongos = on\n");
			fclose(cf);
			kill(p->pid, SIGHUP);
			h_sleep_ms(2);
		}
		cr_assert(raw_ping_ok(other, 10000), "another raw client's ping failed");
		cr_assert(h_cmd_json(mc, "admin", "{\"ping\": 1}", &reply, &err),
			  "a driver's ping failed: %s", err.message);
		bson_destroy(&reply);
		pings++;
		h_sleep_ms(50);
	}
	h_stats(mc, &st);
	cr_log_info("exhaust non-reader closed after %lld ms, %lld stream replies, %lld reloads; "
		    "%lld pings of other clients served meanwhile",
		    (long long)(h_now_ms() - t0),
		    (long long)h_get_int(&st, "counters.hello_stream_replies", -1),
		    (long long)reloads, (long long)pings);
	cr_assert_eq(h_get_int(&st, "gauges.hellos_held", -1), 0, "the closed client's hold stays");
	bson_destroy(&st);
	cr_assert(raw_wait_closed(fd, 30000), "the proxy did not close the non-reader's socket");
	cr_assert(raw_ping_ok(other, 10000), "another client after the close");
	proxy_assert_alive(p, "after closing the non-reader");
	bson_destroy(tv);
	free(base);
	mongoc_client_destroy(mc);
	close(fd);
	close(other);
	proxy_stop(p);
}
