/*
 * batch_reply.c — the merged query's reply (pool/batch.c sends it):
 *
 *   reply ─▶ collect documents (copies); cursor open? getMore on the same connection
 *   drained ─▶ every document comparable, unique and claimed? (batch_ids_split_ok)
 *        yes ─▶ each member gets its documents in _id order ─▶ batch freed
 *        no, or the query failed ─▶ every member re-run alone
 *   reply over maxMessageSizeBytes ─▶ skipped by the server ─▶ re-run alone
 *
 * Rules: the batch owns the documents it collected until it is freed; a
 * member is answered and freed here, or handed back to run alone.
 */
#include <stdlib.h>
#include <string.h>

#include "pool/batch.h"

#include "core/errors.h"
#include "core/xalloc.h"
#include "pool/batch_int.h"
#include "pool/batch_sizes.h"
#include "pool/pool.h"
#include "pool/server.h"
#include "core/globals.h"
#include "core/stats.h"
#include "pool/route.h"

static void keep_time(bson_value_t *dst, bool *have, const bson_t *body, const char *key)
{
	bson_iter_t it;

	if (!bson_iter_init_find(&it, body, key))
		return;
	if (*have)
		bson_value_destroy(dst);
	bson_value_copy(bson_iter_value(&it), dst);
	*have = true;
}

static bool add_found(struct batch *b, const uint8_t *data, uint32_t len)
{
	struct batch_ids_doc *f;
	uint8_t *copy;

	if (b->nfound == b->capfound) {
		b->capfound = b->capfound ? b->capfound * 2 : 64;
		b->found = xrealloc(b->found, (size_t)b->capfound * sizeof(*b->found));
	}
	copy = xmalloc(len);
	memcpy(copy, data, len);
	f = &b->found[b->nfound];
	if (!batch_ids_doc_init(f, copy, len)) {
		free(copy);
		return false;
	}
	b->nfound++;
	batch_sizes_observe(b->db, b->coll, len);
	return true;
}

/* Read {ok:1, cursor: {id, firstBatch|nextBatch}}; false if the query failed. */
static bool collect_reply(struct batch *b, const bson_t *body)
{
	bson_iter_t it, cur, docs;
	const uint8_t *d;
	uint32_t dl;

	if (!bson_iter_init_find(&it, body, "ok") || bson_iter_as_double(&it) != 1.0)
		return false;
	if (!bson_iter_init_find(&it, body, "cursor") || !bson_iter_recurse(&it, &cur))
		return false;
	b->cursor_id = -1;
	while (bson_iter_next(&cur)) {
		const char *k = bson_iter_key(&cur);

		if (strcmp(k, "id") == 0) {
			b->cursor_id = bson_iter_as_int64(&cur);
		} else if ((strcmp(k, "firstBatch") == 0 || strcmp(k, "nextBatch") == 0) &&
			   bson_iter_recurse(&cur, &docs)) {
			while (bson_iter_next(&docs)) {
				if (!BSON_ITER_HOLDS_DOCUMENT(&docs))
					return false;
				bson_iter_document(&docs, &dl, &d);
				if (!add_found(b, d, dl))
					return false;
			}
		}
	}
	keep_time(&b->cluster_time, &b->have_ct, body, "$clusterTime");
	keep_time(&b->operation_time, &b->have_ot, body, "operationTime");
	return b->cursor_id >= 0;
}

static void send_get_more(struct server *s, struct batch *b)
{
	bson_t cmd;
	int32_t id;
	struct evbuffer *msg;

	bson_init(&cmd);
	BSON_APPEND_INT64(&cmd, "getMore", b->cursor_id);
	BSON_APPEND_UTF8(&cmd, "collection", b->coll);
	BSON_APPEND_INT32(&cmd, "batchSize", batch_reply_size(b, b->nuniq - b->nfound));
	BSON_APPEND_UTF8(&cmd, "$db", b->db);
	msg = batch_command_message(&cmd, &id);
	bson_destroy(&cmd);
	STAT_INC(batch_getmores);
	b->getmores++;
	server_send_more(s, msg, id);
	evbuffer_free(msg);
}

