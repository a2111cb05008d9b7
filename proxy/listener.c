/*
 * listener.c — accepts client connections (evconnlistener) on TCP and,
 * optionally, a unix socket (mode unix_socket_mode; an existing file at its
 * path is removed only if it is a stale socket). Accept failures such as running out of file
 * descriptors pause accepting for a second instead of spinning.
 */
#include "proxy/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/listener.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proxy/client.h"
#include "proxy/proxy.h"

#define MAX_LISTENERS 2

static struct evconnlistener *listeners[MAX_LISTENERS];
static int nlisteners;
static struct event *resume_ev;
static bool unix_bound; /* the socket file at g.cfg.unix_socket is ours to remove */

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *addr, int len,
		      void *arg)
{
	(void)l;
	(void)arg;
	proxy_tick();
	if (g.shutting_down) {
		close(fd);
		return;
	}
	client_accept(fd, addr, len);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	for (int i = 0; i < nlisteners; i++)
		evconnlistener_enable(listeners[i]);
}

static void error_cb(struct evconnlistener *l, void *arg)
{
	struct timeval one_sec = {1, 0};
	int err = EVUTIL_SOCKET_ERROR();

	(void)arg;
	log_error("accept failed: %s; pausing accepts for 1 s", evutil_socket_error_to_string(err));
	evconnlistener_disable(l);
	event_add(resume_ev, &one_sec);
}

static bool add_listener(const struct sockaddr *sa, socklen_t len, const char *what, char *err,
			 size_t errlen)
{
	/* workers > 1: every worker listens on the same port (proxy/workers.c). */
	unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC |
			 (g.nworkers > 1 && sa->sa_family != AF_UNIX ? LEV_OPT_REUSEABLE_PORT : 0);
	struct evconnlistener *l =
	    evconnlistener_new_bind(g.base, accept_cb, NULL, flags, 1024, sa, (int)len);

	if (l == NULL) {
		snprintf(err, errlen, "cannot listen on %s: %s", what, strerror(errno));
		return false;
	}
	evconnlistener_set_error_cb(l, error_cb);
	listeners[nlisteners++] = l;
	return true;
}

static bool listen_tcp(char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICHOST};
	struct addrinfo *res;
	struct sockaddr_storage bound;
	socklen_t blen = sizeof(bound);
	char port[8], what[300], host[INET6_ADDRSTRLEN];
	int rc;

	snprintf(port, sizeof(port), "%d", (int)g.cfg.listen_port);
	rc = getaddrinfo(g.cfg.listen_addr, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "listen_addr \"%s\": %s", g.cfg.listen_addr,
			 gai_strerror(rc));
		return false;
	}
	snprintf(what, sizeof(what), "%s:%s", g.cfg.listen_addr, port);
	if (!add_listener(res->ai_addr, res->ai_addrlen, what, err, errlen)) {
		freeaddrinfo(res);
		return false;
	}
	freeaddrinfo(res);
	getsockname(evconnlistener_get_fd(listeners[nlisteners - 1]), (struct sockaddr *)&bound,
		    &blen);
	if (bound.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&bound)->sin6_addr, host,
			  sizeof(host));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&bound)->sin_addr, host, sizeof(host));
	log_notice("listening on %s:%u", host,
		   ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
						     : ((struct sockaddr_in *)&bound)->sin_port));
	return true;
}

/* Is a socket file in use? Something accepting on it means another
 * process serves that path; ECONNREFUSED means nothing does (stale). */
static bool socket_is_stale(const struct sockaddr_un *un, char *err, size_t errlen)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc, e;

	if (fd < 0) {
		snprintf(err, errlen, "unix_socket %s: socket: %s", un->sun_path, strerror(errno));
		return false;
	}
	rc = connect(fd, (const struct sockaddr *)un, sizeof(*un));
	e = errno;
	close(fd);
	if (rc == 0) {
		snprintf(err, errlen,
			 "unix_socket %s: another process is accepting connections on it; "
			 "refusing to take it over",
			 un->sun_path);
		return false;
	}
	if (e != ECONNREFUSED) {
		snprintf(err, errlen, "unix_socket %s exists and cannot be probed (connect: %s)",
			 un->sun_path, strerror(e));
		return false;
	}
	return true;
}

/* Make the path free for bind: nothing there, or a stale socket (removed).
 * Anything else (a file, directory, symlink, live socket) is refused. */
static bool clear_unix_path(const struct sockaddr_un *un, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(un->sun_path, &st) != 0) {
		if (errno == ENOENT)
			return true;
		snprintf(err, errlen, "unix_socket %s: %s", un->sun_path, strerror(errno));
		return false;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen,
			 "unix_socket %s exists and is not a socket; refusing to remove it "
			 "(choose another path or remove it yourself)",
			 un->sun_path);
		return false;
	}
	if (!socket_is_stale(un, err, errlen))
		return false;
	if (unlink(un->sun_path) != 0 && errno != ENOENT) {
		snprintf(err, errlen, "unix_socket %s: cannot remove the stale socket: %s",
			 un->sun_path, strerror(errno));
		return false;
	}
	log_notice("unix_socket %s: removed a stale socket file", un->sun_path);
	return true;
}

static bool listen_unix(char *err, size_t errlen)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	mode_t mode = (mode_t)g.cfg.unix_socket_mode, old_umask;
	bool ok;

	if (strlen(g.cfg.unix_socket) >= sizeof(un.sun_path)) {
		snprintf(err, errlen, "unix_socket path too long");
		return false;
	}
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", g.cfg.unix_socket);
	if (!clear_unix_path(&un, err, errlen))
		return false;
	/* bind creates the file with 0777 & ~umask: the umask alone gives it the
	 * configured mode, with no moment at which it is wider (a chmod after
	 * bind would leave one; fchmod does not apply to a socket's file). The
	 * proxy has one thread, so the process-wide umask is safe to swap. */
	old_umask = umask(~mode & 0777);
	ok = add_listener((struct sockaddr *)&un, sizeof(un), g.cfg.unix_socket, err, errlen);
	umask(old_umask);
	if (!ok)
		return false;
	unix_bound = true;
	log_notice("listening on unix socket %s (mode %04o)", g.cfg.unix_socket, (unsigned)mode);
	return true;
}

bool listener_start(char *err, size_t errlen)
{
	resume_ev = evtimer_new(g.base, resume_cb, NULL);
	if (g.cfg.listen_addr[0] != '\0' && !listen_tcp(err, errlen))
		return false;
	if (g.cfg.unix_socket[0] != '\0' && !listen_unix(err, errlen))
		return false;
	return true;
}

void listener_stop(void)
{
	for (int i = 0; i < nlisteners; i++)
		evconnlistener_free(listeners[i]);
	nlisteners = 0;
	if (unix_bound) {
		unlink(g.cfg.unix_socket);
		unix_bound = false;
	}
	if (resume_ev != NULL) {
		event_free(resume_ev);
		resume_ev = NULL;
	}
}
