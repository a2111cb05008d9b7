/*
 * fuzz_wire.c — libFuzzer entry point for the wire framer and validators.
 *
 * Treats the input as bytes arriving on a client socket: frames messages with
 * wire_frame_check exactly as the client loop does, and runs each complete one
 * through wire_parse_msg (and, when valid, wire_msg_each_sequence and
 * wire_msg_prepare_forward) or wire_parse_query. Every message is parsed from
 * a heap copy of exactly its length, so AddressSanitizer sees any read past
 * its end. Any crash, sanitizer report or failed check below is a bug.
 *
 * A second, structure-aware stage (deep_stage) turns the first input bytes
 * into a depth (up to ~10,000) and a container kind per level (document,
 * array, code-with-scope), builds that chain as an OP_MSG body, optionally
 * corrupts one byte, and checks that the depth limit is applied exactly
 * (200 for requests, 220 for replies, code 15) without recursion.
 * Every accepted body is also walked with bsonval_it (the router's and the
 * batcher's cheap top-level walk), which must agree with bson_iter.
 * Build and run: scripts/fuzz.sh (see README.md beside this file).
 *
 * FUZZ_SOURCES: core/wire.c core/crc32c.c core/bsonval.c core/errors.c
 * FUZZ_SEEDS: tests/fuzz/seeds.py
 * FUZZ_ARGS: -max_len=4096
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/bsonval.h"
#include "core/wire.h"

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

/* bsonval_it over a validated body visits what bson_iter visits. */
static void check_walk(const bson_t *body)
{
	const uint8_t *d = bson_get_data(body);
	struct bsonval_it it;
	bson_iter_t ref;

	bsonval_it_init(&it, d);
	if (!bson_iter_init(&ref, body))
		abort();
	while (bson_iter_next(&ref)) {
		if (!bsonval_it_next(&it) || strcmp(it.key, bson_iter_key(&ref)) != 0 ||
		    it.type != (uint8_t)bson_iter_type(&ref) ||
		    it.value != d + bson_iter_offset(&ref) + 2 + strlen(it.key))
			abort();
	}
	if (bsonval_it_next(&it))
		abort();
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

		/* As a backend's reply (larger documents, 20 more levels). */
		if (wire_parse_reply(copy, len, &m, &err)) {
			if (!bson_validate(&m.body, BSON_VALIDATE_NONE, NULL))
				abort();
			check_walk(&m.body);
		}
		memset(&err, 0, sizeof(err));
		if (wire_parse_msg(copy, len, &m, &err)) {
			size_t n = 0, newlen;
			struct wire_msg again;

			if (!bson_validate(&m.body, BSON_VALIDATE_NONE, NULL))
				abort();
			check_walk(&m.body);
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

/* Per level of the chain: bytes before the child and the depth it adds. */
static size_t level_prefix(int kind)
{
	return kind == 3 ? 17 : 7; /* len, type, "a\0" [, cws total, code len, "x\0"] */
}

static void put32(uint8_t *p, uint32_t v)
{
	wire_write_i32(p, (int32_t)v);
}

/* Writes the chain of `d` containers (kinds[]) into body; returns its length. */
static size_t build_chain(uint8_t *body, const int *kinds, unsigned d, uint32_t *lens)
{
	size_t off = 0;

	lens[d] = 5; /* innermost: {} */
	for (unsigned i = d; i-- > 0;)
		lens[i] = lens[i + 1] + (uint32_t)level_prefix(kinds[i + 1]) + 1;
	for (unsigned i = 0; i < d; i++) {
		int k = kinds[i + 1];
		uint8_t *p = body + off;

		put32(p, lens[i]);
		p[4] = k == 3 ? 0x0F : k == 2 ? 0x04 : 0x03;
		memcpy(p + 5, "a", 2);
		if (k == 3) {
			put32(p + 7, 4 + 4 + 2 + lens[i + 1]);
			put32(p + 11, 2);
			memcpy(p + 15, "x", 2);
		}
		body[off + lens[i] - 1] = 0; /* this level's EOO */
		off += level_prefix(k);
	}
	put32(body + off, 5);
	body[off + 4] = 0;
	return lens[0];
}

static void deep_check(const uint8_t *msg, size_t len, unsigned depth, bool corrupted)
{
	struct wire_msg m;
	struct wire_error err;
	bool ok = wire_parse_msg(msg, len, &m, &err);

	if (ok && !bson_validate(&m.body, BSON_VALIDATE_NONE, NULL))
		abort(); /* accepted what libbson refuses */
	if (corrupted)
		return;
	if (ok != (depth <= WIRE_MAX_DEPTH) || (!ok && err.code != 15))
		abort();
	ok = wire_parse_reply(msg, len, &m, &err);
	if (ok != (depth <= WIRE_MAX_REPLY_DEPTH) || (!ok && err.code != 15))
		abort();
}

static void deep_stage(const uint8_t *data, size_t size)
{
	unsigned d, depth = 0;
	int *kinds;
	uint32_t *lens;
	uint8_t *msg;
	size_t blen, mlen;
	bool corrupt;

	if (size < 6 || data[0] != 'D') /* only inputs that ask for it */
		return;
	d = (unsigned)(data[1] | data[2] << 8) % 512;
	if (data[3] == 0xff)
		d *= 20; /* up to ~10,000 levels */
	kinds = malloc((d + 1) * sizeof(*kinds));
	lens = malloc((d + 1) * sizeof(*lens));
	blen = 5;
	for (unsigned i = 1; i <= d; i++) {
		kinds[i] = (data[5 + i % (size - 5)] >> ((i % 4) * 2)) & 3;
		depth += kinds[i] == 3 ? 2 : 1;
		blen += level_prefix(kinds[i]) + 1;
	}
	mlen = WIRE_HEADER_LEN + 5 + blen;
	msg = malloc(mlen);
	memset(msg, 0, WIRE_HEADER_LEN + 5);
	put32(msg, (uint32_t)mlen);
	put32(msg + 12, OP_MSG);
	if (build_chain(msg + WIRE_HEADER_LEN + 5, kinds, d, lens) != blen)
		abort();
	corrupt = (data[4] & 1) != 0;
	if (corrupt)
		msg[WIRE_HEADER_LEN + 5 + (data[4] * 257u + data[5] * 31u) % blen] ^= data[5] | 1;
	deep_check(msg, mlen, depth, corrupt);
	free(msg);
	free(lens);
	free(kinds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	deep_stage(data, size);
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
