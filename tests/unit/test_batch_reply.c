/*
 * test_batch_reply.c — batch_ids_reply (pool/batch_split.c), the directly
 * encoded reply a batch member receives: byte for byte what libbson builds
 * with the appends answer_member used before (cursor.firstBatch, id, ns, ok),
 * for 0, 1 and many documents (two- and three-digit array keys).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pool/batch_ids.h"

/* The reference: the same reply through libbson's appends. */
static void reference(const struct batch_ids_doc *docs, const int *idx, int n, const char *db,
		      const char *coll, bson_t *reply)
{
	bson_t cursor, arr, doc;
	char key[16], ns[400];
	const char *k;

	bson_init(reply);
	BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
	BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
	for (int i = 0; i < n; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		cr_assert(bson_init_static(&doc, docs[idx[i]].data, docs[idx[i]].len));
		bson_append_document(&arr, k, -1, &doc);
	}
	bson_append_array_end(&cursor, &arr);
	BSON_APPEND_INT64(&cursor, "id", 0);
	snprintf(ns, sizeof(ns), "%s.%s", db, coll);
	BSON_APPEND_UTF8(&cursor, "ns", ns);
	bson_append_document_end(reply, &cursor);
	BSON_APPEND_DOUBLE(reply, "ok", 1.0);
}

/* ndocs documents {_id: i, name: "doc i"}; the reply holds them in reverse. */
static void check(int ndocs, const char *db, const char *coll)
{
	bson_t *src = calloc((size_t)ndocs + 1, sizeof(bson_t));
	struct batch_ids_doc *docs = calloc((size_t)ndocs + 1, sizeof(*docs));
	int *idx = calloc((size_t)ndocs + 1, sizeof(int));
	bson_t ref;
	uint32_t len = 0;
	uint8_t *got;

	for (int i = 0; i < ndocs; i++) {
		char name[32];

		snprintf(name, sizeof(name), "doc %d", i);
		bson_init(&src[i]);
		BSON_APPEND_INT32(&src[i], "_id", i);
		BSON_APPEND_UTF8(&src[i], "name", name);
		cr_assert(batch_ids_doc_init(&docs[i], bson_get_data(&src[i]), src[i].len));
		idx[i] = ndocs - 1 - i;
	}
	reference(docs, idx, ndocs, db, coll, &ref);
	got = batch_ids_reply(docs, idx, ndocs, db, coll, &len);
	cr_assert_eq(len, ref.len, "%d docs: length %u, libbson %u", ndocs, len, ref.len);
	cr_assert(memcmp(got, bson_get_data(&ref), len) == 0, "%d docs: bytes differ", ndocs);
	free(got);
	bson_destroy(&ref);
	for (int i = 0; i < ndocs; i++)
		bson_destroy(&src[i]);
	free(src);
	free(docs);
	free(idx);
}

Test(batch_reply, no_documents)
{
	check(0, "bench", "docs");
}

Test(batch_reply, one_document)
{
	check(1, "bench", "docs");
}

Test(batch_reply, many_documents_and_long_names)
{
	char coll[256];

	memset(coll, 'c', sizeof(coll) - 1);
	coll[sizeof(coll) - 1] = '\0';
	check(150, "a_database_name", coll);
}
