/*
 * request.c — request lifetime and the replies the proxy itself generates.
 */
#include "core/request.h"

#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"
#include "pool/batch.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/client_compress.h"
#include "proxy/cursor.h"
#include "proxy/membound.h"
#include "proxy/proxy.h"
#include "core/stats.h"
#include "core/wire.h"

struct request *request_new(struct client *client, enum request_kind kind)
{
	struct request *req = xcalloc(1, sizeof(*req));

	req->kind = kind;
	req->client = client;
	req->enqueued_usec = g.now_usec;
	req->reply_compressor = client != NULL ? client->msg_compressor : -1;
	if (client != NULL) {
		TAILQ_INSERT_TAIL(&client->requests, req, client_link);
		client->inflight++;
	}
	return req;
}

/* Detach from the client, if any; returns the client for a resume poke. */
static struct client *detach(struct request *req)
{
	struct client *c = req->client;

	if (c != NULL) {
		TAILQ_REMOVE(&c->requests, req, client_link);
		c->inflight--;
		req->client = NULL;
	}
	return c;
}

void request_release_held(struct request *req)
{
	if (req->held_bytes == 0)
		return;
	if (req->client != NULL)
		req->client->req_bytes -= req->held_bytes;
	membound_add(-(int64_t)req->held_bytes);
	req->held_bytes = 0;
}

void request_free(struct request *req)
{
	request_release_held(req);
	detach(req);
	if (req->queued)
		pool_unqueue(req);
	if (req->msg != NULL)
		evbuffer_free(req->msg);
	if (req->hello_cmd != NULL)
		bson_destroy(req->hello_cmd);
	if (req->read_pref != NULL)
		bson_destroy(req->read_pref);
	batch_lookup_free(req->lookup);
	cursor_note_free(req->cursor);
	if (req->internal_reply != NULL)
		req->internal_reply(req->internal_arg, NULL);
	free(req);
}

void request_done(struct request *req)
{
	struct client *c = detach(req);

	request_free(req);
	if (c != NULL)
		client_request_finished(c);
}

void request_reply_raw(struct request *req, struct evbuffer *reply)
{
	if (req->client != NULL && !req->more_to_come) {
		ccomp_reply(req->client, req, reply);
		client_send(req->client, reply);
	}
	request_done(req);
}

void request_reply_doc(struct request *req, const bson_t *doc)
{
	struct evbuffer *out;

	if (req->internal_reply != NULL) {
		request_internal_reply(req, doc);
		return;
	}
	if (req->client == NULL) {
		request_done(req);
		return;
	}
	out = xevbuffer_new();
	if (req->legacy_reply)
		wire_append_op_reply(out, req->client_request_id, 0, doc);
	else
		wire_append_msg(out, wire_next_request_id(), req->client_request_id, 0, doc);
	request_reply_raw(req, out);
	evbuffer_free(out);
}

void request_internal_reply(struct request *req, const bson_t *body)
{
	void (*cb)(void *, const bson_t *) = req->internal_reply;

	req->internal_reply = NULL;
	cb(req->internal_arg, body);
	request_done(req);
}

void request_fail(struct request *req, int code, const char *codename, const char *msg,
		  const char *const *labels)
{
	bson_t doc;

	STAT_INC(requests_errors);
	if (req->more_to_come) {
		/* The client asked for no reply; the error can only be logged. */
		log_warning("unacknowledged %s from C-%" PRIu64 " failed: %s", req->cmd,
			    req->client ? req->client->id : 0, msg);
		request_done(req);
		return;
	}
	wire_error_doc(&doc, code, codename, msg, labels);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

void request_fail_network(struct request *req, int code, const char *codename, const char *why)
{
	static const char *const retry_write[] = {"RetryableWriteError", NULL};
	char msg[300];

	STAT_INC(backend_errors);
	snprintf(msg, sizeof(msg), "mongoplex: %s", why);
	/* Reads are retried by drivers on codes 6/89 without labels. A write is
	 * labelled only when it is a retryable write (txnNumber), which the
	 * server deduplicates; other writes may have executed. */
	request_fail(req, code, codename, msg, req->retryable_write ? retry_write : NULL);
}
