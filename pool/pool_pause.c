/*
 * pool_pause.c — pause, resume and reconnect of the pools (rules in
 * pool_pause.h). The decisions themselves are terms of pool_gate
 * (pool/gate.c); this file flips the state, closes what is idle, restarts
 * the wait clocks and reopens connections on resume.
 *
 *   pause ─▶ paused flag ─▶ idle connections closed ─▶ running ones closed as
 *            released (GATE_TAKE_NEXT) ─▶ no connection left: "paused"
 *   resume ─▶ flag cleared ─▶ clocks restarted ─▶ connects for the waiters
 *            ─▶ each new connection takes the next waiter, in order
 */
#include "pool/pool_pause.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/stats.h"
#include "pool/pool_int.h"
#include "pool/pool_users.h"
#include "pool/select.h"
#include "pool/pool_ops.h"

/* The whole proxy's pause (a member's is its pool's `paused`). */
static struct {
	bool on, logged;
	uint64_t since_usec;
} all_pause;

static const struct pool *member_of(const struct pool *p)
{
	return p->parent != NULL ? p->parent : p;
}

bool pool_paused(const struct pool *p)
{
	return all_pause.on || (p != NULL && member_of(p)->paused);
}

struct pool *pool_by_name(const char *name)
{
	for (int i = 0; i < pool_count(); i++)
		if (strcmp(pool_at(i)->name, name) == 0)
			return pool_at(i);
	return NULL;
}

void pool_refuse_paused(struct request *req)
{
	char msg[200];

	STAT_INC(refused_paused);
	snprintf(msg, sizeof(msg),
		 "mongoplex: the proxy is paused for maintenance and the request waited more than "
		 "pause_timeout_ms = %" PRId64 " ms; it was not sent; retry later",
		 g.cfg.pause_timeout_ms);
	req->ops->error(req, MP_ERR(EXCEEDED_TIME_LIMIT), msg, MP_ERR_LABELS(EXCEEDED_TIME_LIMIT));
}

uint64_t pool_pause_limit_usec(const struct pool *p)
{
	if (pool_paused(p))
		return (uint64_t)g.cfg.pause_timeout_ms * 1000;
	return pool_ops->queue_limit_usec();
}

/* fn on member (NULL: every member pool) and on its child pools. */
struct scope {
	const struct pool *member;
	void (*fn)(struct pool *p, void *arg);
	void *arg;
};

static void child(struct pool *p, void *arg)
{
	const struct scope *sc = arg;

	if (sc->member == NULL || p->parent == sc->member)
		sc->fn(p, sc->arg);
}

static void each_pool(const struct pool *member, void (*fn)(struct pool *p, void *arg), void *arg)
{
	struct scope sc = {member, fn, arg};

	for (int i = 0; i < pool_count(); i++)
		if (member == NULL || pool_at(i) == member)
			fn(pool_at(i), arg);
	pool_users_foreach(child, &sc);
}

static void count(struct pool *p, void *arg)
{
	struct pause_report *r = arg;

	if (p->parent == NULL)
		r->pools++;
	r->in_flight += p->n_active;
	r->connecting += p->n_connecting;
	r->waiting += waitq_count(&p->waiting);
	if (pool_live(p) > 0)
		r->paused = false;
}

static void report(const struct pool *member, struct pause_report *r)
{
	memset(r, 0, sizeof(*r));
	r->paused = true;
	r->since_usec =
	    member != NULL && !all_pause.on ? member->paused_usec : all_pause.since_usec;
	each_pool(member, count, r);
}

void pool_pause_progress(struct pool *member, struct pause_report *r)
{
	report(member, r);
	if (!pool_paused(member))
		r->paused = false;
}

/* The queue clock of p's waiters starts again now (pause and resume). */
static void restart_clocks(struct pool *p)
{
	waitq_restart_clocks(&p->waiting);
}

static void close_idle(struct pool *p, int *closed, const char *why)
{
	struct server *s;

	while ((s = TAILQ_FIRST(&p->idle)) != NULL) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "%s", why);
		(*closed)++;
	}
}

static void pause_one(struct pool *p, void *arg)
{
	restart_clocks(p);
	close_idle(p, arg, "paused by an admin");
}

void pool_pause(struct pool *member, struct pause_report *r)
{
	int closed = 0;

	if (member == NULL && !all_pause.on) {
		select_pause_changed();
		all_pause.on = true;
		all_pause.logged = false;
		all_pause.since_usec = g.now_usec;
	} else if (member != NULL && !member->paused) {
		member->paused = true;
		member->pause_logged = false;
		member->paused_usec = g.now_usec;
	}
	each_pool(member, pause_one, &closed);
	log_notice("pause %s: %d idle backend connections closed, the running ones close as "
		   "they finish",
		   member != NULL ? member->name : "all pools", closed);
	pool_pause_progress(member, r);
	r->closed = closed;
}

static void resume_one(struct pool *p, void *arg)
{
	(void)arg;
	if (pool_paused(p))
		return; /* still paused as a whole */
	restart_clocks(p);
	p->next_connect_usec = 0; /* a connect that failed during the pause */
	pool_ops->connect_for_waiters(p);
}

/* When the pause that pool_resume(member) ends began; 0: none is on. */
static uint64_t paused_since(const struct pool *member)
{
	uint64_t since = 0;

	if (all_pause.on)
		return member == NULL ? all_pause.since_usec : 0; /* a member: not on its own */
	if (member != NULL)
		return member->paused ? member->paused_usec : 0;
	for (int i = 0; i < pool_count(); i++)
		if (pool_at(i)->paused && (since == 0 || pool_at(i)->paused_usec < since))
			since = pool_at(i)->paused_usec;
	return since;
}

bool pool_resume(struct pool *member, struct pause_report *r)
{
	uint64_t since = paused_since(member);

	if (since == 0)
		return false;
	if (member == NULL) {
		all_pause.on = false;
		select_pause_changed();
		for (int i = 0; i < pool_count(); i++)
			pool_at(i)->paused = false;
	} else {
		member->paused = false;
	}
	report(member, r);
	r->since_usec = since;
	each_pool(member, resume_one, NULL);
	r->paused = false;
	log_notice("resume %s: %d held requests dispatched as connections open",
		   member != NULL ? member->name : "all pools", r->waiting);
	return true;
}

static void reconnect_one(struct pool *p, void *arg)
{
	p->generation++;
	close_idle(p, arg, "reconnect asked by an admin");
}

int pool_reconnect(struct pool *member)
{
	int closed = 0;

	each_pool(member, reconnect_one, &closed);
	log_notice("reconnect %s: %d idle backend connections closed, the others close when "
		   "next idle",
		   member != NULL ? member->name : "all pools", closed);
	return closed;
}

void pool_pause_janitor(void)
{
	struct pause_report r;

	if (all_pause.on && !all_pause.logged) {
		pool_pause_progress(NULL, &r);
		if (r.paused) {
			all_pause.logged = true;
			log_notice("paused: no backend connection open, %d requests held",
				   r.waiting);
		}
	}
	for (int i = 0; i < pool_count(); i++) {
		struct pool *p = pool_at(i);

		if (!p->paused || p->pause_logged || all_pause.on)
			continue;
		pool_pause_progress(p, &r);
		if (r.paused) {
			p->pause_logged = true;
			log_notice("paused %s: no backend connection open, %d requests held",
				   p->name, r.waiting);
		}
	}
}
