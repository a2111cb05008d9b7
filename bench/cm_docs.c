/*
 * cm_docs.c — the curve model's virtual collection and its cursors (see
 * cm_docs.h).
 */
#include "bench/cm_docs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/list.h"
#include "core/xalloc.h"

/* ------------------------------------------------------------ documents */

/* Bytes of every field but the payload string, header and end included. */
#define FIXED_BYTES 110
#define PAYLOAD_LEN (CM_DOC_BYTES - FIXED_BYTES)

static char payload[PAYLOAD_LEN + 1];

static const char *payload_text(void)
{
	static const char words[] = "the quick brown fox jumps over the lazy dog; "
				    "pack my box with five dozen liquor jugs; ";

	if (payload[0] == '\0') {
		for (size_t i = 0; i < PAYLOAD_LEN; i++)
			payload[i] = words[i % (sizeof words - 1)];
		payload[PAYLOAD_LEN] = '\0';
	}
	return payload;
}

/* Document id under key (CM_DOC_BYTES bytes of BSON). */
static void append_doc(bson_t *arr, const char *key, int64_t id)
{
	char name[32];
	bson_t d;

	snprintf(name, sizeof name, "user-%010lld", (long long)id);
	bson_append_document_begin(arr, key, -1, &d);
	BSON_APPEND_INT64(&d, "_id", id);
	BSON_APPEND_UTF8(&d, "name", name);
	BSON_APPEND_INT32(&d, "group", (int32_t)(id % 1000));
	BSON_APPEND_DOUBLE(&d, "score", (double)(id % 10007) / 100.0);
	BSON_APPEND_DATE_TIME(&d, "created", INT64_C(1700000000000) + id * 1000);
	BSON_APPEND_BOOL(&d, "active", id % 3 != 0);
	bson_append_utf8(&d, "payload", 7, payload_text(), PAYLOAD_LEN);
	bson_append_document_end(arr, &d);
}

void cm_docs_batch(bson_t *arr, const int64_t *ids, size_t n, size_t *pos, int64_t max)
{
	char buf[16];
	const char *key;
	uint32_t k = 0;

	while (*pos < n && (max < 0 || (int64_t)k < max) &&
	       arr->len + CM_DOC_BYTES + 16 <= CM_BATCH_BYTES) {
		bson_uint32_to_string(k++, &key, buf, sizeof buf);
		append_doc(arr, key, ids[(*pos)++]);
	}
}

/* ------------------------------------------------------------ filters */

/* Is the value at it an existing id? */
static bool id_of(const bson_iter_t *it, int64_t ndocs, int64_t *id)
{
	double d;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_INT32:
		*id = bson_iter_int32(it);
		break;
	case BSON_TYPE_INT64:
		*id = bson_iter_int64(it);
		break;
	case BSON_TYPE_DOUBLE:
		d = bson_iter_double(it);
		if (!(d >= 0 && d < (double)ndocs) || floor(d) != d)
			return false;
		*id = (int64_t)d;
		break;
	default:
		return false;
	}
	return *id >= 0 && *id < ndocs;
}

