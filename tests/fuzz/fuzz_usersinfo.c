// FUZZ_SOURCES: core/usersinfo.c core/scram_prim.c
// FUZZ_PKGS: libbson-1.0 libgsasl libcrypto
// FUZZ_ARGS: -max_len=4096
/*
 * fuzz_usersinfo.c — libFuzzer target for auth_query's reply parser
 * (core/usersinfo.c), which reads what the backend answers to usersInfo
 * {showCredentials: true}.
 *
 * Mode (first byte, even): the rest is a BSON document (if libbson accepts
 * it) parsed as the reply for app.carol. Mode (odd): a well-formed reply is
 * assembled from the input: fields split at NUL bytes become the
 * credentials' salt / storedKey / serverKey strings and the user and db
 * names, control bits drop, repeat or retype fields and pick mechanisms and
 * iteration counts, so the checks deep inside are reached. Checks (any
 * failure aborts): a success about another user never happens; found means
 * at least one secret, each with salt 1..SCRAM_MAX_SALT bytes, iterations in
 * [SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS]; not found (or an error)
 * means no secret; in mode odd an accepted secret's keys are exactly the
 * base64 decoding of the strings given.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/usersinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_usersinfo: check failed: %s\n", #x);                 \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void check_secret(const struct scram_secret *s)
{
	if (!s->present)
		return;
	CHECK(s->salt_len >= 1 && s->salt_len <= SCRAM_MAX_SALT);
	CHECK(s->iterations >= SCRAM_MIN_ITERATIONS && s->iterations <= SCRAM_MAX_ITERATIONS);
}

static bool run(const bson_t *reply, const char *db, const char *user, struct usersinfo_result *r)
{
	char err[300];
	int32_t code;
	bool ok = usersinfo_parse(reply, db, user, r, &code, err, sizeof(err));

	if (!ok || !r->found) {
		CHECK(!r->sha1.present && !r->sha256.present);
		return ok;
	}
	CHECK(r->sha1.present || r->sha256.present);
	check_secret(&r->sha1);
	check_secret(&r->sha256);
	return ok;
}

/* The next NUL-terminated field of the input ("" when exhausted). */
static const char *field(const uint8_t **p, const uint8_t *end, char *buf, size_t cap)
{
	size_t n = 0;

	while (*p < end && **p != 0 && n + 1 < cap)
		buf[n++] = (char)*(*p)++;
	if (*p < end)
		(*p)++;
	buf[n] = '\0';
	return buf;
}

/* Decoded key equals what the secret holds. */
static void same_b64(const char *s, const uint8_t *key, size_t keylen)
{
	uint8_t dec[512];
	size_t n = 0;

	CHECK(scram_b64_decode(s, strlen(s), dec, sizeof(dec), &n));
	CHECK(n == keylen && memcmp(dec, key, n) == 0);
}

static void assembled(const uint8_t *p, const uint8_t *end, uint8_t ctl)
{
	char salt[600], sk[600], vk[600], user[64], db[64];
	static const int32_t iters[] = {4096, 15000, 4095, 10000001, 0, -1, 10000};
	bson_t doc, arr, u, creds, c;
	struct usersinfo_result r;
	const char *mech = (ctl & 2) ? "SCRAM-SHA-256" : "SCRAM-SHA-1";
	int32_t iter = iters[(ctl >> 2) % 7];

	field(&p, end, salt, sizeof(salt));
	field(&p, end, sk, sizeof(sk));
	field(&p, end, vk, sizeof(vk));
	field(&p, end, user, sizeof(user));
	field(&p, end, db, sizeof(db));
	bson_init(&doc);
	BSON_APPEND_ARRAY_BEGIN(&doc, "users", &arr);
	if (!(ctl & 32)) {
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &u);
		BSON_APPEND_UTF8(&u, "user", (ctl & 64) ? user : "carol");
		BSON_APPEND_UTF8(&u, "db", (ctl & 64) ? db : "app");
		BSON_APPEND_DOCUMENT_BEGIN(&u, "credentials", &creds);
		BSON_APPEND_DOCUMENT_BEGIN(&creds, mech, &c);
		if (ctl & 128)
			BSON_APPEND_UTF8(&c, "iterationCount", "15000");
		else
			BSON_APPEND_INT32(&c, "iterationCount", iter);
		BSON_APPEND_UTF8(&c, "salt", salt);
		BSON_APPEND_UTF8(&c, "storedKey", sk);
		BSON_APPEND_UTF8(&c, "serverKey", vk);
		if (p < end && (*p & 1))
			BSON_APPEND_UTF8(&c, "salt", salt); /* repeated */
		bson_append_document_end(&creds, &c);
		bson_append_document_end(&u, &creds);
		bson_append_document_end(&arr, &u);
	}
	bson_append_array_end(&doc, &arr);
	BSON_APPEND_INT32(&doc, "ok", (ctl & 16) ? 0 : 1);
	if (run(&doc, "app", "carol", &r) && r.found) {
		const struct scram_secret *s = (ctl & 2) ? &r.sha256 : &r.sha1;

		CHECK(!(ctl & 64) || (strcmp(user, "carol") == 0 && strcmp(db, "app") == 0));
		CHECK(s->present && s->iterations == (uint32_t)iter);
		same_b64(salt, s->salt, s->salt_len);
		same_b64(sk, s->stored_key,
			 scram_hash_len((ctl & 2) ? SCRAM_SHA_256 : SCRAM_SHA_1));
		same_b64(vk, s->server_key,
			 scram_hash_len((ctl & 2) ? SCRAM_SHA_256 : SCRAM_SHA_1));
	}
	bson_destroy(&doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct usersinfo_result r;
	bson_t doc;
	uint8_t *copy;

	if (size < 2)
		return 0;
	if (data[0] & 1) {
		assembled(data + 2, data + size, data[1]);
		return 0;
	}
	copy = malloc(size - 1);
	if (copy == NULL)
		return 0;
	memcpy(copy, data + 1, size - 1);
	if (bson_init_static(&doc, copy, size - 1))
		(void)run(&doc, "app", "carol", &r);
	free(copy);
	return 0;
}
