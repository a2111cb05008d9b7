/*
 * fuzz_wire.c — libFuzzer entry point for the wire framer and validators.
 *
 * Treats the input as bytes arriving on a client socket: frames messages with
 * wire_frame_check exactly as the client loop does, and runs each complete one
 * through wire_parse_msg (and, when valid, wire_msg_each_sequence and
 * wire_msg_prepare_forward) or wire_parse_query. Every message is parsed from
 * a heap copy of exactly its length, so AddressSanitizer sees any read past
 * its end. Any crash, sanitizer report or failed check below is a bug.
 * Build and run: see README.md beside this file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool count_docs(const char *ident, const uint8_t *docs, size_t len, void *arg)
{
	size_t off = 0;

	/* The validator promised whole documents: walk them. */
	while (off < len) {
		int32_t dl = wire_read_i32(docs + off);

		if (dl < 5 || (size_t)dl > len - off)
			abort();
		off += (size_t)dl;
	}
	(*(size_t *)arg) += strlen(ident);
	return true;
}

static void one_message(const uint8_t *msg, size_t len)
{
	uint8_t *copy = malloc(len);
	struct wire_error err;
	int32_t opcode = wire_read_i32(msg + 12);

	memcpy(copy, msg, len);
	memset(&err, 0, sizeof(err));
	if (opcode == OP_QUERY) {
		struct wire_query q;

		if (wire_parse_query(copy, len, &q, &err)) {
			bson_iter_t it;

			/* The unwrapped query must be a valid document. */
			if (!bson_validate(&q.query, BSON_VALIDATE_NONE, NULL))
				abort();
			if (bson_iter_init(&it, &q.query))
				while (bson_iter_next(&it))
					;
		} else if (err.codename == NULL || err.msg[0] == '\0') {
			abort(); /* every refusal must carry an error */
		}
	} else {
		struct wire_msg m;

		if (wire_parse_msg(copy, len, &m, &err)) {
			size_t n = 0, newlen;
			struct wire_msg again;

			if (!bson_validate(&m.body, BSON_VALIDATE_NONE, NULL))
				abort();
			wire_msg_each_sequence(copy, len, &m, count_docs, &n);
			/* What the proxy forwards must still be a valid message. */
			newlen = wire_msg_prepare_forward(copy, len);
			memset(&err, 0, sizeof(err));
			if (!wire_parse_msg(copy, newlen, &again, &err))
				abort();
		} else if (err.codename == NULL || err.msg[0] == '\0') {
			abort();
		}
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Several messages may arrive back to back, as on a pipelined socket. */
	while (size > 0) {
		int32_t len = 0;

		switch (wire_frame_check(data, size, &len)) {
		case WIRE_FRAME_NEED_MORE:
		case WIRE_FRAME_BAD:
			return 0;
		case WIRE_FRAME_READY:
			if (len < WIRE_HEADER_LEN || (size_t)len > size)
				abort(); /* READY promises a whole, sane message */
			one_message(data, (size_t)len);
			data += len;
			size -= (size_t)len;
			break;
		}
	}
	return 0;
}
