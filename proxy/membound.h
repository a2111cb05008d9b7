/*
 * membound.h — the global memory bound (max_buffer_bytes).
 *
 * Counted: every client's socket buffers (unread input and unsent replies,
 * brought up to date by client_account_sync after each read, parse and
 * reply: client.c) and the request messages parsed but not yet handed to a
 * backend (request->held_bytes).
 *
 * Rules: at max_buffer_bytes the proxy is paused; below three quarters of
 * it the pause ends. Entering and leaving are logged once each at warning.
 * While paused, the bound stops the clients that hold the memory, not
 * everyone: a client whose own counted bytes (client.c: io_bytes +
 * req_bytes) reach its share, max_buffer_bytes / clients connected, is
 * heavy: its socket is not read. Every other client is still read. For
 * all of them the per-client reply limit drops to the share
 * (client_may_dispatch): with that much unsent output none of a client's
 * requests is sent to a backend, below it they run one at a time unless
 * its recent replies are small. So a heavy client adds at most one reply
 * and only while its output is below its share, and the light ones
 * together stay below max_buffer_bytes (plus a read chunk and one reply
 * each); replies already running are still delivered. A client that
 * never reads is closed after client_write_timeout_ms (client.c, checked by
 * the janitor), which releases what it holds. The per-client bounds live in
 * client.c (client_may_dispatch, may_parse).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes came into (delta > 0) or left (delta < 0) a counted buffer. */
void membound_add(int64_t delta);
bool membound_paused(void);
/* While paused: does a client holding `held` counted bytes hold its share
 * or more (a heavy client)? Always false when not paused. */
bool membound_heavy(size_t held, int clients);
/* A client's share while paused: max_buffer_bytes / `clients` (those
 * connected: client.c, which asks, counts them). */
size_t membound_share(int clients);
/* Who is told, from the loop after the change that moved the count, that the
 * bound was entered (true) or left: client_memory_paused, set at start
 * (proxy_main), so that this file calls nothing above it. */
void membound_set_tell(void (*tell)(bool paused));
int64_t membound_bytes(void);
/* max_buffer_bytes may have changed (reload). */
void membound_apply_cfg(void);
/* Release the event (shutdown). */
void membound_free(void);
