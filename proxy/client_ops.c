/*
 * client_ops.c — the callbacks a client installs on its requests and on
 * itself as their owner (core/request.h): how a backend reply, an error or
 * a departure reaches the client, without the lower layers knowing clients.
 *
 *   server reply ─▶ client_req_reply: cursor table note, responseTo rewritten,
 *                   checksum dropped ─▶ request_reply_raw ─▶ owner send ─▶ client_send
 *   sent to a backend / freed ─▶ its message bytes leave the memory bound
 *
 * Rules: requests of a client (and the proxy's own killCursors, which have
 * no owner) run `client_request_ops` for their whole life, also while one
 * is a member of a batch (REQ_BATCHED: nothing of these runs then but
 * abandon, which leaves it in its batch, and release).
 */
#include "proxy/client.h"

#include <stddef.h>
#include <stdio.h>

#include "config/users.h"
#include "pool/pin.h"
#include "pool/server.h"
#include "proxy/cauth.h"
#include "proxy/client_compress.h"
#include "proxy/client_hooks.h"
#include "proxy/membound.h"
#include "core/wire.h"
#include "core/evpool.h"
#include "core/xalloc.h"
#include "pool/route.h"
#include "proxy/client_req.h"

static struct client *owner_client(const struct request_owner *o)
{
	return (struct client *)((char *)o - offsetof(struct client, owner));
}

static bool owner_may_dispatch(const struct request_owner *o)
{
	return client_may_dispatch(owner_client(o));
}

static void owner_send(struct request_owner *o, struct request *req, struct evbuffer *msg)
{
	struct client *c = owner_client(o);

	ccomp_reply(c, req, msg); /* OP_COMPRESSED when the client negotiated it */
	client_send(c, msg);
}

static void owner_finished(struct request_owner *o)
{
	client_request_finished(owner_client(o));
}

/* Who the client is, for bounds over its connections (pool/pin.c). */
static bool owner_identity(const struct request_owner *o, char *out, size_t len)
{
	const struct client *c = owner_client((struct request_owner *)o);
	char user[USERS_DB_MAX + USERS_NAME_MAX + 2];

	if (cauth_user_name(c, user, sizeof(user))) {
		snprintf(out, len, "user %s", user);
		return true;
	}
	if (c->app_name[0] == '\0')
		return false;
	snprintf(out, len, "application %s", c->app_name);
	return true;
}

const struct request_owner_ops client_owner_ops = {
    .may_dispatch = owner_may_dispatch,
    .send = owner_send,
    .finished = owner_finished,
    .identity = owner_identity,
};

/* Its message is handed to a backend (or dropped): stop counting its bytes. */
static void release_held(struct request *req)
{
	struct client *c = client_of(req);

	if (req->held_bytes == 0)
		return;
	if (c != NULL)
		c->req_bytes -= req->held_bytes;
	membound_add(-(int64_t)req->held_bytes);
	req->held_bytes = 0;
}

/* Hand a complete backend reply to the client and finish the exchange. */
static void reply(struct server *s, struct request *req, struct evbuffer *buf, uint8_t *data,
		  size_t len, const struct wire_msg *m)
{
	if (req->internal_reply != NULL) { /* the proxy's own request (auth_query) */
		request_internal_reply(req, &m->body);
		server_release(s);
		return;
	}
	if (!pin_on_reply(s, req, &m->body) || /* load-balanced pins; false: answered there */
	    client_hooks->reply(req, m)) {     /* cursor table; true: it answered the client */
		server_release(s);
		return;
	}
	wire_write_i32(data + 8, req->client_request_id);
	if (m->flags & MSG_CHECKSUM_PRESENT) {
		struct evbuffer *copy = evpool_get();

		wire_msg_prepare_forward(data, len);
		evbuffer_add(copy, data, len - 4);
		request_reply_raw(req, copy);
		evpool_put(copy);
	} else {
		request_reply_raw(req, buf);
	}
	server_release(s);
}

static void release(struct request *req)
{
	release_held(req);
}

/* proxy/'s part of a request (client_req.h): what freeing it releases. */
static void client_part_fini(struct request *req)
{
	if (req->client->cursor != NULL) /* the cursor table's (cursor_note_free) */
		client_hooks->note_free(req->client->cursor);
	req->client->cursor = NULL;
	if (req->client->hello_cmd != NULL)
		bson_destroy(req->client->hello_cmd);
	req->client->hello_cmd = NULL;
}

static const struct request_part client_part = {
    .size = sizeof(struct req_client),
    .fini = client_part_fini,
};

const struct request_ops client_request_ops = {
    .name = "client",
    .start = release_held,
    .reply = reply,
    .error = request_fail,
    .network_error = request_fail_network,
    .abandon = request_abandon_default,
    .release = release,
};

struct request *client_request_new(struct client *c)
{
	static bool parts_set;
	struct request *req;

	if (!parts_set) { /* before the first request: pool/'s part and ours */
		request_part_set(REQUEST_PART_ROUTE, &pool_route_part);
		request_part_set(REQUEST_PART_CLIENT, &client_part);
		parts_set = true;
	}
	req = request_new(c != NULL ? &c->owner : NULL, &client_request_ops);
	if (c != NULL) {
		req->reply_compressor = c->msg_compressor;
		c->requests++;
	}
	return req;
}
