/*
 * scram_prim.h — the SCRAM primitives both sides share (the backend-side
 * client in pool/scram.c, the client-side server in proxy/cauth.c, the
 * secret helper in config/users.c): mechanisms, password preparation,
 * H/HMAC/PBKDF2 and base64 on OpenSSL, SASLprep on libgsasl, saslname
 * escaping, nonces, and the stored secret (StoredKey/ServerKey) of a
 * password. Pure functions, no I/O.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum scram_mech {
	SCRAM_SHA_1,
	SCRAM_SHA_256,
};

#define SCRAM_MAX_HASH	     32	      /* SHA-256 output */
#define SCRAM_MIN_ITERATIONS 4096     /* MongoDB auth spec minimum */
#define SCRAM_MAX_ITERATIONS 10000000 /* refuse absurd counts (PBKDF2 blocks the loop) */
#define SCRAM_MSG_MAX	     1024
#define SCRAM_MAX_SALT	     128

/* A user's verifier for one mechanism, as mongod keeps it (usersInfo
 * showCredentials). Rules: salt_len in 1..SCRAM_MAX_SALT, keys hold
 * scram_hash_len(mech) bytes; never holds a password. */
struct scram_secret {
	bool present;
	uint32_t iterations;
	uint8_t salt[SCRAM_MAX_SALT];
	size_t salt_len;
	uint8_t stored_key[SCRAM_MAX_HASH];
	uint8_t server_key[SCRAM_MAX_HASH];
};

const char *scram_mech_name(enum scram_mech m);
/* "SCRAM-SHA-1" / "SCRAM-SHA-256" -> mech; false for anything else. */
bool scram_mech_parse(const char *name, enum scram_mech *out) __attribute__((warn_unused_result));
size_t scram_hash_len(enum scram_mech m);

/* The password the SCRAM exchange uses for this mechanism: SHA-1: hex MD5
 * of "user:mongo:password" (no SASLprep); SHA-256: SASLprep (libgsasl). */
bool scram_prepare_password(enum scram_mech m, const char *user, const char *password, char *out,
			    size_t outlen, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* HMAC-H(key, data) and H(data); out holds scram_hash_len(m) bytes. */
bool scram_hmac(enum scram_mech m, const uint8_t *key, size_t keylen, const void *data, size_t len,
		uint8_t *out) __attribute__((warn_unused_result));
bool scram_hash(enum scram_mech m, const void *data, size_t len, uint8_t *out)
    __attribute__((warn_unused_result));

/* ClientKey and ServerKey of a prepared password (PBKDF2 then two HMACs). */
bool scram_derive_keys(enum scram_mech m, const char *prepared, const uint8_t *salt,
		       size_t salt_len, uint32_t iterations, uint8_t *client_key,
		       uint8_t *server_key) __attribute__((warn_unused_result));

/* The verifier of a password, with a fresh random salt. */
bool scram_make_secret(enum scram_mech m, const char *user, const char *password,
		       uint32_t iterations, struct scram_secret *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Base64: decode (len a multiple of 4) into out; false if invalid or too
 * big. Encode: out needs 4*ceil(len/3)+1 bytes; NUL-terminated. */
bool scram_b64_decode(const char *in, size_t len, uint8_t *out, size_t outcap, size_t *outlen)
    __attribute__((warn_unused_result));
void scram_b64_encode(const uint8_t *in, size_t len, char *out);

/* saslname: ',' and '=' escaped as =2C and =3D (and back). */
bool scram_escape_user(const char *user, char *out, size_t outlen)
    __attribute__((warn_unused_result));
bool scram_unescape_user(const char *in, size_t len, char *out, size_t outlen)
    __attribute__((warn_unused_result));

/* 24 random bytes, base64 (32 characters); outlen >= 33. */
bool scram_random_nonce(char *out, size_t outlen) __attribute__((warn_unused_result));
