/*
 * batch_split.c — splitting the batcher's merged reply among its members
 * (docs/batching.md), moved out of batch_ids.c. Pure functions over libbson
 * values: no event loop, no pool, no globals.
 *
 *   reply documents ──▶ batch_ids_doc_init ──▶ batch_ids_split_ok
 *     ──▶ batch_ids_docs_for (per member) ──▶ batch_ids_reply (its cursor reply)
 *
 * Declared in pool/batch_ids.h; the comparison is batch_ids_compare there.
 */
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "pool/batch_ids.h"

/* ---- splitting the reply ------------------------------------------------ */

bool batch_ids_doc_init(struct batch_ids_doc *d, const uint8_t *data, uint32_t len)
{
	bson_t view;
	bson_iter_t it;

	if (!bson_init_static(&view, data, len) || !bson_iter_init_find(&it, &view, "_id"))
		return false;
	d->data = data;
	d->len = len;
	d->id = *bson_iter_value(&it); /* a view into data */
	return true;
}

static int cmp_docs_qsort(const void *a, const void *b)
{
	return batch_ids_compare(&((const struct batch_ids_doc *)a)->id,
				 &((const struct batch_ids_doc *)b)->id);
}

/* Index of the document whose _id equals id, -1 if none (docs sorted). */
static int find_doc(const struct batch_ids_doc *docs, int ndocs, const bson_value_t *id)
{
	int lo = 0, hi = ndocs;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		int c = batch_ids_compare(&docs[mid].id, id);

		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Every _id comparable exactly. */
static bool ids_comparable(const struct batch_ids_doc *docs, int ndocs)
{
	for (int j = 0; j < ndocs; j++)
		if (!batch_ids_value_ok(&docs[j].id))
			return false; /* e.g. the decimal 0.5 for the double 0.5 */
	return true;
}

/* Strictly ascending _id: no sort needed, no two equal. */
static bool docs_ascending(const struct batch_ids_doc *docs, int ndocs)
{
	for (int j = 1; j < ndocs; j++)
		if (batch_ids_compare(&docs[j - 1].id, &docs[j].id) >= 0)
			return false;
	return true;
}

bool batch_ids_split_ok(struct batch_ids_doc *docs, int ndocs,
			const struct batch_id_list *const *lists, int nlists)
{
	bool *claimed, ok = true;

	if (!ids_comparable(docs, ndocs))
		return false;
	if (!docs_ascending(docs, ndocs)) { /* backends usually answer in _id order */
		qsort(docs, (size_t)ndocs, sizeof(*docs), cmp_docs_qsort);
		for (int j = 1; j < ndocs; j++)
			if (batch_ids_compare(&docs[j - 1].id, &docs[j].id) == 0)
				return false; /* the backend's equality is not ours */
	}
	claimed = xcalloc((size_t)ndocs + 1, sizeof(bool));
	for (int k = 0; k < nlists; k++)
		for (int i = 0; i < lists[k]->n; i++) {
			int j = find_doc(docs, ndocs, &lists[k]->ids[i]);

			if (j >= 0)
				claimed[j] = true;
		}
	for (int j = 0; j < ndocs; j++)
		if (!claimed[j])
			ok = false; /* a document nobody asked for: collation, view, quirk */
	free(claimed);
	return ok;
}

int batch_ids_docs_for(const struct batch_ids_doc *docs, int ndocs, const struct batch_id_list *l,
		       int *out)
{
	int n = 0;

	for (int i = 0; i < l->n; i++) { /* ids ascending: so are their documents */
		int j = find_doc(docs, ndocs, &l->ids[i]);

		if (j >= 0)
			out[n++] = j;
	}
	return n;
}

/* ---- a member's reply ------------------------------------------------- */

/* Appends an element's type byte and key (with its NUL) at p. */
static uint8_t *put_key(uint8_t *p, uint8_t type, const char *key, size_t klen)
{
	*p++ = type;
	memcpy(p, key, klen + 1);
	return p + klen + 1;
}

static uint8_t *put_i32(uint8_t *p, int32_t v)
{
	uint32_t le = BSON_UINT32_TO_LE((uint32_t)v);

	memcpy(p, &le, 4);
	return p + 4;
}

/* Element sizes: type byte, key and NUL, value. */
#define ELEM(klen, vlen) (1 + (size_t)(klen) + 1 + (size_t)(vlen))

uint8_t *batch_ids_reply(const struct batch_ids_doc *docs, const int *idx, int n, const char *db,
			 const char *coll, uint32_t *len)
{
	size_t dl = strlen(db), cl = strlen(coll), arr = 4 + 1, cur, total;
	uint64_t zero = 0, one_le;
	double one = 1.0;
	char key[16];
	const char *k;
	uint8_t *out, *p;

	for (int i = 0; i < n; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		arr += ELEM(strlen(k), docs[idx[i]].len);
	}
	cur = 4 + ELEM(10, arr) + ELEM(2, 8) + ELEM(2, 4 + dl + 1 + cl + 1) + 1;
	total = 4 + ELEM(6, cur) + ELEM(2, 8) + 1;
	out = xmalloc(total);
	p = put_i32(out, (int32_t)total);
	p = put_key(p, BSON_TYPE_DOCUMENT, "cursor", 6);
	p = put_i32(p, (int32_t)cur);
	p = put_key(p, BSON_TYPE_ARRAY, "firstBatch", 10);
	p = put_i32(p, (int32_t)arr);
	for (int i = 0; i < n; i++) {
		const struct batch_ids_doc *f = &docs[idx[i]];

		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		p = put_key(p, BSON_TYPE_DOCUMENT, k, strlen(k));
		memcpy(p, f->data, f->len);
		p += f->len;
	}
	*p++ = 0; /* end of firstBatch */
	p = put_key(p, BSON_TYPE_INT64, "id", 2);
	memcpy(p, &zero, 8);
	p += 8;
	p = put_key(p, BSON_TYPE_UTF8, "ns", 2);
	p = put_i32(p, (int32_t)(dl + 1 + cl + 1));
	memcpy(p, db, dl);
	p[dl] = '.';
	memcpy(p + dl + 1, coll, cl + 1);
	p += dl + 1 + cl + 1;
	*p++ = 0; /* end of cursor */
	p = put_key(p, BSON_TYPE_DOUBLE, "ok", 2);
	memcpy(&one_le, &one, 8);
	one_le = BSON_UINT64_TO_LE(one_le);
	memcpy(p, &one_le, 8);
	p += 8;
	*p++ = 0;
	*len = (uint32_t)(p - out);
	return out;
}

/* ---- the size of a lookup ----------------------------------------------- */

int batch_ids_count(const bson_t *find_cmd)
{
	bson_iter_t it, in;
	int n = 0;

	if (!bson_iter_init(&it, find_cmd) ||
	    !bson_iter_find_descendant(&it, "filter._id.$in", &in) || !BSON_ITER_HOLDS_ARRAY(&in) ||
	    !bson_iter_recurse(&in, &it))
		return 1;
	while (bson_iter_next(&it))
		n++;
	return n > 0 ? n : 1;
}
