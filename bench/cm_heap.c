/*
 * cm_heap.c — the curve model's deadline min-heap (see cm_heap.h).
 */
#include "bench/cm_heap.h"

#include <stdlib.h>

#include "core/xalloc.h"

static void put(struct cm_heap *h, int i, struct cm_heap_node *x)
{
	h->v[i] = x;
	x->idx = i;
}

static void sift_up(struct cm_heap *h, int i)
{
	struct cm_heap_node *x = h->v[i];

	while (i > 0) {
		int p = (i - 1) / 2;

		if (h->v[p]->key <= x->key)
			break;
		put(h, i, h->v[p]);
		i = p;
	}
	put(h, i, x);
}

static void sift_down(struct cm_heap *h, int i)
{
	struct cm_heap_node *x = h->v[i];

	for (;;) {
		int l = 2 * i + 1, m = l;

		if (l >= h->n)
			break;
		if (l + 1 < h->n && h->v[l + 1]->key < h->v[l]->key)
			m = l + 1;
		if (h->v[m]->key >= x->key)
			break;
		put(h, i, h->v[m]);
		i = m;
	}
	put(h, i, x);
}

void cm_heap_push(struct cm_heap *h, struct cm_heap_node *x, int64_t key)
{
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 64;
		h->v = xrealloc(h->v, (size_t)h->cap * sizeof *h->v);
	}
	x->key = key;
	put(h, h->n++, x);
	sift_up(h, h->n - 1);
}

void cm_heap_remove(struct cm_heap *h, struct cm_heap_node *x)
{
	int i = x->idx;
	struct cm_heap_node *last = h->v[--h->n];

	x->idx = -1;
	if (i == h->n)
		return;
	put(h, i, last);
	if (i > 0 && h->v[(i - 1) / 2]->key > last->key)
		sift_up(h, i);
	else
		sift_down(h, i);
}

struct cm_heap_node *cm_heap_pop(struct cm_heap *h)
{
	struct cm_heap_node *x = cm_heap_top(h);

	if (x)
		cm_heap_remove(h, x);
	return x;
}

static int count_le(const struct cm_heap *h, int i, int64_t t)
{
	if (i >= h->n || h->v[i]->key > t)
		return 0;
	return 1 + count_le(h, 2 * i + 1, t) + count_le(h, 2 * i + 2, t);
}

int cm_heap_count_le(const struct cm_heap *h, int64_t t)
{
	return count_le(h, 0, t);
}

void cm_heap_free(struct cm_heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}
