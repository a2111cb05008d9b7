/*
 * compress.c — OP_COMPRESSED wrap/unwrap with snappy, zlib and zstd
 * (see compress.h for the bounds every unwrap applies).
 *
 * Output of an unwrap is one heap block handed to the evbuffer by reference
 * (freed with it), so the original message is contiguous without a copy.
 * zlib is inflated into a block that doubles up to uncompressedSize + 1, so
 * memory follows what the input really produces; snappy is validated (a
 * pass that allocates nothing) before its block is allocated; zstd
 * decompresses in one shot into a block of exactly uncompressedSize, so a
 * frame producing more fails there (dstSize_tooSmall).
 */
#include "core/compress.h"

#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>

#include "core/xalloc.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/stats.h"

#define ZLIB_FIRST_BLOCK (64 * 1024)

static const char *const names[COMPRESS_NIDS] = {"noop", "snappy", "zlib", "zstd"};

const char *compress_name(int id)
{
	return id >= 0 && id < COMPRESS_NIDS ? names[id] : NULL;
}

int compress_id_by_name(const char *name)
{
	for (int i = 0; i < COMPRESS_NIDS; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return COMPRESS_NONE;
}

bool compress_list_has(const struct compress_list *l, int id)
{
	for (int i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	return false;
}

bool compress_list_parse(const char *text, struct compress_list *out, char *err, size_t errlen)
{
	char word[16];
	const char *p = text;

	out->n = 0;
	while (*p != '\0') {
		size_t n = strcspn(p, ", \t");
		int id;

		if (n == 0) {
			p++;
			continue;
		}
		snprintf(word, sizeof(word), "%.*s", (int)(n < sizeof(word) ? n : sizeof(word) - 1),
			 p);
		id = n < sizeof(word) ? compress_id_by_name(word) : COMPRESS_NONE;
		if (id <= COMPRESS_NOOP) {
			snprintf(err, errlen, "unknown compressor \"%.*s\" (snappy, zlib, zstd)",
				 (int)(n > 32 ? 32 : n), p);
			return false;
		}
		if (compress_list_has(out, id)) {
			snprintf(err, errlen, "compressor %s listed twice", names[id]);
			return false;
		}
		out->ids[out->n++] = (int8_t)id;
		p += n;
	}
	return true;
}

bool compress_cmd_forbidden(const char *cmd)
{
	static const char *const list[] = {"hello",	     "isMaster",   "saslStart",
					   "saslContinue",   "getnonce",   "authenticate",
					   "createUser",     "updateUser", "copydbSaslStart",
					   "copydbgetnonce", "copydb",	   NULL};

	for (int i = 0; list[i] != NULL; i++)
		if (strcasecmp(cmd, list[i]) == 0)
			return true;
	return false;
}

static void count(int id, bool wrap, size_t raw, size_t wire)
{
#define COUNT(a)                                                                                   \
	do {                                                                                       \
		if (wrap) {                                                                        \
			stats.a##_compressed_msgs++;                                               \
			stats.a##_compressed_bytes_raw += raw;                                     \
			stats.a##_compressed_bytes_wire += wire;                                   \
		} else {                                                                           \
			stats.a##_decompressed_msgs++;                                             \
			stats.a##_decompressed_bytes_raw += raw;                                   \
			stats.a##_decompressed_bytes_wire += wire;                                 \
		}                                                                                  \
	} while (0)
	switch (id) {
	case COMPRESS_SNAPPY:
		COUNT(snappy);
		break;
	case COMPRESS_ZLIB:
		COUNT(zlib);
		break;
	case COMPRESS_ZSTD:
		COUNT(zstd);
		break;
	default:
		break;
	}
#undef COUNT
}

/* ---- unwrap ---- */

/* What the 25-byte header says, checked. */
struct unwrap_hdr {
	struct wire_header h;
	int32_t orig_opcode;
	size_t usize; /* uncompressedSize */
	int id;
	const uint8_t *in; /* compressed bytes */
	size_t inlen;
};

static bool read_hdr(const uint8_t *data, size_t len, size_t max_len, struct unwrap_hdr *u,
		     struct wire_error *err)
{
	int32_t usize;

	if (len < COMPRESS_HEADER_LEN) {
		wire_set_error(err, MP_ERR(BAD_VALUE),
			       "OP_COMPRESSED: message too short (%zu bytes)", len);
		return false;
	}
	wire_read_header(data, &u->h);
	u->orig_opcode = wire_read_i32(data + WIRE_HEADER_LEN);
	usize = wire_read_i32(data + WIRE_HEADER_LEN + 4);
	u->id = data[WIRE_HEADER_LEN + 8];
	u->in = data + COMPRESS_HEADER_LEN;
	u->inlen = len - COMPRESS_HEADER_LEN;
	if (u->h.opcode != OP_COMPRESSED || (size_t)u->h.len != len) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_COMPRESSED: bad header");
		return false;
	}
	if (u->orig_opcode == OP_COMPRESSED) {
		wire_set_error(err, MP_ERR(BAD_VALUE),
			       "OP_COMPRESSED: originalOpcode is OP_COMPRESSED");
		return false;
	}
	if (usize <= 0 || (size_t)usize > max_len - WIRE_HEADER_LEN) {
		wire_set_error(err, MP_ERR(BSON_OBJECT_TOO_LARGE),
			       "OP_COMPRESSED: uncompressedSize %d is out of range (1..%zu)", usize,
			       max_len - WIRE_HEADER_LEN);
		return false;
	}
	u->usize = (size_t)usize;
	if (compress_name(u->id) == NULL) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_COMPRESSED: unknown compressor id %d",
			       u->id);
		return false;
	}
	return true;
}

