/*
 * usersinfo.c — parsing usersInfo {showCredentials: true} replies (see
 * usersinfo.h).
 */
#include "core/usersinfo.h"

#include <stdio.h>
#include <string.h>

static bool fail(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return false;
}

/* The backend's refusal: {ok: 0, code, errmsg}. */
static bool reply_ok(const bson_t *reply, int32_t *code, char *err, size_t errlen)
{
	bson_iter_t it;
	const char *msg = "(no errmsg)";

	*code = 0;
	if (bson_iter_init_find(&it, reply, "ok") && BSON_ITER_HOLDS_NUMBER(&it) &&
	    bson_iter_as_double(&it) == 1.0)
		return true;
	if (bson_iter_init_find(&it, reply, "code") && BSON_ITER_HOLDS_NUMBER(&it))
		*code = (int32_t)bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it))
		msg = bson_iter_utf8(&it, NULL);
	snprintf(err, errlen, "the backend refused usersInfo (code %d): %.200s", *code, msg);
	return false;
}

static bool b64_value(bson_iter_t *it, uint8_t *out, size_t cap, size_t *outlen)
{
	const char *s;
	uint32_t len;

	if (!BSON_ITER_HOLDS_UTF8(it))
		return false;
	s = bson_iter_utf8(it, &len);
	return len <= 4 * ((cap + 2) / 3) && scram_b64_decode(s, len, out, cap, outlen);
}

/* {iterationCount, salt, storedKey, serverKey}, each exactly once. */
static bool parse_cred(bson_iter_t *cred, enum scram_mech m, struct scram_secret *sec)
{
	bson_iter_t f;
	size_t kl1 = 0, kl2 = 0;
	int seen = 0;
	int64_t iter = 0;

	if (!BSON_ITER_HOLDS_DOCUMENT(cred) || !bson_iter_recurse(cred, &f))
		return false;
	memset(sec, 0, sizeof(*sec));
	while (bson_iter_next(&f)) {
		const char *k = bson_iter_key(&f);
		bool ok = true;
		int bit = 0;

		if (strcmp(k, "iterationCount") == 0) {
			bit = 1;
			ok = BSON_ITER_HOLDS_INT(&f);
			iter = ok ? bson_iter_as_int64(&f) : 0;
		} else if (strcmp(k, "salt") == 0) {
			bit = 2;
			ok = b64_value(&f, sec->salt, sizeof(sec->salt), &sec->salt_len);
		} else if (strcmp(k, "storedKey") == 0) {
			bit = 4;
			ok = b64_value(&f, sec->stored_key, sizeof(sec->stored_key), &kl1);
		} else if (strcmp(k, "serverKey") == 0) {
			bit = 8;
			ok = b64_value(&f, sec->server_key, sizeof(sec->server_key), &kl2);
		}
		if (!ok || (seen & bit) != 0)
			return false;
		seen |= bit;
	}
	if (seen != 15 || iter < SCRAM_MIN_ITERATIONS || iter > SCRAM_MAX_ITERATIONS ||
	    sec->salt_len == 0 || kl1 != scram_hash_len(m) || kl2 != scram_hash_len(m))
		return false;
	sec->iterations = (uint32_t)iter;
	sec->present = true;
	return true;
}

static bool str_is(const bson_t *doc, const char *key, const char *want)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it) &&
	       strcmp(bson_iter_utf8(&it, NULL), want) == 0;
}

/* One users[] element: the user asked for, with its credentials. */
static bool parse_user(const bson_t *u, const char *db, const char *user,
		       struct usersinfo_result *out, char *err, size_t errlen)
{
	bson_iter_t it, c;

	if (!str_is(u, "user", user) || !str_is(u, "db", db))
		return fail(err, errlen, "usersInfo answered about another user");
	if (!bson_iter_init_find(&it, u, "credentials") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
	    !bson_iter_recurse(&it, &c))
		return fail(err, errlen,
			    "usersInfo shows no credentials (does the proxy's backend_uri "
			    "identity have the viewUser privilege?)");
	while (bson_iter_next(&c)) {
		const char *k = bson_iter_key(&c);
		enum scram_mech m;
		struct scram_secret *sec;

		if (!scram_mech_parse(k, &m))
			continue; /* other mechanisms (X.509, PLAIN): not ours */
		sec = m == SCRAM_SHA_1 ? &out->sha1 : &out->sha256;
		if (sec->present || !parse_cred(&c, m, sec))
			return fail(err, errlen,
				    "usersInfo: a malformed or repeated SCRAM credential");
	}
	if (!out->sha1.present && !out->sha256.present)
		return fail(err, errlen, "usersInfo: the user has no SCRAM credential");
	out->found = true;
	return true;
}

bool usersinfo_parse(const bson_t *reply, const char *db, const char *user,
		     struct usersinfo_result *out, int32_t *code, char *err, size_t errlen)
{
	bson_iter_t it, arr;
	const uint8_t *data;
	uint32_t len;
	bson_t u;
	bool ok;

	memset(out, 0, sizeof(*out));
	if (!reply_ok(reply, code, err, errlen))
		return false;
	if (!bson_iter_init_find(&it, reply, "users") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return fail(err, errlen, "usersInfo reply without a users array");
	if (!bson_iter_next(&arr))
		return true; /* no such user */
	if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
		return fail(err, errlen, "usersInfo: a users element is not a document");
	bson_iter_document(&arr, &len, &data);
	if (!bson_init_static(&u, data, len))
		return fail(err, errlen, "usersInfo: invalid user document");
	ok = parse_user(&u, db, user, out, err, errlen);
	if (ok && bson_iter_next(&arr))
		ok = fail(err, errlen, "usersInfo listed more than one user");
	if (!ok)
		memset(out, 0, sizeof(*out));
	return ok;
}
