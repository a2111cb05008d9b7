/*
 * auth.c — backend credentials and the nonblocking SCRAM login of each
 * pooled backend connection (see auth.h for the flow). Commands are sent on
 * the connection's own stream buffer while it is SV_CONNECTING; the server
 * becomes idle only once auth_on_reply returns AUTH_DONE.
 */
#include "pool/auth.h"

#include <mongoc/mongoc.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config/secret.h"
#include "core/xalloc.h"
#include "pool/pool.h"
#include "pool/pool_users.h"
#include "pool/server.h"
#include "core/globals.h"
#include "core/stats.h"
#include "core/wire.h"

/* One connection's login. Rules: phase only advances; the scram state
 * holds secrets and is wiped by auth_conv_free. */
struct auth_conv {
	enum { PH_HELLO, PH_START, PH_CONTINUE, PH_EMPTY } phase;
	struct backend_info bi; /* from the hello, handed over when done */
	struct scram sc;
	bool speculative; /* a saslStart rode in the hello */
	bson_value_t conversation_id;
	bool have_conversation_id;
	/* per_user pools: log in as this user with its keys (no password);
	 * NULL: the proxy's own credentials. Taken from the server's pool. */
	const struct pool_user *user;
};

static struct auth_cred cred; /* the credentials in force */
static char dns_source[256];  /* mongodb+srv://: the resolved authSource */

void auth_cred_clear(struct auth_cred *c)
{
	OPENSSL_cleanse(c, sizeof(*c));
}

/* What each mechanism mongoplex does not speak is, for the refusal. */
static const char *mech_kind(const char *mech)
{
	static const char *const kinds[][2] = {
	    {"MONGODB-X509", "X.509 client-certificate authentication"},
	    {"PLAIN", "LDAP (SASL PLAIN) authentication"},
	    {"GSSAPI", "Kerberos (GSSAPI) authentication"},
	    {"MONGODB-AWS", "AWS IAM authentication"},
	    {"MONGODB-OIDC", "OIDC authentication"},
	    {"MONGODB-CR", "MONGODB-CR (removed in MongoDB 4.0)"},
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcasecmp(mech, kinds[i][0]) == 0)
			return kinds[i][1];
	return "an unknown mechanism";
}

static bool unsupported_mech(const char *mech, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "mongoplex: authMechanism %s is not supported; use SCRAM-SHA-256 or "
		 "SCRAM-SHA-1 (%s is %s)",
		 mech, mech, mech_kind(mech));
	return false;
}

static bool copy_field(char *dst, size_t cap, const char *src, const char *what, char *err,
		       size_t errlen)
{
	if (strlen(src) >= cap) {
		snprintf(err, errlen, "backend_uri: %s too long (at most %zu bytes)", what,
			 cap - 1);
		return false;
	}
	memcpy(dst, src, strlen(src) + 1);
	return true;
}

/* The password: from the URI or from the password file, not both. */
static bool load_password(const mongoc_uri_t *u, const char *password_file, struct auth_cred *c,
			  char *warn, size_t warnlen, char *err, size_t errlen)
{
	const char *pw = mongoc_uri_get_password(u);

	if (password_file != NULL && password_file[0] != '\0') {
		if (pw != NULL) {
			snprintf(err, errlen,
				 "backend_uri has a password and backend_password_file is set: "
				 "use one of them");
			return false;
		}
		c->from_file = true;
		return secret_read_file(password_file, c->password, sizeof(c->password), warn,
					warnlen, err, errlen);
	}
	if (pw == NULL) {
		snprintf(err, errlen,
			 "backend_uri names user \"%s\" but no password (put it in the URI or in "
			 "backend_password_file)",
			 c->user);
		return false;
	}
	return copy_field(c->password, sizeof(c->password), pw, "password", err, errlen);
}

