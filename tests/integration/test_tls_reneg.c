/*
 * test_tls_reneg.c — TLS renegotiation is refused on both sides of the
 * proxy (issue 11), with throwaway certificates (tests/tls/mkcerts.sh).
 *
 * Client side: a TLS 1.2 client completes the handshake with the proxy's
 * requireTLS port and is served, then calls SSL_renegotiate +
 * SSL_do_handshake: the renegotiation fails (OpenSSL's no_renegotiation
 * alert), the proxy closes that connection logging "TLS renegotiation
 * refused", and keeps serving a new TLS client.
 *
 * Backend side: a scripted TLS 1.2 backend (OpenSSL, a thread of this
 * test, speaking just enough of the wire protocol) answers the proxy's
 * hellos; on the first other command it sends a HelloRequest instead of a
 * reply and waits. The proxy must close that backend connection with the
 * logged reason, and the client must get an answer (an error or the reply
 * from a new connection) within the hang guard, never wait for ever.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

#define HANG_GUARD_MS 30000
#define RN_MAX_CONNS  16

/* Certificates of one test (short path: config lines hold 198 characters). */
static char certs[64];

static const char *cf(const char *name)
{
	static char path[8][128];
	static int slot;

	slot = (slot + 1) % 8;
	snprintf(path[slot], sizeof(path[slot]), "%s/%s", certs, name);
	return path[slot];
}

static void make_certs(void)
{
	char cmd[400], out[2000];
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	int st;

	snprintf(certs, sizeof(certs), "/tmp/mpr-XXXXXX");
	cr_assert(mkdtemp(certs) != NULL);
	snprintf(cmd, sizeof(cmd), "%s/tests/tls/mkcerts.sh %s", MP_SOURCE_DIR, certs);
	st = h_run_capture(argv, out, sizeof(out), 120000);
	cr_assert(st == 0, "mkcerts.sh failed: %s", out);
}

static void drop_certs(void)
{
	char cmd[200], out[200];
	const char *argv[] = {"/bin/sh", "-c", cmd, NULL};

	snprintf(cmd, sizeof(cmd), "rm -rf %s", certs);
	(void)h_run_capture(argv, out, sizeof(out), 60000);
}

TestSuite(tls_reneg, .init = make_certs, .fini = drop_certs, .timeout = 120);

/* ---------------------------------------------------- TLS 1.2 endpoints */

static SSL_CTX *ctx12(bool server)
{
	SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());

	cr_assert(ctx != NULL);
	cr_assert(SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION) == 1);
	if (server) {
		cr_assert(SSL_CTX_use_certificate_chain_file(ctx, cf("server.pem")) == 1);
		cr_assert(SSL_CTX_use_PrivateKey_file(ctx, cf("server.key"), SSL_FILETYPE_PEM) ==
			  1);
	} else {
		cr_assert(SSL_CTX_load_verify_locations(ctx, cf("ca.pem"), NULL) == 1);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	return ctx;
}

