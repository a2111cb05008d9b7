/*
 * batch_sizes.c — per-namespace largest document size seen by the batcher
 * (a small table, least recently observed entry replaced).
 */
#include "pool/batch_sizes.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define NS_MAX		 400
#define TABLE_SIZE	 64
#define REPLY_ENVELOPE	 (64 * 1024) /* cursor, ns, $clusterTime, array keys */
#define PER_DOC_OVERHEAD 16	     /* array key and type byte per document */

/* One namespace's figure. Rules: ns is "db.coll" (empty: free slot);
 * max_doc only grows; last_use orders replacement. */
struct ns_size {
	char ns[NS_MAX];
	uint32_t max_doc;
	uint64_t last_use;
};

static struct ns_size table[TABLE_SIZE];
static uint64_t use_clock;

/* Whether an entry's "db.coll" is db and coll (compared in place: this runs
 * several times per lookup, so no formatting). */
static bool ns_is(const char *ns, const char *db, size_t dl, const char *coll)
{
	return ns[0] != '\0' && memcmp(ns, db, dl) == 0 && ns[dl] == '.' &&
	       strcmp(ns + dl + 1, coll) == 0;
}

static struct ns_size *lookup(const char *db, const char *coll, int create)
{
	struct ns_size *victim = &table[0];
	size_t dl = strlen(db);

	for (int i = 0; i < TABLE_SIZE; i++) {
		if (ns_is(table[i].ns, db, dl, coll))
			return &table[i];
		if (table[i].last_use < victim->last_use)
			victim = &table[i];
	}
	if (!create)
		return NULL;
	snprintf(victim->ns, sizeof(victim->ns), "%s.%s", db, coll);
	victim->max_doc = 0;
	return victim;
}

uint32_t batch_sizes_get(const char *db, const char *coll)
{
	struct ns_size *e = lookup(db, coll, 0);

	return e ? e->max_doc : 0;
}

void batch_sizes_observe(const char *db, const char *coll, uint32_t len)
{
	struct ns_size *e = lookup(db, coll, 1);

	e->last_use = ++use_clock;
	if (len > e->max_doc)
		e->max_doc = len;
}

int batch_sizes_docs_fitting(uint32_t per_doc, int32_t max_message)
{
	int64_t room = (int64_t)max_message - REPLY_ENVELOPE;
	int64_t n;

	if (per_doc == 0)
		return INT32_MAX;
	n = room / ((int64_t)per_doc + PER_DOC_OVERHEAD);
	return n < 1 ? 1 : n > INT32_MAX ? INT32_MAX : (int)n;
}
