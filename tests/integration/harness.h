/*
 * harness.h — integration-test harness: the real mongoplex binary in front of
 * the real backend named by MONGOPLEX_TEST_URI (started by scripts/test.sh),
 * driven by libmongoc and by raw wire-protocol sockets.
 *
 *   proxy_start(extra)  fork/exec mongoplex with a generated INI file (extra
 *                       settings appended), stderr to DIR/proxy.log, wait for
 *                       "listening on HOST:PORT" and a successful connect
 *   proxy_stop(p)       SIGINT, waitpid, assert exit status 0 (so sanitizer
 *                       findings in the proxy fail the test)
 *
 * Every helper that may fail the test does so from the calling thread, which
 * must be the test's main thread (criterion assertions are not thread-safe);
 * helpers meant for worker threads return false instead.
 */
#pragma once

#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define H_WIRE_OP_REPLY	     1
#define H_WIRE_OP_INSERT     2002
#define H_WIRE_OP_QUERY	     2004
#define H_WIRE_OP_GET_MORE   2005
#define H_WIRE_OP_COMPRESSED 2012
#define H_WIRE_OP_MSG	     2013

#define H_MSG_CHECKSUM	   (1u << 0)
#define H_MSG_MORE_TO_COME (1u << 1)

/* ------------------------------------------------------------ environment */

/* MONGOPLEX_TEST_URI; fails the test when it is not set. */
/* The mongoplex binary the tests start: $MONGOPLEX_BIN, else the one built
 * with the tests (MP_BINARY). */
const char *h_proxy_binary(void);
const char *h_backend_uri(void);
/* MONGOPLEX_TEST_BACKEND: "mongo-java-server", "ferretdb" or "external". */
const char *h_backend_name(void);
bool h_backend_is(const char *name);
/* The URI of the tests' own direct connections to the backend (raw sockets,
 * h_backend_client, direct pymongo probes): MONGOPLEX_TEST_DIRECT_URI when set,
 * else MONGOPLEX_TEST_URI. scripts/test.sh's sha1-tls FerretDB pass sets it to
 * the plain port of the SAME FerretDB (with the same credentials) while the
 * proxy's backend_uri (MONGOPLEX_TEST_URI) is its TLS port: the raw sockets
 * do not speak TLS, and what the suite compares is the proxy against the
 * server, not the tests' own transport. */
const char *h_direct_uri(void);
/* The direct URI's first host (for raw sockets straight to the backend). */
void h_backend_hostport(char *host, size_t hostlen, int *port);
/* The first host of h_backend_uri(): the server the proxy's backend_uri
 * names (with the sha1-tls pass the TLS port, not the direct one). */
void h_proxy_backend_hostport(char *host, size_t hostlen, int *port);

/* A Python with pymongo 4.x: $MONGOPLEX_PYMONGO4_PYTHON, else
 * $MONGOPLEX_CACHE/pymongo4-venv/bin/python, else <repo>/.cache/... (made by
 * scripts/install-deps.sh test); asserts it is executable (none is a
 * failure, not a skip). */
const char *h_pymongo4_python(void);

/* The smoke suite's node_modules (pinned Node driver and mongosh):
 * $MONGOPLEX_NODE_MODULES, else tests/drivers/node_modules, installed there
 * with npm ci (under a lock) when missing; asserts it worked. */
const char *h_node_modules(void);
/* A free loopback TCP port (bound, read, closed). */
int h_free_port(void);
/* GET /metrics from 127.0.0.1:port (the proxy's metrics_listen): the whole
 * HTTP response, NUL-terminated (at most 1 MB); free() it. */
char *h_get_metrics(int port);

/* A name unique to this test process and call: "<prefix>_<pid>_<random>_<n>". */
void h_unique(char *buf, size_t len, const char *prefix);

/* Raise RLIMIT_NOFILE to at least `want` (soft, and hard when allowed);
 * returns the resulting soft limit. */
long h_raise_nofile(long want);

/* Milliseconds on a monotonic clock. */
int64_t h_now_ms(void);
void h_sleep_ms(int ms);

/* ------------------------------------------------------------ the proxy */

