/*
 * admin_fan.c — the console's commands with workers = N > 1 (admin_fan.h):
 * the worker a command reached has checked who may run it; here it asks
 * the master (proxy/wctl.h) to run it on the workers, and merges what they
 * answered into one reply.
 *
 *   Pause / Resume / Reconnect ─▶ every worker ─▶ merge: counts summed,
 *                                 state "paused" only when every worker is,
 *                                 `workers` lists each answer; an error when
 *                                 any worker failed (the first one's, named)
 *   Reload ─▶ the master checks the file, then every worker reloads ─▶ merge
 *   Kill   ─▶ the worker holding the client (its id modulo N) ─▶ its answer
 *   Show   ─▶ worker 0, 1, ... in turn, `skip` and the byte bound carried
 *             across them ─▶ one page, each row with its `worker`
 */
#include "proxy/admin_fan.h"

#include <stdio.h>
#include <string.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/stats.h"
#include "core/wire.h"
#include "core/xalloc.h"
#include "proxy/admin_show.h"
#include "proxy/wctl.h"

/* One command being run across the workers. */
struct fan {
	struct request *req; /* REQ_LOCAL until answered (abandon leaves it) */
	bson_t *cmd;	     /* what each worker runs */
	/* mongoplexShow */
	int w;		   /* the worker asked now */
	int64_t skip;	   /* rows to skip over all workers */
	int64_t max_bytes; /* the page's byte bound */
	int64_t offset;	   /* rows of the workers before w */
	int64_t added;
	bool full;
	bson_t rows; /* the page's rows so far, an array document */
	bson_t missing;
	int nmissing;
};

static void fan_free(struct fan *f)
{
	bson_destroy(f->cmd);
	bson_destroy(&f->rows);
	bson_destroy(&f->missing);
	free(f);
}

static void fail(struct request *req, const char *cmd, const char *why, const bson_t *workers)
{
	char msg[600];
	bson_t doc;

	STAT_INC(requests_errors);
	snprintf(msg, sizeof(msg), "mongoplex: %s: %s", cmd, why);
	wire_error_doc(&doc, MP_ERR(INTERNAL_ERROR), msg, NULL);
	if (workers != NULL)
		BSON_APPEND_ARRAY(&doc, "workers", workers);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

/* The master's error, or NULL; `replies` set to its answers otherwise. */
static const char *result_error(const bson_t *result, bson_iter_t *replies)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, result, "error") && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	if (!bson_iter_init_find(&it, result, "replies") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, replies))
		return "the master's answer has no replies";
	return NULL;
}

/* One worker's entry {worker, reply} or {worker, error}: 1 its reply in
 * *reply says ok; 0 *reply is its error document (*why its errmsg); -1
 * no reply (it did not answer: *why says why). */
static int entry_parse(bson_iter_t *entry, int *worker, bson_t *reply, const char **why)
{
	bson_iter_t it, sub;
	const uint8_t *data;
	uint32_t len;
	bson_t e;

	*worker = -1;
	*why = "a malformed answer";
	if (!BSON_ITER_HOLDS_DOCUMENT(entry))
		return -1;
	bson_iter_document(entry, &len, &data);
	if (!bson_init_static(&e, data, len))
		return -1;
	if (bson_iter_init_find(&it, &e, "worker"))
		*worker = (int)bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, &e, "error") && BSON_ITER_HOLDS_UTF8(&it)) {
		*why = bson_iter_utf8(&it, NULL);
		return -1;
	}
	if (!bson_iter_init_find(&it, &e, "reply") || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return -1;
	bson_iter_document(&it, &len, &data);
	if (!bson_init_static(reply, data, len))
		return -1;
	if (bson_iter_init_find(&sub, reply, "ok") && bson_iter_as_double(&sub) == 1.0)
		return 1;
	*why = bson_iter_init_find(&sub, reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&sub)
		   ? bson_iter_utf8(&sub, NULL)
		   : "failed";
	return 0;
}

/* Keys whose merged value is the largest, not the sum. */
static bool takes_max(const char *key)
{
	return strcmp(key, "pausedForMs") == 0 || strcmp(key, "pauseTimeoutMs") == 0;
}

/* The merged value of `key` (an integer in the first reply) over `all`. */
static int64_t merge_int(const bson_t *all, int n, const char *key)
{
	int64_t v = 0, x;
	bson_iter_t it;

	for (int i = 0; i < n; i++) {
		x = bson_iter_init_find(&it, &all[i], key) ? bson_iter_as_int64(&it) : 0;
		v = takes_max(key) ? (i == 0 || x > v ? x : v) : v + x;
	}
	return v;
}

/* Every reply ok: the first one's fields, integers merged, "state" the
 * least advanced (pausing unless every worker is paused), then `workers`. */
