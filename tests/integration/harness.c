/*
 * harness.c — see harness.h.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MP_BINARY
#define MP_BINARY "mongoplex"
#endif

/* ================================================================ environment */

const char *h_backend_uri(void)
{
	const char *uri = getenv("MONGOPLEX_TEST_URI");

	cr_assert(uri != NULL && *uri != '\0',
		  "MONGOPLEX_TEST_URI is not set: run the suite through scripts/test.sh, or start "
		  "a backend (scripts/backend.sh start java DIR) and export its URI");
	return uri;
}

const char *h_backend_name(void)
{
	const char *b = getenv("MONGOPLEX_TEST_BACKEND");

	return b != NULL && *b != '\0' ? b : "external";
}

bool h_backend_is(const char *name)
{
	return strcmp(h_backend_name(), name) == 0;
}

const char *h_direct_uri(void)
{
	const char *uri = getenv("MONGOPLEX_TEST_DIRECT_URI");

	return uri != NULL && *uri != '\0' ? uri : h_backend_uri();
}

static void first_host(const char *what, const char *s, char *host, size_t hostlen, int *port)
{
	mongoc_uri_t *uri = mongoc_uri_new(s);
	const mongoc_host_list_t *hl;

	cr_assert(uri != NULL, "the %s URI is not valid: %s", what, s);
	hl = mongoc_uri_get_hosts(uri);
	cr_assert(hl != NULL, "no host in the %s URI %s", what, s);
	snprintf(host, hostlen, "%s", hl->host);
	*port = hl->port;
	mongoc_uri_destroy(uri);
}

void h_backend_hostport(char *host, size_t hostlen, int *port)
{
	first_host("direct backend", h_direct_uri(), host, hostlen, port);
}

void h_proxy_backend_hostport(char *host, size_t hostlen, int *port)
{
	first_host("backend", h_backend_uri(), host, hostlen, port);
}

void h_unique(char *buf, size_t len, const char *prefix)
{
	static int n;
	static uint32_t salt;

	/* pids wrap, and a failed run leaves its database behind: add
	 * randomness so a later process cannot reuse the name. */
	while (salt == 0 && getrandom(&salt, sizeof(salt), 0) != (ssize_t)sizeof(salt))
		;
	snprintf(buf, len, "%s_%d_%08x_%d", prefix, (int)getpid(), salt, n++);
}

long h_raise_nofile(long want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < want) {
		if (rl.rlim_max != RLIM_INFINITY && (long)rl.rlim_max < want) {
			struct rlimit up = {(rlim_t)want, (rlim_t)want};

			if (setrlimit(RLIMIT_NOFILE, &up) == 0)
				rl = up;
			else
				rl.rlim_cur = rl.rlim_max;
		} else {
			rl.rlim_cur = (rlim_t)want;
		}
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur == RLIM_INFINITY ? 1L << 30 : (long)rl.rlim_cur;
}

int64_t h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void quiet_log(mongoc_log_level_t level, const char *domain, const char *message,
		      void *data);

/* ================================================================ the proxy */

const char *h_proxy_binary(void)
{
	const char *b = getenv("MONGOPLEX_BIN");

	return b != NULL && *b != '\0' ? b : MP_BINARY;
}

const char *h_pymongo4_python(void)
{
	static char path[4096];
	const char *env = getenv("MONGOPLEX_PYMONGO4_PYTHON"), *cache = getenv("MONGOPLEX_CACHE");

	if (env != NULL && *env != '\0')
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path), "%s/pymongo4-venv/bin/python",
			 cache != NULL && *cache != '\0' ? cache : MP_SOURCE_DIR "/.cache");
	cr_assert(access(path, X_OK) == 0,
		  "no pymongo 4.x Python at %s (run scripts/install-deps.sh test, or set "
		  "MONGOPLEX_CACHE or MONGOPLEX_PYMONGO4_PYTHON)",
		  path);
	return path;
}