static bool load_from_uri(const mongoc_uri_t *u, const char *password_file, struct auth_cred *c,
			  char *warn, size_t warnlen, char *err, size_t errlen)
{
	const char *mech = mongoc_uri_get_auth_mechanism(u);
	const char *user = mongoc_uri_get_username(u);

	if (mech != NULL) {
		if (!scram_mech_parse(mech, &c->mech))
			return unsupported_mech(mech, err, errlen);
		c->mech_given = true;
	}
	if (user == NULL) {
		if (password_file != NULL && password_file[0] != '\0') {
			snprintf(err, errlen,
				 "backend_password_file is set but backend_uri names no user");
			return false;
		}
		if (mech != NULL) {
			snprintf(err, errlen, "backend_uri: authMechanism %s needs a username",
				 mech);
			return false;
		}
		return true;
	}
	c->enabled = true;
	return copy_field(c->user, sizeof(c->user), user, "username", err, errlen) &&
	       copy_field(c->source, sizeof(c->source), mongoc_uri_get_auth_source(u), "authSource",
			  err, errlen) &&
	       load_password(u, password_file, c, warn, warnlen, err, errlen);
}

bool auth_load(const char *uri, const char *password_file, struct auth_cred *out, char *warn,
	       size_t warnlen, char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *u = mongoc_uri_new_with_error(uri, &berr);
	bool ok;

	memset(out, 0, sizeof(*out));
	warn[0] = '\0';
	if (u == NULL) {
		snprintf(err, errlen, "backend_uri: %s", berr.message);
		return false;
	}
	ok = load_from_uri(u, password_file, out, warn, warnlen, err, errlen);
	mongoc_uri_destroy(u);
	if (!ok)
		auth_cred_clear(out);
	return ok;
}

static bool same_cred(const struct auth_cred *a, const struct auth_cred *b)
{
	return a->enabled == b->enabled && a->mech_given == b->mech_given && a->mech == b->mech &&
	       strcmp(a->user, b->user) == 0 && strcmp(a->source, b->source) == 0 &&
	       strcmp(a->password, b->password) == 0;
}

bool auth_install(struct auth_cred *c)
{
	bool changed;

	if (c->enabled && dns_source[0] != '\0')
		snprintf(c->source, sizeof(c->source), "%s", dns_source);
	changed = !same_cred(&cred, c);

	auth_cred_clear(&cred);
	cred = *c;
	auth_cred_clear(c);
	if (!changed)
		return false;
	/* New credentials deserve an attempt now, not after the backoff. */
	for (int i = 0; i < pool_count(); i++) {
		struct pool *p = pool_at(i);

		p->next_connect_usec = 0;
		p->backoff_ms = 100;
	}
	return true;
}

bool auth_start(const char *uri, char *err, size_t errlen)
{
	struct auth_cred c;
	char warn[256];

	if (!auth_load(uri, g.cfg.backend_password_file, &c, warn, sizeof(warn), err, errlen))
		return false;
	if (warn[0] != '\0')
		log_warning("%s", warn);
	if (c.enabled)
		log_info("backend authentication: user \"%s\", authSource \"%s\", %s%s", c.user,
			 c.source, c.mech_given ? scram_mech_name(c.mech) : "mechanism negotiated",
			 c.from_file ? ", password from backend_password_file" : "");
	(void)auth_install(&c);
	return true;
}

void auth_commit(struct auth_cred *next)
{
	if (auth_install(next))
		log_notice("reload: backend credentials changed (user \"%s\"%s)", cred.user,
			   cred.from_file ? ", password from backend_password_file" : "");
}

void auth_set_dns_source(const char *source)
{
	if (strcmp(dns_source, source) == 0)
		return;
	snprintf(dns_source, sizeof(dns_source), "%s", source);
	if (!cred.enabled || strcmp(cred.source, source) == 0)
		return;
	log_notice("backend authentication: authSource \"%s\" (from the mongodb+srv:// URI's "
		   "TXT record)",
		   source);
	snprintf(cred.source, sizeof(cred.source), "%s", source);
}

/* ---------------------------------------------------------------- login */

static struct auth_conv *conv_new(struct server *s)
{
	struct auth_conv *a = xcalloc(1, sizeof(*a));

	a->user = s->pool->user;
	s->auth = a;
	return a;
}

/* Who a connection logs in as: the pool's user, else backend_uri's. */
static const char *login_user(const struct server *s)
{
	return s->pool->user != NULL ? pool_user_name(s->pool->user) : cred.user;
}

static const char *login_source(const struct server *s)
{
	return s->pool->user != NULL ? pool_user_db(s->pool->user) : cred.source;
}

