/*
 * admin.c — the admin commands' front door: mongoplexStats, the table of the
 * other mongoplex* commands, and who may run them (see admin.h).
 */
#include "proxy/admin.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/errors.h"
#include "core/log.h"
#include "core/stats.h"
#include "proxy/admin_ctl.h"
#include "proxy/admin_fan.h"
#include "proxy/admin_show.h"
#include "proxy/cauth.h"
#include "proxy/client.h"
#include "proxy/proxy.h"
#include "proxy/stats_report.h"

/* One admin command: its name (the first key) and what answers it. */
struct admin_cmd {
	const char *name;
	void (*run)(struct request *req, const bson_t *body);
};

static const struct admin_cmd cmds[] = {
    {"mongoplexShow", admin_show},	   /* proxy/admin_show.c */
    {"mongoplexPause", admin_ctl_run},	   /* proxy/admin_ctl.c */
    {"mongoplexResume", admin_ctl_run},	   /* ... */
    {"mongoplexReconnect", admin_ctl_run}, /* ... */
    {"mongoplexKill", admin_ctl_run},	   /* ... */
    {"mongoplexReload", admin_ctl_run},	   /* ... */
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static struct log_rl rl_refused = {.what = "admin commands refused"};

void admin_stats_reply(struct request *req)
{
	bson_t doc;

	bson_init(&doc);
	stats_to_bson(&doc);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}

void admin_command(struct request *req, const bson_t *body)
{
	char msg[160];

	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(cmds[i].name, req->cmd) == 0) {
			if (!admin_authorized(req, req->cmd)) {
				admin_refuse(req, req->cmd);
				return;
			}
			STAT_INC(admin_commands);
			if (!admin_fan(req, body)) /* workers: every one of them */
				cmds[i].run(req, body);
			return;
		}
	snprintf(msg, sizeof(msg), "mongoplex: no such admin command: %s", req->cmd);
	request_fail(req, MP_ERR(COMMAND_NOT_FOUND), msg, NULL);
}

/* A command run for the master (proxy/wctl.h): the reply lands in *out. */
static void exec_reply(void *arg, const bson_t *reply)
{
	if (reply != NULL) {
		bson_destroy(arg);
		bson_copy_to(reply, arg);
	}
}

static const struct request_ops exec_ops = {.name = "admin-exec"};

void admin_exec(const bson_t *cmd, bson_t *out)
{
	struct request *req;
	bson_iter_t it;
	const char *name;

	if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
		return;
	name = bson_iter_key(&it);
	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(cmds[i].name, name) == 0) {
			req = request_new(NULL, &exec_ops);
			snprintf(req->cmd, sizeof(req->cmd), "%s", name);
			req->internal_reply = exec_reply;
			req->internal_arg = out;
			request_set_state(req, REQ_LOCAL, NULL);
			cmds[i].run(req, cmd); /* every one answers before it returns */
			return;
		}
}

bool admin_user_listed(const char *list, const char *dbuser)
{
	const char *p = list;

	while (*p != '\0') {
		size_t n;
		char entry[300];

		while (*p == ' ' || *p == ',')
			p++;
		n = strcspn(p, ",");
		while (n > 0 && p[n - 1] == ' ')
			n--;
		if (n > 0 && n < 200) {
			snprintf(entry, sizeof(entry), "%s%.*s",
				 memchr(p, '.', n) != NULL ? "" : "admin.", (int)n, p);
			if (strcmp(entry, dbuser) == 0)
				return true;
		}
		p += strcspn(p, ",");
	}
	return false;
}

/* Why c may not run admin commands, or NULL when it may. */
static const char *refusal(const struct client *c, char *buf, size_t len)
{
	char user[300];

	if (cauth_enabled()) {
		if (!cauth_user_name(c, user, sizeof(user)))
			return "not logged in";
		if (admin_user_listed(g.cfg.admin_users, user))
			return NULL;
		snprintf(buf, len, "user %s is not in admin_users", user);
		return buf;
	}
	if (c->peer_uid < 0)
		return "with auth_mode = none only the unix socket's owner (or root) may";
	if (c->peer_uid == 0 || c->peer_uid == (int64_t)geteuid())
		return NULL;
	snprintf(buf, len, "uid %lld is neither root nor the proxy's user", (long long)c->peer_uid);
	return buf;
}

bool admin_authorized(struct request *req, const char *cmd)
{
	struct client *c = client_of(req);
	char buf[400];
	const char *why;

	if (c == NULL) /* its client is gone: nobody to answer */
		return false;
	why = refusal(c, buf, sizeof(buf));
	if (why == NULL)
		return true;
	STAT_INC(admin_refused);
	client_log_rl(&rl_refused, LOG_LVL_WARNING, c, "admin command %s refused: %s", cmd, why);
	return false;
}

bool admin_may(const struct client *c)
{
	char buf[400];

	return refusal(c, buf, sizeof(buf)) == NULL;
}

void admin_refuse(struct request *req, const char *cmd)
{
	struct client *c = client_of(req);
	char buf[400], msg[600];
	const char *why = c != NULL ? refusal(c, buf, sizeof(buf)) : "client gone";

	snprintf(msg, sizeof(msg), "mongoplex: not authorized to run %s: %s", cmd,
		 why != NULL ? why : "refused");
	request_fail(req, MP_ERR(UNAUTHORIZED), msg, NULL);
}
