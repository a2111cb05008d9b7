/*
 * cauth_state.c — client authentication as the rest of proxy/ reads it:
 * whether it is on, the users file's table (loaded at start, swapped at
 * reload), who a client is logged in as, and whether its time to log in
 * has run out (cauth.h). A leaf: it calls no other file of proxy/, so the
 * client connection, its request callbacks and the admin rules may read a
 * login without joining a call circle; the conversation itself is cauth.c.
 */
#include "proxy/cauth.h"

#include <inttypes.h>
#include <string.h>

#include "config/cfg.h"
#include "config/users.h"
#include "core/globals.h"
#include "core/log.h"
#include "proxy/cauth_int.h"
#include "proxy/client.h"

/* Rules: set by cauth_start only (auth_mode is not reloadable); the table
 * is replaced whole by cauth_commit. */
static struct users_table users;
static bool enabled;

bool cauth_enabled(void)
{
	return enabled;
}

const struct users_entry *cauth_find_user(const char *db, const char *user)
{
	return users_find(&users, db, user);
}

bool cauth_user_name(const struct client *c, char *out, size_t len)
{
	if (c->auth == NULL || !c->auth->authed)
		return false;
	snprintf(out, len, "%s.%s", c->auth->db, c->auth->user);
	return true;
}

bool cauth_start(char *err, size_t errlen)
{
	enabled = strcmp(g.cfg.auth_mode, "scram") == 0;
	if (!enabled)
		return true;
	if (g.cfg.auth_users_file[0] != '\0' &&
	    !users_load(g.cfg.auth_users_file, &users, err, errlen))
		return false;
	log_info("client authentication: SCRAM, %zu users from %s%s", users.n,
		 g.cfg.auth_users_file[0] ? g.cfg.auth_users_file : "(no users file)",
		 g.cfg.auth_query ? ", others looked up on the backend (auth_query)" : "");
	return true;
}

bool cauth_prepare(const struct cfg *next, struct users_table *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!enabled || next->auth_users_file[0] == '\0')
		return true;
	return users_load(next->auth_users_file, out, err, errlen);
}

void cauth_commit(struct users_table *t, const char *path)
{
	if (!enabled)
		return;
	users_free(&users);
	users = *t;
	memset(t, 0, sizeof(*t));
	log_notice("reload: %zu users from %s", users.n, path);
}

bool cauth_login_expired(const struct client *c, uint64_t now, char *why, size_t whylen)
{
	const struct cauth_conn *a = c->auth;
	uint64_t limit = (uint64_t)g.cfg.auth_timeout_ms * 1000;

	if (!enabled || limit == 0 || (a != NULL && a->authed))
		return false;
	if (a != NULL && a->login_since_usec != 0 && now - a->login_since_usec > limit) {
		snprintf(why, whylen,
			 "login not finished within auth_timeout_ms (%" PRId64 " ms) of its start",
			 g.cfg.auth_timeout_ms);
		return true;
	}
	if ((a == NULL || a->login_since_usec == 0) && !c->hello_seen &&
	    now - c->connected_usec > limit) {
		snprintf(why, whylen,
			 "neither a hello nor a login within auth_timeout_ms (%" PRId64
			 " ms) of connecting",
			 g.cfg.auth_timeout_ms);
		return true;
	}
	return false;
}
