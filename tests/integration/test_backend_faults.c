/*
 * test_backend_faults.c — what the proxy does when its BACKEND misbehaves:
 * resets mid-reply, closes before replying, stalls, answers garbage
 * (messageLength 5 or 60,000,000, OP_REPLY, a wrong responseTo, an exhaust
 * reply, invalid BSON, a wrong checksum), is down at startup, goes away
 * mid-run and comes back, replies to moreToCome writes, or reports an
 * unusable handshake (old wire version, secondary, {ok: 0}, no answer) — and
 * what a replica-set primary looks like to clients, and which seed of a
 * multi-host backend_uri is used before and after a failover.
 *
 * The backend here is a scriptable fake MongoDB server: a thread in this
 * test process listening on a loopback port, speaking just enough OP_MSG.
 * It answers the proxy's isMaster with the handshake the test configured
 * and every other command according to a fault chosen by the command's
 * first value (the collection name): {find: "f_reset"} resets mid-reply,
 * {insert: "f_stall"} never gets an answer, {find: "c"} is answered
 * normally. Putting the fault in the collection name survives the batcher
 * (which rebuilds find commands but keeps the collection). Normal replies
 * carry `conn` (which backend connection answered) and `echo` (the request's
 * `tag`), so a test can tell a fresh connection and the right reply.
 *
 * The fake thread never asserts: the test's main thread reads what the fake
 * saw through fake_* accessors. Clients are raw sockets (one thread can keep
 * many requests in flight on several sockets) and libmongoc where a real
 * driver's view matters. No timing assertion other than "the reply arrived
 * within 10 s" (far above the expected milliseconds) to detect hangs.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* Upper bound for "it did not hang": far above any expected latency. */
#define HANG_MS 10000

/* ================================================================ fake backend */

enum fault {
	F_NONE,
	F_RESET_MID_REPLY,    /* half a reply, pause, then RST (SO_LINGER 0) */
	F_CLOSE_BEFORE_REPLY, /* FIN, no reply */
	F_STALL,	      /* never reply */
	F_HALF_THEN_STALL,    /* half a reply, then nothing */
	F_LEN5,		      /* header with messageLength 5 */
	F_LEN60M,	      /* header with messageLength 60,000,000 */
	F_OP_REPLY,	      /* a complete OP_REPLY to the request */
	F_WRONG_RESPONSE_TO,  /* a complete reply with a wrong responseTo, then nothing */
	F_STRAY_THEN_RIGHT,   /* a reply with a wrong responseTo, then the right one */
	F_EXHAUST,	      /* the right reply, with moreToCome set */
	F_BAD_BSON,	      /* an OP_MSG reply whose body is not valid BSON */
	F_HEADER_ONLY,	      /* an OP_MSG of 16 bytes: header, no flags, no body */
	F_CMD_ERROR,	      /* {ok: 0, code: 2, errmsg} from the "server" */
	F_CHECKSUM_OK,	      /* the right reply with a correct CRC-32C */
	F_CHECKSUM_BAD,	      /* the right reply with a wrong CRC-32C */
	F_SLOW,		      /* the right reply after 300 ms (blocks the fake meanwhile) */
};

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

enum fake_kind { FK_STANDALONE, FK_SECONDARY, FK_RS_PRIMARY };

/* What a moreToCome message gets (FerretDB replies to them anyway). */
enum mtc_reply { MTC_NONE, MTC_IMMEDIATE, MTC_DEFERRED };

struct fake_cfg {
	int min_wire, max_wire, max_write_batch;
	enum fake_kind kind;
	bool hello_stall;	  /* accept, read the hello, never answer */
	bool hello_error;	  /* answer the hello with {ok: 0} */
	enum mtc_reply mtc;	  /* replies to moreToCome messages */
	enum fault default_fault; /* for commands without an f_ name */
};

struct fconn {
	int fd;
	int serial;
	uint8_t *in;
	size_t len, cap;
	uint8_t *deferred; /* MTC_DEFERRED: an unsolicited reply, sent before the next one */
	size_t deferred_len;
};

#define FAKE_MAX_CONNS 64

struct fake {
	int lfd, port;
	int wake[2];
	pthread_t thr;
	pthread_mutex_t mu;
	/* under mu */
	struct fake_cfg cfg;
	int accepted, hellos, commands, mtc_seen, faults_done;
	char appname[64];
	/* thread-owned */
	struct fconn conns[FAKE_MAX_CONNS];
	int nconns;
	int next_serial;
	int32_t next_reply_id;
};

static struct fake_cfg fake_default_cfg(void)
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

	normal_reply(&cmd, name, coll, c->serial, &reply);
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
static struct fake *fake_start_cfg(int port, const struct fake_cfg *cfg)
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

static struct fake *fake_start(void)
{
	struct fake_cfg cfg = fake_default_cfg();

	return fake_start_cfg(0, &cfg);
}

/* Stop: close the listener and every connection (FIN), join the thread. */
static void fake_stop(struct fake *f)
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

/* Accessors for the main thread. */
#define FAKE_GET(f, field)                                                                         \
	({                                                                                         \
		__typeof__((f)->field) v_;                                                         \
		pthread_mutex_lock(&(f)->mu);                                                      \
		v_ = (f)->field;                                                                   \
		pthread_mutex_unlock(&(f)->mu);                                                    \
		v_;                                                                                \
	})

static void fake_set_cfg(struct fake *f, const struct fake_cfg *cfg)
{
	pthread_mutex_lock(&f->mu);
	f->cfg = *cfg;
	pthread_mutex_unlock(&f->mu);
}

static void fake_appname(struct fake *f, char *buf, size_t len)
{
	pthread_mutex_lock(&f->mu);
	snprintf(buf, len, "%s", f->appname);
	pthread_mutex_unlock(&f->mu);
}

/* A loopback port nothing listens on (bound, then released). */
static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* ================================================================ proxy + clients */

/* A proxy in front of 127.0.0.1:port; `more` adds settings and replaces
 * these defaults when it sets the same keys. */
