/*
 * cauth.c — the clients' SCRAM logins and the pre-login command gate (see
 * cauth.h). The messages are checked by core/scram_msg.c; verifiers come
 * from config/users.c. Everything runs on the event loop: a login costs two
 * HMACs and a hash, no PBKDF2 (the verifier is stored).
 * This file: the SASL conversation and the login state. What a connection
 * meets before it logs in (the hello's login help, connectionStatus, the
 * command gate) is cauth_prelogin.c; the configuration checks and
 * --scram-secret are cauth_cli.c; the reads of a login (on or off, the
 * users file, who is logged in, the login's time limit) are cauth_state.c,
 * a leaf; they share cauth_int.h.
 */
#include "proxy/cauth.h"

#include <openssl/crypto.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/errors.h"
#include "core/xalloc.h"
#include "config/cfg.h"
#include "config/users.h"
#include "core/globals.h"
#include "core/request.h"
#include "core/scram_msg.h"
#include "core/stats.h"
#include "pool/pool_users.h"
#include "proxy/cauth_int.h"
#include "proxy/cauth_query.h"
#include "proxy/client.h"
#include "proxy/cursor.h"

static struct log_rl rl_failed = {.what = "failed logins"};

struct cauth_conn *cauth_conn_of(struct client *c)
{
	if (c->auth == NULL)
		c->auth = xcalloc(1, sizeof(*c->auth));
	return c->auth;
}

void cauth_client_free(struct client *c)
{
	if (c->auth == NULL)
		return;
	pool_user_put(c->auth->pu);
	if (c->auth->wait_req != NULL) { /* still waiting for auth_query */
		cq_cancel(&c->auth->wait);
		request_free(c->auth->wait_req);
		if (c->auth->wait_cmd != NULL)
			bson_destroy(c->auth->wait_cmd);
	}
	OPENSSL_cleanse(c->auth, sizeof(*c->auth));
	free(c->auth);
	c->auth = NULL;
}

static void conv_end(struct cauth_conn *a)
{
	scram_server_clear(&a->ss);
	a->in_conv = a->proof_ok = a->skip_empty = a->from_query = false;
}

/* A failed login: code 18 (one message whatever the reason: no user
 * enumeration), the reason in the log, and the connection closed after
 * auth_max_failures in a row. */
static void login_failed(struct client *c, struct request *req, const char *db, const char *user,
			 const char *why)
{
	struct cauth_conn *a = cauth_conn_of(c);

	conv_end(a);
	a->failures++;
	STAT_INC(client_auth_failures);
	client_log_rl(&rl_failed, LOG_LVL_WARNING, c,
		      "login failed for user \"%s.%s\": %s (%d in a row)", db, user, why,
		      a->failures);
	request_fail(req, MP_ERR(AUTHENTICATION_FAILED), "mongoplex: Authentication failed.", NULL);
	if (g.cfg.auth_max_failures > 0 && a->failures >= g.cfg.auth_max_failures) {
		STAT_INC(client_auth_closed);
		client_info(c, "closing after %d failed logins in a row (auth_max_failures)",
			    a->failures);
		c->closing = true;
	}
}

/* The user changes (logout, a login again), in either auth_pool_mode: the
 * old user's cursors are forgotten and killed on the backend (nobody may
 * continue them: getMore on them is answered as mongod answers an unknown
 * cursor), and its pool reference (per_user) is dropped. */
static void user_leaves(struct client *c, struct cauth_conn *a)
{
	if (a->authed)
		cursor_client_dropped(c->id, "its user logged out or logged in again");
	pool_user_put(a->pu);
	a->pu = NULL;
}

/* A login on a connection already logged in as another user: refused as
 * mongod 6+ refuses it, at the end of a conversation whose proof checked
 * out (one user per connection; logout first). The same user logging in
 * again is allowed, as in mongod. */
static bool second_user(const struct cauth_conn *a, const char *db, const char *user)
{
	return a->authed && (strcmp(a->db, db) != 0 || strcmp(a->user, user) != 0);
}

