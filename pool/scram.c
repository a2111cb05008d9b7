/*
 * scram.c — SCRAM-SHA-1/SHA-256 client messages (RFC 5802, RFC 7677, the
 * MongoDB authentication spec) on OpenSSL primitives and libgsasl's SASLprep.
 *
 *   SaltedPassword  = PBKDF2-HMAC-H(prepared password, salt, i)   (cached)
 *   ClientKey       = HMAC(SaltedPassword, "Client Key")          (cached)
 *   ServerKey       = HMAC(SaltedPassword, "Server Key")          (cached)
 *   AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
 *   ClientProof     = ClientKey XOR HMAC(H(ClientKey), AuthMessage)
 *   ServerSignature = HMAC(ServerKey, AuthMessage)  -> compared with CRYPTO_memcmp
 */
#include "pool/scram.h"

#include <ctype.h>
#include <gsasl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/md5.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Derived keys for one (user, mech, password, salt, iterations). Rules: a
 * small fixed table, replaced round-robin; entries hold secrets and are
 * wiped when replaced or flushed. */
struct scram_cache_entry {
	bool used;
	enum scram_mech mech;
	char user[256];
	char prepared[256];
	uint8_t salt[128];
	size_t salt_len;
	uint32_t iterations;
	uint8_t client_key[SCRAM_MAX_HASH];
	uint8_t server_key[SCRAM_MAX_HASH];
};

#define CACHE_SLOTS 8

static struct scram_cache_entry cache[CACHE_SLOTS];
static int cache_next;
static uint64_t pbkdf2_runs;

uint64_t scram_pbkdf2_runs(void)
{
	return pbkdf2_runs;
}

void scram_cache_flush(void)
{
	OPENSSL_cleanse(cache, sizeof(cache));
	cache_next = 0;
}

const char *scram_mech_name(enum scram_mech m)
{
	return m == SCRAM_SHA_1 ? "SCRAM-SHA-1" : "SCRAM-SHA-256";
}

bool scram_mech_parse(const char *name, enum scram_mech *out)
{
	if (strcmp(name, "SCRAM-SHA-1") == 0)
		*out = SCRAM_SHA_1;
	else if (strcmp(name, "SCRAM-SHA-256") == 0)
		*out = SCRAM_SHA_256;
	else
		return false;
	return true;
}

static const EVP_MD *mech_md(enum scram_mech m)
{
	return m == SCRAM_SHA_1 ? EVP_sha1() : EVP_sha256();
}

static size_t mech_len(enum scram_mech m)
{
	return m == SCRAM_SHA_1 ? SHA_DIGEST_LENGTH : SHA256_DIGEST_LENGTH;
}

static bool md5_hex(const char *user, const char *password, char *out, size_t outlen)
{
	uint8_t digest[EVP_MAX_MD_SIZE];
	unsigned int dlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_md5(), NULL) &&
		  EVP_DigestUpdate(ctx, user, strlen(user)) &&
		  EVP_DigestUpdate(ctx, ":mongo:", 7) &&
		  EVP_DigestUpdate(ctx, password, strlen(password)) &&
		  EVP_DigestFinal_ex(ctx, digest, &dlen);

	EVP_MD_CTX_free(ctx);
	if (!ok || outlen < 2 * (size_t)dlen + 1)
		return false;
	for (unsigned int i = 0; i < dlen; i++)
		snprintf(out + 2 * i, 3, "%02x", digest[i]);
	OPENSSL_cleanse(digest, sizeof(digest));
	return true;
}

bool scram_prepare_password(enum scram_mech m, const char *user, const char *password, char *out,
			    size_t outlen, char *err, size_t errlen)
{
	char *prepped = NULL;
	int rc, stringprep_rc = 0;
	size_t n;

	if (m == SCRAM_SHA_1) {
		if (md5_hex(user, password, out, outlen))
			return true;
		snprintf(err, errlen, "cannot digest the password (MD5)");
		return false;
	}
	rc = gsasl_saslprep(password, 0, &prepped, &stringprep_rc);
	if (rc != GSASL_OK) {
		snprintf(err, errlen, "the password is not valid for SASLprep: %s",
			 gsasl_strerror(rc));
		return false;
	}
	n = strlen(prepped);
	if (n + 1 > outlen) {
		OPENSSL_cleanse(prepped, n);
		gsasl_free(prepped);
		snprintf(err, errlen, "the password is too long (at most %zu bytes)", outlen - 1);
		return false;
	}
	memcpy(out, prepped, n + 1);
	OPENSSL_cleanse(prepped, n);
	gsasl_free(prepped);
	return true;
}

