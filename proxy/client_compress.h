/*
 * client_compress.h — OP_COMPRESSED with clients: negotiation in the
 * client's hello, unwrapping its compressed messages, compressing replies.
 *
 * Rules: the algorithms are those of the `compressors` setting that the
 * client listed in its hello's `compression` (client's order); replies go
 * compressed with the algorithm of the request when it came compressed,
 * else with the client's first common one; never for the specification's
 * handshake/authentication commands (compress_cmd_forbidden), never below
 * compression_min_bytes, never when it would not shrink the reply.
 */
#pragma once

#include <bson/bson.h>
#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/wire.h"

struct client;
struct request;

/* A hello carried `compression`: choose, and answer with `compression` in reply. */
void ccomp_hello(struct client *c, const bson_t *cmd, bson_t *reply);

/* Unwrap a client's OP_COMPRESSED message into `plain`; sets
 * c->msg_compressor. False + err (a client error) when it is refused. */
bool ccomp_unwrap(struct client *c, const uint8_t *data, size_t len, struct evbuffer *plain,
		  struct wire_error *err) __attribute__((warn_unused_result));

/* Replace `reply` (one whole message) by its compressed form when the rules allow. */
void ccomp_reply(const struct client *c, const struct request *req, struct evbuffer *reply);
