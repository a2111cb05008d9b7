/*
 * router.h — classifies a client's OP_MSG command: answered locally
 * (handshake, ping, admin), refused, or forwarded (and then whether it pins).
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>

#include "core/session.h"

enum route {
	ROUTE_FORWARD, /* raw-forward to a backend for one exchange */
	ROUTE_HELLO,   /* hello / isMaster / ismaster: answered by the proxy */
	ROUTE_PING,    /* ping: answered by the proxy */
	ROUTE_AUTH,    /* saslStart, authenticate, ...: refused (no client auth yet) */
	ROUTE_STATS,   /* mongoplexStats admin command */
	ROUTE_ADMIN,   /* the other mongoplex* admin commands (proxy/admin.h) */
	ROUTE_REFUSE,  /* not allowed through a pooling proxy (errmsg in route_info) */
};

struct route_info {
	enum route route;
	char cmd[64];	      /* first key of the body */
	const char *db;	      /* $db, points into the body */
	bool cursor_op;	      /* getMore / killCursors: must reach the cursor's server */
	bool in_txn;	      /* carries txnNumber with autocommit:false */
	bool retryable_write; /* carries txnNumber outside a transaction */
	bool is_find;	      /* candidate for the batcher */
	const char *refuse_msg;
	struct req_session session; /* lsid, txnNumber, ... (core/session.h) */
};

/* Returns false (with ri->refuse_msg set) when the body lacks $db. The body
 * must be valid BSON (wire_parse_msg checked it, or libbson built it): its
 * top level is walked without libbson's per-element checks. */
bool router_classify(const bson_t *body, struct route_info *ri) __attribute__((warn_unused_result));
