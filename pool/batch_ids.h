/*
 * batch_ids.h — the batcher's pure logic, with no event loop, pool or server
 * (only libbson), so it can be unit-tested and fuzzed: which finds may be
 * merged (batch_ids_classify), the exact MongoDB comparison of _id values
 * (batch_ids_compare), the union of the members' ids sent in the merged
 * $in, and the split of the merged reply's documents back to the members.
 *
 * The rule it exists for: a member of a batch only ever receives documents
 * whose _id equals one of its own ids under MongoDB's comparison, in _id
 * order. A value this unit cannot compare exactly is never batched, and a
 * merged reply it cannot split exactly (see batch_ids_split_ok) is thrown
 * away by the caller, who re-runs every member alone.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* Why a find is not batchable. NULL: batchable. */
const char *batch_ids_classify(const bson_t *find_cmd);

/* A value the batcher compares exactly: int32, int64, double (not NaN, in
 * [-2^63, 2^63): beyond, backends that convert to int64 saturate),
 * decimal128 integers of magnitude at most 2^53, string, ObjectId, bool,
 * date, timestamp, binary, minKey, maxKey. */
bool batch_ids_value_ok(const bson_value_t *v);

/* MongoDB comparison of two values batch_ids_value_ok accepts: <0, 0, >0.
 * Numbers compare by exact value across int32/int64/double/decimal128
 * (-0.0 == 0); other types by type order, then bytes. */
int batch_ids_compare(const bson_value_t *a, const bson_value_t *b);

/* One requester's ids: sorted, unique under MongoDB equality. Owns copies
 * when made by batch_ids_list_from_find. */
struct batch_id_list {
	bson_value_t *ids;
	int n;
};

/* The ids of a find batch_ids_classify accepted (copies, sorted, unique). */
void batch_ids_list_from_find(const bson_t *find_cmd, struct batch_id_list *out);
void batch_ids_list_free(struct batch_id_list *l);

/* The number of ids of a find batch_ids_classify accepted (its $in's
 * length, or 1), its size for the adaptive limit (pool/limit.h). */
int batch_ids_count(const bson_t *find_cmd);

/* The ids of the merged $in: every member's ids, sorted, duplicates of the
 * same type and value removed (shallow: the lists keep ownership). `out`
 * has room for the sum of the lists' sizes; returns the count. */
int batch_ids_union(const struct batch_id_list *const *lists, int nlists, bson_value_t *out);

/* A document of a merged reply and its _id (a view into `data`). */
struct batch_ids_doc {
	const uint8_t *data;
	uint32_t len;
	bson_value_t id;
};

/* Read the _id of a reply document into d (data/len set); false: no _id. */
bool batch_ids_doc_init(struct batch_ids_doc *d, const uint8_t *data, uint32_t len)
    __attribute__((warn_unused_result));

/* Sort the reply's documents by _id and decide whether they can be split
 * exactly among the lists: every _id batch_ids_value_ok, no two equal,
 * every document equal to some list's id. False: the caller must re-run
 * every member alone. */
bool batch_ids_split_ok(struct batch_ids_doc *docs, int ndocs,
			const struct batch_id_list *const *lists, int nlists)
    __attribute__((warn_unused_result));

/* After batch_ids_split_ok: the indices (ascending _id) of the documents
 * that go to `l`, at most l->n of them, into `out`; returns the count. */
int batch_ids_docs_for(const struct batch_ids_doc *docs, int ndocs, const struct batch_id_list *l,
		       int *out);

/* The reply {cursor: {firstBatch: [docs[idx[0]], ...], id: 0L, ns: "db.coll"},
 * ok: 1.0} for `n` documents, encoded directly (the bytes libbson builds for
 * the same appends, without its per-append cost). Returns a malloc'd BSON
 * document and its length in *len. */
uint8_t *batch_ids_reply(const struct batch_ids_doc *docs, const int *idx, int n, const char *db,
			 const char *coll, uint32_t *len);
