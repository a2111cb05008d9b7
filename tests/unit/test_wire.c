/*
 * test_wire.c — the wire framer and validator (core/wire.h) on byte fixtures.
 *
 * Messages are assembled byte by byte with the small builder below (header,
 * flags, sections, optional CRC-32C), so each malformed case is exactly the
 * bytes a misbehaving client could send. Parsing always runs on a heap copy of
 * exactly the message's length, so the sanitizer build catches any read past
 * the end. Covers the good shapes, every bad input from TESTING.md that the
 * framer can see (with the error code and the key words of its message), the
 * forwarding rewrite, and the reply builders.
 */
#include <criterion/criterion.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/wire.h"

/* ---- message builder ---------------------------------------------------- */

struct msgb {
	uint8_t buf[2048];
	size_t len;
	uint8_t *exact; /* heap copy of exactly `len` bytes, what the parsers see */
};

static void put(struct msgb *b, const void *p, size_t n)
{
	cr_assert_leq(b->len + n, sizeof(b->buf), "fixture too large for the builder");
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void put_u8(struct msgb *b, uint8_t v)
{
	put(b, &v, 1);
}

static void put_i32(struct msgb *b, int32_t v)
{
	uint8_t le[4];

	wire_write_i32(le, v);
	put(b, le, 4);
}

static void put_cstr(struct msgb *b, const char *s)
{
	put(b, s, strlen(s) + 1);
}

/* Header with messageLength 0 (mb_end fills it in), requestID 42. */
static void mb_start(struct msgb *b, int32_t opcode)
{
	memset(b, 0, sizeof(*b));
	put_i32(b, 0);
	put_i32(b, 42);
	put_i32(b, 0);
	put_i32(b, opcode);
}

static void mb_msg(struct msgb *b, uint32_t flags)
{
	mb_start(b, OP_MSG);
	put_i32(b, (int32_t)flags);
}

/* Kind-0 section. */
static void mb_body(struct msgb *b, const bson_t *doc)
{
	put_u8(b, 0);
	put(b, bson_get_data(doc), doc->len);
}

/* Kind-1 section with a correct size. */
static void mb_seq(struct msgb *b, const char *ident, bson_t *const *docs, int ndocs)
{
	size_t size = 4 + strlen(ident) + 1;

	for (int i = 0; i < ndocs; i++)
		size += docs[i]->len;
	put_u8(b, 1);
	put_i32(b, (int32_t)size);
	put_cstr(b, ident);
	for (int i = 0; i < ndocs; i++)
		put(b, bson_get_data(docs[i]), docs[i]->len);
}

/* Writes messageLength and, for OP_MSG with checksumPresent, the CRC-32C. */
static size_t mb_end(struct msgb *b)
{
	bool checksum = wire_read_i32(b->buf + 12) == OP_MSG &&
			((uint32_t)wire_read_i32(b->buf + 16) & MSG_CHECKSUM_PRESENT);

	wire_write_i32(b->buf, (int32_t)(b->len + (checksum ? 4 : 0)));
	if (checksum)
		put_i32(b, (int32_t)crc32c(b->buf, b->len));
	return b->len;
}

static uint8_t *mb_exact(struct msgb *b)
{
	free(b->exact);
	b->exact = malloc(b->len ? b->len : 1);
	cr_assert_not_null(b->exact);
	memcpy(b->exact, b->buf, b->len);
	return b->exact;
}

static void mb_free(struct msgb *b)
{
	free(b->exact);
	b->exact = NULL;
}

static bool parse(struct msgb *b, struct wire_msg *m, struct wire_error *e)
{
	memset(e, 0, sizeof(*e));
	return wire_parse_msg(mb_exact(b), b->len, m, e);
}

static bool parse_query(struct msgb *b, struct wire_query *q, struct wire_error *e)
{
	memset(e, 0, sizeof(*e));
	return wire_parse_query(mb_exact(b), b->len, q, e);
}

static void check_error(const struct wire_error *e, int code, const char *codename,
			const char *words)
{
	cr_assert_eq(e->code, code, "error code %d (%s), expected %d", e->code, e->msg, code);
	cr_assert_not_null(e->codename);
	cr_assert_str_eq(e->codename, codename);
	cr_assert_not_null(strstr(e->msg, words), "error \"%s\" does not say \"%s\"", e->msg,
			   words);
}

static void expect_msg_error(struct msgb *b, int code, const char *codename, const char *words)
{
	struct wire_msg m;
	struct wire_error e;

	cr_assert_not(parse(b, &m, &e), "accepted a message that should fail with \"%s\"", words);
	check_error(&e, code, codename, words);
	mb_free(b);
}

/* A typical command body: {find: "c", filter: {_id: 1}, $db: "test"}. */
static bson_t *cmd_body(void)
{
	return BCON_NEW("find", BCON_UTF8("c"), "filter", "{", "_id", BCON_INT32(1), "}", "$db",
			BCON_UTF8("test"));
}

/* ---- wire_frame_check --------------------------------------------------- */

Test(frame, truncated_header_needs_more)
{
	uint8_t hdr[16];
	int32_t len = -7;

	/* Bytes past `avail` have not arrived: make them poison (0xFF would turn
	 * the length negative), so a framer that reads them answers BAD. */
	memset(hdr, 0xFF, sizeof(hdr));
	for (size_t avail = 0; avail < 4; avail++) {
		wire_write_i32(hdr, 100);
		memset(hdr + avail, 0xFF, sizeof(hdr) - avail);
		cr_assert_eq(wire_frame_check(hdr, avail, &len), WIRE_FRAME_NEED_MORE, "avail %zu",
			     avail);
	}
	wire_write_i32(hdr, 100);
	for (size_t avail = 4; avail < 16; avail++) {
		cr_assert_eq(wire_frame_check(hdr, avail, &len), WIRE_FRAME_NEED_MORE, "avail %zu",
			     avail);
		cr_assert_eq(len, 100);
	}
}

Test(frame, ready_when_whole_message_buffered)
{
	uint8_t buf[64] = {0};
	int32_t len = 0;

	wire_write_i32(buf, 40);
	cr_assert_eq(wire_frame_check(buf, 39, &len), WIRE_FRAME_NEED_MORE);
	cr_assert_eq(wire_frame_check(buf, 40, &len), WIRE_FRAME_READY);
	cr_assert_eq(len, 40);
	/* A pipelined second message behind it does not change the first's length. */
	cr_assert_eq(wire_frame_check(buf, 64, &len), WIRE_FRAME_READY);
	cr_assert_eq(len, 40);
}

Test(frame, length_bounds)
{
	static const int32_t bad[] = {15, 0, -1, INT32_MIN, WIRE_MAX_MESSAGE + 1, INT32_MAX};
	uint8_t hdr[16] = {0};
	int32_t len;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		wire_write_i32(hdr, bad[i]);
		len = 0;
		cr_assert_eq(wire_frame_check(hdr, 16, &len), WIRE_FRAME_BAD, "length %d", bad[i]);
		cr_assert_eq(len, bad[i], "len_out reports the bad length for the log");
	}
	wire_write_i32(hdr, 16);
	cr_assert_eq(wire_frame_check(hdr, 16, &len), WIRE_FRAME_READY, "16 is the minimum");
	wire_write_i32(hdr, WIRE_MAX_MESSAGE);
	cr_assert_eq(wire_frame_check(hdr, 16, &len), WIRE_FRAME_NEED_MORE, "48 MB is allowed");
	cr_assert_eq(WIRE_MAX_MESSAGE, 48000000);
}

