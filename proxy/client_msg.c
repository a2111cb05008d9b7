/*
 * client_msg.c — what one complete client message becomes: a request that
 * is answered here (hello, ping, mongoplexStats, refusals), handed to the
 * batcher or the pool, or an error reply when it never becomes a request.
 *
 *   client_handle_message ─▶ OP_MSG   ─▶ wire_parse_msg ─▶ router_classify
 *                                          ├─ local ─▶ handle_local (REQ_LOCAL)
 *                                          │    hello ─▶ now, or pool_wait_hello
 *                                          └─ forward ─▶ cursor_admit ─▶ batcher | pool
 *                            OP_QUERY ─▶ legacy handshake (OP_REPLY) or error
 *                            other    ─▶ error reply
 *
 * Rules: the input side (reading, framing, limits) is proxy/client.c; this
 * file never reads the socket and only answers through requests or
 * client_send.
 */
#include "proxy/client_msg.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/errors.h"
#include "core/evpool.h"
#include "core/xalloc.h"
#include "pool/batch.h"
#include "pool/batch_ids.h"
#include "pool/pin.h"
#include "pool/pool.h"
#include "pool/pool_users.h"
#include "pool/route.h"
#include "pool/select.h"
#include "proxy/admin.h"
#include "proxy/awaithello.h"
#include "proxy/cauth.h"
#include "proxy/client.h"
#include "proxy/client_compress.h"
#include "proxy/client_req.h"
#include "proxy/cursor.h"
#include "proxy/membound.h"
#include "proxy/proxy.h"
#include "proxy/router.h"
#include "proxy/sessionwide.h"
#include "core/handshake.h"
#include "core/stats.h"
#include "core/wire.h"

/* Reply built here, for a message that never became a queued request. */
static void reply_doc(struct client *c, int32_t response_to, bool legacy, const bson_t *doc)
{
	struct evbuffer *out = evpool_get();

	if (legacy)
		wire_append_op_reply(out, response_to, 0, doc);
	else
		wire_append_msg(out, wire_next_request_id(), response_to, 0, doc);
	client_send(c, out);
	evpool_put(out);
}

static void reply_error(struct client *c, int32_t response_to, bool legacy, int code,
			const char *codename, const char *msg, const char *const *labels)
{
	bson_t doc;

	STAT_INC(requests_errors);
	wire_error_doc(&doc, code, codename, msg, labels);
	reply_doc(c, response_to, legacy, &doc);
	bson_destroy(&doc);
}

/* Answer a hello once backend_info is known (also called by the pool). */
void client_answer_hello(struct request *req, const struct backend_info *bi)
{
	struct client *c = client_of(req);
	bson_t reply;

	if (c == NULL) {
		request_done(req);
		return;
	}
	if (handshake_client_reply(req->client->hello_cmd, req->cmd, bi, (int64_t)c->id,
				   !c->hello_seen, &reply)) {
		c->hello_seen = true;
		ccomp_hello(c, req->client->hello_cmd, &reply);
		cauth_extend_hello(c, req->client->hello_cmd, &reply);
	} else {
		STAT_INC(requests_errors);
	}
	request_reply_doc(req, &reply);
	bson_destroy(&reply);
}

/* A string of the first hello's client metadata, truncated to the buffer. */
static void note_meta(const bson_t *hello, const char *path, char *out, size_t len)
{
	bson_iter_t it;

	size_t n;

	if (!bson_iter_init(&it, hello) || !bson_iter_find_descendant(&it, path, &it) ||
	    !BSON_ITER_HOLDS_UTF8(&it))
		return;
	bson_strncpy(out, bson_iter_utf8(&it, NULL), len);
	n = strlen(out); /* a cut (or bad) character at the end is dropped: valid UTF-8 */
	while (n > 0 && !bson_utf8_validate(out, n, false))
		out[--n] = '\0';
}

/* client.application.name (pool/pin.c's client identity) and the driver
 * (mongoplexShow clients) of the first hello. */
static void note_app_name(struct client *c, const bson_t *hello)
{
	note_meta(hello, "client.application.name", c->app_name, sizeof(c->app_name));
	note_meta(hello, "client.driver.name", c->driver_name, sizeof(c->driver_name));
	note_meta(hello, "client.driver.version", c->driver_version, sizeof(c->driver_version));
}

