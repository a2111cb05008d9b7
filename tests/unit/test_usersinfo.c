/*
 * test_usersinfo.c — auth_query's reply parser (core/usersinfo.c): a real
 * FerretDB usersInfo {showCredentials: true} reply read into both secrets
 * (checked against a verifier computed from the password), no such user,
 * the backend's refusal with its code, and every malformed credential
 * refused: another user, short keys, iterations out of range, a repeated
 * or missing field, no SCRAM credential at all.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/usersinfo.h"

#define SHA1_CRED                                                                                  \
	"{\"iterationCount\": 10000, \"salt\": \"5zVk9RECLh+dSoOyA+Yu6g==\", \"storedKey\": "      \
	"\"VCyxE5Fqf4OfcihatKMrdI+NAe8=\", \"serverKey\": \"vafKR9CGZKO6KtSFL8HrEwsWnzY=\"}"
#define SHA256_CRED                                                                                \
	"{\"iterationCount\": 15000, \"salt\": \"F0EQPrqex3fC/p6Vspdf2BFG9ZhgZZ6yx4f7Xw==\", "     \
	"\"storedKey\": \"f2NNuDdXy9NBdO5W5XEs0AEyiAXoc2PyM6TdBOowacg=\", \"serverKey\": "         \
	"\"7mRucNx4Y4TuS1GxyTKTZBnz5dqy7HDIg8Bg1Hmsq1s=\"}"

static bool parse(const char *json, struct usersinfo_result *r, int32_t *code, char *err)
{
	bson_error_t berr;
	bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
	bool ok;

	cr_assert(doc != NULL, "%s: %s", json, berr.message);
	ok = usersinfo_parse(doc, "app", "carol", r, code, err, 300);
	bson_destroy(doc);
	return ok;
}

/* A reply for app.carol whose credentials document is `creds`. */
static bool parse_creds(const char *creds, struct usersinfo_result *r, char *err)
{
	char json[2048];
	int32_t code;

	snprintf(json, sizeof(json),
		 "{\"users\": [{\"_id\": \"app.carol\", \"user\": \"carol\", \"db\": \"app\", "
		 "\"credentials\": %s, \"roles\": []}], \"ok\": 1.0}",
		 creds);
	return parse(json, r, &code, err);
}

Test(usersinfo, ferretdb_reply_gives_both_secrets)
{
	struct usersinfo_result r;
	char err[300];
	uint8_t salt[16];
	size_t n;

	cr_assert(parse_creds("{\"SCRAM-SHA-1\": " SHA1_CRED ", \"SCRAM-SHA-256\": " SHA256_CRED
			      ", \"PLAIN\": {}}",
			      &r, err),
		  "%s", err);
	cr_assert(r.found && r.sha1.present && r.sha256.present);
	cr_assert_eq(r.sha1.iterations, 10000);
	cr_assert_eq(r.sha256.iterations, 15000);
	cr_assert(scram_b64_decode("5zVk9RECLh+dSoOyA+Yu6g==", 24, salt, sizeof(salt), &n));
	cr_assert(n == r.sha1.salt_len && memcmp(salt, r.sha1.salt, n) == 0);
	cr_assert_eq(r.sha256.salt_len, 28);
	cr_assert_eq(r.sha1.stored_key[0], 0x54);   /* "VCyx" */
	cr_assert_eq(r.sha256.server_key[0], 0xee); /* "7mRu" */
}