static void refuse_second_user(struct client *c, struct request *req, struct cauth_conn *a)
{
	char msg[USERS_NAME_MAX + USERS_DB_MAX + 160];
	bool other_db = strcmp(a->db, a->conv_db) != 0;

	if (!a->second_logged)
		client_info(c, "login as \"%s.%s\" refused: already authenticated as \"%s.%s\"",
			    a->conv_db, a->conv_user, a->db, a->user);
	a->second_logged = true;
	snprintf(msg, sizeof(msg), "%s%s@%s",
		 other_db ? "Client has attempted to authenticate on multiple databases. Already "
			    "authenticated as: "
			  : "Each client connection may only be authenticated once. Previously "
			    "authenticated as: ",
		 a->user, a->db);
	conv_end(a);
	if (other_db)
		request_fail(req, MP_ERR(LOCATION_5626702), msg, NULL);
	else
		request_fail(req, MP_ERR(LOCATION_5626701), msg, NULL);
}

/* per_user: the keys this login proved (ClientKey recovered from the
 * proof) become the user's backend login; wiped here after the copy. */
static void take_keys(struct client *c, struct cauth_conn *a)
{
	struct pool_user_keys k;
	size_t hl = scram_hash_len(a->ss.mech);

	user_leaves(c, a);
	if (!pool_users_enabled())
		return;
	memset(&k, 0, sizeof(k));
	k.mech = a->ss.mech;
	memcpy(k.client_key, a->ss.client_key, hl);
	memcpy(k.server_key, a->ss.secret.server_key, hl);
	memcpy(k.salt, a->ss.secret.salt, a->ss.secret.salt_len);
	k.salt_len = a->ss.secret.salt_len;
	k.iterations = a->ss.secret.iterations;
	a->pu = pool_user_get(a->conv_db, a->conv_user, &k);
	OPENSSL_cleanse(&k, sizeof(k));
}

static void logged_in(struct client *c, struct cauth_conn *a)
{
	take_keys(c, a);
	snprintf(a->db, sizeof(a->db), "%s", a->conv_db);
	snprintf(a->user, sizeof(a->user), "%s", a->conv_user);
	if (!a->authed)
		client_set_authenticated(c, true);
	a->authed = true;
	a->failures = 0;
	a->login_since_usec = 0;
	cq_logged_in(&a->wait);
	conv_end(a);
	STAT_INC(client_auth_ok);
	client_info(c, "authenticated as \"%s.%s\"", a->db, a->user);
}

const char *cauth_get_str(const bson_t *doc, const char *key)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

/* payload: binary (drivers) or a string (some shells). */
static bool get_payload(const bson_t *doc, const char **data, uint32_t *len)
{
	bson_iter_t it;
	bson_subtype_t st;
	const uint8_t *bin;

	if (!bson_iter_init_find(&it, doc, "payload"))
		return false;
	if (BSON_ITER_HOLDS_UTF8(&it)) {
		*data = bson_iter_utf8(&it, len);
		return true;
	}
	if (!BSON_ITER_HOLDS_BINARY(&it))
		return false;
	bson_iter_binary(&it, &st, len, &bin);
	*data = (const char *)bin;
	return true;
}

static bool get_skip_empty(const bson_t *doc)
{
	bson_iter_t it, opts;

	return bson_iter_init_find(&it, doc, "options") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
	       bson_iter_recurse(&it, &opts) && bson_iter_find(&opts, "skipEmptyExchange") &&
	       bson_iter_as_bool(&opts);
}

void cauth_append_sasl_reply(bson_t *doc, int32_t conv_id, bool done, const char *payload)
{
	BSON_APPEND_INT32(doc, "conversationId", conv_id);
	BSON_APPEND_BOOL(doc, "done", done);
	bson_append_binary(doc, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
			   (uint32_t)strlen(payload));
}

/* The user's entry: the users file first, then auth_query (res: what a
 * lookup this login waited for answered; wait: wait for one, else only
 * warm the cache). A cached "no such user" is final (auth_negative_ttl_ms). */
static enum start_result find_user(struct cauth_conn *a, const char *db, const char *user,
				   const struct cauth_resolved *res, bool wait,
				   const struct users_entry **e, char *why, size_t whylen)
{
	enum cq_status st;

	*e = cauth_find_user(db, user);
	if (*e != NULL || !cq_enabled())
		return START_OK;
	if (res != NULL) {
		st = res->st;
		*e = res->e;
	} else {
		st = cq_get(db, user, &a->wait, wait, e);
	}
	if (st == CQ_PENDING)
		return START_WAIT;
	if (st == CQ_ERROR || st == CQ_REFUSED) {
		snprintf(why, whylen, "auth_query lookup %s: %s",
			 st == CQ_ERROR ? "failed" : "refused",
			 st == CQ_ERROR ? (res ? res->why : "?") : a->wait.refused);
		return START_FAIL;
	}
	a->from_query = *e != NULL && res == NULL; /* a fresh answer is not refreshed */
	return START_OK;
}

