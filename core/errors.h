/*
 * errors.h — the MongoDB errors the proxy itself returns, declared once.
 *
 * MP_ERRORS is an X-macro list like MP_COUNTERS (core/stats.h): each row is
 * X(ID, code, codeName, labels, when), where code and codeName are MongoDB's own
 * (src/mongo/base/error_codes.yml; tests/unit/test_errors.c checks them; a
 * Location<code> name is one of mongod's unnamed assertion codes) and
 * labels are the errorLabels the proxy's own refusal of a request that never
 * reached a backend carries (NULL: none), and when says when a client gets it
 * (docs/errors.md is generated from it: mongoplex --write-errors-md; run
 * scripts/gen-docs.sh after a change). Network failures of a forwarded
 * request choose their labels in request_fail_network. Call sites write
 * MP_ERR(HOST_UNREACHABLE) where a function takes (int code, const char
 * *codename); every errmsg starts with MP_ERRMSG_PREFIX (wire_error_doc adds
 * it when the caller did not).
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

#define MP_ERRMSG_PREFIX "mongoplex: "

/* clang-format off */
#define MP_ERRORS(X) \
	X(INTERNAL_ERROR, 1, "InternalError", NULL, \
	  "the proxy could not make sense of its own merged lookup's reply from the " \
	  "backend (mongoplex: bad batch reply); a bug, report it") \
	X(BAD_VALUE, 2, "BadValue", NULL, \
	  "a malformed OP_MSG (sections, flags, checksum), an unsupported opcode, or a " \
	  "corrupt, oversized or not-enabled OP_COMPRESSED message (then the connection " \
	  "is closed, the reason logged)") \
	X(HOST_UNREACHABLE, 6, "HostUnreachable", NULL, \
	  "the backend cannot be reached or dropped the connection mid-request, or a " \
	  "backend TLS handshake failed (mongoplex: cannot reach backend H:P: TLS " \
	  "handshake with H:P failed: certificate verify failed (...)); also a ping the " \
	  "proxy answers while no backend is usable") \
	X(UNAUTHORIZED, 13, "Unauthorized", NULL, \
	  "auth_mode = scram and the client has not logged in (mongoplex: command X " \
	  "requires authentication); or a session-wide command (killAllSessions, " \
	  "killSessions, currentOp, $currentOp, $listSessions, ...) through a shared " \
	  "backend identity (mongoplex: currentOp is not allowed: every client of this " \
	  "proxy reaches the backend as one shared identity ...; see " \
	  "docs/authentication.md)") \
	X(TYPE_MISMATCH, 14, "TypeMismatch", NULL, \
	  "a getMore/killCursors whose cursor id is not an integer (checked before the " \
	  "ownership test); a hello whose topologyVersion or maxAwaitTimeMS has the wrong " \
	  "type") \
	X(OVERFLOW, 15, "Overflow", NULL, \
	  "a document nests deeper than mongod's 200 levels: each OP_MSG section document " \
	  "is depth 0, each embedded document or array one more, so a find filter chain " \
	  "may hold 200 documents counting the filter, and an insert document may nest " \
	  "200 levels in a kind-1 sequence, 198 inside the body's documents array; the " \
	  "connection stays usable") \
	X(AUTHENTICATION_FAILED, 18, "AuthenticationFailed", NULL, \
	  "a client login failed (mongoplex: Authentication failed.; the log says why), " \
	  "credentials sent while auth_mode = none, or the proxy's own backend login " \
	  "failed (mongoplex: backend authentication failed for user \"U\" on HOST:PORT: " \
	  "...), per-user pools included") \
	X(INVALID_BSON, 22, "InvalidBSON", NULL, \
	  "a document in the message is not valid BSON") \
	X(CURSOR_NOT_FOUND, 43, "CursorNotFound", NULL, \
	  "a getMore of a cursor this client connection did not open (another client's, a " \
	  "logged-out user's, or none: mongoplex: cursor id N not found, as mongod " \
	  "answers an unknown cursor), or of a load-balanced cursor whose pin expired " \
	  "after lb_pin_idle_timeout_ms; killCursors of such ids answers ok: 1 with them " \
	  "in cursorsNotFound (owned ids in the same command are killed)") \
	X(FAILED_TO_SATISFY_READ_PREFERENCE, 133, "FailedToSatisfyReadPreference", NULL, \
	  "replica set: no member could serve the request's read preference (for a write: " \
	  "no primary) within serverSelectionTimeoutMS / queue_timeout_ms; never sent") \
	X(COMMAND_NOT_FOUND, 59, "CommandNotFound", NULL, \
	  "a command the proxy refuses to forward because transaction-level pooling " \
	  "cannot honour it (exhaust), or an empty command document") \
	X(NETWORK_TIMEOUT, 89, "NetworkTimeout", NULL, \
	  "the backend did not answer within query_timeout_ms, or connect plus handshake " \
	  "took longer than connect_timeout_ms") \
	X(SHUTDOWN_IN_PROGRESS, 91, "ShutdownInProgress", mp_labels_not_run, \
	  "a request or hello arrived during a graceful shutdown (SIGTERM); never sent to " \
	  "the backend, safe to retry elsewhere") \
	X(CLIENT_METADATA_CANNOT_BE_MUTATED, 186, "ClientMetadataCannotBeMutated", NULL, \
	  "a second hello on a connection carried client metadata") \
	X(EXCEEDED_TIME_LIMIT, 262, "ExceededTimeLimit", mp_labels_not_run, \
	  "a request held by a pause (mongoplexPause) longer than pause_timeout_ms; it was " \
	  "never sent, so drivers retry it (mongoplex: paused for maintenance ...)") \
	X(UNSUPPORTED_OP_QUERY_COMMAND, 352, "UnsupportedOpQueryCommand", NULL, \
	  "a legacy OP_QUERY other than the hello/isMaster handshake") \
	X(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED, 462, "IngressRequestRateLimitExceeded", mp_labels_overload, \
	  "overload: max_queue full, queue_timeout_ms expired waiting for a backend " \
	  "connection (or a load-balanced pin), max_client_conn or max_unauth_conn " \
	  "exceeded") \
	X(BSON_OBJECT_TOO_LARGE, 10334, "BSONObjectTooLarge", NULL, \
	  "messageLength outside 16 B .. 48 MB, or an OP_COMPRESSED uncompressedSize " \
	  "above 48 MB (then the connection is closed)") \
	X(IDL_DUPLICATE_FIELD, 40413, "IDLDuplicateField", NULL, \
	  "a getMore/killCursors with a duplicated field (checked before the ownership " \
	  "test)") \
	X(IDL_FAILED_TO_PARSE, 40414, "IDLFailedToParse", NULL, \
	  "a getMore/killCursors without collection/cursors (checked before the ownership " \
	  "test)") \
	X(LOCATION_40571, 40571, "Location40571", NULL, \
	  "an OP_MSG without $db") \
	X(LOCATION_31368, 31368, "Location31368", NULL, \
	  "a hello with topologyVersion or maxAwaitTimeMS but not both") \
	X(LOCATION_31372, 31372, "Location31372", NULL, \
	  "a hello whose topologyVersion counter is negative") \
	X(LOCATION_31373, 31373, "Location31373", NULL, \
	  "a hello whose maxAwaitTimeMS is negative") \
	X(LOCATION_31382, 31382, "Location31382", NULL, \
	  "a hello whose topologyVersion counter is above the proxy's") \
	X(LOCATION_5626701, 5626701, "Location5626701", NULL, \
	  "a login as another user on a connection already logged in (mongod 6+'s code " \
	  "and message); logout first") \
	X(LOCATION_5626702, 5626702, "Location5626702", NULL, \
	  "a login as a user of another database on a connection already logged in " \
	  "(mongod 6+'s code and message)")
/* clang-format on */

enum mp_err_id {
#define MP_ERR_ENUM(id, code, name, labels, when) MP_ERR_##id,
	MP_ERRORS(MP_ERR_ENUM)
#undef MP_ERR_ENUM
	    MP_ERR_COUNT
};

/* One row of the table; the table is constant and lives for the process. */
struct mp_error {
	int code;
	const char *name;
	const char *const *labels; /* NULL-terminated, or NULL */
	const char *when;	   /* when a client gets it (docs/errors.md) */
};

extern const struct mp_error mp_errors[MP_ERR_COUNT];
/* Overload refusal: drivers back off and retry. */
extern const char *const mp_labels_overload[];
/* Refused before it ran (shutdown): safe to retry, writes included. */
extern const char *const mp_labels_not_run[];

/* The (code, codeName) argument pair of error ID, and its labels. */
#define MP_ERR(id)	  mp_errors[MP_ERR_##id].code, mp_errors[MP_ERR_##id].name
#define MP_ERR_LABELS(id) (mp_errors[MP_ERR_##id].labels)

/* docs/errors.md: the table above as Markdown (mongoplex --write-errors-md). */
void mp_errors_write_markdown(FILE *out);
