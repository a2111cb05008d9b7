/*
 * harness_auth.c — raw sockets straight to the test backend, logged in with
 * the direct URI's credentials (h_direct_uri) when it has any (SCRAM through the
 * proxy's own pool/scram.c, synchronously), so the tests that compare the
 * proxy with direct access also run against a backend with authentication
 * on (issue 11: the suite passes unchanged against FerretDB with auth);
 * and, for the client_auth and per_user suites, h_raw_scram_login (a client's
 * hand-driven SCRAM login on a raw socket to the proxy) and h_status_user.
 */
#include "harness_auth.h"

#include "harness.h"

#include <criterion/criterion.h>
#include <mongoc/mongoc.h>
#include <string.h>
#include <unistd.h>

#include "pool/scram.h"

#define AUTH_TIMEOUT_MS 10000

/* The payload of a SASL reply as a string (server messages are text). */
static bool sasl_payload(const bson_t *reply, char *out, size_t outlen, int32_t *conv_id,
			 bool *done)
{
	bson_iter_t it;
	const uint8_t *data;
	uint32_t len;
	bson_subtype_t st;

	if (!bson_iter_init_find(&it, reply, "payload") || !BSON_ITER_HOLDS_BINARY(&it))
		return false;
	bson_iter_binary(&it, &st, &len, &data);
	if (len + 1 > outlen)
		return false;
	memcpy(out, data, len);
	out[len] = '\0';
	*conv_id = bson_iter_init_find(&it, reply, "conversationId") ? bson_iter_as_int64(&it) : 0;
	*done = bson_iter_init_find(&it, reply, "done") && bson_iter_as_bool(&it);
	return true;
}

static void sasl_step(int fd, const char *db, const char *mech, int32_t conv_id, const char *msg,
		      char *out, size_t outlen, int32_t *out_conv, bool *done)
{
	bson_t cmd = BSON_INITIALIZER, reply;

	if (mech != NULL) {
		BSON_APPEND_INT32(&cmd, "saslStart", 1);
		BSON_APPEND_UTF8(&cmd, "mechanism", mech);
	} else {
		BSON_APPEND_INT32(&cmd, "saslContinue", 1);
		BSON_APPEND_INT32(&cmd, "conversationId", conv_id);
	}
	bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)msg,
			   (uint32_t)strlen(msg));
	BSON_APPEND_UTF8(&cmd, "$db", db);
	cr_assert(raw_command(fd, 7100 + (mech ? 0 : 1), &cmd, &reply, AUTH_TIMEOUT_MS),
		  "no reply from the backend to %s", mech ? "saslStart" : "saslContinue");
	cr_assert(h_get_int(&reply, "ok", 0) == 1, "backend login refused: %s",
		  bson_as_relaxed_extended_json(&reply, NULL));
	cr_assert(sasl_payload(&reply, out, outlen, out_conv, done), "bad SASL reply: %s",
		  bson_as_relaxed_extended_json(&reply, NULL));
	bson_destroy(&cmd);
	bson_destroy(&reply);
}

static void raw_login(int fd, const mongoc_uri_t *uri)
{
	const char *user = mongoc_uri_get_username(uri), *pw = mongoc_uri_get_password(uri);
	const char *mech_name = mongoc_uri_get_auth_mechanism(uri);
	const char *db = mongoc_uri_get_auth_source(uri);
	char prepared[256], err[256], out[SCRAM_MSG_MAX], in[SCRAM_MSG_MAX];
	enum scram_mech mech = SCRAM_SHA_256;
	struct scram sc;
	int32_t conv;
	bool done;

	if (mech_name != NULL)
		cr_assert(
		    scram_mech_parse(mech_name, &mech),
		    "direct backend URI: authMechanism %s: raw backend sockets speak SCRAM only",
		    mech_name);
	memset(&sc, 0, sizeof(sc));
	cr_assert(scram_prepare_password(mech, user, pw ? pw : "", prepared, sizeof(prepared), err,
					 sizeof(err)),
		  "%s", err);
	cr_assert(scram_start(&sc, mech, user, prepared, NULL, out, sizeof(out), err, sizeof(err)),
		  "%s", err);
	sasl_step(fd, db ? db : "admin", scram_mech_name(mech), 0, out, in, sizeof(in), &conv,
		  &done);
	cr_assert(scram_client_final(&sc, in, strlen(in), out, sizeof(out), err, sizeof(err)), "%s",
		  err);
	sasl_step(fd, db ? db : "admin", NULL, conv, out, in, sizeof(in), &conv, &done);
	cr_assert(scram_verify_final(&sc, in, strlen(in), err, sizeof(err)), "%s", err);
	if (!done) {
		sasl_step(fd, db ? db : "admin", NULL, conv, "", in, sizeof(in), &conv, &done);
		cr_assert(done, "backend SASL conversation did not finish");
	}
	scram_clear(&sc);
}

