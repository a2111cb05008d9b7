/*
 * admin.h — admin commands answered by the proxy over the wire.
 */
#pragma once

#include "core/request.h"

/* May the client of req run the admin command cmd? */
bool admin_authorized(struct request *req, const char *cmd) __attribute__((warn_unused_result));

/* db.adminCommand({mongoplexStats: 1}) */
void admin_stats_reply(struct request *req);
