/*
 * test_client_auth.c — client SCRAM authentication (auth_mode = scram)
 * against FerretDB with auth on (the suite run's shared one, h_ferret_shared
 * "ferretdb-auth"; run by hand, each test starts its own; a test FAILS if it
 * cannot) and the real proxy of each test, whose users file (in the test's
 * scratch directory) is written by `mongoplex --scram-secret`. On the shared
 * server every test's database and backend users have h_unique() names; the
 * proxy logs in as the server's admin identity, which no test changes.
 *
 * Asserts: libmongoc logs in with SCRAM-SHA-256 and SCRAM-SHA-1 (speculative,
 * in the hello) and a hand-driven saslStart/saslContinue conversation (not
 * speculative, with and without skipEmptyExchange; the server signature is
 * verified) runs CRUD; connectionStatus names the client's own user; logout
 * ends it; pymongo 3.11 and 4.x log in (SHA-256, SHA-1, negotiated);
 * wrong password / unknown user -> 18 (logged with peer and user, counted);
 * commands before login -> 13 (hello, ping, buildInfo allowed);
 * auth_max_failures closes the connection; a user added to the file logs in
 * after SIGHUP and a removed one no longer does; a reload with a valid users
 * file and a missing backend_password_file applies nothing (old users stay,
 * "reload rejected"), the next valid one applies both; --test-config warns about
 * auth_mode = none on a non-loopback listen_addr and refuses a bad users file;
 * 1,000 wrong passwords leave another client's pings unaffected. Figures
 * (logins/s, the other client's p50 during logins) with --verbose.
 * auth_query: users created on the backend after the proxy started log in
 * (SHA-256, SHA-1, negotiated; one lookup, then the cache; two concurrent
 * saslStarts share one lookup); the users file comes first; unknown -> 18;
 * a password changed on the backend: the new one fails once (refresh), then
 * the old one is refused and the new one accepted; a dropped user -> 18
 * after the refresh; an identity without viewUser (mockupdb answering code
 * 13) and a lookup never answered (queue_timeout_ms) -> logged error + 18.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "harness_auth.h"
#include "pool/scram.h"

#define PYSCRIPT MP_SOURCE_DIR "/tests/integration/client_auth_pymongo.py"

/* FerretDB with auth and a proxy in front, for one test. */
struct env {
	struct h_ferret fe; /* its scratch directory holds the users file */
	char users[300];
	char db[64]; /* the test's own database for CRUD */
	struct proxy *p;
};

static void sh(const char *cmd, char *out, size_t outlen, int *status)
{
	*status = h_sh_capture(cmd, out, outlen, 120000);
}

/* Append the --scram-secret line of db.user/password to the users file. */
static void add_user(struct env *e, const char *dbuser, const char *pw)
{
	char cmd[1200], out[2048];
	int st;

	/* stderr stays out of the users file: libmongoc may warn there (e.g. "Falling back to
	 * malloc for counters" where /dev/shm is unusable), and only stdout is the line. */
	snprintf(cmd, sizeof(cmd),
		 "printf '%%s\\n' '%s' | %s --scram-secret %s >> %s 2>%s/scram-secret.err"
		 " || { cat %s/scram-secret.err; exit 1; }",
		 pw, h_proxy_binary(), dbuser, e->users, e->fe.scratch, e->fe.scratch);
	sh(cmd, out, sizeof(out), &st);
	cr_assert_eq(st, 0, "--scram-secret %s failed: %s", dbuser, out);
	chmod(e->users, 0600);
}

/* The shared FerretDB (or the test's own), the users file path, the database. */
static void env_backend(struct env *e)
{
	memset(e, 0, sizeof(*e));
	h_ferret_shared(&e->fe, "ferretdb-auth");
	snprintf(e->users, sizeof(e->users), "%s/users", e->fe.scratch);
	h_unique(e->db, sizeof(e->db), "cauth");
}

