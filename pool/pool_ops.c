/*
 * pool_ops.c — where the table of pool_ops.h is kept. A leaf: it calls
 * through the table only.
 */
#include "pool/pool_ops.h"

const struct pool_ops *pool_ops;

uint64_t pool_ops_queue_limit_usec(void)
{
	return pool_ops->queue_limit_usec();
}

void pool_ops_refuse_timeout(struct request *req)
{
	pool_ops->refuse_timeout(req);
}
