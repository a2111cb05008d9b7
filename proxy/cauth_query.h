/*
 * cauth_query.h — auth_query: users' SCRAM secrets fetched from the backend
 * ({usersInfo: {user, db}, showCredentials: true} as the proxy's own
 * backend_uri identity), cached per user for auth_cache_ttl_ms.
 *
 *   cq_get ─▶ fresh in the cache: CQ_FOUND / CQ_NOT_FOUND at once
 *          ─▶ else one lookup per user (later callers join it) sent as a
 *             proxy-made request through the pool (no client), CQ_PENDING;
 *             each waiter's done() runs when it ends
 *   cq_refresh ─▶ the same, the cached answer dropped first (a login
 *             failed with it)
 *
 * Never blocks the event loop; the lookup is bounded like any request
 * (queue_timeout_ms, backend errors).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/users.h"
#include "core/list.h"

enum cq_status { CQ_FOUND, CQ_NOT_FOUND, CQ_PENDING, CQ_ERROR };

struct cq_entry;

/* Someone waiting for a lookup. Rules: on its entry's list while entry is
 * not NULL; done() runs once, after it is off the list; `e` (CQ_FOUND) and
 * `why` (CQ_ERROR) are valid only during the call. */
struct cq_waiter {
	TAILQ_ENTRY(cq_waiter) link;
	struct cq_entry *entry;
	void (*done)(struct cq_waiter *w, enum cq_status st, const struct users_entry *e,
		     const char *why);
};

bool cq_enabled(void);

/* db.user's secret. CQ_PENDING: a lookup runs; w (if not NULL) waits for
 * it, else it only warms the cache. Never CQ_ERROR. */
enum cq_status cq_get(const char *db, const char *user, struct cq_waiter *w,
		      const struct users_entry **e);

/* Drop the cached answer for db.user and look it up again; w waits. */
void cq_refresh(const char *db, const char *user, struct cq_waiter *w);

/* Stop waiting (the client went away). */
void cq_cancel(struct cq_waiter *w);
