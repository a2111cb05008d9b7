/*
 * membound.h — the global memory bound (max_buffer_bytes).
 *
 * Counted: every client's socket buffers (unread input and unsent replies,
 * through evbuffer callbacks in client.c) and the request messages parsed
 * but not yet handed to a backend (request->held_bytes).
 *
 * Rules: at max_buffer_bytes the proxy is paused: no client socket is read
 * (requests already parsed still run and their replies are still sent, so
 * memory drains); below three quarters of it reading resumes. Entering and
 * leaving are logged once each at warning. The per-client bounds live in
 * client.c (client_may_dispatch, may_parse).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Bytes came into (delta > 0) or left (delta < 0) a counted buffer. */
void membound_add(int64_t delta);
bool membound_paused(void);
int64_t membound_bytes(void);
/* max_buffer_bytes may have changed (reload). */
void membound_apply_cfg(void);
/* Release the event (shutdown). */
void membound_free(void);