/* The hello an admin gets while the backend has never answered and its
 * connects fail (down for maintenance, a bad login): the console must work
 * exactly then, where everyone else's hello fails with 6. A standalone
 * without sessions, wire versions any current driver accepts; its other
 * commands reach the backend, or fail, as anyone's. Only after a failed
 * connect: the socket's owner may also be an application, whose first hello
 * on a fresh proxy must carry the backend's real limits. */
static const struct backend_info console_info = {
    .known = true,
    .kind = BACKEND_STANDALONE,
    .min_wire_version = 0,
    .max_wire_version = 17,
    .max_bson_object_size = 16 * 1024 * 1024,
    .max_message_size_bytes = 48000000,
    .max_write_batch_size = 100000,
    .logical_session_timeout_minutes = -1,
};

static void handle_hello(struct client *c, struct request *req, const bson_t *body, uint32_t flags)
{
	struct pool *p = pool_target();

	req->client->hello_cmd = bson_copy(body);
	if (!c->hello_seen) {
		pin_note_hello(&c->owner, body); /* loadBalanced: true (pool/pin.c) */
		note_app_name(c, body);
	}
	if (awaithello_take(c, req, (flags & MSG_EXHAUST_ALLOWED) != 0))
		return; /* awaitable: held, streamed or refused there */
	if (p->info.known) {
		client_answer_hello(req, &p->info);
		return;
	}
	if (pool_live(p) == 0 && p->connects_failed > 0 && admin_may(c)) {
		client_answer_hello(req, &console_info);
		return;
	}
	pool_wait_hello(req, client_answer_hello);
}

/* ping answered locally fails while no backend can serve requests. */
static bool ping_healthy(struct request *req)
{
	char why[400], msg[500];

	if (pool_healthy(why, sizeof(why)))
		return true;
	snprintf(msg, sizeof(msg), "mongoplex: %s", why);
	request_fail(req, MP_ERR(HOST_UNREACHABLE), msg, NULL);
	return false;
}

static void handle_local(struct client *c, const struct wire_msg *m, const struct route_info *ri,
			 struct request *req)
{
	bson_t doc;

	STAT_INC(requests_local);
	if (ri->route != ROUTE_HELLO)
		request_set_state(req, REQ_LOCAL, NULL);
	switch (ri->route) {
	case ROUTE_HELLO:
		handle_hello(c, req, &m->body, m->flags);
		return;
	case ROUTE_PING:
		if (!ping_healthy(req))
			return;
		bson_init(&doc);
		BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
		request_reply_doc(req, &doc);
		bson_destroy(&doc);
		return;
	case ROUTE_STATS:
		admin_stats_reply(req);
		return;
	case ROUTE_ADMIN:
		admin_command(req, &m->body);
		return;
	case ROUTE_AUTH:
		cauth_command(c, req, &m->body);
		return;
	default:
		request_fail(req, MP_ERR(COMMAND_NOT_FOUND), ri->refuse_msg, NULL);
		return;
	}
}

static void count_forward(const struct route_info *ri, bool more_to_come)
{
	STAT_INC(requests_forwarded);
	if (more_to_come)
		STAT_INC(more_to_come_writes);
	if (ri->cursor_op)
		STAT_INC(cursor_requests);
	if (ri->in_txn)
		STAT_INC(txn_requests);
}

/* A lookup may join a batch only when nothing orders or holds it back: the
 * batcher neither follows unacknowledged writes (pool/sticky.h) nor knows
 * client_may_dispatch. */
static bool may_batch(struct client *c, const struct request *req)
{
	const struct request *r;

	if (owner_sticky(&c->owner) != NULL || !client_may_dispatch(c))
		return false;
	TAILQ_FOREACH(r, &c->owner.requests, client_link)
		if (r != req && r->more_to_come)
			return false;
	return true;
}