struct proxy {
	pid_t pid;
	int port;
	bool exited;
	int wait_status;
	char dir[256];
	char log_path[300];
	char cfg_path[300];
	char uri[160];
	char admin_sock[108]; /* proxy_start_admin: its unix socket, else "" */
};

/* Start the proxy; `extra` holds INI lines ("key = value\n") that override
 * the defaults (listen on 127.0.0.1 port 0, backend = MONGOPLEX_TEST_URI,
 * pool_size = 4, log_level = info). May be NULL. */
struct proxy *proxy_start(const char *extra);
/* SIGINT, wait, assert exit 0; frees p and (on success) its directory. */
void proxy_stop(struct proxy *p);
/* A proxy the test killed and reaped itself (p->exited): forgets it and
 * frees it, without proxy_stop's exit-status check. */
void proxy_discard(struct proxy *p);
/* Still running? (reaps it if it died) */
bool proxy_alive(struct proxy *p);
/* Fail the test, with the exit status and the log tail, if it is not. */
void proxy_assert_alive(struct proxy *p, const char *when);
/* Whole log / its last max_bytes, malloc'd (never NULL). */
char *proxy_log(struct proxy *p);
char *proxy_log_tail(struct proxy *p, size_t max_bytes);
bool log_contains(struct proxy *p, const char *substring);
/* Poll the log for substring for up to timeout_ms. */
bool log_wait(struct proxy *p, const char *substring, int timeout_ms);
/* A log line about the client on socket fd (its "127.0.0.1:LOCALPORT: "
 * prefix) that contains substring; polls up to timeout_ms. */
bool log_wait_client(struct proxy *p, int fd, const char *substring, int timeout_ms);
/* VmRSS of the proxy in kB (-1 if unreadable). */
long proxy_rss_kb(struct proxy *p);
/* Any kB field of the proxy's /proc/PID/status (VmHWM, VmRSS, ...); -1 if unreadable. */
long proxy_status_kb(struct proxy *p, const char *field);

/* ------------------------------------------------------------ libmongoc */

/* A client with a short serverSelectionTimeoutMS and the given appname. */
mongoc_client_t *h_client_uri(const char *uri, const char *appname);
mongoc_client_t *h_proxy_client(struct proxy *p, const char *appname);
/* A proxy with a unix socket of its own (p->admin_sock), whose owner (this
 * test, the proxy's own user) may run the admin console's commands with
 * auth_mode = none; `extra` as for proxy_start. */
struct proxy *proxy_start_admin(const char *extra);
/* A libmongoc client on the unix socket at path / on p->admin_sock. */
mongoc_client_t *h_socket_client(const char *path, const char *appname);
mongoc_client_t *h_proxy_admin_client(struct proxy *p, const char *appname);
mongoc_client_t *h_backend_client(const char *appname);

/* Run a command; *reply is always initialised (the server's reply, or empty). */
bool h_cmd(mongoc_client_t *c, const char *db, const bson_t *cmd, bson_t *reply, bson_error_t *err);
/* Same, command given as relaxed extended JSON. */
bool h_cmd_json(mongoc_client_t *c, const char *db, const char *json, bson_t *reply,
		bson_error_t *err);
/* mongoplexStats through a client (asserts success). */
void h_stats(mongoc_client_t *c, bson_t *out);
/* mongoplexStats through a fresh short-lived client. */
void proxy_stats(struct proxy *p, bson_t *out);
/* counters.<name> of a mongoplexStats reply (asserts it is there). */
int64_t h_counter(const bson_t *stats, const char *name);
/* counters.<name> of the proxy's mongoplexStats now (proxy_stats + h_counter). */
int64_t proxy_counter(struct proxy *p, const char *name);

/* Number at a dotted path ("counters.clients_accepted", "pools.0.idle");
 * `dflt` when missing or not a number. */
int64_t h_get_int(const bson_t *doc, const char *path, int64_t dflt);
/* Truthiness (bool or number) at a dotted path; false when missing. */
bool h_get_bool(const bson_t *doc, const char *path);
/* UTF-8 at a dotted path, or NULL. */
const char *h_get_str(const bson_t *doc, const char *path);
/* Copy of doc without the fields that legitimately differ between two
 * servers' or two runs' replies ($clusterTime, operationTime, ...). */
