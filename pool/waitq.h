/*
 * waitq.h — a queue of requests waiting for a backend connection
 * (REQ_QUEUED), the one type behind every wait in pool/:
 *
 *   kind           where                      what it waits for
 *   WAITQ_POOL     pool->waiting              any connection of the pool (fair order)
 *   WAITQ_STICKY   server->sticky_waiting     the connection of its client's
 *                                             unacknowledged write (sticky.c)
 *   WAITQ_SELECT   select.c's queue           a replica set member to route to
 *   WAITQ_PIN      a load-balanced pin's      its pinned connection (pin.c)
 *                  `waiting`
 *
 * Rules: a request is on at most one waitq, `req->waitq` (NULL: none), and
 * only the functions below put it on or take it off (request_free takes it
 * off its list, the count follows). A queue that ever held a request is on
 * the list of all queues until waitq_fini; the janitor's one walk
 * (waitq_expire_all) takes off every request that waited longer than its
 * kind's limit and hands it to the kind's `expired`. "Take all waiters and
 * submit them again" is waitq_take_all + waitq_resubmit.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/list.h"
#include "core/request.h"
#include "pool/route.h"

enum waitq_kind { WAITQ_POOL, WAITQ_STICKY, WAITQ_SELECT, WAITQ_PIN };

/* What a kind of queue does at expiry. */
struct waitq_ops {
	enum waitq_kind kind;
	/* How long a request may wait, in µs; 0: for ever. */
	uint64_t (*limit_usec)(void);
	/* When set, replaces limit_usec: the limit of this queue (a paused
	 * pool's waiters wait up to pause_timeout_ms, pool/pool_pause.h). */
	uint64_t (*limit_for)(const struct waitq *w);
	/* A request whose own client does not read its replies restarts its
	 * clock (the client is the cause). */
	bool owner_clock;
	/* Requests with no owner (the proxy's own) never expire here. */
	bool keep_ownerless;
	/* It waited too long (off the queue already, REQ_NEW): refuse it. */
	void (*expired)(struct request *req);
};

struct waitq {
	struct request_queue q; /* REQ_QUEUED, req->waitq == this */
	const struct waitq_ops *ops;
	bool listed; /* on the list of all queues */
	TAILQ_ENTRY(waitq) all_link;
};

#define WAITQ_INITIALIZER(w, o)                                                                    \
	{                                                                                          \
		{TAILQ_HEAD_INITIALIZER((w).q.list), 0}, (o), false,                               \
		{                                                                                  \
			NULL, NULL                                                                 \
		}                                                                                  \
	}

void waitq_init(struct waitq *w, const struct waitq_ops *ops);
/* Before the memory of an (empty) queue goes. */
void waitq_fini(struct waitq *w);

static inline int waitq_count(const struct waitq *w)
{
	return w->q.n;
}

static inline struct request *waitq_first(const struct waitq *w)
{
	return TAILQ_FIRST(&w->q.list);
}

/* Is req waiting on a queue of this kind? */
static inline bool waitq_is(const struct request *req, enum waitq_kind kind)
{
	return req->route->waitq != NULL && req->route->waitq->ops->kind == kind;
}

/* Append req (REQ_QUEUED); _after: right after `after` (NULL: at the head). */
void waitq_add(struct waitq *w, struct request *req);
void waitq_add_after(struct waitq *w, struct request *req, struct request *after);

/* Take req off its queue (REQ_NEW, on no list); nothing when it is on none. */
void waitq_unqueue(struct request *req);

/* Every request of w, in order, off it and staged (REQ_NEW) on `staged`. */
void waitq_take_all(struct waitq *w, struct request_queue *staged);
/* Each staged request in order, off `staged` (REQ_NEW, on no list), to
 * each(req, arg); NULL: pool_submit. */
void waitq_resubmit(struct request_queue *staged, void (*each)(struct request *req, void *arg),
		    void *arg);

/* Every request of w starts its wait clock again now (a pause began or ended). */
void waitq_restart_clocks(struct waitq *w);

/* The janitor: refuse every request that waited past its queue's limit. */
void waitq_expire_all(uint64_t now);
