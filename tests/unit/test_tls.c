/*
 * test_tls.c — core/tls.c without sockets: a client and a server tls_conn
 * wired back to back through evbuffers, with throwaway certificates from
 * tests/tls/mkcerts.sh. Asserts: handshake and data both ways (a message
 * larger than one record); chain, hostname and expiry verification failures
 * with OpenSSL's reason; the first-bytes sniffing (plain falls through with
 * its bytes, requireTLS refuses it); tls_sniff on edge inputs; the minimum
 * version; and that auth_load refuses each unsupported mechanism by name.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tls.h"
#include "pool/auth.h"

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

static char certs[256];

static void make_certs(void)
{
	char cmd[600];

	snprintf(certs, sizeof(certs), "/tmp/mongoplex-unit-tls-XXXXXX");
	cr_assert(mkdtemp(certs) != NULL);
	snprintf(cmd, sizeof(cmd), "%s/tests/tls/mkcerts.sh %s >/dev/null 2>&1", MP_SOURCE_DIR,
		 certs);
	cr_assert(system(cmd) == 0, "mkcerts.sh failed: %s", cmd);
}

static void drop_certs(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", certs);
	(void)system(cmd);
}

static const char *f(const char *name)
{
	static char path[8][300];
	static int slot;

	slot = (slot + 1) % 8;
	snprintf(path[slot], sizeof(path[slot]), "%s/%s", certs, name);
	return path[slot];
}

static SSL_CTX *server_ctx(const char *cert, const char *key, bool verify, int min)
{
	struct tls_ctx_opts o = {.cert_file = f(cert),
				 .key_file = f(key),
				 .ca_file = verify ? f("ca.pem") : NULL,
				 .verify_peer = verify,
				 .min_version = min};
	char err[300];
	SSL_CTX *x = tls_ctx_new(true, &o, err, sizeof(err));

	cr_assert(x != NULL, "%s", err);
	return x;
}

static SSL_CTX *client_ctx(const char *ca, const char *cert, int min)
{
	struct tls_ctx_opts o = {.ca_file = f(ca),
				 .cert_file = cert ? f(cert) : NULL,
				 .verify_peer = true,
				 .min_version = min};
	char err[300];
	SSL_CTX *x = tls_ctx_new(false, &o, err, sizeof(err));

	cr_assert(x != NULL, "%s", err);
	return x;
}

/* Two ends joined by buffers; pump moves bytes until nothing moves. */
struct pair {
	struct tls_conn *c, *s;
	struct evbuffer *c_in, *s_in;	  /* plaintext received */
	struct evbuffer *c_wire, *s_wire; /* ciphertext to the other side */
	enum tls_io c_st, s_st;
};

static enum tls_io feed(struct tls_conn *t, struct evbuffer *from, struct evbuffer *plain,
			struct evbuffer *wire)
{
	size_t n = evbuffer_get_length(from);
	enum tls_io st = TLS_IO_OK;

	if (n > 0) {
		uint8_t *p = evbuffer_pullup(from, (ssize_t)n);

		st = tls_conn_input(t, p, n, plain, wire);
		evbuffer_drain(from, n);
	}
	return st;
}

static void pump(struct pair *p)
{
	for (int i = 0; i < 50; i++) {
		enum tls_io a, b;

		if (evbuffer_get_length(p->c_wire) == 0 && evbuffer_get_length(p->s_wire) == 0)
			return;
		b = feed(p->s, p->c_wire, p->s_in, p->s_wire);
		a = feed(p->c, p->s_wire, p->c_in, p->c_wire);
		if (b != TLS_IO_OK)
			p->s_st = b;
		if (a != TLS_IO_OK)
			p->c_st = a;
		if (a == TLS_IO_ERROR || b == TLS_IO_ERROR)
			return;
	}
}

static void pair_open(struct pair *p, SSL_CTX *cctx, SSL_CTX *sctx, const char *host,
		      enum tls_accept_mode mode)
{
	memset(p, 0, sizeof(*p));
	p->c = tls_conn_client(cctx, host, true);
	p->s = tls_conn_server(sctx, mode);
	p->c_in = evbuffer_new();
	p->s_in = evbuffer_new();
	p->c_wire = evbuffer_new();
	p->s_wire = evbuffer_new();
	cr_assert(p->c && p->s);
	cr_assert(tls_conn_start(p->c, p->c_wire), "%s", tls_conn_error(p->c));
	pump(p);
}

static void pair_close(struct pair *p)
{
	tls_conn_free(p->c);
	tls_conn_free(p->s);
	evbuffer_free(p->c_in);
	evbuffer_free(p->s_in);
	evbuffer_free(p->c_wire);
	evbuffer_free(p->s_wire);
}

