/*
 * admin_show.h — {mongoplexShow: "pools" | "clients" | "servers" | "config"
 * | "mem"}: one row per object of a list, {rows: [...], ok: 1}.
 *
 * Bounded: rows are added until the reply holds maxBytes (default and most
 * ADMIN_SHOW_MAX_BYTES, well under the 16 MB BSON limit with 20,000
 * clients); then `truncated: true` and `next` (the skip of the next page)
 * say so. {skip: N} starts at the Nth row. `total` counts every row.
 */
#pragma once

#include <bson/bson.h>

#include "core/request.h"

#define ADMIN_SHOW_MAX_BYTES (8 * 1024 * 1024)

/* Answer req (authorized already, proxy/admin.c). */
void admin_show(struct request *req, const bson_t *body);