static struct proxy *proxy_for(int port, const char *more)
{
	char extra[1024], line[128];
	size_t n = 0;
	const char *dflt[][2] = {{"backend_uri", NULL},
				 {"pool_size", "1"},
				 {"reconnect_backoff_max_ms", "200"},
				 {"connect_timeout_ms", "2000"}};

	if (more == NULL)
		more = "";
	extra[0] = '\0';
	for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++) {
		if (strstr(more, dflt[i][0]) != NULL)
			continue;
		if (dflt[i][1] == NULL)
			snprintf(line, sizeof(line), "backend_uri = mongodb://127.0.0.1:%d/\n",
				 port);
		else
			snprintf(line, sizeof(line), "%s = %s\n", dflt[i][0], dflt[i][1]);
		n += (size_t)snprintf(extra + n, sizeof(extra) - n, "%s", line);
	}
	snprintf(extra + n, sizeof(extra) - n, "%s", more);
	return proxy_start(extra);
}

static int32_t next_rid = 100;

/* Send cmd (relaxed extended JSON, with $db) on fd; the reply body in *reply.
 * false: no well-formed reply to this request within HANG_MS. */
static bool bf_cmd(int fd, const char *json, bson_t *reply)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &err);
	bool ok;

	cr_assert(cmd != NULL, "bad JSON %s: %s", json, err.message);
	ok = raw_command(fd, next_rid++, cmd, reply, HANG_MS);
	bson_destroy(cmd);
	return ok;
}

/* Send without waiting for the reply; returns the requestID used. */
static int32_t bf_send(int fd, const char *json, uint32_t flags)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &err);
	struct h_buf b;
	int32_t id = next_rid++;

	cr_assert(cmd != NULL, "bad JSON %s: %s", json, err.message);
	hb_init(&b);
	h_build_msg(&b, id, flags, cmd);
	cr_assert(raw_send(fd, b.data, b.len), "send failed");
	hb_free(&b);
	bson_destroy(cmd);
	return id;
}

/* Receive the reply to request `id` on fd (fails the test otherwise, saying
 * whether nothing came, the connection closed, or what arrived was not a
 * well-formed reply). */
static void bf_recv(int fd, int32_t id, bson_t *reply, const char *what)
{
	uint8_t *msg;
	size_t len;
	struct raw_reply r;
	enum raw_status st = raw_recv_msg(fd, &msg, &len, HANG_MS);

	cr_assert(st == RAW_OK, "%s: no reply within %d ms (%s)", what, HANG_MS,
		  raw_status_name(st));
	if (!raw_parse_reply(msg, len, &r) || !r.have_doc) {
		char hex[3 * 48 + 1] = "";

		for (size_t i = 0; i < len && i < 48; i++)
			snprintf(hex + 3 * i, 4, "%02x ", msg[i]);
		cr_assert_fail("%s: the client got a malformed reply (%zu bytes, opcode %d, "
			       "responseTo %d, body not valid BSON): %s",
			       what, len, r.opcode, r.response_to, hex);
	}
	cr_assert_eq(r.response_to, id, "%s: reply to %d, expected %d", what, r.response_to, id);
	bson_copy_to(&r.doc, reply);
	free(msg);
}

/* Send and receive, failing the test if no well-formed reply arrives. */
static void bf_call(int fd, const char *json, bson_t *reply, const char *what)
{
	bf_recv(fd, bf_send(fd, json, 0), reply, what);
}

static char *bf_json(const bson_t *doc)
{
	return bson_as_relaxed_extended_json(doc, NULL);
}

/* reply is {ok: 0, code, codeName} */
static void assert_error(const bson_t *reply, int code, const char *codename, const char *what)
{
	char *j = bf_json(reply);
	const char *cn = h_get_str(reply, "codeName");

	cr_assert_eq(h_get_int(reply, "ok", -1), 0, "%s: expected ok: 0, got %s", what, j);
	cr_assert_eq(h_get_int(reply, "code", -1), code, "%s: expected code %d, got %s", what, code,
		     j);
	cr_assert(cn != NULL && strcmp(cn, codename) == 0, "%s: expected codeName %s, got %s", what,
		  codename, j);
	cr_assert(h_get_str(reply, "errmsg") != NULL, "%s: no errmsg in %s", what, j);
	bson_free(j);
}

static void assert_ok(const bson_t *reply, const char *what)
{
	char *j = bf_json(reply);

	cr_assert_eq(h_get_int(reply, "ok", -1), 1, "%s: expected ok: 1, got %s", what, j);
	bson_free(j);
}

/* mongoplexStats over a raw socket (answered by the proxy itself, so it
 * works whatever the backend does). */
static void rstats(struct proxy *p, bson_t *out)
{
	int fd = raw_connect(p);
	bool ok;

	cr_assert(fd >= 0, "connect to the proxy");
	ok = bf_cmd(fd, "{\"mongoplexStats\": 1, \"$db\": \"admin\"}", out);
	close(fd);
	cr_assert(ok, "mongoplexStats failed");
}

static int64_t counter(struct proxy *p, const char *name)
{
	bson_t st;
	char path[128];
	int64_t v;

	rstats(p, &st);
	snprintf(path, sizeof(path), "counters.%s", name);
	v = h_get_int(&st, path, -1);
	bson_destroy(&st);
	cr_assert(v >= 0, "no counter %s", name);
	return v;
}

/* A normal forwarded command answered by the fake: returns its conn serial. */
static int ok_roundtrip(int fd, const char *what)
{
	bson_t reply;
	int conn;
	bool got =
	    bf_cmd(fd, "{\"count\": \"c\", \"tag\": \"ok-roundtrip\", \"$db\": \"bf\"}", &reply);

	cr_assert(got, "%s: no reply", what);
	assert_ok(&reply, what);
	cr_assert_str_eq(h_get_str(&reply, "echo"), "ok-roundtrip", "%s: wrong reply", what);
	conn = (int)h_get_int(&reply, "conn", -1);
	bson_destroy(&reply);
	return conn;
}

/* Poll with fresh connections until a forwarded command succeeds. */
static bool wait_recovered(struct proxy *p, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;

	for (;;) {
		int fd = raw_connect(p);
		bson_t reply;
		bool ok = false;

		if (fd >= 0) {
			ok = bf_cmd(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply) &&
			     h_get_int(&reply, "ok", 0) == 1;
			bson_destroy(&reply);
			close(fd);
		}
		if (ok)
			return true;
		if (h_now_ms() > deadline)
			return false;
		h_sleep_ms(50);
	}
}

