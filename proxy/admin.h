/*
 * admin.h — admin commands answered by the proxy over the wire.
 */
#pragma once

#include "core/request.h"

/* db.adminCommand({mongoplexStats: 1}) */
void admin_stats_reply(struct request *req);
