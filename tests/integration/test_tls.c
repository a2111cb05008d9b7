/*
 * test_tls.c — TLS on both sides of the real proxy, with throwaway
 * certificates (tests/tls/mkcerts.sh) made per test.
 *
 * Backend side: each test starts its own FerretDB with TLS and SCRAM
 * (scripts/backend.sh start ferretdb-tls; the test FAILS if it cannot) and
 * asserts CRUD through the proxy over TLS (+ SCRAM-SHA-256 and SCRAM-SHA-1,
 * a client certificate to the backend), and that a wrong CA, a wrong
 * hostname and an expired certificate each give requests code 6 with
 * "TLS handshake with H:P failed: certificate verify failed (reason)",
 * with fewer failed handshakes logged than requests (backoff), and that
 * tlsAllowInvalidHostnames / tlsInsecure relax exactly that.
 *
 * Client side (backend: MONGOPLEX_TEST_URI, plain): requireTLS and allowTLS
 * with libmongoc; plain TCP to requireTLS, a stalled handshake and garbage
 * inside TLS each closed with the logged reason; client_tls_verify_peer;
 * certificate rotation on SIGHUP while a client runs queries (0 failures, old
 * connection keeps working, new connections see the new serial, a broken
 * certificate keeps the current one); the main hostile inputs of the
 * bad-input battery through a TLS connection; pymongo 3 and 4, the Node
 * driver and mongosh over TLS with a client certificate.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
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

/* Certificates of one test. */
static char certs[200];

static const char *cf(const char *name)
{
	static char path[16][300];
	static int slot;

	slot = (slot + 1) % 16;
	snprintf(path[slot], sizeof(path[slot]), "%s/%s", certs, name);
	return path[slot];
}

static void shell(const char *cmd, char *out, size_t outlen, int *status)
{
	*status = h_sh_capture(cmd, out, outlen, 120000);
}

static void make_certs(void)
{
	char cmd[600], out[2000];
	int st;

	/* Short paths: a config line holds at most 198 characters (inih), and
	 * the backend URI carries two of them. */
	snprintf(certs, sizeof(certs), "/tmp/mpt-XXXXXX");
	cr_assert(mkdtemp(certs) != NULL);
	snprintf(cmd, sizeof(cmd),
		 "%s/tests/tls/mkcerts.sh %s && cp %s/client-combined.pem %s/cc.pem", MP_SOURCE_DIR,
		 certs, certs, certs);
	shell(cmd, out, sizeof(out), &st);
	cr_assert(st == 0, "mkcerts.sh failed: %s", out);
}

/* Also after a failed assertion: stop every FerretDB the test started. */
static void drop_certs(void)
{
	char cmd[600], out[2000];
	int st;

	snprintf(cmd, sizeof(cmd),
		 "for d in %s/fer-*; do [ -d \"$d\" ] && %s/scripts/backend.sh stop \"$d\"; done; "
		 "rm -rf %s",
		 certs, MP_SOURCE_DIR, certs);
	shell(cmd, out, sizeof(out), &st);
}

/* ------------------------------------------------------ FerretDB with TLS */

/* A FerretDB with TLS (and SCRAM) serving `cert`, in this test's certificate
 * directory (drop_certs stops it even after a failed assertion). Its own, not
 * the shared one (h_ferret_shared): it serves this test's throwaway certificates. */
static void fer_start(struct h_ferret *fe, const char *cert, const char *key)
{
	char dir[300], e_cert[400], e_key[400], e_ca[400], e_client[400];
	const char *const env[] = {e_cert, e_key, e_ca, e_client, NULL};

	snprintf(dir, sizeof(dir), "%s/fer-%.6s", certs, cert);
	snprintf(e_cert, sizeof(e_cert), "MONGOPLEX_TLS_CERT=%s", cf(cert));
	snprintf(e_key, sizeof(e_key), "MONGOPLEX_TLS_KEY=%s", cf(key));
	snprintf(e_ca, sizeof(e_ca), "MONGOPLEX_TLS_CA=%s", cf("ca.pem"));
	snprintf(e_client, sizeof(e_client), "MONGOPLEX_TLS_CLIENT=%s", cf("cc.pem"));
	h_ferret_start(fe, "ferretdb-tls", dir, env);
}