TestSuite(backend_faults, .timeout = 60);

/* ================================================================ handshake */

Test(backend_faults, handshake_appname_and_limits_mirrored)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	char app[64];
	int fd;
	mongoc_client_t *c;
	bson_error_t err;

	cfg.max_wire = 13;
	cfg.max_write_batch = 777;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);

	/* The proxy connects to the backend for the first hello and mirrors it. */
	bf_call(fd, "{\"hello\": 1, \"helloOk\": true, \"$db\": \"admin\"}", &reply, "hello");
	{
		char *j = bf_json(&reply);

		cr_assert_eq(h_get_int(&reply, "ok", 0), 1, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxWireVersion", -1), 13, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "minWireVersion", -1), 0, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxWriteBatchSize", -1), 777, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxBsonObjectSize", -1), 16777216, "hello: %s", j);
		cr_assert_eq(h_get_int(&reply, "maxMessageSizeBytes", -1), 48000000, "hello: %s",
			     j);
		cr_assert(h_get_str(&reply, "msg") == NULL,
			  "a standalone is presented as a "
			  "standalone: %s",
			  j);
		bson_free(j);
	}
	bson_destroy(&reply);
	cr_assert_geq(FAKE_GET(f, hellos), 1);
	fake_appname(f, app, sizeof(app));
	cr_assert_str_eq(app, "mongoplex", "backend hello client.application.name");

	/* a real driver through the proxy to the fake: handshake and a command */
	c = h_proxy_client(p, "bf-driver");
	cr_assert(h_cmd_json(c, "bf", "{\"count\": \"c\", \"tag\": 7}", &reply, &err),
		  "driver command: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "echo", -1), 7);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	/* the driver's own appname never reaches the backend: only the proxy's */
	fake_appname(f, app, sizeof(app));
	cr_assert_str_eq(app, "mongoplex");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, handshake_old_wire_version_refused)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	const char *msg;

	cfg.max_wire = 5;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply, "command to a wire-5 backend");
	assert_error(&reply, 6, "HostUnreachable", "command to a wire-5 backend");
	msg = h_get_str(&reply, "errmsg");
	cr_assert(strstr(msg, "maxWireVersion 5") != NULL,
		  "errmsg should name the wire version: %s", msg);
	bson_destroy(&reply);
	cr_assert(log_wait(p, "maxWireVersion 5", 2000), "log should say why");
	cr_assert_eq(FAKE_GET(f, commands), 0, "nothing may be sent to a refused backend");

	/* a handshake is refused the same way (no backend info to mirror) */
	h_sleep_ms(250); /* past the reconnect backoff: a fresh attempt */
	bf_call(fd, "{\"hello\": 1, \"$db\": \"admin\"}", &reply, "hello with a wire-5 backend");
	assert_error(&reply, 6, "HostUnreachable", "hello with a wire-5 backend");
	bson_destroy(&reply);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, handshake_secondary_not_used)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;

	cfg.kind = FK_SECONDARY;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
		"command with a secondary backend");
	assert_error(&reply, 6, "HostUnreachable", "command with a secondary backend");
	bson_destroy(&reply);
	cr_assert(log_wait(p, "not a writable primary", 2000), "log should say why");
	cr_assert_eq(FAKE_GET(f, commands), 0, "nothing may be sent to a secondary");
	cr_assert_geq(FAKE_GET(f, hellos), 1);

	/* still refused later (a fresh connection attempt, same answer) */
	h_sleep_ms(250);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
		"second command with a secondary backend");
	assert_error(&reply, 6, "HostUnreachable", "second command with a secondary backend");
	bson_destroy(&reply);
	cr_assert_eq(FAKE_GET(f, commands), 0);

	/* the member becomes primary: used from then on */
	cfg.kind = FK_RS_PRIMARY;
	fake_set_cfg(f, &cfg);
	cr_assert(wait_recovered(p, 5000), "primary not used within 5 s");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, handshake_rs_primary_presented_as_mongos)
{
	bson_iter_t it;
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	const char *msg;

	cfg.kind = FK_RS_PRIMARY;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"isMaster\": 1, \"$db\": \"admin\"}", &reply,
		"isMaster with an RS primary backend");
	assert_ok(&reply, "isMaster");
	msg = h_get_str(&reply, "msg");
	cr_assert(msg != NULL && strcmp(msg, "isdbgrid") == 0, "msg: isdbgrid expected");
	cr_assert(h_get_str(&reply, "setName") == NULL, "a mongos has no setName");
	cr_assert(bson_iter_init_find(&it, &reply, "ismaster") && bson_iter_as_bool(&it),
		  "ismaster: true expected");
	bson_destroy(&reply);
	ok_roundtrip(fd, "command to an RS primary");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* The backend accepts but never answers the proxy's hello. */
Test(backend_faults, handshake_never_answered)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	int64_t t0;

	cfg.hello_stall = true;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, "connect_timeout_ms = 300\n");
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	t0 = h_now_ms();
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
		"request while the backend never answers its hello");
	cr_assert_lt(h_now_ms() - t0, HANG_MS);
	{
		char *j = bf_json(&reply);
		int64_t code = h_get_int(&reply, "code", -1);

		cr_assert_eq(h_get_int(&reply, "ok", -1), 0, "%s", j);
		/* README: 89 NetworkTimeout "(or connect timeout)". Checked with
		 * cr_expect so the recovery below is still exercised. */
		cr_expect_eq(code, 89,
			     "connect/handshake timeout: expected 89 NetworkTimeout (README, "
			     "\"Errors mongoplex itself returns\"), got %s",
			     j);
		bson_free(j);
	}
	bson_destroy(&reply);
	cr_assert(log_wait(p, "timed out", 2000));

	/* the backend starts answering: the pool recovers */
	cfg.hello_stall = false;
	fake_set_cfg(f, &cfg);
	cr_assert(wait_recovered(p, 5000), "no recovery within 5 s");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ broken exchanges */