static bool login_enabled(const struct server *s)
{
	return cred.enabled || s->pool->user != NULL;
}

void auth_conv_free(struct server *s)
{
	struct auth_conv *a = s->auth;

	if (a == NULL)
		return;
	if (a->have_conversation_id)
		bson_value_destroy(&a->conversation_id);
	scram_clear(&a->sc);
	free(a);
	s->auth = NULL;
}

/* Start a SCRAM conversation: client-first-message into payload. */
static bool conv_start(struct auth_conv *a, enum scram_mech m, char *payload, size_t cap, char *err,
		       size_t errlen)
{
	char prepared[256];
	const struct pool_user_keys *k;
	bool ok;

	if (a->user != NULL) { /* per_user: the ClientKey from the client's own login */
		k = pool_user_keys(a->user);
		return scram_start_keys(&a->sc, k->mech, pool_user_name(a->user), k->client_key,
					k->server_key, k->salt, k->salt_len, k->iterations, NULL,
					payload, cap, err, errlen);
	}
	ok = scram_prepare_password(m, cred.user, cred.password, prepared, sizeof(prepared), err,
				    errlen) &&
	     scram_start(&a->sc, m, cred.user, prepared, NULL, payload, cap, err, errlen);

	OPENSSL_cleanse(prepared, sizeof(prepared));
	return ok;
}

static void append_sasl_start(bson_t *doc, enum scram_mech m, const char *payload)
{
	bson_t opts;

	BSON_APPEND_INT32(doc, "saslStart", 1);
	BSON_APPEND_UTF8(doc, "mechanism", scram_mech_name(m));
	bson_append_binary(doc, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
			   (uint32_t)strlen(payload));
	BSON_APPEND_BOOL(doc, "autoAuthorize", true);
	BSON_APPEND_DOCUMENT_BEGIN(doc, "options", &opts);
	BSON_APPEND_BOOL(&opts, "skipEmptyExchange", true);
	bson_append_document_end(doc, &opts);
}

void auth_extend_hello(struct server *s, bson_t *cmd)
{
	struct auth_conv *a;
	char payload[SCRAM_MSG_MAX], err[256], ns[520];
	enum scram_mech m = cred.mech_given ? cred.mech : SCRAM_SHA_256;
	bson_t spec;

	if (!login_enabled(s))
		return;
	a = conv_new(s);
	if (a->user != NULL)
		m = pool_user_keys(a->user)->mech;
	else if (!cred.mech_given) {
		snprintf(ns, sizeof(ns), "%s.%s", cred.source, cred.user);
		BSON_APPEND_UTF8(cmd, "saslSupportedMechs", ns);
	}
	/* Speculative: the given mechanism, else SCRAM-SHA-256 (as drivers do). */
	if (!conv_start(a, m, payload, sizeof(payload), err, sizeof(err))) {
		server_debug(s, "no speculative authentication: %s", err);
		return;
	}
	a->speculative = true;
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "speculativeAuthenticate", &spec);
	append_sasl_start(&spec, a->sc.mech, payload);
	BSON_APPEND_UTF8(&spec, "db", login_source(s));
	bson_append_document_end(cmd, &spec);
}

static void send_cmd(struct server *s, bson_t *cmd)
{
	struct evbuffer *out = xevbuffer_new();

	BSON_APPEND_UTF8(cmd, "$db", login_source(s));
	s->expect_response_to = wire_next_request_id();
	wire_append_msg(out, s->expect_response_to, 0, 0, cmd);
	sbuf_write(&s->sb, out);
	evbuffer_free(out);
	STAT_INC(backend_auth_round_trips);
}

static void send_continue(struct server *s, struct auth_conv *a, const char *payload)
{
	bson_t cmd = BSON_INITIALIZER;

	BSON_APPEND_INT32(&cmd, "saslContinue", 1);
	bson_append_value(&cmd, "conversationId", -1, &a->conversation_id);
	bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
			   (uint32_t)strlen(payload));
	send_cmd(s, &cmd);
	bson_destroy(&cmd);
}

/* The mechanism to use when the hello did not carry the first step. */
static enum scram_mech negotiate(const struct auth_conv *a, const bson_t *hello)
{
	bson_iter_t it, arr;
	bool sha1 = false;