const char *h_node_modules(void)
{
	static char path[400];
	const char *env = getenv("MONGOPLEX_NODE_MODULES");
	char cmd[1500], out[3000];
	int st;

	if (env != NULL && *env != '\0')
		return env;
	snprintf(path, sizeof(path), "%s/tests/drivers/node_modules", MP_SOURCE_DIR);
	snprintf(cmd, sizeof(cmd),
		 "cd %s/tests/drivers && exec 9<package-lock.json && flock 9 && "
		 "{ [ -x node_modules/.bin/mongosh ] && [ -f node_modules/mongodb/package.json "
		 "] || npm ci --ignore-scripts --no-audit --no-fund --loglevel=error; } 2>&1",
		 MP_SOURCE_DIR);
	st = h_sh_capture(cmd, out, sizeof(out), 600000);
	cr_assert(st == 0, "npm ci of tests/drivers (the Node driver and mongosh) failed: %s", out);
	return path;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *data = NULL;
	size_t len = 0, cap = 0, n;

	if (f == NULL)
		return strdup("");
	do {
		if (cap - len < 65536) {
			cap = cap ? cap * 2 : 131072;
			data = realloc(data, cap + 1);
		}
		n = fread(data + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	data[len] = '\0';
	return data;
}

char *proxy_log(struct proxy *p)
{
	return read_file(p->log_path);
}

char *proxy_log_tail(struct proxy *p, size_t max_bytes)
{
	char *all = proxy_log(p);
	size_t len = strlen(all);

	if (len > max_bytes) {
		char *start = all + len - max_bytes, *nl = strchr(start, '\n');

		if (nl != NULL && nl[1] != '\0')
			start = nl + 1;
		memmove(all, start, strlen(start) + 1);
	}
	return all;
}

bool log_contains(struct proxy *p, const char *substring)
{
	char *all = proxy_log(p);
	bool found = strstr(all, substring) != NULL;

	free(all);
	return found;
}

bool log_wait(struct proxy *p, const char *substring, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;

	for (;;) {
		if (log_contains(p, substring))
			return true;
		if (h_now_ms() >= deadline)
			return false;
		h_sleep_ms(20);
	}
}

static bool log_has_client_line(struct proxy *p, const char *peer, const char *substring)
{
	char *all = proxy_log(p), *line = all;
	bool found = false;

	while (line != NULL && *line != '\0' && !found) {
		char *nl = strchr(line, '\n');

		if (nl != NULL)
			*nl = '\0';
		found = strstr(line, peer) != NULL && strstr(line, substring) != NULL;
		line = nl != NULL ? nl + 1 : NULL;
	}
	free(all);
	return found;
}

bool log_wait_client(struct proxy *p, int fd, const char *substring, int timeout_ms)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	char peer[64];
	int64_t deadline = h_now_ms() + timeout_ms;

	if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
		return false;
	snprintf(peer, sizeof(peer), "127.0.0.1:%u: ", ntohs(sa.sin_port));
	for (;;) {
		if (log_has_client_line(p, peer, substring))
			return true;
		if (h_now_ms() >= deadline)
			return false;
		h_sleep_ms(20);
	}
}

long proxy_status_kb(struct proxy *p, const char *field)
{
	char path[64], line[256];
	size_t flen = strlen(field);
	FILE *f;
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)p->pid);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, field, flen) == 0 && line[flen] == ':') {
			kb = strtol(line + flen + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

long proxy_rss_kb(struct proxy *p)
{
	return proxy_status_kb(p, "VmRSS");
}

bool proxy_alive(struct proxy *p)
{
	int st;

	if (p->exited)
		return false;
	if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
		p->exited = true;
		p->wait_status = st;
		return false;
	}
	return true;
}

static void describe_status(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(buf, len, "wait status 0x%x", st);
}

void proxy_assert_alive(struct proxy *p, const char *when)
{
	char why[64];
	char *tail;

	if (proxy_alive(p))
		return;
	describe_status(p->wait_status, why, sizeof(why));
	tail = proxy_log_tail(p, 8000);
	cr_assert_fail("mongoplex died %s (%s); log %s:\n%s", when, why, p->log_path, tail);
}

/* Proxies of this test process, killed at exit if a failed test left them. */
#define MAX_PROXIES 16
static struct proxy *live_proxies[MAX_PROXIES];

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[600];

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

__attribute__((destructor)) static void kill_leftover_proxies(void)
{
	for (int i = 0; i < MAX_PROXIES; i++) {
		struct proxy *p = live_proxies[i];

		if (p == NULL)
			continue;
		if (!p->exited) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
		}
		live_proxies[i] = NULL;
	}
}

/* Is `key` set by one of the lines of `extra`? */
static bool extra_sets(const char *extra, const char *key)
{
	size_t klen = strlen(key);
	const char *line = extra;

	while (line != NULL && *line != '\0') {
		while (*line == ' ' || *line == '\t')
			line++;
		if (strncmp(line, key, klen) == 0 &&
		    (line[klen] == ' ' || line[klen] == '=' || line[klen] == '\t'))
			return true;
		line = strchr(line, '\n');
		if (line != NULL)
			line++;
	}
	return false;
}

