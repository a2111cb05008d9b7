/*
 * admin.h — admin commands answered by the proxy over the wire, and who may
 * run them.
 *
 *   mongoplexStats                 the stats document (its own rule: cauth.c)
 *   mongoplexShow: "pools" | ...   rows of one list (proxy/admin_show.c)
 *   other mongoplex* commands      the table in admin.c
 *
 * Who may (admin_authorized): with auth_mode = scram the logged-in users
 * named in admin_users; with auth_mode = none the clients on the unix socket
 * whose peer uid (SO_PEERCRED, read once at accept: client.c) is root or the proxy's
 * own effective uid. Everyone else gets code 13 and a rate-limited log line
 * naming the client and the command.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/request.h"

struct client;

/* db.adminCommand({mongoplexStats: 1}) */
void admin_stats_reply(struct request *req);

/* Run one admin command (router: ROUTE_ADMIN); it answers req (with
 * workers: after every worker ran it, proxy/admin_fan.h). */
void admin_command(struct request *req, const bson_t *body);
/* Run `cmd` (a mongoplex* command of the table) here for the master
 * (proxy/wctl.h: another worker asked and checked who may); its answer,
 * ok or an error document, replaces *out. */
void admin_exec(const bson_t *cmd, bson_t *out);

/* May req's client run admin command `cmd`? False: the refusal was logged
 * (rate-limited) and counted; req is not answered (admin_refuse does). */
bool admin_authorized(struct request *req, const char *cmd) __attribute__((warn_unused_result));
/* Answer req with code 13 Unauthorized, the errmsg saying why. */
void admin_refuse(struct request *req, const char *cmd);

/* Would admin_authorized let c in, from what is known of it now (its peer
 * uid, its login)? No log, no count. */
bool admin_may(const struct client *c);

/* Is "db.user" named in the admin_users list `list`? (An entry without a
 * dot means admin.entry.) */
bool admin_user_listed(const char *list, const char *dbuser);