/* The TLS URI with its tlsCAFile replaced / options appended. */
static void fer_uri(const struct h_ferret *fe, const char *ca, const char *more, char *buf,
		    size_t len)
{
	char head[900];
	const char *q = strchr(fe->uri, '?');

	snprintf(head, sizeof(head), "%.*s", (int)(q - fe->uri), fe->uri);
	snprintf(buf, len, "%s?tls=true&tlsCAFile=%s&tlsCertificateKeyFile=%s%s", head, cf(ca),
		 cf("cc.pem"), more ? more : "");
}

static struct proxy *proxy_backend(const char *uri, const char *more)
{
	char extra[2000];

	snprintf(extra, sizeof(extra), "backend_uri = %s\n%s", uri, more ? more : "");
	return proxy_start(extra);
}

/* Insert, read back (a document larger than many TLS records), who am I. */
static void crud_through(struct proxy *p, const char *user)
{
	mongoc_client_t *c = h_proxy_client(p, "tls-crud");
	size_t big = 1 << 20;
	char *s = malloc(big + 1), coll[64], json[300];
	bson_t doc = BSON_INITIALIZER, reply;
	bson_error_t err;
	mongoc_collection_t *col;

	h_unique(coll, sizeof(coll), "tls");
	col = mongoc_client_get_collection(c, "tlsdb", coll);
	memset(s, 'x', big);
	s[big] = '\0';
	BSON_APPEND_INT32(&doc, "_id", 1);
	BSON_APPEND_UTF8(&doc, "s", s);
	cr_assert(mongoc_collection_insert_one(col, &doc, NULL, NULL, &err), "insert: %s",
		  err.message);
	snprintf(json, sizeof(json), "{\"find\": \"%s\", \"filter\": {\"_id\": 1}}", coll);
	cr_assert(h_cmd_json(c, "tlsdb", json, &reply, &err), "find: %s", err.message);
	cr_assert_eq(strlen(h_get_str(&reply, "cursor.firstBatch.0.s")), big);
	bson_destroy(&reply);
	cr_assert(h_cmd_json(c, "admin", "{\"connectionStatus\": 1}", &reply, &err), "%s",
		  err.message);
	cr_assert_str_eq(h_get_str(&reply, "authInfo.authenticatedUsers.0.user"), user);
	bson_destroy(&reply);
	bson_destroy(&doc);
	free(s);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
}

TestSuite(tls, .init = make_certs, .fini = drop_certs, .timeout = 240);

Test(tls, backend_tls_with_scram)
{
	struct h_ferret fe;
	struct proxy *p;
	char uri[1200];

	fer_start(&fe, "server.pem", "server.key");
	p = proxy_backend(fe.uri, NULL);
	crud_through(p, "mongoplex");
	cr_assert(log_contains(p, "backend TLS: CA "), "no TLS line in the log");
	cr_assert(log_contains(p, "chain and hostname verified"));
	proxy_stop(p);
	fer_uri(&fe, "ca.pem", "&authMechanism=SCRAM-SHA-1", uri, sizeof(uri));
	p = proxy_backend(uri, NULL);
	crud_through(p, "mongoplex");
	proxy_stop(p);
	h_ferret_stop(&fe);
}

/* Count the occurrences of `needle` in the proxy's log. */
static int log_count(struct proxy *p, const char *needle)
{
	char *log = proxy_log(p), *at = log;
	int n = 0;

	while ((at = strstr(at, needle)) != NULL) {
		n++;
		at += strlen(needle);
	}
	free(log);
	return n;
}

/* Requests get code 6 naming the backend and the reason; the failures are
 * logged per backoff step, not per request. */
