/*
 * pool_users.c — per-user backend pools (see pool_users.h): the users of
 * logged-in clients with the keys their backend connections log in with,
 * and each user's child pool under every member pool.
 */
#include "pool/pool_users.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/list.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/xalloc.h"
#include "pool/pool.h"
#include "pool/pool_int.h"
#include "pool/pool_pause.h"
#include "pool/server.h"
#include "pool/pool_ops.h"

/* One user. Rules: refs counts clients (and batches) holding it; children
 * are its child pools (one per member pool, parent set), freed only by
 * pool_users_sweep; keys are wiped before free. */
static TAILQ_HEAD(, pool_user) users = TAILQ_HEAD_INITIALIZER(users);

bool pool_users_enabled(void)
{
	return strcmp(g.cfg.auth_mode, "scram") == 0 &&
	       strcmp(g.cfg.auth_pool_mode, "per_user") == 0;
}

static struct pool_user *find(const char *db, const char *user)
{
	struct pool_user *u;

	TAILQ_FOREACH(u, &users, link)
		if (strcmp(u->db, db) == 0 && strcmp(u->user, user) == 0)
			return u;
	return NULL;
}

/* New keys (another salt or mechanism): connections made with the old ones
 * keep working; new ones use these. */
static void set_keys(struct pool_user *u, const struct pool_user_keys *k)
{
	OPENSSL_cleanse(&u->keys, sizeof(u->keys));
	u->keys = *k;
}

struct pool_user *pool_user_get(const char *db, const char *user, const struct pool_user_keys *k)
{
	struct pool_user *u = find(db, user);

	if (u == NULL) {
		u = xcalloc(1, sizeof(*u));
		snprintf(u->db, sizeof(u->db), "%s", db);
		snprintf(u->user, sizeof(u->user), "%s", user);
		TAILQ_INSERT_TAIL(&users, u, link);
	}
	set_keys(u, k);
	u->refs++;
	return u;
}

void pool_user_ref(struct pool_user *u)
{
	u->refs++;
}

void pool_user_put(struct pool_user *u)
{
	if (u != NULL && u->refs > 0)
		u->refs--;
}

struct pool *pool_member_of(struct pool *p)
{
	return p != NULL && p->parent != NULL ? p->parent : p;
}

static struct pool *child_new(struct pool *member, struct pool_user *u)
{
	struct pool *p = xcalloc(1, sizeof(*p));
	char name[sizeof(p->name)];

	snprintf(name, sizeof(name), "%s as %s.%s", member->name, u->db, u->user);
	pool_ops->init(p, name, member->host, member->port);
	memcpy(&p->addr, &member->addr, member->addrlen);
	p->addrlen = member->addrlen;
	p->parent = member;
	p->user = u;
	u->children = xrealloc(u->children, (size_t)(u->nchildren + 1) * sizeof(*u->children));
	u->children[u->nchildren++] = p;
	STAT_INC(user_pools_created);
	log_info("per-user pool %s created", p->name);
	return p;
}

struct pool *pool_users_pool(struct pool *member, struct pool_user *u)
{
	member = pool_member_of(member);
	for (int i = 0; i < u->nchildren; i++)
		if (u->children[i]->parent == member)
			return u->children[i];
	return child_new(member, u);
}

void pool_users_foreach(void (*fn)(struct pool *p, void *arg), void *arg)
{
	struct pool_user *u;

	TAILQ_FOREACH(u, &users, link)
		for (int i = 0; i < u->nchildren; i++)
			fn(u->children[i], arg);
}

int pool_users_live(void)
{
	struct pool_user *u;
	int n = 0;

	TAILQ_FOREACH(u, &users, link)
		for (int i = 0; i < u->nchildren; i++)
			n += pool_live(u->children[i]);
	return n;
}

static bool child_empty(const struct pool *p)
{
	return pool_live(p) == 0 && waitq_count(&p->waiting) == 0 && p->hello_waiters.n == 0;
}

/* Free an unreferenced user whose children were empty at this sweep and
 * the one before (a connection closed just now is freed in between). */
