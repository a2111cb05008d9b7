/*
 * router.c — command classification. Only the top-level keys of the body are
 * read: the command name (first key), $db, txnNumber, autocommit.
 */
#include "proxy/router.h"

#include "core/bsonval.h"
#include "proxy/admin_ctl.h"

#include <string.h>
#include <strings.h>

static const char *const auth_cmds[] = {"saslStart", "saslContinue", "authenticate",
					"logout",    "getnonce",     NULL};

/* Commands that change per-connection server state, which transaction-level
 * pooling cannot honour; refusing them is clearer than misbehaving. */
static const char *const refused_cmds[] = {"exhaust", NULL};

static bool in_list(const char *const *list, const char *name)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

static enum route route_for(const char *cmd)
{
	if (strcmp(cmd, "find") == 0) /* the common case: none of the names below */
		return ROUTE_FORWARD;
	if (strcmp(cmd, "hello") == 0 || strcasecmp(cmd, "isMaster") == 0)
		return ROUTE_HELLO;
	if (strcmp(cmd, "ping") == 0)
		return ROUTE_PING;
	if (strcmp(cmd, "mongoplexStats") == 0)
		return ROUTE_STATS;
	if (strncmp(cmd, "mongoplex", 9) == 0 && admin_ctl_command(cmd))
		return ROUTE_CONTROL;
	if (in_list(auth_cmds, cmd))
		return ROUTE_AUTH;
	if (in_list(refused_cmds, cmd))
		return ROUTE_REFUSE;
	return ROUTE_FORWARD;
}

bool router_classify(const bson_t *body, struct route_info *ri)
{
	struct bsonval_it it; /* the body was validated (wire_parse_msg) */
	bool has_txn = false, autocommit_false = false;

	memset(ri, 0, sizeof(*ri));
	bsonval_it_init(&it, bson_get_data(body));
	if (!bsonval_it_next(&it)) {
		ri->route = ROUTE_REFUSE;
		ri->refuse_msg = "empty command document";
		return false;
	}
	bson_strncpy(ri->cmd, it.key, sizeof(ri->cmd)); /* no printf per request */
	do {
		const char *k = it.key;

		if (k[0] != '$' && k[0] != 't' && k[0] != 'a')
			continue; /* none of the keys below: no string compares */
		if (strcmp(k, "$db") == 0 && it.type == BSON_TYPE_UTF8)
			ri->db = (const char *)it.value + 4;
		else if (strcmp(k, "txnNumber") == 0)
			has_txn = true;
		else if (strcmp(k, "autocommit") == 0 && it.type == BSON_TYPE_BOOL)
			autocommit_false = it.value[0] == 0;
	} while (bsonval_it_next(&it));

	ri->route = route_for(ri->cmd);
	/* Any case: some servers (mongo-java-server) match command names so. */
	ri->is_find = strcmp(ri->cmd, "find") == 0;
	ri->cursor_op = !ri->is_find && (strcasecmp(ri->cmd, "getMore") == 0 ||
					 strcasecmp(ri->cmd, "killCursors") == 0);
	ri->in_txn = has_txn && autocommit_false;
	ri->retryable_write = has_txn && !autocommit_false;
	if (ri->route == ROUTE_REFUSE)
		ri->refuse_msg = "command not supported through mongoplex";
	if (ri->db == NULL) {
		ri->route = ROUTE_REFUSE;
		ri->refuse_msg = "OP_MSG requests require a $db argument";
		return false;
	}
	return true;
}
