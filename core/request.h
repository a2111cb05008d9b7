/*
 * request.h — one client request on its way through the proxy, the unit
 * both layers pass, and the callbacks through which it comes back.
 *
 * States and their lists (request_set_state() moves a request and logs
 * every move at debug; nothing else touches `queue_link`):
 *   REQ_NEW         on no list: being routed, or a batch waiting for its timer
 *   REQ_QUEUED      waiting for a backend connection: on one wait queue
 *                   (`route->waitq`, pool/waitq.h: a pool's, a sticky
 *                   server's, the replica set's member wait, a pin's)
 *   REQ_HELLO_WAIT  a handshake waiting for the first backend hello
 *                   (pool->hello_waiters)
 *   REQ_BATCHED     a lookup, member of a batch (batch->members, pool/batch.c)
 *   REQ_RUNNING     sent to a backend (`route->server`): request.c's `running`
 *   REQ_LOCAL       answered by the proxy itself: request.c's `local`
 * Counts per state, per owner and per owner phase are kept by
 * request_set_state from these lists (request_count, request_owner_phases).
 *
 * A request belongs to its owner (the client, owner->requests, until done).
 * When its client goes away first, `owner` becomes NULL: a waiting request
 * is dropped (ops->abandon), a running one has its reply dropped on arrival.
 * Requests with no owner from the start: a batch's merged query (pool/batch.c)
 * and the proxy's own killCursors (proxy/cursor.c).
 *
 * Callbacks (`ops`), set by whoever creates the request: the client
 * (proxy/client_ops.c), the batcher for its merged query; set once at
 * creation, never swapped (a batch member keeps its client's ops). The
 * pool and the servers reach the request only through them.
 */
#pragma once

#include <bson/bson.h>
#include <event2/buffer.h>
#include <stdbool.h>
#include <stdint.h>
#include "core/list.h"

struct server;
struct wire_msg;
struct request;
struct request_owner;
struct owner_route;
struct lb_pin;
struct req_route;
struct req_client;

enum request_state {
	REQ_NEW,
	REQ_QUEUED,
	REQ_HELLO_WAIT,
	REQ_BATCHED,
	REQ_RUNNING,
	REQ_LOCAL,
	REQ_NSTATES,
};

TAILQ_HEAD(request_list, request);

/* A list of requests in one state with its length; only request_set_state
 * changes either. */
struct request_queue {
	struct request_list list;
	int n;
};

#define REQUEST_QUEUE_INIT(q)                                                                      \
	do {                                                                                       \
		TAILQ_INIT(&(q)->list);                                                            \
		(q)->n = 0;                                                                        \
	} while (0)

/* What a request does at each turn; NULL entries mean "nothing to do". */
struct request_ops {
	const char *name; /* in debug logs */
	/* About to be sent to `s` (the client releases its memory charge, the
	 * batcher builds its merged query). */
	void (*start)(struct request *req);
	/* A complete backend reply for it on `s`; the callback finishes the
	 * exchange (server_release) or continues it (server_send_more). */
	void (*reply)(struct server *s, struct request *req, struct evbuffer *buf, uint8_t *data,
		      size_t len, const struct wire_msg *m);
	/* Its reply announces `len` bytes over the message limit; non-NULL:
	 * the server skips the bytes and this takes over (releases `s`). */
	void (*reply_too_big)(struct server *s, struct request *req, int64_t len);
	/* Refused before it ran: a MongoDB error (request_fail for clients). */
	void (*error)(struct request *req, int code, const char *codename, const char *msg,
		      const char *const *labels);
	/* The backend could not be reached, or its connection failed while the
	 * request ran (request_fail_network for clients). */
	void (*network_error)(struct request *req, int code, const char *codename, const char *why);
	/* Its owner went away (owner is NULL already). */
	void (*abandon)(struct request *req);
	/* Being freed: release what the creator attached. */
	void (*release)(struct request *req);
};

/* The client side, as the lower layers see it (embedded in struct client). */
struct request_owner_ops {
	/* May one more of its requests be sent to a backend now? */
	bool (*may_dispatch)(const struct request_owner *o);
	/* Append a whole reply message. */
	void (*send)(struct request_owner *o, struct request *req, struct evbuffer *msg);
	/* One of its requests finished: resume reading (deferred). */
	void (*finished)(struct request_owner *o);
	/* Who it is, for bounds shared by the connections of one client
	 * (pool/pin.c): "user db.name" once logged in, else "app NAME" from its
	 * hello; false: unknown (it counts alone). */
	bool (*identity)(const struct request_owner *o, char *out, size_t len);
};

/* Rules: `requests` holds every request of the owner in arrival order until
 * it is done or detached; `n_state` counts them per state (request.c only). */