static bool sweep_one(struct pool_user *u)
{
	bool all_empty = true;

	for (int i = 0; i < u->nchildren; i++) {
		struct pool *p = u->children[i];
		bool empty = child_empty(p);

		all_empty = all_empty && empty && p->empty_seen;
		p->empty_seen = empty;
	}
	if (u->refs > 0 || !all_empty)
		return false;
	for (int i = 0; i < u->nchildren; i++) {
		log_info("per-user pool %s freed (no client, no connection)", u->children[i]->name);
		waitq_fini(&u->children[i]->waiting);
		free(u->children[i]);
	}
	free(u->children);
	TAILQ_REMOVE(&users, u, link);
	OPENSSL_cleanse(u, sizeof(*u));
	free(u);
	return true;
}

void pool_users_sweep(void)
{
	struct pool_user *u, *tmp;

	TAILQ_FOREACH_SAFE(u, &users, link, tmp)
		(void)sweep_one(u);
}

/* ------------------------------------------------------ max_backend_conn */

static bool evicting, kicking;

int pool_cap_total(void)
{
	int n = pool_users_live();

	for (int i = 0; i < pool_count(); i++)
		n += pool_live(pool_at(i));
	return n;
}

void pool_cap_note_peak(void)
{
	uint64_t n = (uint64_t)pool_cap_total();

	if (n > stats.backend_conn_peak)
		stats.backend_conn_peak = n;
}

static bool at_cap(void)
{
	return g.cfg.max_backend_conn > 0 && pool_cap_total() >= g.cfg.max_backend_conn;
}

/* The oldest idle connection in q (idle lists are most recent first). */
static void oldest_in(struct pool *q, struct pool * not, struct server **best)
{
	struct server *s = TAILQ_LAST(&q->idle, server_list);

	if (q != not &&s != NULL &&
	    (*best == NULL || s->idle_since_usec < (*best)->idle_since_usec))
		*best = s;
}

struct oldest_arg {
	struct pool * not ;
	struct server *best;
};

static void oldest_cb(struct pool *q, void *arg)
{
	struct oldest_arg *a = arg;

	oldest_in(q, a->not, &a->best);
}

static struct server *oldest_idle_elsewhere(struct pool *p)
{
	struct oldest_arg a = {.not = p, .best = NULL};

	for (int i = 0; i < pool_count(); i++)
		oldest_in(pool_at(i), p, &a.best);
	pool_users_foreach(oldest_cb, &a);
	return a.best;
}

bool pool_cap_evicting(void)
{
	return evicting;
}

bool pool_cap_room(struct pool *p, bool evict)
{
	struct server *old;

	if (!at_cap())
		return true;
	old = evict ? oldest_idle_elsewhere(p) : NULL;
	if (old == NULL) {
		STAT_INC(backend_conn_cap_waits);
		return false;
	}
	STAT_INC(backend_conn_cap_evictions);
	evicting = true;
	server_close(old, MP_ERR(HOST_UNREACHABLE),
		     "max_backend_conn = %" PRId64 " reached: making room for %s",
		     g.cfg.max_backend_conn, p->name);
	evicting = false;
	return !at_cap();
}

static bool starved(const struct pool *q)
{
	/* a paused pool's waiters are held, not starved (pool/pool_pause.h) */
	return waitq_count(&q->waiting) > 0 && pool_live(q) == 0 && !pool_paused(q);
}

static void kick_cb(struct pool *q, void *arg)
{
	(void)arg;
	if (starved(q))
		pool_ops->connect_for_waiters(q);
}

void pool_cap_kick(void)
{
	if (kicking || evicting || !at_cap())
		return;
	kicking = true;
	for (int i = 0; i < pool_count(); i++)
		kick_cb(pool_at(i), NULL);
	pool_users_foreach(kick_cb, NULL);
	kicking = false;
}

struct starved_arg {
	const struct pool * not ;
	bool any;
};

static void starved_cb(struct pool *q, void *arg)
{
	struct starved_arg *a = arg;

	a->any = a->any || (q != a->not &&starved(q) && g.now_usec >= q->next_connect_usec);
}

bool pool_cap_retire(struct server *s)
{
	struct starved_arg a = {.not = s->pool, .any = false};

	if (pool_live(s->pool) <= 1 || !at_cap())
		return false;
	for (int i = 0; i < pool_count(); i++)
		starved_cb(pool_at(i), &a);
	pool_users_foreach(starved_cb, &a);
	if (!a.any)
		return false;
	server_close(s, MP_ERR(HOST_UNREACHABLE),
		     "max_backend_conn = %" PRId64
		     " reached: handing this slot to a pool with none",
		     g.cfg.max_backend_conn);
	return true;
}
