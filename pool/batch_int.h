/*
 * batch_int.h — the batcher's own structures, shared by its two halves:
 * pool/batch.c (lifetime: open, join, seal, schedule, fall back) and
 * pool/batch_reply.c (the merged reply: drain, check, split, answer).
 * Private to pool/batch*.c.
 */
#pragma once

#include <bson/bson.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool/batch_ids.h"
#include "core/request.h"
#include "core/wire.h"

/* Room left under 16 MB for a reply's envelope. */
#define REPLY_DOCS_MAX (WIRE_MAX_BSON - 16 * 1024)

/* One requester's ids (copies), sorted and deduplicated; owned by its
 * request's route part (freed with it, pool/route.c, or when it leaves its
 * batch). */
struct lookup {
	struct batch_id_list ids;
};

#define DB_NAME_MAX   128
#define COLL_NAME_MAX 256

/* Rules: on open_batches while `open` (accepting members); its request is
 * the merged query; members are REQ_BATCHED on `members` until answered or
 * re-run alone; the `found` documents are copies owned here until freed. */
struct batch {
	uint64_t id;	     /* B-<id> in log lines */
	struct request *req; /* the merged query's request (batch_ops) */
	char *key;	     /* db, coll, projection, readConcern, readPreference, maxTimeMS */
	size_t keylen;
	char db[DB_NAME_MAX];
	char coll[COLL_NAME_MAX];
	bson_t extra;		      /* projection/readConcern/$readPreference/maxTimeMS to copy */
	struct request_queue members; /* REQ_BATCHED lookups */
	int nids;		      /* sum over members (before union dedup) */
	int max_ids;  /* ids accepted, from batch_max_ids and the namespace's doc sizes */
	int nuniq;    /* ids in the merged $in (once sealed) */
	int getmores; /* sent to drain this batch */
	bool open;    /* accepting members */
	TAILQ_ENTRY(batch) open_link;
	struct event *timer; /* batch_max_wait_us with an idle backend */
	int64_t cursor_id;
	struct batch_ids_doc *found; /* data: copies owned here */
	int nfound, capfound;
	bson_value_t cluster_time; /* $clusterTime of the last reply (document) */
	bson_value_t operation_time;
	bool have_ct, have_ot;
};

/* batchSize for `want` more documents (see batch.c). */
int32_t batch_reply_size(const struct batch *b, int want);
/* An OP_MSG carrying `cmd`, with a fresh requestID in *id_out. */
struct evbuffer *batch_command_message(const bson_t *cmd, int32_t *id_out);
/* The members' id lists, for batch_ids (shallow; caller frees the array). */
const struct batch_id_list **batch_member_lists(const struct batch *b);
/* Free the batch and its request; members must already be gone. */
void batch_free(struct batch *b);
/* A member (off its batch already) becomes its creator's request again. */
void batch_member_restore(struct request *m);
/* Run a member (off its batch, restored) as a plain forwarded request. */
void batch_member_run_alone(struct request *m);