static void env_start(struct env *e, const char *more)
{
	char extra[2048];

	env_backend(e);
	add_user(e, "admin.alice", "alice-Pw1");
	add_user(e, "app.bob", "bob-Pw2");
	snprintf(extra, sizeof(extra),
		 "backend_uri = mongodb://%s:%s@%s:%d/\n"
		 "auth_mode = scram\nauth_users_file = %s\nauth_stats_unauthenticated = on\n"
		 "auth_pool_mode = shared\n%s", /* users-file users run as the proxy */
		 e->fe.user, e->fe.password, e->fe.host, e->fe.port, e->users, more ? more : "");
	e->p = proxy_start(extra);
}

static void env_stop(struct env *e)
{
	if (e->p != NULL)
		proxy_stop(e->p);
	h_ferret_stop(&e->fe);
}

static mongoc_client_t *login_client(struct env *e, const char *user, const char *pw,
				     const char *source, const char *mech)
{
	char uri[512];

	snprintf(uri, sizeof(uri),
		 "mongodb://%s:%s@127.0.0.1:%d/?authSource=%s%s%s&serverSelectionTimeoutMS=5000",
		 user, pw, e->p->port, source, mech ? "&authMechanism=" : "", mech ? mech : "");
	return h_client_uri(uri, "cauth");
}

/* Insert and find in the test's database (e->db). */
static void crud(struct env *e, mongoc_client_t *c, const char *coll)
{
	bson_t reply;
	bson_error_t err;
	char json[256];

	snprintf(json, sizeof(json), "{\"insert\": \"%s\", \"documents\": [{\"_id\": 7}]}", coll);
	cr_assert(h_cmd_json(c, e->db, json, &reply, &err), "insert: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "n", -1), 1);
	bson_destroy(&reply);
	snprintf(json, sizeof(json), "{\"find\": \"%s\", \"filter\": {\"_id\": 7}}", coll);
	cr_assert(h_cmd_json(c, e->db, json, &reply, &err), "find: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.0._id", -1), 7);
	bson_destroy(&reply);
}

Test(client_auth, libmongoc_logs_in_with_sha256_and_sha1, .timeout = 120)
{
	struct env e;
	const char *mechs[] = {"SCRAM-SHA-256", "SCRAM-SHA-1", NULL};
	char who[300];

	env_start(&e, NULL);
	for (size_t i = 0; i < 3; i++) {
		mongoc_client_t *c = login_client(&e, "alice", "alice-Pw1", "admin", mechs[i]);
		char coll[64];

		snprintf(coll, sizeof(coll), "lm%zu", i);
		crud(&e, c, coll);
		h_status_user(c, who, sizeof(who));
		cr_assert_str_eq(who, "admin.alice", "%s", mechs[i] ? mechs[i] : "negotiated");
		mongoc_client_destroy(c);
	}
	{
		mongoc_client_t *c = login_client(&e, "bob", "bob-Pw2", "app", "SCRAM-SHA-256");

		h_status_user(c, who, sizeof(who));
		cr_assert_str_eq(who, "app.bob");
		mongoc_client_destroy(c);
	}
	cr_assert_geq(proxy_counter(e.p, "client_auth_ok"), 4);
	cr_assert_geq(proxy_counter(e.p, "client_auth_speculative"), 4,
		      "libmongoc's logins should ride in the hello");
	cr_assert_eq(proxy_counter(e.p, "client_auth_failures"), 0);
	env_stop(&e);
}

/* A command on a raw socket: its code (0 when ok). */
static int raw_code(int fd, const char *json, const char *db)
{
	bson_error_t berr;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &berr), reply;
	int code;

	cr_assert(cmd != NULL, "%s", berr.message);
	BSON_APPEND_UTF8(cmd, "$db", db);
	cr_assert(raw_command(fd, 77, cmd, &reply, 10000), "%s: no reply", json);
	code = h_get_bool(&reply, "ok") ? 0 : (int)h_get_int(&reply, "code", -1);
	bson_destroy(&reply);
	bson_destroy(cmd);
	return code;
}

