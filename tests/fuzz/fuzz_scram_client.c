// FUZZ_SOURCES: pool/scram.c core/scram_prim.c
// FUZZ_PKGS: openssl libgsasl
// FUZZ_SEEDS: tests/fuzz/seeds_scram_client.py
/*
 * fuzz_scram_client.c — libFuzzer target for the backend-side SCRAM parser
 * (pool/scram.c): the server-first-message and server-final-message come
 * from the backend, so they are untrusted bytes.
 *
 * Input: byte 0 picks the mechanism (even: SCRAM-SHA-256, odd: SHA-1); the
 * rest is the server-first-message, up to an optional 0 byte; what follows
 * the 0 byte is a server-final-message tried before the real one.
 *
 * Checks (any failure aborts):
 *  - scram_client_final never writes past its buffer and, when it accepts,
 *    the server nonce starts with the client's, the salt is valid base64,
 *    4096 <= iterations <= 10,000,000, and the client-final message carries
 *    the proof an independent computation here (OpenSSL PBKDF2/HMAC) gives;
 *  - a fuzzed server-final is accepted only if it is the exact signature;
 *  - the correct signature (computed here) is accepted, and a signature with
 *    one flipped bit is refused.
 * Inputs announcing more than 8192 iterations are skipped (PBKDF2 time, not
 * parsing). Build and run: tests/fuzz/README.md.
 */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/scram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CLIENT_NONCE "fyko+d2lbbFgONRv9qkxdawL"
