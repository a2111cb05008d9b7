/*
 * batch.c — the _id batcher: batch lifetime (the merged reply is
 * pool/batch_reply.c, the pure id logic pool/batch_ids.c).
 *
 *   find {_id: v | {$eq: v} | {$in: [...]}} ──▶ batch_try_submit
 *        idle backend and no wait configured ──▶ forwarded as is (false)
 *        else ──▶ joins an open batch with the same key, or opens one
 *                 (its merged-query request queued in the pool like any request)
 *   pool dispatches the batch ──▶ batch_seal: {find, filter: {_id: {$in: union}}}
 *   reply ──▶ collect documents; cursor open? getMore on the same connection
 *   drained ──▶ sort by _id, hand each lookup the documents equal to its ids
 *   merged query failed ──▶ every lookup re-run alone (its own error reaches it)
 *
 * Rules: a batch accepts members only while it is open (queued or waiting
 * for its timer); once sealed its id list is fixed. Lookups are owned by
 * their batch (REQ_BATCHED on its members list) until answered; while a
 * member, a lookup runs the batcher's member callbacks (the client's are
 * kept in its struct lookup and restored when it runs alone). The merged
 * query is a request of its own with the batcher's callbacks (batch_ops). Every id
 * is a value batch_ids_value_ok accepts, so batch_ids_compare is exact;
 * the pure logic (classify, compare, union, split) lives in batch_ids.c.
 */
#include "pool/batch.h"

#include <event2/event.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/bsonval.h"
#include "core/evpool.h"
#include "core/xalloc.h"
#include "pool/batch_ids.h"
#include "pool/batch_int.h"
#include "pool/batch_key.h"
#include "pool/batch_sizes.h"
#include "pool/gate.h"
#include "pool/pool.h"
#include "pool/pool_int.h"
#include "pool/pool_users.h"
#include "pool/server.h"
#include "core/globals.h"
#include "core/stats.h"
#include "core/wire.h"
#include "pool/route.h"

static const struct request_ops batch_ops;

static TAILQ_HEAD(, batch) open_batches = TAILQ_HEAD_INITIALIZER(open_batches);
static uint64_t next_batch_id = 1;

int batch_open_lookups(void)
{
	const struct batch *b;
	int n = 0;

	TAILQ_FOREACH(b, &open_batches, open_link)
		n += b->members.n;
	return n;
}

/* ---- batch lifetime --------------------------------------------------- */

static struct lookup *lookup_new(const bson_t *body)
{
	struct lookup *lk = xcalloc(1, sizeof(*lk));

	batch_ids_list_from_find(body, &lk->ids);
	return lk;
}

void batch_lookup_free(struct lookup *lk)
{
	if (lk == NULL)
		return;
	batch_ids_list_free(&lk->ids);
	free(lk);
}

/* The batch's key, and `extra` (inside the key) for the merged query. */
static void build_key(const struct key_parts *kp, struct batch *b)
{
	size_t off = strlen(b->db) + 1 + strlen(b->coll) + 1;

	b->keylen = batch_key_len(kp, b->db, b->coll);
	b->key = xmalloc(b->keylen);
	batch_key_write(kp, b->db, b->coll, b->key);
	if (!bson_init_static(&b->extra, (const uint8_t *)b->key + off, kp->extra_len))
		bson_init(&b->extra); /* cannot happen: the bytes were written as a document */
}

static void free_found(struct batch *b)
{
	for (int i = 0; i < b->nfound; i++)
		free((void *)b->found[i].data);
	free(b->found);
	b->found = NULL;
	b->nfound = b->capfound = 0;
}

static void close_batch(struct batch *b)
{
	if (!b->open)
		return;
	b->open = false;
	b->req->route->hold_until_usec = 0; /* full or sealed: held no more */
	TAILQ_REMOVE(&open_batches, b, open_link);
}

/* Free the batch and its request; members must already be gone. */
void batch_free(struct batch *b)
{
	struct request *req = b->req;

	close_batch(b);
	if (b->timer)
		event_free(b->timer);
	free_found(b);
	if (b->have_ct)
		bson_value_destroy(&b->cluster_time);
	if (b->have_ot)
		bson_value_destroy(&b->operation_time);
	bson_destroy(&b->extra);
	free(b->key);
	free(b);
	req->route->batch = NULL;
	pool_user_put(req->route->user); /* per_user: the batch's reference */
	request_free(req);
}

/* The largest reply the backend may send (maxMessageSizeBytes). */
static int32_t reply_limit(void)
{
	const struct pool *p = pool_target();
	int32_t lim = p->info.known ? p->info.max_message_size_bytes : WIRE_MAX_MESSAGE;

	return lim > 0 && lim <= WIRE_MAX_MESSAGE ? lim : WIRE_MAX_MESSAGE;
}

