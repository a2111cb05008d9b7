/*
 * router.c — command classification. Only the top-level keys of the body are
 * read: the command name (first key), $db, and the session fields
 * (core/session.h: lsid, txnNumber, startTransaction, autocommit,
 * $readPreference), parsed here once for the whole proxy.
 */
#include "proxy/router.h"

#include "core/bsonval.h"

#include <string.h>
#include <strings.h>

static const char *const auth_cmds[] = {"saslStart", "saslContinue", "authenticate",
					"logout",    "getnonce",     NULL};

/* Commands that change per-connection server state, which transaction-level
 * pooling cannot honour; refusing them is clearer than misbehaving. */
static const char *const refused_cmds[] = {"exhaust", NULL};

static bool in_list(const char *const *list, const char *name)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

static enum route route_for(const char *cmd)
{
	if (strcmp(cmd, "find") == 0) /* the common case: none of the names below */
		return ROUTE_FORWARD;
	if (strcmp(cmd, "hello") == 0 || strcasecmp(cmd, "isMaster") == 0)
		return ROUTE_HELLO;
	if (strcmp(cmd, "ping") == 0)
		return ROUTE_PING;
	if (strncmp(cmd, "mongoplex", 9) == 0) /* the proxy's own (proxy/admin.h) */
		return strcmp(cmd, "mongoplexStats") == 0 ? ROUTE_STATS : ROUTE_ADMIN;
	if (in_list(auth_cmds, cmd))
		return ROUTE_AUTH;
	if (in_list(refused_cmds, cmd))
		return ROUTE_REFUSE;
	return ROUTE_FORWARD;
}

static uint32_t rd_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return BSON_UINT32_FROM_LE(v);
}

/* lsid's first `id`, binary subtype 4 of 16 bytes, is the session's UUID
 * (the lsid document lies inside the validated body). */
static void read_lsid_uuid(struct req_session *s)
{
	struct bsonval_it sub;

	bsonval_it_init(&sub, s->lsid_doc);
	while (bsonval_it_next(&sub)) {
		if (!BSONVAL_KEY_IS(&sub, "id"))
			continue;
		/* int32 length, subtype byte, the bytes */
		if (sub.type == BSON_TYPE_BINARY && sub.vlen == 4 + 1 + 16 &&
		    rd_le32(sub.value) == 16 && sub.value[4] == BSON_SUBTYPE_UUID) {
			memcpy(s->lsid_uuid, sub.value + 5, 16);
			s->has_lsid_uuid = true;
		}
		return; /* the first id counts */
	}
}

enum { K_LSID = 1, K_TXN = 2, K_START = 4, K_AUTOCOMMIT = 8, K_READPREF = 16 };

/* The session keys, first occurrence of each (see core/session.h): one
 * key compare (length, then bytes) for keys starting with l, t, s, a or $. */
static void read_session_key(const struct bsonval_it *it, struct req_session *s, unsigned *seen)
{
	const char *k = it->key;
	bool integral; /* a fractional txnNumber is taken truncated, as before */

	switch (k[0]) {
	case 'l':
		if (!BSONVAL_KEY_IS(it, "lsid") || (*seen & K_LSID))
			return;
		*seen |= K_LSID;
		if (it->type == BSON_TYPE_DOCUMENT) {
			s->has_lsid = true;
			s->lsid_doc = it->value;
			s->lsid_len = (uint32_t)it->vlen;
		}
		return;
	case 't':
		if (!BSONVAL_KEY_IS(it, "txnNumber") || (*seen & K_TXN))
			return;
		*seen |= K_TXN;
		s->has_txn = true;
		s->txn_numeric = bsonval_int64(it, &s->txn_number, &integral);
		return;
	case 's':
		if (!BSONVAL_KEY_IS(it, "startTransaction") || (*seen & K_START))
			return;
		*seen |= K_START;
		s->start_txn = bsonval_truthy(it);
		return;
	case 'a':
		if (!BSONVAL_KEY_IS(it, "autocommit") || (*seen & K_AUTOCOMMIT))
			return;
		*seen |= K_AUTOCOMMIT;
		s->autocommit_false = it->type == BSON_TYPE_BOOL && it->value[0] == 0;
		return;
	case '$':
		if (!BSONVAL_KEY_IS(it, "$readPreference") || (*seen & K_READPREF))
			return;
		*seen |= K_READPREF;
		if (it->type == BSON_TYPE_DOCUMENT) {
			s->read_pref_doc = it->value;
			s->read_pref_len = (uint32_t)it->vlen;
		}
		return;
	default:
		return;
	}
}

bool router_classify(const bson_t *body, struct route_info *ri)
{
	struct bsonval_it it; /* the body was validated (wire_parse_msg) */
	struct req_session *s = &ri->session;
	unsigned seen = 0;
	size_t klen;

	memset(ri, 0, sizeof(*ri));
	bsonval_it_init(&it, bson_get_data(body));
	if (!bsonval_it_next(&it)) {
		ri->route = ROUTE_REFUSE;
		ri->refuse_msg = "empty command document";
		return false;
	}
	klen = bsonval_key_len(&it); /* truncated, as bson_strncpy did */
	klen = klen < sizeof(ri->cmd) - 1 ? klen : sizeof(ri->cmd) - 1;
	memcpy(ri->cmd, it.key, klen);
	ri->cmd[klen] = '\0';
	do {
		if (BSONVAL_KEY_IS(&it, "$db")) {
			if (it.type == BSON_TYPE_UTF8)
				ri->db = (const char *)it.value + 4;
		} else {
			read_session_key(&it, s, &seen);
		}
	} while (bsonval_it_next(&it));
	/* The session's UUID routes transactions only (select.c's member pin):
	 * read for commands with a txnNumber. */
	if (s->has_lsid && s->has_txn)
		read_lsid_uuid(s);

	ri->route = route_for(ri->cmd);
	/* Any case: some servers (mongo-java-server) match command names so. */
	ri->is_find = strcmp(ri->cmd, "find") == 0;
	ri->cursor_op = !ri->is_find && (strcasecmp(ri->cmd, "getMore") == 0 ||
					 strcasecmp(ri->cmd, "killCursors") == 0);
	ri->in_txn = req_session_in_txn(s);
	ri->retryable_write = s->has_txn && !s->autocommit_false;
	if (ri->route == ROUTE_REFUSE)
		ri->refuse_msg = "command not supported through mongoplex";
	if (ri->db == NULL) {
		ri->route = ROUTE_REFUSE;
		ri->refuse_msg = "OP_MSG requests require a $db argument";
		return false;
	}
	return true;
}
