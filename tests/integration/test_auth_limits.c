/*
 * test_auth_limits.c — what clients that never log in may cost (issue 20,
 * items 1 and 6), against the real proxy with auth_mode = scram and
 * auth_query = on: FerretDB with auth (each test starts its own through
 * scripts/backend.sh start ferretdb-auth DIR) and mockupdb
 * (mock_backend.py: a usersInfo for a user named "held..." is never
 * answered), driven by raw sockets and libmongoc.
 *
 * Asserts: 4 connections flooding hellos with saslSupportedMechs and
 * speculativeAuthenticate for random users for 3 s send at most 2 usersInfo
 * lookups each (counters from mongoplexStats), a logged-in client's
 * insert/find succeed all along, and the proxy's log lines about it stay
 * bounded (rate-limited); lookups in flight stay at auth_query_max_inflight,
 * the others wait, and the cache's auth_cache_max_entries holds with every
 * entry a pending lookup (new ones refused with 18, logged); logins parked
 * after saslStart are closed after auth_timeout_ms (a hello-only
 * monitoring connection stays, a silent one is closed), max_unauth_conn
 * refuses the one beyond it with 462 while a logged-in client is served,
 * and a new client logs in afterwards. Figures with --verbose.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "harness_auth.h"
#include "pool/scram.h"

#define BE_USER "mpadmin"
#define BE_PASS "Be-pw-7731"

/* FerretDB with auth, carol created on it, a proxy in front. */
struct env {
	struct h_ferret fe;
	struct proxy *p;
	char db[64];
};

static mongoc_client_t *admin_client(struct env *e)
{
	char uri[300];

	snprintf(uri, sizeof(uri),
		 "mongodb://" BE_USER ":" BE_PASS
		 "@%s:%d/?authSource=admin&serverSelectionTimeoutMS=5000",
		 e->fe.host, e->fe.port);
	return h_client_uri(uri, "authlim-admin");
}

static void env_start(struct env *e, const char *more)
{
	const char *const env[] = {"MONGOPLEX_FERRETDB_USER=" BE_USER,
				   "MONGOPLEX_FERRETDB_PASSWORD=" BE_PASS, NULL};
	char extra[2048];
	mongoc_client_t *a;
	bson_t reply;
	bson_error_t err;

	memset(e, 0, sizeof(*e));
	h_unique(e->db, sizeof(e->db), "authlim");
	h_ferret_start(&e->fe, "ferretdb-auth", NULL, env);
	a = admin_client(e);
	cr_assert(h_cmd_json(a, "app",
			     "{\"createUser\": \"carol\", \"pwd\": \"carol-Pw3\", \"roles\": []}",
			     &reply, &err),
		  "createUser: %s", err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(a);
	snprintf(extra, sizeof(extra),
		 "backend_uri = mongodb://" BE_USER ":" BE_PASS "@%s:%d/\n"
		 "auth_mode = scram\nauth_query = on\nauth_pool_mode = shared\n"
		 "auth_stats_unauthenticated = on\n%s",
		 e->fe.host, e->fe.port, more ? more : "");
	e->p = proxy_start(extra);
}

static void env_stop(struct env *e)
{
	if (e->p != NULL)
		proxy_stop(e->p);
	h_ferret_stop(&e->fe);
}

static mongoc_client_t *carol_client(struct env *e)
{
	char uri[300];

	snprintf(uri, sizeof(uri),
		 "mongodb://carol:carol-Pw3@127.0.0.1:%d/?authSource=app"
		 "&authMechanism=SCRAM-SHA-256&serverSelectionTimeoutMS=5000",
		 e->p->port);
	return h_client_uri(uri, "authlim-carol");
}

/* A client-first message of user (fixed nonce). */
static void append_payload(bson_t *doc, const char *user)
{
	char payload[160];

	snprintf(payload, sizeof(payload), "n,,n=%s,r=abcdefghijklmnopqrstuvwx", user);
	bson_append_binary(doc, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
			   (uint32_t)strlen(payload));
}

/* A driver's first hello for app.user: saslSupportedMechs and a speculative saslStart. */
static void hello_for(bson_t *cmd, const char *user)
{
	char name[128];
	bson_t spec;

	snprintf(name, sizeof(name), "app.%s", user);
	bson_init(cmd);
	BSON_APPEND_INT32(cmd, "hello", 1);
	BSON_APPEND_UTF8(cmd, "saslSupportedMechs", name);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "speculativeAuthenticate", &spec);
	BSON_APPEND_INT32(&spec, "saslStart", 1);
	BSON_APPEND_UTF8(&spec, "mechanism", "SCRAM-SHA-256");
	append_payload(&spec, user);
	BSON_APPEND_UTF8(&spec, "db", "app");
	bson_append_document_end(cmd, &spec);
	BSON_APPEND_UTF8(cmd, "$db", "admin");
}