static void expect_tls_refusal(const char *uri, int port, const char *reason)
{
	struct proxy *p = proxy_backend(uri, "reconnect_backoff_max_ms = 60000\n");
	char want[300];
	const int requests = 20;

	snprintf(want, sizeof(want),
		 "TLS handshake with localhost:%d failed: certificate verify failed (%s)", port,
		 reason);
	for (int i = 0; i < requests; i++) {
		mongoc_client_t *c = h_proxy_client(p, "tls-refused");
		bson_t reply;
		bson_error_t err;

		cr_assert(!h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err), "ping worked");
		cr_assert(strstr(err.message, want) != NULL, "request %d: %s (want %s)", i,
			  err.message, want);
		cr_assert(strstr(err.message, "mongoplex: ") != NULL, "%s", err.message);
		bson_destroy(&reply);
		mongoc_client_destroy(c);
	}
	cr_assert(log_contains(p, want), "log lacks: %s", want);
	cr_assert_lt(log_count(p, "TLS handshake with"), requests,
		     "one failed handshake logged per request: no backoff");
	proxy_stop(p);
}

static void expect_tls_ok(const char *uri)
{
	struct proxy *p = proxy_backend(uri, NULL);
	mongoc_client_t *c = h_proxy_client(p, "tls-relaxed");
	bson_t reply;
	bson_error_t err;

	cr_assert(h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err), "%s", err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	proxy_stop(p);
}

Test(tls, backend_wrong_ca)
{
	struct h_ferret fe;
	char uri[1200];

	fer_start(&fe, "server.pem", "server.key");
	fer_uri(&fe, "otherca.pem", NULL, uri, sizeof(uri));
	expect_tls_refusal(uri, fe.port, "unable to get local issuer certificate");
	fer_uri(&fe, "otherca.pem", "&tlsInsecure=true", uri, sizeof(uri));
	expect_tls_ok(uri);
	h_ferret_stop(&fe);
}

Test(tls, backend_wrong_hostname)
{
	struct h_ferret fe;
	char uri[1200];

	fer_start(&fe, "wronghost.pem", "wronghost.key");
	expect_tls_refusal(fe.uri, fe.port, "hostname mismatch");
	fer_uri(&fe, "ca.pem", "&tlsAllowInvalidHostnames=true", uri, sizeof(uri));
	expect_tls_ok(uri);
	h_ferret_stop(&fe);
}

Test(tls, backend_expired)
{
	struct h_ferret fe;
	char uri[1200];

	fer_start(&fe, "expired.pem", "expired.key");
	expect_tls_refusal(fe.uri, fe.port, "certificate has expired");
	fer_uri(&fe, "ca.pem", "&tlsAllowInvalidHostnames=true", uri, sizeof(uri));
	expect_tls_refusal(uri, fe.port, "certificate has expired"); /* not a hostname issue */
	h_ferret_stop(&fe);
}

/* ----------------------------------------------------------- client side */

static struct proxy *proxy_tls(const char *mode, bool verify_peer, const char *cert,
			       const char *key, const char *more)
{
	char extra[1500];

	snprintf(extra, sizeof(extra),
		 "client_tls_mode = %s\nclient_tls_cert_file = %s\nclient_tls_key_file = %s\n"
		 "client_tls_ca_file = %s\nclient_tls_verify_peer = %s\n%s",
		 mode, cert, key, cf("ca.pem"), verify_peer ? "on" : "off", more ? more : "");
	return proxy_start(extra);
}

static bool mongoc_ping(struct proxy *p, const char *opts, char *why, size_t whylen)
{
	char uri[1000];
	mongoc_client_t *c;
	bson_t reply;
	bson_error_t err;
	bool ok;

	snprintf(uri, sizeof(uri), "mongodb://localhost:%d/?serverSelectionTimeoutMS=3000%s",
		 p->port, opts);
	c = h_client_uri(uri, "tls-client");
	cr_assert(c != NULL, "bad uri %s", uri);
	ok = h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err);
	snprintf(why, whylen, "%s", ok ? "" : err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	return ok;
}

/* A blocking TLS connection of the test's own (OpenSSL). */
struct tcli {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
};