/* The first step (saslStart, or the one in a hello): server-first in out.
 * START_FAIL + why when the login cannot go on; START_WAIT while auth_query
 * looks the user up (with wait, a->wait waits for it; else it only warms
 * the cache). */
enum start_result cauth_sasl_start(struct cauth_conn *a, const bson_t *cmd, const char *db,
				   const struct cauth_resolved *res, bool wait, char *out,
				   size_t outlen, char *why, size_t whylen)
{
	enum start_result r;
	struct scram_client_first cf;
	const struct users_entry *e;
	const struct scram_secret *sec;
	const char *mech_name = cauth_get_str(cmd, "mechanism"), *payload;
	enum scram_mech m;
	uint32_t len;

	conv_end(a);
	snprintf(a->conv_db, sizeof(a->conv_db), "%s", db);
	snprintf(a->conv_user, sizeof(a->conv_user), "?");
	if (mech_name == NULL || !scram_mech_parse(mech_name, &m)) {
		snprintf(why, whylen, "mechanism %s is not supported (SCRAM-SHA-256, SCRAM-SHA-1)",
			 mech_name ? mech_name : "(none)");
		return START_FAIL;
	}
	if (!get_payload(cmd, &payload, &len)) {
		snprintf(why, whylen, "saslStart without a payload");
		return START_FAIL;
	}
	if (!scram_msg_parse_first(payload, len, &cf, why, whylen))
		return START_FAIL;
	snprintf(a->conv_user, sizeof(a->conv_user), "%s", cf.user);
	if ((r = find_user(a, db, cf.user, res, wait, &e, why, whylen)) != START_OK)
		return r;
	sec = e ? users_secret(e, m) : NULL;
	if (sec == NULL) {
		snprintf(why, whylen, e ? "no %s secret for this user" : "unknown user",
			 scram_mech_name(m));
		return START_FAIL;
	}
	if (!scram_server_start(&a->ss, m, &cf, sec, NULL, out, outlen, why, whylen))
		return START_FAIL;
	a->in_conv = true;
	a->skip_empty = get_skip_empty(cmd);
	a->conv_id++;
	return START_OK;
}

static void start_resumed(struct cq_waiter *w, enum cq_status st, const struct users_entry *e,
			  const char *why);

/* A SASL step of a connection not logged in: auth_timeout_ms runs from the
 * first one (cauth_login_expired). */
void cauth_login_begins(struct cauth_conn *a)
{
	if (!a->authed && a->login_since_usec == 0)
		a->login_since_usec = g.now_usec;
}

/* Park a request until auth_query answers (wait.done runs then). */
static void wait_for_query(struct client *c, struct cauth_conn *a, struct request *req)
{
	a->client = c;
	a->wait_req = req;
}