#define USER	     "fuzzuser"
#define PASSWORD     "pencil"

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "check failed: %s (line %d)\n", #cond, __LINE__);          \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* The value of attribute `k` ("k=...") in a comma-separated message. */
static const char *attr(const char *msg, char k, size_t *len)
{
	const char *p = msg;

	while (p != NULL && *p != '\0') {
		if (p[0] == k && p[1] == '=') {
			const char *end = strchr(p, ',');

			*len = end ? (size_t)(end - p - 2) : strlen(p + 2);
			return p + 2;
		}
		p = strchr(p, ',');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* Announced iteration count, or -1; only for the time cap. */
static long announced_iterations(const char *first)
{
	size_t n;
	const char *v = attr(first, 'i', &n);
	char buf[16];

	if (v == NULL || n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, v, n);
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

static int b64_decode(const char *in, size_t n, uint8_t *out, size_t outcap)
{
	int len;
	size_t pad = 0;

	if (n == 0 || n % 4 != 0 || (n / 4) * 3 > outcap)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (in[i] == '=') {
			if (i + 2 < n || (i + 1 < n && in[i + 1] != '='))
				return -1;
		} else if (!strchr(
			       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
			       in[i]) ||
			   in[i] == '\0') {
			return -1;
		}
	}
	len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);
	if (len < 0)
		return -1;
	while (pad < 2 && pad < n && in[n - 1 - pad] == '=')
		pad++;
	return len - (int)pad;
}

static void b64_encode(const uint8_t *in, size_t n, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

struct ref {
	uint8_t proof[SCRAM_MAX_HASH];
	uint8_t server_sig[SCRAM_MAX_HASH];
	unsigned hlen;
};

/* The proof and the server signature, computed independently of scram.c. */
static void reference(enum scram_mech m, const char *prepared, const uint8_t *salt, int saltlen,
		      int iters, const char *auth_msg, struct ref *r)
{
	const EVP_MD *md = m == SCRAM_SHA_1 ? EVP_sha1() : EVP_sha256();
	uint8_t salted[SCRAM_MAX_HASH], ckey[SCRAM_MAX_HASH], skey[SCRAM_MAX_HASH];
	uint8_t stored[SCRAM_MAX_HASH], csig[SCRAM_MAX_HASH];
	unsigned l;

	r->hlen = (unsigned)EVP_MD_size(md);
	CHECK(PKCS5_PBKDF2_HMAC(prepared, (int)strlen(prepared), salt, saltlen, iters, md,
				(int)r->hlen, salted) == 1);
	HMAC(md, salted, (int)r->hlen, (const uint8_t *)"Client Key", 10, ckey, &l);
	HMAC(md, salted, (int)r->hlen, (const uint8_t *)"Server Key", 10, skey, &l);
	EVP_Digest(ckey, r->hlen, stored, &l, md, NULL);
	HMAC(md, stored, (int)r->hlen, (const uint8_t *)auth_msg, strlen(auth_msg), csig, &l);
	for (unsigned i = 0; i < r->hlen; i++)
		r->proof[i] = ckey[i] ^ csig[i];
	HMAC(md, skey, (int)r->hlen, (const uint8_t *)auth_msg, strlen(auth_msg), r->server_sig,
	     &l);
}

/* After an accepted server-first: check the client-final against the
 * reference and the server-final checks. */
static void check_accepted(struct scram *sc, enum scram_mech m, const char *prepared,
			   const char *first, const char *cfinal, const uint8_t *fin, size_t finlen)
{
	size_t rn, sn, in, pn;
	const char *r = attr(first, 'r', &rn), *s = attr(first, 's', &sn),
		   *i = attr(first, 'i', &in);
	const char *p = strstr(cfinal, ",p=");
	uint8_t salt[1024], proof[128];
	char auth_msg[4 * SCRAM_MSG_MAX], good[80], bad[80];
	int saltlen, iters, prooflen;
	struct ref ref;
	char ibuf[16];

	CHECK(r != NULL && s != NULL && i != NULL && p != NULL);
	CHECK(rn > strlen(CLIENT_NONCE) && memcmp(r, CLIENT_NONCE, strlen(CLIENT_NONCE)) == 0);
	saltlen = b64_decode(s, sn, salt, sizeof(salt));
	CHECK(saltlen > 0);
	CHECK(in > 0 && in < sizeof(ibuf));
	memcpy(ibuf, i, in);
	ibuf[in] = '\0';
	iters = atoi(ibuf);
	CHECK(iters >= SCRAM_MIN_ITERATIONS && iters <= SCRAM_MAX_ITERATIONS);
	snprintf(auth_msg, sizeof(auth_msg), "%s,%s,%.*s", sc->client_first_bare, first,
		 (int)(p - cfinal), cfinal);
	reference(m, prepared, salt, saltlen, iters, auth_msg, &ref);
	pn = strlen(p + 3);
	prooflen = b64_decode(p + 3, pn, proof, sizeof(proof));
	CHECK(prooflen == (int)ref.hlen && memcmp(proof, ref.proof, ref.hlen) == 0);

	strcpy(good, "v=");
	b64_encode(ref.server_sig, ref.hlen, good + 2);
	if (fin != NULL) {
		struct scram copy = *sc;
		char err[256];
		bool ok = scram_verify_final(&copy, (const char *)fin, finlen, err, sizeof(err));

		/* Accepted only when it is the signature (optionally with more attributes). */
		if (ok)
			CHECK(finlen >= strlen(good) && memcmp(fin, good, strlen(good)) == 0);
		scram_clear(&copy);
	}
	{
		struct scram copy = *sc;
		char err[256];
		uint8_t flipped[SCRAM_MAX_HASH];

		memcpy(flipped, ref.server_sig, ref.hlen);
		flipped[(unsigned)iters % ref.hlen] ^= 1;
		strcpy(bad, "v=");
		b64_encode(flipped, ref.hlen, bad + 2);
		CHECK(!scram_verify_final(&copy, bad, strlen(bad), err, sizeof(err)));
		scram_clear(&copy);
	}
	{
		char err[256];

		CHECK(scram_verify_final(sc, good, strlen(good), err, sizeof(err)));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum scram_mech m;
	char prepared[256], err[256], out[SCRAM_MSG_MAX], cfinal[SCRAM_MSG_MAX + 16];
	char first[SCRAM_MSG_MAX + 1];
	const uint8_t *zero, *fin = NULL;
	size_t firstlen, finlen = 0;
	struct scram sc;

	if (size < 1)
		return 0;
	m = (data[0] & 1) ? SCRAM_SHA_1 : SCRAM_SHA_256;
	data++;
	size--;
	zero = memchr(data, 0, size);
	firstlen = zero ? (size_t)(zero - data) : size;
	if (zero != NULL) {
		fin = zero + 1;
		finlen = size - firstlen - 1;
	}
	if (firstlen > SCRAM_MSG_MAX)
		return 0;
	memcpy(first, data, firstlen);
	first[firstlen] = '\0';
	if (announced_iterations(first) > 8192)
		return 0;

	memset(&sc, 0, sizeof(sc));
	CHECK(scram_prepare_password(m, USER, PASSWORD, prepared, sizeof(prepared), err,
				     sizeof(err)));
	CHECK(
	    scram_start(&sc, m, USER, prepared, CLIENT_NONCE, out, sizeof(out), err, sizeof(err)));
	/* The canary after the output buffer must survive. */
	memset(cfinal, 0x5a, sizeof(cfinal));
	if (scram_client_final(&sc, (const char *)data, firstlen, cfinal, SCRAM_MSG_MAX, err,
			       sizeof(err))) {
		for (size_t k = SCRAM_MSG_MAX; k < sizeof(cfinal); k++)
			CHECK((uint8_t)cfinal[k] == 0x5a);
		CHECK(memchr(cfinal, '\0', SCRAM_MSG_MAX) != NULL);
		check_accepted(&sc, m, prepared, first, cfinal, fin, finlen);
	} else {
		for (size_t k = SCRAM_MSG_MAX; k < sizeof(cfinal); k++)
			CHECK((uint8_t)cfinal[k] == 0x5a);
		CHECK(memchr(err, '\0', sizeof(err)) != NULL);
	}
	scram_clear(&sc);
	return 0;
}