Test(usersinfo, no_such_user_and_refusals)
{
	struct usersinfo_result r;
	char err[300];
	int32_t code;

	cr_assert(parse("{\"users\": [], \"ok\": 1.0}", &r, &code, err), "%s", err);
	cr_assert(!r.found && !r.sha1.present && !r.sha256.present);
	cr_assert_not(parse("{\"ok\": 0.0, \"code\": 13, \"errmsg\": \"not authorized on app\"}",
			    &r, &code, err));
	cr_assert_eq(code, 13);
	cr_assert(strstr(err, "code 13") && strstr(err, "not authorized on app"), "%s", err);
	cr_assert_not(parse("{\"ok\": 1.0}", &r, &code, err));
	cr_assert_not(parse("{\"users\": {}, \"ok\": 1.0}", &r, &code, err));
	cr_assert_not(parse("{\"users\": [1], \"ok\": 1.0}", &r, &code, err));
	cr_assert_not(
	    parse("{\"users\": [{\"user\": \"mallory\", \"db\": \"app\", \"credentials\": "
		  "{\"SCRAM-SHA-1\": " SHA1_CRED "}}], \"ok\": 1.0}",
		  &r, &code, err));
	cr_assert(strstr(err, "another user"), "%s", err);
	cr_assert_not(parse("{\"users\": [{\"user\": \"carol\", \"db\": \"app\"}], \"ok\": 1.0}",
			    &r, &code, err));
	cr_assert(strstr(err, "viewUser"), "%s", err);
	cr_assert(!r.found && !r.sha1.present);
}

Test(usersinfo, malformed_credentials_refused)
{
	static const char *const bad[] = {
	    /* a SHA-256-sized key under SHA-1 */
	    "{\"SCRAM-SHA-1\": " SHA256_CRED "}",
	    "{\"SCRAM-SHA-1\": {\"iterationCount\": 4095, \"salt\": \"5zVk9RECLh+dSoOyA+Yu6g==\", "
	    "\"storedKey\": \"VCyxE5Fqf4OfcihatKMrdI+NAe8=\", \"serverKey\": "
	    "\"vafKR9CGZKO6KtSFL8HrEwsWnzY=\"}}",
	    "{\"SCRAM-SHA-1\": {\"iterationCount\": 10000, \"salt\": \"\", \"storedKey\": "
	    "\"VCyxE5Fqf4OfcihatKMrdI+NAe8=\", \"serverKey\": \"vafKR9CGZKO6KtSFL8HrEwsWnzY=\"}}",
	    "{\"SCRAM-SHA-1\": {\"iterationCount\": 10000, \"salt\": \"5zVk9RECLh+dSoOyA+Yu6g==\", "
	    "\"storedKey\": \"VCyxE5Fqf4OfcihatKMrdI+NAe8=\"}}",
	    "{\"SCRAM-SHA-1\": {\"iterationCount\": 10000, \"iterationCount\": 10000, \"salt\": "
	    "\"5zVk9RECLh+dSoOyA+Yu6g==\", \"storedKey\": \"VCyxE5Fqf4OfcihatKMrdI+NAe8=\", "
	    "\"serverKey\": \"vafKR9CGZKO6KtSFL8HrEwsWnzY=\"}}",
	    "{\"SCRAM-SHA-1\": {\"iterationCount\": \"10000\", \"salt\": "
	    "\"5zVk9RECLh+dSoOyA+Yu6g==\", "
	    "\"storedKey\": \"VCyxE5Fqf4OfcihatKMrdI+NAe8=\", \"serverKey\": "
	    "\"vafKR9CGZKO6KtSFL8HrEwsWnzY=\"}}",
	    "{\"SCRAM-SHA-1\": {\"iterationCount\": 10000, \"salt\": \"not base64!\", "
	    "\"storedKey\": "
	    "\"VCyxE5Fqf4OfcihatKMrdI+NAe8=\", \"serverKey\": \"vafKR9CGZKO6KtSFL8HrEwsWnzY=\"}}",
	    "{\"SCRAM-SHA-1\": 1}",
	    "{\"PLAIN\": {}}",
	    "{}",
	};
	struct usersinfo_result r;
	char err[300];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_not(parse_creds(bad[i], &r, err), "accepted #%zu: %s", i, bad[i]);
		cr_assert(!r.found && !r.sha1.present && !r.sha256.present, "#%zu", i);
	}
}
