/*
 * test_logctx.c — log lines carry their context: a batched lookup's lines
 * name the batch (B-<id>), the client connection (C-<id>) and the client's
 * requestID, from joining to sealing (pool/batch.c's log_debug lines), so
 * one lookup can be followed through the batcher in the log.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NLOOKUPS 3
#define WAIT_MS	 10000

Test(logctx, batch_lines_name_batch_client_and_request, .timeout = 60)
{
	struct proxy *p = proxy_start("pool_size = 1\nbatching = on\nbatch_max_wait_us = 50000\n"
				      "log_level = debug\n");
	int fds[NLOOKUPS];
	char want[128], db[64];

	h_unique(db, sizeof(db), "logctx");
	for (int i = 0; i < NLOOKUPS; i++) {
		bson_t *cmd = BCON_NEW("find", "c", "filter", "{", "_id", BCON_INT32(i), "}", "$db",
				       BCON_UTF8(db));
		struct h_buf b;

		fds[i] = raw_connect(p);
		cr_assert_geq(fds[i], 0);
		hb_init(&b);
		h_build_msg(&b, 700 + i, 0, cmd);
		cr_assert(raw_send(fds[i], b.data, b.len));
		hb_free(&b);
		bson_destroy(cmd);
	}
	for (int i = 0; i < NLOOKUPS; i++) {
		uint8_t *msg = NULL;
		size_t len = 0;

		cr_expect_eq(raw_recv_msg(fds[i], &msg, &len, WAIT_MS), RAW_OK,
			     "lookup %d: no reply", i);
		free(msg);
		close(fds[i]);
	}
	bool sealed = log_wait(p, " sealed: ", WAIT_MS);
	char *tail = proxy_log_tail(p, 4000);

	snprintf(want, sizeof(want), "B-1 %s.c: C-", db);
	cr_expect(sealed, "no batch sealed line; log:\n%s", tail);
	cr_expect(log_contains(p, want), "no line naming batch B-1 and a client (%s); log:\n%s",
		  want, tail);
	cr_expect(log_contains(p, " request 700 joins"),
		  "the first lookup's requestID is not in its batch line; log:\n%s", tail);
	free(tail);
	proxy_stop(p);
}