TestSuite(tls, .init = make_certs, .fini = drop_certs);

Test(tls, handshake_and_data_both_ways)
{
	SSL_CTX *sctx = server_ctx("server.pem", "server.key", false, 0);
	SSL_CTX *cctx = client_ctx("ca.pem", NULL, 0);
	struct evbuffer *out = evbuffer_new();
	struct pair p;
	size_t big = 200000;
	char *data = malloc(big);

	pair_open(&p, cctx, sctx, "localhost", TLS_ACCEPT_TLS);
	cr_assert(!tls_conn_handshaking(p.c) && !tls_conn_handshaking(p.s), "c=%s s=%s",
		  tls_conn_error(p.c), tls_conn_error(p.s));
	cr_assert_eq(p.c_st, TLS_IO_HANDSHAKE_DONE);
	cr_assert_str_eq(tls_conn_version(p.c), "TLSv1.3");
	for (size_t i = 0; i < big; i++)
		data[i] = (char)(i * 7);
	evbuffer_add(out, data, big);
	while (evbuffer_get_length(out) > 0) { /* wire_high bounds each step */
		cr_assert(tls_conn_output(p.c, out, p.c_wire, 32768));
		cr_assert_leq(evbuffer_get_length(p.c_wire), 32768 + 17000);
		pump(&p);
	}
	cr_assert_eq(evbuffer_get_length(p.s_in), big);
	cr_assert(memcmp(evbuffer_pullup(p.s_in, -1), data, big) == 0);
	evbuffer_add(out, "pong", 4);
	cr_assert(tls_conn_output(p.s, out, p.s_wire, 1 << 20));
	pump(&p);
	cr_assert_eq(evbuffer_get_length(p.c_in), 4);
	free(data);
	evbuffer_free(out);
	pair_close(&p);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
}

static void expect_verify_failure(const char *ca, const char *cert, const char *key,
				  const char *host, const char *reason)
{
	SSL_CTX *sctx = server_ctx(cert, key, false, 0);
	SSL_CTX *cctx = client_ctx(ca, NULL, 0);
	struct pair p;

	pair_open(&p, cctx, sctx, host, TLS_ACCEPT_TLS);
	cr_assert_eq(p.c_st, TLS_IO_ERROR, "client state %d", p.c_st);
	cr_assert(strstr(tls_conn_error(p.c), "certificate verify failed") != NULL, "%s",
		  tls_conn_error(p.c));
	cr_assert(strstr(tls_conn_error(p.c), reason) != NULL, "%s", tls_conn_error(p.c));
	pair_close(&p);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
}

Test(tls, wrong_ca_refused)
{
	expect_verify_failure("otherca.pem", "server.pem", "server.key", "localhost",
			      "unable to get local issuer certificate");
}

Test(tls, wrong_hostname_refused)
{
	expect_verify_failure("ca.pem", "wronghost.pem", "wronghost.key", "localhost",
			      "hostname mismatch");
}

Test(tls, wrong_ip_refused)
{
	expect_verify_failure("ca.pem", "server.pem", "server.key", "127.0.0.2",
			      "IP address mismatch");
}

Test(tls, expired_refused)
{
	expect_verify_failure("ca.pem", "expired.pem", "expired.key", "localhost",
			      "certificate has expired");
}

Test(tls, client_certificate_required)
{
	SSL_CTX *sctx = server_ctx("server.pem", "server.key", true, 0);
	SSL_CTX *with = client_ctx("ca.pem", "client-combined.pem", 0);
	SSL_CTX *without = client_ctx("ca.pem", NULL, 0);
	struct pair p;

	pair_open(&p, with, sctx, "127.0.0.1", TLS_ACCEPT_TLS);
	cr_assert(!tls_conn_handshaking(p.s), "%s", tls_conn_error(p.s));
	pair_close(&p);
	pair_open(&p, without, sctx, "127.0.0.1", TLS_ACCEPT_TLS);
	cr_assert_eq(p.s_st, TLS_IO_ERROR);
	cr_assert(strstr(tls_conn_error(p.s), "certificate") != NULL, "%s", tls_conn_error(p.s));
	pair_close(&p);
	SSL_CTX_free(sctx);
	SSL_CTX_free(with);
	SSL_CTX_free(without);
}

Test(tls, min_version_enforced)
{
	SSL_CTX *sctx = server_ctx("server.pem", "server.key", false, TLS1_3_VERSION);
	SSL_CTX *cctx = client_ctx("ca.pem", NULL, 0);
	struct pair p;

	SSL_CTX_set_max_proto_version(cctx, TLS1_2_VERSION);
	pair_open(&p, cctx, sctx, "localhost", TLS_ACCEPT_TLS);
	cr_assert_eq(p.s_st, TLS_IO_ERROR);
	cr_assert(strstr(tls_conn_error(p.s), "unsupported protocol") != NULL, "%s",
		  tls_conn_error(p.s));
	pair_close(&p);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
}