static void write_config(struct proxy *p, const char *extra)
{
	FILE *f = fopen(p->cfg_path, "w");

	cr_assert(f != NULL, "cannot write %s: %s", p->cfg_path, strerror(errno));
	fprintf(f, "[mongoplex]\n");
	if (extra == NULL)
		extra = "";
	if (!extra_sets(extra, "listen_addr"))
		fprintf(f, "listen_addr = 127.0.0.1\n");
	if (!extra_sets(extra, "listen_port"))
		fprintf(f, "listen_port = 0\n");
	if (!extra_sets(extra, "backend_uri"))
		fprintf(f, "backend_uri = %s\n", h_backend_uri());
	if (!extra_sets(extra, "pool_size"))
		fprintf(f, "pool_size = 4\n");
	if (!extra_sets(extra, "log_level"))
		fprintf(f, "log_level = info\n");
	fprintf(f, "%s\n", extra);
	fclose(f);
}

static void close_fds_from(int lowfd)
{
	long max = sysconf(_SC_OPEN_MAX);
	DIR *d = opendir("/proc/self/fd");

	if (d != NULL) {
		struct dirent *e;
		int dfd = dirfd(d);

		while ((e = readdir(d)) != NULL) {
			int fd = atoi(e->d_name);

			if (e->d_name[0] != '.' && fd >= lowfd && fd != dfd)
				close(fd);
		}
		closedir(d);
		return;
	}
	for (long fd = lowfd; fd < max; fd++)
		close((int)fd);
}

/* The port from "listening on HOST:PORT" in the log, or 0. */
static int port_from_log(struct proxy *p)
{
	char *all = proxy_log(p), *s = strstr(all, "listening on "), *end, *colon;
	int port = 0;

	if (s != NULL) {
		s += strlen("listening on ");
		end = s + strcspn(s, " \n");
		*end = '\0';
		colon = strrchr(s, ':');
		if (colon != NULL)
			port = atoi(colon + 1);
	}
	free(all);
	return port;
}

struct proxy *proxy_start(const char *extra)
{
	struct proxy *p = calloc(1, sizeof(*p));
	const char *tmp = getenv("TMPDIR");
	int64_t deadline;
	char why[64];
	int slot;

