/*
 * topover.h — the proxy's topologyVersion (server-monitoring specification):
 * a processId ObjectId made at start and a counter bumped whenever what the
 * proxy tells drivers in its hello changes (drain starts, the backend's
 * primary is lost or regained, the advertised limits change).
 *
 * Rules: one per process, main thread only. A bump calls the one listener
 * (proxy/awaithello.c answers the hellos it holds); layers below proxy/ only
 * call topover_bump.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* The processId is made on first use (or here, at start). */
void topover_init(void);
const bson_oid_t *topover_process_id(void);
int64_t topover_counter(void);

/* Append {processId, counter} as document `key`. */
void topover_append(bson_t *doc, const char *key);

/* The state drivers see changed: counter + 1, logged with `why`, listener called. */
void topover_bump(const char *why);

/* Who hears about bumps (proxy/awaithello.c). */
void topover_set_listener(void (*cb)(void));

/* What an awaitable hello asked for (topologyVersion + maxAwaitTimeMS). */
struct topover_await {
	int64_t max_await_ms; /* as sent, >= 0 */
	bool same_process;    /* its processId is ours */
	int64_t counter;      /* its counter */
};

enum topover_await_kind {
	TOPOVER_PLAIN,	/* neither field: an ordinary hello */
	TOPOVER_AWAIT,	/* both, valid: *a filled in */
	TOPOVER_REFUSE, /* bad types or values: answer *err (mongod's codes) */
};

struct wire_error;
/* Read a hello's awaitable fields, with mongod's checks and error codes. */
enum topover_await_kind topover_parse_await(const bson_t *cmd, struct topover_await *a,
					    struct wire_error *err);