Test(frame, length_longer_than_body_needs_more)
{
	struct msgb b;
	bson_t *body = cmd_body();
	int32_t len;

	mb_msg(&b, 0);
	mb_body(&b, body);
	mb_end(&b);
	wire_write_i32(b.buf, (int32_t)b.len + 10); /* claims 10 bytes that never come */
	cr_assert_eq(wire_frame_check(mb_exact(&b), b.len, &len), WIRE_FRAME_NEED_MORE);
	cr_assert_eq(len, (int32_t)b.len + 10);
	mb_free(&b);
	bson_destroy(body);
}

Test(frame, length_shorter_than_sections_is_a_parse_error)
{
	struct msgb b;
	bson_t *body = cmd_body();
	int32_t len;
	size_t real;

	mb_msg(&b, 0);
	mb_body(&b, body);
	real = mb_end(&b);
	wire_write_i32(b.buf, (int32_t)real - 6); /* cuts the body short */
	cr_assert_eq(wire_frame_check(b.buf, real, &len), WIRE_FRAME_READY);
	cr_assert_eq(len, (int32_t)real - 6);
	b.len = (size_t)len; /* the framer hands over only what the header claims */
	expect_msg_error(&b, 22, "InvalidBSON", "does not fit");
	bson_destroy(body);
}

/* ---- wire_parse_msg: good messages -------------------------------------- */

/* Collects what wire_msg_each_sequence reports. */
struct seen {
	int n;
	char ident[4][32];
	int ndocs[4];
	int32_t first_x[4]; /* field "x" of each sequence's first document */
};

static bool collect(const char *ident, const uint8_t *docs, size_t len, void *arg)
{
	struct seen *s = arg;
	size_t off = 0;

	cr_assert_lt(s->n, 4);
	snprintf(s->ident[s->n], sizeof(s->ident[0]), "%s", ident);
	s->first_x[s->n] = -1;
	while (off < len) {
		int32_t dl = wire_read_i32(docs + off);
		bson_t d;
		bson_iter_t it;

		cr_assert(dl >= 5 && off + (size_t)dl <= len, "document %d of %s overruns", dl,
			  ident);
		cr_assert(bson_init_static(&d, docs + off, (size_t)dl));
		if (s->ndocs[s->n] == 0 && bson_iter_init_find(&it, &d, "x"))
			s->first_x[s->n] = bson_iter_int32(&it);
		s->ndocs[s->n]++;
		off += (size_t)dl;
	}
	s->n++;
	return true;
}

