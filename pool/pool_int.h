/*
 * pool_int.h — the pool table's internals shared by pool/pool.c (the table,
 * target and connect outcomes), pool/pool_dispatch.c (fair queue, dispatch,
 * expiry) and pool/pool_members.c (replica-set member sync).
 * Private to pool/pool*.c.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "pool/gate.h"
#include "pool/pool.h"

/* A new pool's adaptive limit (pool/limit.h) from the settings. */
void pool_limit_init(struct pool *p);
/* adaptive_concurrency: start waiters on idle connections while the limit
 * lets them (it rose, or an exchange ended on a connection that closed). */
void pool_fill_idle(struct pool *p);

/* A pool's own wait queue (WAITQ_POOL, pool_dispatch.c). */
extern const struct waitq_ops pool_waitq_ops;

/* Initialise a pool's lists and names (the table's and child pools). */
void pool_init(struct pool *p, const char *name, const char *host, uint16_t port);

/* A new pool in the next free slot (the caller checked !pool_full()). */
struct pool *pool_new(const char *name, const char *host, uint16_t port);

/* The table (pool_table.c): `cap` slots, made once; the next free slot. */
void pool_table_alloc(int cap);
struct pool *pool_table_add(void);

/* Every slot of the table is in use. */
bool pool_full(void);

/* The target server's pool becomes p (a member of the table). */
void pool_set_target(const struct pool *p);

/* Replica set: p's waiting requests go to another member; those bound to p
 * (cursor, transaction) fail with code/codename/why. */
void pool_rs_requeue(struct pool *p, int code, const char *codename, const char *why);

/* Open connections for p's waiting requests (within pool_size and the cap). */
void pool_connect_for_waiters(struct pool *p);
/* The same, asking the gate (pool/gate.h) at `step`. */
void pool_connect_for_waiters_at(struct pool *p, enum gate_step step);

/* The backend of p cannot be reached: req fails with p's last login error
 * (code 18) or HostUnreachable, `why` in the message. */
void pool_fail_unreachable(struct pool *p, struct request *req, const char *why);