Test(client_auth, raw_conversations_gate_and_logout, .timeout = 120)
{
	struct env e;
	int fd;

	env_start(&e, NULL);
	fd = raw_connect(e.p);
	cr_assert(fd >= 0);
	/* Before login: the handshake and harmless commands only. */
	cr_assert_eq(raw_code(fd, "{\"hello\": 1}", "admin"), 0);
	cr_assert_eq(raw_code(fd, "{\"ping\": 1}", "admin"), 0);
	cr_assert_eq(raw_code(fd, "{\"buildInfo\": 1}", "admin"), 0);
	cr_assert_eq(raw_code(fd, "{\"find\": \"c\"}", e.db), 13);
	cr_assert_eq(raw_code(fd, "{\"insert\": \"c\", \"documents\": [{}]}", e.db), 13);
	cr_assert_eq(raw_code(fd, "{\"listDatabases\": 1}", "admin"), 13);
	/* Not speculative, both mechanisms, with and without the empty step. */
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "alice", "alice-Pw1", "admin", false), 0);
	cr_assert_eq(raw_code(fd, "{\"find\": \"c\"}", e.db), 0);
	cr_assert_eq(raw_code(fd, "{\"logout\": 1}", "admin"), 0);
	cr_assert_eq(raw_code(fd, "{\"find\": \"c\"}", e.db), 13, "find after logout");
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_1, "bob", "bob-Pw2", "app", true), 0);
	cr_assert_eq(raw_code(fd, "{\"find\": \"c\"}", e.db), 0);
	/* bob exists in app, not in admin. */
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_1, "bob", "bob-Pw2", "admin", true), 18);
	cr_assert_eq(
	    raw_code(fd, "{\"authenticate\": 1, \"mechanism\": \"MONGODB-X509\"}", "$external"),
	    18);
	cr_assert_eq(raw_code(fd,
			      "{\"saslStart\": 1, \"mechanism\": \"PLAIN\", \"payload\": "
			      "{\"$binary\": {\"base64\": \"AGEAYg==\", \"subType\": \"0\"}}}",
			      "admin"),
		     18);
	close(fd);
	env_stop(&e);
}

/* libmongoc reports a refused login as its own error, carrying the errmsg. */
static void assert_auth_failed(const bson_error_t *err)
{
	cr_assert(err->domain == MONGOC_ERROR_CLIENT &&
		      err->code == MONGOC_ERROR_CLIENT_AUTHENTICATE,
		  "%u.%u %s", err->domain, err->code, err->message);
	cr_assert(strstr(err->message, "mongoplex: Authentication failed.") != NULL, "%s",
		  err->message);
}

Test(client_auth, failures_are_refused_logged_counted_and_close, .timeout = 120)
{
	struct env e;
	mongoc_client_t *c;
	bson_t reply;
	bson_error_t err;
	int fd;
	char line[128];

	env_start(&e, "auth_max_failures = 3\n");
	/* libmongoc: a wrong password and an unknown user get code 18. */
	c = login_client(&e, "alice", "wrong-Pw", "admin", "SCRAM-SHA-256");
	cr_assert_not(h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err));
	assert_auth_failed(&err);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	c = login_client(&e, "nobody", "x-Pw", "admin", "SCRAM-SHA-1");
	cr_assert_not(h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err));
	assert_auth_failed(&err);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	cr_assert(log_wait(e.p, "login failed for user \"admin.alice\": wrong proof", 5000));
	cr_assert(log_wait(e.p, "login failed for user \"admin.nobody\": unknown user", 5000));
	cr_assert(log_contains(e.p, "127.0.0.1:"), "the peer address is logged");
	cr_assert(!log_contains(e.p, "wrong-Pw"), "a password reached the log");
	cr_assert_geq(proxy_counter(e.p, "client_auth_failures"), 2);
	/* Three in a row on one connection close it. */
	fd = raw_connect(e.p);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "alice", "nope", "admin", true),
			     18);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "alice", "alice-Pw1", "admin", true), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "alice", "nope", "admin", true),
			     18, "failure %d", i + 1);
	cr_assert(raw_wait_closed(fd, 5000), "the connection stays open after 3 failures");
	snprintf(line, sizeof(line), "closing after 3 failed logins in a row");
	cr_assert(log_wait(e.p, line, 5000));
	cr_assert_eq(proxy_counter(e.p, "client_auth_closed"), 1);
	close(fd);
	env_stop(&e);
}

