/*
 * scram.c — SCRAM-SHA-1/SHA-256 client messages (RFC 5802, RFC 7677, the
 * MongoDB authentication spec) on the primitives of core/scram_prim.c.
 *
 *   SaltedPassword  = PBKDF2-HMAC-H(prepared password, salt, i)   (cached)
 *   ClientKey       = HMAC(SaltedPassword, "Client Key")          (cached)
 *   ServerKey       = HMAC(SaltedPassword, "Server Key")          (cached)
 *   AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
 *   ClientProof     = ClientKey XOR HMAC(H(ClientKey), AuthMessage)
 *   ServerSignature = HMAC(ServerKey, AuthMessage)  -> compared with CRYPTO_memcmp
 */
#include "pool/scram.h"

#include <openssl/crypto.h>
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

bool scram_start(struct scram *sc, enum scram_mech m, const char *user, const char *prepared,
		 const char *nonce, char *out, size_t outlen, char *err, size_t errlen)
{
	char escaped[512];

	memset(sc, 0, sizeof(*sc));
	sc->mech = m;
	if (snprintf(sc->user, sizeof(sc->user), "%s", user) >= (int)sizeof(sc->user) ||
	    snprintf(sc->prepared, sizeof(sc->prepared), "%s", prepared) >=
		(int)sizeof(sc->prepared) ||
	    !scram_escape_user(user, escaped, sizeof(escaped))) {
		snprintf(err, errlen, "user name or password too long");
		return false;
	}
	if (nonce != NULL)
		snprintf(sc->client_nonce, sizeof(sc->client_nonce), "%s", nonce);
	else if (!scram_random_nonce(sc->client_nonce, sizeof(sc->client_nonce))) {
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

bool scram_start_keys(struct scram *sc, enum scram_mech m, const char *user,
		      const uint8_t *client_key, const uint8_t *server_key, const uint8_t *salt,
		      size_t salt_len, uint32_t iterations, const char *nonce, char *out,
		      size_t outlen, char *err, size_t errlen)
{
	size_t hl = scram_hash_len(m);

	if (salt_len == 0 || salt_len > SCRAM_MAX_SALT) {
		snprintf(err, errlen, "bad salt length %zu", salt_len);
		return false;
	}
	if (!scram_start(sc, m, user, "", nonce, out, outlen, err, errlen))
		return false;
	sc->have_keys = true;
	memcpy(sc->kc, client_key, hl);
	memcpy(sc->keys.server_key, server_key, hl);
	memcpy(sc->keys.salt, salt, salt_len);
	sc->keys.salt_len = salt_len;
	sc->keys.iterations = iterations;
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
			have_s =
			    scram_b64_decode(v, vlen, sf->salt, sizeof(sf->salt), &sf->salt_len);
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
	bool ok;

	if (e != NULL)
		return e;
	e = &cache[cache_next];
	cache_next = (cache_next + 1) % CACHE_SLOTS;
	OPENSSL_cleanse(e, sizeof(*e));
	pbkdf2_runs++;
	sc->computed_pbkdf2 = true;
	ok = scram_derive_keys(sc->mech, sc->prepared, sf->salt, sf->salt_len, sf->iterations,
			       e->client_key, e->server_key);
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

/* scram_start_keys: the given keys, if the server's salt and count are theirs. */
static struct scram_cache_entry *given_keys(const struct scram *sc, const struct server_first *sf,
					    struct scram_cache_entry *e, char *err, size_t errlen)
{
	size_t hl = scram_hash_len(sc->mech);

	if (sf->iterations != sc->keys.iterations || sf->salt_len != sc->keys.salt_len ||
	    memcmp(sf->salt, sc->keys.salt, sf->salt_len) != 0) {
		snprintf(err, errlen,
			 "the server's salt or iteration count (%u) differ from the user's "
			 "verifier (%u): the user's secret changed",
			 sf->iterations, sc->keys.iterations);
		return NULL;
	}
	memset(e, 0, sizeof(*e));
	memcpy(e->client_key, sc->kc, hl);
	memcpy(e->server_key, sc->keys.server_key, hl);
	return e;
}

static bool proof_and_signature(struct scram *sc, const struct scram_cache_entry *e,
				const char *auth_msg, uint8_t *proof)
{
	size_t hl = scram_hash_len(sc->mech);
	uint8_t stored[SCRAM_MAX_HASH], client_sig[SCRAM_MAX_HASH];
	bool ok = scram_hash(sc->mech, e->client_key, hl, stored) &&
		  scram_hmac(sc->mech, stored, hl, auth_msg, strlen(auth_msg), client_sig) &&
		  scram_hmac(sc->mech, e->server_key, hl, auth_msg, strlen(auth_msg),
			     sc->server_signature);

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
	struct scram_cache_entry given;
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
	e = sc->have_keys ? given_keys(sc, &sf, &given, err, errlen) : derive_keys(sc, &sf);
	if (e == NULL && sc->have_keys)
		return false;
	ok = e != NULL && proof_and_signature(sc, e, auth_msg, proof);
	OPENSSL_cleanse(&given, sizeof(given));
	if (!ok) {
		snprintf(err, errlen, "SCRAM key derivation failed (OpenSSL)");
		return false;
	}
	scram_b64_encode(proof, scram_hash_len(sc->mech), proof_b64);
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
	size_t siglen = 0, hl = scram_hash_len(sc->mech);
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
	    !scram_b64_decode(msg + 2, len - 2, sig, sizeof(sig), &siglen) || siglen != hl ||
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
