/*
 * fuzz_compress.c — libFuzzer target for OP_COMPRESSED (core/compress.c).
 *
 * Input byte 0 picks a stage:
 *  - unwrap: the rest is the body of an OP_COMPRESSED message whose header
 *    fields (originalOpcode, uncompressedSize, compressor id) come from the
 *    next 6 bytes; compress_unwrap runs on a heap copy of exactly the
 *    message, with a small max_len (64 KB) so oversized claims are hit.
 *    Accepted: the output is exactly 16 + uncompressedSize bytes with the
 *    header rebuilt; refused: nothing was added.
 *  - round trip: the rest is the body of an OP_MSG-like message wrapped with
 *    each compressor; when wrapped, the unwrap gives back the same bytes.
 * Any failed check aborts. Build and run: scripts/fuzz.sh fuzz_compress.
 */
// clang-format off
// FUZZ_SOURCES: core/compress.c core/wire.c core/crc32c.c core/bsonval.c core/errors.c core/xalloc.c
// FUZZ_PKGS: libbson-1.0 libevent zlib libzstd snappy
// FUZZ_SEEDS: tests/fuzz/seeds_compress.py
// FUZZ_ARGS: -max_len=70000
// clang-format on
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compress.h"
#include "core/stats.h"
#include "core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct mp_counters fuzz_stats; /* core/stats.c is not linked */
struct mp_counters *stats_p = &fuzz_stats;

_Noreturn void fatal(const char *fmt, ...)
{
	(void)fmt;
	abort();
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#define FUZZ_MAX_LEN (64 * 1024)

static void stage_unwrap(const uint8_t *p, size_t n)
{
	struct evbuffer *out = evbuffer_new();
	struct wire_error err;
	size_t len;
	uint8_t *m;
	int id;

	if (n < 6)
		n = 0;
	len = COMPRESS_HEADER_LEN + (n ? n - 6 : 0);
	m = malloc(len);
	wire_write_i32(m, (int32_t)len);
	wire_write_i32(m + 4, 11);
	wire_write_i32(m + 8, 12);
	wire_write_i32(m + 12, OP_COMPRESSED);
	wire_write_i32(m + 16, n ? (p[0] & 1 ? OP_MSG : OP_COMPRESSED - (p[0] >> 7)) : OP_MSG);
	wire_write_i32(m + 20, n ? (int32_t)((uint32_t)p[1] | (uint32_t)p[2] << 8 |
					     (uint32_t)p[3] << 16 | (uint32_t)p[4] << 24)
				 : 0);
	m[24] = n ? p[5] % 5 : 0;
	if (n)
		memcpy(m + COMPRESS_HEADER_LEN, p + 6, n - 6);
	if (compress_unwrap(m, len, FUZZ_MAX_LEN, out, &id, &err)) {
		const uint8_t *o = evbuffer_pullup(out, -1);
		size_t olen = evbuffer_get_length(out);

		CHECK(olen == WIRE_HEADER_LEN + (size_t)wire_read_i32(m + 20));
		CHECK(olen <= FUZZ_MAX_LEN);
		CHECK(wire_read_i32(o) == (int32_t)olen);
		CHECK(wire_read_i32(o + 4) == 11 && wire_read_i32(o + 8) == 12);
		CHECK(wire_read_i32(o + 12) == wire_read_i32(m + 16));
		CHECK(id == m[24]);
	} else {
		CHECK(evbuffer_get_length(out) == 0);
		CHECK(err.msg[0] != '\0');
	}
	free(m);
	evbuffer_free(out);
}

static void stage_round_trip(const uint8_t *p, size_t n)
{
	size_t len = WIRE_HEADER_LEN + n;
	uint8_t *m = malloc(len);

	wire_write_i32(m, (int32_t)len);
	wire_write_i32(m + 4, 21);
	wire_write_i32(m + 8, 22);
	wire_write_i32(m + 12, OP_MSG);
	memcpy(m + WIRE_HEADER_LEN, p, n);
	for (int id = COMPRESS_SNAPPY; id <= COMPRESS_ZSTD; id++) {
		struct evbuffer *w = evbuffer_new(), *back = evbuffer_new();
		struct wire_error err;
		int got;

		if (compress_wrap(id, -1, m, len, w)) {
			size_t wlen = evbuffer_get_length(w);
			uint8_t *wc = malloc(wlen);

			CHECK(wlen < len);
			evbuffer_copyout(w, wc, wlen);
			CHECK(compress_unwrap(wc, wlen, WIRE_MAX_MESSAGE, back, &got, &err));
			CHECK(got == id && evbuffer_get_length(back) == len);
			CHECK(memcmp(evbuffer_pullup(back, -1), m, len) == 0);
			free(wc);
		} else {
			CHECK(evbuffer_get_length(w) == 0);
		}
		evbuffer_free(w);
		evbuffer_free(back);
	}
	free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		stage_round_trip(data + 1, size - 1);
	else
		stage_unwrap(data + 1, size - 1);
	return 0;
}
