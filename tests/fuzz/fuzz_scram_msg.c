// FUZZ_SOURCES: core/scram_msg.c core/scram_prim.c pool/scram.c
// FUZZ_PKGS: libgsasl libcrypto
// FUZZ_ARGS: -max_len=2048
/*
 * fuzz_scram_msg.c — libFuzzer target for the proxy's SCRAM server
 * (core/scram_msg.c), which reads untrusted client bytes before any login.
 *
 * Mode (first byte, even): the rest is split at the first NUL into a
 * client-first and a client-final message, each parsed from a heap copy of
 * exactly its length; a parsed client-first starts a conversation with a
 * fixed verifier and the client-final is checked against it. Checks: the
 * parsed spans lie inside the message, the user is not empty, and a
 * conversation never succeeds (nobody can forge the proof).
 *
 * Mode (odd): a genuine conversation of the proxy's SCRAM client
 * (pool/scram.c) with the right password; the client-final is then XORed
 * with the input bytes. Check: the server accepts it only if its proof
 * decodes to the genuine proof, and then the client accepts the signature.
 * Any failed check aborts. Build and run: tests/fuzz/README.md.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/scram_msg.h"
#include "pool/scram.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "check failed: %s\n", #x);                                 \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static struct scram_secret secret;

static void init_secret(void)
{
	char err[128];

	if (!secret.present)
		CHECK(scram_make_secret(SCRAM_SHA_256, "user", "pencil", 4096, &secret, err,
					sizeof(err)));
}

static char *copy(const uint8_t *p, size_t n)
{
	char *c = malloc(n ? n : 1);

	CHECK(c != NULL);
	memcpy(c, p, n);
	return c;
}

static bool within(const char *base, size_t len, const char *p, size_t n)
{
	return p >= base && p + n <= base + len;
}

static void parse_mode(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t n1 = nul ? (size_t)(nul - data) : size, n2 = nul ? size - n1 - 1 : 0;
	char *first = copy(data, n1), *final = copy(nul ? nul + 1 : data, n2);
	char out[SCRAM_MSG_MAX], err[256];
	struct scram_client_first cf;
	struct scram_client_final ff;
	struct scram_server ss;

	if (scram_msg_parse_final(final, n2, &ff, err, sizeof(err))) {
		CHECK(within(final, n2, ff.channel, ff.channel_len));
		CHECK(within(final, n2, ff.nonce, ff.nonce_len));
		CHECK(ff.without_proof_len < n2 && ff.proof_len <= SCRAM_MAX_HASH);
	}
	if (scram_msg_parse_first(first, n1, &cf, err, sizeof(err))) {
		CHECK(cf.user[0] != '\0');
		CHECK(within(first, n1, cf.bare, cf.bare_len));
		CHECK(within(first, n1, cf.nonce, cf.nonce_len) && cf.nonce_len > 0);
		if (scram_server_start(&ss, SCRAM_SHA_256, &cf, &secret, NULL, out, sizeof(out),
				       err, sizeof(err)))
			CHECK(!scram_server_finish(&ss, final, n2, out, sizeof(out), err,
						   sizeof(err)));
		scram_server_clear(&ss);
	}
	free(first);
	free(final);
}

static void mutate_mode(const uint8_t *data, size_t size)
{
	struct scram sc;
	struct scram_server ss;
	struct scram_client_first cf;
	struct scram_client_final good, bad;
	char prepared[256], a[SCRAM_MSG_MAX], b[SCRAM_MSG_MAX], genuine[SCRAM_MSG_MAX], err[256];
	size_t len;
	char *msg;

	CHECK(scram_prepare_password(SCRAM_SHA_256, "user", "pencil", prepared, sizeof(prepared),
				     err, sizeof(err)));
	CHECK(scram_start(&sc, SCRAM_SHA_256, "user", prepared, "fuzznonce", a, sizeof(a), err,
			  sizeof(err)));
	CHECK(scram_msg_parse_first(a, strlen(a), &cf, err, sizeof(err)));
	CHECK(scram_server_start(&ss, SCRAM_SHA_256, &cf, &secret, "srv", b, sizeof(b), err,
				 sizeof(err)));
	CHECK(scram_client_final(&sc, b, strlen(b), genuine, sizeof(genuine), err, sizeof(err)));
	len = strlen(genuine);
	msg = copy((const uint8_t *)genuine, len);
	for (size_t i = 0; i < size && i < len; i++)
		msg[i] ^= (char)data[i];
	CHECK(scram_msg_parse_final(genuine, len, &good, err, sizeof(err)));
	if (scram_server_finish(&ss, msg, len, b, sizeof(b), err, sizeof(err))) {
		CHECK(scram_msg_parse_final(msg, len, &bad, err, sizeof(err)));
		CHECK(bad.proof_len == good.proof_len &&
		      memcmp(bad.proof, good.proof, good.proof_len) == 0);
		CHECK(scram_verify_final(&sc, b, strlen(b), err, sizeof(err)));
	}
	free(msg);
	scram_clear(&sc);
	scram_server_clear(&ss);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	init_secret();
	if (size == 0)
		return 0;
	if (data[0] & 1)
		mutate_mode(data + 1, size - 1);
	else
		parse_mode(data + 1, size - 1);
	return 0;
}
