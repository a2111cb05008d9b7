/*
 * client_tls.c — the client-side TLS context and its reload (see
 * client_tls.h).
 */
#include "proxy/client_tls.h"

#include <stdio.h>
#include <string.h>

#include "config/cfg.h"
#include "core/globals.h"
#include "core/log.h"
#include "core/sbuf.h"
#include "core/tls.h"

/* The context new handshakes use. Rules: NULL iff client_tls_mode is
 * disabled; replaced whole (SSL_new holds a reference, so connections
 * made on the old one keep it until they close). */
static SSL_CTX *ctx;
static enum tls_accept_mode accept_mode;

static SSL_CTX *build(const struct cfg *c, char *err, size_t errlen)
{
	struct tls_ctx_opts o = {
	    .cert_file = c->client_tls_cert_file,
	    .key_file = c->client_tls_key_file,
	    .ca_file = c->client_tls_ca_file,
	    .verify_peer = c->client_tls_verify_peer,
	};

	if (!tls_parse_version(c->client_tls_min_version, &o.min_version)) {
		snprintf(err, errlen, "client_tls_min_version: unknown \"%s\"",
			 c->client_tls_min_version);
		return NULL;
	}
	return tls_ctx_new(true, &o, err, errlen);
}

/* The serial of the context's certificate, for the log. */
static void serial_of(SSL_CTX *x, char *buf, size_t len)
{
	X509 *cert = SSL_CTX_get0_certificate(x);
	BIGNUM *bn = cert ? ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL) : NULL;
	char *hex = bn ? BN_bn2hex(bn) : NULL;

	snprintf(buf, len, "%s", hex ? hex : "?");
	OPENSSL_free(hex);
	BN_free(bn);
}

bool client_tls_start(char *err, size_t errlen)
{
	char why[TLS_ERR_LEN + 64], serial[80];

	if (strcmp(g.cfg.client_tls_mode, "disabled") == 0)
		return true;
	accept_mode =
	    strcmp(g.cfg.client_tls_mode, "requireTLS") == 0 ? TLS_ACCEPT_TLS : TLS_ACCEPT_SNIFF;
	ctx = build(&g.cfg, why, sizeof(why));
	if (ctx == NULL) {
		snprintf(err, errlen, "client TLS: %s", why);
		return false;
	}
	serial_of(ctx, serial, sizeof(serial));
	log_info("client TLS: %s, certificate %s (serial %s)%s, minimum %s", g.cfg.client_tls_mode,
		 g.cfg.client_tls_cert_file, serial,
		 g.cfg.client_tls_verify_peer ? ", client certificates required" : "",
		 g.cfg.client_tls_min_version);
	return true;
}

bool client_tls_prepare(const struct cfg *next, SSL_CTX **out, char *err, size_t errlen)
{
	char why[TLS_ERR_LEN + 64];

	*out = NULL;
	if (ctx == NULL)
		return true;
	*out = build(next, why, sizeof(why));
	if (*out == NULL) {
		snprintf(err, errlen, "client TLS context not replaced: %s", why);
		return false;
	}
	return true;
}

void client_tls_commit(SSL_CTX *fresh, const struct cfg *next)
{
	char serial[80];

	if (fresh == NULL)
		return;
	SSL_CTX_free(ctx); /* open connections hold their own reference */
	ctx = fresh;
	serial_of(ctx, serial, sizeof(serial));
	log_notice("reload: client TLS certificate %s (serial %s) for new connections",
		   next->client_tls_cert_file, serial);
}

bool client_tls_attach(struct sbuf *sb)
{
	struct tls_conn *t;

	if (ctx == NULL)
		return true;
	t = tls_conn_server(ctx, accept_mode);
	return t != NULL && sbuf_use_tls(sb, t);
}

void client_tls_stop(void)
{
	SSL_CTX_free(ctx);
	ctx = NULL;
}
