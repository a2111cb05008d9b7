/*
 * cauth_int.h — what cauth.c shares with cauth_prelogin.c and
 * cauth_state.c inside proxy/ (nothing else includes it): one client's
 * login state and the steps of a SASL conversation the hello's
 * speculativeAuthenticate also takes.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/users.h"
#include "core/scram_msg.h"
#include "proxy/cauth_query.h"

struct client;

/* One client's authentication. Rules: authed names db/user; a conversation
 * is open while in_conv (conv_id is its id); failures counts logins failed
 * in a row (reset by a success). Secrets in ss are wiped on every exit. */
struct cauth_conn {
	bool authed;
	char db[USERS_DB_MAX];
	char user[USERS_NAME_MAX];
	bool in_conv;
	bool skip_empty; /* the client asked for skipEmptyExchange */
	bool proof_ok;	 /* waiting for the empty saslContinue */
	char conv_db[USERS_DB_MAX];
	char conv_user[USERS_NAME_MAX];
	int32_t conv_id;
	int failures;
	bool second_logged;	   /* a second user's login was refused (logged once) */
	uint64_t login_since_usec; /* its first SASL step since connect or login; 0: none */
	struct scram_server ss;
	bool from_query; /* the conversation's secret came from auth_query's cache */
	/* A login waiting for auth_query (wait_req not NULL): its saslStart
	 * (wait_cmd, a copy) or its failed saslContinue (refresh before the
	 * error in wait_why). Freed with the client if still waiting. */
	struct cq_waiter wait; /* also its auth_query lookup budget */
	struct client *client;
	struct request *wait_req;
	bson_t *wait_cmd;
	char wait_why[256];
	/* auth_pool_mode = per_user: the logged-in user's pool reference
	 * (pool/pool_users.h), NULL when not logged in or shared. */
	struct pool_user *pu;
};

/* What auth_query answered a waiting saslStart. */
struct cauth_resolved {
	enum cq_status st;
	const struct users_entry *e;
	const char *why;
};

enum start_result { START_OK, START_FAIL, START_WAIT };

/* The client's login state (created on first use). */
struct cauth_conn *cauth_conn_of(struct client *c);
/* A SASL step of a connection not logged in: auth_timeout_ms runs from the
 * first one (cauth_login_expired). */
void cauth_login_begins(struct cauth_conn *a);
/* saslStart's work (cauth.c): the server-first message in `out`, or why not. */
enum start_result cauth_sasl_start(struct cauth_conn *a, const bson_t *cmd, const char *db,
				   const struct cauth_resolved *res, bool wait, char *out,
				   size_t outlen, char *why, size_t whylen);
/* doc's `key` when it is a string, else NULL. */
const char *cauth_get_str(const bson_t *doc, const char *key);
/* conversationId, done, payload of a SASL reply. */
void cauth_append_sasl_reply(bson_t *doc, int32_t conv_id, bool done, const char *payload);
/* The users file's entry for db.user, NULL: none. */
const struct users_entry *cauth_find_user(const char *db, const char *user);