static bool tcli_open(struct tcli *t, struct proxy *p, const char *client_cert)
{
	struct timeval tv = {10, 0};

	memset(t, 0, sizeof(*t));
	t->fd = raw_connect(p);
	cr_assert(t->fd >= 0);
	setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	t->ctx = SSL_CTX_new(TLS_client_method());
	cr_assert(SSL_CTX_load_verify_locations(t->ctx, cf("ca.pem"), NULL) == 1);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (client_cert) {
		cr_assert(SSL_CTX_use_certificate_chain_file(t->ctx, client_cert) == 1);
		cr_assert(SSL_CTX_use_PrivateKey_file(t->ctx, client_cert, SSL_FILETYPE_PEM) == 1);
	}
	t->ssl = SSL_new(t->ctx);
	SSL_set_fd(t->ssl, t->fd);
	SSL_set_tlsext_host_name(t->ssl, "localhost");
	return SSL_connect(t->ssl) == 1;
}

static void tcli_close(struct tcli *t)
{
	SSL_free(t->ssl);
	SSL_CTX_free(t->ctx);
	close(t->fd);
}

static long tcli_serial(struct tcli *t)
{
	X509 *x = SSL_get1_peer_certificate(t->ssl);
	long v = x ? ASN1_INTEGER_get(X509_get0_serialNumber(x)) : -1;

	X509_free(x);
	return v;
}

static bool tcli_write(struct tcli *t, const void *p, size_t n)
{
	return SSL_write(t->ssl, p, (int)n) == (int)n;
}

static bool tcli_read_full(struct tcli *t, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		int r = SSL_read(t->ssl, p + got, (int)(n - got));

		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* One reply (malloc'd), or NULL when the connection closed or failed. */
static uint8_t *tcli_recv(struct tcli *t, size_t *len)
{
	uint8_t hdr[4], *msg;
	int32_t n;

	if (!tcli_read_full(t, hdr, 4))
		return NULL;
	memcpy(&n, hdr, 4);
	cr_assert(n >= 16 && n < 64 * 1024 * 1024, "reply length %d", n);
	msg = malloc((size_t)n);
	memcpy(msg, hdr, 4);
	if (!tcli_read_full(t, msg + 4, (size_t)n - 4)) {
		free(msg);
		return NULL;
	}
	*len = (size_t)n;
	return msg;
}

/* tcli_recv in 16 KB steps with a pause between them. */
static uint8_t *tcli_recv_slowly(struct tcli *t, size_t *len)
{
	uint8_t hdr[4], *msg;
	int32_t n;
	size_t got = 4;

	if (!tcli_read_full(t, hdr, 4))
		return NULL;
	memcpy(&n, hdr, 4);
	cr_assert(n >= 16 && n < 64 * 1024 * 1024, "reply length %d", n);
	msg = malloc((size_t)n);
	memcpy(msg, hdr, 4);
	while (got < (size_t)n) {
		size_t step = (size_t)n - got < 16384 ? (size_t)n - got : 16384;

		if (!tcli_read_full(t, msg + got, step)) {
			free(msg);
			return NULL;
		}
		got += step;
		if ((got / 16384) % 16 == 0)
			h_sleep_ms(2);
	}
	*len = (size_t)n;
	return msg;
}

/* Send raw bytes inside TLS; the reply's code (0: ok:1, -1: closed). */
static int tcli_exchange(struct tcli *t, const void *p, size_t n)
{
	struct raw_reply r;
	size_t len;
	uint8_t *msg;
	int code;

	cr_assert(tcli_write(t, p, n));
	msg = tcli_recv(t, &len);
	if (msg == NULL)
		return -1;
	cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
	code = h_get_bool(&r.doc, "ok") ? 0 : (int)h_get_int(&r.doc, "code", -2);
	free(msg);
	return code;
}

static int tcli_cmd(struct tcli *t, const char *json)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &err);
	struct h_buf b;
	int code;

	cr_assert(cmd != NULL, "%s", err.message);
	hb_init(&b);
	h_build_msg(&b, 42, 0, cmd);
	code = tcli_exchange(t, b.data, b.len);
	hb_free(&b);
	bson_destroy(cmd);
	return code;
}