Test(client_auth, pymongo_3_and_4_log_in, .timeout = 180)
{
	struct env e;
	char hostport[64], *out = calloc(1, 65536);
	const char *pythons[2] = {"/usr/bin/python3", h_pymongo4_python()};

	env_start(&e, NULL);
	snprintf(hostport, sizeof(hostport), "127.0.0.1:%d", e.p->port);
	for (int i = 0; i < 2; i++) {
		const char *const argv[] = {pythons[i], PYSCRIPT, hostport, "bob",
					    "bob-Pw2",	"app",	  NULL};
		int st = h_run_capture(argv, out, 65536, 120000);

		cr_log_info("%s %s:\n%s", pythons[i], PYSCRIPT, out);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "\nOK") != NULL,
			  "%s: status 0x%x:\n%s", pythons[i], st, out);
	}
	free(out);
	env_stop(&e);
}

/* Overwrite the users file with the --scram-secret line of one user. */
static void users_only(struct env *e, const char *dbuser, const char *pw)
{
	FILE *f = fopen(e->users, "w");

	cr_assert(f != NULL);
	fclose(f);
	add_user(e, dbuser, pw);
}

/* Log in on a fresh connection; the refusal code (0: logged in). */
static int fresh_login(struct env *e, const char *user, const char *pw, const char *db)
{
	int fd = raw_connect(e->p), code;

	code = h_raw_scram_login(fd, SCRAM_SHA_256, user, pw, db, true);
	close(fd);
	return code;
}

Test(client_auth, users_file_reloads_on_sighup, .timeout = 120)
{
	struct env e;
	int fd;
	FILE *f;

	env_start(&e, NULL);
	fd = raw_connect(e.p);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "carol", "carol-Pw3", "admin", true), 18);
	add_user(&e, "admin.carol", "carol-Pw3");
	cr_assert(kill(e.p->pid, SIGHUP) == 0);
	cr_assert(log_wait(e.p, "reload: 3 users from", 5000), "no reload of the users file");
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "carol", "carol-Pw3", "admin", true), 0);
	/* Only alice left: bob is gone after the next reload. */
	f = fopen(e.users, "r");
	{
		char line[2048], keep[2048] = "";

		while (fgets(line, sizeof(line), f) != NULL)
			if (strncmp(line, "admin.alice ", 12) == 0)
				snprintf(keep, sizeof(keep), "%s", line);
		fclose(f);
		f = fopen(e.users, "w");
		fputs(keep, f);
		fclose(f);
	}
	cr_assert(kill(e.p->pid, SIGHUP) == 0);
	cr_assert(log_wait(e.p, "reload: 1 users from", 5000));
	close(fd); /* logged in as carol: another user needs another connection */
	cr_assert_eq(fresh_login(&e, "bob", "bob-Pw2", "app"), 18);
	/* A group-writable file is refused and the old users stay. */
	chmod(e.users, 0660);
	cr_assert(kill(e.p->pid, SIGHUP) == 0);
	cr_assert(log_wait(e.p, "writable by group or others", 5000));
	cr_assert_eq(fresh_login(&e, "alice", "alice-Pw1", "admin"), 0);
	env_stop(&e);
}

/* Issue 20, item 3: a reload whose users file is valid but whose
 * backend_password_file is missing applies nothing (the old users stay in
 * force, "reload rejected" is logged); once the file is back, the next
 * reload applies both and the new user's CRUD runs on the backend. */
