/*
 * request.h — one client request on its way through the proxy.
 *
 * A request belongs to its client (client->requests, until done) and, while
 * it waits, to at most one queue through `queue_link`: a pool's wait queue,
 * a pool's hello waiters or a server's sticky queue (`queued` set;
 * `wait_server` names the server), or a batch's member list.
 * While it runs it is referenced by exactly one server (server->req). When
 * its client goes away first, `client` becomes NULL and the reply is dropped
 * on arrival.
 *
 * Batch members (REQ_LOOKUP) differ: one stays on its batch's member list
 * from joining until it is answered or re-run alone, with `queued` false, and
 * never runs on a server itself: the batch's own REQ_BATCH request (no
 * client, on no client's list) is queued and runs for all of them.
 *
 * Kinds:
 *   REQ_FORWARD  raw bytes forwarded for one exchange
 *   REQ_HELLO    a handshake waiting for the first backend hello
 *   REQ_LOOKUP   a batchable _id lookup, member of a batch (pool/batch.c)
 *   REQ_BATCH    a merged $in query run by the batcher (no client)
 */
#pragma once

#include <bson/bson.h>
#include <event2/buffer.h>
#include <stdbool.h>
#include <stdint.h>
#include "core/list.h"

struct client;
struct server;
struct pool;
struct batch;
struct lookup;
struct cursor_note;

enum request_kind {
	REQ_FORWARD,
	REQ_HELLO,
	REQ_LOOKUP,
	REQ_BATCH,
};

struct request {
	enum request_kind kind;
	struct client *client;
	TAILQ_ENTRY(request) client_link;
	TAILQ_ENTRY(request) queue_link;
	bool queued;		    /* on a pool or sticky queue (never set for batch members) */
	struct server *wait_server; /* queued on this server's sticky queue (pool/sticky.c) */
	size_t held_bytes;	    /* message bytes counted in the memory bound until sent */
	struct evbuffer *msg;	    /* message to send, header included */
	int32_t client_request_id;  /* the client's requestID (our reply's responseTo) */
	int32_t backend_request_id; /* our requestID on the backend */
	bool more_to_come;	    /* client set moreToCome: no reply expected */
	bool retryable_write;	    /* has txnNumber outside a transaction */
	bool sent;		    /* bytes handed to a backend: may have executed */
	bool legacy_reply;	    /* answer with OP_REPLY (legacy OP_QUERY handshake) */
	int8_t reply_compressor;    /* request came OP_COMPRESSED with this id; -1: it did not */
	uint64_t round;		    /* fair-queuing round (pool.c) */
	uint64_t enqueued_usec;
	uint64_t started_usec;
	struct pool *pool;
	struct server *server;
	char cmd[64];
	bson_t *hello_cmd;	    /* REQ_HELLO: the client's command, kept */
	struct batch *batch;	    /* REQ_BATCH */
	struct lookup *lookup;	    /* REQ_LOOKUP */
	struct cursor_note *cursor; /* proxy/cursor.c: what its reply updates in the cursor table */
	/* pool/select.c (replica sets): the member it must go to (its cursor's,
	 * its transaction's), its $readPreference (NULL: primary), its slot + 1
	 * in the transaction pin table, and whether it waits for a member. */
	struct pool *route_pool;
	bson_t *read_pref;
	int txn_pin;
	bool select_waiting;
	/* A request the proxy makes itself (no client; proxy/cauth_query.c): its
	 * reply, or the error the proxy would have answered, goes here once;
	 * NULL reply: abandoned unanswered. */
	void (*internal_reply)(void *arg, const bson_t *reply);
	void *internal_arg;
};

TAILQ_HEAD(request_list, request);

struct request *request_new(struct client *client, enum request_kind kind);
void request_free(struct request *req);

/* Its message is handed to a backend (or dropped): stop counting its bytes. */
void request_release_held(struct request *req);

/* Deliver a reply to the request's client (if still there) and finish it. */
void request_reply_raw(struct request *req, struct evbuffer *reply);
void request_reply_doc(struct request *req, const bson_t *doc);

/* A backend reply to an internal request (internal_reply set): hand it over
 * and finish the request. */
void request_internal_reply(struct request *req, const bson_t *body);

/* Answer with a MongoDB error {ok:0, code, codeName, errmsg, errorLabels}. */
void request_fail(struct request *req, int code, const char *codename, const char *msg,
		  const char *const *labels);

/* Finish without a reply (moreToCome, or its client is gone). */
void request_done(struct request *req);

/* The server-side exchange failed: network error (6/89) with the labels a
 * driver may act on; never a retryable label on a non-retryable write that
 * may have executed. */
void request_fail_network(struct request *req, int code, const char *codename, const char *why);