static void cmd_sasl_start(struct client *c, struct request *req, const bson_t *body,
			   const struct cauth_resolved *res)
{
	struct cauth_conn *a = cauth_conn_of(c);
	char out[SCRAM_MSG_MAX], why[256];
	const char *db = cauth_get_str(body, "$db");
	enum start_result r;
	bson_t doc;

	a->wait.done = start_resumed;
	cauth_login_begins(a);
	r = cauth_sasl_start(a, body, db ? db : "admin", res, true, out, sizeof(out), why,
			     sizeof(why));
	if (r == START_WAIT) {
		a->wait_cmd = bson_copy(body);
		wait_for_query(c, a, req);
		return;
	}
	if (r == START_FAIL) {
		login_failed(c, req, a->conv_db, a->conv_user, why);
		return;
	}
	bson_init(&doc);
	cauth_append_sasl_reply(&doc, a->conv_id, false, out);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

/* auth_query answered a waiting saslStart: run it again with the answer. */
static void start_resumed(struct cq_waiter *w, enum cq_status st, const struct users_entry *e,
			  const char *why)
{
	struct cauth_conn *a = (struct cauth_conn *)((char *)w - offsetof(struct cauth_conn, wait));
	struct cauth_resolved res = {.st = st, .e = e, .why = why};
	struct request *req = a->wait_req;
	bson_t *cmd = a->wait_cmd;

	a->wait_req = NULL;
	a->wait_cmd = NULL;
	cmd_sasl_start(a->client, req, cmd, &res);
	bson_destroy(cmd);
}

/* A login that failed with a cached secret: its error waits for the
 * refreshed one, so the client's next attempt uses what the backend has. */
static void refresh_done(struct cq_waiter *w, enum cq_status st, const struct users_entry *e,
			 const char *why)
{
	struct cauth_conn *a = (struct cauth_conn *)((char *)w - offsetof(struct cauth_conn, wait));
	struct request *req = a->wait_req;
	char msg[400];

	(void)e;
	a->wait_req = NULL;
	snprintf(msg, sizeof(msg), "%s; cached secret refreshed from the backend: %s", a->wait_why,
		 st == CQ_FOUND	      ? "the user's secret there is now cached"
		 : st == CQ_NOT_FOUND ? "the user is no longer there"
				      : why);
	login_failed(a->client, req, a->conv_db, a->conv_user, msg);
}

static bool same_conv(const struct cauth_conn *a, const bson_t *body)
{
	bson_iter_t it;

	return a->in_conv && bson_iter_init_find(&it, body, "conversationId") &&
	       BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_int64(&it) == a->conv_id;
}

/* saslContinue: the proof (or the empty last step). */
static void cmd_sasl_continue(struct client *c, struct request *req, const bson_t *body)
{
	struct cauth_conn *a = cauth_conn_of(c);
	char out[SCRAM_MSG_MAX], why[256];
	const char *payload = "";
	uint32_t len = 0;
	bool done;
	bson_t doc;

	if (!same_conv(a, body) || !get_payload(body, &payload, &len)) {
		login_failed(c, req, a->conv_db, a->conv_user,
			     "saslContinue without a matching saslStart or payload");
		return;
	}
	out[0] = '\0';
	if (!a->proof_ok &&
	    !scram_server_finish(&a->ss, payload, len, out, sizeof(out), why, sizeof(why))) {
		if (a->from_query) {
			a->from_query = false;
			a->wait.done = refresh_done;
			if (cq_refresh(a->conv_db, a->conv_user, &a->wait) == CQ_PENDING) {
				snprintf(a->wait_why, sizeof(a->wait_why), "%s", why);
				wait_for_query(c, a, req);
				return;
			}
		}
		login_failed(c, req, a->conv_db, a->conv_user, why);
		return;
	}
	done = a->proof_ok || a->skip_empty;
	if (done && second_user(a, a->conv_db, a->conv_user)) {
		refuse_second_user(c, req, a); /* as mongod: once the proof checked out */
		return;
	}
	a->proof_ok = true;
	bson_init(&doc);
	cauth_append_sasl_reply(&doc, a->conv_id, done, out);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	if (done)
		logged_in(c, a);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

static void reply_ok(struct request *req)
{
	bson_t doc;

	bson_init(&doc);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

void cauth_command(struct client *c, struct request *req, const bson_t *body)
{
	if (!cauth_enabled()) {
		request_fail(req, MP_ERR(AUTHENTICATION_FAILED),
			     "mongoplex: client authentication is off (auth_mode = none); connect "
			     "without credentials (the proxy authenticates to the backend itself)",
			     NULL);
		return;
	}
	if (c->auth != NULL && c->auth->wait_req != NULL) {
		request_fail(req, MP_ERR(AUTHENTICATION_FAILED),
			     "mongoplex: a login of this connection is still in progress", NULL);
		return;
	}
	if (strcmp(req->cmd, "saslStart") == 0) {
		cmd_sasl_start(c, req, body, NULL);
	} else if (strcmp(req->cmd, "saslContinue") == 0) {
		cmd_sasl_continue(c, req, body);
	} else if (strcmp(req->cmd, "logout") == 0) {
		if (c->auth != NULL && c->auth->authed)
			client_info(c, "logout of \"%s.%s\"", c->auth->db, c->auth->user);
		if (c->auth != NULL) {
			conv_end(c->auth);
			user_leaves(c, c->auth);
			if (c->auth->authed)
				client_set_authenticated(c, false);
			c->auth->authed = false;
		}
		reply_ok(req);
	} else {
		login_failed(c, req, "?", "?", "only SCRAM-SHA-256 and SCRAM-SHA-1 are supported");
	}
}
