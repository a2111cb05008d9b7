/*
 * scram_msg.c — SCRAM server messages (see scram_msg.h). Every length is
 * checked before a byte is read; attributes are "k=value" split on ','.
 *
 *   AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
 *   ClientSignature = HMAC(StoredKey, AuthMessage)
 *   ClientKey       = ClientProof XOR ClientSignature;  H(ClientKey) == StoredKey ?
 *   ServerSignature = HMAC(ServerKey, AuthMessage)
 */
#include "core/scram_msg.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

static bool fail(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return false;
}

/* The attribute at p (up to the next ',' or end): key and value. */
struct attr {
	char key;
	const char *v;
	size_t vlen;
	const char *next; /* after the ',' (or end) */
};

static bool next_attr(const char *p, const char *end, struct attr *a)
{
	const char *comma = memchr(p, ',', (size_t)(end - p));
	const char *aend = comma ? comma : end;

	if (aend - p < 2 || p[1] != '=' || p[0] < 'a' || p[0] > 'z')
		return false;
	a->key = p[0];
	a->v = p + 2;
	a->vlen = (size_t)(aend - a->v);
	a->next = comma ? comma + 1 : end;
	return true;
}

static bool printable_nonce(const char *v, size_t len)
{
	if (len == 0 || len >= SCRAM_MSG_MAX / 2)
		return false;
	for (size_t i = 0; i < len; i++)
		if (v[i] < 0x21 || v[i] > 0x7e || v[i] == ',')
			return false;
	return true;
}

/* gs2-header: "n,," or "y,," (no channel binding, no authzid). */
static bool parse_gs2(const char *msg, size_t len, struct scram_client_first *out, char *err,
		      size_t errlen)
{
	if (len >= 1 && msg[0] == 'p')
		return fail(err, errlen, "channel binding is not supported");
	if (len < 3 || (msg[0] != 'n' && msg[0] != 'y') || msg[1] != ',')
		return fail(err, errlen, "client-first-message: bad gs2 header");
	if (msg[2] != ',')
		return fail(err, errlen,
			    "client-first-message: authorization identity (a=) "
			    "is not supported");
	out->gs2 = msg;
	out->gs2_len = 3;
	return true;
}

bool scram_msg_parse_first(const char *msg, size_t len, struct scram_client_first *out, char *err,
			   size_t errlen)
{
	const char *end = msg + len;
	struct attr a;

	memset(out, 0, sizeof(*out));
	if (len == 0 || len >= SCRAM_MSG_MAX)
		return fail(err, errlen, "client-first-message empty or too long");
	if (!parse_gs2(msg, len, out, err, errlen))
		return false;
	out->bare = msg + 3;
	out->bare_len = len - 3;
	if (!next_attr(out->bare, end, &a) || a.key != 'n' ||
	    !scram_unescape_user(a.v, a.vlen, out->user, sizeof(out->user)))
		return fail(err, errlen, "client-first-message: bad or missing user name (n=)");
	if (a.next >= end || !next_attr(a.next, end, &a) || a.key != 'r' ||
	    !printable_nonce(a.v, a.vlen))
		return fail(err, errlen, "client-first-message: bad or missing nonce (r=)");
	out->nonce = a.v;
	out->nonce_len = a.vlen;
	while (a.next < end) {
		if (!next_attr(a.next, end, &a))
			return fail(err, errlen, "client-first-message: malformed extension");
		if (a.key == 'm')
			return fail(err, errlen, "unsupported SCRAM extension (m=)");
	}
	return true;
}

bool scram_msg_parse_final(const char *msg, size_t len, struct scram_client_final *out, char *err,
			   size_t errlen)
{
	const char *end = msg + len, *p;
	struct attr a;

	memset(out, 0, sizeof(*out));
	if (len == 0 || len >= SCRAM_MSG_MAX)
		return fail(err, errlen, "client-final-message empty or too long");
	if (!next_attr(msg, end, &a) || a.key != 'c')
		return fail(err, errlen, "client-final-message: missing channel binding (c=)");
	out->channel = a.v;
	out->channel_len = a.vlen;
	if (a.next >= end || !next_attr(a.next, end, &a) || a.key != 'r')
		return fail(err, errlen, "client-final-message: missing nonce (r=)");
	out->nonce = a.v;
	out->nonce_len = a.vlen;
	for (p = a.next; p < end; p = a.next) {
		if (!next_attr(p, end, &a))
			return fail(err, errlen, "client-final-message: malformed attribute");
		if (a.key != 'p')
			continue;
		if (a.next != end)
			return fail(err, errlen, "client-final-message: proof (p=) is not last");
		if (!scram_b64_decode(a.v, a.vlen, out->proof, sizeof(out->proof), &out->proof_len))
			return fail(err, errlen, "client-final-message: invalid proof");
		out->without_proof_len = (size_t)(p - 1 - msg);
		return true;
	}
	return fail(err, errlen, "client-final-message: missing proof (p=)");
}

static bool copy_span(char *dst, size_t cap, const char *src, size_t len)
{
	if (len + 1 > cap)
		return false;
	memcpy(dst, src, len);
	dst[len] = '\0';
	return true;
}