static void sasl_start_cmd(bson_t *cmd, const char *user)
{
	bson_init(cmd);
	BSON_APPEND_INT32(cmd, "saslStart", 1);
	BSON_APPEND_UTF8(cmd, "mechanism", "SCRAM-SHA-256");
	append_payload(cmd, user);
	BSON_APPEND_UTF8(cmd, "$db", "app");
}

/* Send saslStart for user on fd without waiting for its reply. */
static void send_sasl_start(int fd, int32_t rid, const char *user)
{
	struct h_buf b;
	bson_t cmd;

	sasl_start_cmd(&cmd, user);
	hb_init(&b);
	h_build_msg(&b, rid, 0, &cmd);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
	bson_destroy(&cmd);
}

/* The code of the reply on fd (0: ok), -1 when none came within timeout_ms. */
static int recv_code(int fd, int timeout_ms)
{
	uint8_t *msg;
	size_t len;
	struct raw_reply r;
	int code = -1;

	if (raw_recv_msg(fd, &msg, &len, timeout_ms) != RAW_OK)
		return -1;
	if (raw_parse_reply(msg, len, &r))
		code = h_get_bool(&r.doc, "ok") ? 0 : (int)h_get_int(&r.doc, "code", -2);
	free(msg);
	return code;
}

static int raw_code(int fd, const char *json, const char *db)
{
	bson_t *cmd, reply;
	bson_error_t err;
	int code = -1;

	cmd = bson_new_from_json((const uint8_t *)json, -1, &err);
	cr_assert(cmd != NULL, "%s", err.message);
	BSON_APPEND_UTF8(cmd, "$db", db);
	if (raw_command(fd, 900, cmd, &reply, 10000))
		code = h_get_bool(&reply, "ok") ? 0 : (int)h_get_int(&reply, "code", -2);
	bson_destroy(&reply);
	bson_destroy(cmd);
	return code;
}

