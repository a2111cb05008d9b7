/*
 * scram_prim.c — SCRAM primitives (RFC 5802, RFC 7677, the MongoDB
 * authentication spec) on OpenSSL and libgsasl's SASLprep.
 *
 *   SaltedPassword = PBKDF2-HMAC-H(prepared password, salt, i)
 *   ClientKey      = HMAC(SaltedPassword, "Client Key")
 *   ServerKey      = HMAC(SaltedPassword, "Server Key")
 *   StoredKey      = H(ClientKey)
 */
#include "core/scram_prim.h"

#include <ctype.h>
#include <gsasl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

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

size_t scram_hash_len(enum scram_mech m)
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

bool scram_hmac(enum scram_mech m, const uint8_t *key, size_t keylen, const void *data, size_t len,
		uint8_t *out)
{
	unsigned int n = 0;

	return HMAC(mech_md(m), key, (int)keylen, data, len, out, &n) != NULL &&
	       n == scram_hash_len(m);
}

bool scram_hash(enum scram_mech m, const void *data, size_t len, uint8_t *out)
{
	unsigned int n = 0;

	return EVP_Digest(data, len, out, &n, mech_md(m), NULL) == 1 && n == scram_hash_len(m);
}

bool scram_derive_keys(enum scram_mech m, const char *prepared, const uint8_t *salt,
		       size_t salt_len, uint32_t iterations, uint8_t *client_key,
		       uint8_t *server_key)
{
	uint8_t salted[SCRAM_MAX_HASH];
	size_t hl = scram_hash_len(m);
	bool ok = PKCS5_PBKDF2_HMAC(prepared, (int)strlen(prepared), salt, (int)salt_len,
				    (int)iterations, mech_md(m), (int)hl, salted) == 1 &&
		  scram_hmac(m, salted, hl, "Client Key", 10, client_key) &&
		  scram_hmac(m, salted, hl, "Server Key", 10, server_key);

	OPENSSL_cleanse(salted, sizeof(salted));
	return ok;
}

bool scram_make_secret(enum scram_mech m, const char *user, const char *password,
		       uint32_t iterations, struct scram_secret *out, char *err, size_t errlen)
{
	char prepared[256];
	uint8_t client_key[SCRAM_MAX_HASH];
	bool ok;

	memset(out, 0, sizeof(*out));
	out->iterations = iterations;
	out->salt_len = m == SCRAM_SHA_1 ? 16 : 28; /* as mongod draws them */
	if (RAND_bytes(out->salt, (int)out->salt_len) != 1) {
		snprintf(err, errlen, "cannot draw a random salt (RAND_bytes)");
		return false;
	}
	if (!scram_prepare_password(m, user, password, prepared, sizeof(prepared), err, errlen))
		return false;
	ok = scram_derive_keys(m, prepared, out->salt, out->salt_len, iterations, client_key,
			       out->server_key) &&
	     scram_hash(m, client_key, scram_hash_len(m), out->stored_key);
	OPENSSL_cleanse(prepared, sizeof(prepared));
	OPENSSL_cleanse(client_key, sizeof(client_key));
	if (!ok)
		snprintf(err, errlen, "SCRAM key derivation failed (OpenSSL)");
	out->present = ok;
	return ok;
}

bool scram_b64_decode(const char *in, size_t len, uint8_t *out, size_t outcap, size_t *outlen)
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

void scram_b64_encode(const uint8_t *in, size_t len, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, in, (int)len);
}

bool scram_escape_user(const char *user, char *out, size_t outlen)
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

bool scram_unescape_user(const char *in, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char ch = in[i];

		if (ch == ',' || ch == '\0')
			return false;
		if (ch == '=') {
			if (i + 2 >= len)
				return false;
			if (in[i + 1] == '2' && in[i + 2] == 'C')
				ch = ',';
			else if (in[i + 1] == '3' && in[i + 2] == 'D')
				ch = '=';
			else
				return false;
			i += 2;
		}
		if (o + 2 > outlen)
			return false;
		out[o++] = ch;
	}
	out[o] = '\0';
	return o > 0;
}

bool scram_random_nonce(char *out, size_t outlen)
{
	uint8_t raw[24];

	if (outlen < 33 || RAND_bytes(raw, sizeof(raw)) != 1)
		return false;
	EVP_EncodeBlock((unsigned char *)out, raw, sizeof(raw));
	return true;
}
