/*
 * fake_backend.c — the fake MongoDB server thread (see fake_backend.h):
 * accepts, frames, answers hello and commands by the configured fault.
 */
#define _GNU_SOURCE
#include "fake_backend.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake_pin.h"
#include "harness.h"

static const struct {
	const char *name;
	enum fault f;
} fault_names[] = {
    {"f_reset", F_RESET_MID_REPLY},
    {"f_close", F_CLOSE_BEFORE_REPLY},
    {"f_stall", F_STALL},
    {"f_half", F_HALF_THEN_STALL},
    {"f_len5", F_LEN5},
    {"f_len60m", F_LEN60M},
    {"f_opreply", F_OP_REPLY},
    {"f_wrongto", F_WRONG_RESPONSE_TO},
    {"f_stray", F_STRAY_THEN_RIGHT},
    {"f_exhaust", F_EXHAUST},
    {"f_badbson", F_BAD_BSON},
    {"f_hdronly", F_HEADER_ONLY},
    {"f_cmderr", F_CMD_ERROR},
    {"f_crcok", F_CHECKSUM_OK},
    {"f_crcbad", F_CHECKSUM_BAD},
    {"f_slow", F_SLOW},
};

struct fake_cfg fake_default_cfg(void)
{
	struct fake_cfg c = {.min_wire = 0,
			     .max_wire = 8,
			     .max_write_batch = 100000,
			     .kind = FK_STANDALONE,
			     .hello_stall = false,
			     .mtc = MTC_NONE,
			     .default_fault = F_NONE};

	return c;
}

/* ---- little-endian reply building (no criterion calls in the fake thread) */

struct fbuf {
	uint8_t *p;
	size_t len, cap;
};

static void fb_add(struct fbuf *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (b->p == NULL)
			abort();
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void fb_i32(struct fbuf *b, int32_t v)
{
	uint32_t le = BSON_UINT32_TO_LE((uint32_t)v);

	fb_add(b, &le, 4);
}

static void fb_patch_len(struct fbuf *b, size_t at)
{
	uint32_t le = BSON_UINT32_TO_LE((uint32_t)(b->len - at));

	memcpy(b->p + at, &le, 4);
}

static int32_t rd_i32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return (int32_t)BSON_UINT32_FROM_LE(v);
}

/* Append one OP_MSG (kind-0 body `doc`) to b. */
static void fb_op_msg(struct fbuf *b, int32_t request_id, int32_t response_to, uint32_t flags,
		      const bson_t *doc)
{
	size_t at = b->len;
	uint8_t kind = 0;

	fb_i32(b, 0);
	fb_i32(b, request_id);
	fb_i32(b, response_to);
	fb_i32(b, H_WIRE_OP_MSG);
	fb_i32(b, (int32_t)flags);
	fb_add(b, &kind, 1);
	fb_add(b, bson_get_data(doc), doc->len);
	fb_patch_len(b, at);
}

/* Append one OP_REPLY carrying `doc`. */
static void fb_op_reply(struct fbuf *b, int32_t request_id, int32_t response_to, const bson_t *doc)
{
	size_t at = b->len;

	fb_i32(b, 0);
	fb_i32(b, request_id);
	fb_i32(b, response_to);
	fb_i32(b, H_WIRE_OP_REPLY);
	fb_i32(b, 8); /* responseFlags: AwaitCapable */
	fb_i32(b, 0); /* cursorID (int64) */
	fb_i32(b, 0);
	fb_i32(b, 0); /* startingFrom */
	fb_i32(b, 1); /* numberReturned */
	fb_add(b, bson_get_data(doc), doc->len);
	fb_patch_len(b, at);
}

/* ---- the fake server thread */

