/*
 * wctl.c — the master/worker control channel (wctl.h): its framing, and
 * the worker's end (questions to the master, "exec" from it).
 *
 *   read_cb ─▶ wctl_take ─┬─ exec   ─▶ exec_fn (admin) ─▶ {op:"done"} back
 *                         └─ result ─▶ its question ─▶ finish ─▶ done(arg, result)
 *   question timer (WCTL_ASK_TIMEOUT_MS) or channel closed ─▶ finish with {error}
 */
#include "proxy/wctl.h"

#include <inttypes.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "core/globals.h"
#include "core/list.h"
#include "core/log.h"
#include "core/xalloc.h"

/* A question sent to the master, until its result or its time is up. */
struct question {
	TAILQ_ENTRY(question) link;
	int64_t id;
	struct event *timer;
	const char *why; /* set: fail with this when the timer fires */
	void (*done)(void *arg, const bson_t *result);
	void *arg;
};

static TAILQ_HEAD(, question) open_q = TAILQ_HEAD_INITIALIZER(open_q);
static struct bufferevent *chan;
static int64_t next_id = 1;
static void (*exec_fn)(const bson_t *cmd, bson_t *reply);

int wctl_take(struct evbuffer *in, bson_t **doc)
{
	uint8_t hdr[4];
	uint32_t len;
	uint8_t *p;

	if (evbuffer_get_length(in) < 4)
		return 0;
	evbuffer_copyout(in, hdr, 4);
	len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
	      (uint32_t)hdr[3] << 24;
	if (len < 5 || len > WCTL_MAX_MSG)
		return -1;
	if (evbuffer_get_length(in) < len)
		return 0;
	p = evbuffer_pullup(in, len);
	*doc = p != NULL ? bson_new_from_data(p, len) : NULL;
	evbuffer_drain(in, len);
	return *doc != NULL ? 1 : -1;
}

void wctl_put(struct evbuffer *out, const bson_t *doc)
{
	evbuffer_add(out, bson_get_data(doc), doc->len);
}

void wctl_set_exec(void (*exec)(const bson_t *cmd, bson_t *reply))
{
	exec_fn = exec;
}

bool wctl_active(void)
{
	return chan != NULL;
}

static void finish(struct question *q, const bson_t *result)
{
	TAILQ_REMOVE(&open_q, q, link);
	event_free(q->timer);
	q->done(q->arg, result);
	free(q);
}

static void fail(struct question *q, const char *why)
{
	bson_t doc;

	bson_init(&doc);
	BSON_APPEND_UTF8(&doc, "error", why);
	finish(q, &doc);
	bson_destroy(&doc);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct question *q = arg;

	(void)fd;
	(void)what;
	proxy_tick();
	fail(q, q->why != NULL ? q->why : "the master did not answer in time");
}

static int64_t get_id(const bson_t *doc)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, doc, "id") && BSON_ITER_HOLDS_INT64(&it)
		   ? bson_iter_int64(&it)
		   : -1;
}

static void on_exec(const bson_t *msg)
{
	bson_iter_t it;
	bson_t cmd, reply, out;
	const uint8_t *data;
	uint32_t len;

	bson_init(&reply);
	if (bson_iter_init_find(&it, msg, "cmd") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
	    exec_fn != NULL) {
		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&cmd, data, len))
			exec_fn(&cmd, &reply);
	}
	if (bson_empty(&reply)) {
		BSON_APPEND_DOUBLE(&reply, "ok", 0.0);
		BSON_APPEND_UTF8(&reply, "errmsg", "mongoplex: worker could not run the command");
	}
	bson_init(&out);
	BSON_APPEND_UTF8(&out, "op", "done");
	BSON_APPEND_INT64(&out, "id", get_id(msg));
	BSON_APPEND_DOCUMENT(&out, "reply", &reply);
	wctl_put(bufferevent_get_output(chan), &out);
	bson_destroy(&out);
	bson_destroy(&reply);
}

static void on_result(const bson_t *msg)
{
	int64_t id = get_id(msg);
	struct question *q;

	TAILQ_FOREACH(q, &open_q, link)
		if (q->id == id) {
			finish(q, msg);
			return;
		}
	/* late: its question timed out already */
}

static void closed(const char *why)
{
	struct question *q;

	if (why != NULL)
		log_error("workers: control channel to the master closed (%s)", why);
	bufferevent_free(chan);
	chan = NULL;
	while ((q = TAILQ_FIRST(&open_q)) != NULL)
		fail(q, "the control channel to the master closed");
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	bson_t *msg;
	bson_iter_t it;
	int rc;

	(void)arg;
	proxy_tick();
	while ((rc = wctl_take(bufferevent_get_input(bev), &msg)) == 1) {
		if (bson_iter_init_find(&it, msg, "op") && BSON_ITER_HOLDS_UTF8(&it)) {
			if (strcmp(bson_iter_utf8(&it, NULL), "exec") == 0)
				on_exec(msg);
			else if (strcmp(bson_iter_utf8(&it, NULL), "result") == 0)
				on_result(msg);
		}
		bson_destroy(msg);
	}
	if (rc < 0)
		closed("a malformed message");
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)arg;
	proxy_tick();
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		closed(what & BEV_EVENT_EOF ? "end of file" : "error");
}

void wctl_attach(int fd)
{
	evutil_make_socket_nonblocking(fd);
	chan = bufferevent_socket_new(g.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (chan == NULL)
		fatal("workers: cannot watch the control channel");
	bufferevent_setcb(chan, read_cb, NULL, event_cb, NULL);
	/* What the master wrote before the fork (a pause in force) runs now,
	 * before the listener opens (proxy_main attaches first). */
	while (evbuffer_read(bufferevent_get_input(chan), fd, -1) > 0)
		;
	read_cb(chan, NULL);
	if (chan != NULL)
		bufferevent_enable(chan, EV_READ);
}

void wctl_ask(const char *op, int target, const bson_t *cmd,
	      void (*done)(void *arg, const bson_t *result), void *arg)
{
	struct question *q = xcalloc(1, sizeof(*q));
	struct timeval tv = {WCTL_ASK_TIMEOUT_MS / 1000, (WCTL_ASK_TIMEOUT_MS % 1000) * 1000};
	bson_t msg;

	q->id = next_id++;
	q->done = done;
	q->arg = arg;
	q->timer = evtimer_new(g.base, timer_cb, q);
	if (q->timer == NULL)
		fatal("out of memory");
	TAILQ_INSERT_TAIL(&open_q, q, link);
	if (chan == NULL) { /* failed from the loop, not from here */
		q->why = "no control channel to the master";
		event_active(q->timer, EV_TIMEOUT, 0);
		return;
	}
	evtimer_add(q->timer, &tv);
	bson_init(&msg);
	BSON_APPEND_UTF8(&msg, "op", op);
	BSON_APPEND_INT64(&msg, "id", q->id);
	BSON_APPEND_INT32(&msg, "target", target);
	if (cmd != NULL)
		BSON_APPEND_DOCUMENT(&msg, "cmd", cmd);
	wctl_put(bufferevent_get_output(chan), &msg);
	bson_destroy(&msg);
}

void wctl_stop(void)
{
	if (chan != NULL)
		closed(NULL);
}
