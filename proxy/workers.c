/*
 * workers.c — the master of workers = N > 1 (PgBouncer's so_reuseport,
 * nginx's master and workers). After the config is loaded the master
 * reserves the TCP port (a bound, never listening SO_REUSEPORT socket: port
 * 0 is resolved once for all), maps the shared stats slots (core/wstats.c)
 * and forks N workers. Each worker runs proxy_main unchanged with its share
 * of the limits (cfg_for_worker) and its own listening socket on the same
 * port; the kernel spreads connections over them.
 *
 * The master runs no event loop: signals are blocked and taken with
 * sigtimedwait, so no work runs in a raw handler.
 *   SIGHUP          config re-read and validated here; if valid, sent on to
 *                   every worker (each reloads whole or not at all)
 *   SIGTERM/SIGINT  sent on; the master exits when every worker has
 *   worker exits    logged (pid, code or signal) and restarted, at most
 *                   RESTARTS_PER_SEC a second; a worker that exits before
 *                   it ever listened is retried with backoff, and after
 *                   START_FAILURES in a row the master stops all, exits 1
 *   readiness       sd_notify READY=1 once every worker listens
 *   master dies     every worker gets SIGTERM (PR_SET_PDEATHSIG) and drains
 */
#include "proxy/workers.h"

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mongoc/mongoc.h>

#ifdef MP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "core/globals.h"
#include "core/log.h"
#include "core/wstats.h"
#include "proxy/proxy.h"
#include "proxy/reload.h"

#define MAX_WORKERS	 64
#define RESTARTS_PER_SEC 5
#define START_FAILURES	 5

struct worker {
	pid_t pid;	       /* 0: not running */
	int start_failures;    /* exits in a row before listening */
	uint64_t restart_usec; /* when to fork it again (pid 0) */
};

static struct worker ws[MAX_WORKERS];
static int nw;
static sigset_t master_set, old_set;
static bool stopping, notified;
static uint64_t window_usec; /* restart-rate window start */
static int window_restarts;