static void merge_ok(bson_t *out, const bson_t *all, int n, const bson_t *workers)
{
	bson_iter_t it, s;
	const char *key;

	bson_iter_init(&it, &all[0]);
	while (bson_iter_next(&it)) {
		key = bson_iter_key(&it);
		if (strcmp(key, "ok") == 0)
			continue;
		if (BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it)) {
			BSON_APPEND_INT64(out, key, merge_int(all, n, key));
			continue;
		}
		if (strcmp(key, "state") == 0) {
			const char *st = bson_iter_utf8(&it, NULL);

			for (int i = 1; i < n; i++)
				if (bson_iter_init_find(&s, &all[i], "state") &&
				    BSON_ITER_HOLDS_UTF8(&s) &&
				    strcmp(bson_iter_utf8(&s, NULL), "pausing") == 0)
					st = "pausing";
			BSON_APPEND_UTF8(out, key, st);
			continue;
		}
		bson_append_iter(out, key, -1, &it);
	}
	BSON_APPEND_ARRAY(out, "workers", workers);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
}

static void merge_done(void *arg, const bson_t *result)
{
	struct fan *f = arg;
	bson_t all[64], workers, out;
	bson_iter_t replies;
	const char *why = result_error(result, &replies), *fwhy = NULL;
	char msg[400], key[16];
	int n = 0, w, fw = -1;

	if (why != NULL) {
		fail(f->req, f->req->cmd, why, NULL);
		fan_free(f);
		return;
	}
	bson_init(&workers);
	while (bson_iter_next(&replies) && n < 64) {
		bson_t reply, e;

		snprintf(key, sizeof(key), "%d", n);
		BSON_APPEND_DOCUMENT_BEGIN(&workers, key, &e);
		if (entry_parse(&replies, &w, &reply, &why) == 1) {
			bson_copy_to(&reply, &all[n]);
			BSON_APPEND_INT32(&e, "worker", w);
			BSON_APPEND_DOCUMENT(&e, "reply", &reply);
		} else {
			bson_init(&all[n]);
			BSON_APPEND_INT32(&e, "worker", w);
			BSON_APPEND_UTF8(&e, "error", why);
			if (fwhy == NULL) {
				fwhy = why;
				fw = w;
			}
		}
		bson_append_document_end(&workers, &e);
		n++;
	}
	if (n == 0) {
		fail(f->req, f->req->cmd, "no worker answered", NULL);
	} else if (fwhy != NULL) {
		snprintf(msg, sizeof(msg), "worker %d: %s (workers lists what each did)", fw, fwhy);
		fail(f->req, f->req->cmd, msg, &workers);
	} else {
		bson_init(&out);
		merge_ok(&out, all, n, &workers);
		request_reply_doc(f->req, &out);
		bson_destroy(&out);
	}
	for (int i = 0; i < n; i++)
		bson_destroy(&all[i]);
	bson_destroy(&workers);
	fan_free(f);
}

/* Kill: the holding worker's answer as it is (ok or its error). */
static void one_done(void *arg, const bson_t *result)
{
	struct fan *f = arg;
	bson_iter_t replies;
	const char *why = result_error(result, &replies);
	bson_t reply;
	int w;

	if (why == NULL && !bson_iter_next(&replies))
		why = "no worker answered";
	if (why == NULL && entry_parse(&replies, &w, &reply, &why) >= 0)
		request_reply_doc(f->req, &reply);
	else
		fail(f->req, f->req->cmd, why, NULL);
	fan_free(f);
}

static void show_ask(struct fan *f);

/* Append worker w's rows to the page, each with its `worker`. */
static void show_take(struct fan *f, const bson_t *reply)
{
	bson_iter_t it, rows, field;
	const uint8_t *data;
	uint32_t len;
	bson_t row, out;
	char key[16];

	if (bson_iter_init_find(&it, reply, "rows") && bson_iter_recurse(&it, &rows))
		while (bson_iter_next(&rows) && BSON_ITER_HOLDS_DOCUMENT(&rows)) {
			bson_iter_document(&rows, &len, &data);
			if (f->full || (int64_t)(f->rows.len + len + 32) > f->max_bytes) {
				f->full = true;
				break;
			}
			if (!bson_init_static(&row, data, len))
				continue;
			snprintf(key, sizeof(key), "%lld", (long long)f->added++);
			BSON_APPEND_DOCUMENT_BEGIN(&f->rows, key, &out);
			bson_iter_init(&field, &row);
			while (bson_iter_next(&field))
				bson_append_iter(&out, bson_iter_key(&field), -1, &field);
			BSON_APPEND_INT32(&out, "worker", f->w);
			bson_append_document_end(&f->rows, &out);
		}
	if (bson_iter_init_find(&it, reply, "truncated") && bson_iter_as_bool(&it))
		f->full = true;
	if (bson_iter_init_find(&it, reply, "total"))
		f->offset += bson_iter_as_int64(&it);
}

