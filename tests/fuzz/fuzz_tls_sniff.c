// FUZZ_SOURCES: core/tls.c core/xalloc.c core/log.c
// FUZZ_PKGS: libevent openssl
// FUZZ_ARGS: -max_len=4096
/*
 * fuzz_tls_sniff.c — libFuzzer target for what the proxy parses itself on a
 * client TLS port: the first-bytes classifier (tls_sniff) and the sniffing
 * server connection (tls_conn_input in TLS_ACCEPT_SNIFF / TLS_ACCEPT_TLS
 * mode) fed in arbitrary chunks, then whatever OpenSSL makes of the rest.
 *
 * Input: byte 0 picks the mode (bit 0) and a chunking seed; the rest is what
 * a client sends. Checks (abort on failure):
 *  - tls_sniff is monotone: once a prefix is classified, every longer
 *    prefix gets the same answer; NEED_MORE only for the 0x16 0x03 prefixes;
 *  - sniffing a plain peer returns TLS_IO_PLAIN once, at the chunk that
 *    decides, and hands over exactly the bytes received so far, in order;
 *    later bytes are not the TLS layer's any more;
 *  - in TLS_ACCEPT_TLS mode a plain peer is TLS_IO_ERROR with a reason;
 *  - a TLS peer never yields plaintext before a handshake completes.
 */
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/tls.h"

static SSL_CTX *ctx;

static void check_sniff(const uint8_t *p, size_t n)
{
	enum tls_sniff_result first = TLS_SNIFF_NEED_MORE;

	for (size_t i = 0; i <= n && i <= 8; i++) {
		enum tls_sniff_result r = tls_sniff(p, i);

		if (first != TLS_SNIFF_NEED_MORE && r != first)
			abort();
		if (r == TLS_SNIFF_NEED_MORE &&
		    !(i == 0 || (p[0] == 0x16 && (i < 2 || p[1] == 0x03) && i < 3)))
			abort();
		if (r != TLS_SNIFF_NEED_MORE)
			first = r;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tls_conn *t;
	struct evbuffer *in, *wire;
	bool require;
	size_t off = 1, fed = 0;
	unsigned seed;

	if (ctx == NULL) {
		struct tls_ctx_opts o = {0};
		char err[256];

		ctx = tls_ctx_new(true, &o, err, sizeof(err));
		if (ctx == NULL)
			abort();
	}
	if (size < 1)
		return 0;
	require = data[0] & 1;
	seed = data[0] >> 1;
	check_sniff(data + 1, size - 1);
	t = tls_conn_server(ctx, require ? TLS_ACCEPT_TLS : TLS_ACCEPT_SNIFF);
	in = evbuffer_new();
	wire = evbuffer_new();
	while (off < size) {
		size_t chunk = 1 + (seed % 7), n = size - off < chunk ? size - off : chunk;
		enum tls_io st;

		seed = seed * 1103515245u + 12345u;
		st = tls_conn_input(t, data + off, n, in, wire);
		off += n;
		fed += n;
		if (st == TLS_IO_PLAIN) {
			if (require || evbuffer_get_length(in) != fed ||
			    memcmp(evbuffer_pullup(in, -1), data + 1, fed) != 0)
				abort();
			break;
		}
		if (st == TLS_IO_ERROR) {
			if (tls_conn_error(t)[0] == '\0')
				abort();
			break;
		}
		if (evbuffer_get_length(in) > 0 && tls_conn_handshaking(t))
			abort();
		if (st == TLS_IO_EOF)
			break;
	}
	tls_conn_free(t);
	evbuffer_free(in);
	evbuffer_free(wire);
	return 0;
}
