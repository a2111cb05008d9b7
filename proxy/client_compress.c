/*
 * client_compress.c — OP_COMPRESSED towards clients (rules in client_compress.h).
 */
#include "proxy/client_compress.h"

#include <stdio.h>
#include <string.h>

#include "core/xalloc.h"
#include "core/errors.h"
#include "core/compress.h"
#include "core/globals.h"
#include "core/request.h"
#include "core/stats.h"
#include "proxy/client.h"

static void enabled(struct compress_list *l)
{
	char err[128];

	if (!compress_list_parse(g.cfg.compressors, l, err, sizeof(err)))
		l->n = 0; /* cannot happen: validated at load */
}

void ccomp_hello(struct client *c, const bson_t *cmd, bson_t *reply)
{
	struct compress_list mine, common = {0};
	bson_iter_t it, arr;
	bson_t out;
	char key[16];
	const char *k;

	if (!bson_iter_init_find(&it, cmd, "compression") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return;
	enabled(&mine);
	while (bson_iter_next(&arr)) {
		int id;

		if (!BSON_ITER_HOLDS_UTF8(&arr))
			continue;
		id = compress_id_by_name(bson_iter_utf8(&arr, NULL));
		if (compress_list_has(&mine, id) && !compress_list_has(&common, id))
			common.ids[common.n++] = (int8_t)id;
	}
	c->compressor = common.n > 0 ? common.ids[0] : COMPRESS_NONE;
	BSON_APPEND_ARRAY_BEGIN(reply, "compression", &out);
	for (int i = 0; i < common.n; i++) {
		bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
		bson_append_utf8(&out, k, -1, compress_name(common.ids[i]), -1);
	}
	bson_append_array_end(reply, &out);
	client_debug(c, "compression: %s", common.n ? compress_name(common.ids[0]) : "none");
}

bool ccomp_unwrap(struct client *c, const uint8_t *data, size_t len, struct evbuffer *plain,
		  struct wire_error *err)
{
	struct compress_list mine;
	int id;

	enabled(&mine);
	if (len >= COMPRESS_HEADER_LEN && data[COMPRESS_HEADER_LEN - 1] != COMPRESS_NOOP &&
	    compress_name(data[COMPRESS_HEADER_LEN - 1]) != NULL &&
	    !compress_list_has(&mine, data[COMPRESS_HEADER_LEN - 1])) {
		STAT_INC(compress_refused);
		wire_set_error(err, MP_ERR(BAD_VALUE),
			       "mongoplex: OP_COMPRESSED with %s, which is not enabled "
			       "(compressors = \"%s\")",
			       compress_name(data[COMPRESS_HEADER_LEN - 1]), g.cfg.compressors);
		return false;
	}
	if (!compress_unwrap(data, len, WIRE_MAX_MESSAGE, plain, &id, err)) {
		char msg[sizeof(err->msg)];

		STAT_INC(compress_refused);
		snprintf(msg, sizeof(msg), "mongoplex: %s", err->msg);
		memcpy(err->msg, msg, sizeof(msg));
		return false;
	}
	c->msg_compressor = (int8_t)id;
	return true;
}

void ccomp_reply(const struct client *c, const struct request *req, struct evbuffer *reply)
{
	int id = req->reply_compressor > COMPRESS_NOOP ? req->reply_compressor : c->compressor;
	size_t len = evbuffer_get_length(reply);
	struct evbuffer *packed;
	const uint8_t *msg;

	if (id <= COMPRESS_NOOP || len < (size_t)g.cfg.compression_min_bytes ||
	    len < WIRE_HEADER_LEN || compress_cmd_forbidden(req->cmd))
		return;
	msg = evbuffer_pullup(reply, -1);
	if ((size_t)wire_read_i32(msg) != len)
		return; /* not exactly one message */
	packed = xevbuffer_new();
	if (compress_wrap(id, -1, msg, len, packed)) {
		evbuffer_drain(reply, len);
		evbuffer_add_buffer(reply, packed);
	}
	evbuffer_free(packed);
}
