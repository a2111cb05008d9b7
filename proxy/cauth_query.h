/*
 * cauth_query.h — auth_query: users' SCRAM secrets fetched from the backend
 * ({usersInfo: {user, db}, showCredentials: true} as the proxy's own
 * backend_uri identity), cached per user (secrets for auth_cache_ttl_ms,
 * "no such user" for auth_negative_ttl_ms).
 *
 *   cq_get ─▶ fresh in the cache: CQ_FOUND / CQ_NOT_FOUND at once
 *          ─▶ a lookup of that user runs: join it, CQ_PENDING
 *          ─▶ else, within the bounds below, a new lookup, CQ_PENDING; each
 *             waiter's done() runs when it ends
 *          ─▶ else CQ_REFUSED (logged, counted; nothing sent)
 *   cq_refresh ─▶ the same, the cached answer dropped first (a login
 *             failed with it)
 *
 * Bounds (unauthenticated clients choose the names): a connection starts at
 * most CQ_CONN_LOOKUPS lookups until it logs in; at most
 * auth_query_max_inflight (and pool_size - 1) lookups are sent at once, the
 * others wait in order for a slot (a hello's cache warm-up does not wait: it
 * is refused); the cache holds at most auth_cache_max_entries entries,
 * pending ones included. Never blocks the event loop; a sent lookup is
 * bounded like any request (queue_timeout_ms, backend errors).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/users.h"
#include "core/list.h"

enum cq_status { CQ_FOUND, CQ_NOT_FOUND, CQ_PENDING, CQ_ERROR, CQ_REFUSED };

/* Lookups one connection may start until it logs in (a hello's warm-up and
 * the refresh after a failed login included). */
#define CQ_CONN_LOOKUPS 2

struct cq_entry;

/* One connection asking: its lookup budget and its wait. Rules: on its
 * entry's list while entry is not NULL; done() runs once, after it is off
 * the list; `e` (CQ_FOUND) and `why` (CQ_ERROR) are valid only during the
 * call. `lookups` counts the lookups it started (zeroed on login, see
 * cq_logged_in); `refused` is the reason of its last CQ_REFUSED. */
struct cq_waiter {
	TAILQ_ENTRY(cq_waiter) link;
	struct cq_entry *entry;
	int lookups;
	const char *refused;
	void (*done)(struct cq_waiter *w, enum cq_status st, const struct users_entry *e,
		     const char *why);
};

bool cq_enabled(void);

/* db.user's secret, asked by w's connection. CQ_PENDING: a lookup runs;
 * with `wait` w waits for it, else it only warms the cache. CQ_REFUSED: no
 * lookup could start (w->refused). Never CQ_ERROR. */
enum cq_status cq_get(const char *db, const char *user, struct cq_waiter *w, bool wait,
		      const struct users_entry **e);

/* Drop the cached answer for db.user and look it up again. CQ_PENDING: w
 * waits; CQ_REFUSED (w->refused) or CQ_NOT_FOUND (a name longer than any
 * user's): nothing started, w does not wait. */
enum cq_status cq_refresh(const char *db, const char *user, struct cq_waiter *w);

/* Stop waiting (the client went away). */
void cq_cancel(struct cq_waiter *w);

/* w's connection logged in: its lookup budget is whole again. */
void cq_logged_in(struct cq_waiter *w);

/* Gauges: entries cached (pending included), lookups sent and unanswered. */
int cq_cache_entries(void);
int cq_inflight(void);