/* Ids per merged query: batch_max_ids, fewer when the namespace's documents
 * are so large that the reply would exceed the backend's message limit. */
static int max_ids_for(const char *db, const char *coll)
{
	int fit = batch_sizes_docs_fitting(batch_sizes_get(db, coll), reply_limit());

	return fit < g.cfg.batch_max_ids ? fit : g.cfg.batch_max_ids;
}

/* batchSize for `want` more documents: one more than expected, so that the
 * first batch can close the cursor (a server leaves it open when the batch
 * fills exactly), capped so the reply fits under the message limit. */
int32_t batch_reply_size(const struct batch *b, int want)
{
	int fit = batch_sizes_docs_fitting(batch_sizes_get(b->db, b->coll), reply_limit());
	int64_t n = (int64_t)(want > 0 ? want : 0) + 1;

	return (int32_t)(n < fit ? n : fit);
}

/* An open batch with the same key and room, run as the same user
 * (per_user: lookups of different users are never merged). */
static struct batch *find_open(const char *key, size_t keylen, const struct request *req)
{
	const struct lookup *lk = req->route->lookup;
	struct batch *b;
	bool other_user = false;

	TAILQ_FOREACH(b, &open_batches, open_link) {
		if (b->keylen != keylen || memcmp(b->key, key, keylen) != 0)
			continue;
		if (b->req->route->user != req->route->user) {
			other_user = true;
			continue;
		}
		if (b->nids + lk->ids.n <= b->max_ids)
			return b;
	}
	if (other_user)
		STAT_INC(batch_user_separate);
	return NULL;
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct batch *b = arg;

	(void)fd;
	(void)what;
	proxy_tick();
	pool_submit(b->req);
}

static struct batch *batch_open(const struct key_parts *kp, const char *db, const char *coll)
{
	struct batch *b = xcalloc(1, sizeof(*b));

	b->id = next_batch_id++;
	bson_strncpy(b->db, db, sizeof(b->db));
	bson_strncpy(b->coll, coll, sizeof(b->coll));
	build_key(kp, b);
	b->max_ids = max_ids_for(db, coll);
	REQUEST_QUEUE_INIT(&b->members);
	b->open = true;
	TAILQ_INSERT_TAIL(&open_batches, b, open_link);
	b->req = request_new(NULL, &batch_ops);
	b->req->route->batch = b;
	if (g.cfg.batch_hold_us > 0)
		b->req->route->hold_until_usec = g.now_usec + (uint64_t)g.cfg.batch_hold_us;
	memcpy(b->req->cmd, "find", sizeof("find"));
	return b;
}

/* ---- holding a queued batch for its share (batch_hold_us) ------------ */

/* A member joined a queued batch: if it now holds its share (or is full)
 * and a connection is idle (it was held back), it goes. */
static void release_held(struct batch *b)
{
	struct pool *p = b->req->route->pool;

	if (!request_waiting(b->req) || p == NULL || TAILQ_EMPTY(&p->idle) ||
	    !pool_gate_share(b->req, p))
		return;
	pool_fill_idle(p);
}

static void add_member(struct batch *b, struct request *req)
{
	req->route->batch = b;
	req->enqueued_usec = g.now_usec;
	request_set_state(req, REQ_BATCHED, &b->members);
	b->nids += req->route->lookup->ids.n;
	b->req->route->ids = b->nids; /* its share so far (pool_gate_share) */
	log_debug("B-%" PRIu64 " %s.%s: C-%" PRIu64 " request %d joins (%d lookups, %d ids)", b->id,
		  b->db, b->coll, req->owner ? req->owner->id : 0, req->client_request_id,
		  b->members.n, b->nids);
	if (b->nids >= b->max_ids)
		close_batch(b); /* full: it runs as soon as a connection frees up */
	release_held(b);
}

/* A lookup whose documents, at the namespace's known size, would exceed
 * what one member's reply may hold (it would be re-run alone anyway). */
static bool too_big_to_merge(const struct lookup *lk, const char *db, const char *coll)
{
	uint32_t per_doc = batch_sizes_get(db, coll);

	return per_doc != 0 && (uint64_t)per_doc * (uint64_t)lk->ids.n > REPLY_DOCS_MAX &&
	       lk->ids.n > 1;
}

/* What batch_try_submit learnt about a find before choosing a batch. */
struct probe {
	bool idle; /* a backend connection is free */
	char db[DB_NAME_MAX];
	char coll[COLL_NAME_MAX];
};

/* May this find be batched at all, and where does it go? false: forward.
 * true: req->lookup holds its ids. */