static void notify(const char *state)
{
#ifdef MP_HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

int workers_wanted(const struct cfg *cfg)
{
	long n = cfg->workers;

	if (n == 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n > MAX_WORKERS ? MAX_WORKERS : (int)n;
}

/* Resolve and hold listen_addr:listen_port so every worker binds the same port. */
static int reserve_port(struct cfg *cfg)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICHOST};
	struct addrinfo *res;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char port[8];
	int fd, one = 1;

	if (cfg->listen_addr[0] == '\0')
		return -1;
	snprintf(port, sizeof(port), "%d", (int)cfg->listen_port);
	if (getaddrinfo(cfg->listen_addr, port, &hints, &res) != 0)
		fatal("listen_addr \"%s\" does not resolve", cfg->listen_addr);
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		fatal("cannot listen on %s:%s: %s", cfg->listen_addr, port, strerror(errno));
	freeaddrinfo(res);
	cfg->listen_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							  : ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

static void start_worker(int i, struct cfg *cfg, const char *path, int port_fd)
{
	pid_t pid, master = getpid();
	int rc;

	wstats_slot(i)->ready = 0;
	pid = fork();
	if (pid < 0) {
		log_error("workers: fork of worker %d failed: %s; retrying in 1 s", i,
			  strerror(errno));
		ws[i].restart_usec = proxy_tick() + 1000000;
		return;
	}
	if (pid == 0) {
		/* A master that dies (SIGKILL, a crash) takes its workers with
		 * it: each gets SIGTERM and drains, instead of serving on with
		 * nobody to restart, reload or stop it. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != master)
			_exit(1);
		if (port_fd >= 0)
			close(port_fd);
		sigprocmask(SIG_SETMASK, &old_set, NULL);
		g.nworkers = nw;
		g.worker_id = i;
		wstats_attach(i);
		cfg_for_worker(cfg, nw, i);
		/* exit, not _exit: a worker ends as the single process does (the
		 * ASan build's leak check runs in it too). */
		rc = proxy_main(cfg, path);
		mongoc_cleanup();
		exit(rc);
	}
	ws[i].pid = pid;
	wstats_slot(i)->pid = pid;
	log_notice("workers: worker %d started (pid %d)", i, (int)pid);
}

static void send_all(int sig)
{
	for (int i = 0; i < nw; i++)
		if (ws[i].pid > 0)
			kill(ws[i].pid, sig);
}

static int running(void)
{
	int n = 0;

	for (int i = 0; i < nw; i++)
		n += ws[i].pid > 0;
	return n;
}

/* A worker ended: log it, and unless stopping, plan its restart. */
static void worker_ended(int i, int st)
{
	bool listened = wstats_slot(i)->ready != 0;
	uint64_t now = proxy_tick(), delay = 0;

	if (WIFSIGNALED(st))
		log_error("workers: worker %d (pid %d) killed by signal %d", i, (int)ws[i].pid,
			  WTERMSIG(st));
	else
		log_notice("workers: worker %d (pid %d) exited with code %d", i, (int)ws[i].pid,
			   WEXITSTATUS(st));
	ws[i].pid = 0;
	if (stopping) { /* the master's code: the first worker's that was not 0 */
		if (g.exit_code == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			g.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
		return;
	}
	ws[i].start_failures = listened ? 0 : ws[i].start_failures + 1;
	if (ws[i].start_failures >= START_FAILURES) {
		log_error("workers: worker %d failed %d times in a row before it listened; "
			  "stopping every worker and exiting",
			  i, START_FAILURES);
		stopping = true;
		g.exit_code = 1;
		send_all(SIGTERM);
		return;
	}
	if (ws[i].start_failures > 0)
		delay = 100000ULL << ws[i].start_failures; /* 0.2 s, 0.4 s, ... */
	if (now - window_usec >= 1000000) {
		window_usec = now;
		window_restarts = 0;
	}
	if (++window_restarts > RESTARTS_PER_SEC && delay < 1000000)
		delay = 1000000;
	ws[i].restart_usec = now + delay;
	wstats_slot(i)->restarts++;
}

static void reap(void)
{
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		for (int i = 0; i < nw; i++)
			if (ws[i].pid == pid)
				worker_ended(i, st);
}

/* The master checks the file as a worker will (reload_prepare: the
 * settings, the users file, the backend password, the client TLS files),
 * so that a reload applies to every worker or to none; a valid file
 * becomes the master's config too (its static settings kept, as each
 * worker keeps them), so that a worker restarted after a reload starts
 * with what the others now run, not with the file of the start. */
static void reload(struct cfg *cfg, const char *path)
{
	char err[CFG_ERR_LEN];
	struct reload_parts rp;
	struct cfg next, saved = g.cfg;
	bool ok;

	if (path == NULL) {
		log_error("workers: SIGHUP: reload rejected, not sent to the workers: no config "
			  "file (-c)");
		return;
	}
	g.cfg = *cfg; /* what reload_prepare compares the static settings with */
	ok = reload_prepare(path, &rp, err, sizeof(err));
	g.cfg = saved;
	reload_discard(&rp);
	if (!ok || !cfg_load(path, &next, err, sizeof(err))) {
		log_error("workers: SIGHUP: reload rejected, not sent to the workers: %s", err);
		return;
	}
	cfg_keep_static(cfg, &next);
	cfg_free(cfg);
	*cfg = next;
	log_info("workers: SIGHUP: configuration valid, reloading every worker");
	send_all(SIGHUP);
}

static void on_signal(int sig, struct cfg *cfg, const char *path)
{
	switch (sig) {
	case SIGHUP:
		reload(cfg, path);
		break;
	case SIGTERM:
	case SIGINT:
		log_notice("workers: %s: sent to every worker",
			   sig == SIGTERM ? "SIGTERM" : "SIGINT");
		if (!stopping)
			notify("STOPPING=1");
		stopping = true;
		send_all(sig);
		break;
	case SIGCHLD:
		reap();
		break;
	}
}

static void check_ready(void)
{
	for (int i = 0; i < nw; i++)
		if (ws[i].pid == 0 || !wstats_slot(i)->ready)
			return;
	notified = true;
	log_notice("workers: all %d workers listening", nw);
	notify("READY=1");
}

int workers_main(struct cfg *cfg, const char *path, int n)
{
	struct timespec tick = {0, 50 * 1000 * 1000};
	int port_fd, sig;

	nw = n;
	g.nworkers = n;
	log_current_level = cfg->log_level;
	if (!wstats_create(n))
		fatal("workers: cannot map the shared stats: %s", strerror(errno));
	port_fd = reserve_port(cfg);
	sigemptyset(&master_set);
	sigaddset(&master_set, SIGHUP);
	sigaddset(&master_set, SIGTERM);
	sigaddset(&master_set, SIGINT);
	sigaddset(&master_set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &master_set, &old_set);
	log_notice("workers: master (pid %d) starting %d workers on port %d", (int)getpid(), n,
		   (int)cfg->listen_port);
	for (int i = 0; i < n; i++)
		start_worker(i, cfg, path, port_fd);
	while (!stopping || running() > 0) {
		sig = sigtimedwait(&master_set, NULL, &tick);
		if (sig > 0)
			on_signal(sig, cfg, path);
		reap();
		for (int i = 0; i < nw && !stopping; i++)
			if (ws[i].pid == 0 && proxy_tick() >= ws[i].restart_usec)
				start_worker(i, cfg, path, port_fd);
		if (!notified && !stopping)
			check_ready();
	}
	log_notice("workers: every worker has exited; master exiting");
	if (port_fd >= 0)
		close(port_fd);
	cfg_free(cfg);
	return g.exit_code;
}