Test(client_auth, rejected_reload_keeps_the_old_users, .timeout = 120)
{
	struct env e;
	char extra[2048], pwfile[300], hidden[310];
	mongoc_client_t *c;
	FILE *f;

	env_backend(&e);
	snprintf(pwfile, sizeof(pwfile), "%s/backend-password", e.fe.scratch);
	snprintf(hidden, sizeof(hidden), "%s.away", pwfile);
	f = fopen(pwfile, "w");
	cr_assert(f != NULL);
	fprintf(f, "%s\n", e.fe.password);
	fclose(f);
	chmod(pwfile, 0600);
	users_only(&e, "admin.alice", "alice-Pw1");
	snprintf(extra, sizeof(extra),
		 "backend_uri = mongodb://%s@%s:%d/\nbackend_password_file = %s\n"
		 "auth_mode = scram\nauth_users_file = %s\nauth_pool_mode = shared\n",
		 e.fe.user, e.fe.host, e.fe.port, pwfile, e.users);
	e.p = proxy_start(extra);
	cr_assert_eq(fresh_login(&e, "alice", "alice-Pw1", "admin"), 0);

	users_only(&e, "admin.carol", "carol-Pw3"); /* valid */
	cr_assert(rename(pwfile, hidden) == 0);	    /* invalid: missing */
	cr_assert(kill(e.p->pid, SIGHUP) == 0);
	cr_assert(log_wait(e.p,
			   "reload rejected, keeping the current config: backend_password_file",
			   5000),
		  "the reload was not rejected naming the password file");
	cr_assert_eq(fresh_login(&e, "carol", "carol-Pw3", "admin"), 18,
		     "a user only in the rejected users file logged in");
	cr_assert_eq(fresh_login(&e, "alice", "alice-Pw1", "admin"), 0,
		     "a user only in the old users file no longer logs in");

	cr_assert(rename(hidden, pwfile) == 0);
	cr_assert(kill(e.p->pid, SIGHUP) == 0);
	cr_assert(log_wait(e.p, "reloaded ", 5000), "the valid reload was not applied");
	cr_assert_eq(fresh_login(&e, "carol", "carol-Pw3", "admin"), 0);
	cr_assert_eq(fresh_login(&e, "alice", "alice-Pw1", "admin"), 18);
	c = login_client(&e, "carol", "carol-Pw3", "admin", NULL);
	crud(&e, c, "reload_ok");
	mongoc_client_destroy(c);
	env_stop(&e);
}

static void test_config(const char *ini, char *out, size_t outlen, int *st)
{
	char dir[] = "/tmp/mp-cauthcfg-XXXXXX", path[300], cmd[800];
	FILE *f;

	cr_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/m.ini", dir);
	f = fopen(path, "w");
	fprintf(f, "[mongoplex]\n%s", ini);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "timeout 20 %s --test-config -c %s 2>&1; rc=$?; rm -rf %s; exit $rc",
		 h_proxy_binary(), path, dir);
	sh(cmd, out, outlen, st);
}

