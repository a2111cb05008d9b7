/*
 * test_unixsock.c — the unix socket listener's file: created with
 * unix_socket_mode (default 0700, never wider at any moment), and an existing
 * file at the path is replaced only if it is a stale socket (nothing accepts
 * on it); a regular file, a directory, a symlink or a live socket makes the
 * proxy refuse to start, naming the path, and is left as it was.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static void sock_path(char *buf, size_t len, const char *tag)
{
	snprintf(buf, len, "/tmp/mongoplex-usock-%d-%s.sock", (int)getpid(), tag);
	unlink(buf);
}

/* A unix socket bound at path; listening if `listen_too`. Returns the fd. */
static int bind_unix(const char *path, bool listen_too)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&un, sizeof(un)), 0, "bind %s: %s", path,
		     strerror(errno));
	if (listen_too)
		cr_assert_eq(listen(fd, 8), 0, "listen: %s", strerror(errno));
	return fd;
}

static bool unix_connects(const char *path)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&un, sizeof(un)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static unsigned file_mode(const char *path)
{
	struct stat st;

	cr_assert_eq(lstat(path, &st), 0, "stat %s: %s", path, strerror(errno));
	return (unsigned)(st.st_mode & 07777);
}

/* A ping through the proxy's unix socket (mongodb://%2F... URI). */
static void ping_over(const char *path)
{
	char uri[300], *o = uri + snprintf(uri, sizeof(uri), "mongodb://");
	mongoc_client_t *c;
	bson_t reply;
	bson_error_t err;

	for (const char *s = path; *s; s++)
		o += *s == '/' ? sprintf(o, "%%2F") : sprintf(o, "%c", *s);
	snprintf(o, sizeof(uri) - (size_t)(o - uri), "/");
	c = h_client_uri(uri, "unixsock-test");
	cr_assert(h_cmd_json(c, "admin", "{\"ping\": 1}", &reply, &err), "ping over %s: %s", path,
		  err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
}

/* Run the proxy with `extra` settings, expecting it to exit on its own
 * within 30 s; returns its exit status, *log its output (malloc'd). */
static int run_expect_exit(const char *extra, char **log)
{
	char dir[] = "/tmp/mongoplex-usock-XXXXXX", cfg[300], logp[300];
	const char *bin = getenv("MONGOPLEX_BIN");
	FILE *f;
	pid_t pid;
	int st = 0;
	int64_t deadline = h_now_ms() + 30000;
	long n;

	if (bin == NULL || *bin == '\0')
		bin = MP_BINARY;
	cr_assert(mkdtemp(dir) != NULL);
	snprintf(cfg, sizeof(cfg), "%s/mongoplex.ini", dir);
	snprintf(logp, sizeof(logp), "%s/proxy.log", dir);
	f = fopen(cfg, "w");
	cr_assert(f != NULL);
	fprintf(f, "[mongoplex]\nlisten_addr = 127.0.0.1\nlisten_port = 0\nbackend_uri = %s\n%s\n",
		h_backend_uri(), extra);
	fclose(f);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "-c", cfg, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (h_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			cr_assert_fail("the proxy did not exit within 30 s (%s)", extra);
		}
		h_sleep_ms(20);
	}
	f = fopen(logp, "r");
	cr_assert(f != NULL);
	*log = calloc(1, 65536);
	n = (long)fread(*log, 1, 65535, f);
	(*log)[n > 0 ? n : 0] = '\0';
	fclose(f);
	unlink(cfg);
	unlink(logp);
	rmdir(dir);
	return st;
}

/* The proxy must refuse `path` in its current state: exit non-zero with an
 * error naming the path. */
static void expect_refused(const char *path, const char *what)
{
	char extra[400], *log = NULL;
	int st;

	snprintf(extra, sizeof(extra), "unix_socket = %s", path);
	st = run_expect_exit(extra, &log);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0,
		  "%s: the proxy did not refuse to start (status %d); log:\n%s", what, st, log);
	cr_assert(strstr(log, path) != NULL && strstr(log, "fatal") != NULL,
		  "%s: no fatal error naming %s; log:\n%s", what, path, log);
	cr_log_info("%s: %s", what, strstr(log, "fatal"));
	free(log);
}

Test(unixsock, default_mode_0700, .timeout = 60)
{
	char path[128], extra[200];
	struct proxy *p;

	sock_path(path, sizeof(path), "default");
	snprintf(extra, sizeof(extra), "unix_socket = %s\n", path);
	p = proxy_start(extra);
	cr_assert(log_wait(p, "listening on unix socket", 5000));
	cr_assert_eq(file_mode(path), 0700, "socket mode %04o, expected 0700", file_mode(path));
	ping_over(path);
	proxy_stop(p);
}

Test(unixsock, configured_mode_0660, .timeout = 60)
{
	char path[128], extra[200];
	struct proxy *p;
	mode_t old = umask(0); /* the proxy's umask must not matter */

	sock_path(path, sizeof(path), "0660");
	snprintf(extra, sizeof(extra), "unix_socket = %s\nunix_socket_mode = 0660\n", path);
	p = proxy_start(extra);
	umask(old);
	cr_assert(log_wait(p, "listening on unix socket", 5000));
	cr_assert_eq(file_mode(path), 0660, "socket mode %04o, expected 0660", file_mode(path));
	ping_over(path);
	proxy_stop(p);
}

Test(unixsock, regular_file_refused_and_kept, .timeout = 60)
{
	char path[128], buf[64] = "";
	FILE *f;

	sock_path(path, sizeof(path), "file");
	f = fopen(path, "w");
	cr_assert(f != NULL);
	fputs("precious data\n", f);
	fclose(f);
	expect_refused(path, "regular file");
	f = fopen(path, "r");
	cr_assert(f != NULL, "the file at %s was removed", path);
	cr_assert(fgets(buf, sizeof(buf), f) != NULL);
	fclose(f);
	cr_assert_str_eq(buf, "precious data\n", "the file was changed");
	unlink(path);
}

Test(unixsock, directory_and_symlink_refused, .timeout = 60)
{
	char path[128], target[160];

	sock_path(path, sizeof(path), "dir");
	cr_assert_eq(mkdir(path, 0755), 0);
	expect_refused(path, "directory");
	cr_assert_eq(rmdir(path), 0, "the directory is gone or changed");
	sock_path(path, sizeof(path), "link");
	snprintf(target, sizeof(target), "%s.target", path);
	cr_assert_eq(symlink(target, path), 0);
	expect_refused(path, "dangling symlink");
	cr_assert_eq(unlink(path), 0, "the symlink was removed");
}

Test(unixsock, live_socket_refused, .timeout = 60)
{
	char path[128];
	int fd;

	sock_path(path, sizeof(path), "live");
	fd = bind_unix(path, true);
	expect_refused(path, "live socket");
	cr_assert(unix_connects(path), "the other process's socket no longer accepts");
	close(fd);
	unlink(path);
}

Test(unixsock, stale_socket_replaced, .timeout = 60)
{
	char path[128], extra[200];
	struct proxy *p;

	sock_path(path, sizeof(path), "stale");
	close(bind_unix(path, false)); /* the file stays: a stale socket */
	cr_assert(!unix_connects(path));
	snprintf(extra, sizeof(extra), "unix_socket = %s\n", path);
	p = proxy_start(extra);
	cr_assert(log_wait(p, "listening on unix socket", 5000));
	cr_assert(log_contains(p, "removed a stale socket file"));
	ping_over(path);
	proxy_stop(p);
	cr_assert_neq(access(path, F_OK), 0, "socket file %s left behind", path);
}
