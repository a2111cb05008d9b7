/*
 * pool.c — the table of backend connection pools (its slots: the leaf
 * pool_table.c), the choice of the target server, and what a connect's
 * outcome does to a pool's waiters (answered hellos, fail fast, requeue on
 * another seed host or member); the server watcher table and pool_ops.h's
 * table, through which the lower files call up. The fair queue and dispatch
 * are in pool_dispatch.c.
 */
#include "pool/pool.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <mongoc/mongoc.h>

#include "core/errors.h"
#include "pool/auth.h"
#include "pool/backend_compress.h"
#include "pool/backend_tls.h"
#include "pool/pin.h"
#include "pool/pool_int.h"
#include "pool/pool_ops.h"
#include "pool/pool_pause.h"
#include "pool/pool_users.h"
#include "pool/select.h"
#include "pool/sticky.h"
#include "core/topover.h"
#include "core/globals.h"
#include "core/stats.h"
#include "pool/route.h"

int pool_total_waiting(void)
{
	return request_count(REQ_QUEUED);
}

static bool resolve(struct pool *p, const mongoc_host_list_t *h, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char port[8];
	int rc;

	if (h->family == AF_UNIX) {
		struct sockaddr_un *un = (struct sockaddr_un *)&p->addr;

		un->sun_family = AF_UNIX;
		snprintf(un->sun_path, sizeof(un->sun_path), "%s", h->host);
		p->addrlen = sizeof(*un);
		return true;
	}
	snprintf(port, sizeof(port), "%u", h->port);
	rc = getaddrinfo(h->host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "backend_uri: cannot resolve %s: %s", h->host,
			 gai_strerror(rc));
		return false;
	}
	memcpy(&p->addr, res->ai_addr, res->ai_addrlen);
	p->addrlen = res->ai_addrlen;
	freeaddrinfo(res);
	return true;
}

struct pool *pool_new(const char *name, const char *host, uint16_t port)
{
	struct pool *p = pool_table_add();

	pool_init(p, name, host, port);
	return p;
}

void pool_init(struct pool *p, const char *name, const char *host, uint16_t port)
{
	snprintf(p->name, sizeof(p->name), "%s", name);
	snprintf(p->host, sizeof(p->host), "%s", host);
	p->port = port;
	TAILQ_INIT(&p->connecting);
	TAILQ_INIT(&p->idle);
	TAILQ_INIT(&p->active);
	waitq_init(&p->waiting, &pool_waitq_ops);
	REQUEST_QUEUE_INIT(&p->hello_waiters);
	p->usable = true;
	p->backoff_ms = 100;
	pool_limit_init(p);
}

static bool watch_released(struct server *s)
{
	pool_server_idle(s);
	return true;
}

static void watch_closed(struct server *s, const struct server_closing *why)
{
	if (why->was_connecting)
		pool_connect_failed(s->pool, why->code, why->codename, why->reason);
	else
		pool_server_gone(s->pool);
}

static void watch_replied(struct server *s, const bson_t *body)
{
	select_on_reply(s->pool, body);
}

static const struct server_watcher pool_watcher = {
    .name = "pool",
    .released = watch_released,
    .closed = watch_closed,
    .ready = pool_server_ready,
    .started = pool_limit_begin,
    .ended = pool_limit_end,
    .replied = watch_replied,
};

/* Who hears of a connection's release and close, in order: its pin, its
 * client's sticky order, then the pool (server.h). */
static const struct server_watcher *const server_watchers[] = {&pin_watcher, &sticky_watcher,
							       &pool_watcher, NULL};

static const struct pool_ops ops = {
    .submit = pool_submit,
    .dispatch = pool_dispatch,
    .unqueue = pool_unqueue,
    .server_idle = pool_server_idle,
    .refuse_timeout = pool_refuse_timeout,
    .queue_limit_usec = pool_queue_limit_usec,
    .connect_for_waiters = pool_connect_for_waiters,
    .gate = pool_gate,
    .init = pool_init,
    .sync_members = pool_sync_members,
};

