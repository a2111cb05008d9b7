/*
 * tls.c — OpenSSL contexts and per-connection TLS over memory BIOs (see
 * tls.h). The stream buffer owns the socket; this file only moves bytes
 * between evbuffers and OpenSSL.
 */
#include "core/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/xalloc.h"

#define PLAIN_CHUNK (16 * 1024)

/* One connection. Rules: rbio/wbio belong to ssl (freed with it); sniffing
 * is server side until the first bytes are classified; they wait in peek
 * until tls_sniff can decide. */
struct tls_conn {
	SSL *ssl;
	BIO *rbio, *wbio; /* network -> ssl, ssl -> network */
	bool client;
	bool handshaking;
	bool sniffing; /* server: the first bytes are not classified yet */
	bool require;  /* server: a plain peer is an error (TLS_ACCEPT_TLS) */
	bool reneg;    /* the peer sent a handshake record after the handshake */
	uint8_t peek[3];
	size_t peek_len;
	char err[TLS_ERR_LEN];
};

/* ----------------------------------------------------------- contexts */

bool tls_parse_version(const char *s, int *out)
{
	static const struct {
		const char *name;
		int v;
	} names[] = {{"TLS1.0", TLS1_VERSION},
		     {"TLS1.1", TLS1_1_VERSION},
		     {"TLS1.2", TLS1_2_VERSION},
		     {"TLS1.3", TLS1_3_VERSION}};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].v;
			return true;
		}
	return false;
}

/* The reason of the newest OpenSSL error, for messages. */
static void ossl_reason(char *buf, size_t len, const char *fallback)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(buf, len, "%s", r ? r : fallback);
	ERR_clear_error();
}

static int password_cb(char *buf, int size, int rwflag, void *u)
{
	const char *pw = u;
	size_t n = pw ? strlen(pw) : 0;

	(void)rwflag;
	if (n >= (size_t)size)
		return 0;
	memcpy(buf, pw ? pw : "", n);
	return (int)n;
}

static bool load_identity(SSL_CTX *ctx, const struct tls_ctx_opts *o, char *err, size_t errlen)
{
	char why[200];
	const char *key = o->key_file && o->key_file[0] ? o->key_file : o->cert_file;

	if (o->key_password) {
		SSL_CTX_set_default_passwd_cb(ctx, password_cb);
		SSL_CTX_set_default_passwd_cb_userdata(ctx, (void *)o->key_password);
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
		ossl_reason(why, sizeof(why), "unreadable");
		snprintf(err, errlen, "certificate %s: %s", o->cert_file, why);
		return false;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		ossl_reason(why, sizeof(why), "unreadable");
		snprintf(err, errlen, "private key %s: %s", key, why);
		return false;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ossl_reason(why, sizeof(why), "mismatch");
		snprintf(err, errlen, "private key %s does not match certificate %s (%s)", key,
			 o->cert_file, why);
		return false;
	}
	/* The password is needed only while loading. */
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	return true;
}

static bool load_trust(SSL_CTX *ctx, const struct tls_ctx_opts *o, char *err, size_t errlen)
{
	char why[200];

	if (o->ca_file == NULL || o->ca_file[0] == '\0')
		return SSL_CTX_set_default_verify_paths(ctx) == 1 || (ERR_clear_error(), true);
	if (SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) != 1) {
		ossl_reason(why, sizeof(why), "unreadable");
		snprintf(err, errlen, "CA file %s: %s", o->ca_file, why);
		return false;
	}
	return true;
}

