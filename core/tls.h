/*
 * tls.h — TLS (OpenSSL) for the stream buffers, both directions.
 *
 * A tls_conn is one connection's OpenSSL state over two memory BIOs: the
 * stream buffer (core/sbuf.c) reads ciphertext from the socket and feeds it
 * in (tls_conn_input, which decrypts into the plain input buffer), and moves
 * plaintext out through tls_conn_output into a ciphertext "wire" buffer that
 * it writes to the socket. No socket is touched here, so the nonblocking
 * rules of sbuf stay in one place and a plain connection pays nothing.
 *
 * Contexts (tls_ctx_*) are SSL_CTXs: a connection holds a reference to the
 * one it was made with, so replacing a context (certificate reload) leaves
 * existing connections on theirs. Renegotiation is refused in both
 * directions (SSL_OP_NO_RENEGOTIATION; TLS 1.3 has none): OpenSSL answers
 * the peer's HelloRequest / new ClientHello with a no_renegotiation alert,
 * and tls_conn_input then fails with "TLS renegotiation refused (...)", so
 * the connection is closed with that reason.
 *
 * Server side may sniff (allowTLS/preferTLS): the first bytes decide
 * whether the peer starts a TLS handshake (tls_sniff) or speaks plain.
 */
#pragma once

#include <event2/buffer.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TLS_ERR_LEN 256

/* Settings for a context. Rules: files may be NULL or "" (not used);
 * min_version is an OpenSSL version constant (TLS1_2_VERSION...), 0: default. */
struct tls_ctx_opts {
	const char *ca_file;	  /* trust anchors; NULL: the system's default paths */
	const char *cert_file;	  /* own certificate chain (PEM) */
	const char *key_file;	  /* own key (PEM); NULL: in cert_file */
	const char *key_password; /* for an encrypted key */
	bool verify_peer;	  /* client: verify the server; server: require a client cert */
	int min_version;
};

/* A client context (backend connections) or a server context (clients). */
SSL_CTX *tls_ctx_new(bool server, const struct tls_ctx_opts *o, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Parse "TLS1.0".."TLS1.3" to an OpenSSL constant; false if unknown. */
bool tls_parse_version(const char *s, int *out) __attribute__((warn_unused_result));

/* How a server connection treats its first bytes. */
enum tls_accept_mode {
	TLS_ACCEPT_TLS,	  /* TLS only: anything else is an error */
	TLS_ACCEPT_SNIFF, /* TLS if the first bytes are a handshake, else plain */
};

/* What the first bytes of a connection are. */
enum tls_sniff_result {
	TLS_SNIFF_NEED_MORE,
	TLS_SNIFF_TLS,	 /* a TLS handshake record: 0x16 0x03 0x00..0x04 */
	TLS_SNIFF_PLAIN, /* anything else */
};

/* Classify the first `n` bytes of a connection (untrusted input). */
enum tls_sniff_result tls_sniff(const uint8_t *p, size_t n);

struct tls_conn;

/* A connection on `ctx` (its reference is taken). Client side: `host` is the
 * server name for SNI and, with verify_host, for hostname verification
 * (an IP literal is checked as an IP address, without SNI). */
struct tls_conn *tls_conn_client(SSL_CTX *ctx, const char *host, bool verify_host);
struct tls_conn *tls_conn_server(SSL_CTX *ctx, enum tls_accept_mode mode);
void tls_conn_free(struct tls_conn *t);

enum tls_io {
	TLS_IO_OK,
	TLS_IO_HANDSHAKE_DONE, /* the handshake completed during this call */
	TLS_IO_PLAIN,	       /* sniffing found a plain peer: the bytes are in plain_in */
	TLS_IO_EOF,	       /* the peer sent close_notify */
	TLS_IO_ERROR,	       /* tls_conn_error says why */
};

/* Client side: produce the ClientHello into `wire`. */
bool tls_conn_start(struct tls_conn *t, struct evbuffer *wire) __attribute__((warn_unused_result));

/* `n` ciphertext bytes arrived: advance the handshake, decrypt what can be
 * into plain_in, queue what OpenSSL has to send into wire. */
enum tls_io tls_conn_input(struct tls_conn *t, const uint8_t *raw, size_t n,
			   struct evbuffer *plain_in, struct evbuffer *wire);

/* Encrypt plaintext from plain_out into wire while wire holds less than
 * `wire_high` bytes (nothing before the handshake is done). False on error. */
bool tls_conn_output(struct tls_conn *t, struct evbuffer *plain_out, struct evbuffer *wire,
		     size_t wire_high) __attribute__((warn_unused_result));

bool tls_conn_handshaking(const struct tls_conn *t);
const char *tls_conn_error(const struct tls_conn *t);
/* The negotiated version ("TLSv1.3"), or "" before the handshake. */
const char *tls_conn_version(const struct tls_conn *t);