	cr_assert(p != NULL);
	mongoc_init();
	mongoc_log_set_handler(quiet_log, NULL);
	snprintf(p->dir, sizeof(p->dir), "%s/mongoplex-itest-XXXXXX",
		 tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	cr_assert(mkdtemp(p->dir) != NULL, "mkdtemp: %s", strerror(errno));
	snprintf(p->log_path, sizeof(p->log_path), "%s/proxy.log", p->dir);
	snprintf(p->cfg_path, sizeof(p->cfg_path), "%s/mongoplex.ini", p->dir);
	write_config(p, extra);

	fflush(NULL);
	p->pid = fork();
	cr_assert(p->pid >= 0, "fork: %s", strerror(errno));
	if (p->pid == 0) {
		int log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
		int null_fd = open("/dev/null", O_RDWR);

		/* Die with the test process, even if it crashes. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (log_fd < 0 || null_fd < 0)
			_exit(126);
		dup2(null_fd, 0);
		dup2(log_fd, 1);
		dup2(log_fd, 2);
		close_fds_from(3);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		execl(h_proxy_binary(), h_proxy_binary(), "-c", p->cfg_path, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", h_proxy_binary(), strerror(errno));
		_exit(127);
	}
	for (slot = 0; slot < MAX_PROXIES && live_proxies[slot] != NULL; slot++)
		;
	if (slot < MAX_PROXIES)
		live_proxies[slot] = p;

	/* Sanitizer builds start slowly; allow plenty. */
	deadline = h_now_ms() + 30000;
	while (p->port == 0) {
		p->port = port_from_log(p);
		if (p->port != 0)
			break;
		if (!proxy_alive(p)) {
			char *tail = proxy_log_tail(p, 4000);

			describe_status(p->wait_status, why, sizeof(why));
			cr_assert_fail("mongoplex (%s) died during startup (%s); log %s:\n%s",
				       h_proxy_binary(), why, p->log_path, tail);
		}
		if (h_now_ms() > deadline) {
			char *tail = proxy_log_tail(p, 4000);

			cr_assert_fail(
			    "mongoplex did not log \"listening on\" within 30 s; log:\n%s", tail);
		}
		h_sleep_ms(10);
	}
	for (;;) {
		int fd = raw_connect_to("127.0.0.1", p->port);

		if (fd >= 0) {
			close(fd);
			break;
		}
		if (!proxy_alive(p) || h_now_ms() > deadline) {
			char *tail = proxy_log_tail(p, 4000);

			cr_assert_fail(
			    "mongoplex on port %d is not accepting connections; log:\n%s", p->port,
			    tail);
		}
		h_sleep_ms(10);
	}
	snprintf(p->uri, sizeof(p->uri), "mongodb://127.0.0.1:%d/", p->port);
	return p;
}

static void forget(struct proxy *p)
{
	for (int i = 0; i < MAX_PROXIES; i++)
		if (live_proxies[i] == p)
			live_proxies[i] = NULL;
}

void proxy_discard(struct proxy *p)
{
	cr_assert(p->exited, "proxy_discard of a proxy still running");
	forget(p);
	if (getenv("MONGOPLEX_KEEP_TMP") == NULL)
		remove_dir(p->dir);
	free(p);
}

void proxy_stop(struct proxy *p)
{
	int64_t deadline;
	char why[64];
	int st;

	if (p == NULL)
		return;
	if (!p->exited) {
		kill(p->pid, SIGINT);
		deadline = h_now_ms() + 30000;
		while (proxy_alive(p) && h_now_ms() < deadline)
			h_sleep_ms(10);
		if (!p->exited) {
			char *tail = proxy_log_tail(p, 4000);

			kill(p->pid, SIGKILL);
			waitpid(p->pid, &st, 0);
			p->exited = true;
			cr_assert_fail("mongoplex did not exit within 30 s of SIGINT; log:\n%s",
				       tail);
		}
	}
	forget(p);
	st = p->wait_status;
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		char *tail = proxy_log_tail(p, 12000);

		describe_status(st, why, sizeof(why));
		cr_assert_fail("mongoplex did not exit cleanly on SIGINT (%s; 23 = sanitizer leak "
			       "report); log %s:\n%s",
			       why, p->log_path, tail);
	}
	if (getenv("MONGOPLEX_KEEP_TMP") == NULL)
		remove_dir(p->dir);
	free(p);
}

/* ================================================================ libmongoc */

static void quiet_log(mongoc_log_level_t level, const char *domain, const char *message, void *data)
{
	(void)data;
	/* FerretDB has no endSessions; libmongoc warns at every client_destroy. */
	if (level <= MONGOC_LOG_LEVEL_WARNING && strstr(message, "endSessions") == NULL)
		fprintf(stderr, "libmongoc %s: %s\n", domain, message);
}

mongoc_client_t *h_client_uri(const char *uri_str, const char *appname)
{
	bson_error_t err;
	mongoc_uri_t *uri;
	mongoc_client_t *c;

	mongoc_init();
	mongoc_log_set_handler(quiet_log, NULL);
	uri = mongoc_uri_new_with_error(uri_str, &err);
	if (uri == NULL)
		return NULL;
	if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
	if (!mongoc_uri_has_option(uri, MONGOC_URI_CONNECTTIMEOUTMS))
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_CONNECTTIMEOUTMS, 5000);
	if (!mongoc_uri_has_option(uri, MONGOC_URI_SOCKETTIMEOUTMS))
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, 60000);
	mongoc_uri_set_appname(uri, appname != NULL ? appname : "mongoplex-itest");
	c = mongoc_client_new_from_uri(uri);
	mongoc_uri_destroy(uri);
	if (c != NULL)
		mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
	return c;
}

mongoc_client_t *h_proxy_client(struct proxy *p, const char *appname)
{
	mongoc_client_t *c = h_client_uri(p->uri, appname);

	cr_assert(c != NULL, "cannot create a client for %s", p->uri);
	return c;
}

struct proxy *proxy_start_admin(const char *extra)
{
	char sock[108], cfg[4096];
	struct proxy *p;

	snprintf(sock, sizeof(sock), "/tmp/mpadm-%d-%d.sock", (int)getpid(), rand() % 1000000);
	snprintf(cfg, sizeof(cfg), "unix_socket = %s\n%s", sock, extra ? extra : "");
	p = proxy_start(cfg);
	cr_assert(log_wait(p, "listening on unix socket", 5000), "no unix socket");
	snprintf(p->admin_sock, sizeof(p->admin_sock), "%s", sock);
	return p;
}