Test(client_auth, test_config_warns_and_checks_the_users_file, .timeout = 60)
{
	char out[2048];
	int st;

	test_config("listen_addr = 0.0.0.0\n", out, sizeof(out), &st);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert(strstr(out, "is not loopback and auth_mode = none") != NULL, "%s", out);
	test_config("listen_addr = 127.0.0.1\n", out, sizeof(out), &st);
	cr_assert(strstr(out, "warning") == NULL, "%s", out);
	test_config("auth_mode = scram\n", out, sizeof(out), &st);
	cr_assert_neq(st, 0);
	cr_assert(strstr(out, "auth_mode = scram needs auth_users_file") != NULL, "%s", out);
	test_config("auth_mode = scram\nauth_users_file = /nonexistent/users\n", out, sizeof(out),
		    &st);
	cr_assert_neq(st, 0);
	cr_assert(strstr(out, "/nonexistent/users") != NULL, "%s", out);
	test_config("auth_mode = ldap\n", out, sizeof(out), &st);
	cr_assert_neq(st, 0);
	cr_assert(strstr(out, "is not none or scram") != NULL, "%s", out);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Another client's ping latency (ms), one per login. */
static double ping_ms(int fd)
{
	double t0 = now_ms();

	cr_assert(raw_ping_ok(fd, 10000), "the other client's ping failed");
	return now_ms() - t0;
}

Test(client_auth, brute_force_leaves_others_unaffected, .timeout = 240)
{
	enum { N_BAD = 1000, N_GOOD = 300, N_DRIVER = 20 };
	struct env e;
	static double lat_idle[N_GOOD], lat_bad[N_BAD], lat_good[N_GOOD], lat_drv[N_DRIVER];
	int other, fd;
	double t0, bad_s, good_s, drv_s;

	/* One connection fails 1,000 logins for many seconds: no auth_timeout_ms. */
	env_start(&e, "auth_max_failures = 0\nlog_level = error\nauth_timeout_ms = 0\n");
	other = raw_connect(e.p);
	cr_assert_eq(h_raw_scram_login(other, SCRAM_SHA_256, "alice", "alice-Pw1", "admin", true),
		     0);
	for (int i = 0; i < N_GOOD; i++)
		lat_idle[i] = ping_ms(other);
	fd = raw_connect(e.p);
	t0 = now_ms();
	for (int i = 0; i < N_BAD; i++) {
		cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "alice", "guess", "admin", true),
			     18, "guess %d", i);
		lat_bad[i] = ping_ms(other);
	}
	bad_s = (now_ms() - t0) / 1e3;
	cr_assert_eq(raw_code(other, "{\"find\": \"c\"}", e.db), 0,
		     "the other client lost its login");
	t0 = now_ms();
	for (int i = 0; i < N_GOOD; i++) {
		cr_assert_eq(
		    h_raw_scram_login(fd, SCRAM_SHA_256, "alice", "alice-Pw1", "admin", true), 0);
		lat_good[i] = ping_ms(other);
	}
	good_s = (now_ms() - t0) / 1e3;
	t0 = now_ms();
	for (int i = 0; i < N_DRIVER; i++) {
		mongoc_client_t *c =
		    login_client(&e, "alice", "alice-Pw1", "admin", "SCRAM-SHA-256");
		bson_t reply;
		bson_error_t err;

		cr_assert(h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err), "%s", err.message);
		bson_destroy(&reply);
		mongoc_client_destroy(c);
		lat_drv[i] = ping_ms(other);
	}
	drv_s = (now_ms() - t0) / 1e3;
	cr_assert_geq(proxy_counter(e.p, "client_auth_failures"), N_BAD);
	qsort(lat_idle, N_GOOD, sizeof(double), cmp_double);
	qsort(lat_bad, N_BAD, sizeof(double), cmp_double);
	qsort(lat_good, N_GOOD, sizeof(double), cmp_double);
	qsort(lat_drv, N_DRIVER, sizeof(double), cmp_double);
	cr_log_info("client auth: %d wrong-password logins in %.2f s (%.0f/s, each followed by "
		    "the other client's ping), %d good SCRAM-SHA-256 logins in %.2f s (%.0f/s); "
		    "other client's ping p50: %.3f ms idle, %.3f ms during wrong logins, %.3f ms "
		    "during good logins; %d libmongoc logins (new connection, hello + speculative "
		    "SCRAM-SHA-256 at 15000 iterations, ping) in %.2f s (%.0f/s), other client's "
		    "p50 %.3f ms meanwhile",
		    N_BAD, bad_s, N_BAD / bad_s, N_GOOD, good_s, N_GOOD / good_s,
		    lat_idle[N_GOOD / 2], lat_bad[N_BAD / 2], lat_good[N_GOOD / 2], N_DRIVER, drv_s,
		    N_DRIVER / drv_s, lat_drv[N_DRIVER / 2]);
	close(fd);
	close(other);
	env_stop(&e);
}

/* ---- auth_query: users looked up on the backend ---------------------- */

/* A command straight to FerretDB as its admin identity (printf-style json). */
__attribute__((format(printf, 3, 4))) static void be_cmd(struct env *e, const char *db,
							 const char *fmt, ...)
{
	char uri[512], json[1024];
	mongoc_client_t *c;
	bson_t reply;
	bson_error_t err;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(json, sizeof(json), fmt, ap);
	va_end(ap);
	snprintf(uri, sizeof(uri),
		 "mongodb://%s:%s@%s:%d/?authSource=admin&serverSelectionTimeoutMS=5000",
		 e->fe.user, e->fe.password, e->fe.host, e->fe.port);
	c = h_client_uri(uri, "cauth-admin");
	cr_assert(h_cmd_json(c, db, json, &reply, &err), "%s on the backend: %s", json,
		  err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
}

/* saslStart's message for user (a client-first with a fixed nonce). */
static void sasl_start_msg(struct h_buf *b, int32_t rid, const char *user, const char *db)
{
	char payload[256];
	bson_t cmd;

	snprintf(payload, sizeof(payload), "n,,n=%s,r=abcdefghijklmnopqrstuvwx", user);
	bson_init(&cmd);
	BSON_APPEND_INT32(&cmd, "saslStart", 1);
	BSON_APPEND_UTF8(&cmd, "mechanism", "SCRAM-SHA-256");
	bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
			   (uint32_t)strlen(payload));
	BSON_APPEND_UTF8(&cmd, "$db", db);
	hb_init(b);
	h_build_msg(b, rid, 0, &cmd);
	bson_destroy(&cmd);
}