static uint8_t *alloc_block(size_t n)
{
	return xmalloc(n);
}

static bool unwrap_noop(const struct unwrap_hdr *u, uint8_t **blk, struct wire_error *err)
{
	if (u->inlen != u->usize) {
		wire_set_error(err, MP_ERR(BAD_VALUE),
			       "OP_COMPRESSED: noop body is %zu bytes, uncompressedSize %zu",
			       u->inlen, u->usize);
		return false;
	}
	*blk = alloc_block(WIRE_HEADER_LEN + u->usize);
	memcpy(*blk + WIRE_HEADER_LEN, u->in, u->inlen);
	return true;
}

static bool unwrap_snappy(const struct unwrap_hdr *u, uint8_t **blk, struct wire_error *err)
{
	size_t n;

	if (snappy_uncompressed_length((const char *)u->in, u->inlen, &n) != SNAPPY_OK ||
	    snappy_validate_compressed_buffer((const char *)u->in, u->inlen) != SNAPPY_OK) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_COMPRESSED: corrupt snappy data");
		return false;
	}
	if (n != u->usize) {
		wire_set_error(err, MP_ERR(BAD_VALUE),
			       "OP_COMPRESSED: snappy data holds %zu bytes, uncompressedSize %zu",
			       n, u->usize);
		return false;
	}
	*blk = alloc_block(WIRE_HEADER_LEN + u->usize);
	if (snappy_uncompress((const char *)u->in, u->inlen, (char *)*blk + WIRE_HEADER_LEN, &n) !=
		SNAPPY_OK ||
	    n != u->usize) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_COMPRESSED: corrupt snappy data");
		return false;
	}
	return true;
}

static bool zlib_fail(z_stream *zs, struct wire_error *err, const char *what)
{
	inflateEnd(zs);
	wire_set_error(err, MP_ERR(BAD_VALUE), "OP_COMPRESSED: %s", what);
	return false;
}

/* Inflate into a block that doubles up to usize + 1 bytes of output: the
 * extra byte tells a stream longer than its header says. */
static bool unwrap_zlib(const struct unwrap_hdr *u, uint8_t **blk, struct wire_error *err)
{
	size_t limit = u->usize + 1, cap = limit < ZLIB_FIRST_BLOCK ? limit : ZLIB_FIRST_BLOCK;
	z_stream zs;
	int rc;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit(&zs) != Z_OK)
		fatal("out of memory");
	*blk = alloc_block(WIRE_HEADER_LEN + cap);
	zs.next_in = (Bytef *)u->in;
	zs.avail_in = (uInt)u->inlen;
	zs.next_out = *blk + WIRE_HEADER_LEN;
	zs.avail_out = (uInt)cap;
	for (;;) {
		rc = inflate(&zs, Z_NO_FLUSH);
		if (rc == Z_STREAM_END)
			break;
		if (rc != Z_OK && rc != Z_BUF_ERROR)
			return zlib_fail(&zs, err, "corrupt zlib data");
		if (zs.avail_out > 0) /* all input used, stream not ended */
			return zlib_fail(&zs, err, "truncated zlib data");
		if (cap == limit)
			return zlib_fail(&zs, err, "zlib data inflates past uncompressedSize");
		cap = cap * 2 < limit ? cap * 2 : limit;
		*blk = xrealloc(*blk, WIRE_HEADER_LEN + cap);
		zs.next_out = *blk + WIRE_HEADER_LEN + zs.total_out;
		zs.avail_out = (uInt)(cap - zs.total_out);
	}
	if (zs.total_out != u->usize || zs.avail_in != 0)
		return zlib_fail(&zs, err,
				 zs.avail_in != 0 ? "bytes after the zlib stream"
						  : "zlib data shorter than uncompressedSize");
	inflateEnd(&zs);
	return true;
}

static bool unwrap_zstd(const struct unwrap_hdr *u, uint8_t **blk, struct wire_error *err)
{
	static ZSTD_DCtx *dctx;
	unsigned long long csize = ZSTD_getFrameContentSize(u->in, u->inlen);
	size_t n;

	if (csize == ZSTD_CONTENTSIZE_ERROR ||
	    ZSTD_findFrameCompressedSize(u->in, u->inlen) != u->inlen) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_COMPRESSED: corrupt zstd data");
		return false;
	}
	if (csize != ZSTD_CONTENTSIZE_UNKNOWN && csize != u->usize) {
		wire_set_error(err, MP_ERR(BAD_VALUE),
			       "OP_COMPRESSED: zstd frame holds %llu bytes, uncompressedSize %zu",
			       csize, u->usize);
		return false;
	}
	if (dctx == NULL && (dctx = ZSTD_createDCtx()) == NULL)
		fatal("out of memory");
	*blk = alloc_block(WIRE_HEADER_LEN + u->usize);
	n = ZSTD_decompressDCtx(dctx, *blk + WIRE_HEADER_LEN, u->usize, u->in, u->inlen);
	if (ZSTD_isError(n) || n != u->usize) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_COMPRESSED: zstd: %s",
			       ZSTD_isError(n) ? ZSTD_getErrorName(n)
					       : "data shorter than uncompressedSize");
		return false;
	}
	return true;
}

