/*
 * backend_tls.c — backend_uri's TLS options and the backend client context
 * (see backend_tls.h).
 */
#include "pool/backend_tls.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/sbuf.h"
#include "core/tls.h"

/* The context in force. Rules: NULL iff the URI has no tls; verify_host is
 * false only with tlsAllowInvalidHostnames or tlsInsecure. */
static struct {
	SSL_CTX *ctx;
	bool verify_host;
} bt;

static const char *opt_str(const mongoc_uri_t *uri, const char *name)
{
	const char *v = mongoc_uri_get_option_as_utf8(uri, name, NULL);

	return v && v[0] ? v : NULL;
}

bool backend_tls_load(const mongoc_uri_t *uri, char *err, size_t errlen)
{
	struct tls_ctx_opts o = {0};
	bool insecure = mongoc_uri_get_option_as_bool(uri, MONGOC_URI_TLSINSECURE, false);
	bool bad_certs =
	    mongoc_uri_get_option_as_bool(uri, MONGOC_URI_TLSALLOWINVALIDCERTIFICATES, false);
	bool bad_hosts =
	    mongoc_uri_get_option_as_bool(uri, MONGOC_URI_TLSALLOWINVALIDHOSTNAMES, false);
	char why[TLS_ERR_LEN + 64];

	if (!mongoc_uri_get_tls(uri))
		return true;
	o.ca_file = opt_str(uri, MONGOC_URI_TLSCAFILE);
	o.cert_file = opt_str(uri, MONGOC_URI_TLSCERTIFICATEKEYFILE);
	o.key_password = opt_str(uri, MONGOC_URI_TLSCERTIFICATEKEYFILEPASSWORD);
	o.verify_peer = !(insecure || bad_certs);
	bt.verify_host = !(insecure || bad_hosts || bad_certs);
	bt.ctx = tls_ctx_new(false, &o, why, sizeof(why));
	if (bt.ctx == NULL) {
		snprintf(err, errlen, "backend_uri TLS: %s", why);
		return false;
	}
	log_info("backend TLS: CA %s, client certificate %s, %s", o.ca_file ? o.ca_file : "system",
		 o.cert_file ? o.cert_file : "none",
		 !o.verify_peer ? "certificate NOT verified (tlsInsecure / "
				  "tlsAllowInvalidCertificates)"
		 : bt.verify_host
		     ? "chain and hostname verified"
		     : "chain verified, hostname NOT verified (tlsAllowInvalidHostnames)");
	return true;
}

bool backend_tls_enabled(void)
{
	return bt.ctx != NULL;
}

bool backend_tls_attach(struct sbuf *sb, const char *host)
{
	struct tls_conn *t;

	if (bt.ctx == NULL)
		return true;
	t = tls_conn_client(bt.ctx, host, bt.verify_host);
	return t != NULL && sbuf_use_tls(sb, t);
}

void backend_tls_free(void)
{
	SSL_CTX_free(bt.ctx);
	bt.ctx = NULL;
}
