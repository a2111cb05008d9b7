/*
 * wctl_master.c — the master's end of the control channels (wctl.h): one
 * socketpair per worker, read and written without blocking from the
 * master's poll loop (proxy/workers.c), no event loop of its own.
 *
 *   {op:"fan"}    from worker k ─▶ a fan: "exec" to the target workers,
 *   {op:"reload"} from worker k ─▶ the file checked (the SIGHUP check),
 *                                  then a fan of mongoplexReload
 *   {op:"done"}   from worker i ─▶ its fan's answer i
 *   a fan is complete when every asked worker answered, exited, or
 *   WCTL_FAN_TIMEOUT_MS passed ─▶ {op:"result", replies} to worker k
 */
#include "proxy/wctl_master.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "proxy/proxy.h"
#include "proxy/wctl.h"
#include "proxy/workers.h"

#define MAX_FANS    16
#define MAX_REPLAYS 32

struct chan {
	int fd; /* -1: closed */
	struct evbuffer *in, *out;
};

/* A command run on some workers for worker `from`. */
struct fan {
	bool used;
	int from;
	int64_t from_id; /* the asking worker's question id */
	int64_t id;	 /* ours, in the "exec" messages */
	uint64_t deadline_usec;
	bool asked[WORKERS_MAX];
	bson_t *reply[WORKERS_MAX]; /* NULL: none (yet) */
	const char *error[WORKERS_MAX];
};

static struct chan chans[WORKERS_MAX];
static struct fan fans[MAX_FANS];
static int nchan;
static int64_t next_id = 1;
static bool (*reload_check)(char *err, size_t len);
/* The pauses and resumes since the last resume of every pool, in order:
 * run again on a worker that (re)starts, so that it holds requests as the
 * others do instead of serving in the middle of a maintenance. */
static bson_t *replays[MAX_REPLAYS];
static int nreplays;

static void send_doc(int i, const bson_t *doc)
{
	if (chans[i].fd >= 0)
		wctl_put(chans[i].out, doc);
}

static void send_exec(int i, int64_t id, const bson_t *cmd)
{
	bson_t ex;

	bson_init(&ex);
	BSON_APPEND_UTF8(&ex, "op", "exec");
	BSON_APPEND_INT64(&ex, "id", id);
	BSON_APPEND_DOCUMENT(&ex, "cmd", cmd);
	send_doc(i, &ex);
	bson_destroy(&ex);
}

void wm_init(int n, bool (*check)(char *err, size_t len))
{
	nchan = n;
	reload_check = check;
	for (int i = 0; i < n; i++) {
		chans[i].fd = -1;
		chans[i].in = evbuffer_new();
		chans[i].out = evbuffer_new();
		if (chans[i].in == NULL || chans[i].out == NULL)
			fatal("workers: out of memory");
	}
}

int wm_open(int i)
{
	int sv[2];

	wm_gone(i);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		log_error("workers: no control channel for worker %d: %s", i, strerror(errno));
		return -1;
	}
	evutil_make_socket_nonblocking(sv[0]);
	chans[i].fd = sv[0];
	/* in the socket before the fork, read by the worker before it
	 * serves (wctl_attach): id 0, no fan */
	for (int k = 0; k < nreplays; k++)
		send_exec(i, 0, replays[k]);
	while (evbuffer_get_length(chans[i].out) > 0 && evbuffer_write(chans[i].out, sv[0]) > 0)
		;
	if (nreplays > 0)
		log_notice(
		    "workers: worker %d: %d pause/resume command(s) of the console run again "
		    "on it",
		    i, nreplays);
	return sv[1];
}

void wm_child(void)
{
	for (int i = 0; i < nchan; i++)
		if (chans[i].fd >= 0) {
			close(chans[i].fd);
			chans[i].fd = -1;
		}
}

void wm_fini(void)
{
	for (int i = 0; i < nchan; i++) {
		wm_gone(i);
		evbuffer_free(chans[i].in);
		evbuffer_free(chans[i].out);
	}
	nchan = 0;
	while (nreplays > 0)
		bson_destroy(replays[--nreplays]);
}