Test(tls, client_require_tls)
{
	struct proxy *p = proxy_tls("requireTLS", false, cf("server.pem"), cf("server.key"),
				    "client_read_timeout_ms = 300\n");
	char why[600], opts[600];
	struct tcli t;
	int fd;
	const uint8_t partial[] = {0x16, 0x03, 0x01};

	snprintf(opts, sizeof(opts), "&tls=true&tlsCAFile=%s", cf("ca.pem"));
	cr_assert(mongoc_ping(p, opts, why, sizeof(why)), "TLS ping: %s", why);
	snprintf(opts, sizeof(opts), "&tls=true&tlsCAFile=%s", cf("otherca.pem"));
	cr_assert(!mongoc_ping(p, opts, why, sizeof(why)), "a client trusting another CA got in");
	/* plain TCP to a requireTLS port */
	fd = raw_connect(p);
	cr_assert(!raw_ping_ok(fd, 5000), "a plain ping was answered");
	cr_assert(raw_wait_closed(fd, 5000));
	cr_assert(log_wait(p, "TLS: not a TLS handshake", 5000));
	close(fd);
	/* a stalled handshake: bounded by client_read_timeout_ms */
	fd = raw_connect(p);
	cr_assert(raw_send(fd, partial, sizeof(partial)));
	cr_assert(raw_wait_closed(fd, 10000), "stalled handshake not closed");
	cr_assert(log_wait(p, "TLS handshake not completed within 300 ms", 5000));
	close(fd);
	/* garbage inside TLS: records that are not records */
	cr_assert(tcli_open(&t, p, NULL));
	cr_assert_eq(tcli_cmd(&t, "{\"ping\": 1, \"$db\": \"admin\"}"), 0);
	cr_assert(raw_send(t.fd, "\x17\x03\x03\x00\x20garbage-garbage-garbage-garbage!", 37));
	cr_assert(raw_wait_closed(t.fd, 5000));
	cr_assert(log_wait(p, "closing: TLS: ", 5000), "no logged TLS reason");
	tcli_close(&t);
	proxy_assert_alive(p, "after hostile TLS clients");
	proxy_stop(p);
}

Test(tls, client_allow_tls_both)
{
	struct proxy *p = proxy_tls("allowTLS", false, cf("server.pem"), cf("server.key"), NULL);
	char why[600], opts[600];
	int fd;

	snprintf(opts, sizeof(opts), "&tls=true&tlsCAFile=%s", cf("ca.pem"));
	cr_assert(mongoc_ping(p, opts, why, sizeof(why)), "TLS ping: %s", why);
	cr_assert(mongoc_ping(p, "", why, sizeof(why)), "plain ping: %s", why);
	fd = raw_connect(p);
	cr_assert(raw_ping_ok(fd, 5000), "raw plain ping");
	close(fd);
	proxy_stop(p);
}

Test(tls, client_verify_peer)
{
	struct proxy *p = proxy_tls("requireTLS", true, cf("server.pem"), cf("server.key"), NULL);
	char why[600], opts[600];

	snprintf(opts, sizeof(opts), "&tls=true&tlsCAFile=%s&tlsCertificateKeyFile=%s",
		 cf("ca.pem"), cf("client-combined.pem"));
	cr_assert(mongoc_ping(p, opts, why, sizeof(why)), "with a client certificate: %s", why);
	snprintf(opts, sizeof(opts), "&tls=true&tlsCAFile=%s", cf("ca.pem"));
	cr_assert(!mongoc_ping(p, opts, why, sizeof(why)), "no client certificate, yet admitted");
	cr_assert(log_wait(p, "closing: TLS: ", 5000), "refusal not logged");
	proxy_stop(p);
}

/* ------------------------------------------------------ rotation on SIGHUP */

struct load {
	struct proxy *p;
	volatile bool stop;
	long ok, failed;
	char last_error[300];
};