Test(client_auth, auth_query_logs_in_users_of_the_backend, .timeout = 120)
{
	struct env e;
	const char *mechs[] = {"SCRAM-SHA-256", "SCRAM-SHA-1", NULL};
	char who[300], carol[64], dave[64], nobody[64], want[300];
	int fd, fds[2];
	int64_t lookups;

	env_start(&e, "auth_query = on\nauth_cache_ttl_ms = 600000\n");
	h_unique(carol, sizeof(carol), "carol");
	h_unique(dave, sizeof(dave), "dave");
	h_unique(nobody, sizeof(nobody), "nobody");
	/* Created on the backend after the proxy started; not in the users file. */
	be_cmd(&e, "app",
	       "{\"createUser\": \"%s\", \"pwd\": \"carol-Pw3\", \"roles\": [], "
	       "\"mechanisms\": [\"SCRAM-SHA-1\", \"SCRAM-SHA-256\"]}",
	       carol);
	snprintf(want, sizeof(want), "app.%s", carol);
	for (size_t i = 0; i < 3; i++) {
		mongoc_client_t *c = login_client(&e, carol, "carol-Pw3", "app", mechs[i]);
		char coll[64];

		snprintf(coll, sizeof(coll), "aq%zu", i);
		crud(&e, c, coll);
		h_status_user(c, who, sizeof(who));
		cr_assert_str_eq(who, want, "%s", mechs[i] ? mechs[i] : "negotiated");
		mongoc_client_destroy(c);
	}
	cr_assert_eq(proxy_counter(e.p, "auth_query_lookups"), 1, "one lookup, then the cache");
	cr_assert_geq(proxy_counter(e.p, "auth_query_cache_hits"), 2);
	/* The users file still comes first (no lookup for alice). */
	fd = raw_connect(e.p);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "alice", "alice-Pw1", "admin", true), 0);
	close(fd); /* one user per connection (as mongod 6+) */
	fd = raw_connect(e.p);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_1, carol, "carol-Pw3", "app", false), 0);
	cr_assert_eq(proxy_counter(e.p, "auth_query_lookups"), 1);
	/* Unknown on the backend: 18, logged. */
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, nobody, "x-Pw", "app", true), 18);
	snprintf(want, sizeof(want), "login failed for user \"app.%s\": unknown user", nobody);
	cr_assert(log_wait(e.p, want, 5000));
	close(fd);
	/* Two clients' saslStarts of one new user: one lookup between them. */
	be_cmd(&e, "app", "{\"createUser\": \"%s\", \"pwd\": \"dave-Pw4\", \"roles\": []}", dave);
	lookups = proxy_counter(e.p, "auth_query_lookups");
	for (int i = 0; i < 2; i++) {
		struct h_buf b;

		fds[i] = raw_connect(e.p);
		cr_assert(fds[i] >= 0);
		sasl_start_msg(&b, 500 + i, dave, "app");
		cr_assert(raw_send(fds[i], b.data, b.len));
		hb_free(&b);
	}
	for (int i = 0; i < 2; i++) {
		uint8_t *msg;
		size_t len;
		struct raw_reply r;

		cr_assert_eq(raw_recv_msg(fds[i], &msg, &len, 10000), RAW_OK, "client %d", i);
		cr_assert(raw_parse_reply(msg, len, &r), "client %d", i);
		cr_assert(h_get_bool(&r.doc, "ok"), "client %d: saslStart refused", i);
		free(msg);
		close(fds[i]);
	}
	cr_assert_eq(proxy_counter(e.p, "auth_query_lookups"), lookups + 1,
		     "concurrent logins of one user share one lookup");
	cr_log_info("auth_query: lookups %" PRId64 ", cache hits %" PRId64 ", shared %" PRId64,
		    proxy_counter(e.p, "auth_query_lookups"),
		    proxy_counter(e.p, "auth_query_cache_hits"),
		    proxy_counter(e.p, "auth_query_shared"));
	env_stop(&e);
}