static void add_value(struct cm_ids *out, const bson_iter_t *it, int64_t ndocs, size_t *cap)
{
	int64_t id;

	out->asked++;
	if (!id_of(it, ndocs, &id))
		return;
	if (out->n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		out->v = xrealloc(out->v, *cap * sizeof *out->v);
	}
	out->v[out->n++] = id;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Sorts the found ids and keeps each once. */
static void sort_unique(struct cm_ids *out)
{
	size_t w = 0;

	if (out->n < 2)
		return;
	qsort(out->v, out->n, sizeof *out->v, cmp_i64);
	for (size_t r = 0; r < out->n; r++)
		if (w == 0 || out->v[w - 1] != out->v[r])
			out->v[w++] = out->v[r];
	out->n = w;
}

/* {$eq: v} or {$in: [...]} under _id. */
static bool operator_doc(bson_iter_t *it, int64_t ndocs, struct cm_ids *out, size_t *cap,
			 const char **why)
{
	bson_iter_t op, arr;

	if (!bson_iter_recurse(it, &op) || !bson_iter_next(&op))
		goto bad;
	if (!strcmp(bson_iter_key(&op), "$eq")) {
		add_value(out, &op, ndocs, cap);
	} else if (!strcmp(bson_iter_key(&op), "$in") && BSON_ITER_HOLDS_ARRAY(&op) &&
		   bson_iter_recurse(&op, &arr)) {
		while (bson_iter_next(&arr))
			add_value(out, &arr, ndocs, cap);
	} else {
		goto bad;
	}
	if (bson_iter_next(&op))
		goto bad;
	return true;
bad:
	*why = "the curve model answers find on _id only: {_id: v}, {_id: {$eq: v}} or "
	       "{_id: {$in: [...]}}";
	return false;
}

bool cm_docs_filter(const bson_t *filter, int64_t ndocs, struct cm_ids *out, const char **why)
{
	bson_iter_t it;
	size_t cap = 0;

	memset(out, 0, sizeof *out);
	*why = "the curve model answers find on _id only: {_id: v}, {_id: {$eq: v}} or "
	       "{_id: {$in: [...]}}";
	if (!bson_iter_init(&it, filter) || !bson_iter_next(&it) ||
	    strcmp(bson_iter_key(&it), "_id") != 0)
		return false;
	if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
		if (!operator_doc(&it, ndocs, out, &cap, why))
			goto bad;
	} else {
		add_value(out, &it, ndocs, &cap);
	}
	if (bson_iter_next(&it))
		goto bad;
	sort_unique(out);
	return true;
bad:
	cm_ids_free(out);
	return false;
}

void cm_ids_free(struct cm_ids *ids)
{
	free(ids->v);
	memset(ids, 0, sizeof *ids);
}

/* ------------------------------------------------------------ cursors */

struct cm_cursor {
	int64_t id;
	char ns[256];
	int64_t *ids; /* the find's ids; ids[pos..n) are still to come */
	size_t n, pos;
	int64_t used_s; /* last opened or read (monotonic seconds) */
	TAILQ_ENTRY(cm_cursor) link;
};

/* Every open cursor; cursor_ids = the ids they hold in total. */
static TAILQ_HEAD(, cm_cursor) cursors = TAILQ_HEAD_INITIALIZER(cursors);
static int ncursors;
static size_t cursor_ids;
static int64_t next_cursor_id = 1000001;

static int64_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void cursor_close(struct cm_cursor *c)
{
	TAILQ_REMOVE(&cursors, c, link);
	ncursors--;
	cursor_ids -= c->n;
	free(c->ids);
	free(c);
}

int64_t cm_cursor_open(const char *ns, int64_t *ids, size_t n, size_t pos)
{
	struct cm_cursor *c;

	if (ncursors >= CM_MAX_CURSORS || cursor_ids + n > CM_MAX_CURSOR_IDS) {
		free(ids);
		return 0;
	}
	c = xcalloc(1, sizeof *c);
	c->id = next_cursor_id++;
	snprintf(c->ns, sizeof c->ns, "%s", ns);
	c->ids = ids;
	c->n = n;
	c->pos = pos;
	c->used_s = mono_s();
	TAILQ_INSERT_TAIL(&cursors, c, link);
	ncursors++;
	cursor_ids += n;
	return c->id;
}

struct cm_cursor *cm_cursor_find(int64_t id, const char *ns)
{
	struct cm_cursor *c;

	TAILQ_FOREACH(c, &cursors, link) {
		if (c->id == id && !strcmp(c->ns, ns)) {
			c->used_s = mono_s();
			return c;
		}
	}
	return NULL;
}

int64_t cm_cursor_next(struct cm_cursor *c, bson_t *arr, int64_t max)
{
	int64_t id = c->id;

	cm_docs_batch(arr, c->ids, c->n, &c->pos, max);
	if (c->pos < c->n)
		return id;
	cursor_close(c);
	return 0;
}

bool cm_cursor_kill(int64_t id)
{
	struct cm_cursor *c;

	TAILQ_FOREACH(c, &cursors, link) {
		if (c->id == id) {
			cursor_close(c);
			return true;
		}
	}
	return false;
}

void cm_cursor_expire(bool all)
{
	struct cm_cursor *c, *tmp;
	int64_t now = mono_s();

	TAILQ_FOREACH_SAFE(c, &cursors, link, tmp) {
		if (all || now - c->used_s >= CM_CURSOR_IDLE_S)
			cursor_close(c);
	}
}

int cm_cursor_count(void)
{
	return ncursors;
}
