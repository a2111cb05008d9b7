// FUZZ_SOURCES: proxy/router.c core/bsonval.c
// FUZZ_ARGS: -max_len=4096
/*
 * fuzz_router.c — libFuzzer target for the router's one parse of a
 * command's session fields (proxy/router.c router_classify, core/session.h):
 * lsid (its id's UUID), txnNumber, startTransaction, autocommit,
 * $readPreference, of every type, nested garbage and duplicates.
 *
 * Input: a document; its length header and final NUL are fixed up, then it
 * must pass bsonval_check (as wire.c validates every body before the router
 * sees it). Checked against libbson's first-occurrence reading
 * (bson_iter_init_find, what select.c and pin.c did before):
 *  - has_lsid <=> the first lsid is a document; lsid_doc/lsid_len are that
 *    document's bytes, inside the body; has_lsid_uuid <=> txnNumber is
 *    present and the lsid's first id is binary subtype 4 of 16 bytes, and
 *    lsid_uuid are those bytes;
 *  - has_txn <=> txnNumber present; txn_numeric => it holds a number and
 *    txn_number == bson_iter_as_int64 of it;
 *  - start_txn == bson_iter_as_bool of the first startTransaction;
 *  - $readPreference: the first one's bytes when it is a document;
 *  - no sanitizer report.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "core/bsonval.h"
#include "proxy/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_doc(const bson_t *body, const char *key, const uint8_t *got, uint32_t got_len)
{
	bson_iter_t it;
	const uint8_t *d;
	uint32_t len;

	if (!bson_iter_init_find(&it, body, key) || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
		if (got != NULL)
			abort();
		return;
	}
	bson_iter_document(&it, &len, &d);
	if (got != d || got_len != len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *doc;
	size_t err_off;
	bson_t body;
	bson_iter_t it, sub;
	struct route_info ri;
	const struct req_session *s = &ri.session;

	if (size < 5 || size > 1 << 20)
		return 0;
	doc = malloc(size);
	memcpy(doc, data, size);
	doc[0] = (uint8_t)size;
	doc[1] = (uint8_t)(size >> 8);
	doc[2] = (uint8_t)(size >> 16);
	doc[3] = 0;
	doc[size - 1] = 0;
	if (bsonval_check(doc, size, 200, &err_off) != BSONVAL_OK ||
	    !bson_init_static(&body, doc, size)) {
		free(doc);
		return 0;
	}
	(void)router_classify(&body, &ri);

	check_doc(&body, "lsid", s->lsid_doc, s->lsid_len);
	if (s->has_lsid != (s->lsid_doc != NULL))
		abort();
	if (s->has_lsid && s->has_txn) {
		bool uuid = false;
		bson_iter_init_find(&it, &body, "lsid");
		if (bson_iter_recurse(&it, &sub) && bson_iter_find(&sub, "id") &&
		    BSON_ITER_HOLDS_BINARY(&sub)) {
			bson_subtype_t st;
			uint32_t len;
			const uint8_t *b;

			bson_iter_binary(&sub, &st, &len, &b);
			uuid = st == BSON_SUBTYPE_UUID && len == 16;
			if (uuid && memcmp(b, s->lsid_uuid, 16) != 0)
				abort();
		}
		if (uuid != s->has_lsid_uuid)
			abort();
	} else if (s->has_lsid_uuid) {
		abort();
	}
	if (s->has_txn != bson_iter_init_find(&it, &body, "txnNumber"))
		abort();
	if (s->txn_numeric &&
	    (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) != s->txn_number))
		abort();
	if (s->start_txn !=
	    (bson_iter_init_find(&it, &body, "startTransaction") && bson_iter_as_bool(&it)))
		abort();
	check_doc(&body, "$readPreference", s->read_pref_doc, s->read_pref_len);
	if (ri.in_txn != (s->has_txn && s->autocommit_false))
		abort();
	free(doc);
	return 0;
}
