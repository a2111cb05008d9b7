/*
 * admin_ctl.c — the console's control commands (admin_ctl.h): read the
 * argument, ask admin_authorized, act through pool/pool_pause.h,
 * client_close and the reload proxy.c registered, answer with what was done.
 *
 *   mongoplexPause / Resume / Reconnect ─▶ scope: 1 = every pool, "host:port"
 *                                          = that member and its user pools
 *   mongoplexKill ─▶ client_find ─▶ client_close (its cursors are killed
 *                    on the backend by the close, proxy/cursor.c)
 *   mongoplexReload ─▶ proxy_reload (as SIGHUP; admin_ctl_set_reload) ─▶ its result or rejection
 */
#include "proxy/admin_ctl.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/request.h"
#include "pool/pool.h"
#include "pool/pool_pause.h"
#include "pool/pool_users.h"
#include "proxy/admin.h"
#include "proxy/client.h"

static bool (*reload_fn)(char *msg, size_t msglen);

void admin_ctl_set_reload(bool (*reload)(char *msg, size_t msglen))
{
	reload_fn = reload;
}

static void fail(struct request *req, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct request *req, const char *fmt, ...)
{
	char msg[CFG_ERR_LEN + 200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	request_fail(req, MP_ERR(BAD_VALUE), msg, NULL);
}

/* The command's value: 1 (every pool) or a member's "host:port". False:
 * answered with an error. */
static bool scope_of(struct request *req, const bson_iter_t *it, struct pool **member)
{
	*member = NULL;
	if (BSON_ITER_HOLDS_UTF8(it)) {
		const char *name = bson_iter_utf8(it, NULL);

		if ((*member = pool_by_name(name)) != NULL)
			return true;
		fail(req,
		     "mongoplex: %s: no backend member %.300s (give host:port as the pools "
		     "show it, or 1 for every pool)",
		     req->cmd, name);
		return false;
	}
	if (BSON_ITER_HOLDS_NUMBER(it) && bson_iter_as_int64(it) == 1)
		return true;
	fail(req, "mongoplex: %s takes 1 (every pool) or a backend member \"host:port\"", req->cmd);
	return false;
}

static void append_pools(bson_t *doc, const struct pool *member)
{
	bson_t arr;
	char key[16];
	int n = 0;

	BSON_APPEND_ARRAY_BEGIN(doc, "pools", &arr);
	for (int i = 0; i < pool_count(); i++) {
		if (member != NULL && pool_at(i) != member)
			continue;
		snprintf(key, sizeof(key), "%d", n++);
		BSON_APPEND_UTF8(&arr, key, pool_at(i)->name);
	}
	bson_append_array_end(doc, &arr);
}

static void append_report(bson_t *doc, const struct pause_report *r, const struct pool *member)
{
	append_pools(doc, member);
	BSON_APPEND_INT32(doc, "inFlight", r->in_flight);
	BSON_APPEND_INT32(doc, "connecting", r->connecting);
	BSON_APPEND_INT32(doc, "waiting", r->waiting);
	BSON_APPEND_INT64(doc, "pausedForMs", (int64_t)(g.now_usec - r->since_usec) / 1000);
	BSON_APPEND_INT64(doc, "pauseTimeoutMs", g.cfg.pause_timeout_ms);
}

static void reply(struct request *req, bson_t *doc)
{
	BSON_APPEND_DOUBLE(doc, "ok", 1.0);
	request_reply_doc(req, doc);
	bson_destroy(doc);
}

static void do_pause(struct request *req, const bson_iter_t *it)
{
	struct pool *member;
	struct pause_report r;
	bson_t doc;

	if (!scope_of(req, it, &member))
		return;
	if (pool_paused(member))
		pool_pause_progress(member, &r); /* a second call: progress */
	else
		pool_pause(member, &r);
	bson_init(&doc);
	BSON_APPEND_BOOL(&doc, "paused", true);
	BSON_APPEND_UTF8(&doc, "state", r.paused ? "paused" : "pausing");
	BSON_APPEND_INT32(&doc, "closedIdle", r.closed);
	append_report(&doc, &r, member);
	reply(req, &doc);
}

static void do_resume(struct request *req, const bson_iter_t *it)
{
	struct pool *member;
	struct pause_report r;
	bson_t doc;

	if (!scope_of(req, it, &member))
		return;
	if (!pool_resume(member, &r)) {
		fail(req, "mongoplex: %s is not paused%s",
		     member != NULL ? member->name : "mongoplex",
		     member != NULL && pool_paused(member) ? " on its own (every pool is: resume 1)"
							   : "");
		return;
	}
	bson_init(&doc);
	BSON_APPEND_BOOL(&doc, "paused", false);
	BSON_APPEND_UTF8(&doc, "state", "running");
	BSON_APPEND_INT32(&doc, "dispatching", r.waiting);
	append_report(&doc, &r, member);
	reply(req, &doc);
}

static void do_reconnect(struct request *req, const bson_iter_t *it)
{
	struct pool *member;
	struct pause_report r;
	bson_t doc;

	if (!scope_of(req, it, &member))
		return;
	bson_init(&doc);
	BSON_APPEND_INT32(&doc, "closedIdle", pool_reconnect(member));
	pool_pause_progress(member, &r);
	BSON_APPEND_INT32(&doc, "replacedWhenIdle", r.in_flight + r.connecting);
	append_pools(&doc, member);
	reply(req, &doc);
}

/* self: the asking client; NULL when another worker asks (workers: the
 * asker's id is the command's `by`). */
static void do_kill(struct client *self, struct request *req, const bson_iter_t *it,
		    const bson_t *body)
{
	struct client *c;
	bson_iter_t by;
	uint64_t by_id = self != NULL ? self->id : 0;
	double v;
	bson_t doc;

	if (self == NULL && bson_iter_init_find(&by, body, "by") && BSON_ITER_HOLDS_NUMBER(&by))
		by_id = (uint64_t)bson_iter_as_int64(&by);
	v = BSON_ITER_HOLDS_NUMBER(it) ? bson_iter_as_double(it) : -1;
	if (!(v >= 0 && v < 9007199254740992.0 && (double)(uint64_t)v == v)) {
		fail(req, "mongoplex: mongoplexKill takes a client id (a number: the client's "
			  "connectionId)");
		return;
	}
	c = client_find((uint64_t)v);
	if (c == NULL) {
		fail(req, "mongoplex: mongoplexKill: no client with id %" PRIu64, (uint64_t)v);
		return;
	}
	log_notice("C-%" PRIu64 " %s: killed by an admin (C-%" PRIu64 ")", c->id, c->peer, by_id);
	bson_init(&doc);
	BSON_APPEND_INT64(&doc, "killed", (int64_t)c->id);
	BSON_APPEND_UTF8(&doc, "peer", c->peer);
	if (c == self) {
		reply(req, &doc); /* queued, then dropped by the close: the asker is gone */
		client_close(c, "killed by an admin (itself)");
		return;
	}
	client_close(c, "killed by an admin (C-%" PRIu64 ")", by_id);
	reply(req, &doc);
}

static void do_reload(struct request *req)
{
	char msg[CFG_ERR_LEN + 200];
	bson_t doc;

	if (reload_fn == NULL) {
		fail(req, "mongoplex: mongoplexReload: no reload in this process");
		return;
	}
	if (!reload_fn(msg, sizeof(msg))) {
		fail(req, "mongoplex: %s", msg);
		return;
	}
	bson_init(&doc);
	BSON_APPEND_BOOL(&doc, "reloaded", true);
	BSON_APPEND_UTF8(&doc, "file", g.cfg_path);
	BSON_APPEND_UTF8(&doc, "result", msg);
	reply(req, &doc);
}

void admin_ctl_run(struct request *req, const bson_t *body)
{
	bson_iter_t it;

	if (!bson_iter_init(&it, body) || !bson_iter_next(&it)) {
		fail(req, "mongoplex: empty command document");
		return;
	}
	if (strcmp(req->cmd, "mongoplexPause") == 0)
		do_pause(req, &it);
	else if (strcmp(req->cmd, "mongoplexResume") == 0)
		do_resume(req, &it);
	else if (strcmp(req->cmd, "mongoplexReconnect") == 0)
		do_reconnect(req, &it);
	else if (strcmp(req->cmd, "mongoplexKill") == 0)
		do_kill(client_of(req), req, &it, body);
	else
		do_reload(req);
}
