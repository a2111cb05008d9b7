/*
 * cursor_table.c — the cursor table: (cursor id, namespace) → owning client
 * connection id and pool, with each owner's entries on its own list so a
 * closing client's cursors are found without a scan (see cursor_table.h).
 *
 * Rules: two chained hash tables (entries by (id, ns), owners by id),
 * power-of-two sizes grown at load factor 1. An entry is in exactly one
 * hash chain and its owner's list; an owner exists while it has entries and
 * is freed with its last one. Entries are removed only for their owner.
 */
#include "proxy/cursor_table.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/xalloc.h"

/* One open cursor. In the (id, ns) hash chain and in its owner's list. */
struct centry {
	int64_t id;
	uint64_t owner;		       /* client connection id */
	struct pool *pool;	       /* where the cursor lives */
	struct centry *hnext;	       /* hash chain */
	struct centry *onext, **oprev; /* the owner's list */
	char ns[];		       /* "db.coll", or "" (reply named none) */
};

/* A client with at least one entry; freed with its last entry. */
struct cowner {
	uint64_t id;
	struct cowner *hnext;
	struct centry *head;
	int n;
};

/* Chained hash tables, power-of-two sizes, grown at load factor 1. */
static struct centry **etab;
static size_t etab_size;
static int n_entries;
static struct cowner **otab;
static size_t otab_size;
static int n_owners;

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t ehash(int64_t id, const char *ns)
{
	uint64_t h = 1469598103934665603ull;

	for (const unsigned char *p = (const unsigned char *)ns; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return mix64(h ^ (uint64_t)id);
}

static void *grow(void *tab, size_t *size, size_t elem_next_off, uint64_t (*hash)(const void *))
{
	size_t nsize = *size ? *size * 2 : 64;
	void **old = tab, **nt = xcalloc(nsize, sizeof(*nt));

	for (size_t i = 0; i < *size; i++) {
		void *e = old[i];

		while (e != NULL) {
			void **next = (void **)((char *)e + elem_next_off);
			void *after = *next;
			size_t b = hash(e) & (nsize - 1);

			*next = nt[b];
			nt[b] = e;
			e = after;
		}
	}
	free(old);
	*size = nsize;
	return nt;
}

static uint64_t ehash_of(const void *e)
{
	const struct centry *c = e;

	return ehash(c->id, c->ns);
}

static uint64_t ohash_of(const void *o)
{
	return mix64(((const struct cowner *)o)->id);
}

static struct centry **eslot(int64_t id, const char *ns)
{
	struct centry **pp;

	if (etab_size == 0)
		return NULL;
	pp = &etab[ehash(id, ns) & (etab_size - 1)];
	while (*pp != NULL && ((*pp)->id != id || strcmp((*pp)->ns, ns) != 0))
		pp = &(*pp)->hnext;
	return pp;
}

static struct cowner **oslot(uint64_t id)
{
	struct cowner **pp;

	if (otab_size == 0)
		return NULL;
	pp = &otab[mix64(id) & (otab_size - 1)];
	while (*pp != NULL && (*pp)->id != id)
		pp = &(*pp)->hnext;
	return pp;
}

static struct cowner *owner_get(uint64_t id)
{
	struct cowner **pp = oslot(id), *o;

	if (pp != NULL && *pp != NULL)
		return *pp;
	if ((size_t)n_owners + 1 > otab_size)
		otab = grow(otab, &otab_size, offsetof(struct cowner, hnext), ohash_of);
	pp = oslot(id);
	o = xcalloc(1, sizeof(*o));
	o->id = id;
	*pp = o;
	n_owners++;
	return o;
}

static void entry_remove(struct centry **slot)
{
	struct centry *e = *slot;
	struct cowner **op = oslot(e->owner), *o = *op;

	*slot = e->hnext;
	n_entries--;
	*e->oprev = e->onext;
	if (e->onext != NULL)
		e->onext->oprev = e->oprev;
	if (--o->n == 0) {
		*op = o->hnext;
		n_owners--;
		free(o);
	}
	free(e);
}

void cursor_table_record(uint64_t owner, struct pool *pool, int64_t id, const char *ns)
{
	struct centry **pp = eslot(id, ns), *e;
	struct cowner *o;
	size_t nslen = strlen(ns);

	if (pp != NULL && *pp != NULL) {
		if ((*pp)->owner == owner) {
			(*pp)->pool = pool;
			return;
		}
		log_info("cursor %" PRId64 " on %s handed out again: now C-%" PRIu64, id, ns,
			 owner);
		entry_remove(pp);
	}
	if ((size_t)n_entries + 1 > etab_size)
		etab = grow(etab, &etab_size, offsetof(struct centry, hnext), ehash_of);
	pp = eslot(id, ns);
	e = xmalloc(sizeof(*e) + nslen + 1);
	e->id = id;
	e->owner = owner;
	e->pool = pool;
	memcpy(e->ns, ns, nslen + 1);
	e->hnext = NULL;
	*pp = e;
	n_entries++;
	o = owner_get(owner);
	e->onext = o->head;
	if (o->head != NULL)
		o->head->oprev = &e->onext;
	o->head = e;
	e->oprev = &o->head;
	o->n++;
}

/* The entry a client's (id, ns) names: exact, else one without namespace. */
static struct centry **lookup(int64_t id, const char *ns)
{
	struct centry **pp = eslot(id, ns);

	if (pp != NULL && *pp == NULL && ns[0] != '\0')
		pp = eslot(id, "");
	return pp != NULL && *pp != NULL ? pp : NULL;
}

uint64_t cursor_table_owner(int64_t id, const char *ns)
{
	struct centry **pp = lookup(id, ns);

	return pp != NULL ? (*pp)->owner : 0;
}

struct pool *cursor_table_pool(int64_t id, const char *ns)
{
	struct centry **pp = lookup(id, ns);

	return pp != NULL ? (*pp)->pool : NULL;
}

void cursor_table_forget(uint64_t owner, int64_t id, const char *ns)
{
	struct centry **pp = lookup(id, ns);

	if (pp != NULL && (*pp)->owner == owner)
		entry_remove(pp);
}

int cursor_open_count(void)
{
	return n_entries;
}

int cursor_table_owner_count(uint64_t owner)
{
	struct cowner **pp = oslot(owner);

	return pp != NULL && *pp != NULL ? (*pp)->n : 0;
}

static int cmp_pool_ns(const void *a, const void *b)
{
	const struct centry *x = *(const struct centry *const *)a;
	const struct centry *y = *(const struct centry *const *)b;

	if (x->pool != y->pool)
		return (uintptr_t)x->pool < (uintptr_t)y->pool ? -1 : 1;
	return strcmp(x->ns, y->ns);
}

int cursor_table_drop_owner(uint64_t owner, cursor_table_cb cb, void *arg)
{
	struct cowner **op = oslot(owner);
	struct centry **all, *e;
	int n = 0, total;

	if (op == NULL || *op == NULL)
		return 0;
	total = (*op)->n;
	all = xmalloc(sizeof(*all) * (size_t)total);
	for (e = (*op)->head; e != NULL; e = e->onext)
		all[n++] = e;
	qsort(all, (size_t)n, sizeof(*all), cmp_pool_ns);
	for (int i = 0; i < n; i++) {
		cb(all[i]->pool, all[i]->ns, all[i]->id, arg);
		cursor_table_forget(owner, all[i]->id, all[i]->ns);
	}
	free(all);
	return total;
}
