/*
 * request.c — request lifetime, its states and lists, and the replies the
 * proxy itself generates (see request.h for the rules).
 *
 *   request_new ─▶ [NEW] ─▶ QUEUED | HELLO | BATCHED ─▶ RUNNING ─▶ reply ─▶ free
 *                     └──▶ LOCAL (answered here) ──────────────────────────▶ free
 * Every move goes through request_set_state, which keeps the per-state,
 * per-owner and per-phase counts that stats read.
 */
#include "core/request.h"

#include <stdlib.h>
#include <string.h>

#include "core/evpool.h"
#include "core/log.h"
#include "core/spare.h"
#include "core/stats.h"
#include "core/wire.h"
#include "core/globals.h"
#include "core/xalloc.h"

static const char *const state_names[REQ_NSTATES] = {"new",	"queued",  "hello",
						     "batched", "running", "local"};

/* The module's own lists, for states that have no container. */
static struct request_queue running = {TAILQ_HEAD_INITIALIZER(running.list), 0};
static struct request_queue local = {TAILQ_HEAD_INITIALIZER(local.list), 0};
static int state_count[REQ_NSTATES];
static int phase_waiting, phase_running; /* attached owners per phase */
static uint64_t next_request_id = 1;

enum phase { PHASE_IDLE, PHASE_WAITING, PHASE_RUNNING };

/* The phase a request in a state gives its owner ([REQ_NSTATES]: none). */
static const unsigned char state_phase[REQ_NSTATES + 1] = {
    [REQ_NEW] = PHASE_IDLE,	   [REQ_QUEUED] = PHASE_WAITING,  [REQ_HELLO_WAIT] = PHASE_WAITING,
    [REQ_BATCHED] = PHASE_WAITING, [REQ_RUNNING] = PHASE_RUNNING, [REQ_LOCAL] = PHASE_IDLE,
    [REQ_NSTATES] = PHASE_IDLE,
};

static void phase_add(int ph, int delta)
{
	if (ph == PHASE_RUNNING)
		phase_running += delta;
	else if (ph == PHASE_WAITING)
		phase_waiting += delta;
}

/* Count `req`, which moves from state `from` to `to` (REQ_NSTATES: in or
 * out of existence), in its owner's counts and the owners' phase counts:
 * an owner is running while any request runs, else waiting while any waits. */
static void owner_count(struct request *req, enum request_state from, enum request_state to)
{
	struct request_owner *o = req->owner;
	int pf = state_phase[from], pt = state_phase[to], ph;

	if (o == NULL)
		return;
	o->n_state[from]--;
	o->n_state[to]++;
	if (pf == pt)
		return; /* the owner's phase stays */
	o->n_phase[pf]--;
	o->n_phase[pt]++;
	ph = o->n_phase[PHASE_RUNNING] > 0   ? PHASE_RUNNING
	     : o->n_phase[PHASE_WAITING] > 0 ? PHASE_WAITING
					     : PHASE_IDLE;
	if (ph != o->phase) {
		phase_add(o->phase, -1);
		phase_add(ph, 1);
		o->phase = ph;
	}
}

void request_owner_init(struct request_owner *o, uint64_t id, const struct request_owner_ops *ops)
{
	memset(o, 0, sizeof(*o));
	o->id = id;
	o->ops = ops;
	TAILQ_INIT(&o->requests);
}

/* The layers' parts, laid out after the request (request_part_set). */
static struct request_part parts[REQUEST_NPARTS];
static size_t part_off[REQUEST_NPARTS], request_size = sizeof(struct request);

#define PART_ALIGN 16

/* Freed requests kept for the next ones (core/spare.h): all request_size
 * bytes, zeroed again when taken. None under ASan (use after free). */
#define REQUEST_KEEP 64
static void *kept_items[REQUEST_KEEP];
static struct spare kept = SPARE_INIT(kept_items, SPARE_UNDER_ASAN ? 0 : REQUEST_KEEP);

void request_spare_clear(void)
{
	void *p;

	while ((p = spare_take(&kept)) != NULL)
		free(p);
}

static size_t align_up(size_t n)
{
	return (n + PART_ALIGN - 1) & ~(size_t)(PART_ALIGN - 1);
}

void request_part_set(enum request_part_id id, const struct request_part *part)
{
	size_t off = align_up(sizeof(struct request));

	request_spare_clear(); /* kept at the old size */
	parts[id] = *part;
	for (int i = 0; i < REQUEST_NPARTS; i++) {
		part_off[i] = parts[i].size > 0 ? off : 0;
		off += align_up(parts[i].size);
	}
	request_size = off;
}

static void *part_of(const struct request *req, int i)
{
	return i == REQUEST_PART_ROUTE ? (void *)req->route : (void *)req->client;
}

struct request *request_new(struct request_owner *owner, const struct request_ops *ops)
{
	struct request *req = spare_take(&kept);

	if (req != NULL)
		memset(req, 0, request_size);
	else
		req = xcalloc(1, request_size);

