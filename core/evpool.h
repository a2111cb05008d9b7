/*
 * evpool.h — a free list of empty evbuffers for the hot path's per-message
 * buffers (a framed client message, a request's message, a backend reply):
 * taking one from the list costs a few instructions where evbuffer_new and
 * evbuffer_free cost a calloc and a free each, three times per request.
 *
 * Rules: only for buffers without callbacks, without a lock and not frozen
 * (what evpool_get hands out); evpool_put drains the buffer (freeing its
 * chains) and keeps at most EVPOOL_MAX of them, freeing the rest; the event
 * loop's thread only (no locks); evpool_clear frees the list at exit.
 */
#pragma once

#include <event2/buffer.h>

#define EVPOOL_MAX 256

/* An empty evbuffer (from the list, else a new one; never NULL). */
struct evbuffer *evpool_get(void);
/* Give an evbuffer back (NULL: nothing); its bytes are dropped. */
void evpool_put(struct evbuffer *buf);
/* Free every kept evbuffer. */
void evpool_clear(void);
