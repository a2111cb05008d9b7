/*
 * pool_table.c — the table of pools itself: its slots and the target's
 * index (pool.h, pool_int.h). A leaf: it calls no other file of pool/, so
 * every file may read the table without joining a call circle.
 */
#include "pool/pool_int.h"

#include "core/xalloc.h"

static struct pool *pools; /* pool_cap slots: pointers stay valid */
static int npools, pool_cap;
static int target;

int pool_count(void)
{
	return npools;
}

struct pool *pool_at(int i)
{
	return &pools[i];
}

struct pool *pool_target(void)
{
	return &pools[target];
}

void pool_table_alloc(int cap)
{
	pool_cap = cap;
	pools = xcalloc((size_t)pool_cap, sizeof(*pools));
}

struct pool *pool_table_add(void)
{
	return &pools[npools++];
}

bool pool_full(void)
{
	return npools == pool_cap;
}

void pool_set_target(const struct pool *p)
{
	target = (int)(p - pools);
}