void pool_ops_install(void)
{
	pool_ops = &ops;
}

bool pool_init_all(const char *uri_str, char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_str, &berr);
	const mongoc_host_list_t *h;
	bool ok = false;
	int n = 0, cap;

	server_set_watchers(server_watchers);
	pool_ops_install();
	if (uri == NULL) {
		snprintf(err, errlen, "backend_uri: %s", berr.message);
		return false;
	}
	if (!backend_tls_load(uri, err, errlen) || !auth_start(uri_str, err, errlen))
		goto out;
	bcomp_init(uri);
	for (h = mongoc_uri_get_hosts(uri); h != NULL; h = h->next)
		n++;
	cap = topology_wanted(uri_str) ? n + TOPO_MAX_MEMBERS : n;
	if (mongoc_uri_get_srv_hostname(uri) != NULL)
		cap++; /* the placeholder below */
	pool_table_alloc(cap);
	if (mongoc_uri_get_srv_hostname(uri) != NULL) {
		char name[300];

		/* mongodb+srv://: no member is known before the monitor thread
		 * resolved the name; until then the target is a placeholder pool
		 * without address (never connected; pool_members.c retargets). */
		snprintf(name, sizeof(name), "mongodb+srv://%s", mongoc_uri_get_srv_hostname(uri));
		(void)pool_new(name, mongoc_uri_get_srv_hostname(uri), 0);
	}
	for (h = mongoc_uri_get_hosts(uri); h != NULL; h = h->next) {
		struct pool *p = pool_new(h->host_and_port, h->host, h->port);

		if (!resolve(p, h, err, errlen))
			goto out;
	}
	ok = pool_count() > 0;
	if (!ok)
		snprintf(err, errlen, "backend_uri: no hosts");
	else if (cap > n)
		ok = topology_start(uri_str, select_on_topology, err, errlen);
out:
	mongoc_uri_destroy(uri);
	return ok;
}

static void close_all(struct pool *p, void *arg)
{
	struct server *s;

	(void)arg;
	while ((s = TAILQ_FIRST(&p->idle)) != NULL)
		server_close(s, MP_ERR(SHUTDOWN_IN_PROGRESS), "shutting down");
	while ((s = TAILQ_FIRST(&p->active)) != NULL)
		server_close(s, MP_ERR(SHUTDOWN_IN_PROGRESS), "shutting down");
	while ((s = TAILQ_FIRST(&p->connecting)) != NULL)
		server_close(s, MP_ERR(SHUTDOWN_IN_PROGRESS), "shutting down");
}

void pool_shutdown_all(void)
{
	topology_stop();
	pool_users_foreach(close_all, NULL);
	for (int i = 0; i < pool_count(); i++)
		close_all(pool_at(i), NULL);
}

/* The backend of `p` cannot be reached: `req` fails with HostUnreachable. */
static void fail_unreachable_code(struct pool *p, struct request *req, int code,
				  const char *codename, const char *why)
{
	char msg[600];

	if (code == 18) { /* authentication: `why` names the user and the server */
		snprintf(msg, sizeof(msg), "mongoplex: %s", why);
		req->ops->error(req, code, codename, msg, NULL);
		return;
	}
	snprintf(msg, sizeof(msg), "cannot reach backend %s: %s", p->name, why);
	req->ops->network_error(req, code, codename, msg);
}

void pool_fail_unreachable(struct pool *p, struct request *req, const char *why)
{
	if (p->last_code == mp_errors[MP_ERR_AUTHENTICATION_FAILED].code)
		fail_unreachable_code(p, req, p->last_code, p->last_codename, why);
	else
		fail_unreachable_code(p, req, MP_ERR(HOST_UNREACHABLE), why);
}

