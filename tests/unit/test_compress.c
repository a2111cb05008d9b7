/*
 * test_compress.c — OP_COMPRESSED wrap/unwrap (core/compress.h) for snappy,
 * zlib, zstd and noop: round trips of a real OP_MSG, and every bound of the
 * unwrap (oversized uncompressedSize, zip bombs, length mismatches, corrupt
 * data, nesting, unknown ids), each refused with its error. Inputs are heap
 * copies of exactly their length (the Asan build sees any over-read).
 */
#include <criterion/criterion.h>
#include <event2/buffer.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "core/compress.h"
#include "core/stats.h"
#include "core/wire.h"

/* An OP_MSG {find: "c", filter: {_id: {$in: [...]}}, pad: "xxxx..."} of about n bytes. */
static struct evbuffer *sample_msg(size_t pad)
{
	struct evbuffer *b = evbuffer_new();
	char *s = malloc(pad + 1);
	bson_t doc;

	memset(s, 'x', pad);
	s[pad] = '\0';
	bson_init(&doc);
	BSON_APPEND_UTF8(&doc, "find", "c");
	BSON_APPEND_UTF8(&doc, "pad", s);
	BSON_APPEND_UTF8(&doc, "$db", "test");
	wire_append_msg(b, 77, 5, 0, &doc);
	bson_destroy(&doc);
	free(s);
	return b;
}

/* A heap copy of exactly the buffer's bytes. */
static uint8_t *exact(struct evbuffer *b, size_t *len)
{
	uint8_t *p;

	*len = evbuffer_get_length(b);
	p = malloc(*len);
	evbuffer_copyout(b, p, *len);
	return p;
}

/* An OP_COMPRESSED message around `body` as is (any bytes) with the given fields. */
static uint8_t *raw_compressed(int32_t orig, int32_t usize, int id, const void *body, size_t n,
			       size_t *len)
{
	uint8_t *p = malloc(COMPRESS_HEADER_LEN + n);

	*len = COMPRESS_HEADER_LEN + n;
	wire_write_i32(p, (int32_t)*len);
	wire_write_i32(p + 4, 9);
	wire_write_i32(p + 8, 0);
	wire_write_i32(p + 12, OP_COMPRESSED);
	wire_write_i32(p + 16, orig);
	wire_write_i32(p + 20, usize);
	p[24] = (uint8_t)id;
	memcpy(p + COMPRESS_HEADER_LEN, body, n);
	return p;
}

static void expect_refused(const uint8_t *m, size_t len, int code, const char *words)
{
	struct evbuffer *out = evbuffer_new();
	struct wire_error err;
	int id;

	cr_assert_not(compress_unwrap(m, len, WIRE_MAX_MESSAGE, out, &id, &err), "accepted: %s",
		      words);
	cr_expect_eq(err.code, code, "code %d for %s (%s)", err.code, words, err.msg);
	cr_expect(strstr(err.msg, words) != NULL, "error \"%s\" lacks \"%s\"", err.msg, words);
	cr_expect_eq(evbuffer_get_length(out), 0);
	evbuffer_free(out);
}

static void round_trip(int id)
{
	struct evbuffer *msg = sample_msg(4000), *wrapped = evbuffer_new(), *back = evbuffer_new();
	struct wire_error err;
	size_t mlen, wlen;
	uint8_t *m = exact(msg, &mlen), *w;
	uint64_t before =
	    stats.zlib_compressed_msgs + stats.snappy_compressed_msgs + stats.zstd_compressed_msgs;
	int got;

	cr_assert(compress_wrap(id, -1, m, mlen, wrapped), "%s wrap", compress_name(id));
	w = exact(wrapped, &wlen);
	cr_expect_lt(wlen, mlen / 4, "%s: %zu -> %zu bytes", compress_name(id), mlen, wlen);
	cr_expect_eq(wire_read_i32(w + 12), OP_COMPRESSED);
	cr_expect_eq(wire_read_i32(w + 4), 77, "requestID kept");
	cr_expect_eq(wire_read_i32(w + 8), 5, "responseTo kept");
	cr_expect_eq(wire_read_i32(w + 16), OP_MSG, "originalOpcode");
	cr_expect_eq((size_t)wire_read_i32(w + 20), mlen - WIRE_HEADER_LEN, "uncompressedSize");
	cr_expect_eq(w[24], id);
	cr_assert(compress_unwrap(w, wlen, WIRE_MAX_MESSAGE, back, &got, &err), "%s unwrap: %s",
		  compress_name(id), err.msg);
	cr_expect_eq(got, id);
	cr_assert_eq(evbuffer_get_length(back), mlen);
	cr_expect(memcmp(evbuffer_pullup(back, -1), m, mlen) == 0, "bytes differ after unwrap");
	cr_expect_eq(stats.zlib_compressed_msgs + stats.snappy_compressed_msgs +
			 stats.zstd_compressed_msgs,
		     before + 1);
	free(m);
	free(w);
	evbuffer_free(msg);
	evbuffer_free(wrapped);
	evbuffer_free(back);
}