/* saslname: ',' and '=' escaped as =2C and =3D. */
static bool escape_user(const char *user, char *out, size_t outlen)
{
	size_t o = 0;

	for (const char *p = user; *p; p++) {
		const char *rep = *p == ',' ? "=2C" : *p == '=' ? "=3D" : NULL;
		size_t n = rep ? 3 : 1;

		if (o + n + 1 > outlen)
			return false;
		memcpy(out + o, rep ? rep : p, n);
		o += n;
	}
	out[o] = '\0';
	return true;
}

static bool random_nonce(char *out, size_t outlen)
{
	uint8_t raw[24];

	if (outlen < 33 || RAND_bytes(raw, sizeof(raw)) != 1)
		return false;
	EVP_EncodeBlock((unsigned char *)out, raw, sizeof(raw));
	return true;
}

bool scram_start(struct scram *sc, enum scram_mech m, const char *user, const char *prepared,
		 const char *nonce, char *out, size_t outlen, char *err, size_t errlen)
{
	char escaped[512];

	memset(sc, 0, sizeof(*sc));
	sc->mech = m;
	if (snprintf(sc->user, sizeof(sc->user), "%s", user) >= (int)sizeof(sc->user) ||
	    snprintf(sc->prepared, sizeof(sc->prepared), "%s", prepared) >=
		(int)sizeof(sc->prepared) ||
	    !escape_user(user, escaped, sizeof(escaped))) {
		snprintf(err, errlen, "user name or password too long");
		return false;
	}
	if (nonce != NULL)
		snprintf(sc->client_nonce, sizeof(sc->client_nonce), "%s", nonce);
	else if (!random_nonce(sc->client_nonce, sizeof(sc->client_nonce))) {
		snprintf(err, errlen, "cannot draw a random nonce (RAND_bytes)");
		return false;
	}
	snprintf(sc->client_first_bare, sizeof(sc->client_first_bare), "n=%s,r=%s", escaped,
		 sc->client_nonce);
	if (snprintf(out, outlen, "n,,%s", sc->client_first_bare) >= (int)outlen) {
		snprintf(err, errlen, "client-first-message too long");
		return false;
	}
	sc->step = 1;
	return true;
}

/* The server-first-message's attributes. */
struct server_first {
	const char *nonce;
	size_t nonce_len;
	uint8_t salt[128];
	size_t salt_len;
	uint32_t iterations;
};

/* Decode base64 (len multiple of 4) into out; false if invalid or too big. */
static bool b64_decode(const char *in, size_t len, uint8_t *out, size_t outcap, size_t *outlen)
{
	uint8_t buf[3 * (SCRAM_MSG_MAX / 4) + 3];
	int n;
	size_t pad = 0;

	if (len == 0 || len % 4 != 0 || len > SCRAM_MSG_MAX)
		return false;
	/* Strict: the alphabet only, '=' only as the last one or two characters
	 * (EVP_DecodeBlock alone accepts "eA=5" and the salt would differ from
	 * the server's; found by tests/fuzz/fuzz_scram_client.c). */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];

		if (c == '=' ? i + 2 < len || (i + 1 < len && in[i + 1] != '=')
			     : !(isalnum(c) || c == '+' || c == '/'))
			return false;
	}
	n = EVP_DecodeBlock(buf, (const unsigned char *)in, (int)len);
	if (n < 0)
		return false;
	if (in[len - 1] == '=')
		pad++;
	if (in[len - 2] == '=')
		pad++;
	if ((size_t)n < pad || (size_t)n - pad > outcap)
		return false;
	*outlen = (size_t)n - pad;
	memcpy(out, buf, *outlen);
	return true;
}