mongoc_client_t *h_socket_client(const char *path, const char *appname)
{
	char uri[400];
	size_t n = (size_t)snprintf(uri, sizeof(uri), "mongodb://");
	mongoc_client_t *c;

	for (const char *s = path; *s != '\0' && n < sizeof(uri) - 4; s++)
		n += (size_t)snprintf(uri + n, sizeof(uri) - n, *s == '/' ? "%%2F" : "%c", *s);
	snprintf(uri + n, sizeof(uri) - n, "/");
	c = h_client_uri(uri, appname);
	cr_assert(c != NULL, "cannot create a client for %s", uri);
	return c;
}

mongoc_client_t *h_proxy_admin_client(struct proxy *p, const char *appname)
{
	cr_assert(p->admin_sock[0] != '\0', "proxy started without proxy_start_admin");
	return h_socket_client(p->admin_sock, appname);
}

mongoc_client_t *h_backend_client(const char *appname)
{
	mongoc_client_t *c = h_client_uri(h_direct_uri(), appname);

	cr_assert(c != NULL, "cannot create a client for %s", h_direct_uri());
	return c;
}

bool h_cmd(mongoc_client_t *c, const char *db, const bson_t *cmd, bson_t *reply, bson_error_t *err)
{
	bson_error_t local;

	return mongoc_client_command_simple(c, db, cmd, NULL, reply, err ? err : &local);
}

bool h_cmd_json(mongoc_client_t *c, const char *db, const char *json, bson_t *reply,
		bson_error_t *err)
{
	bson_error_t perr;
	bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &perr);
	bool ok;

	if (cmd == NULL) {
		bson_init(reply);
		if (err != NULL)
			*err = perr;
		return false;
	}
	ok = h_cmd(c, db, cmd, reply, err);
	bson_destroy(cmd);
	return ok;
}

void h_stats(mongoc_client_t *c, bson_t *out)
{
	bson_error_t err;
	bson_t cmd = BSON_INITIALIZER;
	bool ok;

	BSON_APPEND_INT32(&cmd, "mongoplexStats", 1);
	ok = h_cmd(c, "admin", &cmd, out, &err);
	bson_destroy(&cmd);
	cr_assert(ok, "mongoplexStats failed: %s", err.message);
}

void proxy_stats(struct proxy *p, bson_t *out)
{
	mongoc_client_t *c = h_proxy_client(p, "itest-stats");

	h_stats(c, out);
	mongoc_client_destroy(c);
}

int64_t h_counter(const bson_t *stats, const char *name)
{
	char path[128];
	int64_t v;

	snprintf(path, sizeof(path), "counters.%s", name);
	v = h_get_int(stats, path, INT64_MIN);
	cr_assert_neq(v, INT64_MIN, "mongoplexStats has no %s", path);
	return v;
}

int64_t proxy_counter(struct proxy *p, const char *name)
{
	bson_t st;
	int64_t v;

	proxy_stats(p, &st);
	v = h_counter(&st, name);
	bson_destroy(&st);
	return v;
}

static bool iter_path(const bson_t *doc, const char *path, bson_iter_t *out)
{
	bson_iter_t it;

	return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, out);
}

int64_t h_get_int(const bson_t *doc, const char *path, int64_t dflt)
{
	bson_iter_t it;

	if (!iter_path(doc, path, &it) || !BSON_ITER_HOLDS_NUMBER(&it))
		return dflt;
	return bson_iter_as_int64(&it);
}

bool h_get_bool(const bson_t *doc, const char *path)
{
	bson_iter_t it;

	if (!iter_path(doc, path, &it))
		return false;
	if (BSON_ITER_HOLDS_BOOL(&it))
		return bson_iter_bool(&it);
	return BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_int64(&it) != 0;
}

const char *h_get_str(const bson_t *doc, const char *path)
{
	bson_iter_t it;

	if (!iter_path(doc, path, &it) || !BSON_ITER_HOLDS_UTF8(&it))
		return NULL;
	return bson_iter_utf8(&it, NULL);
}

static const char *const volatile_fields[] = {
    "$clusterTime",	   "operationTime",	 "electionId",	  "opTime",	  "$gleStats",
    "lastCommittedOpTime", "$configServerState", "$topologyTime", "connectionId", NULL};

void h_strip_volatile(const bson_t *doc, bson_t *out)
{
	bson_iter_t it;

	bson_init(out);
	if (!bson_iter_init(&it, doc))
		return;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		bool skip = false;

		for (int i = 0; volatile_fields[i] != NULL; i++)
			skip = skip || strcmp(k, volatile_fields[i]) == 0;
		if (!skip)
			bson_append_iter(out, k, -1, &it);
	}
}