Test(parse_msg, body_only)
{
	struct msgb b;
	struct wire_msg m;
	struct wire_error e;
	bson_t *body = cmd_body();
	bson_iter_t it;

	mb_msg(&b, 0);
	mb_body(&b, body);
	mb_end(&b);
	cr_assert(parse(&b, &m, &e), "%s", e.msg);
	cr_assert_eq(m.h.len, (int32_t)b.len);
	cr_assert_eq(m.h.request_id, 42);
	cr_assert_eq(m.h.opcode, OP_MSG);
	cr_assert_eq(m.flags, 0);
	cr_assert_eq(m.body_offset, WIRE_HEADER_LEN + 4 + 1);
	cr_assert_eq(m.nsequences, 0);
	cr_assert_null(m.seq_start);
	cr_assert(bson_equal(&m.body, body));
	cr_assert(bson_iter_init_find(&it, &m.body, "$db"));
	cr_assert_str_eq(bson_iter_utf8(&it, NULL), "test");
	mb_free(&b);
	bson_destroy(body);
}

static bson_t *doc_x(int32_t x)
{
	return BCON_NEW("_id", BCON_INT32(x * 10), "x", BCON_INT32(x));
}

static void check_sequences(bool body_first)
{
	struct msgb b;
	struct wire_msg m;
	struct wire_error e;
	struct seen s = {0};
	bson_t *body = BCON_NEW("insert", BCON_UTF8("c"), "$db", BCON_UTF8("test"));
	bson_t *docs[3] = {doc_x(1), doc_x(2), doc_x(3)};
	bson_t *upd[1] = {doc_x(7)};
	size_t seq_off;

	mb_msg(&b, 0);
	if (body_first)
		mb_body(&b, body);
	seq_off = b.len;
	mb_seq(&b, "documents", docs, 3);
	mb_seq(&b, "updates", upd, 1);
	if (!body_first)
		mb_body(&b, body);
	mb_end(&b);

	cr_assert(parse(&b, &m, &e), "%s", e.msg);
	cr_assert_eq(m.nsequences, 2);
	cr_assert_eq(m.seq_start, b.exact + seq_off, "seq_start points at the first kind byte");
	cr_assert_eq(*m.seq_start, 1);
	cr_assert(bson_equal(&m.body, body));
	cr_assert(wire_msg_each_sequence(b.exact, b.len, &m, collect, &s));
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.ident[0], "documents");
	cr_assert_eq(s.ndocs[0], 3);
	cr_assert_eq(s.first_x[0], 1);
	cr_assert_str_eq(s.ident[1], "updates");
	cr_assert_eq(s.ndocs[1], 1);
	cr_assert_eq(s.first_x[1], 7);
	mb_free(&b);
	bson_destroy(body);
	for (int i = 0; i < 3; i++)
		bson_destroy(docs[i]);
	bson_destroy(upd[0]);
}

Test(parse_msg, body_then_sequences)
{
	check_sequences(true);
}

Test(parse_msg, sequences_then_body)
{
	check_sequences(false);
}

Test(parse_msg, empty_sequence_is_allowed)
{
	struct msgb b;
	struct wire_msg m;
	struct wire_error e;
	struct seen s = {0};
	bson_t *body = cmd_body();

	mb_msg(&b, 0);
	mb_body(&b, body);
	mb_seq(&b, "documents", NULL, 0);
	mb_end(&b);
	cr_assert(parse(&b, &m, &e), "%s", e.msg);
	cr_assert_eq(m.nsequences, 1);
	cr_assert(wire_msg_each_sequence(b.exact, b.len, &m, collect, &s));
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.ndocs[0], 0);
	mb_free(&b);
	bson_destroy(body);
}

static bool stop_after_first(const char *ident, const uint8_t *docs, size_t len, void *arg)
{
	(*(int *)arg)++;
	return false;
}

Test(parse_msg, each_sequence_stops_when_callback_says_so)
{
	struct msgb b;
	struct wire_msg m;
	struct wire_error e;
	bson_t *body = cmd_body();
	bson_t *docs[1] = {doc_x(1)};
	int calls = 0;

	mb_msg(&b, 0);
	mb_body(&b, body);
	mb_seq(&b, "a", docs, 1);
	mb_seq(&b, "b", docs, 1);
	mb_end(&b);
	cr_assert(parse(&b, &m, &e), "%s", e.msg);
	cr_assert_not(wire_msg_each_sequence(b.exact, b.len, &m, stop_after_first, &calls));
	cr_assert_eq(calls, 1);
	mb_free(&b);
	bson_destroy(body);
	bson_destroy(docs[0]);
}

Test(parse_msg, checksum_present_and_correct)
{
	struct msgb b;
	struct wire_msg m;
	struct wire_error e;
	struct seen s = {0};
	bson_t *body = cmd_body();
	bson_t *docs[2] = {doc_x(5), doc_x(6)};

	mb_msg(&b, MSG_CHECKSUM_PRESENT);
	mb_body(&b, body);
	mb_seq(&b, "documents", docs, 2);
	mb_end(&b);
	cr_assert(parse(&b, &m, &e), "%s", e.msg);
	cr_assert_eq(m.flags, MSG_CHECKSUM_PRESENT);
	cr_assert(bson_equal(&m.body, body));
	/* The checksum is not mistaken for a section. */
	cr_assert(wire_msg_each_sequence(b.exact, b.len, &m, collect, &s));
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.ndocs[0], 2);
	mb_free(&b);
	bson_destroy(body);
	bson_destroy(docs[0]);
	bson_destroy(docs[1]);
}

