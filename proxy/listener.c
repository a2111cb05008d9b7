/*
 * listener.c — accepts client connections (evconnlistener) on TCP and,
 * optionally, a unix socket. Accept failures such as running out of file
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
	struct evconnlistener *l = evconnlistener_new_bind(
	    g.base, accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 1024, sa, (int)len);

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

static bool listen_unix(char *err, size_t errlen)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};

	if (strlen(g.cfg.unix_socket) >= sizeof(un.sun_path)) {
		snprintf(err, errlen, "unix_socket path too long");
		return false;
	}
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", g.cfg.unix_socket);
	unlink(un.sun_path);
	if (!add_listener((struct sockaddr *)&un, sizeof(un), g.cfg.unix_socket, err, errlen))
		return false;
	chmod(un.sun_path, 0777);
	log_notice("listening on unix socket %s", g.cfg.unix_socket);
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
	if (g.cfg.unix_socket[0] != '\0')
		unlink(g.cfg.unix_socket);
	if (resume_ev != NULL) {
		event_free(resume_ev);
		resume_ev = NULL;
	}
}