bool h_same_reply(const bson_t *a, const bson_t *b, char **why)
{
	bson_t sa, sb;
	bool same;

	h_strip_volatile(a, &sa);
	h_strip_volatile(b, &sb);
	same = bson_equal(&sa, &sb);
	if (!same && why != NULL) {
		char *ja = bson_as_relaxed_extended_json(&sa, NULL);
		char *jb = bson_as_relaxed_extended_json(&sb, NULL);

		*why = bson_strdup_printf("proxy: %s\ndirect: %s", ja, jb);
		bson_free(ja);
		bson_free(jb);
	} else if (why != NULL) {
		*why = NULL;
	}
	bson_destroy(&sa);
	bson_destroy(&sb);
	return same;
}

int64_t h_all_docs(mongoc_client_t *c, const char *db, const char *coll, bson_t *out)
{
	mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
	bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort;
	mongoc_cursor_t *cur;
	const bson_t *doc;
	bson_error_t err;
	int64_t n = 0;
	char key[24];
	const char *k;

	BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
	BSON_APPEND_INT32(&sort, "_id", 1);
	bson_append_document_end(&opts, &sort);
	bson_init(out);
	cur = mongoc_collection_find_with_opts(col, &filter, &opts, NULL);
	while (mongoc_cursor_next(cur, &doc)) {
		bson_uint32_to_string((uint32_t)n, &k, key, sizeof(key));
		bson_append_document(out, k, -1, doc);
		n++;
	}
	if (mongoc_cursor_error(cur, &err))
		n = -1;
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(col);
	bson_destroy(&filter);
	bson_destroy(&opts);
	return n;
}

void h_drop_db(mongoc_client_t *c, const char *db)
{
	mongoc_database_t *d = mongoc_client_get_database(c, db);

	mongoc_database_drop(d, NULL);
	mongoc_database_destroy(d);
}

/* ================================================================ raw wire */

void hb_init(struct h_buf *b)
{
	b->data = NULL;
	b->len = b->cap = 0;
}

void hb_free(struct h_buf *b)
{
	free(b->data);
	hb_init(b);
}

void hb_add(struct h_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap < b->len + n)
			cap *= 2;
		b->data = realloc(b->data, cap);
		cr_assert(b->data != NULL, "out of memory");
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

void hb_i32(struct h_buf *b, int32_t v)
{
	uint32_t le = BSON_UINT32_TO_LE((uint32_t)v);

	hb_add(b, &le, 4);
}

void hb_i64(struct h_buf *b, int64_t v)
{
	uint64_t le = BSON_UINT64_TO_LE((uint64_t)v);

	hb_add(b, &le, 8);
}

void hb_u8(struct h_buf *b, uint8_t v)
{
	hb_add(b, &v, 1);
}

void hb_cstr(struct h_buf *b, const char *s)
{
	hb_add(b, s, strlen(s) + 1);
}

void hb_doc(struct h_buf *b, const bson_t *doc)
{
	hb_add(b, bson_get_data(doc), doc->len);
}

void hb_set_i32(struct h_buf *b, size_t off, int32_t v)
{
	uint32_t le = BSON_UINT32_TO_LE((uint32_t)v);

	cr_assert(off + 4 <= b->len);
	memcpy(b->data + off, &le, 4);
}

void hb_header(struct h_buf *b, int32_t request_id, int32_t response_to, int32_t opcode)
{
	hb_i32(b, 0);
	hb_i32(b, request_id);
	hb_i32(b, response_to);
	hb_i32(b, opcode);
}

uint32_t h_crc32c(const uint8_t *p, size_t n)
{
	uint32_t crc = 0xFFFFFFFFu;

	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
	}
	return ~crc;
}

void hb_finish(struct h_buf *b, bool checksum)
{
	if (checksum) {
		hb_set_i32(b, 0, (int32_t)(b->len + 4));
		hb_i32(b, (int32_t)h_crc32c(b->data, b->len));
	} else {
		hb_set_i32(b, 0, (int32_t)b->len);
	}
}

void h_build_msg(struct h_buf *b, int32_t request_id, uint32_t flags, const bson_t *body)
{
	hb_header(b, request_id, 0, H_WIRE_OP_MSG);
	hb_i32(b, (int32_t)flags);
	hb_u8(b, 0);
	hb_doc(b, body);
	hb_finish(b, (flags & H_MSG_CHECKSUM) != 0);
}