Test(parse_msg, known_and_optional_flags_accepted)
{
	static const uint32_t ok_flags[] = {MSG_MORE_TO_COME, MSG_EXHAUST_ALLOWED,
					    MSG_MORE_TO_COME | MSG_EXHAUST_ALLOWED,
					    1u << 17 /* unknown but optional (high half) */};
	bson_t *body = cmd_body();

	for (size_t i = 0; i < sizeof(ok_flags) / sizeof(ok_flags[0]); i++) {
		struct msgb b;
		struct wire_msg m;
		struct wire_error e;

		mb_msg(&b, ok_flags[i]);
		mb_body(&b, body);
		mb_end(&b);
		cr_assert(parse(&b, &m, &e), "flags 0x%x: %s", ok_flags[i], e.msg);
		cr_assert_eq(m.flags, ok_flags[i]);
		mb_free(&b);
	}
	bson_destroy(body);
}

/* ---- wire_parse_msg: bad messages --------------------------------------- */

Test(parse_msg_bad, flags_only_no_sections)
{
	struct msgb b;

	mb_msg(&b, 0);
	mb_end(&b);
	expect_msg_error(&b, 2, "BadValue", "too short");
}

Test(parse_msg_bad, unknown_required_flag_bits)
{
	static const uint32_t bad[] = {1u << 2, 1u << 15, (1u << 7) | MSG_MORE_TO_COME};
	static const char *const words[] = {"unknown required flag bits 0x4",
					    "unknown required flag bits 0x8000",
					    "unknown required flag bits 0x80"};
	bson_t *body = cmd_body();

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct msgb b;

		mb_msg(&b, bad[i]);
		mb_body(&b, body);
		mb_end(&b);
		expect_msg_error(&b, 2, "BadValue", words[i]);
	}
	bson_destroy(body);
}

Test(parse_msg_bad, unknown_section_kind)
{
	struct msgb b;
	bson_t *body = cmd_body();

	mb_msg(&b, 0);
	mb_body(&b, body);
	put_u8(&b, 2);
	put(&b, bson_get_data(body), body->len);
	mb_end(&b);
	expect_msg_error(&b, 2, "BadValue", "unknown section kind 2");
	bson_destroy(body);
}

Test(parse_msg_bad, missing_body)
{
	struct msgb b;
	bson_t *docs[1] = {doc_x(1)};

	mb_msg(&b, 0);
	mb_seq(&b, "documents", docs, 1);
	mb_end(&b);
	expect_msg_error(&b, 2, "BadValue", "no body section");
	bson_destroy(docs[0]);
}

Test(parse_msg_bad, two_bodies)
{
	struct msgb b;
	bson_t *body = cmd_body();

	mb_msg(&b, 0);
	mb_body(&b, body);
	mb_body(&b, body);
	mb_end(&b);
	expect_msg_error(&b, 2, "BadValue", "more than one body");
	bson_destroy(body);
}

Test(parse_msg_bad, bad_checksum)
{
	struct msgb b;
	bson_t *body = cmd_body();

	mb_msg(&b, MSG_CHECKSUM_PRESENT);
	mb_body(&b, body);
	mb_end(&b);
	b.buf[b.len - 1] ^= 0x01; /* wrong checksum */
	expect_msg_error(&b, 2, "BadValue", "checksum mismatch");

	/* The checksum covers the header too: a changed requestID is caught. */
	mb_msg(&b, MSG_CHECKSUM_PRESENT);
	mb_body(&b, body);
	mb_end(&b);
	b.buf[4] ^= 0x10;
	expect_msg_error(&b, 2, "BadValue", "checksum mismatch");
	bson_destroy(body);
}

Test(parse_msg_bad, checksum_flag_without_room_for_it)
{
	struct msgb b;

	mb_msg(&b, MSG_CHECKSUM_PRESENT);
	put_u8(&b, 0);
	wire_write_i32(b.buf, (int32_t)b.len);
	expect_msg_error(&b, 2, "BadValue", "too short for its checksum");
}

Test(parse_msg_bad, body_truncated_after_kind_byte)
{
	struct msgb b;

	mb_msg(&b, 0);
	put_u8(&b, 0);
	put_u8(&b, 5);
	put_u8(&b, 0);
	mb_end(&b);
	expect_msg_error(&b, 22, "InvalidBSON", "truncated document");
}

Test(parse_msg_bad, body_length_field_out_of_bounds)
{
	static const int32_t lens[] = {1000, 4, 0, -20};
	bson_t *body = cmd_body();

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct msgb b;
		char words[64];

		mb_msg(&b, 0);
		mb_body(&b, body);
		mb_end(&b);
		wire_write_i32(b.buf + 21, lens[i]);
		snprintf(words, sizeof(words), "document length %d does not fit", lens[i]);
		expect_msg_error(&b, 22, "InvalidBSON", words);
	}
	bson_destroy(body);
}

/* Replaces the body with raw bytes that are not valid BSON. */
static void expect_invalid_body(const uint8_t *raw, size_t n)
{
	struct msgb b;

	mb_msg(&b, 0);
	put_u8(&b, 0);
	put(&b, raw, n);
	mb_end(&b);
	expect_msg_error(&b, 22, "InvalidBSON", "OP_MSG body: invalid BSON");
}