	if (a->user != NULL)
		return pool_user_keys(a->user)->mech;
	if (cred.mech_given)
		return cred.mech;
	if (!bson_iter_init_find(&it, hello, "saslSupportedMechs") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return SCRAM_SHA_256;
	while (bson_iter_next(&arr)) {
		const char *m = BSON_ITER_HOLDS_UTF8(&arr) ? bson_iter_utf8(&arr, NULL) : "";

		if (strcmp(m, "SCRAM-SHA-256") == 0)
			return SCRAM_SHA_256;
		sha1 = sha1 || strcmp(m, "SCRAM-SHA-1") == 0;
	}
	return sha1 ? SCRAM_SHA_1 : SCRAM_SHA_256;
}

static enum auth_result fail(struct server *s, char *err, size_t errlen, const char *why)
{
	STAT_INC(backend_auth_failures);
	if (s->pool->user != NULL) {
		snprintf(err, errlen,
			 "backend login as the client's own user \"%s.%s\" failed on %s "
			 "(auth_pool_mode = per_user needs the proxy's secret for this user to "
			 "carry the backend's salt and iteration count: auth_query = on, or "
			 "usersInfo's credentials copied into auth_users_file): %s",
			 login_source(s), login_user(s), s->pool->parent->name, why);
		return AUTH_FAILED;
	}
	snprintf(err, errlen, "backend authentication failed for user \"%s\" on %s: %s", cred.user,
		 pool_name(s->pool), why);
	return AUTH_FAILED;
}

/* The server's errmsg of an ok:0 reply, or NULL when ok. */
static const char *reply_error(const bson_t *reply)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, reply, "ok") && bson_iter_as_bool(&it))
		return NULL;
	if (bson_iter_init_find(&it, reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return "the server refused the command (no errmsg)";
}

/* A saslStart/saslContinue answer: conversationId, payload, done. */
struct sasl_reply {
	const char *payload;
	uint32_t len;
	bool done;
};

static bool parse_sasl(struct auth_conv *a, const bson_t *doc, struct sasl_reply *r)
{
	bson_iter_t it;
	bson_subtype_t st;
	const uint8_t *data = NULL;

	memset(r, 0, sizeof(*r));
	if (bson_iter_init_find(&it, doc, "done"))
		r->done = bson_iter_as_bool(&it);
	if (!bson_iter_init_find(&it, doc, "payload") || !BSON_ITER_HOLDS_BINARY(&it))
		return false;
	bson_iter_binary(&it, &st, &r->len, &data);
	r->payload = (const char *)data;
	if (!a->have_conversation_id && bson_iter_init_find(&it, doc, "conversationId")) {
		bson_value_copy(bson_iter_value(&it), &a->conversation_id);
		a->have_conversation_id = true;
	}
	return a->have_conversation_id;
}

/* server-first-message in `r`: answer with the client-final-message. */
static enum auth_result on_server_first(struct server *s, struct auth_conv *a,
					const struct sasl_reply *r, char *err, size_t errlen)
{
	char final[SCRAM_MSG_MAX], why[256];

	if (!scram_client_final(&a->sc, r->payload, r->len, final, sizeof(final), why, sizeof(why)))
		return fail(s, err, errlen, why);
	if (a->sc.computed_pbkdf2)
		STAT_INC(scram_salted_password_computed);
	a->phase = PH_CONTINUE;
	send_continue(s, a, final);
	OPENSSL_cleanse(final, sizeof(final));
	return AUTH_MORE;
}

static enum auth_result logged_in(struct server *s, struct auth_conv *a, struct backend_info *bi)
{
	*bi = a->bi;
	STAT_INC(backend_auth_ok);
	if (a->user != NULL)
		STAT_INC(user_backend_logins);
	if (a->speculative)
		STAT_INC(backend_auth_speculative);
	server_debug(s, "authenticated as \"%s\" on %s (%s%s)", login_user(s), login_source(s),
		     scram_mech_name(a->sc.mech), a->speculative ? ", speculative" : "");
	return AUTH_DONE;
}

/* server-final-message: verified, then done or one empty saslContinue. */
static enum auth_result on_server_final(struct server *s, struct auth_conv *a,
					const struct sasl_reply *r, struct backend_info *bi,
					char *err, size_t errlen)
{
	char why[256];

	if (!scram_verify_final(&a->sc, r->payload, r->len, why, sizeof(why)))
		return fail(s, err, errlen, why);
	if (r->done)
		return logged_in(s, a, bi);
	a->phase = PH_EMPTY;
	send_continue(s, a, "");
	return AUTH_MORE;
}

static enum auth_result send_start(struct server *s, struct auth_conv *a, enum scram_mech m,
				   char *err, size_t errlen)
{
	char payload[SCRAM_MSG_MAX], why[256];
	bson_t cmd = BSON_INITIALIZER;

	scram_clear(&a->sc);
	a->speculative = false;
	if (!conv_start(a, m, payload, sizeof(payload), why, sizeof(why)))
		return fail(s, err, errlen, why);
	append_sasl_start(&cmd, m, payload);
	a->phase = PH_START;
	send_cmd(s, &cmd);
	bson_destroy(&cmd);
	return AUTH_MORE;
}

static enum auth_result on_hello(struct server *s, const bson_t *reply, struct backend_info *bi,
				 char *err, size_t errlen)
{
	struct auth_conv *a = s->auth;
	struct sasl_reply r;
	bson_iter_t it;
	bson_t spec;
	const uint8_t *data;
	uint32_t len;

	if (!handshake_parse_backend(reply, bi, err, errlen))
		return AUTH_BAD_HELLO;
	if (!login_enabled(s))
		return AUTH_DONE;
	if (a == NULL)
		a = conv_new(s);
	a->bi = *bi;
	if (a->speculative && bson_iter_init_find(&it, reply, "speculativeAuthenticate") &&
	    BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&spec, data, len) && parse_sasl(a, &spec, &r))
			return on_server_first(s, a, &r, err, errlen);
	}
	return send_start(s, a, negotiate(a, reply), err, errlen);
}

