/*
 * cm_heap.h — the curve model's deadline structure: a binary min-heap of
 * intrusive nodes keyed by a time (µs, monotonic). cm_conn.c keeps two: the
 * replies by the time they are due to be written, and the queries in
 * service by the end of their service (for c, the number in service). One
 * timer of the loop waits for the earliest key instead of one timer per
 * reply. Pure data structure: no I/O, no globals (unit-tested in
 * tests/unit/test_curve.c).
 *
 * Rules: a node is in at most one heap at a time; idx is its slot while it
 * is in a heap and -1 otherwise (cm_heap_node_init sets -1). Equal keys
 * leave in no particular order.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cm_heap_node {
	int64_t key;
	int idx; /* slot in the heap, -1 when in none */
};

struct cm_heap {
	struct cm_heap_node **v;
	int n, cap;
};

#define cm_heap_entry(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

static inline void cm_heap_node_init(struct cm_heap_node *x)
{
	x->idx = -1;
}

static inline bool cm_heap_in(const struct cm_heap_node *x)
{
	return x->idx >= 0;
}

/* The node with the smallest key, or NULL when empty. */
static inline struct cm_heap_node *cm_heap_top(const struct cm_heap *h)
{
	return h->n ? h->v[0] : NULL;
}

/* Adds x (not in a heap) with key. Grows the array (xalloc: aborts when out of memory). */
void cm_heap_push(struct cm_heap *h, struct cm_heap_node *x, int64_t key);
/* Removes x (in h). */
void cm_heap_remove(struct cm_heap *h, struct cm_heap_node *x);
/* Removes and returns the smallest node, NULL when empty. */
struct cm_heap_node *cm_heap_pop(struct cm_heap *h);
/* How many nodes have key <= t (visits only those, and their children). */
int cm_heap_count_le(const struct cm_heap *h, int64_t t);
void cm_heap_free(struct cm_heap *h);