static void *load_run(void *arg)
{
	struct load *l = arg;
	char uri[800];
	mongoc_client_t *c;

	snprintf(uri, sizeof(uri), "mongodb://localhost:%d/?tls=true&tlsCAFile=%s", l->p->port,
		 cf("ca.pem"));
	c = h_client_uri(uri, "tls-load");
	while (!l->stop) {
		bson_t reply;
		bson_error_t err;

		if (h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err)) {
			l->ok++;
		} else {
			l->failed++;
			snprintf(l->last_error, sizeof(l->last_error), "%s", err.message);
		}
		bson_destroy(&reply);
	}
	mongoc_client_destroy(c);
	return NULL;
}

static void install(const char *from, const char *to)
{
	char cmd[800], out[300];
	int st;

	snprintf(cmd, sizeof(cmd), "cp %s %s.tmp && mv %s.tmp %s", from, to, to, to);
	shell(cmd, out, sizeof(out), &st);
	cr_assert(st == 0, "%s: %s", cmd, out);
}

Test(tls, sighup_rotates_certificate)
{
	char cert[300], key[300];
	struct proxy *p;
	struct tcli before, after;
	struct load l = {0};
	pthread_t th;

	snprintf(cert, sizeof(cert), "%s", cf("live.pem"));
	snprintf(key, sizeof(key), "%s", cf("live.key"));
	install(cf("server.pem"), cert);
	install(cf("server.key"), key);
	p = proxy_tls("requireTLS", false, cert, key, NULL);
	cr_assert(tcli_open(&before, p, NULL));
	cr_assert_eq(tcli_serial(&before), 0x1001);
	l.p = p;
	pthread_create(&th, NULL, load_run, &l);
	while (l.ok < 50 && l.failed == 0)
		h_sleep_ms(10);
	install(cf("server2.pem"), cert);
	install(cf("server2.key"), key);
	kill(p->pid, SIGHUP);
	cr_assert(log_wait(p, "(serial 1002) for new connections", 10000), "no rotation logged");
	cr_assert(tcli_open(&after, p, NULL));
	cr_assert_eq(tcli_serial(&after), 0x1002, "new connection got the old certificate");
	cr_assert_eq(tcli_cmd(&before, "{\"ping\": 1, \"$db\": \"admin\"}"), 0,
		     "a connection from before the rotation broke");
	tcli_close(&after);
	/* a broken certificate: the current one stays */
	install(cf("ca.key"), cert);
	kill(p->pid, SIGHUP);
	cr_assert(log_wait(p, "client TLS context not replaced", 10000), "no refusal logged");
	cr_assert(tcli_open(&after, p, NULL));
	cr_assert_eq(tcli_serial(&after), 0x1002);
	tcli_close(&after);
	h_sleep_ms(200);
	l.stop = true;
	pthread_join(th, NULL);
	cr_log_info("rotation: %ld queries ok, %ld failed", l.ok, l.failed);
	cr_assert_eq(l.failed, 0, "queries failed during rotation: %s", l.last_error);
	cr_assert_gt(l.ok, 50);
	tcli_close(&before);
	proxy_stop(p);
}

/* ----------------------------------------------- hostile input over TLS */