bool scram_server_start(struct scram_server *ss, enum scram_mech m,
			const struct scram_client_first *cf, const struct scram_secret *secret,
			const char *server_nonce, char *out, size_t outlen, char *err,
			size_t errlen)
{
	char snonce[64], salt[4 * (SCRAM_MAX_SALT / 3) + 8];
	int n;

	memset(ss, 0, sizeof(*ss));
	ss->mech = m;
	ss->secret = *secret;
	if (server_nonce != NULL)
		snprintf(snonce, sizeof(snonce), "%s", server_nonce);
	else if (!scram_random_nonce(snonce, sizeof(snonce)))
		return fail(err, errlen, "cannot draw a random nonce (RAND_bytes)");
	if (!copy_span(ss->gs2, sizeof(ss->gs2), cf->gs2, cf->gs2_len) ||
	    !copy_span(ss->client_first_bare, sizeof(ss->client_first_bare), cf->bare,
		       cf->bare_len) ||
	    snprintf(ss->nonce, sizeof(ss->nonce), "%.*s%s", (int)cf->nonce_len, cf->nonce,
		     snonce) >= (int)sizeof(ss->nonce))
		return fail(err, errlen, "client-first-message too long");
	scram_b64_encode(secret->salt, secret->salt_len, salt);
	n = snprintf(ss->server_first, sizeof(ss->server_first), "r=%s,s=%s,i=%u", ss->nonce, salt,
		     secret->iterations);
	if (n >= (int)sizeof(ss->server_first) || n >= (int)outlen)
		return fail(err, errlen, "server-first-message too long");
	memcpy(out, ss->server_first, (size_t)n + 1);
	ss->step = 1;
	return true;
}

/* The channel binding must be base64 of the gs2 header, the nonce ours. */
static bool check_final(const struct scram_server *ss, const struct scram_client_final *cf,
			char *err, size_t errlen)
{
	char gs2_b64[32];

	scram_b64_encode((const uint8_t *)ss->gs2, strlen(ss->gs2), gs2_b64);
	if (cf->channel_len != strlen(gs2_b64) ||
	    memcmp(cf->channel, gs2_b64, cf->channel_len) != 0)
		return fail(err, errlen, "client-final-message: channel binding does not match");
	if (cf->nonce_len != strlen(ss->nonce) || memcmp(cf->nonce, ss->nonce, cf->nonce_len) != 0)
		return fail(err, errlen, "client-final-message: nonce does not match");
	if (cf->proof_len != scram_hash_len(ss->mech))
		return fail(err, errlen, "client-final-message: proof has the wrong length");
	return true;
}

/* ClientKey = proof XOR HMAC(StoredKey, AuthMessage); H(ClientKey) == StoredKey. */
static bool verify_proof(struct scram_server *ss, const struct scram_client_final *cf,
			 const char *auth_msg, size_t auth_len)
{
	size_t hl = scram_hash_len(ss->mech);
	uint8_t sig[SCRAM_MAX_HASH], stored[SCRAM_MAX_HASH];
	bool ok = scram_hmac(ss->mech, ss->secret.stored_key, hl, auth_msg, auth_len, sig);

	for (size_t i = 0; ok && i < hl; i++)
		ss->client_key[i] = cf->proof[i] ^ sig[i];
	ok = ok && scram_hash(ss->mech, ss->client_key, hl, stored) &&
	     CRYPTO_memcmp(stored, ss->secret.stored_key, hl) == 0;
	OPENSSL_cleanse(sig, sizeof(sig));
	OPENSSL_cleanse(stored, sizeof(stored));
	if (!ok)
		OPENSSL_cleanse(ss->client_key, sizeof(ss->client_key));
	return ok;
}

bool scram_server_finish(struct scram_server *ss, const char *msg, size_t len, char *out,
			 size_t outlen, char *err, size_t errlen)
{
	struct scram_client_final cf;
	char auth_msg[3 * SCRAM_MSG_MAX + 4];
	uint8_t sig[SCRAM_MAX_HASH];
	char sig_b64[2 * SCRAM_MAX_HASH + 4];
	size_t hl = scram_hash_len(ss->mech);
	int n;

	if (ss->step != 1)
		return fail(err, errlen, "unexpected client-final-message");
	if (!scram_msg_parse_final(msg, len, &cf, err, errlen) ||
	    !check_final(ss, &cf, err, errlen))
		return false;
	n = snprintf(auth_msg, sizeof(auth_msg), "%s,%s,%.*s", ss->client_first_bare,
		     ss->server_first, (int)cf.without_proof_len, msg);
	if (n >= (int)sizeof(auth_msg))
		return fail(err, errlen, "AuthMessage too long");
	if (!verify_proof(ss, &cf, auth_msg, (size_t)n))
		return fail(err, errlen, "wrong proof (password)");
	if (!scram_hmac(ss->mech, ss->secret.server_key, hl, auth_msg, (size_t)n, sig))
		return fail(err, errlen, "SCRAM signature failed (OpenSSL)");
	scram_b64_encode(sig, hl, sig_b64);
	if (snprintf(out, outlen, "v=%s", sig_b64) >= (int)outlen)
		return fail(err, errlen, "server-final-message too long");
	ss->step = 2;
	return true;
}

void scram_server_clear(struct scram_server *ss)
{
	OPENSSL_cleanse(ss, sizeof(*ss));
}