void pool_wait_hello(struct request *req,
		     void (*answer)(struct request *req, const struct backend_info *bi))
{
	struct pool *p = pool_target();

	req->route->hello_answer = answer;
	req->route->pool = p;
	if (p->addrlen == 0 && topology_srv()->error[0] != '\0') {
		fail_unreachable_code(p, req, MP_ERR(HOST_UNREACHABLE), topology_srv()->error);
		return;
	}
	if (pool_live(p) == 0 && g.now_usec < p->next_connect_usec) {
		pool_fail_unreachable(p, req, p->last_error);
		return;
	}
	request_set_state(req, REQ_HELLO_WAIT, &p->hello_waiters);
	pool_connect_for_waiters(p);
}

/* Fail everything waiting on `p` (its backend cannot be reached). */
static void fail_waiters(struct pool *p, int code, const char *codename, const char *why)
{
	struct request *req;

	while ((req = TAILQ_FIRST(&p->hello_waiters.list)) != NULL) {
		pool_unqueue(req);
		fail_unreachable_code(p, req, code, codename, why);
	}
	while ((req = waitq_first(&p->waiting)) != NULL) {
		pool_unqueue(req);
		fail_unreachable_code(p, req, code, codename, why);
	}
}

static void advance_target(void);

static void wait_hello_again(struct request *req, void *arg)
{
	(void)arg;
	pool_wait_hello(req, req->route->hello_answer);
}

/* Replica set: a request bound to the failed member p fails, the others
 * are submitted again. */
struct rs_failure {
	struct pool *p;
	int code;
	const char *codename, *why;
};

static void rs_resubmit(struct request *req, void *arg)
{
	const struct rs_failure *f = arg;

	if (req->route->route_pool == f->p)
		fail_unreachable_code(f->p, req, f->code, f->codename, f->why);
	else
		pool_submit(req);
}

/* Hand everything waiting on `from` to the (new) target pool (staged on
 * local lists in REQ_NEW: no state list holds them meanwhile). */
static void requeue_waiters(struct pool *from)
{
	struct request_queue hellos = {TAILQ_HEAD_INITIALIZER(hellos.list), 0};
	struct request_queue reqs = {TAILQ_HEAD_INITIALIZER(reqs.list), 0};
	struct request *req;

	while ((req = TAILQ_FIRST(&from->hello_waiters.list)) != NULL)
		request_set_state(req, REQ_NEW, &hellos);
	waitq_take_all(&from->waiting, &reqs);
	waitq_resubmit(&hellos, wait_hello_again, NULL);
	waitq_resubmit(&reqs, NULL, NULL);
}

/* Replica set: a member failed to connect. Requests bound to it (cursor,
 * transaction) fail; the others wait for a member (select.c). */
void pool_rs_requeue(struct pool *p, int code, const char *codename, const char *why)
{
	struct request_queue reqs = {TAILQ_HEAD_INITIALIZER(reqs.list), 0};
	struct rs_failure f = {p, code, codename, why};
	struct request *req;

	while ((req = TAILQ_FIRST(&p->hello_waiters.list)) != NULL) {
		pool_unqueue(req);
		if (pool_target() != p)
			pool_wait_hello(req, req->route->hello_answer);
		else
			fail_unreachable_code(p, req, code, codename, why);
	}
	waitq_take_all(&p->waiting, &reqs); /* off the pool, kept in order */
	waitq_resubmit(&reqs, rs_resubmit, &f);
}

static void rs_connect_failed(struct pool *p, int code, const char *codename, const char *why)
{
	select_suspect(p, why);
	if (pool_live(p) == 0)
		pool_rs_requeue(p, code, codename, why);
}

/* A user's pool failed to log in (or connect): its waiters get the reason,
 * code 18 naming the user for a refused login. One probe per backoff step. */
