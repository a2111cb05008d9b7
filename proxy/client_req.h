/*
 * client_req.h — proxy/'s part of every request (req->client, a request
 * part: core/request.h request_part_set): what the client side notes on a
 * request. Allocated zeroed with the request; its fini (client_ops.c)
 * frees what proxy/ attached here.
 */
#pragma once

#include <bson/bson.h>

#include "core/request.h"

struct cursor_note;

struct req_client {
	struct cursor_note *cursor; /* proxy/cursor.c: what its reply updates in the cursor table */
	bson_t *hello_cmd;	    /* REQ_HELLO_WAIT: the client's command, kept (awaithello.c) */
};