Test(tls, badinput_over_tls)
{
	struct proxy *p = proxy_tls("requireTLS", false, cf("server.pem"), cf("server.key"), NULL);
	struct tcli t;
	struct h_buf b;
	bson_t body = BSON_INITIALIZER;

	cr_assert(tcli_open(&t, p, NULL));
	/* no $db */
	cr_assert_eq(tcli_cmd(&t, "{\"ping\": 1}"), 40571);
	/* invalid BSON: a body whose length lies; the connection stays */
	BSON_APPEND_INT32(&body, "ping", 1);
	BSON_APPEND_UTF8(&body, "$db", "admin");
	hb_init(&b);
	h_build_msg(&b, 7, 0, &body);
	b.data[21] = 0x7f; /* document length byte: longer than the section */
	cr_assert_eq(tcli_exchange(&t, b.data, b.len), 22);
	hb_free(&b);
	/* an unsupported opcode */
	hb_init(&b);
	hb_header(&b, 8, 0, 2010);
	hb_i32(&b, 0);
	hb_finish(&b, false);
	cr_assert_eq(tcli_exchange(&t, b.data, b.len), 2);
	hb_free(&b);
	/* legacy OP_QUERY other than hello */
	hb_init(&b);
	h_build_query(&b, 9, "admin.$cmd", &body);
	cr_assert_eq(tcli_exchange(&t, b.data, b.len), 352);
	hb_free(&b);
	cr_assert_eq(tcli_cmd(&t, "{\"ping\": 1, \"$db\": \"admin\"}"), 0, "not usable any more");
	/* messageLength beyond 48 MB: an error, then closed */
	hb_init(&b);
	hb_header(&b, 10, 0, 2013);
	hb_finish(&b, false);
	hb_set_i32(&b, 0, 60 * 1024 * 1024);
	cr_assert_eq(tcli_exchange(&t, b.data, b.len), 10334);
	hb_free(&b);
	{
		uint8_t c;

		cr_assert(SSL_read(t.ssl, &c, 1) <= 0, "still open after a bad messageLength");
	}
	tcli_close(&t);
	bson_destroy(&body);
	proxy_assert_alive(p, "after the hostile inputs over TLS");
	proxy_stop(p);
}

/* ----------------------------------------------------------- real drivers */

static const char *cache_dir(void)
{
	const char *c = getenv("MONGOPLEX_CACHE");

	return c && *c ? c : MP_SOURCE_DIR "/.cache";
}

/* The smoke suite's pinned Node driver + mongosh and the pymongo 4 venv, as
 * tests/drivers/run.sh and tests/drivers/install.sh install them (this test
 * may run before those suites on a fresh clone). */
static void ensure_drivers(void)
{
	char cmd[1500], out[3000];
	int st;

	(void)h_node_modules();
	snprintf(
	    cmd, sizeof(cmd),
	    "[ -x %s/pymongo4-venv/bin/python ] || MONGOPLEX_CACHE=%s %s/tests/drivers/install.sh "
	    "2>&1",
	    cache_dir(), cache_dir(), MP_SOURCE_DIR);
	shell(cmd, out, sizeof(out), &st);
	cr_assert(st == 0, "tests/drivers/install.sh failed: %s", out);
}

static void driver(const char *what, const char *cmd)
{
	char out[4000];
	int st;

	shell(cmd, out, sizeof(out), &st);
	cr_assert(st == 0 && strstr(out, "TLS-DRIVER-OK") != NULL, "%s failed (status %d): %s",
		  what, st, out);
	cr_log_info("%s: %s", what, out);
}

/* The full path: driver -TLS-> proxy -TLS+SCRAM-> FerretDB (wire 21: the
 * newest drivers refuse mongo-java-server's wire version). */
Test(tls, drivers_connect_with_client_certificate)
{
	struct h_ferret fe;
	struct proxy *p;
	char uri[800], cmd[3000], py4[400], more[1000];
	const char *pycode =
	    "import sys, pymongo; c = pymongo.MongoClient(sys.argv[1], "
	    "serverSelectionTimeoutMS=5000); d = c.tlsdrv.c; d.insert_one({\"v\": 1}); "
	    "assert d.count_documents({}) >= 1; print(\"TLS-DRIVER-OK\", pymongo.version)";
	const char *jscode =
	    "const {MongoClient} = require(\"mongodb\"); (async () => { const c = new "
	    "MongoClient(process.argv[1], {serverSelectionTimeoutMS: 5000}); await "
	    "c.db(\"tlsdrv\").collection(\"n\").insertOne({v: 1}); const n = await "
	    "c.db(\"tlsdrv\").collection(\"n\").countDocuments(); await c.close(); "
	    "console.log(\"TLS-DRIVER-OK\", n); })().catch(e => { console.error(e); "
	    "process.exit(1); });";

	ensure_drivers();
	fer_start(&fe, "server.pem", "server.key");
	snprintf(more, sizeof(more), "backend_uri = %s\n", fe.uri);
	p = proxy_tls("requireTLS", true, cf("server.pem"), cf("server.key"), more);
	snprintf(uri, sizeof(uri),
		 "mongodb://localhost:%d/?tls=true&tlsCAFile=%s&tlsCertificateKeyFile=%s", p->port,
		 cf("ca.pem"), cf("client-combined.pem"));
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c '%s' '%s' 2>&1", pycode, uri);
	driver("pymongo 3 (Debian)", cmd);
	snprintf(py4, sizeof(py4), "%s/pymongo4-venv/bin/python", cache_dir());
	snprintf(cmd, sizeof(cmd), "%s -c '%s' '%s' 2>&1", py4, pycode, uri);
	driver("pymongo 4 (venv)", cmd);
	snprintf(cmd, sizeof(cmd), "NODE_PATH=%s node -e '%s' '%s' 2>&1", h_node_modules(), jscode,
		 uri);
	driver("Node driver", cmd);
	snprintf(cmd, sizeof(cmd),
		 "%s/.bin/mongosh --quiet '%s' --eval '"
		 "db.getSiblingDB(\"tlsdrv\").m.insertOne({v: 1}); "
		 "print(\"TLS-DRIVER-OK\", db.getSiblingDB(\"tlsdrv\").m.countDocuments({}))' "
		 "2>&1 </dev/null",
		 h_node_modules(), uri);
	driver("mongosh", cmd);
	proxy_stop(p);
	h_ferret_stop(&fe);
}