Test(tls, sniff_plain_and_require)
{
	SSL_CTX *sctx = server_ctx("server.pem", "server.key", false, 0);
	struct tls_conn *t = tls_conn_server(sctx, TLS_ACCEPT_SNIFF);
	struct evbuffer *in = evbuffer_new(), *wire = evbuffer_new();
	/* A 0x116-byte message starts with 0x16: the second byte tells it apart. */
	const uint8_t msg[] = {0x16, 0x01, 0x00, 0x00, 0x05};

	cr_assert_eq(tls_conn_input(t, msg, 1, in, wire), TLS_IO_OK); /* undecided */
	cr_assert_eq(evbuffer_get_length(in), 0);
	cr_assert_eq(tls_conn_input(t, msg + 1, 4, in, wire), TLS_IO_PLAIN);
	cr_assert_eq(evbuffer_get_length(in), 5);
	cr_assert(memcmp(evbuffer_pullup(in, -1), msg, 5) == 0);
	tls_conn_free(t);
	t = tls_conn_server(sctx, TLS_ACCEPT_TLS);
	cr_assert_eq(tls_conn_input(t, msg, 5, in, wire), TLS_IO_ERROR);
	cr_assert(strstr(tls_conn_error(t), "not a TLS handshake") != NULL);
	tls_conn_free(t);
	evbuffer_free(in);
	evbuffer_free(wire);
	SSL_CTX_free(sctx);
}

Test(tls, sniff_classifier)
{
	const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00};
	const uint8_t v30[] = {0x16, 0x03, 0x00};
	const uint8_t bad_minor[] = {0x16, 0x03, 0x05};
	const uint8_t plain[] = {0x2a, 0x01, 0x00, 0x00};

	cr_assert_eq(tls_sniff(hello, 0), TLS_SNIFF_NEED_MORE);
	cr_assert_eq(tls_sniff(hello, 1), TLS_SNIFF_NEED_MORE);
	cr_assert_eq(tls_sniff(hello, 2), TLS_SNIFF_NEED_MORE);
	cr_assert_eq(tls_sniff(hello, 5), TLS_SNIFF_TLS);
	cr_assert_eq(tls_sniff(v30, 3), TLS_SNIFF_TLS);
	cr_assert_eq(tls_sniff(bad_minor, 3), TLS_SNIFF_PLAIN);
	cr_assert_eq(tls_sniff(plain, 1), TLS_SNIFF_PLAIN);
}

Test(tls, bad_files_refused_with_reason)
{
	struct tls_ctx_opts o = {.cert_file = f("nonexistent.pem")};
	char err[300];

	cr_assert_null(tls_ctx_new(true, &o, err, sizeof(err)));
	cr_assert(strstr(err, "nonexistent.pem") != NULL, "%s", err);
	o.cert_file = f("server.pem");
	o.key_file = f("client.key");
	cr_assert_null(tls_ctx_new(true, &o, err, sizeof(err)));
	cr_assert(strstr(err, "client.key") != NULL && strstr(err, "mismatch") != NULL, "%s", err);
}

Test(tls, parse_version)
{
	int v;

	cr_assert(tls_parse_version("TLS1.2", &v) && v == TLS1_2_VERSION);
	cr_assert(tls_parse_version("TLS1.3", &v) && v == TLS1_3_VERSION);
	cr_assert(!tls_parse_version("SSL3", &v));
	cr_assert(!tls_parse_version("", &v));
}

Test(tls, unsupported_auth_mechanisms_named)
{
	static const char *const mechs[][2] = {
	    {"MONGODB-X509", "X.509"}, {"PLAIN", "LDAP"},	 {"GSSAPI", "Kerberos"},
	    {"MONGODB-AWS", "AWS"},    {"MONGODB-OIDC", "OIDC"},
	};

	for (size_t i = 0; i < sizeof(mechs) / sizeof(mechs[0]); i++) {
		char uri[200], warn[256], err[512];
		struct auth_cred c;

		snprintf(uri, sizeof(uri), "mongodb://u@localhost/?authMechanism=%s", mechs[i][0]);
		cr_assert(!auth_load(uri, NULL, &c, warn, sizeof(warn), err, sizeof(err)), "%s",
			  mechs[i][0]);
		cr_assert(strstr(err, mechs[i][0]) != NULL && strstr(err, mechs[i][1]) != NULL &&
			      strstr(err, "not supported") != NULL,
			  "%s: %s", mechs[i][0], err);
	}
}