/* One request hits `fault` (collection name `coll`): the client gets error
 * `code`, the log says `why`, the client connection stays usable and the next
 * request succeeds on a fresh backend connection. */
static void check_fault_then_recover(const char *coll, int code, const char *codename,
				     const char *why, const char *settings)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, settings);
	char cmd[256], what[128];
	bson_t reply;
	int fd = raw_connect(p), conn1, conn2;
	int64_t disc0;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before the fault");
	disc0 = counter(p, "backend_disconnects");

	snprintf(what, sizeof(what), "request on %s", coll);
	snprintf(cmd, sizeof(cmd), "{\"find\": \"%s\", \"filter\": {\"x\": 1}, \"$db\": \"bf\"}",
		 coll);
	bf_call(fd, cmd, &reply, what);
	assert_error(&reply, code, codename, what);
	bson_destroy(&reply);
	if (why != NULL)
		cr_assert(log_wait(p, why, 2000), "%s: log should say \"%s\"", what, why);

	/* same client connection, next request fine, on a new backend connection */
	conn2 = ok_roundtrip(fd, "after the fault");
	cr_assert_neq(conn1, conn2, "%s: the broken backend connection was reused", what);
	cr_assert_geq(counter(p, "backend_disconnects"), disc0 + 1, "%s: backend_disconnects",
		      what);
	proxy_assert_alive(p, what);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, reset_mid_reply)
{
	check_fault_then_recover("f_reset", 6, "HostUnreachable", "closing: backend", NULL);
}

Test(backend_faults, close_before_reply)
{
	check_fault_then_recover("f_close", 6, "HostUnreachable", "backend closed the connection",
				 NULL);
}

Test(backend_faults, stall_query_timeout)
{
	struct proxy *p;
	struct fake *f;

	check_fault_then_recover("f_stall", 89, "NetworkTimeout", "query_timeout_ms",
				 "query_timeout_ms = 300\n");
	/* and half a reply, then silence */
	check_fault_then_recover("f_half", 89, "NetworkTimeout", "query_timeout_ms",
				 "query_timeout_ms = 300\n");
	/* the counter */
	f = fake_start();
	p = proxy_for(f->port, "query_timeout_ms = 300\n");
	{
		int fd = raw_connect(p);
		bson_t reply;

		bf_call(fd, "{\"count\": \"f_stall\", \"$db\": \"bf\"}", &reply, "stalled request");
		assert_error(&reply, 89, "NetworkTimeout", "stall");
		bson_destroy(&reply);
		cr_assert_eq(counter(p, "query_timeouts"), 1);
		close(fd);
	}
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, garbage_length_5)
{
	check_fault_then_recover("f_len5", 6, "HostUnreachable", "invalid messageLength 5", NULL);
}

Test(backend_faults, garbage_length_60m)
{
	check_fault_then_recover("f_len60m", 6, "HostUnreachable", "invalid messageLength 60000000",
				 NULL);
}

Test(backend_faults, garbage_op_reply)
{
	check_fault_then_recover("f_opreply", 6, "HostUnreachable", "expected OP_MSG", NULL);
}

Test(backend_faults, garbage_header_only)
{
	check_fault_then_recover("f_hdronly", 6, "HostUnreachable", "closing: backend", NULL);
}

Test(backend_faults, exhaust_reply_refused)
{
	check_fault_then_recover("f_exhaust", 6, "HostUnreachable", "exhaust", NULL);
}

/* A reply the client cannot use (body not valid BSON, checksum wrong) must not
 * reach it as is: the request gets error 6, like any other garbage. */
static void check_garbage_not_forwarded(const char *coll, const char *what)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p);
	char cmd[160];
	int32_t id;
	uint8_t *msg;
	size_t len;
	struct raw_reply r;
	enum raw_status st;

	cr_assert(fd >= 0);
	ok_roundtrip(fd, "before");
	snprintf(cmd, sizeof(cmd), "{\"count\": \"%s\", \"$db\": \"bf\"}", coll);
	id = bf_send(fd, cmd, 0);
	st = raw_recv_msg(fd, &msg, &len, HANG_MS);
	cr_assert(st == RAW_OK, "%s: no reply within %d ms (%s)", what, HANG_MS,
		  raw_status_name(st));
	if (!raw_parse_reply(msg, len, &r) || !r.have_doc) {
		cr_expect_fail("%s: forwarded to the client as is (%zu bytes, opcode %d, flags "
			       "0x%x): the client gets bytes it cannot parse instead of an error",
			       what, len, r.opcode, r.flags);
	} else {
		char *j = bf_json(&r.doc);

		cr_expect_eq(r.response_to, id);
		cr_expect_eq(h_get_int(&r.doc, "code", -1), 6,
			     "%s: expected error 6 HostUnreachable, got %s", what, j);
		bson_free(j);
	}
	free(msg);
	/* whatever happened, the proxy and this client connection carry on */
	ok_roundtrip(fd, "after");
	proxy_assert_alive(p, what);
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, garbage_invalid_bson_body)
{
	check_garbage_not_forwarded("f_badbson", "reply body with an invalid BSON type");
}

Test(backend_faults, garbage_bad_checksum)
{
	check_garbage_not_forwarded("f_crcbad", "reply with a wrong CRC-32C");
}

