/*
 * fake_pin.c — connection-bound cursors and transactions for the fake
 * backend (fake_backend.c), as a load balancer's backends behave: a cursor
 * or a transaction exists only on the backend connection that opened it.
 *
 *   {find: "pin…"}        cursor id S*1000000+k on connection S; one document
 *                         per batch, FAKE_PIN_DOCS in all; every doc {_id, conn}
 *   … limit: 1 / singleBatch  one document, cursor id 0 (counted: closed)
 *   {find: "pinall…"}     all FAKE_PIN_DOCS documents, cursor id 0 (counted)
 *   getMore on S          the next document; id 0 with the last
 *   getMore elsewhere     43 CursorNotFound (counted: wrong connection)
 *   killCursors           cursorsKilled on S, cursorsNotFound elsewhere
 *   startTransaction      the (lsid, txnNumber) belongs to this connection
 *   txn command elsewhere 251 NoSuchTransaction (counted)
 *   commit/abort          end the transaction (counted)
 *
 * Rules: called from the fake's thread only; the counters are read by the
 * test's main thread through fake_pin_stats (under the lock).
 */
#include "fake_pin.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAX_CURSORS 512
#define MAX_TXNS    128

struct fcursor {
	int64_t id;
	int serial, next;
};

struct ftxn {
	uint8_t lsid[16];
	int64_t txn;
	int serial;
	bool live;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fcursor cursors[MAX_CURSORS];
static struct ftxn txns[MAX_TXNS];
static int next_cursor;
static struct fake_pin_stats st;

void fake_pin_stats(struct fake_pin_stats *out)
{
	pthread_mutex_lock(&mu);
	*out = st;
	pthread_mutex_unlock(&mu);
}

static void add_doc(bson_t *arr, uint32_t i, int k, int serial)
{
	bson_t d;
	char key[16];
	const char *kp;

	bson_uint32_to_string(i, &kp, key, sizeof(key));
	bson_append_document_begin(arr, kp, -1, &d);
	BSON_APPEND_INT32(&d, "_id", k);
	BSON_APPEND_INT32(&d, "conn", serial);
	bson_append_document_end(arr, &d);
}

/* A cursor reply with documents k .. k + ndocs - 1. */
static void cursor_reply(bson_t *out, const char *field, int64_t id, const char *ns, int k,
			 int ndocs, int serial)
{
	bson_t cur, arr;

	BSON_APPEND_DOCUMENT_BEGIN(out, "cursor", &cur);
	BSON_APPEND_ARRAY_BEGIN(&cur, field, &arr);
	for (int i = 0; i < ndocs; i++)
		add_doc(&arr, (uint32_t)i, k + i, serial);
	bson_append_array_end(&cur, &arr);
	BSON_APPEND_INT64(&cur, "id", id);
	BSON_APPEND_UTF8(&cur, "ns", ns);
	bson_append_document_end(out, &cur);
}

static void error_reply(bson_t *out, int code, const char *name, const char *msg)
{
	BSON_APPEND_DOUBLE(out, "ok", 0.0);
	BSON_APPEND_INT32(out, "code", code);
	BSON_APPEND_UTF8(out, "codeName", name);
	BSON_APPEND_UTF8(out, "errmsg", msg);
}

static void ns_of(const bson_t *cmd, const char *coll, char *ns, size_t len)
{
	bson_iter_t it;
	const char *db = "test";

	if (bson_iter_init_find(&it, cmd, "$db") && BSON_ITER_HOLDS_UTF8(&it))
		db = bson_iter_utf8(&it, NULL);
	snprintf(ns, len, "%s.%s", db, coll);
}

/* A find whose first batch is its whole result: limit 1 / singleBatch (one
 * document) or a "pinall…" collection (all of them). */
static bool find_closed(const bson_t *cmd, const char *coll, int serial, bson_t *out)
{
	bson_iter_t it;
	char ns[200];
	int n = 0;

	if ((bson_iter_init_find(&it, cmd, "limit") && bson_iter_as_int64(&it) == 1) ||
	    (bson_iter_init_find(&it, cmd, "singleBatch") && bson_iter_as_bool(&it)))
		n = 1;
	else if (strncmp(coll, "pinall", 6) == 0)
		n = FAKE_PIN_DOCS;
	else
		return false;
	ns_of(cmd, coll, ns, sizeof(ns));
	st.finds++;
	st.finds_closed++;
	cursor_reply(out, "firstBatch", 0, ns, 0, n, serial);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
	return true;
}

static void do_find(const bson_t *cmd, const char *coll, int serial, bson_t *out)
{
	struct fcursor *c;
	char ns[200];

	if (find_closed(cmd, coll, serial, out))
		return;
	c = &cursors[next_cursor++ % MAX_CURSORS];
	ns_of(cmd, coll, ns, sizeof(ns));
	c->id = (int64_t)serial * 1000000 + next_cursor;
	c->serial = serial;
	c->next = 1;
	st.finds++;
	cursor_reply(out, "firstBatch", c->id, ns, 0, 1, serial);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
}

static struct fcursor *find_cursor(int64_t id)
{
	for (int i = 0; i < MAX_CURSORS; i++)
		if (cursors[i].id == id && id != 0)
			return &cursors[i];
	return NULL;
}

static void do_getmore(const bson_t *cmd, int64_t id, int serial, bson_t *out)
{
	struct fcursor *c = find_cursor(id);
	bson_iter_t it;
	char ns[200];
	int k;

	if (c == NULL || c->serial != serial) {
		if (c != NULL)
			st.getmores_wrong_conn++;
		else
			st.getmores_unknown++;
		error_reply(out, 43, "CursorNotFound", "cursor not found on this connection");
		return;
	}
	st.getmores_ok++;
	k = c->next++;
	if (c->next >= FAKE_PIN_DOCS)
		c->id = 0;
	ns_of(cmd,
	      bson_iter_init_find(&it, cmd, "collection") && BSON_ITER_HOLDS_UTF8(&it)
		  ? bson_iter_utf8(&it, NULL)
		  : "c",
	      ns, sizeof(ns));
	cursor_reply(out, "nextBatch", c->next >= FAKE_PIN_DOCS ? 0 : id, ns, k, 1, serial);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
	if (c->next >= FAKE_PIN_DOCS)
		st.exhausted++;
}

static void append_ids(bson_t *out, const char *key, const int64_t *ids, int n)
{
	bson_t arr;
	char kb[16];
	const char *k;

	BSON_APPEND_ARRAY_BEGIN(out, key, &arr);
	for (int i = 0; i < n; i++) {
		bson_uint32_to_string((uint32_t)i, &k, kb, sizeof(kb));
		BSON_APPEND_INT64(&arr, k, ids[i]);
	}
	bson_append_array_end(out, &arr);
}

static void do_kill(const bson_t *cmd, int serial, bson_t *out)
{
	int64_t killed[64], notfound[64];
	int nk = 0, nn = 0;
	bson_iter_t it, arr;

	if (bson_iter_init_find(&it, cmd, "cursors") && bson_iter_recurse(&it, &arr))
		while (bson_iter_next(&arr) && nk < 64 && nn < 64) {
			int64_t id = bson_iter_as_int64(&arr);
			struct fcursor *c = find_cursor(id);

			if (c != NULL && c->serial == serial) {
				c->id = 0;
				killed[nk++] = id;
				st.kills_ok++;
			} else {
				notfound[nn++] = id;
				st.kills_wrong_conn += c != NULL;
			}
		}
	append_ids(out, "cursorsKilled", killed, nk);
	append_ids(out, "cursorsNotFound", notfound, nn);
	append_ids(out, "cursorsAlive", NULL, 0);
	append_ids(out, "cursorsUnknown", NULL, 0);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
}

static bool read_lsid(const bson_t *cmd, uint8_t out[16])
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	bson_subtype_t sub;