SSL_CTX *tls_ctx_new(bool server, const struct tls_ctx_opts *o, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	int mode = o->verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE;

	if (ctx == NULL) {
		snprintf(err, errlen, "cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (!SSL_CTX_set_min_proto_version(ctx, o->min_version ? o->min_version : TLS1_2_VERSION))
		goto fail_msg;
	if (o->cert_file && o->cert_file[0] && !load_identity(ctx, o, err, errlen))
		goto fail;
	if ((o->verify_peer || (o->ca_file && o->ca_file[0])) && !load_trust(ctx, o, err, errlen))
		goto fail;
	if (server && o->verify_peer)
		mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	SSL_CTX_set_verify(ctx, mode, NULL);
	if (server)
		SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"mongoplex", 9);
	return ctx;
fail_msg:
	snprintf(err, errlen, "cannot set the TLS minimum version");
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}

/* -------------------------------------------------------- connections */

enum tls_sniff_result tls_sniff(const uint8_t *p, size_t n)
{
	/* A record header: type 22 (handshake), version major 3, minor 0..4.
	 * A MongoDB message starts with its little-endian length: 0x16 0x03
	 * 0x0N would be a message of 0x0N0316 bytes, never a first message in
	 * practice (a hello is far smaller). */
	if (n == 0)
		return TLS_SNIFF_NEED_MORE;
	if (p[0] != 0x16)
		return TLS_SNIFF_PLAIN;
	if (n >= 2 && p[1] != 0x03)
		return TLS_SNIFF_PLAIN;
	if (n < 3)
		return TLS_SNIFF_NEED_MORE;
	return p[2] <= 0x04 ? TLS_SNIFF_TLS : TLS_SNIFF_PLAIN;
}

/* OpenSSL's message callback: a handshake record from the peer once the
 * handshake is done is a renegotiation (TLS 1.2: a ClientHello to a server,
 * a HelloRequest to a client; TLS 1.3 hides record types, its post-handshake
 * messages arrive as application data records). OpenSSL already refuses it
 * (SSL_OP_NO_RENEGOTIATION: a no_renegotiation alert); feed() then closes
 * the connection with a reason instead of carrying on. */
static void on_msg(int write_p, int version, int content_type, const void *buf, size_t len,
		   SSL *ssl, void *arg)
{
	struct tls_conn *t = arg;
	const uint8_t *rec = buf;

	(void)version;
	(void)ssl;
	if (!write_p && !t->handshaking && content_type == SSL3_RT_HEADER && len >= 1 &&
	    rec[0] == SSL3_RT_HANDSHAKE)
		t->reneg = true;
}

static struct tls_conn *conn_new(SSL_CTX *ctx, bool client)
{
	struct tls_conn *t = xcalloc(1, sizeof(*t));

	t->ssl = SSL_new(ctx);
	t->rbio = BIO_new(BIO_s_mem());
	t->wbio = BIO_new(BIO_s_mem());
	if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
		BIO_free(t->rbio);
		BIO_free(t->wbio);
		SSL_free(t->ssl);
		free(t);
		ERR_clear_error();
		return NULL;
	}
	BIO_set_mem_eof_return(t->rbio, -1); /* empty = retry, not EOF */
	SSL_set_bio(t->ssl, t->rbio, t->wbio);
	SSL_set_msg_callback(t->ssl, on_msg);
	SSL_set_msg_callback_arg(t->ssl, t);
	t->client = client;
	t->handshaking = true;
	return t;
}

static bool is_ip_literal(const char *host)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

struct tls_conn *tls_conn_client(SSL_CTX *ctx, const char *host, bool verify_host)
{
	struct tls_conn *t = conn_new(ctx, true);
	bool ip = is_ip_literal(host);
	X509_VERIFY_PARAM *vp;

	if (t == NULL)
		return NULL;
	SSL_set_connect_state(t->ssl);
	if (!ip)
		SSL_set_tlsext_host_name(t->ssl, host);
	if (verify_host) {
		vp = SSL_get0_param(t->ssl);
		X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		if (ip)
			X509_VERIFY_PARAM_set1_ip_asc(vp, host);
		else
			X509_VERIFY_PARAM_set1_host(vp, host, 0);
	}
	return t;
}

struct tls_conn *tls_conn_server(SSL_CTX *ctx, enum tls_accept_mode mode)
{
	struct tls_conn *t = conn_new(ctx, false);