/* Build the request that forwards this message and hand it on. */
static void forward(struct client *c, struct evbuffer **bufp, uint8_t *data, size_t len,
		    const struct wire_msg *m, const struct route_info *ri, struct request *req)
{
	size_t newlen;

	req->route->session = ri->session;    /* parsed once by the router */
	pin_route(req, &m->body, ri->in_txn); /* load-balanced clients (pool/pin.c) */
	if (ri->cursor_op && cursor_admit(req, m))
		return; /* not this client's cursor: answered by proxy/cursor.c */
	newlen = wire_msg_prepare_forward(data, len);
	count_forward(ri, req->more_to_come);
	req->retryable_write = ri->retryable_write;
	if (newlen != len) { /* checksum stripped: keep the first newlen bytes */
		req->msg = evpool_get();
		evbuffer_add(req->msg, data, newlen);
	} else { /* the message itself: `data` and m stay valid */
		req->msg = *bufp;
		*bufp = NULL;
	}
	req->held_bytes = evbuffer_get_length(req->msg);
	c->req_bytes += req->held_bytes;
	membound_add((int64_t)req->held_bytes);
	select_note(req, ri->in_txn); /* replica sets: read preference, pin */
	if (ri->is_find && !ri->in_txn && g.cfg.batching && may_batch(c, req) &&
	    req->route->read_pref == NULL /* merged lookups all go to the primary */ &&
	    batch_try_submit(req, &m->body))
		return;
	if (ri->is_find && g.cfg.adaptive_concurrency && req->route->ids == 0 &&
	    batch_ids_classify(&m->body) == NULL)
		req->route->ids = batch_ids_count(&m->body); /* a lookup's size (pool/limit.h) */
	pool_submit(req);
}

static void handle_op_msg(struct client *c, struct evbuffer **bufp, uint8_t *data, size_t len)
{
	struct wire_msg m;
	struct wire_error err;
	struct route_info ri;
	struct request *req;

	if (!wire_parse_msg(data, len, &m, &err)) {
		STAT_INC(bad_messages);
		client_info(c, "bad OP_MSG: %s", err.msg);
		/* Under 20 bytes there is no flagBits word to read (the bytes past
		 * len are stale buffer memory): the flags are unknown, so answer. */
		if (len < WIRE_HEADER_LEN + 4 ||
		    !(wire_read_i32(data + WIRE_HEADER_LEN) & MSG_MORE_TO_COME))
			reply_error(c, wire_read_i32(data + 4), false, err.code, err.codename,
				    err.msg, NULL);
		return;
	}
	req = client_request_new(c);
	req->client_request_id = m.h.request_id;
	req->more_to_come = (m.flags & MSG_MORE_TO_COME) != 0;
	if (!router_classify(&m.body, &ri)) {
		request_fail(req, MP_ERR(LOCATION_40571), ri.refuse_msg, NULL);
		return;
	}
	_Static_assert(sizeof(req->cmd) == sizeof(ri.cmd), "cmd buffers differ");
	memcpy(req->cmd, ri.cmd, sizeof(req->cmd)); /* NUL-terminated by router_classify */
	if (g.shutting_down && ri.route != ROUTE_HELLO) {
		STAT_INC(refused_shutdown);
		request_fail(req, MP_ERR(SHUTDOWN_IN_PROGRESS), "mongoplex is shutting down",
			     MP_ERR_LABELS(SHUTDOWN_IN_PROGRESS));
		return;
	}
	if (!cauth_admit(c, req, &m.body, &ri))
		return; /* answered by client authentication (proxy/cauth.c) */
	if (ri.route != ROUTE_FORWARD) {
		handle_local(c, &m, &ri, req);
		return;
	}
	if (!sessionwide_admit(req, &m.body, &ri, !cauth_enabled() || !pool_users_enabled()))
		return; /* other clients' sessions through a shared identity */
	forward(c, bufp, data, len, &m, &ri, req);
}

static bool is_handshake_cmd(const char *name)
{
	return strcmp(name, "hello") == 0 || strcasecmp(name, "isMaster") == 0;
}

/* Legacy OP_QUERY: only the handshake is served, answered with OP_REPLY. */
static void handle_op_query(struct client *c, uint8_t *data, size_t len)
{
	struct wire_query q;
	struct wire_error err;
	struct request *req;
	bson_iter_t it;
	const char *dot;

	if (!wire_parse_query(data, len, &q, &err)) {
		STAT_INC(bad_messages);
		client_info(c, "bad OP_QUERY: %s", err.msg);
		reply_error(c, wire_read_i32(data + 4), true, err.code, err.codename, err.msg,
			    NULL);
		return;
	}
	dot = strchr(q.collection, '.');
	if (!bson_iter_init(&it, &q.query) || !bson_iter_next(&it) || dot == NULL ||
	    strcmp(dot, ".$cmd") != 0 || !is_handshake_cmd(bson_iter_key(&it))) {
		STAT_INC(bad_messages);
		client_info(c, "refused legacy OP_QUERY on %s", q.collection);
		reply_error(
		    c, q.h.request_id, true, MP_ERR(UNSUPPORTED_OP_QUERY_COMMAND),
		    "mongoplex: OP_QUERY is only supported for the hello/isMaster handshake; "
		    "use OP_MSG",
		    NULL);
		return;
	}
	STAT_INC(requests_local);
	req = client_request_new(c);
	req->client_request_id = q.h.request_id;
	req->legacy_reply = true;
	snprintf(req->cmd, sizeof(req->cmd), "%s", bson_iter_key(&it));
	handle_hello(c, req, &q.query, 0);
}