int raw_connect_backend(void)
{
	char host[256];
	int port, fd;
	mongoc_uri_t *uri;

	h_backend_hostport(host, sizeof(host), &port);
	fd = raw_connect_to(host, port);
	cr_assert(fd >= 0, "cannot connect to the backend %s:%d", host, port);
	uri = mongoc_uri_new(h_direct_uri());
	cr_assert(uri != NULL);
	if (mongoc_uri_get_username(uri) != NULL)
		raw_login(fd, uri);
	mongoc_uri_destroy(uri);
	return fd;
}

/* A client's SCRAM login on a raw socket to the proxy (harness_auth.h). */
int h_raw_scram_login(int fd, enum scram_mech m, const char *user, const char *pw, const char *db,
		      bool skip_empty)
{
	struct scram sc;
	char prepared[256], msg[SCRAM_MSG_MAX], err[256];
	bson_t cmd, reply, opts;
	bson_iter_t it;
	bson_subtype_t st;
	const uint8_t *data;
	uint32_t len;
	int32_t conv;
	static int32_t rid = 1000;

	cr_assert(
	    scram_prepare_password(m, user, pw, prepared, sizeof(prepared), err, sizeof(err)));
	cr_assert(scram_start(&sc, m, user, prepared, NULL, msg, sizeof(msg), err, sizeof(err)));
	bson_init(&cmd);
	BSON_APPEND_INT32(&cmd, "saslStart", 1);
	BSON_APPEND_UTF8(&cmd, "mechanism", scram_mech_name(m));
	bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)msg,
			   (uint32_t)strlen(msg));
	BSON_APPEND_DOCUMENT_BEGIN(&cmd, "options", &opts);
	BSON_APPEND_BOOL(&opts, "skipEmptyExchange", skip_empty);
	bson_append_document_end(&cmd, &opts);
	BSON_APPEND_UTF8(&cmd, "$db", db);
	for (int step = 0;; step++) {
		cr_assert(raw_command(fd, rid++, &cmd, &reply, 10000), "step %d: no reply", step);
		bson_destroy(&cmd);
		if (!h_get_bool(&reply, "ok")) {
			int code = (int)h_get_int(&reply, "code", -1);

			bson_destroy(&reply);
			scram_clear(&sc);
			return code;
		}
		if (h_get_bool(&reply, "done")) {
			cr_assert_eq(step, skip_empty ? 1 : 2, "done after %d steps", step + 1);
			bson_destroy(&reply);
			scram_clear(&sc);
			return 0;
		}
		cr_assert(bson_iter_init_find(&it, &reply, "payload") &&
			  BSON_ITER_HOLDS_BINARY(&it));
		bson_iter_binary(&it, &st, &len, &data);
		if (step == 0)
			cr_assert(scram_client_final(&sc, (const char *)data, len, msg, sizeof(msg),
						     err, sizeof(err)),
				  "%s", err);
		else
			cr_assert(
			    scram_verify_final(&sc, (const char *)data, len, err, sizeof(err)),
			    "the proxy's signature: %s", err);
		conv = (int32_t)h_get_int(&reply, "conversationId", -1);
		bson_destroy(&reply);
		bson_init(&cmd);
		BSON_APPEND_INT32(&cmd, "saslContinue", 1);
		BSON_APPEND_INT32(&cmd, "conversationId", conv);
		bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)msg,
				   step == 0 ? (uint32_t)strlen(msg) : 0);
		BSON_APPEND_UTF8(&cmd, "$db", db);
	}
}

/* connectionStatus as c sees it (harness_auth.h). */
void h_status_user(mongoc_client_t *c, char *out, size_t outlen)
{
	bson_t reply;
	bson_error_t err;
	const char *u, *d;

	cr_assert(h_cmd_json(c, "admin", "{\"connectionStatus\": 1}", &reply, &err), "%s",
		  err.message);
	u = h_get_str(&reply, "authInfo.authenticatedUsers.0.user");
	d = h_get_str(&reply, "authInfo.authenticatedUsers.0.db");
	snprintf(out, outlen, "%s%s%s", d ? d : "", u ? "." : "", u ? u : "");
	bson_destroy(&reply);
}