static bool parse_iterations(const char *v, size_t len, uint32_t *out)
{
	uint64_t n = 0;

	if (len == 0 || len > 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return false;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	*out = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	return true;
}

static bool parse_server_first(const char *msg, size_t len, struct server_first *sf, char *err,
			       size_t errlen)
{
	const char *p = msg, *end = msg + len;
	bool have_s = false, have_i = false;

	memset(sf, 0, sizeof(*sf));
	for (int idx = 0; p < end; idx++) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *aend = comma ? comma : end;
		const char *v = p + 2;
		size_t vlen = aend - p >= 2 ? (size_t)(aend - v) : 0;

		if (aend - p < 2 || p[1] != '=') {
			snprintf(err, errlen, "malformed server-first-message");
			return false;
		}
		if (idx == 0 && p[0] != 'r') {
			snprintf(err, errlen, "server-first-message does not start with r= (%c=)",
				 p[0]);
			return false;
		}
		if (p[0] == 'r' && idx == 0) {
			sf->nonce = v;
			sf->nonce_len = vlen;
		} else if (p[0] == 's' && !have_s) {
			have_s = b64_decode(v, vlen, sf->salt, sizeof(sf->salt), &sf->salt_len);
			if (!have_s) {
				snprintf(err, errlen, "server-first-message: invalid salt");
				return false;
			}
		} else if (p[0] == 'i' && !have_i) {
			have_i = parse_iterations(v, vlen, &sf->iterations);
			if (!have_i) {
				snprintf(err, errlen,
					 "server-first-message: invalid iteration count");
				return false;
			}
		} else if (p[0] == 'm') {
			snprintf(err, errlen,
				 "server requires an unsupported SCRAM extension (m=)");
			return false;
		}
		p = comma ? comma + 1 : end;
	}
	if (!have_s || !have_i) {
		snprintf(err, errlen, "server-first-message lacks %s", have_s ? "i=" : "s=");
		return false;
	}
	return true;
}

static bool check_server_first(const struct scram *sc, const struct server_first *sf, char *err,
			       size_t errlen)
{
	size_t cn = strlen(sc->client_nonce);

	if (sf->nonce_len <= cn || memcmp(sf->nonce, sc->client_nonce, cn) != 0) {
		snprintf(err, errlen, "server nonce does not extend the client nonce");
		return false;
	}
	if (sf->iterations < SCRAM_MIN_ITERATIONS || sf->iterations > SCRAM_MAX_ITERATIONS) {
		snprintf(err, errlen, "server iteration count %u is outside [%d, %d]",
			 sf->iterations, SCRAM_MIN_ITERATIONS, SCRAM_MAX_ITERATIONS);
		return false;
	}
	return true;
}

static bool hmac(enum scram_mech m, const uint8_t *key, size_t keylen, const void *data, size_t len,
		 uint8_t *out)
{
	unsigned int n = 0;

	return HMAC(mech_md(m), key, (int)keylen, data, len, out, &n) != NULL && n == mech_len(m);
}

static struct scram_cache_entry *cache_find(const struct scram *sc, const struct server_first *sf)
{
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct scram_cache_entry *e = &cache[i];

		if (e->used && e->mech == sc->mech && e->iterations == sf->iterations &&
		    e->salt_len == sf->salt_len && memcmp(e->salt, sf->salt, sf->salt_len) == 0 &&
		    strcmp(e->user, sc->user) == 0 && strcmp(e->prepared, sc->prepared) == 0)
			return e;
	}
	return NULL;
}

/* ClientKey and ServerKey for this conversation, from the cache or PBKDF2. */
static struct scram_cache_entry *derive_keys(struct scram *sc, const struct server_first *sf)
{
	struct scram_cache_entry *e = cache_find(sc, sf);
	uint8_t salted[SCRAM_MAX_HASH];
	size_t hl = mech_len(sc->mech);
	bool ok;

	if (e != NULL)
		return e;
	e = &cache[cache_next];
	cache_next = (cache_next + 1) % CACHE_SLOTS;
	OPENSSL_cleanse(e, sizeof(*e));
	pbkdf2_runs++;
	sc->computed_pbkdf2 = true;
	ok = PKCS5_PBKDF2_HMAC(sc->prepared, (int)strlen(sc->prepared), sf->salt, (int)sf->salt_len,
			       (int)sf->iterations, mech_md(sc->mech), (int)hl, salted) == 1 &&
	     hmac(sc->mech, salted, hl, "Client Key", 10, e->client_key) &&
	     hmac(sc->mech, salted, hl, "Server Key", 10, e->server_key);
	OPENSSL_cleanse(salted, sizeof(salted));
	if (!ok) {
		OPENSSL_cleanse(e, sizeof(*e));
		return NULL;
	}
	e->used = true;
	e->mech = sc->mech;
	e->iterations = sf->iterations;
	e->salt_len = sf->salt_len;
	memcpy(e->salt, sf->salt, sf->salt_len);
	snprintf(e->user, sizeof(e->user), "%s", sc->user);
	snprintf(e->prepared, sizeof(e->prepared), "%s", sc->prepared);
	return e;
}