static void show_finish(struct fan *f)
{
	bson_t out;

	bson_init(&out);
	BSON_APPEND_ARRAY(&out, "rows", &f->rows);
	BSON_APPEND_INT64(&out, "total", f->offset);
	BSON_APPEND_BOOL(&out, "truncated", f->full);
	if (f->full)
		BSON_APPEND_INT64(&out, "next", f->skip + f->added);
	BSON_APPEND_INT32(&out, "workers", g.nworkers);
	if (f->nmissing > 0)
		BSON_APPEND_ARRAY(&out, "unanswered", &f->missing);
	BSON_APPEND_DOUBLE(&out, "ok", 1.0);
	request_reply_doc(f->req, &out);
	bson_destroy(&out);
	fan_free(f);
}

static void show_done(void *arg, const bson_t *result)
{
	struct fan *f = arg;
	bson_iter_t replies;
	const char *why = result_error(result, &replies);
	char key[16];
	bson_t reply;
	int w, rc = -1;

	if (why == NULL && bson_iter_next(&replies))
		rc = entry_parse(&replies, &w, &reply, &why);
	if (rc == 0) { /* refused (a bad list name): as one worker answers it */
		request_reply_doc(f->req, &reply);
		fan_free(f);
		return;
	}
	if (rc == 1) {
		show_take(f, &reply);
	} else { /* down (restarting): listed, the page goes on without it */
		snprintf(key, sizeof(key), "%d", f->nmissing++);
		BSON_APPEND_INT32(&f->missing, key, f->w);
	}
	if (++f->w >= g.nworkers) {
		show_finish(f);
		return;
	}
	show_ask(f);
}

static void show_ask(struct fan *f)
{
	int64_t left = f->max_bytes - (int64_t)f->rows.len;
	bson_iter_t it;
	bson_t cmd;

	if (left < 1024)
		f->full = true;
	bson_init(&cmd);
	if (bson_iter_init_find(&it, f->cmd, "mongoplexShow"))
		bson_append_iter(&cmd, "mongoplexShow", -1, &it);
	/* past the page: only the worker's total (no rows) */
	BSON_APPEND_INT64(&cmd, "skip",
			  f->full ? INT64_MAX / 2
				  : (f->skip > f->offset ? f->skip - f->offset : 0));
	BSON_APPEND_INT64(&cmd, "maxBytes", left < 1024 ? 1024 : left);
	wctl_ask("fan", f->w, &cmd, show_done, f);
	bson_destroy(&cmd);
}

static int64_t int_field(const bson_t *body, const char *name, int64_t dflt)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, body, name) && BSON_ITER_HOLDS_NUMBER(&it)
		   ? bson_iter_as_int64(&it)
		   : dflt;
}

bool admin_fan(struct request *req, const bson_t *body)
{
	const char *cmd = req->cmd;
	struct fan *f;
	bson_iter_t it;
	double id;

	if (!wctl_active() || g.nworkers <= 1)
		return false;
	f = xcalloc(1, sizeof(*f));
	f->req = req;
	f->cmd = bson_new();
	bson_init(&f->rows);
	bson_init(&f->missing);
	if (bson_iter_init(&it, body) && bson_iter_next(&it))
		bson_append_iter(f->cmd, cmd, -1, &it);
	if (strcmp(cmd, "mongoplexShow") == 0) {
		f->skip = int_field(body, "skip", 0);
		f->max_bytes = int_field(body, "maxBytes", ADMIN_SHOW_MAX_BYTES);
		if (f->skip < 0 || f->max_bytes < 0) { /* the worker's own message */
			fan_free(f);
			return false;
		}
		if (f->max_bytes > ADMIN_SHOW_MAX_BYTES || f->max_bytes < 1024)
			f->max_bytes = ADMIN_SHOW_MAX_BYTES;
		show_ask(f);
	} else if (strcmp(cmd, "mongoplexKill") == 0) {
		id = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_double(&it) : -1;
		if (!(id >= 0 && id < 9007199254740992.0 && (double)(uint64_t)id == id)) {
			fan_free(f); /* refused here, with the usual message */
			return false;
		}
		/* who asked, for the victim's log line (its owner id is its client id) */
		BSON_APPEND_INT64(f->cmd, "by", req->owner != NULL ? (int64_t)req->owner->id : 0);
		wctl_ask("fan", (int)((uint64_t)id % (uint64_t)g.nworkers), f->cmd, one_done, f);
	} else if (strcmp(cmd, "mongoplexReload") == 0) {
		wctl_ask("reload", -1, NULL, merge_done, f);
	} else {
		wctl_ask("fan", -1, f->cmd, merge_done, f);
	}
	return true;
}