static void fconn_close(struct fake *f, int i, bool reset)
{
	struct fconn *c = &f->conns[i];

	if (reset) {
		struct linger lg = {1, 0};

		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(c->fd);
	free(c->in);
	free(c->deferred);
	f->conns[i] = f->conns[--f->nconns];
}

static void hello_reply(struct fake *f, const struct fake_cfg *cfg, bson_t *out)
{
	bson_init(out);
	switch (cfg->kind) {
	case FK_STANDALONE:
		BSON_APPEND_BOOL(out, "ismaster", true);
		break;
	case FK_SECONDARY:
		BSON_APPEND_BOOL(out, "ismaster", false);
		BSON_APPEND_BOOL(out, "secondary", true);
		BSON_APPEND_UTF8(out, "setName", "rs");
		break;
	case FK_RS_PRIMARY:
		BSON_APPEND_BOOL(out, "ismaster", true);
		BSON_APPEND_BOOL(out, "secondary", false);
		BSON_APPEND_UTF8(out, "setName", "rs0");
		BSON_APPEND_INT32(out, "setVersion", 1);
		break;
	}
	BSON_APPEND_INT32(out, "maxWireVersion", cfg->max_wire);
	BSON_APPEND_INT32(out, "minWireVersion", cfg->min_wire);
	BSON_APPEND_INT32(out, "maxBsonObjectSize", 16777216);
	BSON_APPEND_INT32(out, "maxMessageSizeBytes", 48000000);
	BSON_APPEND_INT32(out, "maxWriteBatchSize", cfg->max_write_batch);
	BSON_APPEND_INT32(out, "connectionId", f->next_serial);
	if (cfg->session_minutes > 0)
		BSON_APPEND_INT32(out, "logicalSessionTimeoutMinutes", cfg->session_minutes);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
}

/* Documents for a find: one per _id asked for ({_id: v}, {$eq}, {$in}),
 * else a single {_id: 1}. */
static void find_docs(const bson_t *cmd, int serial, bson_t *arr)
{
	bson_iter_t it, id, in;
	int n = 0;
	char key[16];
	const char *k;

#define ADD_DOC(iter)                                                                              \
	do {                                                                                       \
		bson_t d;                                                                          \
		bson_uint32_to_string((uint32_t)n++, &k, key, sizeof(key));                        \
		bson_append_document_begin(arr, k, -1, &d);                                        \
		bson_append_value(&d, "_id", 3, bson_iter_value(iter));                            \
		BSON_APPEND_INT32(&d, "conn", serial);                                             \
		bson_append_document_end(arr, &d);                                                 \
	} while (0)

	if (bson_iter_init(&it, cmd) && bson_iter_find_descendant(&it, "filter._id", &id)) {
		if (BSON_ITER_HOLDS_DOCUMENT(&id) && bson_iter_recurse(&id, &in) &&
		    bson_iter_next(&in)) {
			if (strcmp(bson_iter_key(&in), "$in") == 0 && BSON_ITER_HOLDS_ARRAY(&in)) {
				bson_iter_t el;

				bson_iter_recurse(&in, &el);
				while (bson_iter_next(&el))
					ADD_DOC(&el);
			} else if (strcmp(bson_iter_key(&in), "$eq") == 0) {
				ADD_DOC(&in);
			}
		} else {
			ADD_DOC(&id);
		}
		return;
	}
	{
		bson_t d;

		bson_append_document_begin(arr, "0", 1, &d);
		BSON_APPEND_INT32(&d, "_id", 1);
		BSON_APPEND_INT32(&d, "conn", serial);
		bson_append_document_end(arr, &d);
	}
#undef ADD_DOC
}

/* The normal answer to `cmd` (first key `name`, first value `coll`). */
static void normal_reply(const bson_t *cmd, const char *name, const char *coll, int serial,
			 bson_t *out)
{
	bson_iter_t it;

	bson_init(out);
	if (strcmp(name, "find") == 0) {
		bson_t cur, arr;
		char ns[300];
		const char *db = "test";

		if (bson_iter_init_find(&it, cmd, "$db") && BSON_ITER_HOLDS_UTF8(&it))
			db = bson_iter_utf8(&it, NULL);
		snprintf(ns, sizeof(ns), "%s.%s", db, coll ? coll : "c");
		BSON_APPEND_DOCUMENT_BEGIN(out, "cursor", &cur);
		BSON_APPEND_ARRAY_BEGIN(&cur, "firstBatch", &arr);
		find_docs(cmd, serial, &arr);
		bson_append_array_end(&cur, &arr);
		BSON_APPEND_INT64(&cur, "id", 0);
		BSON_APPEND_UTF8(&cur, "ns", ns);
		bson_append_document_end(out, &cur);
	} else {
		BSON_APPEND_INT32(out, "n", 1);
	}
	BSON_APPEND_INT32(out, "conn", serial);
	if (bson_iter_init_find(&it, cmd, "tag"))
		bson_append_value(out, "echo", 4, bson_iter_value(&it));
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
}

static enum fault fault_for(const char *coll, enum fault dflt)
{
	if (coll != NULL)
		for (size_t i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++)
			if (strcmp(coll, fault_names[i].name) == 0)
				return fault_names[i].f;
	return dflt;
}

static bool is_hello(const char *name)
{
	return strcmp(name, "hello") == 0 || strcasecmp(name, "isMaster") == 0;
}

/* Handle one complete message; false: the connection was closed. */
static bool fake_handle(struct fake *f, int ci, const uint8_t *msg, size_t len)
{
	struct fconn *c = &f->conns[ci];
	int32_t req_id = rd_i32(msg + 4), opcode = rd_i32(msg + 12);
	uint32_t flags;
	size_t off = 20; /* first section: kind byte */
	bson_t cmd, reply;
	bson_iter_t it;
	const char *name, *coll = NULL;
	struct fake_cfg cfg;
	struct fbuf out = {0};
	enum fault fault;
	bool keep = true;
	int32_t my_id = f->next_reply_id++;

	if (opcode != H_WIRE_OP_MSG || len < 21 + 5) {
		fconn_close(f, ci, false);
		return false;
	}
	flags = (uint32_t)rd_i32(msg + 16);
	/* find the kind-0 body among the sections */
	for (;;) {
		int32_t n;

		if (off + 5 > len) {
			fconn_close(f, ci, false);
			return false;
		}
		n = rd_i32(msg + off + 1);
		if (msg[off] == 0)
			break;
		off += 1 + (size_t)n;
	}
	if (!bson_init_static(&cmd, msg + off + 1, (size_t)rd_i32(msg + off + 1)) ||
	    !bson_iter_init(&it, &cmd) || !bson_iter_next(&it)) {
		fconn_close(f, ci, false);
		return false;
	}
	name = bson_iter_key(&it);
	if (BSON_ITER_HOLDS_UTF8(&it))
		coll = bson_iter_utf8(&it, NULL);

	pthread_mutex_lock(&f->mu);
	cfg = f->cfg;
	if (is_hello(name)) {
		bson_iter_t app;

		f->hellos++;
		if (bson_iter_init(&app, &cmd) &&
		    bson_iter_find_descendant(&app, "client.application.name", &app) &&
		    BSON_ITER_HOLDS_UTF8(&app))
			snprintf(f->appname, sizeof(f->appname), "%s", bson_iter_utf8(&app, NULL));
	} else {
		f->commands++;
		if (flags & H_MSG_MORE_TO_COME)
			f->mtc_seen++;
	}
	pthread_mutex_unlock(&f->mu);

	if (is_hello(name)) {
		if (cfg.hello_stall)
			return true;
		if (cfg.hello_error) {
			bson_init(&reply);
			BSON_APPEND_DOUBLE(&reply, "ok", 0.0);
			BSON_APPEND_UTF8(&reply, "errmsg", "fake says not now");
			BSON_APPEND_INT32(&reply, "code", 13);
		} else {
			hello_reply(f, &cfg, &reply);
		}
		fb_op_msg(&out, my_id, req_id, 0, &reply);
		bson_destroy(&reply);
		keep = raw_send(c->fd, out.p, out.len);
		free(out.p);
		if (!keep)
			fconn_close(f, ci, false);
		return keep;
	}

	bson_init(&reply);
	if (!fake_pin_reply(c->serial, &cmd, name, coll, &reply)) { /* fake_pin.c */
		bson_destroy(&reply);
		normal_reply(&cmd, name, coll, c->serial, &reply);
	}
	if (flags & H_MSG_MORE_TO_COME) {
		/* No reply is due. Like FerretDB, answer anyway if asked to. */
		if (cfg.mtc == MTC_IMMEDIATE) {
			fb_op_msg(&out, my_id, req_id, 0, &reply);
			keep = raw_send(c->fd, out.p, out.len);
			free(out.p);
		} else if (cfg.mtc == MTC_DEFERRED) {
			fb_op_msg(&out, my_id, req_id, 0, &reply);
			free(c->deferred);
			c->deferred = out.p;
			c->deferred_len = out.len;
		}
		bson_destroy(&reply);
		if (!keep)
			fconn_close(f, ci, false);
		return keep;
	}

	fault = fault_for(coll, cfg.default_fault);
	if (fault != F_NONE) {
		pthread_mutex_lock(&f->mu);
		f->faults_done++;
		pthread_mutex_unlock(&f->mu);
	}
	if (c->deferred != NULL) {
		fb_add(&out, c->deferred, c->deferred_len);
		free(c->deferred);
		c->deferred = NULL;
	}
	switch (fault) {
	case F_NONE:
		fb_op_msg(&out, my_id, req_id, 0, &reply);
		break;
	case F_RESET_MID_REPLY: {
		size_t start = out.len;

		fb_op_msg(&out, my_id, req_id, 0, &reply);
		out.len = start + (out.len - start) / 2;
		raw_send(c->fd, out.p, out.len);
		h_sleep_ms(50); /* let the proxy read the half */
		out.len = 0;
		keep = false;
		break;
	}
	case F_CLOSE_BEFORE_REPLY:
	case F_STALL:
		break;
	case F_HALF_THEN_STALL: {
		size_t start = out.len;

		fb_op_msg(&out, my_id, req_id, 0, &reply);
		out.len = start + (out.len - start) / 2;
		break;
	}
	case F_LEN5:
	case F_LEN60M:
		fb_i32(&out, fault == F_LEN5 ? 5 : 60000000);
		fb_i32(&out, my_id);
		fb_i32(&out, req_id);
		fb_i32(&out, H_WIRE_OP_MSG);
		fb_i32(&out, 0);
		break;
	case F_OP_REPLY:
		fb_op_reply(&out, my_id, req_id, &reply);
		break;
	case F_WRONG_RESPONSE_TO:
		fb_op_msg(&out, my_id, req_id + 1000, 0, &reply);
		break;
	case F_STRAY_THEN_RIGHT: {
		bson_t stray = BSON_INITIALIZER;

		BSON_APPEND_UTF8(&stray, "echo", "stray");
		BSON_APPEND_DOUBLE(&stray, "ok", 1.0);
		fb_op_msg(&out, my_id, req_id + 1000, 0, &stray);
		fb_op_msg(&out, f->next_reply_id++, req_id, 0, &reply);
		bson_destroy(&stray);
		break;
	}
	case F_EXHAUST:
		fb_op_msg(&out, my_id, req_id, H_MSG_MORE_TO_COME, &reply);
		break;
	case F_BAD_BSON: {
		size_t at = out.len;

		fb_op_msg(&out, my_id, req_id, 0, &reply);
		/* the body's first element gets type 0x55, which BSON does not
		 * have: framing intact, content invalid */
		out.p[at + 21 + 4] = 0x55;
		break;
	}
	case F_HEADER_ONLY:
		fb_i32(&out, 16);
		fb_i32(&out, my_id);
		fb_i32(&out, req_id);
		fb_i32(&out, H_WIRE_OP_MSG);
		break;
	case F_SLOW:
		h_sleep_ms(300);
		fb_op_msg(&out, my_id, req_id, 0, &reply);
		break;
	case F_CHECKSUM_OK:
	case F_CHECKSUM_BAD: {
		size_t at = out.len;
		uint32_t crc;

		fb_op_msg(&out, my_id, req_id, H_MSG_CHECKSUM, &reply);
		fb_i32(&out, 0);
		fb_patch_len(&out, at);
		crc = h_crc32c(out.p + at, out.len - at - 4);
		if (fault == F_CHECKSUM_BAD)
			crc ^= 0x5a5a5a5a;
		crc = BSON_UINT32_TO_LE(crc);
		memcpy(out.p + out.len - 4, &crc, 4);
		break;
	}
	case F_CMD_ERROR: {
		bson_t err = BSON_INITIALIZER;

		BSON_APPEND_DOUBLE(&err, "ok", 0.0);
		BSON_APPEND_UTF8(&err, "errmsg", "fake backend says no");
		BSON_APPEND_INT32(&err, "code", 2);
		BSON_APPEND_UTF8(&err, "codeName", "BadValue");
		fb_op_msg(&out, my_id, req_id, 0, &err);
		bson_destroy(&err);
		break;
	}
	}
	bson_destroy(&reply);
	if (out.len > 0 && !raw_send(c->fd, out.p, out.len))
		keep = false;
	free(out.p);
	if (fault == F_CLOSE_BEFORE_REPLY)
		keep = false;
	if (!keep)
		fconn_close(f, ci, fault == F_RESET_MID_REPLY);
	return keep;
}

/* Read what is available on conns[ci]; handle complete messages. */
static void fake_read(struct fake *f, int ci)
{
	struct fconn *c = &f->conns[ci];
	ssize_t n;

	if (c->cap - c->len < 65536) {
		c->cap = c->cap ? c->cap * 2 : 131072;
		c->in = realloc(c->in, c->cap);
		if (c->in == NULL)
			abort();
	}
	n = recv(c->fd, c->in + c->len, c->cap - c->len, 0);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		fconn_close(f, ci, false);
		return;
	}
	c->len += (size_t)n;
	while (c->len >= 4) {
		int32_t mlen = rd_i32(c->in);
		uint8_t *msg;

		if (mlen < 16 || mlen > 48000000) {
			fconn_close(f, ci, false);
			return;
		}
		if (c->len < (size_t)mlen)
			return;
		msg = malloc((size_t)mlen);
		memcpy(msg, c->in, (size_t)mlen);
		memmove(c->in, c->in + mlen, c->len - (size_t)mlen);
		c->len -= (size_t)mlen;
		if (!fake_handle(f, ci, msg, (size_t)mlen)) {
			free(msg);
			return;
		}
		free(msg);
		c = &f->conns[ci];
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;

	for (;;) {
		struct pollfd pfd[FAKE_MAX_CONNS + 2];
		int serial[FAKE_MAX_CONNS];
		int n = 0, nc = f->nconns;

		pfd[n++] = (struct pollfd){.fd = f->wake[0], .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = f->lfd, .events = POLLIN};
		for (int i = 0; i < nc; i++) {
			pfd[n++] = (struct pollfd){.fd = f->conns[i].fd, .events = POLLIN};
			serial[i] = f->conns[i].serial;
		}
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents)
			break;
		if ((pfd[1].revents & POLLIN) && f->nconns < FAKE_MAX_CONNS) {
			int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0) {
				int one = 1;

				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				f->conns[f->nconns] =
				    (struct fconn){.fd = fd, .serial = ++f->next_serial};
				f->nconns++;
				pthread_mutex_lock(&f->mu);
				f->accepted++;
				pthread_mutex_unlock(&f->mu);
			}
		}
		/* conns may be reordered by closes: find each polled one by serial */
		for (int i = 0; i < nc; i++) {
			if (!pfd[2 + i].revents)
				continue;
			for (int j = 0; j < f->nconns; j++)
				if (f->conns[j].serial == serial[i]) {
					fake_read(f, j);
					break;
				}
		}
	}
	close(f->lfd); /* refuse new connections first, then close the open ones */
	f->lfd = -1;
	while (f->nconns > 0)
		fconn_close(f, f->nconns - 1, false);
	return NULL;
}

