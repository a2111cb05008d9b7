/*
 * batch.h — coalescing of concurrent find-by-_id lookups into one
 * {_id: {$in: [...]}} query (see docs/batching.md and DESIGN.md for the
 * exact semantics).
 *
 * A lookup (REQ_LOOKUP) joins an open batch (REQ_BATCH) with the same key
 * (database, collection, projection, read concern, read preference) that is
 * still waiting in the pool queue, or opens a new one. When a backend
 * connection takes the batch, batch_seal builds the merged query; the reply
 * is drained with getMore and split back to each lookup in _id order.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/request.h"

struct server;

/* Why a find is not batchable (for tests and debug logs). NULL: batchable. */
const char *batch_classify(const bson_t *find_cmd);

/* Take `req` (a find) into the batcher; false: forward it as is. */
bool batch_try_submit(struct request *req, const bson_t *body);

/* Build the merged query of a batch about to be sent. */
void batch_seal(struct request *batch_req);

/* A reply for a running batch. */
void batch_on_reply(struct server *s, struct request *batch_req, uint8_t *data, size_t len);

/* The batch's server failed / the batch waited too long / its pool is down. */
void batch_server_failed(struct request *batch_req, int code, const char *codename,
			 const char *why);
void batch_expired(struct request *batch_req);

/* A lookup's client went away. */
void batch_abandon(struct request *lookup_req);
