/*
 * errors.h — the MongoDB errors the proxy itself returns, declared once.
 *
 * MP_ERRORS is an X-macro list like MP_COUNTERS (core/stats.h): each row is
 * X(ID, code, codeName, labels), where code and codeName are MongoDB's own
 * (src/mongo/base/error_codes.yml; tests/unit/test_errors.c checks them; a
 * Location<code> name is one of mongod's unnamed assertion codes) and
 * labels are the errorLabels the proxy's own refusal of a request that never
 * reached a backend carries (NULL: none). Network failures of a forwarded
 * request choose their labels in request_fail_network. Call sites write
 * MP_ERR(HOST_UNREACHABLE) where a function takes (int code, const char
 * *codename); every errmsg starts with MP_ERRMSG_PREFIX (wire_error_doc adds
 * it when the caller did not).
 */
#pragma once

#include <stddef.h>

#define MP_ERRMSG_PREFIX "mongoplex: "

/* clang-format off */
#define MP_ERRORS(X)                                                                               \
	X(INTERNAL_ERROR, 1, "InternalError", NULL)                                                \
	X(BAD_VALUE, 2, "BadValue", NULL)                                                          \
	X(HOST_UNREACHABLE, 6, "HostUnreachable", NULL)                                            \
	X(UNAUTHORIZED, 13, "Unauthorized", NULL)                                                  \
	X(TYPE_MISMATCH, 14, "TypeMismatch", NULL)                                                 \
	X(OVERFLOW, 15, "Overflow", NULL)                                                          \
	X(AUTHENTICATION_FAILED, 18, "AuthenticationFailed", NULL)                                 \
	X(INVALID_BSON, 22, "InvalidBSON", NULL)                                                   \
	X(CURSOR_NOT_FOUND, 43, "CursorNotFound", NULL)                                            \
	X(FAILED_TO_SATISFY_READ_PREFERENCE, 133, "FailedToSatisfyReadPreference", NULL)           \
	X(COMMAND_NOT_FOUND, 59, "CommandNotFound", NULL)                                          \
	X(NETWORK_TIMEOUT, 89, "NetworkTimeout", NULL)                                             \
	X(SHUTDOWN_IN_PROGRESS, 91, "ShutdownInProgress", mp_labels_not_run)                       \
	X(CLIENT_METADATA_CANNOT_BE_MUTATED, 186, "ClientMetadataCannotBeMutated", NULL)           \
	X(EXCEEDED_TIME_LIMIT, 262, "ExceededTimeLimit", mp_labels_not_run)                        \
	X(UNSUPPORTED_OP_QUERY_COMMAND, 352, "UnsupportedOpQueryCommand", NULL)                    \
	X(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED, 462, "IngressRequestRateLimitExceeded",             \
	  mp_labels_overload)                                                                      \
	X(BSON_OBJECT_TOO_LARGE, 10334, "BSONObjectTooLarge", NULL)                                \
	X(IDL_DUPLICATE_FIELD, 40413, "IDLDuplicateField", NULL)                                   \
	X(IDL_FAILED_TO_PARSE, 40414, "IDLFailedToParse", NULL)                                    \
	X(LOCATION_40571, 40571, "Location40571", NULL)                                            \
	X(LOCATION_31368, 31368, "Location31368", NULL)                                            \
	X(LOCATION_31372, 31372, "Location31372", NULL)                                            \
	X(LOCATION_31373, 31373, "Location31373", NULL)                                            \
	X(LOCATION_31382, 31382, "Location31382", NULL)                                            \
	X(LOCATION_5626701, 5626701, "Location5626701", NULL)                                      \
	X(LOCATION_5626702, 5626702, "Location5626702", NULL)
/* clang-format on */

enum mp_err_id {
#define MP_ERR_ENUM(id, code, name, labels) MP_ERR_##id,
	MP_ERRORS(MP_ERR_ENUM)
#undef MP_ERR_ENUM
	    MP_ERR_COUNT
};

/* One row of the table; the table is constant and lives for the process. */
struct mp_error {
	int code;
	const char *name;
	const char *const *labels; /* NULL-terminated, or NULL */
};

extern const struct mp_error mp_errors[MP_ERR_COUNT];
/* Overload refusal: drivers back off and retry. */
extern const char *const mp_labels_overload[];
/* Refused before it ran (shutdown): safe to retry, writes included. */
extern const char *const mp_labels_not_run[];

/* The (code, codeName) argument pair of error ID, and its labels. */
#define MP_ERR(id)	  mp_errors[MP_ERR_##id].code, mp_errors[MP_ERR_##id].name
#define MP_ERR_LABELS(id) (mp_errors[MP_ERR_##id].labels)