static void set_timeouts(int fd, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static bool ssl_write_all(SSL *ssl, const void *p, size_t n)
{
	return SSL_write(ssl, p, (int)n) == (int)n;
}

static bool ssl_read_all(SSL *ssl, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		int r = SSL_read(ssl, p + got, (int)(n - got));

		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* One whole wire message (malloc'd) or NULL. */
static uint8_t *ssl_read_msg(SSL *ssl, size_t *len)
{
	uint8_t head[16], *msg;
	int32_t n;

	if (!ssl_read_all(ssl, head, sizeof(head)))
		return NULL;
	memcpy(&n, head, 4);
	if (n < 16 || n > 16 * 1024 * 1024)
		return NULL;
	msg = malloc((size_t)n);
	if (msg == NULL)
		return NULL;
	memcpy(msg, head, sizeof(head));
	if (!ssl_read_all(ssl, msg + 16, (size_t)n - 16)) {
		free(msg);
		return NULL;
	}
	*len = (size_t)n;
	return msg;
}

/* --------------------------------------------------- client side */

/* A TLS 1.2 connection to the proxy; NULL ssl on failure. */
static SSL *client_connect(SSL_CTX *ctx, struct proxy *p, int *fdp)
{
	int fd = raw_connect(p);
	SSL *ssl;

	cr_assert(fd >= 0, "cannot connect to the proxy");
	set_timeouts(fd, HANG_GUARD_MS);
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "localhost");
	cr_assert(SSL_connect(ssl) == 1, "TLS 1.2 handshake with the proxy failed");
	cr_assert_str_eq(SSL_get_version(ssl), "TLSv1.2");
	*fdp = fd;
	return ssl;
}

/* A ping over ssl answered ok: 1? */
static bool ssl_ping(SSL *ssl, int32_t id)
{
	bson_t cmd = BSON_INITIALIZER;
	struct h_buf b;
	struct raw_reply r;
	uint8_t *msg;
	size_t len;
	bool ok;

	BSON_APPEND_INT32(&cmd, "ping", 1);
	BSON_APPEND_UTF8(&cmd, "$db", "admin");
	hb_init(&b);
	h_build_msg(&b, id, 0, &cmd);
	ok = ssl_write_all(ssl, b.data, b.len);
	hb_free(&b);
	bson_destroy(&cmd);
	if (!ok || (msg = ssl_read_msg(ssl, &len)) == NULL)
		return false;
	ok = raw_parse_reply(msg, len, &r) && r.have_doc && h_get_int(&r.doc, "ok", 0) == 1;
	free(msg);
	return ok;
}

static struct proxy *tls_proxy(void)
{
	char extra[600];

	snprintf(extra, sizeof(extra),
		 "client_tls_mode = requireTLS\nclient_tls_cert_file = %s\n"
		 "client_tls_key_file = %s\n",
		 cf("server.pem"), cf("server.key"));
	return proxy_start(extra);
}

Test(tls_reneg, client_renegotiation_refused)
{
	SSL_CTX *ctx;
	struct proxy *p;
	int fd, fd2, rc;
	unsigned long e;
	char why[256] = "";
	SSL *ssl, *ssl2;

	signal(SIGPIPE, SIG_IGN); /* a write after the proxy closed is an error, not a crash */
	ctx = ctx12(false);
	p = tls_proxy();
	ssl = client_connect(ctx, p, &fd);
	cr_assert(ssl_ping(ssl, 1), "ping over TLS 1.2 before the renegotiation failed");
	cr_assert(SSL_renegotiate(ssl) == 1, "SSL_renegotiate refused locally");
	rc = SSL_do_handshake(ssl);
	e = ERR_peek_error();
	if (e != 0)
		ERR_error_string_n(e, why, sizeof(why));
	ERR_clear_error();
	cr_log_info("client renegotiation: SSL_do_handshake %d (%s)", rc, why);
	cr_assert(rc != 1, "the proxy accepted a TLS renegotiation");
	cr_assert(log_wait(p, "TLS renegotiation refused", 10000),
		  "the proxy did not log the refused renegotiation:\n%s", proxy_log_tail(p, 3000));
	cr_assert(raw_wait_closed(fd, 10000), "the proxy kept the renegotiating connection open");
	SSL_free(ssl);
	close(fd);

	/* The proxy keeps serving TLS clients. */
	proxy_assert_alive(p, "after the refused renegotiation");
	ssl2 = client_connect(ctx, p, &fd2);
	cr_assert(ssl_ping(ssl2, 2), "a new TLS client is not served after the renegotiation");
	SSL_free(ssl2);
	close(fd2);
	SSL_CTX_free(ctx);
	proxy_stop(p);
}

/* --------------------------------------------------- backend side */

/* The scripted backend. Rules: its threads never assert; the test reads
 * the counters under mu after the threads are joined or through rn_get. */
struct rn_backend {
	int lfd, port;
	SSL_CTX *ctx;
	pthread_t acceptor, conn_thr[RN_MAX_CONNS];
	int nconn_thr;
	pthread_mutex_t mu;
	bool stopping;
	/* under mu */
	int accepted, hellos, hello_requests;
	bool reneg_conn_done;	/* the wait after the HelloRequest ended */
	bool reneg_conn_closed; /* ... because the proxy closed that connection */
};

struct rn_conn {
	struct rn_backend *be;
	int fd;
};

static void rn_reply(SSL *ssl, const uint8_t *req, const bson_t *doc)
{
	int32_t req_id, opcode;
	struct h_buf b;

	memcpy(&req_id, req + 4, 4);
	memcpy(&opcode, req + 12, 4);
	hb_init(&b);
	if (opcode == H_WIRE_OP_MSG) {
		hb_header(&b, 9000 + req_id, req_id, H_WIRE_OP_MSG);
		hb_i32(&b, 0);
		hb_u8(&b, 0);
	} else { /* OP_QUERY: OP_REPLY */
		hb_header(&b, 9000 + req_id, req_id, 1);
		hb_i32(&b, 0);
		hb_i64(&b, 0);
		hb_i32(&b, 0);
		hb_i32(&b, 1);
	}
	hb_doc(&b, doc);
	hb_finish(&b, false);
	(void)ssl_write_all(ssl, b.data, b.len);
	hb_free(&b);
}

/* The command document of an OP_MSG (section 0) or OP_QUERY. */
static bool rn_command(const uint8_t *msg, size_t len, bson_t *out)
{
	int32_t opcode;
	size_t off;
	uint32_t dlen;

	memcpy(&opcode, msg + 12, 4);
	if (opcode == H_WIRE_OP_MSG) {
		off = 16 + 4 + 1;
	} else {
		off = 16 + 4;
		while (off < len && msg[off] != 0)
			off++;
		off += 1 + 8;
	}
	if (off + 4 > len)
		return false;
	memcpy(&dlen, msg + off, 4);
	return dlen <= len - off && bson_init_static(out, msg + off, dlen);
}

static void hello_doc(bson_t *d, int conn_id)
{
	bson_init(d);
	BSON_APPEND_BOOL(d, "ismaster", true);
	BSON_APPEND_INT32(d, "maxWireVersion", 17);
	BSON_APPEND_INT32(d, "minWireVersion", 0);
	BSON_APPEND_INT32(d, "maxBsonObjectSize", 16777216);
	BSON_APPEND_INT32(d, "maxMessageSizeBytes", 48000000);
	BSON_APPEND_INT32(d, "maxWriteBatchSize", 100000);
	BSON_APPEND_INT32(d, "connectionId", conn_id);
	BSON_APPEND_DOUBLE(d, "ok", 1.0);
}

static void find_doc(bson_t *d)
{
	bson_t cur, batch;

	bson_init(d);
	BSON_APPEND_DOCUMENT_BEGIN(d, "cursor", &cur);
	BSON_APPEND_ARRAY_BEGIN(&cur, "firstBatch", &batch);
	bson_append_array_end(&cur, &batch);
	BSON_APPEND_INT64(&cur, "id", 0);
	BSON_APPEND_UTF8(&cur, "ns", "rn.c");
	bson_append_document_end(d, &cur);
	BSON_APPEND_DOUBLE(d, "ok", 1.0);
}

/* After the HelloRequest: read raw bytes (alerts; a reply would be data)
 * until the proxy closes, or the guard passes. True when it closed. */
static bool rn_wait_close(int fd)
{
	int64_t deadline = h_now_ms() + HANG_GUARD_MS;
	uint8_t junk[4096];

	while (h_now_ms() < deadline) {
		struct pollfd pf = {fd, POLLIN, 0};
		ssize_t n;

		if (poll(&pf, 1, 100) <= 0)
			continue;
		n = read(fd, junk, sizeof(junk));
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return true;
	}
	return false;
}

/* Sends the HelloRequest on the first non-hello command of the whole backend. */
static bool rn_serve_command(struct rn_conn *c, SSL *ssl, const uint8_t *msg)
{
	struct rn_backend *be = c->be;
	bool reneg;
	bson_t d;

	pthread_mutex_lock(&be->mu);
	reneg = be->hello_requests == 0;
	if (reneg)
		be->hello_requests++;
	pthread_mutex_unlock(&be->mu);
	if (!reneg) {
		find_doc(&d);
		rn_reply(ssl, msg, &d);
		bson_destroy(&d);
		return true;
	}
	/* A server's SSL_do_handshake after SSL_renegotiate writes the
	 * HelloRequest and returns; the answer is not read through OpenSSL. */
	(void)SSL_renegotiate(ssl);
	(void)SSL_do_handshake(ssl);
	ERR_clear_error();
	reneg = rn_wait_close(c->fd);
	pthread_mutex_lock(&be->mu);
	be->reneg_conn_closed = reneg;
	be->reneg_conn_done = true;
	pthread_mutex_unlock(&be->mu);
	return false;
}

static void *rn_conn_main(void *arg)
{
	struct rn_conn *c = arg;
	struct rn_backend *be = c->be;
	SSL *ssl = SSL_new(be->ctx);
	uint8_t *msg;
	size_t len;
	int id;

	set_timeouts(c->fd, HANG_GUARD_MS);
	SSL_set_fd(ssl, c->fd);
	if (SSL_accept(ssl) != 1)
		goto out;
	while ((msg = ssl_read_msg(ssl, &len)) != NULL) {
		bson_t cmd, d;
		bson_iter_t it;
		const char *name = "";
		bool more = true;

		if (rn_command(msg, len, &cmd) && bson_iter_init(&it, &cmd) && bson_iter_next(&it))
			name = bson_iter_key(&it);
		if (strcasecmp(name, "isMaster") == 0 || strcmp(name, "hello") == 0) {
			pthread_mutex_lock(&be->mu);
			id = ++be->hellos;
			pthread_mutex_unlock(&be->mu);
			hello_doc(&d, id);
			rn_reply(ssl, msg, &d);
			bson_destroy(&d);
		} else {
			more = rn_serve_command(c, ssl, msg);
		}
		free(msg);
		if (!more)
			break;
	}
out:
	ERR_clear_error();
	SSL_free(ssl);
	close(c->fd);
	free(c);
	return NULL;
}

static void *rn_accept_main(void *arg)
{
	struct rn_backend *be = arg;

	for (;;) {
		int fd = accept(be->lfd, NULL, NULL);
		struct rn_conn *c;

		pthread_mutex_lock(&be->mu);
		if (fd < 0 || be->stopping || be->nconn_thr == RN_MAX_CONNS) {
			pthread_mutex_unlock(&be->mu);
			if (fd >= 0)
				close(fd);
			if (fd < 0 || be->stopping)
				return NULL;
			continue;
		}
		be->accepted++;
		c = malloc(sizeof(*c));
		c->be = be;
		c->fd = fd;
		if (pthread_create(&be->conn_thr[be->nconn_thr], NULL, rn_conn_main, c) == 0)
			be->nconn_thr++;
		else
			close(fd), free(c);
		pthread_mutex_unlock(&be->mu);
	}
}

static struct rn_backend *rn_start(void)
{
	struct rn_backend *be = calloc(1, sizeof(*be));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int one = 1;

	cr_assert(be != NULL);
	be->ctx = ctx12(true);
	pthread_mutex_init(&be->mu, NULL);
	be->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(be->lfd >= 0);
	setsockopt(be->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert(bind(be->lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
	cr_assert(listen(be->lfd, 16) == 0);
	cr_assert(getsockname(be->lfd, (struct sockaddr *)&a, &alen) == 0);
	be->port = ntohs(a.sin_port);
	cr_assert(pthread_create(&be->acceptor, NULL, rn_accept_main, be) == 0);
	return be;
}

/* Stop accepting; the connection threads end when the proxy closes theirs. */
static void rn_stop(struct rn_backend *be)
{
	pthread_mutex_lock(&be->mu);
	be->stopping = true;
	pthread_mutex_unlock(&be->mu);
	shutdown(be->lfd, SHUT_RDWR);
	pthread_join(be->acceptor, NULL);
	close(be->lfd);
	for (int i = 0; i < be->nconn_thr; i++)
		pthread_join(be->conn_thr[i], NULL);
	SSL_CTX_free(be->ctx);
	pthread_mutex_destroy(&be->mu);
	free(be);
}

#define RN_GET(be, field)                                                                          \
	({                                                                                         \
		__typeof__((be)->field) v_;                                                        \
		pthread_mutex_lock(&(be)->mu);                                                     \
		v_ = (be)->field;                                                                  \
		pthread_mutex_unlock(&(be)->mu);                                                   \
		v_;                                                                                \
	})

Test(tls_reneg, backend_hello_request_refused)
{
	struct rn_backend *be = rn_start();
	char extra[600];
	struct proxy *p;
	bson_t cmd = BSON_INITIALIZER, reply;
	int64_t t0;
	char *answer;
	bool got;
	int fd;

	snprintf(extra, sizeof(extra),
		 "backend_uri = mongodb://localhost:%d/?tls=true&tlsCAFile=%s\npool_size = 2\n",
		 be->port, cf("ca.pem"));
	p = proxy_start(extra);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	BSON_APPEND_UTF8(&cmd, "find", "c");
	BSON_APPEND_UTF8(&cmd, "$db", "rn");
	t0 = h_now_ms();
	got = raw_command(fd, 1, &cmd, &reply, HANG_GUARD_MS);
	answer = got ? bson_as_relaxed_extended_json(&reply, NULL) : bson_strdup("(nothing)");
	cr_log_info("backend HelloRequest: client answered after %lld ms: %s",
		    (long long)(h_now_ms() - t0), answer);
	cr_assert(got, "the client got no answer within %d ms after the backend's HelloRequest",
		  HANG_GUARD_MS);
	cr_assert_eq(RN_GET(be, hello_requests), 1, "the backend sent no HelloRequest");
	if (h_get_int(&reply, "ok", 0) != 1) {
		const char *msg = h_get_str(&reply, "errmsg");

		cr_assert(msg != NULL && strncmp(msg, "mongoplex: ", 11) == 0,
			  "not a mongoplex error: %s", answer);
	}
	cr_assert(log_wait(p, "TLS renegotiation refused (the server sent a HelloRequest)", 10000),
		  "the proxy did not log why it closed the backend connection:\n%s",
		  proxy_log_tail(p, 3000));
	while (!RN_GET(be, reneg_conn_done))
		h_sleep_ms(20); /* bounded by rn_wait_close's guard */
	cr_assert(RN_GET(be, reneg_conn_closed),
		  "the proxy did not close the backend connection that asked to renegotiate");
	proxy_assert_alive(p, "after the backend's HelloRequest");
	proxy_stop(p);
	close(fd);
	bson_destroy(&cmd);
	bson_destroy(&reply);
	bson_free(answer);
	rn_stop(be);
}
