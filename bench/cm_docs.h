/*
 * cm_docs.h — the curve model's virtual collection: --docs N documents with
 * _id 0 .. N-1 (int64), each about CM_DOC_BYTES bytes (the seed's 11 GB /
 * 20 M), synthesized when a reply needs them; any database and collection
 * name holds the same documents. Also the cursors of finds whose result did
 * not fit one batch.
 *
 * Filters answered: {_id: v}, {_id: {$eq: v}}, {_id: {$in: [v, ...]}}. A v
 * matches when it is a number (int32, int64, or a double with an integral
 * value) in [0, N); every other value (strings, ObjectIds, out of range) is
 * simply not found. Results are ascending by _id, duplicates once.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CM_DOC_BYTES	  550
#define CM_BATCH_BYTES	  (16 * 1024 * 1024 - 16 * 1024) /* documents in one reply */
#define CM_MAX_CURSORS	  1000
#define CM_MAX_CURSOR_IDS (8 * 1024 * 1024) /* ids held by all cursors together */
#define CM_CURSOR_IDLE_S  600		    /* mongod's cursorTimeoutMillis */

/* The ids a filter asks for: found ids (sorted, once) and how many it named. */
struct cm_ids {
	int64_t *v; /* malloc'd (xalloc), or NULL */
	size_t n;
	size_t asked; /* values in the filter (the query's k for the curve) */
};

/* Reads filter into *out; false with why set when it is not an _id lookup. */
bool cm_docs_filter(const bson_t *filter, int64_t ndocs, struct cm_ids *out, const char **why)
    __attribute__((warn_unused_result));
void cm_ids_free(struct cm_ids *ids);

/* Appends documents ids[*pos ..] to array arr (keys from 0) until `max` of
 * them (max < 0: no count limit) or CM_BATCH_BYTES; advances *pos. */
void cm_docs_batch(bson_t *arr, const int64_t *ids, size_t n, size_t *pos, int64_t max);

/* A cursor over the rest of a find's ids. Rules: on the cursor list from
 * cm_cursor_open until cm_cursor_close (exhausted, killed, expired). */
struct cm_cursor;

/* Opens a cursor over ids[pos..n) (takes ids over); 0 when the limits are
 * reached (ids are then freed). */
int64_t cm_cursor_open(const char *ns, int64_t *ids, size_t n, size_t pos);
/* The cursor with this id and namespace, or NULL; marks it used. */
struct cm_cursor *cm_cursor_find(int64_t id, const char *ns);
/* Appends its next batch (up to max documents, max < 0: no limit) to arr;
 * returns the cursor id to report (0: exhausted, and closed). */
int64_t cm_cursor_next(struct cm_cursor *c, bson_t *arr, int64_t max);
bool cm_cursor_kill(int64_t id);
/* Closes cursors unused for CM_CURSOR_IDLE_S; all of them with all = true. */
void cm_cursor_expire(bool all);
int cm_cursor_count(void);