static bool probe(struct request *req, const bson_t *body, struct probe *pr)
{
	const char *why = batch_ids_classify(body);
	struct bsonval_it it; /* the body was validated (wire_parse_msg) */
	const char *db = NULL, *coll = NULL;
	struct pool *target = pool_target();

	if (req->route->user != NULL) /* per_user: the user's pool is the one that matters */
		target = pool_users_pool(target, req->route->user);
	/* free, and the adaptive limit lets a request start (pool/gate.h) */
	pr->idle = !TAILQ_EMPTY(&target->idle) && pool_gate_room(target);
	if (why != NULL) {
		log_debug("C-%" PRIu64 " request %d: find not batchable: %s",
			  req->owner ? req->owner->id : 0, req->client_request_id, why);
		return false;
	}
	req->route->ids = batch_ids_count(body); /* its size for the limit, if forwarded */
	if (pr->idle && g.cfg.batch_max_wait_us == 0 && TAILQ_EMPTY(&open_batches))
		return false; /* nothing to wait for: forward as is */
	/* classify checked: the first key is find with a plain name, $db is a
	 * plain name when present, no key appears twice. */
	bsonval_it_init(&it, bson_get_data(body));
	while (db == NULL && bsonval_it_next(&it))
		if (coll == NULL)
			coll = (const char *)it.value + 4;
		else if (it.type == BSON_TYPE_UTF8 && strcmp(it.key, "$db") == 0)
			db = (const char *)it.value + 4;
	if (db == NULL)
		return false;
	bson_strncpy(pr->db, db, sizeof(pr->db));
	bson_strncpy(pr->coll, coll, sizeof(pr->coll));
	req->route->lookup = lookup_new(body);
	if (too_big_to_merge(req->route->lookup, pr->db, pr->coll)) {
		batch_lookup_free(
		    req->route->lookup); /* its own documents would not fit one reply */
		req->route->lookup = NULL;
		return false; /* forward */
	}
	return true;
}

/* The open batch `req` joins, or a new one; NULL: forward it instead (no
 * batch to join and a free connection with nothing to wait for). */
static struct batch *join_or_open(struct request *req, const bson_t *body, const struct probe *pr,
				  bool *fresh)
{
	struct key_parts kp;
	char stack_key[512], *key;
	size_t len;
	struct batch *b;

	batch_key_parts(body, &kp);
	len = batch_key_len(&kp, pr->db, pr->coll);
	key = len <= sizeof(stack_key) ? stack_key : xmalloc(len);
	batch_key_write(&kp, pr->db, pr->coll, key);
	b = find_open(key, len, req);
	if (key != stack_key)
		free(key);
	*fresh = false;
	if (b != NULL)
		return b;
	if (pr->idle && g.cfg.batch_max_wait_us == 0) {
		batch_lookup_free(req->route->lookup);
		req->route->lookup = NULL;
		return NULL;
	}
	*fresh = true;
	b = batch_open(&kp, pr->db, pr->coll);
	b->req->route->user = req->route->user; /* per_user: the batch runs as its members' user */
	if (b->req->route->user != NULL)
		pool_user_ref(b->req->route->user);
	return b;
}

/* When the batch goes to the pool, now that `req` is a member. */
static void schedule(struct batch *b, bool fresh, bool idle)
{
	if (fresh && idle && b->open) {
		/* A connection is free but batch_max_wait_us asks us to wait. */
		struct timeval tv = {0, (suseconds_t)g.cfg.batch_max_wait_us};

		b->timer = evtimer_new(g.base, timer_cb, b);
		evtimer_add(b->timer, &tv);
	} else if (fresh) {
		pool_submit(b->req); /* queued: accumulates until a connection frees up */
	} else if (!b->open && b->timer != NULL && evtimer_pending(b->timer, NULL)) {
		evtimer_del(b->timer); /* filled up while waiting: go now */
		pool_submit(b->req);
	}
}

bool batch_try_submit(struct request *req, const bson_t *body)
{
	struct probe pr;
	struct batch *b;
	bool fresh;

	if (!probe(req, body, &pr))
		return false;
	b = join_or_open(req, body, &pr, &fresh);
	if (b == NULL)
		return false;
	add_member(b, req);
	schedule(b, fresh, pr.idle);
	return true;
}

/* ---- running a batch ------------------------------------------------ */

struct evbuffer *batch_command_message(const bson_t *cmd, int32_t *id_out)
{
	struct evbuffer *msg = evpool_get();

	*id_out = wire_next_request_id();
	wire_append_msg(msg, *id_out, 0, 0, cmd);
	return msg;
}