Test(parse_msg_bad, invalid_bson_bad_inner_length)
{
	/* {d: {a: 1}} with the inner document claiming 100 bytes. */
	bson_t *doc = BCON_NEW("d", "{", "a", BCON_INT32(1), "}");
	uint8_t raw[64];

	cr_assert_leq(doc->len, sizeof(raw));
	memcpy(raw, bson_get_data(doc), doc->len);
	cr_assert_eq(raw[4], BSON_TYPE_DOCUMENT);
	wire_write_i32(raw + 7, 100); /* after type byte, "d\0" */
	expect_invalid_body(raw, doc->len);
	bson_destroy(doc);
}

Test(parse_msg_bad, invalid_bson_bad_string_length)
{
	bson_t *doc = BCON_NEW("s", BCON_UTF8("xyz"));
	uint8_t raw[64];

	memcpy(raw, bson_get_data(doc), doc->len);
	cr_assert_eq(raw[4], BSON_TYPE_UTF8);
	wire_write_i32(raw + 7, 1000);
	expect_invalid_body(raw, doc->len);
	bson_destroy(doc);
}

Test(parse_msg_bad, invalid_bson_bad_element_type)
{
	/* {len 12, type 0x42, "a", 4 bytes, terminator} */
	static const uint8_t raw[] = {12, 0, 0, 0, 0x42, 'a', 0, 1, 0, 0, 0, 0};

	expect_invalid_body(raw, sizeof(raw));
}

Test(parse_msg_bad, invalid_bson_missing_terminator)
{
	bson_t *doc = BCON_NEW("a", BCON_INT32(1));
	uint8_t raw[64];

	memcpy(raw, bson_get_data(doc), doc->len);
	cr_assert_eq(raw[doc->len - 1], 0);
	raw[doc->len - 1] = 0x01;
	expect_invalid_body(raw, doc->len);
	bson_destroy(doc);
}

Test(parse_msg_bad, invalid_bson_in_sequence)
{
	struct msgb b;
	bson_t *body = cmd_body();
	static const uint8_t bad[] = {12, 0, 0, 0, 0x42, 'a', 0, 1, 0, 0, 0, 0};

	mb_msg(&b, 0);
	mb_body(&b, body);
	put_u8(&b, 1);
	put_i32(&b, 4 + 2 + (int32_t)sizeof(bad));
	put_cstr(&b, "d");
	put(&b, bad, sizeof(bad));
	mb_end(&b);
	expect_msg_error(&b, 22, "InvalidBSON", "document sequence: invalid BSON");
	bson_destroy(body);
}

Test(parse_msg_bad, sequence_size_overruns_message)
{
	struct msgb b;
	bson_t *body = cmd_body();
	bson_t *docs[1] = {doc_x(1)};
	size_t size_at;

	mb_msg(&b, 0);
	mb_body(&b, body);
	size_at = b.len + 1;
	mb_seq(&b, "documents", docs, 1);
	mb_end(&b);
	wire_write_i32(b.buf + size_at, wire_read_i32(b.buf + size_at) + 1);
	expect_msg_error(&b, 2, "BadValue", "document sequence size");
	bson_destroy(body);
	bson_destroy(docs[0]);
}

Test(parse_msg_bad, sequence_size_too_small)
{
	static const int32_t sizes[] = {4, 0, -1};
	bson_t *body = cmd_body();

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct msgb b;
		char words[64];

		mb_msg(&b, 0);
		mb_body(&b, body);
		put_u8(&b, 1);
		put_i32(&b, sizes[i]);
		put_cstr(&b, "documents");
		mb_end(&b);
		snprintf(words, sizeof(words), "document sequence size %d does not fit", sizes[i]);
		expect_msg_error(&b, 2, "BadValue", words);
	}
	bson_destroy(body);
}

Test(parse_msg_bad, sequence_truncated_before_size)
{
	struct msgb b;
	bson_t *body = cmd_body();

	mb_msg(&b, 0);
	mb_body(&b, body);
	put_u8(&b, 1);
	put_u8(&b, 9);
	put_u8(&b, 0);
	mb_end(&b);
	expect_msg_error(&b, 2, "BadValue", "truncated document sequence");
	bson_destroy(body);
}

Test(parse_msg_bad, sequence_identifier_unterminated)
{
	struct msgb b;
	bson_t *body = cmd_body();

	mb_msg(&b, 0);
	mb_body(&b, body);
	put_u8(&b, 1);
	put_i32(&b, 4 + 9);
	put(&b, "documents", 9); /* no NUL inside the section */
	put_u8(&b, 0);		 /* a NUL right after it must not count */
	mb_end(&b);
	expect_msg_error(&b, 2, "BadValue", "bad document sequence identifier");
	bson_destroy(body);
}

Test(parse_msg_bad, sequence_identifier_empty)
{
	struct msgb b;
	bson_t *body = cmd_body();
	bson_t *docs[1] = {doc_x(1)};

	mb_msg(&b, 0);
	mb_body(&b, body);
	mb_seq(&b, "", docs, 1);
	mb_end(&b);
	expect_msg_error(&b, 2, "BadValue", "bad document sequence identifier");
	bson_destroy(body);
	bson_destroy(docs[0]);
}