/* Listen on 127.0.0.1:port (0: any); NULL if the port cannot be bound. */
struct fake *fake_start_cfg(int port, const struct fake_cfg *cfg)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	socklen_t sl = sizeof(sa);
	int one = 1;

	cr_assert(f != NULL);
	f->cfg = *cfg;
	f->next_reply_id = 5000000;
	pthread_mutex_init(&f->mu, NULL);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(f->lfd >= 0, "socket: %s", strerror(errno));
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind port %d: %s", port,
		  strerror(errno));
	cr_assert(listen(f->lfd, 128) == 0);
	cr_assert(getsockname(f->lfd, (struct sockaddr *)&sa, &sl) == 0);
	f->port = ntohs(sa.sin_port);
	cr_assert(pipe2(f->wake, O_CLOEXEC) == 0);
	cr_assert(pthread_create(&f->thr, NULL, fake_main, f) == 0);
	return f;
}

struct fake *fake_start(void)
{
	struct fake_cfg cfg = fake_default_cfg();

	return fake_start_cfg(0, &cfg);
}

/* Stop: close the listener and every connection (FIN), join the thread. */
void fake_stop(struct fake *f)
{
	if (f == NULL)
		return;
	cr_assert(write(f->wake[1], "x", 1) == 1);
	pthread_join(f->thr, NULL);
	close(f->wake[0]);
	close(f->wake[1]);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

void fake_set_cfg(struct fake *f, const struct fake_cfg *cfg)
{
	pthread_mutex_lock(&f->mu);
	f->cfg = *cfg;
	pthread_mutex_unlock(&f->mu);
}

void fake_appname(struct fake *f, char *buf, size_t len)
{
	pthread_mutex_lock(&f->mu);
	snprintf(buf, len, "%s", f->appname);
	pthread_mutex_unlock(&f->mu);
}

int fake_hold_port(int *hold)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	port = ntohs(sa.sin_port);
	*hold = fd;
	return port;
}