/* Answer one member with its documents, in _id order; false if too big. */
static bool answer_member(struct batch *b, struct request *m, int *idx)
{
	int n = batch_ids_docs_for(b->found, b->nfound, &m->route->lookup->ids, idx);
	bson_t reply, cursor, arr, doc;
	char key[16], ns[DB_NAME_MAX + COLL_NAME_MAX];
	const char *k;
	size_t bytes = 0, dl = strlen(b->db), cl = strlen(b->coll);

	for (int i = 0; i < n; i++)
		bytes += b->found[idx[i]].len;
	if (bytes > REPLY_DOCS_MAX)
		return false;
	if (!b->have_ct && !b->have_ot) { /* the usual reply: encoded directly */
		uint32_t len;
		uint8_t *data = batch_ids_reply(b->found, idx, n, b->db, b->coll, &len);

		if (bson_init_static(&reply, data, len))
			request_reply_doc(m, &reply);
		else
			request_fail(m, MP_ERR(INTERNAL_ERROR), "mongoplex: bad batch reply", NULL);
		free(data);
		return true;
	}
	bson_init(&reply);
	BSON_APPEND_DOCUMENT_BEGIN(&reply, "cursor", &cursor);
	BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
	for (int i = 0; i < n; i++) {
		const struct batch_ids_doc *f = &b->found[idx[i]];

		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		if (bson_init_static(&doc, f->data, f->len))
			bson_append_document(&arr, k, -1, &doc);
	}
	bson_append_array_end(&cursor, &arr);
	BSON_APPEND_INT64(&cursor, "id", 0);
	memcpy(ns, b->db, dl); /* "db.coll": both NUL-terminated within their arrays */
	ns[dl] = '.';
	memcpy(ns + dl + 1, b->coll, cl);
	bson_append_utf8(&cursor, "ns", 2, ns, (int)(dl + 1 + cl));
	bson_append_document_end(&reply, &cursor);
	BSON_APPEND_DOUBLE(&reply, "ok", 1.0);
	if (b->have_ct)
		bson_append_value(&reply, "$clusterTime", -1, &b->cluster_time);
	if (b->have_ot)
		bson_append_value(&reply, "operationTime", -1, &b->operation_time);
	request_reply_doc(m, &reply);
	bson_destroy(&reply);
	return true;
}

/* Every document must be comparable, unique and claimed by some lookup;
 * otherwise the backend's equality differs from ours (a collation, a view,
 * a backend quirk, a value we cannot compare exactly) and splitting could
 * hand out wrong documents. Sorts the documents by _id. */
static bool split_is_safe(struct batch *b)
{
	const struct batch_id_list **lists = batch_member_lists(b);
	bool ok = batch_ids_split_ok(b->found, b->nfound, lists, b->members.n);

	free(lists);
	return ok;
}

static void split_and_answer(struct batch *b)
{
	struct request *m;
	int *idx = xmalloc(sizeof(int) * (size_t)(b->nids + 1));

	while ((m = TAILQ_FIRST(&b->members.list)) != NULL) {
		request_set_state(m, REQ_NEW, NULL); /* member callbacks until answered */
		if (m->owner == NULL) {
			request_done(m);
			continue;
		}
		if (!answer_member(b, m, idx)) { /* answered and freed, unless: */
			batch_member_restore(m); /* its documents exceed 16 MB together */
			batch_member_run_alone(m);
		}
	}
	free(idx);
}

/* Each lookup re-runs alone so its own error (or its own reply) reaches it. */
static void give_up(struct server *s, struct request *req)
{
	s->req = NULL;
	req->route->server = NULL;
	batch_rerun_alone(req);
	server_release(s);
}

void batch_on_reply(struct server *s, struct request *req, struct evbuffer *buf, uint8_t *data,
		    size_t len, const struct wire_msg *m)
{
	struct batch *b = req->route->batch;

	(void)buf;
	(void)data;
	(void)len;
	if (!collect_reply(b, &m->body)) {
		give_up(s, req);
		return;
	}
	if (b->cursor_id != 0) {
		send_get_more(s, b);
		return;
	}
	if (b->getmores == 0 && b->nfound >= b->nuniq)
		STAT_INC(batch_getmores_saved); /* batchSize = ids would have left it open */
	if (!split_is_safe(b)) {
		server_warning(
		    s,
		    "B-%" PRIu64 " merged query on %s.%s (%d lookups) returned documents "
		    "that match no lookup by MongoDB equality, or _id values the batcher "
		    "cannot compare exactly; re-running each lookup alone",
		    b->id, b->db, b->coll, b->members.n);
		give_up(s, req);
		return;
	}
	s->req = NULL;
	req->route->server = NULL;
	split_and_answer(b);
	batch_free(b);
	server_release(s);
}

void batch_reply_discarded(struct server *s, struct request *req, int64_t len)
{
	struct batch *b = req->route->batch;
	int64_t avg = len / (b->nuniq > 0 ? b->nuniq : 1);

	server_warning(
	    s,
	    "B-%" PRIu64 " merged query on %s.%s (%d lookups): the backend's %" PRId64
	    "-byte reply exceeds maxMessageSizeBytes; discarded, each lookup re-run alone",
	    b->id, b->db, b->coll, b->members.n, len);
	STAT_INC(batch_replies_discarded);
	batch_sizes_observe(b->db, b->coll, avg > UINT32_MAX ? UINT32_MAX : (uint32_t)avg);
	give_up(s, req);
}
