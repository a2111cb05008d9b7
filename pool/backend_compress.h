/*
 * backend_compress.h — OP_COMPRESSED towards the backend, negotiated in the
 * proxy's own hello on each backend connection, independently of clients.
 *
 * Rules: the proxy offers backend_uri's compressors= list (its order; read
 * once at startup, the URI does not reload) and uses the first algorithm the
 * backend's hello reply lists from it. With one, requests of at least
 * compression_min_bytes (not the specification's handshake/auth commands)
 * are sent compressed when it makes them smaller; OP_COMPRESSED replies are
 * unwrapped before anything reads them. zlibCompressionLevel is honoured.
 */
#pragma once

#include <bson/bson.h>
#include <event2/buffer.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/wire.h"

struct server;
struct request;

/* Remember the URI's compressors (called by pool_init_all). */
void bcomp_init(const mongoc_uri_t *uri);

/* Add `compression: [...]` to the proxy's hello (nothing when the URI has none). */
void bcomp_extend_hello(bson_t *cmd);

/* A hello reply: pick s->compressor from its `compression` list. */
void bcomp_on_hello_reply(struct server *s, const bson_t *reply);

/* Compress req->msg in place (header already rewritten) when the rules allow. */
void bcomp_wrap_request(const struct server *s, struct request *req);

/* Unwrap a backend's OP_COMPRESSED reply into `plain`; false + err otherwise. */
bool bcomp_unwrap_reply(const uint8_t *data, size_t len, struct evbuffer *plain,
			struct wire_error *err) __attribute__((warn_unused_result));