Test(parse_msg_bad, sequence_documents_do_not_add_up)
{
	bson_t *body = cmd_body();
	bson_t *d = doc_x(1);
	struct msgb b;

	/* Size claims 3 bytes more than the documents: a truncated document. */
	mb_msg(&b, 0);
	mb_body(&b, body);
	put_u8(&b, 1);
	put_i32(&b, 4 + 2 + (int32_t)d->len + 3);
	put_cstr(&b, "d");
	put(&b, bson_get_data(d), d->len);
	put(&b, "\x01\x02\x03", 3);
	mb_end(&b);
	expect_msg_error(&b, 22, "InvalidBSON", "document sequence: truncated document");

	/* Size cuts the last document short: it does not fit its section. */
	mb_msg(&b, 0);
	put_u8(&b, 1);
	put_i32(&b, 4 + 2 + (int32_t)d->len * 2 - 4);
	put_cstr(&b, "d");
	put(&b, bson_get_data(d), d->len);
	put(&b, bson_get_data(d), d->len);
	mb_body(&b, body);
	mb_end(&b);
	expect_msg_error(&b, 22, "InvalidBSON", "does not fit");
	bson_destroy(body);
	bson_destroy(d);
}

/* ---- wire_parse_query (legacy handshake) --------------------------------- */

static void mb_query(struct msgb *b, const char *coll, const bson_t *query)
{
	mb_start(b, OP_QUERY);
	put_i32(b, 4); /* flags: secondaryOk, to prove they are reported */
	put_cstr(b, coll);
	put_i32(b, 0);	/* numberToSkip */
	put_i32(b, -1); /* numberToReturn */
	if (query != NULL)
		put(b, bson_get_data(query), query->len);
}

static const char *first_key(const bson_t *doc)
{
	bson_iter_t it;

	cr_assert(bson_iter_init(&it, doc) && bson_iter_next(&it), "empty document");
	return bson_iter_key(&it);
}

Test(parse_query, is_master_plain)
{
	struct msgb b;
	struct wire_query q;
	struct wire_error e;
	bson_t *cmd = BCON_NEW("isMaster", BCON_INT32(1), "helloOk", BCON_BOOL(true));

	mb_query(&b, "admin.$cmd", cmd);
	mb_end(&b);
	cr_assert(parse_query(&b, &q, &e), "%s", e.msg);
	cr_assert_eq(q.h.opcode, OP_QUERY);
	cr_assert_eq(q.h.request_id, 42);
	cr_assert_eq(q.flags, 4);
	cr_assert_str_eq(q.collection, "admin.$cmd");
	cr_assert(bson_equal(&q.query, cmd));
	mb_free(&b);
	bson_destroy(cmd);
}

Test(parse_query, is_master_wrapped_in_query)
{
	struct msgb b;
	struct wire_query q;
	struct wire_error e;
	bson_t *wrapped =
	    BCON_NEW("$query", "{", "ismaster", BCON_INT32(1), "client", "{", "application", "{",
		     "name", BCON_UTF8("legacy"), "}", "}", "}", "$readPreference", "{", "mode",
		     BCON_UTF8("primaryPreferred"), "}");
	bson_iter_t it;

	mb_query(&b, "admin.$cmd", wrapped);
	mb_end(&b);
	cr_assert(parse_query(&b, &q, &e), "%s", e.msg);
	cr_assert_str_eq(first_key(&q.query), "ismaster");
	cr_assert(bson_iter_init_find(&it, &q.query, "client"), "inner fields kept");
	cr_assert_not(bson_iter_init_find(&it, &q.query, "$readPreference"),
		      "the wrapper's fields are not part of the command");
	mb_free(&b);
	bson_destroy(wrapped);
}

Test(parse_query_bad, too_short)
{
	struct msgb b;
	struct wire_query q;
	struct wire_error e;

	mb_start(&b, OP_QUERY);
	put_i32(&b, 0);
	put_cstr(&b, "a");
	mb_end(&b);
	cr_assert_not(parse_query(&b, &q, &e));
	check_error(&e, 2, "BadValue", "OP_QUERY: message too short");
	mb_free(&b);
}

Test(parse_query_bad, unterminated_collection_name)
{
	struct msgb b;
	struct wire_query q;
	struct wire_error e;

	mb_start(&b, OP_QUERY);
	put_i32(&b, 0);
	put(&b, "admin.$cmd-without-a-terminator", 31);
	mb_end(&b);
	cr_assert_not(parse_query(&b, &q, &e));
	check_error(&e, 2, "BadValue", "unterminated collection name");
	mb_free(&b);
}

Test(parse_query_bad, missing_query_document)
{
	struct msgb b;
	struct wire_query q;
	struct wire_error e;

	mb_query(&b, "admin.$cmd", NULL);
	mb_end(&b);
	cr_assert_not(parse_query(&b, &q, &e));
	check_error(&e, 22, "InvalidBSON", "OP_QUERY query: truncated document");
	mb_free(&b);
}

Test(parse_query_bad, collection_name_runs_into_skip_fields)
{
	struct msgb b;
	struct wire_query q;
	struct wire_error e;

	/* The name ends 4 bytes before the message does: no room for skip/return. */
	mb_start(&b, OP_QUERY);
	put_i32(&b, 0);
	put(&b, "admin.$cmd", 10);
	put_cstr(&b, "abcd");
	put(&b, "xxxx", 4);
	mb_end(&b);
	cr_assert_not(parse_query(&b, &q, &e));
	check_error(&e, 2, "BadValue", "OP_QUERY: message too short");
	mb_free(&b);
}