static void user_connect_failed(struct pool *p, int code, const char *codename, const char *why)
{
	if (code == mp_errors[MP_ERR_AUTHENTICATION_FAILED].code)
		STAT_INC(user_backend_login_failures);
	if (pool_live(p) == 0)
		fail_waiters(p, code, codename, why);
}

void pool_connect_failed(struct pool *p, int code, const char *codename, const char *why)
{
	p->connects_failed++;
	STAT_INC(backend_connect_failures);
	snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	p->last_code = code;
	p->last_codename = codename;
	p->next_connect_usec = g.now_usec + (uint64_t)p->backoff_ms * 1000;
	p->backoff_ms *= 2;
	if (p->backoff_ms > g.cfg.reconnect_backoff_max_ms)
		p->backoff_ms = g.cfg.reconnect_backoff_max_ms;
	pool_cap_kick();
	if (pool_paused(p))
		return; /* its waiters are held by the pause: resume connects again */
	if (p->parent != NULL) {
		user_connect_failed(p, code, codename, why);
		return;
	}
	if (topology_active()) {
		rs_connect_failed(p, code, codename, why);
		return;
	}
	if (pool_live(p) == 0) {
		if (p == pool_target() && pool_count() > 1) {
			advance_target();
			requeue_waiters(p);
		} else {
			fail_waiters(p, code, codename, why);
		}
	}
}

/* Try the next seed host when the current one is not writable. */
static void advance_target(void)
{
	if (pool_count() > 1) {
		pool_set_target(pool_at((int)(pool_target() - pool_at(0) + 1) % pool_count()));
		log_warning("switching backend target to %s", pool_target()->name);
		topover_bump("backend primary lost: target switched");
	}
}

void pool_server_ready(struct server *s, const struct backend_info *bi)
{
	struct pool *p = s->pool;
	struct request *req;
	struct backend_info was = p->info;
	bool was_known = was.known;

	p->info = *bi;
	p->connects_ok++;
	p->backoff_ms = 100;
	p->next_connect_usec = 0;
	p->last_code = 0;
	p->tls_failed = false;
	if (topology_active() && bi->kind != BACKEND_RS_PRIMARY && p->member.type == TOPO_PRIMARY) {
		select_suspect(p, "a new connection's hello says it is not the primary");
	}
	if (bi->kind == BACKEND_RS_OTHER && !topology_active() && p->parent != NULL) {
		server_close(s, MP_ERR(HOST_UNREACHABLE), "backend is not a writable primary");
		return;
	}
	if (bi->kind == BACKEND_RS_OTHER && !topology_active()) {
		p->usable = false;
		if (p == pool_target() && pool_count() > 1) {
			advance_target();
			requeue_waiters(p);
		}
		server_close(s, MP_ERR(HOST_UNREACHABLE), "backend is not a writable primary");
		return;
	}
	if (!p->usable || (was_known && handshake_info_differs(&was, bi)))
		topover_bump("backend primary regained or its limits changed");
	p->usable = true;
	while ((req = TAILQ_FIRST(&p->hello_waiters.list)) != NULL) {
		pool_unqueue(req);
		req->route->hello_answer(req, &p->info);
	}
	pool_server_idle(s);
}

void pool_server_gone(struct pool *p)
{
	if (pool_cap_evicting())
		return;	   /* closed to make room for another pool */
	pool_fill_idle(p); /* its exchange no longer counts against the limit */
	pool_connect_for_waiters(p);
	pool_cap_kick();
}

bool pool_healthy(char *why, size_t whylen)
{
	const struct pool *p = pool_target();

	if (topology_active()) {
		snprintf(why, whylen, "no replica set member is known to be usable%s%s",
			 topology_srv()->error[0] ? ": " : "", topology_srv()->error);
		return select_any_usable();
	}
	snprintf(why, whylen, "backend %s cannot be reached: %s", p->name, p->last_error);
	/* paused: requests are held, not failed (pool/pool_pause.h) */
	return pool_live(p) > 0 || p->last_code == 0 || pool_paused(p);
}
