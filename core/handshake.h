/*
 * handshake.h — the proxy's side of the MongoDB handshake, both directions.
 *
 * Towards clients the proxy answers hello/isMaster itself, mirroring the wire
 * versions and limits the backend reported (never hard-coded). Towards the
 * backend it sends its own hello (appname "mongoplex") and records what the
 * server said in a backend_info.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

enum backend_kind {
	BACKEND_UNKNOWN = 0,
	BACKEND_STANDALONE,
	BACKEND_RS_PRIMARY,
	BACKEND_RS_OTHER, /* secondary, arbiter, ...: not usable as the target */
	BACKEND_MONGOS,
};

/* What a backend said in its hello reply. */
struct backend_info {
	bool known;
	enum backend_kind kind;
	int32_t min_wire_version;
	int32_t max_wire_version;
	int32_t max_bson_object_size;
	int32_t max_message_size_bytes;
	int32_t max_write_batch_size;
	int32_t logical_session_timeout_minutes; /* -1: absent (no sessions) */
	char set_name[128];
};

/* The hello the proxy sends on each new backend connection. */
void handshake_backend_hello(bson_t *cmd);

/* Parse a backend's hello reply; false + err when it is unusable. */
bool handshake_parse_backend(const bson_t *reply, struct backend_info *bi, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Would a client's hello say something else with `b` than with `a`? */
bool handshake_info_differs(const struct backend_info *a, const struct backend_info *b);

const char *handshake_kind_name(enum backend_kind kind);

/* Build the reply to a client's hello/isMaster. `cmd_name` is the command
 * the client used (the reply says isWritablePrimary for "hello", ismaster
 * otherwise). Returns false (and an error document in `out`) when the
 * request must be refused, e.g. metadata on a later hello. */
bool handshake_client_reply(const bson_t *cmd, const char *cmd_name, const struct backend_info *bi,
			    int64_t connection_id, bool first_hello, bson_t *out);
