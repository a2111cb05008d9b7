/*
 * wire.c — MongoDB wire protocol framing and validation (OP_MSG, the legacy
 * OP_QUERY handshake) and reply building.
 *
 * Validation follows the OP_MSG specification: known flag bits only, exactly
 * one kind-0 body, well-formed kind-1 sequences whose sizes add up, every
 * document valid BSON inside its bounds and nested no deeper than mongod
 * allows (checked by bsonval.c, iteratively: libbson's bson_validate recurses
 * once per level and overflowed the stack at 10,000 levels), the CRC-32C
 * checksum when present.
 */
#include "core/wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/bsonval.h"
#include "core/crc32c.h"
#include "core/errors.h"

int32_t wire_read_i32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return (int32_t)BSON_UINT32_FROM_LE(v);
}

void wire_write_i32(uint8_t *p, int32_t v)
{
	uint32_t le = BSON_UINT32_TO_LE((uint32_t)v);

	memcpy(p, &le, 4);
}

void wire_read_header(const uint8_t *p, struct wire_header *h)
{
	h->len = wire_read_i32(p);
	h->request_id = wire_read_i32(p + 4);
	h->response_to = wire_read_i32(p + 8);
	h->opcode = wire_read_i32(p + 12);
}

enum wire_frame wire_frame_check(const uint8_t *hdr, size_t avail, int32_t *len_out)
{
	int32_t len;

	if (avail < 4)
		return WIRE_FRAME_NEED_MORE;
	len = wire_read_i32(hdr);
	*len_out = len;
	if (len < WIRE_HEADER_LEN || len > WIRE_MAX_MESSAGE)
		return WIRE_FRAME_BAD;
	if (avail < (size_t)len)
		return WIRE_FRAME_NEED_MORE;
	return WIRE_FRAME_READY;
}

void wire_set_error(struct wire_error *err, int code, const char *codename, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	err->codename = codename;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

/* Largest document in a request: 16 MB plus the slack mongod allows for
 * command envelopes. Replies are bounded by their message only (servers
 * exceed 16 MB in reply bodies). */
#define REQUEST_MAX_DOC (WIRE_MAX_BSON + 16 * 1024)

/* What one document may be: its size and its nesting depth (see wire.h).
 * `prefix` starts the depth error's text: it goes to the client as is for
 * requests, while a reply's error is wrapped by the server code. */
struct doc_limits {
	size_t max_len;
	unsigned max_depth;
	const char *prefix;
};

static const struct doc_limits request_limits = {REQUEST_MAX_DOC, WIRE_MAX_DEPTH, "mongoplex: "};
static const struct doc_limits reply_limits = {WIRE_MAX_MESSAGE, WIRE_MAX_REPLY_DEPTH, ""};

/* A BSON document at p with at most `room` bytes: checks length and content
 * with the iterative validator (bounded stack whatever the nesting). */
static bool check_doc(const uint8_t *p, size_t room, const struct doc_limits *lim,
		      uint32_t *doc_len, struct wire_error *err, const char *what)
{
	size_t bad_off;
	int32_t len;

	if (room < 5) {
		wire_set_error(err, MP_ERR(INVALID_BSON), "%s: truncated document", what);
		return false;
	}
	len = wire_read_i32(p);
	if (len < 5 || (size_t)len > room || (size_t)len > lim->max_len) {
		wire_set_error(err, MP_ERR(INVALID_BSON), "%s: document length %d does not fit",
			       what, len);
		return false;
	}
	switch (bsonval_check(p, (size_t)len, lim->max_depth, &bad_off)) {
	case BSONVAL_OK:
		break;
	case BSONVAL_TOO_DEEP:
		wire_set_error(err, MP_ERR(OVERFLOW),
			       "%s%s: BSONObj exceeds maximum nested object depth %u", lim->prefix,
			       what, lim->max_depth);
		return false;
	case BSONVAL_INVALID:
	default:
		wire_set_error(err, MP_ERR(INVALID_BSON), "%s: invalid BSON (at byte %zu)", what,
			       bad_off);
		return false;
	}
	*doc_len = (uint32_t)len;
	return true;
}

/* A kind-1 section at p (after the kind byte); returns its size. */
static bool check_sequence(const uint8_t *p, size_t room, const struct doc_limits *lim,
			   uint32_t *size_out, struct wire_error *err)
{
	int32_t size;
	const uint8_t *nul;
	size_t off;

	if (room < 4) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: truncated document sequence");
		return false;
	}
	size = wire_read_i32(p);
	if (size < 5 || (size_t)size > room) {
		wire_set_error(err, MP_ERR(BAD_VALUE),
			       "OP_MSG: document sequence size %d does not fit", size);
		return false;
	}
	nul = memchr(p + 4, '\0', (size_t)size - 4);
	if (nul == NULL || nul == p + 4) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: bad document sequence identifier");
		return false;
	}
	off = (size_t)(nul - p) + 1;
	while (off < (size_t)size) {
		uint32_t dl;

		if (!check_doc(p + off, (size_t)size - off, lim, &dl, err,
			       "OP_MSG document sequence"))
			return false;
		off += dl;
	}
	*size_out = (uint32_t)size;
	return true;
}