Test(compress, round_trip_snappy)
{
	round_trip(COMPRESS_SNAPPY);
}
Test(compress, round_trip_zlib)
{
	round_trip(COMPRESS_ZLIB);
}
Test(compress, round_trip_zstd)
{
	round_trip(COMPRESS_ZSTD);
}

Test(compress, noop_unwraps)
{
	struct evbuffer *msg = sample_msg(10), *back = evbuffer_new();
	struct wire_error err;
	size_t mlen, clen;
	uint8_t *m = exact(msg, &mlen);
	uint8_t *c = raw_compressed(OP_MSG, (int32_t)(mlen - 16), 0, m + 16, mlen - 16, &clen);
	int id;

	cr_assert(compress_unwrap(c, clen, WIRE_MAX_MESSAGE, back, &id, &err), "%s", err.msg);
	cr_expect_eq(id, COMPRESS_NOOP);
	cr_expect_eq(evbuffer_get_length(back), mlen);
	cr_expect(memcmp(evbuffer_pullup(back, -1) + 16, m + 16, mlen - 16) == 0);
	free(m);
	free(c);
	evbuffer_free(msg);
	evbuffer_free(back);
}

Test(compress, small_or_incompressible_not_wrapped)
{
	struct evbuffer *msg = sample_msg(0), *out = evbuffer_new();
	size_t mlen;
	uint8_t *m = exact(msg, &mlen);

	/* ~60 bytes: the 25-byte header and codec framing make it no smaller */
	for (int id = COMPRESS_SNAPPY; id <= COMPRESS_ZSTD; id++)
		cr_expect_not(compress_wrap(id, -1, m, mlen, out), "%s wrapped a tiny message",
			      compress_name(id));
	cr_expect_not(compress_wrap(COMPRESS_NOOP, -1, m, mlen, out));
	cr_expect_eq(evbuffer_get_length(out), 0, "a refused wrap added bytes");
	free(m);
	evbuffer_free(msg);
	evbuffer_free(out);
}

Test(compress, oversized_uncompressed_size_refused)
{
	size_t len;
	uint8_t *c = raw_compressed(OP_MSG, WIRE_MAX_MESSAGE - 15, COMPRESS_ZLIB, "x", 1, &len);

	expect_refused(c, len, 10334, "out of range");
	free(c);
	c = raw_compressed(OP_MSG, -1, COMPRESS_ZLIB, "x", 1, &len);
	expect_refused(c, len, 10334, "out of range");
	free(c);
	c = raw_compressed(OP_MSG, 0, COMPRESS_ZLIB, "x", 1, &len);
	expect_refused(c, len, 10334, "out of range");
	free(c);
}

/* 40 MB of zeros deflate to ~40 KB; the header claims 1000 bytes. */
Test(compress, zlib_bomb_refused)
{
	size_t n = 40 * 1000 * 1000, len;
	uint8_t *zeros = calloc(1, n);
	uLongf zl = compressBound((uLong)n);
	uint8_t *z = malloc(zl), *c;

	cr_assert_eq(compress2(z, &zl, zeros, (uLong)n, 9), Z_OK);
	c = raw_compressed(OP_MSG, 1000, COMPRESS_ZLIB, z, zl, &len);
	expect_refused(c, len, 2, "inflates past uncompressedSize");
	free(c);
	/* Claimed larger than it is: a mismatch. */
	c = raw_compressed(OP_MSG, (int32_t)(n + 1), COMPRESS_ZLIB, z, zl, &len);
	expect_refused(c, len, 2, "shorter than uncompressedSize");
	free(c);
	free(zeros);
	free(z);
}

Test(compress, zstd_bomb_and_mismatch_refused)
{
	size_t n = 4 * 1000 * 1000, len;
	uint8_t *zeros = calloc(1, n);
	size_t cap = ZSTD_compressBound(n), zl;
	uint8_t *z = malloc(cap), *c;

	zl = ZSTD_compress(z, cap, zeros, n, 1);
	cr_assert_not(ZSTD_isError(zl));
	c = raw_compressed(OP_MSG, 1000, COMPRESS_ZSTD, z, zl, &len);
	expect_refused(c, len, 2, "zstd frame holds 4000000 bytes");
	free(c);
	/* The same frame without a content size: the one-shot decode stops at 1000. */
	{
		ZSTD_CCtx *cc = ZSTD_createCCtx();
		ZSTD_inBuffer in = {zeros, n, 0};
		ZSTD_outBuffer out = {z, cap, 0};

		ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
		cr_assert_eq(ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end), 0);
		ZSTD_freeCCtx(cc);
		cr_assert_eq(ZSTD_getFrameContentSize(z, out.pos), ZSTD_CONTENTSIZE_UNKNOWN);
		c = raw_compressed(OP_MSG, 1000, COMPRESS_ZSTD, z, out.pos, &len);
		expect_refused(c, len, 2, "zstd");
		free(c);
	}
	free(zeros);
	free(z);
}