	if (t == NULL)
		return NULL;
	SSL_set_accept_state(t->ssl);
	t->sniffing = true;
	t->require = mode == TLS_ACCEPT_TLS;
	return t;
}

void tls_conn_free(struct tls_conn *t)
{
	if (t == NULL)
		return;
	SSL_free(t->ssl);
	free(t);
}

bool tls_conn_handshaking(const struct tls_conn *t)
{
	return t->handshaking;
}

const char *tls_conn_error(const struct tls_conn *t)
{
	return t->err[0] ? t->err : "TLS error";
}

const char *tls_conn_version(const struct tls_conn *t)
{
	return t->handshaking ? "" : SSL_get_version(t->ssl);
}

/* Move what OpenSSL wrote into the wire buffer. */
static void drain_wbio(struct tls_conn *t, struct evbuffer *wire)
{
	char *data;
	long n = BIO_get_mem_data(t->wbio, &data);

	if (n <= 0)
		return;
	evbuffer_add(wire, data, (size_t)n);
	(void)BIO_reset(t->wbio);
}

/* Why an SSL call failed, into t->err. */
static void set_error(struct tls_conn *t, int rc)
{
	int e = SSL_get_error(t->ssl, rc);
	long vr = SSL_get_verify_result(t->ssl);
	char why[200];

	if (t->handshaking && vr != X509_V_OK) {
		snprintf(t->err, sizeof(t->err), "certificate verify failed (%s)",
			 X509_verify_cert_error_string(vr));
		ERR_clear_error();
		return;
	}
	if (e == SSL_ERROR_SSL)
		ossl_reason(why, sizeof(why), "protocol error");
	else
		snprintf(why, sizeof(why), "SSL error %d", e);
	snprintf(t->err, sizeof(t->err), "%s", why);
	ERR_clear_error();
}

bool tls_conn_start(struct tls_conn *t, struct evbuffer *wire)
{
	int rc;

	ERR_clear_error();
	rc = SSL_do_handshake(t->ssl);
	if (rc <= 0 && SSL_get_error(t->ssl, rc) != SSL_ERROR_WANT_READ) {
		set_error(t, rc);
		return false;
	}
	drain_wbio(t, wire);
	return true;
}

static enum tls_io handshake(struct tls_conn *t, struct evbuffer *wire)
{
	int rc;

	ERR_clear_error();
	rc = SSL_do_handshake(t->ssl);
	drain_wbio(t, wire); /* also an alert on failure */
	if (rc == 1) {
		t->handshaking = false;
		return TLS_IO_HANDSHAKE_DONE;
	}
	if (SSL_get_error(t->ssl, rc) == SSL_ERROR_WANT_READ)
		return TLS_IO_OK;
	set_error(t, rc);
	return TLS_IO_ERROR;
}

/* Decrypt everything OpenSSL can into plain_in. */
static enum tls_io decrypt(struct tls_conn *t, struct evbuffer *plain_in)
{
	for (;;) {
		struct evbuffer_iovec v;
		int rc, e;

		if (evbuffer_reserve_space(plain_in, PLAIN_CHUNK, &v, 1) != 1)
			return TLS_IO_ERROR;
		ERR_clear_error();
		rc = SSL_read(t->ssl, v.iov_base,
			      (int)(v.iov_len > INT32_MAX ? INT32_MAX : v.iov_len));
		if (rc > 0) {
			v.iov_len = (size_t)rc;
			evbuffer_commit_space(plain_in, &v, 1);
			continue;
		}
		evbuffer_commit_space(plain_in, &v, 0);
		e = SSL_get_error(t->ssl, rc);
		if (e == SSL_ERROR_WANT_READ)
			return TLS_IO_OK;
		if (e == SSL_ERROR_ZERO_RETURN)
			return TLS_IO_EOF;
		set_error(t, rc);
		return TLS_IO_ERROR;
	}
}