Test(client_auth, auth_query_refreshes_changed_and_dropped_users, .timeout = 120)
{
	struct env e;
	char carol[64], want[300];
	int fd;

	env_start(&e, "auth_query = on\nauth_cache_ttl_ms = 600000\nauth_max_failures = 0\n");
	/* Its own user: this test changes the password and drops the user. */
	h_unique(carol, sizeof(carol), "carol");
	be_cmd(&e, "app", "{\"createUser\": \"%s\", \"pwd\": \"old-Pw1\", \"roles\": []}", carol);
	fd = raw_connect(e.p);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, carol, "old-Pw1", "app", true), 0);
	be_cmd(&e, "app", "{\"updateUser\": \"%s\", \"pwd\": \"new-Pw2\"}", carol);
	/* The cached secret is the old one: the new password fails once, and
	 * its error waits for the refreshed secret, which wins from then on. */
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, carol, "new-Pw2", "app", true), 18);
	cr_assert(
	    log_wait(e.p, "cached secret refreshed from the backend: the user's secret", 5000));
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, carol, "old-Pw1", "app", true), 18,
		     "the old password after the refresh");
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, carol, "new-Pw2", "app", true), 0);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_1, carol, "new-Pw2", "app", true), 0);
	/* Dropped: a failed login refreshes, then the user is unknown. */
	be_cmd(&e, "app", "{\"dropUser\": \"%s\"}", carol);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, carol, "wrong-Pw", "app", true), 18);
	cr_assert(log_wait(e.p, "refreshed from the backend: the user is no longer there", 5000));
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, carol, "new-Pw2", "app", true), 18,
		     "a dropped user logged in");
	snprintf(want, sizeof(want), "login failed for user \"app.%s\": unknown user", carol);
	cr_assert(log_wait(e.p, want, 5000));
	cr_assert_eq(proxy_counter(e.p, "auth_query_errors"), 0);
	close(fd);
	env_stop(&e);
}

/* The proxy's identity lacks viewUser: mongod answers usersInfo with code
 * 13 (FerretDB does not check privileges, so a mockupdb backend does). */
Test(client_auth, auth_query_identity_without_rights, .timeout = 60)
{
	char dir[] = "/tmp/mongoplex-aqmock-XXXXXX", cmd[1024];
	char extra[512];
	struct proxy *p;
	FILE *mock;
	int port, fd;

	port = h_mock_backend_start(dir, &mock);
	snprintf(
	    extra, sizeof(extra),
	    "backend_uri = mongodb://127.0.0.1:%d/\nauth_mode = scram\nauth_query = on\n"
	    "auth_stats_unauthenticated = on\nqueue_timeout_ms = 1000\nauth_max_failures = 0\n",
	    port);
	p = proxy_start(extra);
	fd = raw_connect(p);
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "carol", "carol-Pw3", "app", true), 18);
	cr_assert(log_wait(p,
			   "auth_query: usersInfo for \"app.carol\" as the proxy's backend_uri "
			   "identity failed: the backend refused usersInfo (code 13)",
			   5000),
		  "%s", proxy_log_tail(p, 3000));
	cr_assert(log_contains(p, "needs the viewUser privilege"));
	cr_assert(log_contains(p, "login failed for user \"app.carol\": auth_query lookup failed"));
	cr_assert_eq(raw_code(fd, "{\"ping\": 1}", "admin"), 0, "the connection stays usable");
	/* A lookup the backend never answers ends at queue_timeout_ms (1 s here). */
	cr_assert_eq(h_raw_scram_login(fd, SCRAM_SHA_256, "heldcarol", "carol-Pw3", "app", true),
		     18);
	cr_assert(log_contains(p, "auth_query: usersInfo for \"app.heldcarol\": no answer within "
				  "queue_timeout_ms = 1000"),
		  "%s", proxy_log_tail(p, 2000));
	close(fd);
	proxy_stop(p);
	pclose(mock);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}
