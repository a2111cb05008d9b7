/*
 * batch.h — coalescing of concurrent find-by-_id lookups into one
 * {_id: {$in: [...]}} query (exact semantics: docs/batching.md).
 *
 * A lookup (REQ_BATCHED) joins an open batch (its own request) with the same key
 * (database, collection, projection, read concern, read preference,
 * maxTimeMS) that is still waiting in the pool queue, or opens a new one.
 * When a backend connection is idle and batch_max_wait_us is 0, a lookup is
 * simply forwarded: batching adds nothing at low load. When a backend
 * connection takes a batch, batch_seal builds the merged query; the reply is
 * drained with getMore and split back to each lookup in _id order.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/request.h"

struct server;

/* Which finds are batchable, the id comparison and the split: batch_ids.h. */

/* Take `req` (a find) into the batcher; false: forward it as is. */
bool batch_try_submit(struct request *req, const bson_t *body);
/* A lookup's ids (req->route->lookup), freed with its request (route.c). */
struct lookup;
void batch_lookup_free(struct lookup *lk);

/* Build the merged query of a batch about to be sent. */
void batch_seal(struct request *batch_req);

/* A reply for a running batch (its reply callback). */
struct wire_msg;
void batch_on_reply(struct server *s, struct request *batch_req, struct evbuffer *buf,
		    uint8_t *data, size_t len, const struct wire_msg *m);

/* The merged reply announced `len` bytes, more than maxMessageSizeBytes:
 * the server skipped it unread; every lookup is re-run alone and the
 * namespace's document size estimate is raised. The server is released. */
void batch_reply_discarded(struct server *s, struct request *batch_req, int64_t len);

/* The batch's backend connection failed: every lookup is re-run alone. */
void batch_rerun_alone(struct request *batch_req);

/* The batch cannot run (backend unreachable, queue timeout): every lookup
 * gets this error. */
void batch_fail(struct request *batch_req, int code, const char *codename, const char *msg,
		const char *const *labels);

/* Lookups currently waiting in open batches (stats). */
int batch_open_lookups(void);