enum auth_result auth_on_reply(struct server *s, const bson_t *reply, struct backend_info *bi,
			       char *err, size_t errlen)
{
	struct auth_conv *a = s->auth;
	struct sasl_reply r;
	const char *e;

	if (a == NULL || a->phase == PH_HELLO)
		return on_hello(s, reply, bi, err, errlen);
	if ((e = reply_error(reply)) != NULL)
		return fail(s, err, errlen, e);
	if (!parse_sasl(a, reply, &r))
		return fail(s, err, errlen, "the SASL reply lacks payload or conversationId");
	switch (a->phase) {
	case PH_START:
		return on_server_first(s, a, &r, err, errlen);
	case PH_CONTINUE:
		return on_server_final(s, a, &r, bi, err, errlen);
	case PH_EMPTY:
		if (r.done)
			return logged_in(s, a, bi);
		return fail(s, err, errlen, "the server did not finish the SASL conversation");
	case PH_HELLO:
		break;
	}
	return fail(s, err, errlen, "unexpected SASL state");
}

/* Does the URI carry a password? */
static bool uri_has_password(const char *uri_str)
{
	mongoc_uri_t *u = mongoc_uri_new(uri_str);
	bool has = u != NULL && mongoc_uri_get_password(u) != NULL;

	mongoc_uri_destroy(u);
	return has;
}

bool auth_check_config(const char *cfg_path, const struct cfg *c, FILE *out)
{
	struct auth_cred check;
	struct stat st;
	char warn[300], err[CFG_ERR_LEN];

	if (cfg_path != NULL && uri_has_password(c->backend_uri) && stat(cfg_path, &st) == 0 &&
	    (st.st_mode & 007))
		fprintf(out,
			"mongoplex: warning: %s holds the backend password (in backend_uri) and is "
			"readable by other users (mode %03o): chmod o-rwx it, or move the password "
			"to backend_password_file\n",
			cfg_path, (unsigned)(st.st_mode & 0777));
	if (!auth_load(c->backend_uri, c->backend_password_file, &check, warn, sizeof(warn), err,
		       sizeof(err))) {
		fprintf(out, "%s%s\n",
			strncmp(err, "mongoplex: ", 11) == 0 ? "" : "mongoplex: ", err);
		return false;
	}
	auth_cred_clear(&check);
	if (warn[0] != '\0')
		fprintf(out, "mongoplex: warning: %s\n", warn);
	return true;
}
