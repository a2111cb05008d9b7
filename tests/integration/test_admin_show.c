/*
 * test_admin_show.c — the operator's console, show side (issue 24 items 1,
 * 3, 4): {mongoplexShow: ...} against live clients, who may run it, and
 * mongoplex --admin.
 *
 *   clients_of_drivers    pymongo 4, the Node driver and mongosh connect with
 *                         their own appname (through FerretDB: pymongo 4 needs
 *                         wire 9); show clients lists each with its driver
 *                         name and version (a missing driver FAILS)
 *   running_request       a find held by mockupdb (h_<KEY>_ collections):
 *                         show servers/pools/clients show it running and a
 *                         second one waiting; released, they show idle
 *   paging                30 clients, maxBytes 1024: truncated pages whose
 *                         skip/next cover every client exactly once
 *   hello_metadata_bounded  a 401-byte appname is kept cut to 127 bytes, not
 *                         splitting a character (the reply stays valid UTF-8)
 *   config_and_scram      FerretDB with auth: show config redacts the
 *                         backend password and marks reloadable settings; an
 *                         admin_users user may over TCP, another user and an
 *                         unauthenticated client get 13
 *   refusals_auth_none    auth_mode = none: TCP gets 13 (logged, counted), the
 *                         unix socket's owner may
 *   socket_other_uid      auth_mode = none, socket mode 0777: a client of
 *                         another uid (nobody) on the socket gets 13 (root)
 *   cli                   the table, --json, an error, a usage error
 *   cli_backend_down      the backend never answered and its connects fail:
 *                         the socket owner's console still connects and shows
 *                         the pool's failures; a TCP client's hello gets 6
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* A proxy with a unix socket of its own (path in sock). */
static struct proxy *start_with_socket(char *sock, size_t len, const char *more)
{
	struct proxy *p = proxy_start_admin(more);

	snprintf(sock, len, "%s", p->admin_sock);
	return p;
}

/* {mongoplexShow: what} through c; asserts ok. */
static void show(mongoc_client_t *c, const char *what, bson_t *reply)
{
	char json[200];
	bson_error_t err;

	snprintf(json, sizeof(json), "{\"mongoplexShow\": \"%s\"}", what);
	cr_assert(h_cmd_json(c, "admin", json, reply, &err), "show %s: %s", what, err.message);
	cr_assert(h_get_bool(reply, "ok"));
	cr_assert(!h_get_bool(reply, "truncated"), "show %s truncated", what);
}

/* The first row whose string field `key` equals (or, prefix: starts with)
 * `value`, copied into *row; false if none. */
static bool find_row(const bson_t *reply, const char *key, const char *value, bool prefix,
		     bson_t *row)
{
	bson_iter_t it, rows;

	if (!bson_iter_init_find(&it, reply, "rows") || !bson_iter_recurse(&it, &rows))
		return false;
	while (bson_iter_next(&rows)) {
		const uint8_t *data;
		uint32_t len;
		bson_t doc;
		const char *v;

		bson_iter_document(&rows, &len, &data);
		if (data == NULL || !bson_init_static(&doc, data, len))
			continue;
		v = h_get_str(&doc, key);
		if (v != NULL &&
		    (prefix ? strncmp(v, value, strlen(value)) == 0 : strcmp(v, value) == 0)) {
			bson_copy_to(&doc, row);
			return true;
		}
	}
	return false;
}

/* ------------------------------------------------------------ drivers */

