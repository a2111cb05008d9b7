/*
 * admin.c — the mongoplexStats command: the stats document plus ok: 1; who
 * may run admin commands (admin_authorized).
 */
#include "proxy/admin.h"

#include <stdbool.h>

#include "core/stats.h"
#include "proxy/stats_report.h"

/* TEMPORARY: replaced by the adminshow branch */
bool admin_authorized(struct request *req, const char *cmd)
{
	/* mongoplexStats' rule: whoever proxy/cauth.c admitted to a command */
	(void)req;
	(void)cmd;
	return true;
}

void admin_stats_reply(struct request *req)
{
	bson_t doc;

	bson_init(&doc);
	stats_to_bson(&doc);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}
