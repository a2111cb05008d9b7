/*
 * session.h — a request's session fields (lsid, txnNumber, startTransaction,
 * autocommit, $readPreference), read once from the command body by the
 * router (proxy/router.c, router_classify) and kept on the request
 * (req->route->session, pool/route.h). pool/select.c and pool/pin.c read
 * this, never the body.
 *
 * Rules (hostile shapes): for each key the FIRST occurrence counts (what
 * bson_iter_init_find gave the readers before); a key of the wrong type is
 * as if absent, except that txnNumber of any type still makes has_txn (the
 * router's classification: in a transaction / a retryable write) with
 * txn_numeric false. lsid_uuid is read only for a command with a
 * txnNumber (it routes transactions and nothing else: pool/select.c), and
 * set only for an lsid document whose first `id` is binary subtype 4 of
 * exactly 16 bytes.
 *
 * The two document pointers point into the message body: valid only while
 * the request is being routed (client_msg.c forward()); whoever keeps
 * either copies it (pin.c its pin note's lsid, select.c its read_pref).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct req_session {
	bool has_lsid;	       /* lsid is a document */
	bool has_lsid_uuid;    /* ... whose id is a UUID (binary subtype 4, 16 bytes) */
	bool has_txn;	       /* txnNumber present (any type) */
	bool txn_numeric;      /* ... and an int32, int64 or an int64-ranged double */
	bool start_txn;	       /* startTransaction, truthy as bson_iter_as_bool */
	bool autocommit_false; /* autocommit: false (a boolean) */
	uint8_t lsid_uuid[16];
	uint32_t lsid_len; /* the lsid document: bytes at lsid_doc */
	uint32_t read_pref_len;
	int64_t txn_number;	      /* txn_numeric: its value */
	const uint8_t *lsid_doc;      /* has_lsid: into the body (routing only) */
	const uint8_t *read_pref_doc; /* $readPreference document, NULL: none */
};

/* In a transaction: txnNumber with autocommit: false. */
static inline bool req_session_in_txn(const struct req_session *s)
{
	return s->has_txn && s->autocommit_false;
}