void h_strip_volatile(const bson_t *doc, bson_t *out);
/* Compare two replies after h_strip_volatile; on mismatch *why is a
 * malloc'd description (free with bson_free). */
bool h_same_reply(const bson_t *a, const bson_t *b, char **why);
/* All documents of db.coll sorted by _id, as an array document
 * {"0": doc, "1": doc, ...}; returns the count, -1 on error. */
int64_t h_all_docs(mongoc_client_t *c, const char *db, const char *coll, bson_t *out);
/* Does a reply carry this error label? */
bool h_has_label(const bson_t *reply, const char *label);
/* Drop a database (ignores errors). */
void h_drop_db(mongoc_client_t *c, const char *db);

/* ------------------------------------------------------------ raw wire */

/* A growable byte buffer for building messages. */
struct h_buf {
	uint8_t *data;
	size_t len, cap;
};

void hb_init(struct h_buf *b);
void hb_free(struct h_buf *b);
void hb_add(struct h_buf *b, const void *p, size_t n);
void hb_i32(struct h_buf *b, int32_t v);
void hb_i64(struct h_buf *b, int64_t v);
void hb_u8(struct h_buf *b, uint8_t v);
void hb_cstr(struct h_buf *b, const char *s);
void hb_doc(struct h_buf *b, const bson_t *doc);
/* Header with messageLength 0 (patched by hb_finish). */
void hb_header(struct h_buf *b, int32_t request_id, int32_t response_to, int32_t opcode);
/* Patch messageLength; with checksum, append the CRC-32C of the message. */
void hb_finish(struct h_buf *b, bool checksum);
/* Overwrite the int32 at offset. */
void hb_set_i32(struct h_buf *b, size_t off, int32_t v);

/* Whole messages. */
void h_build_msg(struct h_buf *b, int32_t request_id, uint32_t flags, const bson_t *body);
void h_build_query(struct h_buf *b, int32_t request_id, const char *ns, const bson_t *query);
uint32_t h_crc32c(const uint8_t *p, size_t n);

/* Sockets (blocking, CLOEXEC, TCP_NODELAY). -1 on failure. */
int raw_connect_to(const char *host, int port);
int raw_connect(struct proxy *p);
/* Straight to the test backend (h_direct_uri), logged in with its
 * credentials if it has any (harness_auth.c); asserts on failure. */
int raw_connect_backend(void);
bool raw_send(int fd, const void *data, size_t len);

enum raw_status { RAW_OK, RAW_EOF, RAW_TIMEOUT, RAW_ERROR };
/* Receive one whole message into *msg (malloc'd, free with free()). */
enum raw_status raw_recv_msg(int fd, uint8_t **msg, size_t *len, int timeout_ms);
/* Wait until the peer closes (EOF or reset), discarding input. */
bool raw_wait_closed(int fd, int timeout_ms);
const char *raw_status_name(enum raw_status s);

/* A parsed reply: header fields and a view of its (first) document. */
struct raw_reply {
	int32_t len, request_id, response_to, opcode;
	uint32_t flags;	    /* OP_MSG flagBits or OP_REPLY responseFlags */
	int32_t n_returned; /* OP_REPLY only */
	bool have_doc;
	bson_t doc; /* static view into the message bytes */
};
bool raw_parse_reply(const uint8_t *msg, size_t len, struct raw_reply *r);
/* Send cmd (must contain $db) as OP_MSG and receive its reply body into
 * *reply (a copy). false on timeout/close/garbage (*reply then empty). */
bool raw_command(int fd, int32_t request_id, const bson_t *cmd, bson_t *reply, int timeout_ms);
/* A {ping: 1} on fd answered ok: 1? */
bool raw_ping_ok(int fd, int timeout_ms);

/* A test that should run here but cannot (a limit it needs, a tool missing):
 * a failure with the reason, not a silent skip; a skip only when the user
 * opted out with MONGOPLEX_ALLOW_SKIPS=1 (docs/testing.md). */
