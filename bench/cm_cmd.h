/*
 * cm_cmd.h — what the curve model answers (labelled as a model, never as
 * MongoDB): the handshake (hello / isMaster over OP_MSG or the legacy
 * OP_QUERY), ping, buildInfo, find on _id, getMore, killCursors, count,
 * endSessions, curveModelStatus; insert, update, delete, drop,
 * dropDatabase, create, createIndexes and dropIndexes are accepted and
 * ignored (the collection is virtual). Anything else: code 59
 * CommandNotFound. Errors come from the error table (core/errors.h), their
 * errmsg starting with "curve-model: ".
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/wire.h"

/* The answer to one message. */
struct cm_reply {
	bson_t doc;    /* the reply body (always initialised) */
	int cost_ids;  /* a query of this many ids: delayed by the curve; -1: not a query */
	bool no_reply; /* moreToCome: nothing is sent back */
};

/* An OP_MSG body (validated by wire_parse_msg); data/len: the whole message
 * (for kind-1 sequences). conn_id: the connection's number (connectionId). */
void cm_cmd_msg(const struct wire_msg *m, const uint8_t *data, size_t len, int64_t conn_id,
		struct cm_reply *r);
/* A legacy OP_QUERY: the handshake only, else code 352 as mongod 6+ answers. */
void cm_cmd_query(const struct wire_query *q, int64_t conn_id, struct cm_reply *r);
/* {ok: 0, errmsg: "curve-model: <msg>", code, codeName}. */
void cm_cmd_error(bson_t *doc, int code, const char *codename, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
