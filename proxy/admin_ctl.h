/*
 * admin_ctl.h — the control commands of the operator's console, answered
 * by the proxy over the wire (issue 24, item 2):
 *
 *   {mongoplexPause: 1 | "host:port"}      stop starting requests, close
 *                                          backend connections as they idle
 *   {mongoplexResume: 1 | "host:port"}     reopen, dispatch what waited
 *   {mongoplexReconnect: 1 | "host:port"}  replace every backend connection
 *   {mongoplexKill: <client id>}           close a client, kill its cursors
 *   {mongoplexReload: 1}                   as SIGHUP, with the result
 *
 * Each is routed and authorized by admin_command (proxy/admin.h) and answers ok: 1
 * with what it did, or a MongoDB error.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

struct request;

/* Answer `req` (REQ_LOCAL), one of the commands above with its `body`; the
 * caller (admin_command, proxy/admin.c) has authorized it. */
void admin_ctl_run(struct request *req, const bson_t *body);

/* What mongoplexReload runs: proxy.c's reload (as SIGHUP), set at start so
 * that the console does not call up into the process's lifecycle. Returns
 * whether it applied, its outcome in msg. Unset: mongoplexReload fails. */
void admin_ctl_set_reload(bool (*reload)(char *msg, size_t msglen));
