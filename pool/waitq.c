/*
 * waitq.c — the queues of requests waiting for a backend connection: add,
 * unqueue, take all and submit again, and the janitor's one expiry walk
 * (rules in waitq.h).
 */
#include "pool/waitq.h"

#include "core/globals.h"
#include "pool/pool.h"
#include "pool/route.h"
#include "pool/pool_ops.h"

TAILQ_HEAD(waitq_list, waitq);
static struct waitq_list all = TAILQ_HEAD_INITIALIZER(all);

void waitq_init(struct waitq *w, const struct waitq_ops *ops)
{
	REQUEST_QUEUE_INIT(&w->q);
	w->ops = ops;
	w->listed = false;
}

void waitq_fini(struct waitq *w)
{
	if (w->listed)
		TAILQ_REMOVE(&all, w, all_link);
	w->listed = false;
}

static void list(struct waitq *w, struct request *req)
{
	if (!w->listed) {
		TAILQ_INSERT_TAIL(&all, w, all_link);
		w->listed = true;
	}
	req->route->waitq = w;
}

void waitq_add(struct waitq *w, struct request *req)
{
	request_set_state(req, REQ_QUEUED, &w->q);
	list(w, req);
}

void waitq_add_after(struct waitq *w, struct request *req, struct request *after)
{
	request_set_state_after(req, REQ_QUEUED, &w->q, after);
	list(w, req);
}

void waitq_unqueue(struct request *req)
{
	if (req->route->waitq == NULL)
		return;
	req->route->waitq = NULL;
	request_set_state(req, REQ_NEW, NULL);
}

void waitq_take_all(struct waitq *w, struct request_queue *staged)
{
	struct request *req;

	while ((req = waitq_first(w)) != NULL) {
		req->route->waitq = NULL;
		request_set_state(req, REQ_NEW, staged);
	}
}

void waitq_resubmit(struct request_queue *staged, void (*each)(struct request *req, void *arg),
		    void *arg)
{
	struct request *req;

	while ((req = TAILQ_FIRST(&staged->list)) != NULL) {
		request_set_state(req, REQ_NEW, NULL);
		if (each != NULL)
			each(req, arg);
		else
			pool_ops->submit(req);
	}
}

void waitq_restart_clocks(struct waitq *w)
{
	struct request *req;

	TAILQ_FOREACH(req, &w->q.list, queue_link)
		req->enqueued_usec = g.now_usec;
}

static void expire(struct waitq *w, uint64_t now)
{
	uint64_t limit = w->ops->limit_for != NULL ? w->ops->limit_for(w) : w->ops->limit_usec();
	struct request *req, *tmp;

	if (limit == 0)
		return;
	TAILQ_FOREACH_SAFE(req, &w->q.list, queue_link, tmp) {
		if (w->ops->owner_clock && !request_owner_may_dispatch(req->owner))
			req->enqueued_usec = now;
		if (now - req->enqueued_usec <= limit ||
		    (w->ops->keep_ownerless && req->owner == NULL))
			continue;
		waitq_unqueue(req);
		w->ops->expired(req);
	}
}

void waitq_expire_all(uint64_t now)
{
	struct waitq *w, *tmp;

	TAILQ_FOREACH_SAFE(w, &all, all_link, tmp)
		expire(w, now);
}