/* A correct checksummed reply is delivered, checksum stripped, well-formed. */
Test(backend_faults, checksummed_reply_delivered)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p), conn1;
	bson_t reply;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	bf_call(fd, "{\"count\": \"f_crcok\", \"tag\": 9, \"$db\": \"bf\"}", &reply,
		"checksummed reply");
	assert_ok(&reply, "checksummed reply");
	cr_assert_eq(h_get_int(&reply, "echo", -1), 9);
	bson_destroy(&reply);
	cr_assert_eq(ok_roundtrip(fd, "after"), conn1);
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, wrong_response_to_then_nothing)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "query_timeout_ms = 300\n");
	int fd = raw_connect(p);
	bson_t reply;
	int64_t stale0;

	cr_assert(fd >= 0);
	ok_roundtrip(fd, "before");
	stale0 = counter(p, "stale_replies");
	bf_call(fd, "{\"count\": \"f_wrongto\", \"$db\": \"bf\"}", &reply,
		"wrong responseTo, then silence");
	assert_error(&reply, 89, "NetworkTimeout", "wrong responseTo, then silence");
	bson_destroy(&reply);
	cr_assert_eq(counter(p, "stale_replies"), stale0 + 1);
	ok_roundtrip(fd, "after");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, stray_reply_dropped_right_one_delivered)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p), conn1;
	bson_t reply;
	int64_t stale0, disc0;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	stale0 = counter(p, "stale_replies");
	disc0 = counter(p, "backend_disconnects");
	bf_call(fd, "{\"count\": \"f_stray\", \"tag\": \"mine\", \"$db\": \"bf\"}", &reply,
		"stray reply, then the right one");
	assert_ok(&reply, "stray then right");
	cr_assert_str_eq(h_get_str(&reply, "echo"), "mine", "the stray reply was delivered");
	bson_destroy(&reply);
	cr_assert_eq(counter(p, "stale_replies"), stale0 + 1);
	cr_assert_eq(counter(p, "backend_disconnects"), disc0,
		     "a stray reply is no reason to close");
	cr_assert_eq(ok_roundtrip(fd, "after"), conn1, "same backend connection expected");

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* A backend error reply is the backend's: it reaches the client unchanged. */
Test(backend_faults, backend_error_passed_through)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL);
	int fd = raw_connect(p), conn1;
	bson_t reply;

	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	bf_call(fd, "{\"count\": \"f_cmderr\", \"$db\": \"bf\"}", &reply, "backend error");
	assert_error(&reply, 2, "BadValue", "backend error");
	cr_assert_str_eq(h_get_str(&reply, "errmsg"), "fake backend says no");
	bson_destroy(&reply);
	cr_assert_eq(ok_roundtrip(fd, "after"), conn1);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* The backend refuses the proxy's hello ({ok: 0}): error 6 saying so. */
Test(backend_faults, handshake_refused_by_backend)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	bson_t reply;
	int fd;
	const char *msg;

	cfg.hello_error = true;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply, "hello refused");
	assert_error(&reply, 6, "HostUnreachable", "hello refused");
	msg = h_get_str(&reply, "errmsg");
	cr_assert(strstr(msg, "fake says not now") != NULL, "errmsg: %s", msg);
	bson_destroy(&reply);
	cr_assert_eq(FAKE_GET(f, commands), 0);
	cfg.hello_error = false;
	fake_set_cfg(f, &cfg);
	cr_assert(wait_recovered(p, 5000));
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* One client pipelines requests over two backend connections; one of them
 * resets: that request gets error 6, the others their own replies. */
Test(backend_faults, pipelined_requests_one_reset)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "pool_size = 2\n");
	int fd = raw_connect(p);
	int32_t ids[4];
	bool seen[4] = {false};

	cr_assert(fd >= 0);
	ok_roundtrip(fd, "before");
	ids[0] = bf_send(fd, "{\"count\": \"c\", \"tag\": 0, \"$db\": \"bf\"}", 0);
	ids[1] = bf_send(fd, "{\"count\": \"f_reset\", \"tag\": 1, \"$db\": \"bf\"}", 0);
	ids[2] = bf_send(fd, "{\"count\": \"c\", \"tag\": 2, \"$db\": \"bf\"}", 0);
	ids[3] = bf_send(fd, "{\"count\": \"c\", \"tag\": 3, \"$db\": \"bf\"}", 0);
	for (int n = 0; n < 4; n++) {
		uint8_t *msg;
		size_t len;
		struct raw_reply r;
		enum raw_status st = raw_recv_msg(fd, &msg, &len, HANG_MS);
		int k = -1;

		cr_assert(st == RAW_OK, "reply %d of 4: %s", n + 1, raw_status_name(st));
		cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc, "malformed reply");
		for (int i = 0; i < 4; i++)
			if (r.response_to == ids[i])
				k = i;
		cr_assert(k >= 0 && !seen[k], "reply to an unknown or answered request %d",
			  r.response_to);
		seen[k] = true;
		if (k == 1) {
			assert_error(&r.doc, 6, "HostUnreachable", "the reset request");
		} else {
			assert_ok(&r.doc, "a pipelined request");
			cr_assert_eq(h_get_int(&r.doc, "echo", -1), k, "reply for another request");
		}
		free(msg);
	}
	ok_roundtrip(fd, "after");
	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ stalls and concurrency */

Test(backend_faults, stalled_backend_does_not_block_others)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "pool_size = 2\nquery_timeout_ms = 0\n");
	int stalled = raw_connect(p), fds[4];
	int32_t sid;
	bson_t reply;

	cr_assert(stalled >= 0);
	sid = bf_send(stalled, "{\"count\": \"f_stall\", \"$db\": \"bf\"}", 0);
	/* wait until the stalled request holds a backend connection */
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 1; i++)
		h_sleep_ms(10);
	cr_assert_eq(FAKE_GET(f, faults_done), 1, "stalled request never reached the backend");

	for (int i = 0; i < 4; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
	}
	/* sequential and concurrent requests from other clients: all served */
	for (int round = 0; round < 5; round++)
		for (int i = 0; i < 4; i++)
			ok_roundtrip(fds[i], "other client while one request stalls");
	{
		int32_t ids[4];

		for (int i = 0; i < 4; i++)
			ids[i] = bf_send(fds[i], "{\"count\": \"c\", \"$db\": \"bf\"}", 0);
		for (int i = 0; i < 4; i++) {
			bf_recv(fds[i], ids[i], &reply, "concurrent other client");
			assert_ok(&reply, "concurrent other client");
			bson_destroy(&reply);
		}
	}
	/* the stalled client is still waiting: nothing arrived for it */
	{
		uint8_t *msg;
		size_t len;

		cr_assert_eq(raw_recv_msg(stalled, &msg, &len, 100), RAW_TIMEOUT);
	}
	/* the backend goes away: the stalled request gets its error */
	fake_stop(f);
	bf_recv(stalled, sid, &reply, "stalled request when the backend went away");
	assert_error(&reply, 6, "HostUnreachable", "stalled request when the backend went away");
	bson_destroy(&reply);

	for (int i = 0; i < 4; i++)
		close(fds[i]);
	close(stalled);
	proxy_stop(p);
}

