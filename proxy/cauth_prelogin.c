/*
 * cauth_prelogin.c — what a client connection meets before it logs in
 * (rules in cauth.h): the hello's login help (saslSupportedMechs: the
 * user's mechanisms; speculativeAuthenticate: saslStart riding in the
 * hello), connectionStatus answered here, and the gate that lets only
 * hello, ping, buildInfo, the SASL commands (and mongoplexStats when
 * allowed) through unauthenticated. The conversation itself is cauth.c.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config/users.h"
#include "core/errors.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/request.h"
#include "core/scram_msg.h"
#include "core/stats.h"
#include "pool/route.h"
#include "proxy/cauth.h"
#include "proxy/cauth_int.h"
#include "proxy/cauth_query.h"
#include "proxy/client.h"
#include "proxy/router.h"

static struct log_rl rl_spec = {.what = "speculative logins not started"};

/* connectionStatus, answered here: the client's own user. */
static void connection_status(struct client *c, struct request *req)
{
	bson_t doc, info, arr, u;

	bson_init(&doc);
	BSON_APPEND_DOCUMENT_BEGIN(&doc, "authInfo", &info);
	BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUsers", &arr);
	if (c->auth != NULL && c->auth->authed) {
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &u);
		BSON_APPEND_UTF8(&u, "user", c->auth->user);
		BSON_APPEND_UTF8(&u, "db", c->auth->db);
		bson_append_document_end(&arr, &u);
	}
	bson_append_array_end(&info, &arr);
	BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUserRoles", &arr);
	bson_append_array_end(&info, &arr);
	bson_append_document_end(&doc, &info);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

static bool allowed_unauthenticated(const struct route_info *ri)
{
	switch (ri->route) {
	case ROUTE_HELLO:
	case ROUTE_PING:
	case ROUTE_AUTH:
		return true;
	case ROUTE_STATS:
		return g.cfg.auth_stats_unauthenticated;
	default:
		return strcasecmp(ri->cmd, "buildInfo") == 0;
	}
}

bool cauth_admit(struct client *c, struct request *req, const bson_t *body,
		 const struct route_info *ri)
{
	char msg[160];

	(void)body;
	if (!cauth_enabled())
		return true;
	if (c->auth != NULL && c->auth->authed && c->auth->pu != NULL) {
		req->route->user = c->auth->pu; /* per_user: runs as the client's user */
		return true;			/* connectionStatus too: the backend's view */
	}
	if (strcmp(ri->cmd, "connectionStatus") == 0) {
		STAT_INC(requests_local);
		connection_status(c, req);
		return false;
	}
	if ((c->auth != NULL && c->auth->authed) || allowed_unauthenticated(ri))
		return true;
	STAT_INC(client_auth_unauthorized);
	snprintf(msg, sizeof(msg), "mongoplex: command %s requires authentication", ri->cmd);
	request_fail(req, MP_ERR(UNAUTHORIZED), msg, NULL);
	return false;
}

/* saslSupportedMechs: "db.user" -> the mechanisms that user has. */
static void supported_mechs(struct client *c, const bson_t *hello, bson_t *reply)
{
	const char *name = cauth_get_str(hello, "saslSupportedMechs"), *dot;
	const struct users_entry *e;
	char db[USERS_DB_MAX];
	bson_t arr;
	const char *key = "0";

	if (name == NULL || (dot = strchr(name, '.')) == NULL || (size_t)(dot - name) >= sizeof(db))
		return;
	snprintf(db, sizeof(db), "%.*s", (int)(dot - name), name);
	cauth_login_begins(cauth_conn_of(c));
	e = cauth_find_user(db, dot + 1);
	if (e == NULL && cq_enabled()) /* a miss starts the lookup saslStart will need */
		(void)cq_get(db, dot + 1, &cauth_conn_of(c)->wait, false, &e);
	if (e == NULL)
		return;
	BSON_APPEND_ARRAY_BEGIN(reply, "saslSupportedMechs", &arr);
	if (e->sha256.present) {
		BSON_APPEND_UTF8(&arr, key, "SCRAM-SHA-256");
		key = "1";
	}
	if (e->sha1.present)
		BSON_APPEND_UTF8(&arr, key, "SCRAM-SHA-1");
	bson_append_array_end(reply, &arr);
}

/* speculativeAuthenticate: run saslStart now; a failure only omits the
 * answer (the driver then runs saslStart, which fails with code 18). */
static void speculative(struct client *c, const bson_t *hello, bson_t *reply)
{
	struct cauth_conn *a = cauth_conn_of(c);
	char out[SCRAM_MSG_MAX], why[256];
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	bson_t spec, ans;
	const char *db;

	if (!bson_iter_init_find(&it, hello, "speculativeAuthenticate") ||
	    !BSON_ITER_HOLDS_DOCUMENT(&it))
		return;
	bson_iter_document(&it, &len, &data);
	if (!bson_init_static(&spec, data, len))
		return;
	db = cauth_get_str(&spec, "db");
	why[0] = '\0'; /* START_WAIT leaves it empty */
	cauth_login_begins(a);
	if (cauth_sasl_start(a, &spec, db ? db : "admin", NULL, false, out, sizeof(out), why,
			     sizeof(why)) != START_OK) {
		client_log_rl(&rl_spec, LOG_LVL_INFO, c,
			      "speculative login of \"%s.%s\" not started: %s", a->conv_db,
			      a->conv_user,
			      why[0] ? why : "its secret is being looked up (auth_query)");
		return;
	}
	STAT_INC(client_auth_speculative);
	BSON_APPEND_DOCUMENT_BEGIN(reply, "speculativeAuthenticate", &ans);
	cauth_append_sasl_reply(&ans, a->conv_id, false, out);
	bson_append_document_end(reply, &ans);
}

void cauth_extend_hello(struct client *c, const bson_t *hello, bson_t *reply)
{
	if (!cauth_enabled() || hello == NULL)
		return;
	supported_mechs(c, hello, reply);
	speculative(c, hello, reply);
}