/* A reply far larger than the socket buffers to a client that reads late:
 * the tail of the ciphertext must still be sent once the socket drains. */
Test(tls, large_reply_to_slow_reader, .timeout = 90)
{
	struct proxy *p = proxy_tls("requireTLS", false, cf("server.pem"), cf("server.key"), NULL);
	char opts[600], uri[800], coll[64], json[300];
	size_t big = 7 * 1024 * 1024, len = 0;
	char *s = malloc(big + 1);
	mongoc_client_t *c;
	mongoc_collection_t *col;
	bson_error_t err;
	struct tcli t;
	struct raw_reply r;
	uint8_t *msg;

	snprintf(opts, sizeof(opts), "tls=true&tlsCAFile=%s", cf("ca.pem"));
	snprintf(uri, sizeof(uri), "mongodb://localhost:%d/?%s", p->port, opts);
	c = h_client_uri(uri, "tls-big");
	h_unique(coll, sizeof(coll), "big");
	col = mongoc_client_get_collection(c, "tlsdb", coll);
	memset(s, 'y', big);
	s[big] = '\0';
	for (int i = 0; i < 2; i++) {
		bson_t doc = BSON_INITIALIZER;

		BSON_APPEND_INT32(&doc, "_id", i);
		BSON_APPEND_UTF8(&doc, "s", s);
		cr_assert(mongoc_collection_insert_one(col, &doc, NULL, NULL, &err), "insert: %s",
			  err.message);
		bson_destroy(&doc);
	}
	cr_assert(tcli_open(&t, p, NULL));
	snprintf(json, sizeof(json),
		 "{\"find\": \"%s\", \"filter\": {}, \"batchSize\": 2, \"$db\": \"tlsdb\"}", coll);
	{
		bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &err);
		struct h_buf b;

		hb_init(&b);
		h_build_msg(&b, 77, 0, cmd);
		cr_assert(tcli_write(&t, b.data, b.len));
		hb_free(&b);
		bson_destroy(cmd);
	}
	/* Read late and with pauses: the proxy's socket fills again and again,
	 * and its last ciphertext waits for a writable event. */
	h_sleep_ms(500);
	msg = tcli_recv_slowly(&t, &len);
	cr_assert(msg != NULL, "the reply never completed (stalled TLS output?)");
	cr_assert(raw_parse_reply(msg, len, &r) && r.have_doc);
	cr_assert_gt(len, 2 * big, "reply of %zu bytes", len);
	cr_assert(h_get_bool(&r.doc, "ok"), "reply not ok");
	free(msg);
	tcli_close(&t);
	free(s);
	mongoc_collection_destroy(col);
	mongoc_client_destroy(c);
	proxy_stop(p);
}
