/*
 * batch_sizes.h — what the batcher has learned about document sizes per
 * namespace, so that a merged query's reply stays under the backend's
 * maxMessageSizeBytes (a reply above it would lose the connection's
 * framing). Pure bookkeeping: no event loop, no globals beyond the table.
 */
#pragma once

#include <stdint.h>

/* Largest document seen in replies for "db.coll", 0: nothing known yet. */
uint32_t batch_sizes_get(const char *db, const char *coll);

/* A reply for "db.coll" held a document of `len` bytes; or (len = the
 * average of a reply too large to read) raise the estimate to it. */
void batch_sizes_observe(const char *db, const char *coll, uint32_t len);

/* How many documents of `per_doc` bytes fit in a reply of at most
 * `max_message` bytes (envelope deducted), at least 1; INT32_MAX when
 * per_doc is 0 (unknown). */
int batch_sizes_docs_fitting(uint32_t per_doc, int32_t max_message);
