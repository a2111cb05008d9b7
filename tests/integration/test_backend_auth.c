/*
 * test_backend_auth.c — backend SCRAM authentication against a real server:
 * the tests share the suite run's FerretDB with authentication on
 * (h_ferret_shared "ferretdb-auth"; run by hand, each starts its own; a test
 * FAILS if FerretDB cannot be started) and each puts its own proxy in front
 * of it, logging in as the server's admin identity (or a wrong one; nothing
 * here changes a user). Clients talk to the proxy without credentials; the
 * proxy logs in with backend_uri's.
 *
 * Asserts: SCRAM-SHA-256, SCRAM-SHA-1 and negotiated logins; CRUD and
 * connectionStatus (the backend user) through the proxy; one PBKDF2 for a
 * whole pool; wrong password / unknown user -> code 18 naming the user, a
 * bounded number of failed logins (backoff), no password in the log; SIGHUP
 * with a fixed backend_password_file recovers; --test-config warnings;
 * unsupported mechanisms refused at startup; no secret in the debug log,
 * mongoplexStats or /metrics.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The identity of the SCRAM mock (scram_server.py); the FerretDB tests use
 * the shared server's (fa.user, fa.password). */
#define USER	 "mpauth"
#define PASSWORD "Pw-s3cret-7781"
#define WRONG_PW "Wrong-pw-4242"

/* The suite's FerretDB with auth (its admin identity in fa->user/password). */
static void fauth_start(struct h_ferret *fa)
{
	char want[300];

	h_ferret_shared(fa, "ferretdb-auth");
	cr_assert(fa->user[0] != '\0' && fa->password[0] != '\0', "no credentials: %s", fa->uri);
	cr_assert(strcmp(fa->password, WRONG_PW) != 0);
	snprintf(want, sizeof(want), "mongodb://%s:%s@", fa->user, fa->password);
	cr_assert(strstr(fa->uri, want) != NULL, "uri: %s", fa->uri);
}

/* INI lines for a proxy in front of fa with the given user/password/options. */
static void settings(char *buf, size_t len, const struct h_ferret *fa, const char *user,
		     const char *pw, const char *opts, const char *more)
{
	snprintf(buf, len, "backend_uri = mongodb://%s%s%s@%s:%d/%s\n%s", user, pw ? ":" : "",
		 pw ? pw : "", fa->host, fa->port, opts, more ? more : "");
}