void h_build_query(struct h_buf *b, int32_t request_id, const char *ns, const bson_t *query)
{
	hb_header(b, request_id, 0, H_WIRE_OP_QUERY);
	hb_i32(b, 0); /* flags */
	hb_cstr(b, ns);
	hb_i32(b, 0);  /* numberToSkip */
	hb_i32(b, -1); /* numberToReturn */
	hb_doc(b, query);
	hb_finish(b, false);
}

int raw_connect_to(const char *host, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd, one = 1;

	if (inet_pton(AF_INET, strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, &sa.sin_addr) !=
	    1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int raw_connect(struct proxy *p)
{
	return raw_connect_to("127.0.0.1", p->port);
}

bool raw_send(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Read exactly n bytes before the deadline. */
static enum raw_status read_full(int fd, uint8_t *buf, size_t n, int64_t deadline)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left = deadline - h_now_ms();
		ssize_t r;
		int pr;

		if (left <= 0)
			return RAW_TIMEOUT;
		pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return RAW_ERROR;
		if (pr == 0)
			return RAW_TIMEOUT;
		r = recv(fd, buf + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == ECONNRESET ? RAW_EOF : RAW_ERROR;
		if (r == 0)
			return RAW_EOF;
		got += (size_t)r;
	}
	return RAW_OK;
}

enum raw_status raw_recv_msg(int fd, uint8_t **msg, size_t *len, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	uint8_t hdr[16];
	enum raw_status st;
	int32_t mlen;

	*msg = NULL;
	*len = 0;
	st = read_full(fd, hdr, 16, deadline);
	if (st != RAW_OK)
		return st;
	memcpy(&mlen, hdr, 4);
	mlen = (int32_t)BSON_UINT32_FROM_LE((uint32_t)mlen);
	if (mlen < 16 || mlen > 64 * 1024 * 1024)
		return RAW_ERROR;
	*msg = malloc((size_t)mlen);
	memcpy(*msg, hdr, 16);
	st = read_full(fd, *msg + 16, (size_t)mlen - 16, deadline);
	if (st != RAW_OK) {
		free(*msg);
		*msg = NULL;
		return st;
	}
	*len = (size_t)mlen;
	return RAW_OK;
}

bool raw_wait_closed(int fd, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	uint8_t buf[65536];

	for (;;) {
		enum raw_status st;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t left = deadline - h_now_ms();
		ssize_t r;

		if (left <= 0)
			return false;
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		r = recv(fd, buf, sizeof(buf), 0);
		if (r == 0 || (r < 0 && errno == ECONNRESET))
			return true;
		st = r < 0 && errno != EINTR && errno != EAGAIN ? RAW_ERROR : RAW_OK;
		if (st == RAW_ERROR)
			return true;
	}
}

const char *raw_status_name(enum raw_status s)
{
	static const char *const names[] = {"ok", "connection closed", "timeout", "error"};

	return names[s];
}

bool raw_parse_reply(const uint8_t *msg, size_t len, struct raw_reply *r)
{
	memset(r, 0, sizeof(*r));
	if (len < 16)
		return false;
	memcpy(&r->len, msg, 4);
	memcpy(&r->request_id, msg + 4, 4);
	memcpy(&r->response_to, msg + 8, 4);
	memcpy(&r->opcode, msg + 12, 4);
	r->len = (int32_t)BSON_UINT32_FROM_LE((uint32_t)r->len);
	r->request_id = (int32_t)BSON_UINT32_FROM_LE((uint32_t)r->request_id);
	r->response_to = (int32_t)BSON_UINT32_FROM_LE((uint32_t)r->response_to);
	r->opcode = (int32_t)BSON_UINT32_FROM_LE((uint32_t)r->opcode);
	if ((size_t)r->len != len)
		return false;
	if (r->opcode == H_WIRE_OP_MSG) {
		size_t off = 21, end = len;
		int32_t dlen;

		if (len < 21 + 5)
			return false;
		memcpy(&r->flags, msg + 16, 4);
		r->flags = BSON_UINT32_FROM_LE(r->flags);
		if (r->flags & H_MSG_CHECKSUM)
			end -= 4;
		/* The body is the kind-0 section; replies carry only that. */
		if (msg[20] != 0)
			return false;
		memcpy(&dlen, msg + off, 4);
		dlen = (int32_t)BSON_UINT32_FROM_LE((uint32_t)dlen);
		if (dlen < 5 || off + (size_t)dlen > end)
			return false;
		r->have_doc = bson_init_static(&r->doc, msg + off, (size_t)dlen);
		return r->have_doc && bson_validate(&r->doc, BSON_VALIDATE_NONE, NULL);
	}
	if (r->opcode == H_WIRE_OP_REPLY) {
		int32_t dlen;

		if (len < 36)
			return false;
		memcpy(&r->flags, msg + 16, 4);
		r->flags = BSON_UINT32_FROM_LE(r->flags);
		memcpy(&r->n_returned, msg + 32, 4);
		r->n_returned = (int32_t)BSON_UINT32_FROM_LE((uint32_t)r->n_returned);
		if (r->n_returned < 1 || len < 36 + 5)
			return true;
		memcpy(&dlen, msg + 36, 4);
		dlen = (int32_t)BSON_UINT32_FROM_LE((uint32_t)dlen);
		if (dlen < 5 || 36 + (size_t)dlen > len)
			return false;
		r->have_doc = bson_init_static(&r->doc, msg + 36, (size_t)dlen);
		return r->have_doc && bson_validate(&r->doc, BSON_VALIDATE_NONE, NULL);
	}
	return false;
}

bool raw_command(int fd, int32_t request_id, const bson_t *cmd, bson_t *reply, int timeout_ms)
{
	struct h_buf b;
	struct raw_reply r;
	uint8_t *msg;
	size_t len;
	bool ok = false;

	bson_init(reply);
	hb_init(&b);
	h_build_msg(&b, request_id, 0, cmd);
	if (!raw_send(fd, b.data, b.len)) {
		hb_free(&b);
		return false;
	}
	hb_free(&b);
	if (raw_recv_msg(fd, &msg, &len, timeout_ms) != RAW_OK)
		return false;
	if (raw_parse_reply(msg, len, &r) && r.have_doc && r.response_to == request_id) {
		bson_destroy(reply);
		bson_copy_to(&r.doc, reply);
		ok = true;
	}
	free(msg);
	return ok;
}

bool raw_ping_ok(int fd, int timeout_ms)
{
	static int32_t next_id = 700000;
	bson_t cmd = BSON_INITIALIZER, reply;
	bool ok;

	BSON_APPEND_INT32(&cmd, "ping", 1);
	BSON_APPEND_UTF8(&cmd, "$db", "admin");
	ok =
	    raw_command(fd, next_id++, &cmd, &reply, timeout_ms) && h_get_int(&reply, "ok", 0) == 1;
	bson_destroy(&cmd);
	bson_destroy(&reply);
	return ok;
}

bool h_has_label(const bson_t *reply, const char *label)
{
	bson_iter_t it, arr;

	if (!bson_iter_init_find(&it, reply, "errorLabels") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &arr))
		return false;
	while (bson_iter_next(&arr))
		if (BSON_ITER_HOLDS_UTF8(&arr) && strcmp(bson_iter_utf8(&arr, NULL), label) == 0)
			return true;
	return false;
}

void h_close_fds_above(int lowfd)
{
	for (int fd = lowfd; fd < 1024; fd++)
		close(fd);
}

int h_run_capture(const char *const argv[], char *out, size_t outlen, int timeout_ms)
{
	int pipefd[2], st = -1;
	size_t got = 0;
	int64_t deadline = h_now_ms() + timeout_ms;
	pid_t pid;

	cr_assert(pipe2(pipefd, O_CLOEXEC) == 0);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int null_fd = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null_fd, 0);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		h_close_fds_above(3);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	for (;;) {
		struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
		int64_t left = deadline - h_now_ms();
		char buf[4096];
		ssize_t n;

		if (left <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			st = -1;
			break;
		}
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		n = read(pipefd[0], buf, sizeof(buf));
		if (n <= 0) {
			waitpid(pid, &st, 0);
			break;
		}
		if (got + (size_t)n < outlen) {
			memcpy(out + got, buf, (size_t)n);
			got += (size_t)n;
		}
	}
	out[got] = '\0';
	close(pipefd[0]);
	return st;
}

int h_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);

	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

char *h_get_metrics(int port)
{
	int fd = raw_connect_to("127.0.0.1", port);
	const char req[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);
	ssize_t r;

	cr_assert(fd >= 0 && buf != NULL);
	cr_assert(raw_send(fd, req, sizeof(req) - 1));
	while (n + 1 < cap && (r = read(fd, buf + n, cap - n - 1)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	close(fd);
	return buf;
}
