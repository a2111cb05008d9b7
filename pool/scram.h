/*
 * scram.h — the client side of SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802,
 * RFC 7677) as MongoDB uses them: pure message building and checking, no
 * I/O, no event loop.
 *
 *   scram_prepare_password  SHA-1: hex MD5 of "user:mongo:password" (no
 *                           SASLprep); SHA-256: SASLprep (libgsasl)
 *   scram_start             client-first-message (random nonce unless given)
 *   scram_client_final      server-first-message in, client-final-message out
 *   scram_verify_final      server-final-message: the server's signature is
 *                           checked in constant time; a server that cannot
 *                           prove it knows the password is refused
 *
 * All primitives come from OpenSSL (PBKDF2, HMAC, SHA, RAND_bytes, base64).
 * The salted password and the Client/Server keys derived from it are cached
 * per (user, mechanism, password, salt, iterations), so N connections run
 * PBKDF2 once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/scram_prim.h"

/* One conversation. Rules: scram_start, then scram_client_final, then
 * scram_verify_final, each at most once, in that order; `step` says where
 * it is. The prepared password is wiped by scram_clear. */
struct scram {
	enum scram_mech mech;
	int step; /* 0 new, 1 client-first sent, 2 client-final sent, 3 verified */
	char prepared[256];
	char user[256]; /* as given (for the cache key) */
	char client_nonce[64];
	char client_first_bare[SCRAM_MSG_MAX];
	uint8_t server_signature[SCRAM_MAX_HASH];
	bool computed_pbkdf2; /* scram_client_final ran PBKDF2 (cache miss) */
	/* scram_start_keys: the keys are given (no password, no PBKDF2) and
	 * valid only for this salt and iteration count. */
	bool have_keys;
	struct scram_secret keys; /* stored_key unused; client_key in kc */
	uint8_t kc[SCRAM_MAX_HASH];
};

/* scram_mech_name, scram_mech_parse, scram_prepare_password: core/scram_prim.h. */

/* Begin: writes the client-first-message ("n,,n=user,r=nonce") to out.
 * `nonce` NULL: 24 random bytes, base64. `prepared` from scram_prepare_password. */
bool scram_start(struct scram *sc, enum scram_mech m, const char *user, const char *prepared,
		 const char *nonce, char *out, size_t outlen, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Begin with a ClientKey and ServerKey instead of a password, e.g. the
 * ClientKey recovered from a client's proof (core/scram_msg.h): a per-user
 * backend login that never knew the password. `salt`/`iterations` are the
 * ones the keys belong to; a server that sends others is refused with a
 * reason (the user's secret changed). */
bool scram_start_keys(struct scram *sc, enum scram_mech m, const char *user,
		      const uint8_t *client_key, const uint8_t *server_key, const uint8_t *salt,
		      size_t salt_len, uint32_t iterations, const char *nonce, char *out,
		      size_t outlen, char *err, size_t errlen) __attribute__((warn_unused_result));

/* server-first-message (len bytes, not NUL-terminated) -> client-final-message. */
bool scram_client_final(struct scram *sc, const char *server_first, size_t len, char *out,
			size_t outlen, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* server-final-message: true only if it carries the expected signature. */
bool scram_verify_final(struct scram *sc, const char *server_final, size_t len, char *err,
			size_t errlen) __attribute__((warn_unused_result));

/* Wipe the secrets of a conversation. */
void scram_clear(struct scram *sc);

/* PBKDF2 runs since start (cache misses), and emptying the cache. */
uint64_t scram_pbkdf2_runs(void);
void scram_cache_flush(void);
