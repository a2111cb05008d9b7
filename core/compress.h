/*
 * compress.h — OP_COMPRESSED (wire compression specification): the
 * compressors snappy (1), zlib (2), zstd (3) and noop (0), wrapping a whole
 * message and unwrapping one, bounded.
 *
 * An OP_COMPRESSED message is a 16-byte header (opcode 2012, the original
 * message's requestID and responseTo), originalOpcode, uncompressedSize (the
 * original message without its header) and a compressor id, then the
 * compressed bytes. compress_unwrap rebuilds the original message, header
 * included; compress_wrap makes one. Both count into the per-algorithm stats
 * counters (core/stats.h).
 */
#pragma once

#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/wire.h"

enum compress_id {
	COMPRESS_NONE = -1, /* not compressed / not negotiated */
	COMPRESS_NOOP = 0,
	COMPRESS_SNAPPY = 1,
	COMPRESS_ZLIB = 2,
	COMPRESS_ZSTD = 3,
};
#define COMPRESS_NIDS	    4
#define COMPRESS_HEADER_LEN (WIRE_HEADER_LEN + 9)

/* "snappy", "zlib", "zstd", "noop"; NULL for anything else. */
const char *compress_name(int id);
/* The id of a compressor name (exact, as in hello's `compression`), or COMPRESS_NONE. */
int compress_id_by_name(const char *name);

/*
 * A list of compressors in preference order, as the `compressors` setting
 * and a URI give it. Rules: no duplicates, only snappy/zlib/zstd (noop is
 * never offered), at most COMPRESS_NIDS entries.
 */
struct compress_list {
	int n;
	int8_t ids[COMPRESS_NIDS];
};

/* Parse "snappy,zstd,zlib" (commas, optional blanks; empty: no compressors).
 * False with a message for an unknown or repeated name. */
bool compress_list_parse(const char *text, struct compress_list *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
bool compress_list_has(const struct compress_list *l, int id);

/*
 * Unwrap the OP_COMPRESSED message data[0..len) into `out` (the original
 * message, its header rebuilt from the outer one). Checked before any output
 * is allocated: the header fields, originalOpcode (not OP_COMPRESSED itself),
 * 16 + uncompressedSize <= max_len, snappy's own length equal to it; output
 * grows as it is produced and may never pass uncompressedSize (a zip bomb
 * stops there); a shorter output, trailing input or a decoder error is an
 * error. *id_out gets the compressor id (when it was readable).
 */
bool compress_unwrap(const uint8_t *data, size_t len, size_t max_len, struct evbuffer *out,
		     int *id_out, struct wire_error *err) __attribute__((warn_unused_result));

/*
 * Wrap the whole message msg[0..len) (header included) with compressor `id`
 * into `out`. zlib_level: -1 default, else 0..9. False (nothing added) when
 * the compressor fails or the result would not be smaller than the message.
 */
bool compress_wrap(int id, int zlib_level, const uint8_t *msg, size_t len, struct evbuffer *out)
    __attribute__((warn_unused_result));

/* Commands whose messages are never compressed (the specification's list:
 * hello, isMaster, saslStart, saslContinue, getnonce, authenticate,
 * createUser, updateUser, copydbSaslStart, copydbgetnonce, copydb). */
bool compress_cmd_forbidden(const char *cmd);