#define h_cannot_run(...)                                                                          \
	do {                                                                                       \
		const char *h_allow_ = getenv("MONGOPLEX_ALLOW_SKIPS");                            \
		if (h_allow_ != NULL && strcmp(h_allow_, "1") == 0)                                \
			cr_skip_test(__VA_ARGS__);                                                 \
		else                                                                               \
			cr_assert_fail(__VA_ARGS__);                                               \
	} while (0)

/* Close every descriptor from lowfd up (in a forked child before exec). */
void h_close_fds_above(int lowfd);
/* Run argv[0] with argv (NULL-terminated), stdin /dev/null, stdout+stderr
 * captured into out (NUL-terminated, truncated at outlen); returns the wait
 * status, or -1 when it ran past timeout_ms and was killed. */
int h_run_capture(const char *const argv[], char *out, size_t outlen, int timeout_ms);
/* The same for a /bin/sh -c command line. */
int h_sh_capture(const char *cmd, char *out, size_t outlen, int timeout_ms);
/* tests/integration/mock_backend.py (mockupdb) started in the mkdtemp
 * template `dir` (filled in): its port (asserts it started within 20 s).
 * *mock is its stdin pipe: pclose() it to stop the server. */
int h_mock_backend_start(char *dir, FILE **mock);

/* ------------------------------------------------------------ FerretDB: shared or a test's own */

/* One FerretDB a test uses (harness_ferret.c). Rules: dir is the server's
 * directory (backend.sh's DIR: data, log, pid, uri); uri is the URI
 * backend.sh printed (for ferretdb-tls the TLS one), host/port its first
 * host, plain_uri the plain URI of ferretdb-tls ("" for the other kinds);
 * user/password the server's admin identity (from the URI; "" without
 * auth); scratch a directory of the test's own for its files (users files,
 * password files): never write into dir, which a shared server's other
 * tests use too. shared: h_ferret_shared returned the suite's server. */
struct h_ferret {
	char dir[256];
	char uri[900];
	char plain_uri[300];
	char host[64];
	int port;
	char user[64];
	char password[128];
	char scratch[256];
	bool shared;
};

/* scripts/backend.sh start KIND DIR with the environment entries in env
 * ("NAME=value", NULL-terminated, may be NULL: MONGOPLEX_FERRETDB_USER,
 * MONGOPLEX_TLS_CERT, ...). dir NULL: a new directory under TMPDIR. The test
 * FAILS with backend.sh's output when the server does not start. For a test
 * that needs a server of its own (a pristine or specially set up one, one it
 * restarts or kills, TLS with its own certificates, a replica set). */
void h_ferret_start(struct h_ferret *f, const char *kind, const char *dir, const char *const env[]);
/* The suite's shared FerretDB of `kind` ("ferretdb-auth", "ferretdb",
 * "ferretdb-rs"; not ferretdb-tls, whose certificates are a test's own):
 * with MONGOPLEX_SHARED_FERRETDB_DIR set (tests/scripts/run-integration.py
 * sets it for its criterion run and stops the servers afterwards), the one
 * server of that kind in DIR/KIND, started by the first test that asks (under
 * a lock; its admin identity MONGOPLEX_SHARED_FERRETDB_USER/_PASSWORD);
 * without it (the binary run by hand) a server of the test's own, as
 * h_ferret_start(f, kind, NULL, NULL). Tests sharing it run side by side:
 * every user, database and collection they create gets an h_unique() name,
 * and they leave its admin user alone. */
void h_ferret_shared(struct h_ferret *f, const char *kind);
/* A test's own FerretDB: backend.sh stop, keeping its directory and data
 * (h_ferret_restart starts it again on the same port). */
void h_ferret_halt(struct h_ferret *f);
/* A test's own FerretDB ("ferretdb" or "ferretdb-rs"): backend.sh restart (stopped, then
 * started again on the same port and data directory; its data survives);
 * fails the test when it does not come back on the same URI. */
void h_ferret_restart(struct h_ferret *f);
/* A test's own server: backend.sh stop, then remove the directory. The
 * shared one: left running, only f->scratch removed. Idempotent. */
void h_ferret_stop(struct h_ferret *f);
