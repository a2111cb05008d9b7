/*
 * backend_compress.c — OP_COMPRESSED towards the backend (rules in
 * backend_compress.h).
 */
#include "pool/backend_compress.h"

#include <string.h>

#include "core/xalloc.h"
#include "core/compress.h"
#include "core/globals.h"
#include "core/request.h"
#include "core/stats.h"
#include "pool/pool.h"
#include "pool/server.h"

static struct compress_list offered; /* from backend_uri, in its order */
static int zlib_level = -1;

void bcomp_init(const mongoc_uri_t *uri)
{
	const bson_t *list = mongoc_uri_get_compressors(uri);
	bson_iter_t it;

	offered.n = 0;
	if (list != NULL && bson_iter_init(&it, list))
		while (bson_iter_next(&it) && offered.n < COMPRESS_NIDS) {
			int id = compress_id_by_name(bson_iter_key(&it));

			if (id > COMPRESS_NOOP && !compress_list_has(&offered, id))
				offered.ids[offered.n++] = (int8_t)id;
		}
	zlib_level = mongoc_uri_get_option_as_int32(uri, MONGOC_URI_ZLIBCOMPRESSIONLEVEL, -1);
	if (zlib_level < -1 || zlib_level > 9)
		zlib_level = -1;
}

void bcomp_extend_hello(bson_t *cmd)
{
	bson_t arr;
	char key[16];
	const char *k;

	if (offered.n == 0)
		return;
	BSON_APPEND_ARRAY_BEGIN(cmd, "compression", &arr);
	for (int i = 0; i < offered.n; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_utf8(&arr, k, -1, compress_name(offered.ids[i]), -1);
	}
	bson_append_array_end(cmd, &arr);
}

void bcomp_on_hello_reply(struct server *s, const bson_t *reply)
{
	struct compress_list theirs = {0};
	bson_iter_t it, arr;

	if (!bson_iter_init_find(&it, reply, "compression") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return;
	while (bson_iter_next(&arr) && theirs.n < COMPRESS_NIDS) {
		int id = BSON_ITER_HOLDS_UTF8(&arr)
			     ? compress_id_by_name(bson_iter_utf8(&arr, NULL))
			     : COMPRESS_NONE;

		if (id > COMPRESS_NOOP && !compress_list_has(&theirs, id))
			theirs.ids[theirs.n++] = (int8_t)id;
	}
	s->compressor = COMPRESS_NONE;
	for (int i = 0; i < offered.n && s->compressor == COMPRESS_NONE; i++)
		if (compress_list_has(&theirs, offered.ids[i]))
			s->compressor = offered.ids[i];
	if (s->compressor != COMPRESS_NONE)
		server_debug(s, "compression: %s", compress_name(s->compressor));
}

void bcomp_wrap_request(const struct server *s, struct request *req)
{
	size_t len = evbuffer_get_length(req->msg);
	struct evbuffer *packed;
	const uint8_t *msg;

	if (s->compressor <= COMPRESS_NOOP || len < (size_t)g.cfg.compression_min_bytes ||
	    compress_cmd_forbidden(req->cmd))
		return;
	msg = evbuffer_pullup(req->msg, -1);
	if ((size_t)wire_read_i32(msg) != len)
		return;
	packed = xevbuffer_new();
	if (compress_wrap(s->compressor, zlib_level, msg, len, packed)) {
		STAT_INC(backend_compressed_requests);
		evbuffer_drain(req->msg, len);
		evbuffer_add_buffer(req->msg, packed);
	}
	evbuffer_free(packed);
}

bool bcomp_unwrap_reply(const uint8_t *data, size_t len, struct evbuffer *plain,
			struct wire_error *err)
{
	int id;

	if (!compress_unwrap(data, len, WIRE_MAX_MESSAGE, plain, &id, err)) {
		STAT_INC(compress_refused);
		return false;
	}
	STAT_INC(backend_compressed_replies);
	return true;
}