/* The members' id lists, for batch_ids (shallow). */
const struct batch_id_list **batch_member_lists(const struct batch *b)
{
	const struct batch_id_list **lists = xcalloc((size_t)b->members.n + 1, sizeof(*lists));
	const struct request *m;
	int n = 0;

	TAILQ_FOREACH(m, &b->members.list, queue_link)
		lists[n++] = &m->route->lookup->ids;
	return lists;
}

/* {find, filter: {_id: {$in: ids}}, <extra>, batchSize, $db} */
static void build_query(const struct batch *b, const bson_value_t *ids, int n, bson_t *cmd)
{
	bson_t filter, in, arr;
	char key[16];
	const char *k;

	bson_init(cmd);
	BSON_APPEND_UTF8(cmd, "find", b->coll);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "filter", &filter);
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (int i = 0; i < n; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_value(&arr, k, -1, &ids[i]);
	}
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&filter, &in);
	bson_append_document_end(cmd, &filter);
	bson_concat(cmd, &b->extra);
	/* ids are distinct and _id is unique: at most n documents, so n + 1
	 * lets the first batch close the cursor (no getMore round trip). */
	BSON_APPEND_INT32(cmd, "batchSize", batch_reply_size(b, n));
	BSON_APPEND_UTF8(cmd, "$db", b->db);
}

void batch_seal(struct request *req)
{
	struct batch *b = req->route->batch;
	const struct batch_id_list **lists;
	bson_value_t *all;
	struct request *m;
	bson_t cmd;
	int32_t unused;

	close_batch(b);
	if (b->timer)
		evtimer_del(b->timer);
	TAILQ_FOREACH(m, &b->members.list, queue_link)
		hist_observe(&hist_batch_wait_ms, (double)(g.now_usec - m->enqueued_usec) / 1000.0);
	all = xmalloc(sizeof(*all) * (size_t)(b->nids ? b->nids : 1));
	lists = batch_member_lists(b);
	b->nuniq = batch_ids_union(lists, b->members.n, all); /* shallow: lookups own them */
	req->route->ids = b->nuniq;
	free(lists);
	build_query(b, all, b->nuniq, &cmd);
	free(all);
	evpool_put(req->msg);
	req->msg = batch_command_message(&cmd, &unused);
	bson_destroy(&cmd);
	STAT_INC(batches_sent);
	STAT_ADD(batch_lookups, (uint64_t)b->members.n);
	if (b->members.n > 1)
		STAT_ADD(batch_lookups_merged, (uint64_t)b->members.n);
	hist_observe(&hist_batch_ids, b->nuniq);
	log_debug("B-%" PRIu64 " %s.%s sealed: %d lookups, %d unique ids", b->id, b->db, b->coll,
		  b->members.n, b->nuniq);
}

/* A member (off its batch already) becomes an ordinary request again: its
 * callbacks never changed (a member is its client's request, REQ_BATCHED);
 * only its batch and ids go. */
void batch_member_restore(struct request *m)
{
	m->route->batch = NULL;
	batch_lookup_free(m->route->lookup);
	m->route->lookup = NULL;
}

/* Take a member off its batch, back to its creator's callbacks. */
static void leave(struct request *m)
{
	request_set_state(m, REQ_NEW, NULL);
	batch_member_restore(m);
}

/* Run a member (off its batch already) as a plain forwarded request. */
void batch_member_run_alone(struct request *m)
{
	STAT_INC(batch_fallbacks);
	if (m->owner == NULL) {
		request_done(m);
		return;
	}
	pool_submit(m);
}

void batch_rerun_alone(struct request *req)
{
	struct batch *b = req->route->batch;
	struct request *m;

	close_batch(b);
	while ((m = TAILQ_FIRST(&b->members.list)) != NULL) {
		leave(m);
		batch_member_run_alone(m);
	}
	batch_free(b);
}

void batch_fail(struct request *req, int code, const char *codename, const char *msg,
		const char *const *labels)
{
	struct batch *b = req->route->batch;
	struct request *m;

	close_batch(b);
	while ((m = TAILQ_FIRST(&b->members.list)) != NULL) {
		leave(m);
		request_fail(m, code, codename, msg, labels);
	}
	batch_free(b);
}

/* ---- callbacks ---------------------------------------------------------- */

/* The merged query failed to reach the backend: before it was sent, every
 * lookup gets the error; once sent, each re-runs alone. */
static void batch_network_error(struct request *req, int code, const char *codename,
				const char *why)
{
	if (req->sent)
		batch_rerun_alone(req);
	else
		batch_fail(req, code, codename, why, NULL);
}

static const struct request_ops batch_ops = {
    .name = "batch",
    .start = batch_seal,
    .reply = batch_on_reply,
    .reply_too_big = batch_reply_discarded,
    .error = batch_fail,
    .network_error = batch_network_error,
};
