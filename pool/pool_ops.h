/*
 * pool_ops.h — the calls the lower files of pool/ make up into the
 * dispatcher, the gate and the table of pools, the way server_set_watchers
 * tells the pool what happens to a connection: one table of functions,
 * installed by pool.c (pool_ops_install, from pool_init_all), so that
 * waitq.c, sticky.c, pin*.c, select.c, pool_pause.c and pool_users.c call
 * nothing above them by name and pool/'s file-level calls have no circle of
 * more than 3 files (scripts/check-cycles.py).
 *
 *   entry               is          called by
 *   submit              pool_submit        waitq (resubmit), pin, select
 *   dispatch            pool_dispatch      pin, sticky (their own connection)
 *   unqueue             pool_unqueue       sticky
 *   server_idle         pool_server_idle   sticky (stickiness ended)
 *   refuse_timeout      pool_refuse_timeout     pin's and sticky's waits
 *   queue_limit_usec    pool_queue_limit_usec   (pool_ops_* below), pool_pause
 *   connect_for_waiters pool_connect_for_waiters  pool_pause, pool_users
 *   gate                pool_gate          pin, pin_bounds, sticky
 *   init                pool_init          pool_users (child pools)
 *   sync_members        pool_sync_members  select (a new topology)
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "pool/gate.h"

struct pool;
struct request;
struct server;
struct topo_snapshot;

struct pool_ops {
	void (*submit)(struct request *req);
	void (*dispatch)(struct server *s, struct request *req);
	void (*unqueue)(struct request *req);
	void (*server_idle)(struct server *s);
	void (*refuse_timeout)(struct request *req);
	uint64_t (*queue_limit_usec)(void);
	void (*connect_for_waiters)(struct pool *p);
	bool (*gate)(enum gate_step step, struct pool *p, const struct request *req,
		     struct server *s);
	void (*init)(struct pool *p, const char *name, const char *host, uint16_t port);
	void (*sync_members)(const struct topo_snapshot *snap);
};

/* The table (pool_ops.c; NULL until pool_ops_install). */
extern const struct pool_ops *pool_ops;

/* Install pool.c's table (pool_init_all; unit tests that make pools). */
void pool_ops_install(void);

/* The two entries as plain functions, for the tables of waitq_ops. */
uint64_t pool_ops_queue_limit_usec(void);
void pool_ops_refuse_timeout(struct request *req);