static bool check_flags_and_checksum(const uint8_t *data, size_t *len, struct wire_msg *m,
				     struct wire_error *err)
{
	m->flags = (uint32_t)wire_read_i32(data + WIRE_HEADER_LEN);
	if (m->flags & MSG_REQUIRED_MASK & ~MSG_KNOWN_FLAGS) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: unknown required flag bits 0x%x",
			       m->flags & MSG_REQUIRED_MASK & ~MSG_KNOWN_FLAGS);
		return false;
	}
	if (!(m->flags & MSG_CHECKSUM_PRESENT))
		return true;
	if (*len < WIRE_HEADER_LEN + 4 + 4 + 1) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: too short for its checksum");
		return false;
	}
	*len -= 4;
	if (crc32c(data, *len) != (uint32_t)wire_read_i32(data + *len)) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: checksum mismatch");
		return false;
	}
	return true;
}

static bool parse_msg(const uint8_t *data, size_t len, const struct doc_limits *lim,
		      struct wire_msg *m, struct wire_error *err)
{
	size_t off = WIRE_HEADER_LEN + 4;
	bool have_body = false;

	memset(m, 0, sizeof(*m));
	wire_read_header(data, &m->h);
	if (len < off + 1) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: message too short (%zu bytes)",
			       len);
		return false;
	}
	if (!check_flags_and_checksum(data, &len, m, err))
		return false;
	while (off < len) {
		uint8_t kind = data[off++];
		uint32_t n;

		if (kind == 0) {
			if (have_body) {
				wire_set_error(err, MP_ERR(BAD_VALUE),
					       "OP_MSG: more than one body section");
				return false;
			}
			if (!check_doc(data + off, len - off, lim, &n, err, "OP_MSG body"))
				return false;
			m->body_offset = (uint32_t)off;
			have_body = true;
		} else if (kind == 1) {
			if (!check_sequence(data + off, len - off, lim, &n, err))
				return false;
			if (m->nsequences++ == 0)
				m->seq_start = data + off - 1;
		} else {
			wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: unknown section kind %u",
				       kind);
			return false;
		}
		off += n;
	}
	if (!have_body) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_MSG: no body section");
		return false;
	}
	if (!bson_init_static(&m->body, data + m->body_offset,
			      (size_t)wire_read_i32(data + m->body_offset)))
		return false;
	return true;
}

bool wire_parse_msg(const uint8_t *data, size_t len, struct wire_msg *m, struct wire_error *err)
{
	return parse_msg(data, len, &request_limits, m, err);
}

bool wire_parse_reply(const uint8_t *data, size_t len, struct wire_msg *m, struct wire_error *err)
{
	return parse_msg(data, len, &reply_limits, m, err);
}

bool wire_msg_each_sequence(const uint8_t *data, size_t len, const struct wire_msg *m,
			    wire_seq_cb cb, void *arg)
{
	size_t off = WIRE_HEADER_LEN + 4;

	if (m->flags & MSG_CHECKSUM_PRESENT)
		len -= 4;
	while (off < len) {
		uint8_t kind = data[off++];
		uint32_t n = (uint32_t)wire_read_i32(data + off);

		if (kind == 1) {
			const char *ident = (const char *)data + off + 4;
			size_t ilen = strlen(ident) + 1;

			if (!cb(ident, data + off + 4 + ilen, n - 4 - ilen, arg))
				return false;
		}
		off += n;
	}
	return true;
}

/* Unwrap {$query: {...}, $readPreference: ...} as legacy drivers send it. */
static void unwrap_query(struct wire_query *q)
{
	bson_iter_t it;
	const uint8_t *d;
	uint32_t dl;

	if (bson_iter_init_find(&it, &q->query, "$query") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &dl, &d);
		if (!bson_init_static(&q->query, d, dl))
			return;
	}
}

bool wire_parse_query(const uint8_t *data, size_t len, struct wire_query *q, struct wire_error *err)
{
	size_t off = WIRE_HEADER_LEN + 4;
	const uint8_t *nul;
	uint32_t dl;

	memset(q, 0, sizeof(*q));
	wire_read_header(data, &q->h);
	if (len < off + 1 + 8) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_QUERY: message too short");
		return false;
	}
	q->flags = wire_read_i32(data + WIRE_HEADER_LEN);
	nul = memchr(data + off, '\0', len - off);
	if (nul == NULL) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_QUERY: unterminated collection name");
		return false;
	}
	q->collection = (const char *)data + off;
	off = (size_t)(nul - data) + 1 + 8; /* numberToSkip, numberToReturn */
	if (off > len) {
		wire_set_error(err, MP_ERR(BAD_VALUE), "OP_QUERY: message too short");
		return false;
	}
	if (!check_doc(data + off, len - off, &request_limits, &dl, err, "OP_QUERY query"))
		return false;
	if (!bson_init_static(&q->query, data + off, dl))
		return false;
	unwrap_query(q);
	return true;
}