Test(compress, snappy_length_checked)
{
	char src[3000], dst[4000];
	size_t dl = sizeof(dst), len;
	uint8_t *c;

	memset(src, 'a', sizeof(src));
	cr_assert_eq(snappy_compress(src, sizeof(src), dst, &dl), SNAPPY_OK);
	c = raw_compressed(OP_MSG, 100, COMPRESS_SNAPPY, dst, dl, &len);
	expect_refused(c, len, 2, "snappy data holds 3000 bytes");
	free(c);
	dst[dl - 1] ^= 0x55; /* corrupt the last element */
	c = raw_compressed(OP_MSG, 3000, COMPRESS_SNAPPY, dst, dl - 2, &len);
	expect_refused(c, len, 2, "corrupt snappy data");
	free(c);
}

Test(compress, corrupt_and_malformed_refused)
{
	static const uint8_t junk[] = {0x78, 0x9c, 0xff, 0xff, 0x00, 0x01, 0x02, 0x03};
	size_t len;
	uint8_t *c;

	c = raw_compressed(OP_MSG, 100, COMPRESS_ZLIB, junk, sizeof(junk), &len);
	expect_refused(c, len, 2, "zlib");
	free(c);
	c = raw_compressed(OP_MSG, 100, COMPRESS_ZSTD, junk, sizeof(junk), &len);
	expect_refused(c, len, 2, "corrupt zstd data");
	free(c);
	c = raw_compressed(OP_MSG, 100, 7, junk, sizeof(junk), &len);
	expect_refused(c, len, 2, "unknown compressor id 7");
	free(c);
	c = raw_compressed(OP_COMPRESSED, 100, COMPRESS_NOOP, junk, sizeof(junk), &len);
	expect_refused(c, len, 2, "originalOpcode is OP_COMPRESSED");
	free(c);
	c = raw_compressed(OP_MSG, 100, COMPRESS_NOOP, junk, sizeof(junk), &len);
	expect_refused(c, len, 2, "noop body is 8 bytes");
	free(c);
	c = raw_compressed(OP_MSG, 100, COMPRESS_NOOP, junk, 0, &len);
	expect_refused(c, len - 1, 2, "too short");
	free(c);
}

Test(compress, zlib_truncated_and_trailing_refused)
{
	struct evbuffer *msg = sample_msg(3000), *w = evbuffer_new();
	size_t mlen, wlen, len;
	uint8_t *m = exact(msg, &mlen), *wb, *c;

	cr_assert(compress_wrap(COMPRESS_ZLIB, -1, m, mlen, w));
	wb = exact(w, &wlen);
	c = raw_compressed(OP_MSG, (int32_t)(mlen - 16), COMPRESS_ZLIB, wb + 25, wlen - 25 - 3,
			   &len);
	expect_refused(c, len, 2, "truncated zlib data");
	free(c);
	{
		uint8_t *longer = malloc(wlen - 25 + 4);

		memcpy(longer, wb + 25, wlen - 25);
		memcpy(longer + wlen - 25, "junk", 4);
		c = raw_compressed(OP_MSG, (int32_t)(mlen - 16), COMPRESS_ZLIB, longer,
				   wlen - 25 + 4, &len);
		expect_refused(c, len, 2, "bytes after the zlib stream");
		free(c);
		free(longer);
	}
	free(m);
	free(wb);
	evbuffer_free(msg);
	evbuffer_free(w);
}

Test(compress, list_parse)
{
	struct compress_list l;
	char err[128];

	cr_assert(compress_list_parse("snappy, zstd,zlib", &l, err, sizeof(err)), "%s", err);
	cr_expect_eq(l.n, 3);
	cr_expect_eq(l.ids[0], COMPRESS_SNAPPY);
	cr_expect_eq(l.ids[1], COMPRESS_ZSTD);
	cr_expect_eq(l.ids[2], COMPRESS_ZLIB);
	cr_assert(compress_list_parse("", &l, err, sizeof(err)));
	cr_expect_eq(l.n, 0);
	cr_expect_not(compress_list_parse("zlib,lz4", &l, err, sizeof(err)));
	cr_expect(strstr(err, "lz4") != NULL, "%s", err);
	cr_expect_not(compress_list_parse("zlib,zlib", &l, err, sizeof(err)));
	cr_expect_not(compress_list_parse("noop", &l, err, sizeof(err)));
	cr_expect(compress_cmd_forbidden("ismaster"));
	cr_expect(compress_cmd_forbidden("saslContinue"));
	cr_expect_not(compress_cmd_forbidden("find"));
}
