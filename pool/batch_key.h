/*
 * batch_key.h — the key under which lookups merge (pool/batch.c): two finds
 * go into one batch only when their database, collection and key fields
 * (projection, readConcern, $readPreference, maxTimeMS) are the same bytes.
 * Pure: reads a validated find body, writes the key.
 */
#pragma once

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

#define N_KEY_FIELDS 4

/* Where a body's key fields are: each one's raw element (type, key, value)
 * inside the body, NULL when absent; extra_len: the bytes of the document
 * holding them (header and EOO included). */
struct key_parts {
	const uint8_t *elem[N_KEY_FIELDS];
	size_t len[N_KEY_FIELDS];
	size_t extra_len;
};

/* One cheap pass over the validated body (no iterator, no copy). */
void batch_key_parts(const bson_t *body, struct key_parts *kp);
/* The key's length for this database and collection. */
size_t batch_key_len(const struct key_parts *kp, const char *db, const char *coll);
/* The key (batch_key_len bytes): db NUL coll NUL, then the document of the
 * key fields in a fixed order, so equal lookups give equal keys. */
void batch_key_write(const struct key_parts *kp, const char *db, const char *coll, char *out);