size_t wire_msg_prepare_forward(uint8_t *data, size_t len)
{
	uint32_t flags = (uint32_t)wire_read_i32(data + WIRE_HEADER_LEN);

	if (flags & MSG_CHECKSUM_PRESENT) {
		len -= 4;
		wire_write_i32(data, (int32_t)len);
	}
	flags &= ~(MSG_CHECKSUM_PRESENT | MSG_EXHAUST_ALLOWED);
	wire_write_i32(data + WIRE_HEADER_LEN, (int32_t)flags);
	return len;
}

int32_t wire_next_request_id(void)
{
	static int32_t next = 1;

	if (next == INT32_MAX)
		next = 1;
	return next++;
}

static void put_header(uint8_t *h, int32_t len, int32_t request_id, int32_t response_to,
		       int32_t opcode)
{
	wire_write_i32(h, len);
	wire_write_i32(h + 4, request_id);
	wire_write_i32(h + 8, response_to);
	wire_write_i32(h + 12, opcode);
}

void wire_append_msg(struct evbuffer *out, int32_t request_id, int32_t response_to, uint32_t flags,
		     const bson_t *doc)
{
	uint8_t h[WIRE_HEADER_LEN + 5];

	put_header(h, (int32_t)(sizeof(h) + doc->len), request_id, response_to, OP_MSG);
	wire_write_i32(h + WIRE_HEADER_LEN, (int32_t)flags);
	h[WIRE_HEADER_LEN + 4] = 0; /* kind 0 */
	evbuffer_add(out, h, sizeof(h));
	evbuffer_add(out, bson_get_data(doc), doc->len);
}

void wire_append_op_reply(struct evbuffer *out, int32_t response_to, uint32_t flags,
			  const bson_t *doc)
{
	uint8_t h[WIRE_HEADER_LEN + 20];

	put_header(h, (int32_t)(sizeof(h) + doc->len), wire_next_request_id(), response_to,
		   OP_REPLY);
	wire_write_i32(h + 16, (int32_t)flags);
	memset(h + 20, 0, 8);	   /* cursorID */
	wire_write_i32(h + 28, 0); /* startingFrom */
	wire_write_i32(h + 32, 1); /* numberReturned */
	evbuffer_add(out, h, sizeof(h));
	evbuffer_add(out, bson_get_data(doc), doc->len);
}

void wire_error_doc(bson_t *doc, int code, const char *codename, const char *msg,
		    const char *const *labels)
{
	bson_init(doc);
	BSON_APPEND_DOUBLE(doc, "ok", 0.0);
	if (strncmp(msg, MP_ERRMSG_PREFIX, strlen(MP_ERRMSG_PREFIX)) == 0) {
		BSON_APPEND_UTF8(doc, "errmsg", msg);
	} else { /* one prefix everywhere: the framer's messages come without it */
		char *full = bson_strdup_printf("%s%s", MP_ERRMSG_PREFIX, msg);

		BSON_APPEND_UTF8(doc, "errmsg", full);
		bson_free(full);
	}
	BSON_APPEND_INT32(doc, "code", code);
	BSON_APPEND_UTF8(doc, "codeName", codename);
	if (labels != NULL && labels[0] != NULL) {
		bson_t arr;
		char key[16];
		const char *k;

		BSON_APPEND_ARRAY_BEGIN(doc, "errorLabels", &arr);
		for (uint32_t i = 0; labels[i] != NULL; i++) {
			bson_uint32_to_string(i, &k, key, sizeof(key));
			bson_append_utf8(&arr, k, -1, labels[i], -1);
		}
		bson_append_array_end(doc, &arr);
	}
}

const char *wire_opcode_name(int32_t opcode)
{
	switch (opcode) {
	case OP_REPLY:
		return "OP_REPLY";
	case OP_UPDATE:
		return "OP_UPDATE";
	case OP_INSERT:
		return "OP_INSERT";
	case OP_QUERY:
		return "OP_QUERY";
	case OP_GET_MORE:
		return "OP_GET_MORE";
	case OP_DELETE:
		return "OP_DELETE";
	case OP_KILL_CURSORS:
		return "OP_KILL_CURSORS";
	case OP_COMPRESSED:
		return "OP_COMPRESSED";
	case OP_MSG:
		return "OP_MSG";
	default:
		return "unknown opcode";
	}
}