static bool proof_and_signature(struct scram *sc, const struct scram_cache_entry *e,
				const char *auth_msg, uint8_t *proof)
{
	size_t hl = mech_len(sc->mech);
	uint8_t stored[SCRAM_MAX_HASH], client_sig[SCRAM_MAX_HASH];
	unsigned int n = 0;
	bool ok =
	    EVP_Digest(e->client_key, hl, stored, &n, mech_md(sc->mech), NULL) == 1 &&
	    hmac(sc->mech, stored, hl, auth_msg, strlen(auth_msg), client_sig) &&
	    hmac(sc->mech, e->server_key, hl, auth_msg, strlen(auth_msg), sc->server_signature);

	for (size_t i = 0; ok && i < hl; i++)
		proof[i] = e->client_key[i] ^ client_sig[i];
	OPENSSL_cleanse(stored, sizeof(stored));
	OPENSSL_cleanse(client_sig, sizeof(client_sig));
	return ok;
}

bool scram_client_final(struct scram *sc, const char *server_first, size_t len, char *out,
			size_t outlen, char *err, size_t errlen)
{
	struct server_first sf;
	struct scram_cache_entry *e;
	char without_proof[SCRAM_MSG_MAX], auth_msg[3 * SCRAM_MSG_MAX];
	char proof_b64[2 * SCRAM_MAX_HASH];
	uint8_t proof[SCRAM_MAX_HASH];
	bool ok;

	if (sc->step != 1 || len == 0 || len >= SCRAM_MSG_MAX) {
		snprintf(err, errlen, "unexpected or oversized server-first-message");
		return false;
	}
	if (!parse_server_first(server_first, len, &sf, err, errlen) ||
	    !check_server_first(sc, &sf, err, errlen))
		return false;
	snprintf(without_proof, sizeof(without_proof), "c=biws,r=%.*s", (int)sf.nonce_len,
		 sf.nonce);
	snprintf(auth_msg, sizeof(auth_msg), "%s,%.*s,%s", sc->client_first_bare, (int)len,
		 server_first, without_proof);
	e = derive_keys(sc, &sf);
	ok = e != NULL && proof_and_signature(sc, e, auth_msg, proof);
	if (!ok) {
		snprintf(err, errlen, "SCRAM key derivation failed (OpenSSL)");
		return false;
	}
	EVP_EncodeBlock((unsigned char *)proof_b64, proof, (int)mech_len(sc->mech));
	OPENSSL_cleanse(proof, sizeof(proof));
	if (snprintf(out, outlen, "%s,p=%s", without_proof, proof_b64) >= (int)outlen) {
		snprintf(err, errlen, "client-final-message too long");
		return false;
	}
	sc->step = 2;
	return true;
}

bool scram_verify_final(struct scram *sc, const char *msg, size_t len, char *err, size_t errlen)
{
	uint8_t sig[SCRAM_MSG_MAX];
	size_t siglen = 0, hl = mech_len(sc->mech);
	const char *comma;

	if (sc->step != 2) {
		snprintf(err, errlen, "unexpected server-final-message");
		return false;
	}
	if (len >= 2 && msg[0] == 'e' && msg[1] == '=') {
		snprintf(err, errlen, "server reported: %.*s", (int)(len - 2), msg + 2);
		return false;
	}
	comma = memchr(msg, ',', len);
	if (comma != NULL)
		len = (size_t)(comma - msg); /* extensions after v= are ignored */
	if (len < 2 || msg[0] != 'v' || msg[1] != '=' ||
	    !b64_decode(msg + 2, len - 2, sig, sizeof(sig), &siglen) || siglen != hl ||
	    CRYPTO_memcmp(sig, sc->server_signature, hl) != 0) {
		snprintf(err, errlen,
			 "the server's SCRAM signature is wrong: the server did not prove it "
			 "knows the password");
		return false;
	}
	sc->step = 3;
	return true;
}

void scram_clear(struct scram *sc)
{
	OPENSSL_cleanse(sc, sizeof(*sc));
}
