/*
 * admin_fan.h — with workers = N > 1, the console's commands
 * (mongoplexShow, Pause, Resume, Reconnect, Kill, Reload) act on the whole
 * proxy: run on the workers through the master (proxy/wctl.h) and merged
 * into one answer (proxy/admin_fan.c says how each is merged).
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>

#include "core/request.h"

/* Take `req` (authorized already) to the workers; it is answered later.
 * False: not for the workers (a single process, the channel closed, or a
 * malformed argument the local command refuses): run it here. */
bool admin_fan(struct request *req, const bson_t *body);
