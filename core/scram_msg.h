/*
 * scram_msg.h — the server side of SCRAM-SHA-1/SHA-256 (RFC 5802) as the
 * proxy plays it for its clients: parsing the client's messages (untrusted
 * bytes; fuzzed by tests/fuzz/fuzz_scram_msg.c) and the two server steps.
 * Pure: no I/O, no lookups; the caller finds the user's secret between
 * scram_msg_parse_first and scram_server_start.
 *
 *   client-first  "n,,n=user,r=cnonce"       ─ parse ─▶ user, nonce
 *   server-first  "r=cnonce+snonce,s=salt,i=N"  ◀─ scram_server_start
 *   client-final  "c=biws,r=nonce,p=proof"   ─ scram_server_finish ─▶ proof
 *                 checked in constant time (CRYPTO_memcmp); ClientKey recovered
 *   server-final  "v=signature"
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/scram_prim.h"

#define SCRAM_USER_MAX 256

/* A parsed client-first-message. Rules: pointers point into the parsed
 * message and live as long as it; user is unescaped (=2C, =3D). */
struct scram_client_first {
	char user[SCRAM_USER_MAX];
	const char *gs2; /* "n,," or "y,," */
	size_t gs2_len;
	const char *bare; /* "n=...,r=..." */
	size_t bare_len;
	const char *nonce;
	size_t nonce_len;
};

/* A parsed client-final-message. Rules: pointers into the message. */
struct scram_client_final {
	const char *channel; /* base64 of the gs2 header */
	size_t channel_len;
	const char *nonce;
	size_t nonce_len;
	size_t without_proof_len; /* prefix up to ",p=" */
	uint8_t proof[SCRAM_MAX_HASH];
	size_t proof_len;
};

bool scram_msg_parse_first(const char *msg, size_t len, struct scram_client_first *out, char *err,
			   size_t errlen) __attribute__((warn_unused_result));
bool scram_msg_parse_final(const char *msg, size_t len, struct scram_client_final *out, char *err,
			   size_t errlen) __attribute__((warn_unused_result));

/* One server conversation. Rules: scram_server_start then
 * scram_server_finish, once each; `step` says where it is (0 new, 1
 * server-first sent, 2 proof verified). Holds the user's verifier (no
 * password); wiped by scram_server_clear. */
struct scram_server {
	enum scram_mech mech;
	int step;
	struct scram_secret secret;
	char gs2[16];
	char nonce[SCRAM_MSG_MAX]; /* client nonce + server nonce */
	char client_first_bare[SCRAM_MSG_MAX];
	char server_first[SCRAM_MSG_MAX];
	uint8_t client_key[SCRAM_MAX_HASH]; /* recovered from the proof (step 2) */
};

/* Build the server-first-message for `cf` with the user's secret.
 * `server_nonce` NULL: random. */
bool scram_server_start(struct scram_server *ss, enum scram_mech m,
			const struct scram_client_first *cf, const struct scram_secret *secret,
			const char *server_nonce, char *out, size_t outlen, char *err,
			size_t errlen) __attribute__((warn_unused_result));

/* Check the client-final-message; on success writes the server-final-
 * message ("v=...") and keeps the ClientKey. False + err for a malformed
 * message, a wrong nonce or channel binding, or a wrong proof. */
bool scram_server_finish(struct scram_server *ss, const char *msg, size_t len, char *out,
			 size_t outlen, char *err, size_t errlen)
    __attribute__((warn_unused_result));

void scram_server_clear(struct scram_server *ss);
