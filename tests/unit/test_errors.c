/*
 * test_errors.c — the error table (core/errors.h, MP_ERRORS): every code and
 * every codeName appears once; each name is MongoDB's own for its code
 * (reference rows copied from mongod's src/mongo/base/error_codes.yml), and a
 * code mongod leaves unnamed is spelled Location<code>, as mongod sends it;
 * label lists are NULL-terminated MongoDB labels. Also: wire_error_doc gives
 * every errmsg exactly one "mongoplex: " prefix.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/errors.h"
#include "core/wire.h"

/* mongod's error_codes.yml for the codes the proxy returns. */
static const struct {
	int code;
	const char *name;
} mongod_codes[] = {
    {1, "InternalError"},
    {2, "BadValue"},
    {6, "HostUnreachable"},
    {13, "Unauthorized"},
    {14, "TypeMismatch"},
    {15, "Overflow"},
    {18, "AuthenticationFailed"},
    {22, "InvalidBSON"},
    {43, "CursorNotFound"},
    {59, "CommandNotFound"},
    {89, "NetworkTimeout"},
    {91, "ShutdownInProgress"},
    {133, "FailedToSatisfyReadPreference"},
    {186, "ClientMetadataCannotBeMutated"},
    {262, "ExceededTimeLimit"},
    {352, "UnsupportedOpQueryCommand"},
    {462, "IngressRequestRateLimitExceeded"},
    {10334, "BSONObjectTooLarge"},
    {40413, "IDLDuplicateField"},
    {40414, "IDLFailedToParse"},
};

static const char *mongod_name(int code)
{
	for (size_t i = 0; i < sizeof(mongod_codes) / sizeof(mongod_codes[0]); i++)
		if (mongod_codes[i].code == code)
			return mongod_codes[i].name;
	return NULL;
}

Test(errors, codes_and_names_are_unique)
{
	for (int i = 0; i < MP_ERR_COUNT; i++)
		for (int j = i + 1; j < MP_ERR_COUNT; j++) {
			cr_expect_neq(mp_errors[i].code, mp_errors[j].code,
				      "code %d twice (%s, %s)", mp_errors[i].code,
				      mp_errors[i].name, mp_errors[j].name);
			cr_expect_str_neq(mp_errors[i].name, mp_errors[j].name, "name %s twice",
					  mp_errors[i].name);
		}
}

Test(errors, names_are_mongods)
{
	for (int i = 0; i < MP_ERR_COUNT; i++) {
		const char *want = mongod_name(mp_errors[i].code);
		char location[32];

		cr_assert_not_null(mp_errors[i].name, "row %d has no name", i);
		if (want == NULL) {
			snprintf(location, sizeof(location), "Location%d", mp_errors[i].code);
			want = location;
		}
		cr_expect_str_eq(mp_errors[i].name, want, "code %d: mongod calls it %s, not %s",
				 mp_errors[i].code, want, mp_errors[i].name);
	}
}

Test(errors, labels_are_known_and_terminated)
{
	static const char *const known[] = {"RetryableError", "RetryableWriteError",
					    "SystemOverloadedError"};

	for (int i = 0; i < MP_ERR_COUNT; i++) {
		const char *const *l = mp_errors[i].labels;

		for (int k = 0; l != NULL && l[k] != NULL; k++) {
			bool ok = false;

			cr_assert_lt(k, 8, "%s: labels not NULL-terminated", mp_errors[i].name);
			for (size_t j = 0; j < sizeof(known) / sizeof(known[0]); j++)
				ok = ok || strcmp(l[k], known[j]) == 0;
			cr_expect(ok, "%s: unknown label %s", mp_errors[i].name, l[k]);
		}
	}
	cr_expect_not_null(MP_ERR_LABELS(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED));
	cr_expect_str_eq(MP_ERR_LABELS(INGRESS_REQUEST_RATE_LIMIT_EXCEEDED)[0],
			 "SystemOverloadedError");
}

static void expect_errmsg(const char *msg, const char *want)
{
	bson_t doc;
	bson_iter_t it;

	wire_error_doc(&doc, MP_ERR(BAD_VALUE), msg, NULL);
	cr_assert(bson_iter_init_find(&it, &doc, "errmsg") && BSON_ITER_HOLDS_UTF8(&it));
	cr_expect_str_eq(bson_iter_utf8(&it, NULL), want);
	cr_assert(bson_iter_init_find(&it, &doc, "codeName") && BSON_ITER_HOLDS_UTF8(&it));
	cr_expect_str_eq(bson_iter_utf8(&it, NULL), "BadValue");
	bson_destroy(&doc);
}

Test(errors, one_errmsg_prefix)
{
	expect_errmsg("OP_MSG: checksum mismatch", "mongoplex: OP_MSG: checksum mismatch");
	expect_errmsg("mongoplex: cursor id 7 not found", "mongoplex: cursor id 7 not found");
}