static void free_block(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	free((void *)data);
}

bool compress_unwrap(const uint8_t *data, size_t len, size_t max_len, struct evbuffer *out,
		     int *id_out, struct wire_error *err)
{
	struct unwrap_hdr u;
	uint8_t *blk = NULL;
	bool ok;

	*id_out = COMPRESS_NONE;
	if (!read_hdr(data, len, max_len, &u, err))
		return false;
	*id_out = u.id;
	switch (u.id) {
	case COMPRESS_SNAPPY:
		ok = unwrap_snappy(&u, &blk, err);
		break;
	case COMPRESS_ZLIB:
		ok = unwrap_zlib(&u, &blk, err);
		break;
	case COMPRESS_ZSTD:
		ok = unwrap_zstd(&u, &blk, err);
		break;
	default:
		ok = unwrap_noop(&u, &blk, err);
		break;
	}
	if (!ok) {
		free(blk);
		return false;
	}
	wire_write_i32(blk, (int32_t)(WIRE_HEADER_LEN + u.usize));
	wire_write_i32(blk + 4, u.h.request_id);
	wire_write_i32(blk + 8, u.h.response_to);
	wire_write_i32(blk + 12, u.orig_opcode);
	if (evbuffer_add_reference(out, blk, WIRE_HEADER_LEN + u.usize, free_block, NULL) != 0) {
		free(blk);
		fatal("out of memory");
	}
	count(u.id, false, WIRE_HEADER_LEN + u.usize, len);
	return true;
}

/* ---- wrap ---- */

static size_t bound(int id, size_t n)
{
	switch (id) {
	case COMPRESS_SNAPPY:
		return snappy_max_compressed_length(n);
	case COMPRESS_ZLIB:
		return compressBound((uLong)n);
	default:
		return ZSTD_compressBound(n);
	}
}

/* Compress src into dst (room cap); the compressed length, 0 on failure. */
static size_t squeeze(int id, int zlib_level, const uint8_t *src, size_t n, uint8_t *dst,
		      size_t cap)
{
	static ZSTD_CCtx *cctx;
	size_t out = cap;
	uLongf zout = (uLongf)cap;

	switch (id) {
	case COMPRESS_SNAPPY:
		return snappy_compress((const char *)src, n, (char *)dst, &out) == SNAPPY_OK ? out
											     : 0;
	case COMPRESS_ZLIB:
		return compress2(dst, &zout, src, (uLong)n, zlib_level) == Z_OK ? (size_t)zout : 0;
	default:
		if (cctx == NULL && (cctx = ZSTD_createCCtx()) == NULL)
			fatal("out of memory");
		out = ZSTD_compressCCtx(cctx, dst, cap, src, n, ZSTD_CLEVEL_DEFAULT);
		return ZSTD_isError(out) ? 0 : out;
	}
}

bool compress_wrap(int id, int zlib_level, const uint8_t *msg, size_t len, struct evbuffer *out)
{
	struct evbuffer_iovec v;
	size_t body, cap, clen;
	uint8_t *p;

	if (id < COMPRESS_SNAPPY || id > COMPRESS_ZSTD || len <= WIRE_HEADER_LEN)
		return false;
	body = len - WIRE_HEADER_LEN;
	cap = bound(id, body);
	if (evbuffer_reserve_space(out, (ev_ssize_t)(COMPRESS_HEADER_LEN + cap), &v, 1) != 1)
		return false;
	p = v.iov_base;
	clen = squeeze(id, zlib_level, msg + WIRE_HEADER_LEN, body, p + COMPRESS_HEADER_LEN, cap);
	if (clen == 0 || COMPRESS_HEADER_LEN + clen >= len)
		return false; /* reserved space not committed: nothing added */
	memcpy(p, msg, WIRE_HEADER_LEN);
	wire_write_i32(p, (int32_t)(COMPRESS_HEADER_LEN + clen));
	wire_write_i32(p + 12, OP_COMPRESSED);
	memcpy(p + WIRE_HEADER_LEN, msg + 12, 4); /* originalOpcode */
	wire_write_i32(p + WIRE_HEADER_LEN + 4, (int32_t)body);
	p[WIRE_HEADER_LEN + 8] = (uint8_t)id;
	v.iov_len = COMPRESS_HEADER_LEN + clen;
	if (evbuffer_commit_space(out, &v, 1) != 0)
		return false;
	count(id, true, len, v.iov_len);
	return true;
}