/* A shell command of ours, in its own process group: its pid. Output to log. */
static pid_t spawn(const char *cmd, const char *log)
{
	pid_t pid = fork();

	cr_assert(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		if (freopen(log, "w", stdout) == NULL || dup2(fileno(stdout), 2) < 0)
			_exit(127);
		h_close_fds_above(3);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

static void reap(pid_t pid)
{
	kill(-pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

static char *slurp(const char *path)
{
	static char buf[4000];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

Test(admin_show, clients_of_drivers, .timeout = 240)
{
	char sock[100], uri[200], cmd[3000], logs[3][300], apps[3][64];
	const char *names[3] = {"pymongo", "node", "mongosh"};
	const char *nm = h_node_modules(), *py = h_pymongo4_python();
	struct h_ferret fe;
	struct proxy *p;
	mongoc_client_t *admin;
	pid_t pids[3];
	bson_t reply, row;
	bool seen[3] = {false, false, false};

	snprintf(cmd, sizeof(cmd), "%s/.bin/mongosh", nm);
	cr_assert(
	    access(cmd, X_OK) == 0,
	    "mongosh is not installed at %s (tests/drivers/package.json: npm ci); the mongosh "
	    "part of this test cannot run without it",
	    cmd);
	/* FerretDB: pymongo 4.x needs wire 9, more than mongo-java-server reports */
	h_ferret_shared(&fe, "ferretdb");
	snprintf(cmd, sizeof(cmd), "backend_uri = %s\n", fe.uri);
	p = start_with_socket(sock, sizeof(sock), cmd);
	snprintf(uri, sizeof(uri), "mongodb://127.0.0.1:%d/", p->port);
	for (int i = 0; i < 3; i++) {
		snprintf(apps[i], sizeof(apps[i]), "adm-%s-%d", names[i], (int)getpid());
		snprintf(logs[i], sizeof(logs[i]), "%s/%s.out", p->dir, names[i]);
	}
	snprintf(cmd, sizeof(cmd),
		 "exec %s -c 'import sys, time, pymongo; c = pymongo.MongoClient(sys.argv[1], "
		 "appname=sys.argv[2], serverSelectionTimeoutMS=5000); c.admin.command(\"ping\"); "
		 "print(\"ready\", flush=True); time.sleep(600)' '%s' '%s'",
		 py, uri, apps[0]);
	pids[0] = spawn(cmd, logs[0]);
	snprintf(cmd, sizeof(cmd),
		 "NODE_PATH=%s exec node -e 'const {MongoClient} = require(\"mongodb\"); (async () "
		 "=> { const c = new MongoClient(process.argv[1], {appName: process.argv[2], "
		 "serverSelectionTimeoutMS: 5000}); await c.db(\"admin\").command({ping: 1}); "
		 "console.log(\"ready\"); setTimeout(() => {}, 600000); })().catch(e => { "
		 "console.error(e); process.exit(1); });' '%s' '%s'",
		 nm, uri, apps[1]);
	pids[1] = spawn(cmd, logs[1]);
	snprintf(
	    cmd, sizeof(cmd),
	    "MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1 exec %s/.bin/mongosh --norc --quiet "
	    "'%s?appName=%s&serverSelectionTimeoutMS=5000' --eval "
	    "'db.adminCommand({ping: 1}); print(\"ready\"); sleep(600000)' </dev/null",
	    nm, uri, apps[2]);
	pids[2] = spawn(cmd, logs[2]);

	admin = h_socket_client(sock, "adm-test");
	for (int64_t t0 = h_now_ms(); h_now_ms() - t0 < 120000;) {
		bool all = true;

		show(admin, "clients", &reply);
		for (int i = 0; i < 3; i++) {
			seen[i] = false;
			if (find_row(&reply, "app_name", apps[i], false, &row)) {
				const char *drv = h_get_str(&row, "driver");

				seen[i] = drv != NULL && drv[0] != '\0';
				bson_destroy(&row);
			}
			all = all && seen[i];
		}
		if (all)
			break;
		for (int i = 0; i < 3; i++)
			cr_assert(waitpid(pids[i], NULL, WNOHANG) == 0, "%s exited: %s", names[i],
				  slurp(logs[i]));
		bson_destroy(&reply);
		bson_init(&reply);
		h_sleep_ms(200);
	}
	for (int i = 0; i < 3; i++)
		cr_assert(seen[i], "%s (appname %s) not in show clients; its output: %s", names[i],
			  apps[i], slurp(logs[i]));
	cr_assert(find_row(&reply, "app_name", apps[0], false, &row));
	cr_assert(strstr(h_get_str(&row, "driver"), "PyMongo") != NULL, "%s",
		  h_get_str(&row, "driver"));
	cr_assert(strncmp(h_get_str(&row, "peer"), "127.0.0.1:", 10) == 0);
	cr_assert(h_get_str(&row, "driver_version")[0] != '\0');
	cr_assert(h_get_int(&row, "requests", 0) >= 2, "hello and ping at least");
	cr_assert(h_get_int(&row, "bytes_in", 0) > 0 && h_get_int(&row, "bytes_out", 0) > 0);
	bson_destroy(&row);
	cr_assert(find_row(&reply, "app_name", apps[1], false, &row));
	cr_assert(strstr(h_get_str(&row, "driver"), "nodejs") != NULL, "%s",
		  h_get_str(&row, "driver"));
	bson_destroy(&row);
	cr_assert(find_row(&reply, "app_name", apps[2], false, &row));
	cr_assert(strstr(h_get_str(&row, "driver"), "mongosh") != NULL, "%s",
		  h_get_str(&row, "driver"));
	bson_destroy(&row);
	cr_assert(find_row(&reply, "app_name", "adm-test", false, &row), "the admin itself");
	cr_assert_str_eq(h_get_str(&row, "peer"), "unix");
	cr_assert_eq(h_get_int(&row, "in_flight", -1), 1, "its own show is in flight");
	bson_destroy(&row);
	bson_destroy(&reply);
	for (int i = 0; i < 3; i++)
		reap(pids[i]);
	mongoc_client_destroy(admin);
	proxy_stop(p);
	h_ferret_stop(&fe);
}

/* ------------------------------------------------------------ a running request */

/* Send a find on collection coll without reading the reply. */
static int send_find(struct proxy *p, const char *coll)
{
	struct h_buf b;
	bson_t *cmd = BCON_NEW("find", BCON_UTF8(coll), "$db", BCON_UTF8("test"));
	int fd = raw_connect(p);

	cr_assert(fd >= 0);
	hb_init(&b);
	h_build_msg(&b, 7, 0, cmd);
	cr_assert(raw_send(fd, b.data, b.len));
	hb_free(&b);
	bson_destroy(cmd);
	return fd;
}

/* Poll show `what` until a row has key == value (bounded wait for the
 * request to arrive, not a timing threshold). */
static void wait_row(mongoc_client_t *c, const char *what, const char *key, const char *value,
		     bson_t *row)
{
	bson_t reply;

	for (int64_t t0 = h_now_ms(); h_now_ms() - t0 < 20000; h_sleep_ms(50)) {
		show(c, what, &reply);
		if (find_row(&reply, key, value, false, row)) {
			bson_destroy(&reply);
			return;
		}
		bson_destroy(&reply);
	}
	cr_assert_fail("no row with %s = %s in show %s", key, value, what);
}

Test(admin_show, running_request, .timeout = 90)
{
	char dir[] = "/tmp/mpadm-mock-XXXXXX", sock[100], more[200], coll[64], coll2[64];
	char key[32];
	FILE *mock;
	int port = h_mock_backend_start(dir, &mock), fd1, fd2, mfd;
	struct proxy *p;
	mongoc_client_t *admin;
	bson_t row, reply, *rel;
	uint8_t *msg;
	size_t len;

	snprintf(more, sizeof(more), "backend_uri = mongodb://127.0.0.1:%d/\npool_size = 1\n",
		 port);
	p = start_with_socket(sock, sizeof(sock), more);
	admin = h_socket_client(sock, "adm-run");
	snprintf(key, sizeof(key), "K%d", (int)getpid());
	snprintf(coll, sizeof(coll), "h_%s_one", key);
	snprintf(coll2, sizeof(coll2), "h_%s_two", key);
	fd1 = send_find(p, coll);
	wait_row(admin, "servers", "running", "find", &row);
	cr_assert_str_eq(h_get_str(&row, "state"), "active");
	cr_assert(h_get_int(&row, "running_ms", -1) >= 0);
	bson_destroy(&row);
	fd2 = send_find(p, coll2); /* pool_size 1: it waits */
	wait_row(admin, "clients", "state", "waiting", &row);
	cr_assert_eq(h_get_int(&row, "in_flight", -1), 1);
	bson_destroy(&row);
	wait_row(admin, "clients", "state", "running", &row);
	bson_destroy(&row);
	show(admin, "pools", &reply);
	cr_assert_eq(h_get_int(&reply, "rows.0.in_use", -1), 1);
	cr_assert_eq(h_get_int(&reply, "rows.0.waiting", -1), 1);
	cr_assert_eq(h_get_int(&reply, "rows.0.limit", -1), 1);
	cr_assert(h_get_int(&reply, "rows.0.oldest_wait_ms", -1) >= 0);
	bson_destroy(&reply);

	mfd = raw_connect_to("127.0.0.1", port); /* release both, straight at the mock */
	rel = BCON_NEW("mockRelease", BCON_UTF8(key), "$db", BCON_UTF8("admin"));
	cr_assert(raw_command(mfd, 1, rel, &reply, 10000));
	bson_destroy(&reply);
	bson_destroy(rel);
	close(mfd);
	cr_assert_eq(raw_recv_msg(fd1, &msg, &len, 10000), RAW_OK);
	free(msg);
	cr_assert_eq(raw_recv_msg(fd2, &msg, &len, 10000), RAW_OK);
	free(msg);
	wait_row(admin, "servers", "state", "idle", &row);
	cr_assert_str_eq(h_get_str(&row, "running"), "");
	cr_assert(h_get_int(&row, "requests", 0) >= 2, "it served both finds");
	bson_destroy(&row);
	close(fd1);
	close(fd2);
	mongoc_client_destroy(admin);
	proxy_stop(p);
	pclose(mock);
	snprintf(more, sizeof(more), "rm -rf %s", dir);
	cr_assert_eq(system(more), 0);
}

/* ------------------------------------------------------------ paging */

Test(admin_show, paging, .timeout = 60)
{
	char sock[100], json[200];
	struct proxy *p = start_with_socket(sock, sizeof(sock), NULL);
	mongoc_client_t *admin = h_socket_client(sock, "adm-page");
	int fds[30], pages = 0;
	int64_t skip = 0, total = -1, rows = 0, seen_ids[64] = {0};
	bson_t reply;
	bson_error_t err;

	for (int i = 0; i < 30; i++) {
		fds[i] = raw_connect(p);
		cr_assert(raw_ping_ok(fds[i], 5000));
	}
	for (;;) {
		bson_iter_t it, r;

		snprintf(json, sizeof(json),
			 "{\"mongoplexShow\": \"clients\", \"skip\": %lld, \"maxBytes\": 1024}",
			 (long long)skip);
		cr_assert(h_cmd_json(admin, "admin", json, &reply, &err), "%s", err.message);
		cr_assert_lt(reply.len, 1024 + 1200, "a page stays near its bound: %u", reply.len);
		total = h_get_int(&reply, "total", -1);
		cr_assert(bson_iter_init_find(&it, &reply, "rows") && bson_iter_recurse(&it, &r));
		while (bson_iter_next(&r)) {
			bson_iter_t id;

			cr_assert(bson_iter_recurse(&r, &id) && bson_iter_find(&id, "id"));
			cr_assert_lt(bson_iter_as_int64(&id), 64);
			seen_ids[bson_iter_as_int64(&id)]++;
			rows++;
		}
		pages++;
		if (!h_get_bool(&reply, "truncated")) {
			bson_destroy(&reply);
			break;
		}
		cr_assert_gt(h_get_int(&reply, "next", -1), skip, "paging advances");
		skip = h_get_int(&reply, "next", -1);
		bson_destroy(&reply);
	}
	cr_assert_eq(total, 31, "30 clients and the admin");
	cr_assert_eq(rows, 31, "every client once over %d pages", pages);
	cr_assert_gt(pages, 2, "maxBytes 1024 splits 31 rows");
	for (int i = 0; i < 64; i++)
		cr_assert_leq(seen_ids[i], 1, "client %d listed twice", i);
	for (int i = 0; i < 30; i++)
		close(fds[i]);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* Hello metadata is the client's: kept bounded and valid UTF-8 when cut. */
Test(admin_show, hello_metadata_bounded, .timeout = 60)
{
	char sock[100], app[402] = "a", drv[301];
	struct proxy *p = start_with_socket(sock, sizeof(sock), NULL);
	mongoc_client_t *admin = h_socket_client(sock, "adm-meta");
	int fd = raw_connect(p);
	bson_t *hello, reply, row;
	const char *v;

	for (int i = 0; i < 200; i++)
		strcat(app, "\xc3\xa9"); /* "a" + é: 401 bytes; byte 128 starts an é */
	memset(drv, 'd', 300);
	drv[300] = '\0';
	hello = BCON_NEW("hello", BCON_INT32(1), "$db", BCON_UTF8("admin"), "client", "{",
			 "application", "{", "name", BCON_UTF8(app), "}", "driver", "{", "name",
			 BCON_UTF8(drv), "version", BCON_UTF8("1.0"), "}", "}");
	cr_assert(raw_command(fd, 1, hello, &reply, 10000), "hello");
	bson_destroy(&reply);
	bson_destroy(hello);
	show(admin, "clients", &reply);
	cr_assert(bson_validate(&reply, BSON_VALIDATE_UTF8, NULL), "show clients is valid UTF-8");
	cr_assert(find_row(&reply, "driver_version", "1.0", false, &row));
	v = h_get_str(&row, "app_name");
	cr_assert_eq(strlen(v), 127, "cut at its buffer, before the split é: %zu", strlen(v));
	cr_assert(bson_utf8_validate(v, strlen(v), false));
	cr_assert_eq(strlen(h_get_str(&row, "driver")), 64);
	bson_destroy(&row);
	bson_destroy(&reply);
	close(fd);
	mongoc_client_destroy(admin);
	proxy_stop(p);
}

/* ------------------------------------------------------------ who may */

/* The code of {mongoplexShow: "pools"} through c (0: ok); errmsg into msg. */
static int show_code(mongoc_client_t *c, char *msg, size_t len)
{
	bson_t reply;
	bson_error_t err;
	int code = 0;

	if (!h_cmd_json(c, "admin", "{\"mongoplexShow\": \"pools\"}", &reply, &err)) {
		code = (int)err.code;
		snprintf(msg, len, "%s", err.message);
	}
	bson_destroy(&reply);
	return code;
}

/* A client running as uid 65534 (nobody) on a world-writable socket is
 * refused: the socket admits it, SO_PEERCRED says it is not the owner. */
Test(admin_show, socket_other_uid, .timeout = 60)
{
	char sock[100], msg[400];
	struct proxy *p;
	pid_t child;
	int status = 0;

	if (geteuid() != 0) {
		cr_assert(getenv("CI") == NULL,
			  "needs root to connect as another uid (CI runs as root)");
		cr_skip_test("needs root to connect as another uid (run as root, as CI does)");
	}
	p = start_with_socket(sock, sizeof(sock), "unix_socket_mode = 0777\n");
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		mongoc_client_t *c;

		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		c = h_socket_client(sock, "adm-nobody");
		_exit(show_code(c, msg, sizeof(msg)) == 13 ? 0 : 1);
	}
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the uid 65534 client was not refused with 13 (exit status %d)", status);
	cr_assert(log_wait(p, "admin command mongoplexShow refused", 5000));
	cr_assert_eq(proxy_counter(p, "admin_refused"), 1);
	proxy_stop(p);
}

Test(admin_show, config_and_scram, .timeout = 120)
{
	struct h_ferret fe;
	char users[400], cmd[1500], out[2000], extra[1500], uri[400], msg[400];
	struct proxy *p;
	mongoc_client_t *c;
	bson_t reply, row;

	h_ferret_shared(&fe, "ferretdb-auth");
	cr_assert(fe.password[0] != '\0', "ferretdb-auth has a password");
	snprintf(users, sizeof(users), "%s/adm-users-%d", fe.scratch, (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "rm -f %s; for u in admin.alice app.bob; do printf '%%s\\n' pw-$u | %s "
		 "--scram-secret $u >> %s 2>/dev/null || exit 1; done; chmod 600 %s",
		 users, h_proxy_binary(), users, users);
	cr_assert_eq(h_sh_capture(cmd, out, sizeof(out), 60000), 0, "%s", out);
	snprintf(extra, sizeof(extra),
		 "backend_uri = mongodb://%s:%s@%s:%d/\nauth_mode = scram\nauth_users_file = %s\n"
		 "auth_pool_mode = shared\nadmin_users = alice\n",
		 fe.user, fe.password, fe.host, fe.port, users);
	p = proxy_start(extra);

	snprintf(uri, sizeof(uri), "mongodb://alice:pw-admin.alice@127.0.0.1:%d/?authSource=admin",
		 p->port);
	c = h_client_uri(uri, "adm-alice");
	show(c, "config", &reply);
	cr_assert(find_row(&reply, "name", "backend_uri", false, &row));
	cr_assert(strstr(h_get_str(&row, "value"), fe.password) == NULL, "password shown: %s",
		  h_get_str(&row, "value"));
	cr_assert(strstr(h_get_str(&row, "value"), ":***@") != NULL, "%s",
		  h_get_str(&row, "value"));
	cr_assert(!h_get_bool(&row, "reloadable"));
	bson_destroy(&row);
	cr_assert(find_row(&reply, "name", "pool_size", false, &row));
	cr_assert(h_get_bool(&row, "reloadable"));
	cr_assert_str_eq(h_get_str(&row, "value"), "4", "the harness's pool_size");
	bson_destroy(&row);
	cr_assert(find_row(&reply, "name", "admin_users", false, &row));
	cr_assert_str_eq(h_get_str(&row, "value"), "alice");
	bson_destroy(&row);
	{
		char *j = bson_as_relaxed_extended_json(&reply, NULL);

		cr_assert(strstr(j, fe.password) == NULL, "the password is nowhere in show config");
		bson_free(j);
	}
	bson_destroy(&reply);
	show(c, "clients", &reply);
	cr_assert(find_row(&reply, "app_name", "adm-alice", false, &row));
	cr_assert_str_eq(h_get_str(&row, "user"), "admin.alice");
	bson_destroy(&row);
	bson_destroy(&reply);
	mongoc_client_destroy(c);

	snprintf(uri, sizeof(uri), "mongodb://bob:pw-app.bob@127.0.0.1:%d/?authSource=app",
		 p->port);
	c = h_client_uri(uri, "adm-bob");
	cr_assert_eq(show_code(c, msg, sizeof(msg)), 13, "bob is not an admin: %s", msg);
	cr_assert(strstr(msg, "user app.bob is not in admin_users") != NULL, "%s", msg);
	mongoc_client_destroy(c);
	cr_assert(log_wait(p, "admin command mongoplexShow refused: user app.bob", 5000));

	snprintf(uri, sizeof(uri), "mongodb://127.0.0.1:%d/", p->port);
	c = h_client_uri(uri, "adm-anon");
	cr_assert_eq(show_code(c, msg, sizeof(msg)), 13, "not logged in: %s", msg);
	mongoc_client_destroy(c);
	proxy_stop(p);
	unlink(users);
	h_ferret_stop(&fe);
}

Test(admin_show, refusals_auth_none, .timeout = 60)
{
	char sock[100], msg[400];
	struct proxy *p = start_with_socket(sock, sizeof(sock), NULL);
	mongoc_client_t *tcp = h_proxy_client(p, "adm-tcp"),
			*owner = h_socket_client(sock, "adm-own");
	bson_t reply, row;

	cr_assert_eq(show_code(tcp, msg, sizeof(msg)), 13, "TCP with auth_mode = none: %s", msg);
	cr_assert(strstr(msg, "only the unix socket's owner") != NULL, "%s", msg);
	cr_assert(log_wait(p, "admin command mongoplexShow refused", 5000));
	cr_assert_eq(proxy_counter(p, "admin_refused"), 1);
	cr_assert_eq(show_code(owner, msg, sizeof(msg)), 0, "the socket's owner may: %s", msg);
	show(owner, "mem", &reply);
	cr_assert(find_row(&reply, "name", "rss_bytes", false, &row));
	cr_assert_gt(h_get_int(&row, "value", -1), 0, "RSS is known");
	bson_destroy(&row);
	bson_destroy(&reply);
	cr_assert_eq(proxy_counter(p, "admin_commands"), 2);
	mongoc_client_destroy(tcp);
	mongoc_client_destroy(owner);
	proxy_stop(p);
}

/* ------------------------------------------------------------ the CLI */

static int cli(const char *args, char *out, size_t len)
{
	char cmd[800];

	snprintf(cmd, sizeof(cmd), "%s --admin %s 2>&1", h_proxy_binary(), args);
	return h_sh_capture(cmd, out, len, 30000);
}

Test(admin_show, cli, .timeout = 60)
{
	char sock[100], args[400], out[20000];
	struct proxy *p = start_with_socket(sock, sizeof(sock), NULL);
	bson_error_t err;
	bson_t *j;
	int st;

	snprintf(args, sizeof(args), "%s show pools", sock);
	st = cli(args, out, sizeof(out));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	cr_assert(strstr(out, " member ") != NULL && strstr(out, "| in_use |") != NULL, "%s", out);
	cr_assert(strstr(out, "-+-") != NULL && strstr(out, "\n(1 row)\n") != NULL, "%s", out);

	snprintf(args, sizeof(args), "%s --json show mem", sock);
	st = cli(args, out, sizeof(out));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", out);
	j = bson_new_from_json((const uint8_t *)out, -1, &err);
	cr_assert_not_null(j, "--json is JSON: %s (%s)", err.message, out);
	cr_assert_eq(h_get_int(j, "rows.0.value", -1), 1, "one client: the CLI (%s)", out);
	cr_assert_str_eq(h_get_str(j, "rows.0.name"), "clients");
	bson_destroy(j);

	snprintf(args, sizeof(args), "%s show nothing", sock);
	st = cli(args, out, sizeof(out));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s", out);
	cr_assert(strstr(out, "mongoplexShow takes a list name") != NULL, "%s", out);

	snprintf(args, sizeof(args), "mongodb://127.0.0.1:%d/ show clients", p->port);
	st = cli(args, out, sizeof(out));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s", out);
	cr_assert(strstr(out, "not authorized to run mongoplexShow") != NULL, "%s", out);

	snprintf(args, sizeof(args), "%s frobnicate", sock);
	st = cli(args, out, sizeof(out));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s", out);
	proxy_stop(p);
}

Test(admin_show, cli_backend_down, .timeout = 60)
{
	char sock[100], args[400], out[20000], extra[300], msg[400];
	struct proxy *p;
	mongoc_client_t *tcp;
	bson_error_t err;
	bson_t reply;
	int st;

	snprintf(extra, sizeof(extra), "backend_uri = mongodb://127.0.0.1:%d/\n", h_free_port());
	p = start_with_socket(sock, sizeof(sock), extra);
	/* the first hello makes the pool try (and fail) a connect */
	tcp = h_proxy_client(p, "adm-tcp-down");
	cr_assert_not(h_cmd_json(tcp, "admin", "{\"ping\": 1}", &reply, &err),
		      "a ping with the backend down succeeded");
	bson_destroy(&reply);
	snprintf(msg, sizeof(msg), "%s", err.message);
	snprintf(args, sizeof(args), "%s show pools", sock);
	st = cli(args, out, sizeof(out));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the console with the backend down: %s",
		  out);
	cr_assert(strstr(out, "\n(1 row)\n") != NULL, "%s", out);
	cr_assert_not(h_cmd_json(tcp, "admin", "{\"ping\": 1}", &reply, &err),
		      "a TCP client's command with the backend down succeeded (first: %s)", msg);
	bson_destroy(&reply);
	mongoc_client_destroy(tcp);
	proxy_stop(p);
}