static bool fan_complete(const struct fan *f)
{
	for (int i = 0; i < nchan; i++)
		if (f->asked[i] && f->reply[i] == NULL && f->error[i] == NULL)
			return false;
	return true;
}

/* Send the result to the asking worker (if it is still there) and end f. */
static void fan_finish(struct fan *f)
{
	bson_t res, arr, e;
	char key[16];
	int n = 0;

	bson_init(&res);
	BSON_APPEND_UTF8(&res, "op", "result");
	BSON_APPEND_INT64(&res, "id", f->from_id);
	BSON_APPEND_ARRAY_BEGIN(&res, "replies", &arr);
	for (int i = 0; i < nchan; i++) {
		if (!f->asked[i])
			continue;
		snprintf(key, sizeof(key), "%d", n++);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &e);
		BSON_APPEND_INT32(&e, "worker", i);
		if (f->reply[i] != NULL)
			BSON_APPEND_DOCUMENT(&e, "reply", f->reply[i]);
		else
			BSON_APPEND_UTF8(&e, "error", f->error[i]);
		bson_append_document_end(&arr, &e);
		if (f->reply[i] != NULL)
			bson_destroy(f->reply[i]);
	}
	bson_append_array_end(&res, &arr);
	send_doc(f->from, &res);
	bson_destroy(&res);
	memset(f, 0, sizeof(*f));
}

static void answer_error(int from, int64_t from_id, const char *why)
{
	bson_t res;

	bson_init(&res);
	BSON_APPEND_UTF8(&res, "op", "result");
	BSON_APPEND_INT64(&res, "id", from_id);
	BSON_APPEND_UTF8(&res, "error", why);
	send_doc(from, &res);
	bson_destroy(&res);
}

/* Remember a pause or resume for workers that start later. */
static void note_replay(const bson_t *cmd)
{
	bson_iter_t it;
	const char *name;

	if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
		return;
	name = bson_iter_key(&it);
	if (strcmp(name, "mongoplexPause") != 0 && strcmp(name, "mongoplexResume") != 0)
		return;
	if (strcmp(name, "mongoplexResume") == 0 && BSON_ITER_HOLDS_NUMBER(&it) &&
	    bson_iter_as_int64(&it) == 1) { /* everything runs again */
		while (nreplays > 0)
			bson_destroy(replays[--nreplays]);
		return;
	}
	if (nreplays == MAX_REPLAYS) {
		bson_destroy(replays[0]);
		memmove(replays, replays + 1, sizeof(replays[0]) * (MAX_REPLAYS - 1));
		nreplays--;
	}
	replays[nreplays++] = bson_copy(cmd);
}

/* Run cmd on `target` (-1: every worker) for worker `from`. */
static void fan_start(int from, int64_t from_id, int target, const bson_t *cmd)
{
	struct fan *f = NULL;

	if (target >= nchan) {
		answer_error(from, from_id, "no such worker");
		return;
	}
	for (int k = 0; k < MAX_FANS && f == NULL; k++)
		if (!fans[k].used)
			f = &fans[k];
	if (f == NULL) {
		answer_error(from, from_id, "too many console commands at once; try again");
		return;
	}
	f->used = true;
	f->from = from;
	f->from_id = from_id;
	f->id = next_id++;
	f->deadline_usec = proxy_tick() + WCTL_FAN_TIMEOUT_MS * 1000ULL;
	if (target < 0)
		note_replay(cmd);
	for (int i = 0; i < nchan; i++) {
		if (target >= 0 && i != target)
			continue;
		f->asked[i] = true;
		if (chans[i].fd < 0)
			f->error[i] = "worker not running (restarting)";
		else
			send_exec(i, f->id, cmd);
	}
	if (fan_complete(f))
		fan_finish(f);
}

static int64_t int_of(const bson_t *doc, const char *key)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it)
		   ? bson_iter_as_int64(&it)
		   : -1;
}

static void on_done(int i, const bson_t *msg)
{
	int64_t id = int_of(msg, "id");
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;

	for (int k = 0; k < MAX_FANS; k++) {
		struct fan *f = &fans[k];

		if (!f->used || f->id != id || !f->asked[i] || f->reply[i] != NULL ||
		    f->error[i] != NULL)
			continue;
		if (bson_iter_init_find(&it, msg, "reply") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &len, &data);
			f->reply[i] = bson_new_from_data(data, len);
		}
		if (f->reply[i] == NULL)
			f->error[i] = "a malformed answer";
		if (fan_complete(f))
			fan_finish(f);
		return;
	}
}

