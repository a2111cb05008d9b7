/*
 * select.h — replica-set routing: which member a request goes to.
 *
 * Rules (active only while pool/topology.h monitors a replica set):
 *  - A request with route_pool (its cursor's member, its transaction's)
 *    goes there, whatever the topology says now.
 *  - Otherwise by its $readPreference (none: primary): mode, tags,
 *    maxStalenessSeconds; among the eligible members within
 *    localThresholdMS of the nearest, the least-loaded pool.
 *  - Mongoses (a mongodb+srv:// name of a sharded cluster) serve every
 *    request: the least-loaded within localThresholdMS; they apply
 *    $readPreference themselves.
 *  - A member that answered "not primary" or failed to connect is suspect:
 *    not selected until a newer check describes it (and a recheck is
 *    asked for at once).
 *  - A request no member can serve waits here (bounded by
 *    serverSelectionTimeoutMS and queue_timeout_ms) and is selected again
 *    on every topology change; then it fails with 133
 *    FailedToSatisfyReadPreference. It was never sent, so the labels say a
 *    driver may retry it.
 *  - A transaction is pinned to the member its first command went to, by
 *    (lsid, txnNumber), until a later transaction of that session.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

struct pool;
struct request;

/* Record what routing needs from a forwarded command (rs mode only). */
void select_note(struct request *req, bool in_txn);

/* The member `req` should go to now; NULL: none can serve it yet. */
struct pool *select_pool(struct request *req);

/* Wait for a member (WAITQ_SELECT, pool/waitq.h: pool_unqueue takes it
 * off; after serverSelectionTimeoutMS, or queue_timeout_ms when shorter,
 * it fails with FailedToSatisfyReadPreference). */
void select_wait(struct request *req);

/* The topology changed (pool/topology.h's hook): sync pools, retry waiters. */
void select_on_topology(void);

/* Submit the waiting requests again (a member became usable). */
void select_retry_waiting(void);
/* A pause of every pool began or ended: the member waits restart their clocks. */
void select_pause_changed(void);

/* A reply from a member: "not primary" errors make it suspect. */
void select_on_reply(struct pool *p, const bson_t *body);

/* Mark a member suspect and ask for an immediate check. */
void select_suspect(struct pool *p, const char *why);

/* Is any member usable (a primary or secondary not suspect)? */
bool select_any_usable(void);

/* A request waiting in select.c for a member. */
int select_waiting_count(void);