Test(parse_query_bad, invalid_query_bson)
{
	struct msgb b;
	struct wire_query q;
	struct wire_error e;
	static const uint8_t bad[] = {12, 0, 0, 0, 0x42, 'a', 0, 1, 0, 0, 0, 0};

	mb_query(&b, "admin.$cmd", NULL);
	put(&b, bad, sizeof(bad));
	mb_end(&b);
	cr_assert_not(parse_query(&b, &q, &e));
	check_error(&e, 22, "InvalidBSON", "OP_QUERY query: invalid BSON");
	mb_free(&b);
}

/* ---- wire_msg_prepare_forward -------------------------------------------- */

Test(prepare_forward, strips_checksum_and_exhaust)
{
	struct msgb b;
	struct wire_msg m;
	struct wire_error e;
	struct seen s = {0};
	bson_t *body = cmd_body();
	bson_t *docs[2] = {doc_x(1), doc_x(2)};
	uint8_t *data;
	size_t len, newlen;

	mb_msg(&b, MSG_CHECKSUM_PRESENT | MSG_EXHAUST_ALLOWED | MSG_MORE_TO_COME);
	mb_body(&b, body);
	mb_seq(&b, "documents", docs, 2);
	len = mb_end(&b);
	data = mb_exact(&b);
	newlen = wire_msg_prepare_forward(data, len);
	cr_assert_eq(newlen, len - 4);
	cr_assert_eq(wire_read_i32(data), (int32_t)newlen, "messageLength rewritten");
	cr_assert_eq((uint32_t)wire_read_i32(data + 16), MSG_MORE_TO_COME,
		     "checksumPresent and exhaustAllowed cleared, moreToCome kept");
	cr_assert_eq(memcmp(data + 20, b.buf + 20, newlen - 20), 0, "sections untouched");
	cr_assert(wire_parse_msg(data, newlen, &m, &e), "forwarded message invalid: %s", e.msg);
	cr_assert(bson_equal(&m.body, body));
	cr_assert(wire_msg_each_sequence(data, newlen, &m, collect, &s));
	cr_assert_eq(s.ndocs[0], 2);
	mb_free(&b);
	bson_destroy(body);
	bson_destroy(docs[0]);
	bson_destroy(docs[1]);
}

Test(prepare_forward, without_checksum_keeps_length)
{
	struct msgb b;
	bson_t *body = cmd_body();
	uint8_t *data;
	size_t len;

	mb_msg(&b, MSG_EXHAUST_ALLOWED);
	mb_body(&b, body);
	len = mb_end(&b);
	data = mb_exact(&b);
	cr_assert_eq(wire_msg_prepare_forward(data, len), len);
	cr_assert_eq(wire_read_i32(data), (int32_t)len);
	cr_assert_eq(wire_read_i32(data + 16), 0, "exhaustAllowed cleared");
	mb_free(&b);
	bson_destroy(body);
}

/* ---- replies -------------------------------------------------------------- */

Test(reply, op_msg_parses_back)
{
	struct evbuffer *out = evbuffer_new();
	bson_t *doc = BCON_NEW("ok", BCON_DOUBLE(1.0), "n", BCON_INT32(3));
	struct wire_msg m;
	struct wire_error e;
	uint8_t *data;
	int32_t len;
	size_t total;

	wire_append_msg(out, 7, 42, 0, doc);
	wire_append_msg(out, 8, 43, 0, doc); /* a second one behind it */
	total = evbuffer_get_length(out);
	data = evbuffer_pullup(out, -1);
	cr_assert_eq(wire_frame_check(data, total, &len), WIRE_FRAME_READY);
	cr_assert_eq((size_t)len * 2, total);
	cr_assert_eq((size_t)len, WIRE_HEADER_LEN + 5 + doc->len);
	cr_assert(wire_parse_msg(data, (size_t)len, &m, &e), "%s", e.msg);
	cr_assert_eq(m.h.request_id, 7);
	cr_assert_eq(m.h.response_to, 42);
	cr_assert_eq(m.h.opcode, OP_MSG);
	cr_assert(bson_equal(&m.body, doc));
	cr_assert(wire_parse_msg(data + len, (size_t)len, &m, &e), "%s", e.msg);
	cr_assert_eq(m.h.response_to, 43);
	evbuffer_free(out);
	bson_destroy(doc);
}

