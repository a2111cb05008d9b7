/*
 * admin.c — the mongoplexStats command: the stats document plus ok: 1.
 */
#include "proxy/admin.h"

#include "core/stats.h"
#include "proxy/stats_report.h"

void admin_stats_reply(struct request *req)
{
	bson_t doc;

	bson_init(&doc);
	stats_to_bson(&doc);
	BSON_APPEND_DOUBLE(&doc, "ok", 1.0);
	request_reply_doc(req, &doc);
	bson_destroy(&doc);
}