/* ================================================================ unacknowledged writes */

static void check_more_to_come_reply(enum mtc_reply mode)
{
	struct fake_cfg cfg = fake_default_cfg();
	struct fake *f;
	struct proxy *p;
	int fd, conn1, conn2;
	int64_t stale0;
	bson_t reply;

	cfg.mtc = mode;
	f = fake_start_cfg(0, &cfg);
	p = proxy_for(f->port, NULL); /* pool_size 1: one backend connection */
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	conn1 = ok_roundtrip(fd, "before");
	stale0 = counter(p, "stale_replies");

	/* w: 0 insert with moreToCome: no reply to the client */
	bf_send(fd,
		"{\"insert\": \"c\", \"documents\": [{\"_id\": 1}], \"writeConcern\": {\"w\": 0}, "
		"\"$db\": \"bf\"}",
		H_MSG_MORE_TO_COME);
	for (int i = 0; i < 200 && FAKE_GET(f, mtc_seen) < 1; i++)
		h_sleep_ms(10);
	cr_assert_eq(FAKE_GET(f, mtc_seen), 1, "the moreToCome write never reached the backend");

	/* the next request on the same backend connection gets its own reply */
	for (int i = 0; i < 3; i++) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "{\"count\": \"c\", \"tag\": %d, \"$db\": \"bf\"}", i);
		bf_call(fd, cmd, &reply, "request after the moreToCome write");
		{
			char *j = bf_json(&reply);

			cr_assert_eq(h_get_int(&reply, "echo", -1), i,
				     "wrong reply delivered (the unsolicited one?): %s", j);
			bson_free(j);
		}
		conn2 = (int)h_get_int(&reply, "conn", -1);
		bson_destroy(&reply);
		cr_assert_eq(conn2, conn1, "same backend connection expected");
	}
	cr_assert_eq(counter(p, "stale_replies"), stale0 + 1, "the unsolicited reply is dropped");
	{
		uint8_t *msg;
		size_t len;

		cr_assert_eq(raw_recv_msg(fd, &msg, &len, 100), RAW_TIMEOUT,
			     "nothing else may reach the client");
	}

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, more_to_come_reply_immediate_dropped)
{
	check_more_to_come_reply(MTC_IMMEDIATE);
}

Test(backend_faults, more_to_come_reply_late_dropped)
{
	/* the unsolicited reply arrives while the next request is in flight */
	check_more_to_come_reply(MTC_DEFERRED);
}

/* ================================================================ backend down, backend gone */