/* OP_COMPRESSED: unwrapped (proxy/client_compress.c) and handled as what it
 * holds; a message that cannot be unwrapped gets an error and closes the
 * connection (its framing is intact, its content is not). */
static void handle_compressed(struct client *c, const uint8_t *data, size_t len)
{
	struct evbuffer *plain = evpool_get();
	struct wire_error err;
	uint8_t *p;
	int32_t opcode;

	if (!ccomp_unwrap(c, data, len, plain, &err)) {
		STAT_INC(bad_messages);
		STAT_INC(clients_closed_error);
		client_info(c, "bad OP_COMPRESSED: %s; closing after the error reply", err.msg);
		reply_error(c, wire_read_i32(data + 4), false, err.code, err.codename, err.msg,
			    NULL);
		c->closing = true;
		evpool_put(plain);
		return;
	}
	len = evbuffer_get_length(plain);
	p = evbuffer_pullup(plain, -1);
	opcode = wire_read_i32(p + 12);
	if (opcode == OP_MSG) {
		handle_op_msg(c, &plain, p, len);
	} else if (opcode == OP_QUERY) {
		handle_op_query(c, p, len);
	} else {
		STAT_INC(bad_messages);
		client_info(c, "refused OP_COMPRESSED holding opcode %d", opcode);
		reply_error(c, wire_read_i32(p + 4), false, MP_ERR(BAD_VALUE),
			    "mongoplex: OP_COMPRESSED may hold OP_MSG or OP_QUERY only", NULL);
	}
	c->msg_compressor = -1;
	evpool_put(plain);
}

void client_handle_message(struct client *c, struct evbuffer **bufp, size_t len)
{
	uint8_t *data = evbuffer_pullup(*bufp, (ssize_t)len);
	int32_t opcode = wire_read_i32(data + 12);
	char msg[128];

	STAT_INC(requests_total);
	if (c->refused_by != NULL) {
		if (strcmp(c->refused_by, "max_unauth_conn") == 0)
			snprintf(msg, sizeof(msg),
				 "mongoplex: too many client connections not logged in "
				 "(max_unauth_conn = %" PRId64 ")",
				 client_max_unauth());
		else
			snprintf(
			    msg, sizeof(msg),
			    "mongoplex: too many client connections (max_client_conn = %" PRId64
			    ")",
			    g.cfg.max_client_conn);
		reply_error(c, wire_read_i32(data + 4), opcode == OP_QUERY,
			    MP_ERR(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED), msg,
			    MP_ERR_LABELS(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED));
		c->closing = true;
		return;
	}
	switch (opcode) {
	case OP_MSG:
		handle_op_msg(c, bufp, data, len);
		break;
	case OP_QUERY:
		handle_op_query(c, data, len);
		break;
	case OP_COMPRESSED:
		handle_compressed(c, data, len);
		break;
	default:
		STAT_INC(bad_messages);
		client_info(c, "refused %s (opcode %d)", wire_opcode_name(opcode), opcode);
		snprintf(msg, sizeof(msg), "mongoplex: unsupported opcode %d (%s); use OP_MSG",
			 opcode, wire_opcode_name(opcode));
		reply_error(c, wire_read_i32(data + 4), false, MP_ERR(BAD_VALUE), msg, NULL);
		break;
	}
}

/* Framing is lost: say why (as a reply, if the client can read one) and close. */
void client_framing_lost(struct client *c, int32_t len, const uint8_t *hdr, size_t avail)
{
	char msg[160];

	STAT_INC(bad_messages);
	STAT_INC(clients_closed_error);
	snprintf(msg, sizeof(msg), "mongoplex: invalid messageLength %d (must be 16..%d)", len,
		 WIRE_MAX_MESSAGE);
	if (avail >= WIRE_HEADER_LEN)
		reply_error(c, wire_read_i32(hdr + 4), false, MP_ERR(BSON_OBJECT_TOO_LARGE), msg,
			    NULL);
	client_info(c, "%s; closing after the error reply", msg);
	c->closing = true;
	evbuffer_drain(c->sb.in, avail);
}