	if (part_off[REQUEST_PART_ROUTE] != 0)
		req->route = (struct req_route *)((char *)req + part_off[REQUEST_PART_ROUTE]);
	if (part_off[REQUEST_PART_CLIENT] != 0)
		req->client = (struct req_client *)((char *)req + part_off[REQUEST_PART_CLIENT]);

	req->id = next_request_id++;
	req->ops = ops;
	req->owner = owner;
	req->state = REQ_NEW;
	req->enqueued_usec = g.now_usec;
	req->reply_compressor = -1;
	state_count[REQ_NEW]++;
	if (owner != NULL) {
		TAILQ_INSERT_TAIL(&owner->requests, req, client_link);
		owner->inflight++;
		owner_count(req, REQ_NSTATES, REQ_NEW);
	}
	return req;
}

static struct request_queue *own_list(enum request_state st)
{
	if (st == REQ_RUNNING)
		return &running;
	if (st == REQ_LOCAL)
		return &local;
	return NULL;
}

static void leave_list(struct request *req)
{
	if (req->queue == NULL)
		return;
	TAILQ_REMOVE(&req->queue->list, req, queue_link);
	req->queue->n--;
	req->queue = NULL;
}

static void move(struct request *req, enum request_state st, struct request_queue *q,
		 struct request *after, bool tail)
{
	if (q == NULL)
		q = own_list(st);
	if (req->owner != NULL) /* C-<id>: its client's, as in the client's own log lines */
		log_debug("R-%" PRIu64 " (%s) C-%" PRIu64 " %s -> %s", req->id, req->ops->name,
			  req->owner->id, state_names[req->state], state_names[st]);
	else
		log_debug("R-%" PRIu64 " (%s) %s -> %s", req->id, req->ops->name,
			  state_names[req->state], state_names[st]);
	leave_list(req);
	owner_count(req, req->state, st);
	state_count[req->state]--;
	req->state = st;
	state_count[st]++;
	if (q == NULL)
		return;
	if (tail)
		TAILQ_INSERT_TAIL(&q->list, req, queue_link);
	else if (after == NULL)
		TAILQ_INSERT_HEAD(&q->list, req, queue_link);
	else
		TAILQ_INSERT_AFTER(&q->list, after, req, queue_link);
	q->n++;
	req->queue = q;
}

void request_set_state_after(struct request *req, enum request_state st, struct request_queue *q,
			     struct request *after)
{
	move(req, st, q, after, false);
}

void request_set_state(struct request *req, enum request_state st, struct request_queue *q)
{
	move(req, st, q, NULL, true);
}

int request_count(enum request_state st)
{
	return state_count[st];
}

void request_owner_phases(int *waiting, int *running_out)
{
	*waiting = phase_waiting;
	*running_out = phase_running;
}

/* Detach from the owner, if any; returns the owner for a resume poke. */
static struct request_owner *detach(struct request *req)
{
	struct request_owner *o = req->owner;

	if (o != NULL) {
		owner_count(req, req->state, REQ_NSTATES);
		TAILQ_REMOVE(&o->requests, req, client_link);
		o->inflight--;
		req->owner = NULL;
	}
	return o;
}

void request_owner_abandon_all(struct request_owner *o)
{
	struct request *req;

	while ((req = TAILQ_FIRST(&o->requests)) != NULL) {
		detach(req);
		if (req->ops->abandon != NULL)
			req->ops->abandon(req);
	}
}

void request_abandon_default(struct request *req)
{
	if (request_waiting(req))
		request_free(req);
	/* else: running on a server, which drops the reply */
}

void request_free(struct request *req)
{
	if (req->ops->release != NULL)
		req->ops->release(req);
	detach(req);
	leave_list(req);
	state_count[req->state]--;
	evpool_put(req->msg);
	for (int i = 0; i < REQUEST_NPARTS; i++)
		if (parts[i].fini != NULL && part_of(req, i) != NULL)
			parts[i].fini(req);
	if (req->internal_reply != NULL)
		req->internal_reply(req->internal_arg, NULL);
	if (!spare_keep(&kept, req))
		free(req);
}

void request_done(struct request *req)
{
	struct request_owner *o = detach(req);

	request_free(req);
	if (o != NULL)
		o->ops->finished(o);
}

void request_reply_raw(struct request *req, struct evbuffer *reply)
{
	if (req->owner != NULL && !req->more_to_come)
		req->owner->ops->send(req->owner, req, reply);
	request_done(req);
}

void request_reply_doc(struct request *req, const bson_t *doc)
{
	struct evbuffer *out;

	if (req->internal_reply != NULL) {
		request_internal_reply(req, doc);
		return;
	}
	if (req->owner == NULL) {
		request_done(req);
		return;
	}
	out = evpool_get();
	if (req->legacy_reply)
		wire_append_op_reply(out, req->client_request_id, 0, doc);
	else
		wire_append_msg(out, wire_next_request_id(), req->client_request_id, 0, doc);
	request_reply_raw(req, out);
	evpool_put(out);
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
			    req->owner ? req->owner->id : 0, msg);
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