struct request_owner {
	uint64_t id;		      /* C-<id> in logs; the cursor table's owner id */
	struct request_list requests; /* parsed and not yet answered */
	int inflight;		      /* entries in `requests` */
	int n_state[REQ_NSTATES + 1]; /* per state ([REQ_NSTATES]: scratch, "none") */
	int n_phase[3];		      /* requests per phase class: idle, waiting, running */
	int phase;		      /* the owner's phase, as counted in request.c */
	/* pool/'s part (pool/route.h: its sticky connection, its load-balanced
	 * pins), allocated by pool/ when first needed and freed by
	 * pool_owner_fini: a new pool feature adds its field there. */
	struct owner_route *route;
	const struct request_owner_ops *ops;
};

/* Rules: on at most one state list through `queue_link` (`queue`, NULL for
 * REQ_NEW); `state` changes only in request_set_state. */
struct request {
	uint64_t id; /* for logs */
	enum request_state state;
	const struct request_ops *ops;
	struct request_owner *owner;
	TAILQ_ENTRY(request) client_link;
	TAILQ_ENTRY(request) queue_link;
	struct request_queue *queue; /* the list it is on, NULL: none */
	size_t held_bytes;	     /* message bytes counted in the memory bound until sent */
	struct evbuffer *msg;	     /* message to send, header included */
	int32_t client_request_id;   /* the client's requestID (our reply's responseTo) */
	int32_t backend_request_id;  /* our requestID on the backend */
	bool more_to_come;	     /* client set moreToCome: no reply expected */
	bool retryable_write;	     /* has txnNumber outside a transaction */
	bool sent;		     /* bytes handed to a backend: may have executed */
	bool legacy_reply;	     /* answer with OP_REPLY (legacy OP_QUERY handshake) */
	int8_t reply_compressor;     /* request came OP_COMPRESSED with this id; -1: it did not */
	uint64_t enqueued_usec;
	char cmd[64];
	/* The layers' own parts (request_part_set), allocated with the request
	 * and freed by their layer; core never reads inside them. NULL: that
	 * layer registered no part (unit tests of core alone). */
	struct req_route *route;   /* pool/route.h: where it goes, what it waits on */
	struct req_client *client; /* proxy/client_req.h: the client side's notes */
	/* A request the proxy makes itself (no client; proxy/cauth_query.c): its
	 * reply, or the error the proxy would have answered, goes here once;
	 * NULL reply: abandoned unanswered. */
	void (*internal_reply)(void *arg, const bson_t *reply);
	void *internal_arg;
};

void request_owner_init(struct request_owner *o, uint64_t id, const struct request_owner_ops *ops);

/* A layer's part of every request: `size` bytes, zeroed, allocated with
 * the request (req->route: REQUEST_PART_ROUTE, req->client:
 * REQUEST_PART_CLIENT); `fini` releases what the layer attached, when the
 * request is freed (after ops->release). Set once, before the first
 * request that needs it (proxy/client_ops.c sets both). */
enum request_part_id { REQUEST_PART_ROUTE, REQUEST_PART_CLIENT, REQUEST_NPARTS };
struct request_part {
	size_t size;
	void (*fini)(struct request *req);
};
void request_part_set(enum request_part_id id, const struct request_part *part);

/* A new request in REQ_NEW, appended to `owner`'s requests (owner may be NULL). */
struct request *request_new(struct request_owner *owner, const struct request_ops *ops);
/* Free `req` (its memory may be kept for the next request_new). */
void request_free(struct request *req);
/* Free the memory of freed requests kept for reuse (at exit). */
void request_spare_clear(void);

/* Move `req` to `st`: off its list, onto the tail of `q` (NULL: the state's
 * own list, none for REQ_NEW). _after: right after `after` (NULL: head). */
void request_set_state(struct request *req, enum request_state st, struct request_queue *q);
void request_set_state_after(struct request *req, enum request_state st, struct request_queue *q,
			     struct request *after);
static inline bool request_waiting(const struct request *req)
{
	return req->state == REQ_QUEUED || req->state == REQ_HELLO_WAIT;
}
/* Requests in `st` over all lists. */
int request_count(enum request_state st);
/* Attached owners with a request running / (none running and) one waiting
 * (queued, waiting for hello or in a batch). */
void request_owner_phases(int *waiting, int *running);

/* Detach every request from `o` (its client is closing) and abandon each. */
void request_owner_abandon_all(struct request_owner *o);

/* May a request of `o` (NULL: owner gone) be sent to a backend now? */
static inline bool request_owner_may_dispatch(const struct request_owner *o)
{
	return o == NULL || o->ops->may_dispatch(o);
}

/* Deliver a reply to the request's owner (if still there) and finish it. */
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

/* Default abandon: a waiting request is dropped; a running one stays (its
 * reply is dropped on arrival). */
void request_abandon_default(struct request *req);
