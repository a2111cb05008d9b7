/*
 * wire.h — MongoDB wire protocol framing, validation and reply building.
 *
 * Framing is done on the 16-byte header alone (wire_frame_check); a complete
 * message is then validated as a whole (wire_parse_msg for OP_MSG,
 * wire_parse_query for the legacy OP_QUERY handshake), with a bounded stack
 * whatever the nesting (see WIRE_MAX_DEPTH). Parsed structures are
 * views into the caller's bytes: nothing is copied. Replies are built with
 * libbson and appended to an evbuffer.
 */
#pragma once

#include <bson/bson.h>
#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_HEADER_LEN	 16
#define WIRE_MAX_MESSAGE 48000000 /* maxMessageSizeBytes of every mongod */
#define WIRE_MAX_BSON	 (16 * 1024 * 1024)

/*
 * Nesting limits (core/bsonval.h counts depth). Each OP_MSG section document
 * (the body, or one document of a kind-1 sequence) and the OP_QUERY query is
 * at depth 0, each embedded document or array one level deeper; deepest
 * allowed: WIRE_MAX_DEPTH = 200, mongod's BSONDepth::kDefaultMaxAllowableDepth.
 * Deeper client documents are refused with mongod's error, code 15 Overflow
 * ("BSONObj exceeds maximum nested object depth"); the connection stays open.
 * Examples: {find: "c", filter: F} is accepted while the chain F = {a: {a: ...}}
 * holds at most 200 documents (F is at depth 1); an insert document sent in a
 * kind-1 `documents` sequence is at depth 0, the same document in the body's
 * `documents` array at depth 2 (as in mongod, which validates the sections).
 * Backend replies may nest 20 levels more (mongod's kExtraSystemDepthLevels:
 * a stored 200-level document inside {cursor: {firstBatch: [...]}}); a deeper
 * reply closes the backend connection like any invalid reply.
 */
#define WIRE_MAX_DEPTH	     200
#define WIRE_MAX_REPLY_DEPTH (WIRE_MAX_DEPTH + 20)

enum wire_opcode {
	OP_REPLY = 1,
	OP_UPDATE = 2001,
	OP_INSERT = 2002,
	OP_QUERY = 2004,
	OP_GET_MORE = 2005,
	OP_DELETE = 2006,
	OP_KILL_CURSORS = 2007,
	OP_COMPRESSED = 2012,
	OP_MSG = 2013,
};

/* OP_MSG flagBits */
#define MSG_CHECKSUM_PRESENT (1u << 0)
#define MSG_MORE_TO_COME     (1u << 1)
#define MSG_EXHAUST_ALLOWED  (1u << 16)
#define MSG_KNOWN_FLAGS	     (MSG_CHECKSUM_PRESENT | MSG_MORE_TO_COME | MSG_EXHAUST_ALLOWED)
#define MSG_REQUIRED_MASK    0xFFFFu /* unknown bits here must be rejected */

/* OP_REPLY responseFlags */
#define REPLY_QUERY_FAILURE (1u << 1)
#define REPLY_AWAIT_CAPABLE (1u << 3)

struct wire_header {
	int32_t len;
	int32_t request_id;
	int32_t response_to;
	int32_t opcode;
};

/* What went wrong with a message: a MongoDB error code and text. */
struct wire_error {
	int code;
	const char *codename;
	char msg[256];
};

/* A validated OP_MSG: views into the message bytes. */
struct wire_msg {
	struct wire_header h;
	uint32_t flags;
	bson_t body;		  /* kind-0 section (static view) */
	uint32_t body_offset;	  /* offset of the body document in the message */
	int nsequences;		  /* kind-1 sections */
	const uint8_t *seq_start; /* first kind-1 section, or NULL */
};

/* A validated legacy OP_QUERY (handshake only). */
struct wire_query {
	struct wire_header h;
	int32_t flags;
	const char *collection; /* "db.$cmd" */
	bson_t query;		/* the command, unwrapped from $query if present */
};

enum wire_frame {
	WIRE_FRAME_NEED_MORE, /* header or body incomplete */
	WIRE_FRAME_READY,     /* *len_out bytes form one message */
	WIRE_FRAME_BAD,	      /* messageLength out of [16, 48 MB]: framing lost */
};

void wire_read_header(const uint8_t *p, struct wire_header *h);
void wire_write_i32(uint8_t *p, int32_t v);
int32_t wire_read_i32(const uint8_t *p);

/* `avail` bytes are buffered; `hdr` points to at least min(avail, 16) of them. */
enum wire_frame wire_frame_check(const uint8_t *hdr, size_t avail, int32_t *len_out);

bool wire_parse_msg(const uint8_t *data, size_t len, struct wire_msg *m, struct wire_error *err)
    __attribute__((warn_unused_result));
/* The same checks for a backend's reply, whose documents may exceed 16 MB. */
bool wire_parse_reply(const uint8_t *data, size_t len, struct wire_msg *m, struct wire_error *err)
    __attribute__((warn_unused_result));
bool wire_parse_query(const uint8_t *data, size_t len, struct wire_query *q, struct wire_error *err)
    __attribute__((warn_unused_result));

/* Each kind-1 section in turn: identifier and its documents' bytes. */
typedef bool (*wire_seq_cb)(const char *ident, const uint8_t *docs, size_t len, void *arg);
bool wire_msg_each_sequence(const uint8_t *data, size_t len, const struct wire_msg *m,
			    wire_seq_cb cb, void *arg);

/* Drop the checksum and clear exhaustAllowed in place; returns the new length. */
size_t wire_msg_prepare_forward(uint8_t *data, size_t len);

int32_t wire_next_request_id(void);

/* Replies. */
void wire_append_msg(struct evbuffer *out, int32_t request_id, int32_t response_to, uint32_t flags,
		     const bson_t *doc);
void wire_append_op_reply(struct evbuffer *out, int32_t response_to, uint32_t flags,
			  const bson_t *doc);

/* {ok: 0, errmsg, code, codeName, errorLabels?}; labels is a NULL-terminated list.
 * errmsg always starts with "mongoplex: " (added when msg lacks it). */
void wire_error_doc(bson_t *doc, int code, const char *codename, const char *msg,
		    const char *const *labels);

void wire_set_error(struct wire_error *err, int code, const char *codename, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

const char *wire_opcode_name(int32_t opcode);