Test(backend_faults, backend_down_at_startup)
{
	struct fake_cfg dflt = fake_default_cfg();
	int port = free_port();
	struct proxy *p = proxy_for(port, NULL);
	struct fake *f;
	bson_t reply;
	int fd = raw_connect(p);
	int64_t t0;
	mongoc_client_t *c;
	bson_error_t err;
	bool ok;

	cr_assert(fd >= 0, "the proxy starts without its backend");
	proxy_assert_alive(p, "with the backend down");

	/* a request: error 6, fast */
	t0 = h_now_ms();
	bf_call(fd, "{\"count\": \"c\", \"$db\": \"bf\"}", &reply, "request with the backend down");
	cr_assert_lt(h_now_ms() - t0, 2000 + HANG_MS, "slower than connect_timeout_ms + margin");
	assert_error(&reply, 6, "HostUnreachable", "request with the backend down");
	bson_destroy(&reply);
	/* a handshake: error 6 too (nothing to mirror) */
	t0 = h_now_ms();
	bf_call(fd, "{\"hello\": 1, \"$db\": \"admin\"}", &reply, "hello with the backend down");
	cr_assert_lt(h_now_ms() - t0, 2000 + HANG_MS);
	assert_error(&reply, 6, "HostUnreachable", "hello with the backend down");
	bson_destroy(&reply);
	/* a fresh driver: fails, and fast */
	c = h_proxy_client(p, "bf-down");
	t0 = h_now_ms();
	ok = h_cmd_json(c, "bf", "{\"count\": \"c\"}", &reply, &err);
	cr_assert(!ok, "a command succeeded with the backend down");
	cr_assert_lt(h_now_ms() - t0, 2000 + HANG_MS, "driver: slower than connect timeout");
	/* the handshake error the proxy sent reaches the application */
	cr_assert(strstr(err.message, "cannot reach backend") != NULL, "driver error: %s",
		  err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	proxy_assert_alive(p, "after failed requests");

	/* the backend comes up on that port: recovery within the backoff */
	f = fake_start_cfg(port, &dflt);
	cr_assert(wait_recovered(p, 5000), "no recovery within 5 s of the backend coming up");
	ok_roundtrip(fd, "old client connection after recovery");
	bf_call(fd, "{\"hello\": 1, \"$db\": \"admin\"}", &reply, "hello after recovery");
	assert_ok(&reply, "hello after recovery");
	bson_destroy(&reply);
	c = h_proxy_client(p, "bf-up");
	cr_assert(h_cmd_json(c, "bf", "{\"count\": \"c\", \"tag\": 3}", &reply, &err),
		  "fresh driver after recovery: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "echo", -1), 3);
	bson_destroy(&reply);
	mongoc_client_destroy(c);

	close(fd);
	proxy_stop(p);
	fake_stop(f);
}

Test(backend_faults, backend_goes_away_mid_run)
{
	struct fake_cfg dflt = fake_default_cfg();
	struct fake *f = fake_start();
	int port = f->port;
	struct proxy *p = proxy_for(port, "pool_size = 4\n");
	enum { N = 10 };
	int fds[N];
	int32_t ids[N];
	bson_t reply;
	int64_t t0;

	for (int i = 0; i < N; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
		ok_roundtrip(fds[i], "before");
	}
	/* every client has a request in flight: 4 at the backend, 6 queued */
	for (int i = 0; i < N; i++)
		ids[i] = bf_send(fds[i], "{\"count\": \"f_stall\", \"$db\": \"bf\"}", 0);
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 4; i++)
		h_sleep_ms(10);
	cr_assert_eq(FAKE_GET(f, faults_done), 4, "4 requests should be at the backend");

	t0 = h_now_ms();
	fake_stop(f); /* listener and every connection closed */
	for (int i = 0; i < N; i++) {
		bf_recv(fds[i], ids[i], &reply, "in-flight request when the backend went away");
		assert_error(&reply, 6, "HostUnreachable", "in-flight request, backend gone");
		bson_destroy(&reply);
	}
	cr_assert_lt(h_now_ms() - t0, HANG_MS);
	proxy_assert_alive(p, "after the backend went away");

	/* while it is away: fast errors, client connections stay usable */
	for (int i = 0; i < N; i++) {
		bf_call(fds[i], "{\"count\": \"c\", \"$db\": \"bf\"}", &reply,
			"request while the backend is away");
		assert_error(&reply, 6, "HostUnreachable", "request while the backend is away");
		bson_destroy(&reply);
	}

	/* it comes back on the same port: the pool recovers */
	f = fake_start_cfg(port, &dflt);
	cr_assert(wait_recovered(p, 5000), "no recovery within 5 s");
	for (int i = 0; i < N; i++)
		ok_roundtrip(fds[i], "after recovery");

	for (int i = 0; i < N; i++)
		close(fds[i]);
	proxy_stop(p);
	fake_stop(f);
}

/* Driver threads keep working through a backend outage: each command
 * either succeeds or fails (never hangs), and they succeed again after. */
struct driver_worker {
	pthread_t thr;
	const char *uri;
	volatile bool *stop;
	int ok, failed, hung; /* hung: a command took longer than HANG_MS */
	int ok_after_mark;
	volatile bool *mark;
};

static void *driver_worker_main(void *arg)
{
	struct driver_worker *w = arg;
	mongoc_client_t *c = h_client_uri(w->uri, "bf-worker");
	bson_t *cmd = BCON_NEW("count", BCON_UTF8("c"));

	if (c == NULL) {
		w->hung = -1;
		return NULL;
	}
	while (!*w->stop) {
		bson_t reply;
		bson_error_t err;
		int64_t t0 = h_now_ms();
		bool ok = mongoc_client_command_simple(c, "bf", cmd, NULL, &reply, &err);

		if (h_now_ms() - t0 > HANG_MS)
			w->hung++;
		if (ok) {
			w->ok++;
			if (*w->mark)
				w->ok_after_mark++;
		} else {
			w->failed++;
			h_sleep_ms(20);
		}
		bson_destroy(&reply);
	}
	bson_destroy(cmd);
	mongoc_client_destroy(c);
	return NULL;
}

Test(backend_faults, driver_clients_through_an_outage)
{
	struct fake_cfg dflt = fake_default_cfg();
	struct fake *f = fake_start();
	int port = f->port;
	struct proxy *p = proxy_for(port, "pool_size = 2\n");
	enum { W = 4 };
	struct driver_worker w[W];
	volatile bool stop = false, mark = false;
	int64_t deadline;

	memset(w, 0, sizeof(w));
	for (int i = 0; i < W; i++) {
		w[i].uri = p->uri;
		w[i].stop = &stop;
		w[i].mark = &mark;
		cr_assert(pthread_create(&w[i].thr, NULL, driver_worker_main, &w[i]) == 0);
	}
	h_sleep_ms(300);
	fake_stop(f);
	h_sleep_ms(500);
	f = fake_start_cfg(port, &dflt);
	mark = true;
	deadline = h_now_ms() + 8000;
	for (;;) {
		bool all = true;

		for (int i = 0; i < W; i++)
			all = all && w[i].ok_after_mark > 0;
		if (all || h_now_ms() > deadline)
			break;
		h_sleep_ms(50);
	}
	stop = true;
	for (int i = 0; i < W; i++)
		pthread_join(w[i].thr, NULL);
	for (int i = 0; i < W; i++) {
		cr_log_info("worker %d: ok %d, failed %d, ok after recovery %d", i, w[i].ok,
			    w[i].failed, w[i].ok_after_mark);
		cr_assert_eq(w[i].hung, 0, "worker %d: a command hung (or no client)", i);
		cr_assert_gt(w[i].failed, 0, "worker %d never saw the outage", i);
		cr_assert_gt(w[i].ok_after_mark, 0, "worker %d: no success after recovery", i);
	}
	proxy_assert_alive(p, "after the outage");
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ batcher under faults */

/* n raw connections to the proxy. */
static void connect_n(struct proxy *p, int *fds, int n)
{
	for (int i = 0; i < n; i++) {
		fds[i] = raw_connect(p);
		cr_assert(fds[i] >= 0);
	}
}

/* Lookup i of _id i on collection `coll`, one per connection, sent at once
 * (the first is forwarded alone on the only backend connection, the others
 * queue up behind it and merge); each must get the error `code`. */
static void lookups_expect_error(const int *fds, int n, const char *coll, int code,
				 const char *codename, const char *what)
{
	int32_t ids[16];
	bson_t reply;

	cr_assert(n <= 16);
	for (int i = 0; i < n; i++) {
		char cmd[160];

		snprintf(cmd, sizeof(cmd),
			 "{\"find\": \"%s\", \"filter\": {\"_id\": %d}, \"$db\": \"bf\"}", coll, i);
		ids[i] = bf_send(fds[i], cmd, 0);
	}
	for (int i = 0; i < n; i++) {
		bf_recv(fds[i], ids[i], &reply, what);
		assert_error(&reply, code, codename, what);
		bson_destroy(&reply);
	}
}

/* Concurrent _id lookups merged into one query on a backend that resets
 * every find on that collection: each lookup gets an error, none hangs. */
Test(backend_faults, batched_lookups_on_resetting_backend)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "batching = on\n");
	enum { N = 6 };
	int fds[N];
	int32_t ids[N];
	bson_t reply;

	connect_n(p, fds, N);
	ok_roundtrip(fds[0], "warm up");
	lookups_expect_error(fds, N, "f_reset", 6, "HostUnreachable",
			     "batched lookup on a resetting backend");
	/* normal lookups afterwards, merged or not, get their documents */
	for (int i = 0; i < N; i++) {
		char cmd[160];

		snprintf(cmd, sizeof(cmd),
			 "{\"find\": \"c\", \"filter\": {\"_id\": %d}, \"$db\": \"bf\"}", i);
		ids[i] = bf_send(fds[i], cmd, 0);
	}
	for (int i = 0; i < N; i++) {
		char *j;

		bf_recv(fds[i], ids[i], &reply, "lookup after the resets");
		j = bf_json(&reply);
		assert_ok(&reply, "lookup after the resets");
		cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.0._id", -1), i, "%s", j);
		cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.1._id", -1), -1, "%s", j);
		bson_free(j);
		bson_destroy(&reply);
	}
	cr_log_info("batches_sent %" PRId64, counter(p, "batches_sent"));

	for (int i = 0; i < N; i++)
		close(fds[i]);
	proxy_stop(p);
	fake_stop(f);
}