	if (!bson_iter_init(&it, cmd) || !bson_iter_find_descendant(&it, "lsid.id", &it) ||
	    !BSON_ITER_HOLDS_BINARY(&it))
		return false;
	bson_iter_binary(&it, &sub, &len, &data);
	memset(out, 0, 16);
	memcpy(out, data, len < 16 ? len : 16);
	return true;
}

static struct ftxn *find_txn(const uint8_t lsid[16], int64_t txn)
{
	for (int i = 0; i < MAX_TXNS; i++)
		if (txns[i].live && txns[i].txn == txn && memcmp(txns[i].lsid, lsid, 16) == 0)
			return &txns[i];
	return NULL;
}

/* A command with txnNumber and autocommit: false. */
static void do_txn(const bson_t *cmd, const char *name, int serial, bson_t *out)
{
	uint8_t lsid[16];
	bson_iter_t it;
	int64_t txn = 0;
	struct ftxn *t;

	if (bson_iter_init_find(&it, cmd, "txnNumber"))
		txn = bson_iter_as_int64(&it);
	if (!read_lsid(cmd, lsid)) {
		error_reply(out, 2, "BadValue", "transaction without lsid");
		return;
	}
	if (bson_iter_init_find(&it, cmd, "startTransaction") && bson_iter_as_bool(&it)) {
		for (int i = 0; i < MAX_TXNS; i++)
			if (!txns[i].live) {
				txns[i] = (struct ftxn){.txn = txn, .serial = serial, .live = true};
				memcpy(txns[i].lsid, lsid, 16);
				break;
			}
		st.txn_started++;
		BSON_APPEND_INT32(out, "n", 1);
		BSON_APPEND_INT32(out, "conn", serial);
		BSON_APPEND_DOUBLE(out, "ok", 1.0);
		return;
	}
	t = find_txn(lsid, txn);
	if (t == NULL || t->serial != serial) {
		st.txn_wrong_conn++;
		error_reply(out, 251, "NoSuchTransaction",
			    "no such transaction on this connection");
		return;
	}
	st.txn_ops_ok++;
	if (strcmp(name, "commitTransaction") == 0 || strcmp(name, "abortTransaction") == 0) {
		t->live = false;
		if (name[0] == 'c')
			st.txn_commits++;
		else
			st.txn_aborts++;
	} else {
		BSON_APPEND_INT32(out, "n", 1);
	}
	BSON_APPEND_INT32(out, "conn", serial);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
}

static bool in_txn(const bson_t *cmd)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, cmd, "txnNumber") &&
	       bson_iter_init_find(&it, cmd, "autocommit") && BSON_ITER_HOLDS_BOOL(&it) &&
	       !bson_iter_bool(&it);
}

bool fake_pin_reply(int serial, const bson_t *cmd, const char *name, const char *coll, bson_t *out)
{
	bson_iter_t it;
	bool handled = true;

	pthread_mutex_lock(&mu);
	if (in_txn(cmd))
		do_txn(cmd, name, serial, out);
	else if (strcmp(name, "find") == 0 && coll != NULL && strncmp(coll, "pin", 3) == 0)
		do_find(cmd, coll, serial, out);
	else if (strcasecmp(name, "getMore") == 0 && bson_iter_init(&it, cmd) &&
		 bson_iter_next(&it) && find_cursor(bson_iter_as_int64(&it)) != NULL)
		do_getmore(cmd, bson_iter_as_int64(&it), serial, out);
	else if (strcmp(name, "killCursors") == 0 && coll != NULL && strncmp(coll, "pin", 3) == 0)
		do_kill(cmd, serial, out);
	else
		handled = false;
	pthread_mutex_unlock(&mu);
	return handled;
}