/* Ciphertext in: handshake first, then application data. */
static enum tls_io feed(struct tls_conn *t, const uint8_t *raw, size_t n, struct evbuffer *plain_in,
			struct evbuffer *wire)
{
	enum tls_io hs = TLS_IO_OK, rd;

	if (n > 0 && BIO_write(t->rbio, raw, (int)n) != (int)n) {
		snprintf(t->err, sizeof(t->err), "out of memory");
		return TLS_IO_ERROR;
	}
	if (t->handshaking) {
		hs = handshake(t, wire);
		if (hs != TLS_IO_HANDSHAKE_DONE)
			return hs;
	}
	rd = decrypt(t, plain_in);
	drain_wbio(t, wire); /* session tickets, key updates, alerts */
	if (t->reneg) {
		snprintf(t->err, sizeof(t->err), "TLS renegotiation refused (the %s sent a %s)",
			 t->client ? "server" : "client",
			 t->client ? "HelloRequest" : "new ClientHello");
		return TLS_IO_ERROR;
	}
	return rd == TLS_IO_OK ? hs : rd;
}

/* Server sniffing: the first bytes decide TLS or plain. */
static enum tls_io sniff(struct tls_conn *t, const uint8_t *raw, size_t n,
			 struct evbuffer *plain_in, struct evbuffer *wire)
{
	uint8_t head[sizeof(t->peek)];
	size_t take = n < sizeof(head) - t->peek_len ? n : sizeof(head) - t->peek_len;
	enum tls_sniff_result r;

	memcpy(head, t->peek, t->peek_len);
	memcpy(head + t->peek_len, raw, take);
	r = tls_sniff(head, t->peek_len + take);
	if (r == TLS_SNIFF_NEED_MORE) {
		memcpy(t->peek + t->peek_len, raw, take);
		t->peek_len += take;
		return TLS_IO_OK;
	}
	t->sniffing = false;
	if (r == TLS_SNIFF_PLAIN && t->require) {
		snprintf(t->err, sizeof(t->err),
			 "not a TLS handshake (plain TCP to a requireTLS port?)");
		return TLS_IO_ERROR;
	}
	if (r == TLS_SNIFF_PLAIN) {
		evbuffer_add(plain_in, t->peek, t->peek_len);
		evbuffer_add(plain_in, raw, n);
		return TLS_IO_PLAIN;
	}
	if (t->peek_len > 0 && BIO_write(t->rbio, t->peek, (int)t->peek_len) != (int)t->peek_len) {
		snprintf(t->err, sizeof(t->err), "out of memory");
		return TLS_IO_ERROR;
	}
	return feed(t, raw, n, plain_in, wire);
}

enum tls_io tls_conn_input(struct tls_conn *t, const uint8_t *raw, size_t n,
			   struct evbuffer *plain_in, struct evbuffer *wire)
{
	if (t->sniffing)
		return sniff(t, raw, n, plain_in, wire);
	return feed(t, raw, n, plain_in, wire);
}

bool tls_conn_output(struct tls_conn *t, struct evbuffer *plain_out, struct evbuffer *wire,
		     size_t wire_high)
{
	if (t->handshaking)
		return true;
	while (evbuffer_get_length(plain_out) > 0 && evbuffer_get_length(wire) < wire_high) {
		struct evbuffer_iovec v;
		int rc;

		if (evbuffer_peek(plain_out, PLAIN_CHUNK, NULL, &v, 1) < 1)
			break;
		if (v.iov_len > PLAIN_CHUNK)
			v.iov_len = PLAIN_CHUNK;
		ERR_clear_error();
		rc = SSL_write(t->ssl, v.iov_base, (int)v.iov_len);
		if (rc <= 0) {
			set_error(t, rc);
			return false;
		}
		evbuffer_drain(plain_out, (size_t)rc);
		drain_wbio(t, wire);
	}
	return true;
}