/* CRUD through p, whose backend identity is `user`. */
static void crud(struct proxy *p, const char *user)
{
	mongoc_client_t *c = h_proxy_client(p, "auth-crud");
	char coll[64];
	bson_t reply;
	bson_error_t err;
	char json[512];

	h_unique(coll, sizeof(coll), "c");
	snprintf(json, sizeof(json),
		 "{\"insert\": \"%s\", \"documents\": [{\"_id\": 1, \"a\": 1}]}", coll);
	cr_assert(h_cmd_json(c, "authdb", json, &reply, &err), "insert: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "n", -1), 1);
	bson_destroy(&reply);
	snprintf(json, sizeof(json),
		 "{\"update\": \"%s\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$set\": "
		 "{\"a\": 2}}}]}",
		 coll);
	cr_assert(h_cmd_json(c, "authdb", json, &reply, &err), "update: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "nModified", -1), 1);
	bson_destroy(&reply);
	snprintf(json, sizeof(json), "{\"find\": \"%s\", \"filter\": {\"_id\": 1}}", coll);
	cr_assert(h_cmd_json(c, "authdb", json, &reply, &err), "find: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "cursor.firstBatch.0.a", -1), 2);
	bson_destroy(&reply);
	snprintf(json, sizeof(json),
		 "{\"delete\": \"%s\", \"deletes\": [{\"q\": {}, \"limit\": 0}]}", coll);
	cr_assert(h_cmd_json(c, "authdb", json, &reply, &err), "delete: %s", err.message);
	cr_assert_eq(h_get_int(&reply, "n", -1), 1);
	bson_destroy(&reply);
	cr_assert(h_cmd_json(c, "admin", "{\"connectionStatus\": 1}", &reply, &err), "%s",
		  err.message);
	cr_assert_str_eq(h_get_str(&reply, "authInfo.authenticatedUsers.0.user"), user);
	cr_assert_str_eq(h_get_str(&reply, "authInfo.authenticatedUsers.0.db"), "admin");
	bson_destroy(&reply);
	mongoc_client_destroy(c);
}

static void login_figures(struct proxy *p, const char *what)
{
	bson_t st;
	int64_t ok, rt;

	proxy_stats(p, &st);
	ok = h_get_int(&st, "counters.backend_auth_ok", -1);
	rt = h_get_int(&st, "counters.backend_auth_round_trips", -1);
	cr_assert_geq(ok, 1, "no backend login counted");
	cr_assert_eq(h_get_int(&st, "counters.backend_auth_failures", -1), 0);
	cr_log_info("%s: %" PRId64 " logins, %" PRId64 " speculative, %.1f round trips per login "
		    "(hello + %.1f SASL commands), PBKDF2 runs %" PRId64,
		    what, ok, h_get_int(&st, "counters.backend_auth_speculative", -1),
		    1.0 + (double)rt / (double)ok, (double)rt / (double)ok,
		    h_get_int(&st, "counters.scram_salted_password_computed", -1));
	bson_destroy(&st);
}

static void mech_test(const char *opts, const char *want_mech)
{
	struct h_ferret fa;
	struct proxy *p;
	char extra[512], want[128];

	fauth_start(&fa);
	settings(extra, sizeof(extra), &fa, fa.user, fa.password, opts, "log_level = debug\n");
	p = proxy_start(extra);
	crud(p, fa.user);
	snprintf(want, sizeof(want), "authenticated as \"%s\" on admin (%s", fa.user, want_mech);
	cr_assert(log_contains(p, want), "log lacks \"%s\"", want);
	login_figures(p, want_mech);
	proxy_stop(p);
	h_ferret_stop(&fa);
}

Test(backend_auth, scram_sha_256, .timeout = 120)
{
	mech_test("?authMechanism=SCRAM-SHA-256", "SCRAM-SHA-256");
}

Test(backend_auth, scram_sha_1, .timeout = 120)
{
	mech_test("?authMechanism=SCRAM-SHA-1&authSource=admin", "SCRAM-SHA-1");
}

Test(backend_auth, negotiated_prefers_sha_256, .timeout = 120)
{
	mech_test("", "SCRAM-SHA-256");
}

/* ------------------------------------------------------------ one PBKDF2 per pool */

struct worker {
	const char *uri;
	int ok;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	mongoc_client_t *c = mongoc_client_new(w->uri);
	bson_t reply;
	bson_error_t err;

	for (int i = 0; c != NULL && i < 20; i++) {
		if (h_cmd_json(c, "authdb", "{\"find\": \"pbkdf2\", \"filter\": {\"_id\": 1}}",
			       &reply, &err))
			w->ok++;
		bson_destroy(&reply);
	}
	if (c != NULL)
		mongoc_client_destroy(c);
	return NULL;
}

Test(backend_auth, pool_runs_pbkdf2_once, .timeout = 180)
{
	enum { NCLIENTS = 50 };
	struct h_ferret fa;
	struct proxy *p;
	struct worker w[NCLIENTS];
	pthread_t t[NCLIENTS];
	char extra[512];
	bson_t st;
	int total = 0;
	int64_t logins, pbkdf2;

	fauth_start(&fa);
	settings(extra, sizeof(extra), &fa, fa.user, fa.password, "",
		 "pool_size = 8\nmin_pool_size = 8\n");
	p = proxy_start(extra);
	for (int i = 0; i < NCLIENTS; i++) {
		w[i] = (struct worker){.uri = p->uri};
		cr_assert(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < NCLIENTS; i++) {
		pthread_join(t[i], NULL);
		total += w[i].ok;
	}
	cr_assert_eq(total, NCLIENTS * 20, "only %d of %d finds succeeded", total, NCLIENTS * 20);
	proxy_stats(p, &st);
	logins = h_get_int(&st, "counters.backend_auth_ok", -1);
	pbkdf2 = h_get_int(&st, "counters.scram_salted_password_computed", -1);
	cr_log_info("pool_size 8, %d clients: %" PRId64 " backend logins, %" PRId64 " PBKDF2 runs",
		    NCLIENTS, logins, pbkdf2);
	cr_assert_geq(logins, 8, "expected the 8 pooled connections to log in, got %" PRId64,
		      logins);
	cr_assert_eq(pbkdf2, 1, "PBKDF2 ran %" PRId64 " times for one user/salt", pbkdf2);
	bson_destroy(&st);
	proxy_stop(p);
	h_ferret_stop(&fa);
}

/* ------------------------------------------------------------ wrong credentials */

static int count_occurrences(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *s = strstr(hay, needle); s != NULL; s = strstr(s + 1, needle))
		n++;
	return n;
}

/* Run commands through p for ~duration_ms; each must fail with code 18
 * naming the user. Returns how many were sent. */
static int expect_auth_errors(struct proxy *p, const struct h_ferret *fa, const char *user,
			      int duration_ms)
{
	int fd = raw_connect(p);
	int64_t end = h_now_ms() + duration_ms;
	char want[256];
	int n = 0;

	cr_assert(fd >= 0);
	snprintf(want, sizeof(want),
		 "mongoplex: backend authentication failed for user \"%s\" on %s:%d", user,
		 fa->host, fa->port);
	do {
		bson_t *cmd = BCON_NEW("find", "x", "$db", "authdb");
		bson_t reply;
		const char *msg;

		/* Raw wire: the reply exactly as the proxy sent it. */
		cr_assert(raw_command(fd, 1000 + n, cmd, &reply, 30000), "no reply");
		msg = h_get_str(&reply, "errmsg");
		cr_assert_eq(h_get_int(&reply, "ok", 1), 0,
			     "a request succeeded with wrong "
			     "credentials");
		cr_assert_eq(h_get_int(&reply, "code", -1), 18, "code %" PRId64 ": %s",
			     h_get_int(&reply, "code", -1), msg ? msg : "");
		cr_assert_str_eq(h_get_str(&reply, "codeName"), "AuthenticationFailed");
		cr_assert(msg != NULL && strstr(msg, want) != NULL, "message: %s", msg);
		bson_destroy(&reply);
		bson_destroy(cmd);
		n++;
		h_sleep_ms(50);
	} while (h_now_ms() < end);
	close(fd);
	return n;
}

/* user NULL: the server's admin user (with the wrong password pw). */
static void wrong_cred_test(const char *user, const char *pw)
{
	struct h_ferret fa;
	struct proxy *p;
	char extra[512], *log;
	int64_t t0;
	int sent, failures;

	fauth_start(&fa);
	if (user == NULL)
		user = fa.user;
	settings(extra, sizeof(extra), &fa, user, pw, "",
		 "reconnect_backoff_max_ms = 400\nlog_level = debug\n");
	p = proxy_start(extra);
	t0 = h_now_ms();
	sent = expect_auth_errors(p, &fa, user, 2000);
	log = proxy_log(p);
	failures = count_occurrences(log, "closing: backend authentication failed for user");
	cr_log_info("%s: %d requests in %" PRId64 " ms, %d failed logins logged", user, sent,
		    h_now_ms() - t0, failures);
	cr_assert_geq(failures, 1);
	/* Backoff: at most one login per 100 ms step (the first step may hold a few). */
	cr_assert_leq(failures, 4 + (int)((h_now_ms() - t0) / 100),
		      "%d failed logins: reconnecting in a tight loop?", failures);
	cr_assert(strstr(log, WRONG_PW) == NULL, "the password is in the log");
	cr_assert(strstr(log, fa.password) == NULL, "the password is in the log");
	free(log);
	proxy_stop(p);
	h_ferret_stop(&fa);
}

Test(backend_auth, wrong_password_gets_18_with_backoff, .timeout = 120)
{
	wrong_cred_test(NULL, WRONG_PW);
}

Test(backend_auth, unknown_user_gets_18, .timeout = 120)
{
	wrong_cred_test("nosuchuser", WRONG_PW);
}

/* ------------------------------------------------------------ password file + SIGHUP */

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	cr_assert(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
	cr_assert(chmod(path, mode) == 0);
}

Test(backend_auth, sighup_with_fixed_password_file_recovers, .timeout = 120)
{
	struct h_ferret fa;
	struct proxy *p;
	char extra[1024], pwfile[300], more[400], line[200], *log;
	mongoc_client_t *c;
	bson_t reply;
	bson_error_t err;
	bool ok = false;

	fauth_start(&fa);
	snprintf(pwfile, sizeof(pwfile), "%s/backend.pw", fa.scratch);
	write_file(pwfile, WRONG_PW "\n", 0600);
	snprintf(more, sizeof(more), "backend_password_file = %s\nlog_level = debug\n", pwfile);
	settings(extra, sizeof(extra), &fa, fa.user, NULL, "", more);
	p = proxy_start(extra);
	expect_auth_errors(p, &fa, fa.user, 300);
	snprintf(line, sizeof(line), "%s\n", fa.password);
	write_file(pwfile, line, 0600);
	cr_assert(kill(p->pid, SIGHUP) == 0);
	cr_assert(log_wait(p, "backend credentials changed", 10000), "no reload logged");
	c = h_proxy_client(p, "auth-fixed");
	for (int i = 0; i < 50 && !ok; i++) { /* bounded: the reload resets the backoff */
		ok = h_cmd_json(c, "admin", "{\"connectionStatus\": 1}", &reply, &err);
		if (ok)
			cr_assert_str_eq(h_get_str(&reply, "authInfo.authenticatedUsers.0.user"),
					 fa.user);
		else
			h_sleep_ms(100);
		bson_destroy(&reply);
	}
	cr_assert(ok, "no recovery after SIGHUP: %s", err.message);
	mongoc_client_destroy(c);
	log = proxy_log(p);
	cr_assert(strstr(log, fa.password) == NULL && strstr(log, WRONG_PW) == NULL,
		  "a password is in the log");
	free(log);
	/* An unsafe password file makes the reload fail and keeps the old credentials. */
	write_file(pwfile, line, 0666);
	cr_assert(kill(p->pid, SIGHUP) == 0);
	cr_assert(log_wait(p, "writable by group or others", 10000));
	proxy_stop(p);
	h_ferret_stop(&fa);
}

/* ------------------------------------------------------------ config checks */

static void write_cfg(const char *path, const char *uri_line, mode_t mode)
{
	char text[600];

	snprintf(text, sizeof(text), "[mongoplex]\nlisten_port = 0\n%s\n", uri_line);
	write_file(path, text, mode);
}

static void run_mongoplex(const char *args, char *out, size_t outlen, int *status)
{
	char cmd[800];
	const char *bin = getenv("MONGOPLEX_BIN");

	snprintf(cmd, sizeof(cmd), "timeout 20 %s %s 2>&1", bin && *bin ? bin : MP_BINARY, args);
	*status = h_sh_capture(cmd, out, outlen, 60000);
}

Test(backend_auth, test_config_warns_about_readable_secrets, .timeout = 60)
{
	char dir[] = "/tmp/mp-authcfg-XXXXXX", path[300], args[400], out[2048];
	int st;

	cr_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/m.ini", dir);
	snprintf(args, sizeof(args), "--test-config -c %s", path);
	write_cfg(path, "backend_uri = mongodb://u:" PASSWORD "@127.0.0.1:1/", 0644);
	run_mongoplex(args, out, sizeof(out), &st);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert(strstr(out, "readable by other users") != NULL, "no warning: %s", out);
	cr_assert(strstr(out, PASSWORD) == NULL, "%s", out);
	write_cfg(path, "backend_uri = mongodb://u:" PASSWORD "@127.0.0.1:1/", 0640);
	run_mongoplex(args, out, sizeof(out), &st);
	cr_assert_eq(st, 0, "%s", out);
	cr_assert(strstr(out, "readable by other users") == NULL, "spurious warning: %s", out);
	write_cfg(path, "backend_uri = mongodb://127.0.0.1:1/", 0644);
	run_mongoplex(args, out, sizeof(out), &st);
	cr_assert(strstr(out, "warning") == NULL, "warning without a secret: %s", out);
	unlink(path);
	rmdir(dir);
}

Test(backend_auth, unsupported_mechanisms_refused_at_startup, .timeout = 60)
{
	static const char *const uris[] = {
	    "mongodb://CN=x@127.0.0.1:1/?authMechanism=MONGODB-X509",
	    "mongodb://u:p@127.0.0.1:1/?authMechanism=PLAIN",
	    "mongodb://u@127.0.0.1:1/?authMechanism=GSSAPI",
	    "mongodb://u:p@127.0.0.1:1/?authMechanism=MONGODB-AWS",
	    "mongodb://u@127.0.0.1:1/?authMechanism=MONGODB-OIDC",
	    "mongodb://u:p@127.0.0.1:1/?authMechanism=MONGODB-CR",
	};
	char dir[] = "/tmp/mp-authmech-XXXXXX", path[300], line[300], args[400], out[2048];
	int st;

	cr_assert(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/m.ini", dir);
	for (size_t i = 0; i < sizeof(uris) / sizeof(uris[0]); i++) {
		const char *mech = strstr(uris[i], "authMechanism=") + strlen("authMechanism=");
		char want[160];

		snprintf(line, sizeof(line), "backend_uri = %s", uris[i]);
		write_cfg(path, line, 0600);
		snprintf(want, sizeof(want),
			 "authMechanism %s is not supported; use SCRAM-SHA-256 or SCRAM-SHA-1",
			 mech);
		for (int test_only = 0; test_only < 2; test_only++) {
			snprintf(args, sizeof(args), "%s-c %s", test_only ? "--test-config " : "",
				 path);
			run_mongoplex(args, out, sizeof(out), &st);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s %s: exit %d: %s", mech,
				  args, st, out);
			cr_assert(strstr(out, want) != NULL, "%s: %s", mech, out);
		}
	}
	unlink(path);
	rmdir(dir);
}

/* ------------------------------------------------------------ no secret exposed */

Test(backend_auth, secrets_absent_from_log_stats_metrics, .timeout = 120)
{
	struct h_ferret fa;
	struct proxy *p;
	char extra[1024], more[200], *log, *metrics, *json;
	bson_t st;
	int mport = h_free_port();

	fauth_start(&fa);
	snprintf(more, sizeof(more), "log_level = debug\nmetrics_listen = 127.0.0.1:%d\n", mport);
	settings(extra, sizeof(extra), &fa, fa.user, fa.password, "", more);
	p = proxy_start(extra);
	crud(p, fa.user);
	proxy_stats(p, &st);
	json = bson_as_relaxed_extended_json(&st, NULL);
	cr_assert(strstr(json, fa.password) == NULL, "password in mongoplexStats");
	bson_free(json);
	bson_destroy(&st);
	metrics = h_get_metrics(mport);
	cr_assert(strstr(metrics, "mongoplex_backend_auth_ok") != NULL, "%.300s", metrics);
	cr_assert(strstr(metrics, fa.password) == NULL, "password in /metrics");
	free(metrics);
	/* A reload that tries to change backend_uri logs both URIs: redacted. */
	{
		FILE *f = fopen(p->cfg_path, "a");

		cr_assert(f != NULL);
		fprintf(f, "backend_uri = mongodb://%s:%s-new@%s:%d/\n", fa.user, fa.password,
			fa.host, fa.port);
		fclose(f);
	}
	cr_assert(kill(p->pid, SIGHUP) == 0);
	cr_assert(log_wait(p, "backend_uri cannot change at runtime", 10000));
	log = proxy_log(p);
	cr_assert(strstr(log, ":***@") != NULL, "no redacted URI in the log");
	cr_assert(strstr(log, fa.password) == NULL, "the password is in the debug log");
	free(log);
	proxy_stop(p);
	h_ferret_stop(&fa);
}

/* ------------------------------------------------------------ speculative login (mock) */

#define PYTHON	     "/usr/bin/python3"
#define SCRAM_SCRIPT MP_SOURCE_DIR "/tests/integration/scram_server.py"

/* scram_server.py: a SCRAM-SHA-256 backend that answers speculativeAuthenticate. */
struct scram_mock {
	pid_t pid;
	int stdin_fd;
	int port;
};

static void scram_mock_start(struct scram_mock *m, const char *flag)
{
	int in[2], out[2];
	char line[128] = "";
	FILE *f;

	cr_assert(access(PYTHON, X_OK) == 0, "%s not found", PYTHON);
	cr_assert(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0);
	fflush(NULL);
	m->pid = fork();
	cr_assert(m->pid >= 0);
	if (m->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(PYTHON, PYTHON, SCRAM_SCRIPT, USER, PASSWORD, flag, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	m->stdin_fd = in[1];
	f = fdopen(out[0], "r");
	cr_assert(f != NULL && fgets(line, sizeof(line), f) != NULL,
		  "scram_server.py did not start (python3-mockupdb?)");
	fclose(f);
	cr_assert(sscanf(line, "port %d", &m->port) == 1, "scram_server.py said: %s", line);
}

static void scram_mock_stop(struct scram_mock *m)
{
	close(m->stdin_fd); /* EOF on stdin: it exits */
	waitpid(m->pid, NULL, 0);
}

Test(backend_auth, speculative_login_takes_one_sasl_round_trip, .timeout = 60)
{
	struct scram_mock m;
	struct h_ferret fa = {.host = "127.0.0.1"};
	struct proxy *p;
	char extra[512];
	mongoc_client_t *c;
	bson_t reply, st;
	bson_error_t err;
	int64_t logins, rt;

	scram_mock_start(&m, "");
	fa.port = m.port;
	settings(extra, sizeof(extra), &fa, USER, PASSWORD, "",
		 "pool_size = 3\nmin_pool_size = 3\nlog_level = debug\n");
	p = proxy_start(extra);
	c = h_proxy_client(p, "auth-spec");
	cr_assert(h_cmd_json(c, "admin", "{\"connectionStatus\": 1}", &reply, &err), "%s",
		  err.message);
	cr_assert_str_eq(h_get_str(&reply, "authInfo.authenticatedUsers.0.user"), USER);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	cr_assert(log_wait(p, "(SCRAM-SHA-256, speculative)", 10000));
	proxy_stats(p, &st);
	logins = h_get_int(&st, "counters.backend_auth_ok", -1);
	rt = h_get_int(&st, "counters.backend_auth_round_trips", -1);
	cr_log_info("speculative: %" PRId64 " logins, %" PRId64 " speculative, %" PRId64
		    " SASL commands after the hello (%.1f round trips per login)",
		    logins, h_get_int(&st, "counters.backend_auth_speculative", -1), rt,
		    1.0 + (double)rt / (double)logins);
	cr_assert_geq(logins, 1);
	cr_assert_eq(h_get_int(&st, "counters.backend_auth_speculative", -1), logins);
	cr_assert_eq(rt, logins, "one saslContinue per login expected");
	cr_assert_eq(h_get_int(&st, "counters.scram_salted_password_computed", -1), 1);
	bson_destroy(&st);
	proxy_stop(p);
	scram_mock_stop(&m);
}

Test(backend_auth, server_that_cannot_prove_the_password_is_refused, .timeout = 60)
{
	struct scram_mock m;
	struct h_ferret fa = {.host = "127.0.0.1"};
	struct proxy *p;
	char extra[512];
	int fd;
	bson_t *find = BCON_NEW("find", "x", "$db", "authdb");
	bson_t reply;

	scram_mock_start(&m, "--forge-signature");
	fa.port = m.port;
	settings(extra, sizeof(extra), &fa, USER, PASSWORD, "", NULL);
	p = proxy_start(extra);
	fd = raw_connect(p);
	cr_assert(fd >= 0);
	cr_assert(raw_command(fd, 7, find, &reply, 30000));
	cr_assert_eq(h_get_int(&reply, "code", -1), 18, "the proxy used a forged login");
	cr_assert(strstr(h_get_str(&reply, "errmsg"), "did not prove it knows the password") !=
		      NULL,
		  "%s", h_get_str(&reply, "errmsg"));
	bson_destroy(&reply);
	close(fd);
	bson_destroy(find);
	proxy_stop(p);
	scram_mock_stop(&m);
}
