/*
 * test_short_opmsg.c — an OP_MSG of 16 to 19 bytes ends before its flagBits
 * word. The proxy refuses it (too short) and, as the flags are unknown,
 * answers with an error: a client that sent it expects an answer or a close,
 * and the connection stays usable (the framing is intact). The old code read
 * the flags past the end of the message, so whatever the buffer held there
 * decided whether it answered. To make that deterministic, the proxy runs
 * with MALLOC_PERTURB_ (glibc fills fresh allocations with 0xaa) — under ASan
 * its own malloc fill (0xbe) does the same: both have the moreToCome bit set.
 * The available flag bytes are 0xff (moreToCome claimed in a partial word).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

Test(short_opmsg, answered_and_usable, .timeout = 90)
{
	struct proxy *p;

	setenv("MALLOC_PERTURB_", "85", 1); /* inherited by the proxy */
	p = proxy_start(NULL);
	unsetenv("MALLOC_PERTURB_");
	for (int32_t len = 16; len <= 19; len++) {
		int fd = raw_connect(p);
		struct h_buf b;
		struct raw_reply r;
		enum raw_status st;
		uint8_t *msg = NULL;
		size_t mlen = 0;

		cr_assert(fd >= 0, "connect");
		hb_init(&b);
		hb_header(&b, 700 + len, 0, H_WIRE_OP_MSG);
		for (int32_t i = 16; i < len; i++)
			hb_u8(&b, 0xff);
		hb_set_i32(&b, 0, len);
		cr_assert(raw_send(fd, b.data, b.len), "send %d bytes", len);
		st = raw_recv_msg(fd, &msg, &mlen, 5000);
		cr_assert_eq(st, RAW_OK, "%d-byte OP_MSG: no error reply (%s)", len,
			     raw_status_name(st));
		cr_assert(raw_parse_reply(msg, mlen, &r) && r.have_doc, "%d bytes: reply parses",
			  len);
		cr_assert_eq(r.response_to, 700 + len, "%d bytes: responseTo", len);
		cr_assert_eq(h_get_int(&r.doc, "ok", 1), 0, "%d bytes: ok", len);
		cr_assert_eq(h_get_int(&r.doc, "code", 0), 2, "%d bytes: code BadValue", len);
		cr_log_info("%d-byte OP_MSG answered: %s", len, h_get_str(&r.doc, "errmsg"));
		free(msg);
		cr_assert(raw_ping_ok(fd, 5000), "%d bytes: connection not usable after the reply",
			  len);
		close(fd);
		hb_free(&b);
	}
	proxy_stop(p);
}