/* Merged query on a stalling backend with query_timeout: every lookup gets
 * an error within bounded time. */
Test(backend_faults, batched_lookups_on_stalling_backend)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "batching = on\nquery_timeout_ms = 300\n");
	enum { N = 5 };
	int fds[N];

	connect_n(p, fds, N);
	ok_roundtrip(fds[0], "warm up");
	lookups_expect_error(fds, N, "f_stall", 89, "NetworkTimeout",
			     "batched lookup on a stalling backend");
	ok_roundtrip(fds[0], "after");
	for (int i = 0; i < N; i++)
		close(fds[i]);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ clients that leave */

/* The client goes away while its request runs: the late reply is dropped and
 * the backend connection goes on serving others. */
Test(backend_faults, client_gone_before_slow_reply)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, NULL); /* pool_size 1 */
	int a = raw_connect(p), b = raw_connect(p), conn1;
	int64_t disc0;

	cr_assert(a >= 0 && b >= 0);
	conn1 = ok_roundtrip(b, "before");
	disc0 = counter(p, "backend_disconnects");
	bf_send(a, "{\"count\": \"f_slow\", \"$db\": \"bf\"}", 0);
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 1; i++)
		h_sleep_ms(10);
	close(a);
	/* b waits for the only connection, then gets its own reply on it */
	cr_assert_eq(ok_roundtrip(b, "after the slow reply"), conn1);
	cr_assert_eq(counter(p, "backend_disconnects"), disc0);
	proxy_assert_alive(p, "after a reply to a departed client");
	close(b);
	proxy_stop(p);
	fake_stop(f);
}

/* The client goes away while its request stalls; the query timeout then
 * fails a request nobody waits for. */
Test(backend_faults, client_gone_before_query_timeout)
{
	struct fake *f = fake_start();
	struct proxy *p = proxy_for(f->port, "query_timeout_ms = 300\n");
	int a = raw_connect(p), b = raw_connect(p);

	cr_assert(a >= 0 && b >= 0);
	ok_roundtrip(b, "before");
	bf_send(a, "{\"count\": \"f_stall\", \"$db\": \"bf\"}", 0);
	for (int i = 0; i < 200 && FAKE_GET(f, faults_done) < 1; i++)
		h_sleep_ms(10);
	close(a);
	cr_assert(log_wait(p, "query_timeout_ms", HANG_MS), "the stalled exchange never timed out");
	ok_roundtrip(b, "after the timeout");
	proxy_assert_alive(p, "after a timeout for a departed client");
	close(b);
	proxy_stop(p);
	fake_stop(f);
}

/* ================================================================ replica set seeds */

/* backend_uri lists a secondary first and the primary second: requests are
 * served by the primary, including the very first ones. */
Test(backend_faults, replica_set_first_seed_secondary)
{
	struct fake_cfg sec = fake_default_cfg(), pri = fake_default_cfg();
	struct fake *a, *b;
	struct proxy *p;
	char more[200];
	bson_t reply;
	int fd;
	bool first_ok;

	sec.kind = FK_SECONDARY;
	pri.kind = FK_RS_PRIMARY;
	a = fake_start_cfg(0, &sec);
	b = fake_start_cfg(0, &pri);
	snprintf(more, sizeof(more), "backend_uri = mongodb://127.0.0.1:%d,127.0.0.1:%d/\n",
		 a->port, b->port);
	p = proxy_for(0, more);
	fd = raw_connect(p);
	cr_assert(fd >= 0);

	bf_call(fd, "{\"count\": \"c\", \"tag\": 1, \"$db\": \"bf\"}", &reply, "first request");
	first_ok = h_get_int(&reply, "ok", 0) == 1;
	{
		char *j = bf_json(&reply);

		cr_expect(first_ok,
			  "first request failed although the second seed is a writable primary: "
			  "%s",
			  j);
		bson_free(j);
	}
	bson_destroy(&reply);
	/* from then on the primary serves */
	cr_assert(wait_recovered(p, 5000), "the primary (second seed) is never used");
	cr_assert_eq(FAKE_GET(a, commands), 0, "a command was sent to the secondary");
	cr_assert_gt(FAKE_GET(b, commands), 0);
	close(fd);
	proxy_stop(p);
	fake_stop(a);
	fake_stop(b);
}

/* Failover: the primary (second seed) dies, the other member becomes
 * primary: the proxy must find it. */
Test(backend_faults, replica_set_failover_to_other_seed)
{
	struct fake_cfg sec = fake_default_cfg(), pri = fake_default_cfg();
	struct fake *a, *b;
	struct proxy *p;
	char more[200];
	int fd;

	sec.kind = FK_SECONDARY;
	pri.kind = FK_RS_PRIMARY;
	a = fake_start_cfg(0, &sec);
	b = fake_start_cfg(0, &pri);
	snprintf(more, sizeof(more), "backend_uri = mongodb://127.0.0.1:%d,127.0.0.1:%d/\n",
		 a->port, b->port);
	p = proxy_for(0, more);
	cr_assert(wait_recovered(p, 5000), "the primary is never used");

	/* b dies, a is elected */
	fake_stop(b);
	fake_set_cfg(a, &pri);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	cr_expect(wait_recovered(p, 5000),
		  "after failover the new primary (first seed) is never used; log:\n%s",
		  proxy_log_tail(p, 3000));
	close(fd);
	proxy_stop(p);
	fake_stop(a);
}