/* Lines of the proxy's log that contain any of the needles. */
static int log_lines_with(struct proxy *p, const char *const *needles)
{
	char *log = proxy_log(p), *line, *save = NULL;
	int n = 0;

	for (line = strtok_r(log, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
		for (const char *const *k = needles; *k != NULL; k++)
			if (strstr(line, *k) != NULL) {
				n++;
				break;
			}
	free(log);
	return n;
}

/* The logged-in client's write and read while the flood runs. */
static bool carol_round(mongoc_client_t *c, const char *db, int i, char *err, size_t errlen)
{
	char json[160];
	bson_t reply;
	bson_error_t e;
	bool ok;

	snprintf(json, sizeof(json), "{\"insert\": \"c\", \"documents\": [{\"_id\": %d}]}", i);
	ok = h_cmd_json(c, db, json, &reply, &e);
	bson_destroy(&reply);
	if (ok) {
		snprintf(json, sizeof(json), "{\"find\": \"c\", \"filter\": {\"_id\": %d}}", i);
		ok = h_cmd_json(c, db, json, &reply, &e) &&
		     h_get_int(&reply, "cursor.firstBatch.0._id", -1) == i;
		bson_destroy(&reply);
	}
	if (!ok && err[0] == '\0')
		snprintf(err, errlen, "round %d: %s", i, e.message);
	return ok;
}

Test(auth_limits, hello_flood_with_random_users_stays_bounded, .timeout = 120)
{
	enum { N_CONN = 4, FLOOD_MS = 3000 };
	static const char *const about[] = {"auth_query", "login", "speculative", NULL};
	struct env e;
	mongoc_client_t *carol;
	int fds[N_CONN], alive = N_CONN, rounds = 0, finds_ok = 0, finds = 0, lines;
	int64_t hellos = 0, t0, lookups, refused, entries;
	bson_t st;
	char err[300] = "", user[64];

	/* Only settings main has too: the same test shows main's figures. */
	env_start(&e, "queue_timeout_ms = 5000\n");
	carol = carol_client(&e);
	cr_assert(carol_round(carol, e.db, -1, err, sizeof(err)), "carol before: %s", err);
	for (int i = 0; i < N_CONN; i++)
		cr_assert((fds[i] = raw_connect(e.p)) >= 0);
	t0 = h_now_ms();
	while (alive > 0 && h_now_ms() - t0 < FLOOD_MS) {
		for (int i = 0; i < N_CONN; i++) {
			bson_t cmd, reply;

			if (fds[i] < 0)
				continue;
			h_unique(user, sizeof(user), "r");
			hello_for(&cmd, user);
			if (!raw_command(fds[i], 1000 + (int32_t)hellos, &cmd, &reply, 10000)) {
				close(fds[i]); /* closed by the proxy: not replaced */
				fds[i] = -1;
				alive--;
			}
			hellos++;
			bson_destroy(&cmd);
			bson_destroy(&reply);
		}
		if (++rounds % 50 == 0) {
			finds++;
			finds_ok += carol_round(carol, e.db, rounds, err, sizeof(err));
		}
	}
	finds++;
	finds_ok += carol_round(carol, e.db, 0, err, sizeof(err));
	proxy_stats(e.p, &st);
	lookups = h_counter(&st, "auth_query_lookups");
	refused = h_get_int(&st, "counters.auth_query_refused", -1); /* main has none */
	entries = h_get_int(&st, "gauges.auth_query_cache_entries", -1);
	bson_destroy(&st);
	lines = log_lines_with(e.p, about);
	cr_log_info("hello flood: %d connections, %" PRId64 " hellos in %d ms; usersInfo lookups "
		    "sent %" PRId64 ", refused %" PRId64 ", cache entries %" PRId64 "; %d log "
		    "lines about logins/auth_query; carol's insert+find %d of %d ok%s%s",
		    N_CONN, hellos, FLOOD_MS, lookups, refused, entries, lines, finds_ok, finds,
		    err[0] ? ", first error: " : "", err);
	cr_assert_gt(hellos, 4 * N_CONN, "the flood did not run (%" PRId64 " hellos)", hellos);
	cr_assert_leq(lookups, 2 * N_CONN + 1,
		      "%" PRId64 " usersInfo lookups for %" PRId64 " hellos from %d connections",
		      lookups, hellos, N_CONN);
	cr_assert_eq(finds_ok, finds, "the logged-in client was not served: %s", err);
	cr_assert_leq(lines, 60, "%d log lines for the flood", lines);
	cr_assert_geq(refused, 1, "no lookup was refused");
	cr_assert_leq(entries, lookups, "cache entries without a lookup");
	for (int i = 0; i < N_CONN; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	mongoc_client_destroy(carol);
	env_stop(&e);
}

/* mock_backend.py as the backend, held lookups: the bounds count pending ones. */
static struct proxy *mock_proxy(FILE **mock, char *dir, const char *more)
{
	char extra[1024];
	int port;

	port = h_mock_backend_start(dir, mock);
	snprintf(extra, sizeof(extra),
		 "backend_uri = mongodb://127.0.0.1:%d/\nauth_mode = scram\nauth_query = on\n"
		 "auth_pool_mode = shared\nauth_stats_unauthenticated = on\n%s",
		 port, more);
	return proxy_start(extra);
}

static void mock_stop(struct proxy *p, FILE *mock, const char *dir)
{
	char cmd[300];

	proxy_stop(p);
	pclose(mock);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static int64_t gauge(struct proxy *p, const char *name)
{
	bson_t st;
	char path[96];
	int64_t v;

	proxy_stats(p, &st);
	snprintf(path, sizeof(path), "gauges.%s", name);
	v = h_get_int(&st, path, -1);
	bson_destroy(&st);
	cr_assert_geq(v, 0, "no gauge %s", name);
	return v;
}

/* Poll a gauge until it is `want` (bounded: 10 s). */
static bool wait_gauge(struct proxy *p, const char *name, int64_t want)
{
	for (int i = 0; i < 200; i++) {
		if (gauge(p, name) == want)
			return true;
		h_sleep_ms(50);
	}
	return false;
}

Test(auth_limits, pending_lookups_bounded_in_flight_and_in_the_cache, .timeout = 60)
{
	char dir[] = "/tmp/mongoplex-authlim-XXXXXX", user[32];
	struct proxy *p;
	FILE *mock;
	int fds[5];

	p = mock_proxy(&mock, dir,
		       "auth_query_max_inflight = 1\nauth_cache_max_entries = 3\n"
		       "queue_timeout_ms = 600000\nauth_max_failures = 0\n");
	/* held0 is sent and never answered; held1, held2 wait for its slot;
	 * held3, held4 find the cache full of pending lookups: 18 at once. */
	for (int i = 0; i < 5; i++) {
		cr_assert((fds[i] = raw_connect(p)) >= 0);
		snprintf(user, sizeof(user), "held%d", i);
		send_sasl_start(fds[i], 100 + i, user);
		if (i < 3) /* one at a time: the order decides who waits */
			cr_assert(wait_gauge(p, "auth_query_cache_entries", i + 1),
				  "held%d: no cache entry", i);
		else
			cr_assert_eq(recv_code(fds[i], 10000), 18, "held%d", i);
	}
	cr_assert(
	    log_wait(p, "auth_cache_max_entries reached, all of them lookups in progress", 5000),
	    "%s", proxy_log_tail(p, 2000));
	cr_assert_eq(proxy_counter(p, "auth_query_lookups"), 1, "sent beyond the slot");
	cr_assert_eq(proxy_counter(p, "auth_query_waited"), 2);
	cr_assert_eq(proxy_counter(p, "auth_query_refused"), 2);
	cr_assert_eq(gauge(p, "auth_query_inflight"), 1);
	cr_assert_eq(gauge(p, "auth_query_cache_entries"), 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(recv_code(fds[i], 200), -1, "held%d was answered", i);
	/* The waiters of held1 and held2 leave: their lookups are never sent,
	 * and their entries make room for a new one (which waits in turn). */
	close(fds[1]);
	close(fds[2]);
	cr_assert(wait_gauge(p, "clients", 4), "closed clients still counted"); /* 3 + stats */
	send_sasl_start(fds[3], 200, "held5");
	cr_assert_eq(recv_code(fds[3], 300), -1, "held5 did not wait for the slot");
	cr_assert_eq(proxy_counter(p, "auth_query_refused"), 2);
	cr_assert_eq(proxy_counter(p, "auth_query_lookups"), 1);
	cr_assert_leq(gauge(p, "auth_query_cache_entries"), 3);
	close(fds[0]);
	close(fds[3]);
	close(fds[4]);
	mock_stop(p, mock, dir);
}

Test(auth_limits, half_open_logins_time_out_and_unauth_conn_is_capped, .timeout = 120)
{
	enum { PARKED = 5 };
	struct env e;
	mongoc_client_t *late;
	bson_t reply;
	bson_error_t err;
	int a, monitor, silent, parked[PARKED], extra, code;
	int64_t t0;
	FILE *f;

	/* auth_timeout_ms is lowered by a reload once the cap is checked. */
	env_start(&e, "max_client_conn = 12\nmax_unauth_conn = 7\nauth_timeout_ms = 600000\n");
	/* A logged-in client, then 7 connections not logged in: the cap. */
	a = raw_connect(e.p);
	cr_assert_eq(h_raw_scram_login(a, SCRAM_SHA_256, "carol", "carol-Pw3", "app", true), 0);
	monitor = raw_connect(e.p);
	cr_assert_eq(raw_code(monitor, "{\"hello\": 1}", "admin"), 0);
	silent = raw_connect(e.p);
	for (int i = 0; i < PARKED; i++) {
		parked[i] = raw_connect(e.p);
		send_sasl_start(parked[i], 300 + i, "carol");
		cr_assert_eq(recv_code(parked[i], 10000), 0, "parked %d: saslStart", i);
	}
	/* The 8th connection not logged in is refused; the logged-in one is served. */
	extra = raw_connect(e.p);
	code = raw_code(extra, "{\"hello\": 1}", "admin");
	cr_assert_eq(code, 462, "the connection beyond max_unauth_conn got %d", code);
	cr_assert(raw_wait_closed(extra, 10000), "the refused connection stays open");
	close(extra);
	cr_assert(log_wait(e.p, "over max_unauth_conn (7), will refuse", 5000));
	cr_assert_eq(raw_code(a, "{\"find\": \"c\"}", e.db), 0, "the logged-in client lost out");
	{ /* through the logged-in client: an 8th one not logged in would be refused */
		bson_t cmd = BSON_INITIALIZER, st;

		BSON_APPEND_INT32(&cmd, "mongoplexStats", 1);
		BSON_APPEND_UTF8(&cmd, "$db", "admin");
		cr_assert(raw_command(a, 901, &cmd, &st, 10000));
		cr_assert_eq(h_get_int(&st, "gauges.clients_unauthenticated", -1), 7);
		bson_destroy(&st);
		bson_destroy(&cmd);
	}
	f = fopen(e.p->cfg_path, "a");
	cr_assert(f != NULL);
	fputs("auth_timeout_ms = 1500\n", f);
	fclose(f);
	t0 = h_now_ms();
	cr_assert(kill(e.p->pid, SIGHUP) == 0);
	cr_assert(log_wait(e.p, "reloaded", 10000), "no reload");
	/* auth_timeout_ms: the parked logins and the silent one are closed; the
	 * hello-only connection (a driver's monitor) stays. */
	for (int i = 0; i < PARKED; i++) {
		cr_assert(raw_wait_closed(parked[i], 20000), "parked login %d still open", i);
		close(parked[i]);
	}
	cr_assert(raw_wait_closed(silent, 20000), "the silent connection is still open");
	close(silent);
	cr_log_info("half-open logins: closed %" PRId64 " ms after auth_timeout_ms = 1500 was "
		    "loaded",
		    h_now_ms() - t0);
	cr_assert(log_contains(e.p, "login not finished within auth_timeout_ms (1500 ms)"));
	cr_assert(log_contains(e.p, "neither a hello nor a login within auth_timeout_ms"));
	cr_assert_eq(proxy_counter(e.p, "clients_auth_timeout"), PARKED + 1);
	cr_assert_eq(proxy_counter(e.p, "clients_refused_unauth"), 1);
	cr_assert_eq(raw_code(monitor, "{\"hello\": 1}", "admin"), 0, "the monitor was closed");
	/* A new client logs in. */
	late = carol_client(&e);
	cr_assert(h_cmd_json(late, e.db, "{\"find\": \"c\"}", &reply, &err), "late login: %s",
		  err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(late);
	close(monitor);
	close(a);
	env_stop(&e);
}