Test(reply, op_reply_layout)
{
	struct evbuffer *out = evbuffer_new();
	bson_t *doc = BCON_NEW("ismaster", BCON_BOOL(true), "ok", BCON_DOUBLE(1.0));
	struct wire_header h;
	bson_t got;
	uint8_t *data;
	size_t total;
	int64_t cursor;

	wire_append_op_reply(out, 99, REPLY_AWAIT_CAPABLE, doc);
	total = evbuffer_get_length(out);
	data = evbuffer_pullup(out, -1);
	cr_assert_eq(total, 36 + doc->len);
	wire_read_header(data, &h);
	cr_assert_eq(h.len, (int32_t)total);
	cr_assert_eq(h.opcode, OP_REPLY);
	cr_assert_eq(h.response_to, 99);
	cr_assert_gt(h.request_id, 0);
	cr_assert_eq((uint32_t)wire_read_i32(data + 16), REPLY_AWAIT_CAPABLE);
	memcpy(&cursor, data + 20, 8);
	cr_assert_eq(cursor, 0, "cursorID");
	cr_assert_eq(wire_read_i32(data + 28), 0, "startingFrom");
	cr_assert_eq(wire_read_i32(data + 32), 1, "numberReturned");
	cr_assert(bson_init_static(&got, data + 36, total - 36));
	cr_assert(bson_equal(&got, doc));
	evbuffer_free(out);
	bson_destroy(doc);
}

static void check_error_doc(const bson_t *doc, const char *const *labels)
{
	bson_iter_t it, arr;
	int n = 0;

	cr_assert(bson_iter_init_find(&it, doc, "ok"));
	cr_assert(BSON_ITER_HOLDS_NUMBER(&it));
	cr_assert_eq(bson_iter_as_int64(&it), 0);
	cr_assert(bson_iter_init_find(&it, doc, "code") && BSON_ITER_HOLDS_INT32(&it));
	cr_assert_eq(bson_iter_int32(&it), 458);
	cr_assert(bson_iter_init_find(&it, doc, "codeName") && BSON_ITER_HOLDS_UTF8(&it));
	cr_assert_str_eq(bson_iter_utf8(&it, NULL), "SystemOverloaded");
	cr_assert(bson_iter_init_find(&it, doc, "errmsg") && BSON_ITER_HOLDS_UTF8(&it));
	cr_assert_str_eq(bson_iter_utf8(&it, NULL), "mongoplex: too busy" /* prefix added */);
	if (labels == NULL) {
		cr_assert_not(bson_iter_init_find(&it, doc, "errorLabels"));
		return;
	}
	cr_assert(bson_iter_init_find(&it, doc, "errorLabels") && BSON_ITER_HOLDS_ARRAY(&it));
	cr_assert(bson_iter_recurse(&it, &arr));
	while (bson_iter_next(&arr)) {
		cr_assert_not_null(labels[n], "more labels than given");
		cr_assert_str_eq(bson_iter_utf8(&arr, NULL), labels[n]);
		n++;
	}
	cr_assert_null(labels[n], "label %d missing", n);
}

Test(reply, error_doc_round_trip)
{
	static const char *const labels[] = {"SystemOverloadedError", "RetryableError", NULL};
	static const char *const none[] = {NULL};
	struct evbuffer *out = evbuffer_new();
	struct wire_msg m;
	struct wire_error e;
	bson_t doc;
	uint8_t *data;

	wire_error_doc(&doc, 458, "SystemOverloaded", "too busy", labels);
	wire_append_msg(out, 1, 5, 0, &doc);
	data = evbuffer_pullup(out, -1);
	cr_assert(wire_parse_msg(data, evbuffer_get_length(out), &m, &e), "%s", e.msg);
	check_error_doc(&m.body, labels);
	bson_destroy(&doc);

	wire_error_doc(&doc, 458, "SystemOverloaded", "too busy", NULL);
	check_error_doc(&doc, NULL);
	bson_destroy(&doc);
	wire_error_doc(&doc, 458, "SystemOverloaded", "too busy", none);
	check_error_doc(&doc, NULL);
	bson_destroy(&doc);
	evbuffer_free(out);
}

/* ---- helpers ------------------------------------------------------------- */

Test(crc32c, known_vectors)
{
	/* RFC 3720 appendix B.4 and the common "123456789" check value. */
	uint8_t buf[32];

	cr_assert_eq(crc32c((const uint8_t *)"123456789", 9), 0xE3069283u);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(crc32c(buf, sizeof(buf)), 0x8A9136AAu);
	memset(buf, 0xFF, sizeof(buf));
	cr_assert_eq(crc32c(buf, sizeof(buf)), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	cr_assert_eq(crc32c(buf, sizeof(buf)), 0x46DD794Eu);
	cr_assert_eq(crc32c(buf, 0), 0u);
}

Test(wire, i32_is_little_endian)
{
	uint8_t p[4];

	wire_write_i32(p, 0x01020304);
	cr_assert_eq(p[0], 0x04);
	cr_assert_eq(p[3], 0x01);
	cr_assert_eq(wire_read_i32(p), 0x01020304);
	wire_write_i32(p, -2);
	cr_assert_eq(wire_read_i32(p), -2);
}

Test(wire, request_ids_increase)
{
	int32_t a = wire_next_request_id(), b2 = wire_next_request_id();

	cr_assert_gt(a, 0);
	cr_assert_eq(b2, a + 1);
}

Test(wire, opcode_names)
{
	cr_assert_str_eq(wire_opcode_name(OP_MSG), "OP_MSG");
	cr_assert_str_eq(wire_opcode_name(OP_QUERY), "OP_QUERY");
	cr_assert_str_eq(wire_opcode_name(OP_COMPRESSED), "OP_COMPRESSED");
	cr_assert_str_eq(wire_opcode_name(12345), "unknown opcode");
}