static void on_message(int i, const bson_t *msg)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	const char *op;
	char err[CFG_ERR_LEN + 100];
	bson_t cmd;

	if (!bson_iter_init_find(&it, msg, "op") || !BSON_ITER_HOLDS_UTF8(&it))
		return;
	op = bson_iter_utf8(&it, NULL);
	if (strcmp(op, "done") == 0) {
		on_done(i, msg);
	} else if (strcmp(op, "fan") == 0) {
		if (!bson_iter_init_find(&it, msg, "cmd") || !BSON_ITER_HOLDS_DOCUMENT(&it))
			return;
		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&cmd, data, len))
			fan_start(i, int_of(msg, "id"), (int)int_of(msg, "target"), &cmd);
	} else if (strcmp(op, "reload") == 0) {
		if (reload_check == NULL || !reload_check(err, sizeof(err))) {
			answer_error(i, int_of(msg, "id"), reload_check ? err : "no reload here");
			return;
		}
		bson_init(&cmd);
		BSON_APPEND_INT32(&cmd, "mongoplexReload", 1);
		fan_start(i, int_of(msg, "id"), -1, &cmd);
		bson_destroy(&cmd);
	}
}

void wm_gone(int i)
{
	if (chans[i].fd >= 0)
		close(chans[i].fd);
	chans[i].fd = -1;
	evbuffer_drain(chans[i].in, evbuffer_get_length(chans[i].in));
	evbuffer_drain(chans[i].out, evbuffer_get_length(chans[i].out));
	for (int k = 0; k < MAX_FANS; k++) {
		struct fan *f = &fans[k];

		if (!f->used || !f->asked[i] || f->reply[i] != NULL || f->error[i] != NULL)
			continue;
		f->error[i] = "the worker exited before it answered";
		if (fan_complete(f))
			fan_finish(f);
	}
}

int wm_pollfds(struct pollfd *pfd, int *index)
{
	int n = 0;

	for (int i = 0; i < nchan; i++) {
		if (chans[i].fd < 0)
			continue;
		pfd[n].fd = chans[i].fd;
		pfd[n].events = POLLIN | (evbuffer_get_length(chans[i].out) > 0 ? POLLOUT : 0);
		pfd[n].revents = 0;
		index[n++] = i;
	}
	return n;
}

static void io(int i, short revents)
{
	bson_t *msg;
	int rc, r;

	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		while ((r = evbuffer_read(chans[i].in, chans[i].fd, 1 << 20)) > 0)
			;
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			wm_gone(i); /* the worker is going; SIGCHLD will say how */
			return;
		}
		while ((rc = wctl_take(chans[i].in, &msg)) == 1) {
			on_message(i, msg);
			bson_destroy(msg);
		}
		if (rc < 0) {
			log_error("workers: worker %d sent a malformed control message; "
				  "closing its channel",
				  i);
			wm_gone(i);
			return;
		}
	}
}

void wm_io(const struct pollfd *pfd, const int *index, int n)
{
	for (int k = 0; k < n; k++)
		if (pfd[k].revents != 0 && chans[index[k]].fd == pfd[k].fd)
			io(index[k], pfd[k].revents);
	for (int k = 0; k < MAX_FANS; k++) {
		struct fan *f = &fans[k];

		if (!f->used || proxy_tick() < f->deadline_usec)
			continue;
		for (int i = 0; i < nchan; i++)
			if (f->asked[i] && f->reply[i] == NULL && f->error[i] == NULL)
				f->error[i] = "the worker did not answer in time";
		fan_finish(f);
	}
	/* answers and results go out now, or when the socket has room */
	for (int i = 0; i < nchan; i++)
		if (chans[i].fd >= 0 && evbuffer_get_length(chans[i].out) > 0 &&
		    evbuffer_write(chans[i].out, chans[i].fd) < 0 && errno != EAGAIN &&
		    errno != EINTR)
			wm_gone(i);
}
