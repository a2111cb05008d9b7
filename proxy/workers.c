/*
 * workers.c — the master of workers = N > 1 (PgBouncer's so_reuseport,
 * nginx's master and workers). After the config is loaded the master
 * reserves the TCP port (a bound, never listening SO_REUSEPORT socket: port
 * 0 is resolved once for all), maps the shared stats slots (core/wstats.c)
 * and forks N workers. Each worker runs proxy_main unchanged with its share
 * of the limits (cfg_for_worker) and its own listening socket on the same
 * port; the kernel spreads connections over them.
 *
 * The master runs no event loop: signals are blocked and read from a
 * signalfd in a poll loop with the control channels (proxy/wctl_master.c:
 * console commands run on every worker), so no work runs in a raw handler.
 *   SIGHUP          config re-read and validated here; if valid, sent on to
 *                   every worker (each reloads whole or not at all)
 *   SIGTERM/SIGINT  sent on; the master exits when every worker has
 *   worker exits    logged (pid, code or signal) and restarted, at most
 *                   WORKERS_RESTARTS_PER_SEC a second; a worker that exits before
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
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
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
#include "proxy/wctl_master.h"

#define START_FAILURES 5

struct worker {
	pid_t pid;	       /* 0: not running */
	int start_failures;    /* exits in a row before listening */
	uint64_t restart_usec; /* when to fork it again (pid 0) */
};

static struct worker ws[WORKERS_MAX];
static int nw, sig_fd = -1;
static struct cfg *master_cfg; /* the file's settings, as the workers run them */
static const char *master_path;
static sigset_t master_set, old_set;
static bool stopping, notified;
static struct workers_restart_window window; /* the restart-rate window */

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
	return n > WORKERS_MAX ? WORKERS_MAX : (int)n;
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
	int rc, ctl = wm_open(i);

	wstats_slot(i)->ready = 0;
	pid = fork();
	if (pid < 0) {
		log_error("workers: fork of worker %d failed: %s; retrying in 1 s", i,
			  strerror(errno));
		if (ctl >= 0)
			close(ctl);
		wm_gone(i);
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
		if (sig_fd >= 0)
			close(sig_fd);
		wm_child();
		g.ctl_fd = ctl;
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
	if (ctl >= 0)
		close(ctl);
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

uint64_t workers_restart_delay(struct workers_restart_window *w, uint64_t now_usec,
			       int start_failures)
{
	uint64_t delay = 0;

	if (start_failures > 0)
		delay = 100000ULL << (start_failures < 20 ? start_failures : 20); /* 0.2 s, ... */
	if (now_usec - w->start_usec >= 1000000) {
		w->start_usec = now_usec;
		w->restarts = 0;
	}
	if (++w->restarts > WORKERS_RESTARTS_PER_SEC && delay < 1000000)
		delay = 1000000;
	return delay;
}

/* A worker ended: log it, and unless stopping, plan its restart. */
static void worker_ended(int i, int st)
{
	bool listened = wstats_slot(i)->ready != 0;
	uint64_t now = proxy_tick(), delay;

	if (WIFSIGNALED(st))
		log_error("workers: worker %d (pid %d) killed by signal %d", i, (int)ws[i].pid,
			  WTERMSIG(st));
	else
		log_notice("workers: worker %d (pid %d) exited with code %d", i, (int)ws[i].pid,
			   WEXITSTATUS(st));
	ws[i].pid = 0;
	wm_gone(i);
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
	delay = workers_restart_delay(&window, now, ws[i].start_failures);
	if (delay >= 1000000 && ws[i].start_failures == 0)
		log_warning("workers: more than %d restarts in a second; worker %d restarts in 1 s",
			    WORKERS_RESTARTS_PER_SEC, i);
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
 * with what the others now run, not with the file of the start. False:
 * rejected, *err says why. Also the check of mongoplexReload
 * (proxy/wctl_master.c), which then has every worker reload. */
static bool reload_check(char *err, size_t errlen)
{
	char why[CFG_ERR_LEN];
	struct reload_parts rp;
	struct cfg next, saved = g.cfg;
	bool ok;

	if (master_path == NULL) {
		snprintf(err, errlen, "reload rejected: no config file (-c)");
		log_error("workers: reload rejected, not sent to the workers: no config file (-c)");
		return false;
	}
	g.cfg = *master_cfg; /* what reload_prepare compares the static settings with */
	ok = reload_prepare(master_path, &rp, why, sizeof(why));
	g.cfg = saved;
	reload_discard(&rp);
	if (!ok || !cfg_load(master_path, &next, why, sizeof(why))) {
		snprintf(err, errlen, "reload rejected, keeping the current config: %s", why);
		log_error("workers: reload rejected, not sent to the workers: %s", why);
		return false;
	}
	cfg_keep_static(master_cfg, &next);
	cfg_free(master_cfg);
	*master_cfg = next;
	log_info("workers: configuration valid, reloading every worker");
	return true;
}

static void on_signal(int sig)
{
	switch (sig) {
	case SIGHUP: {
		char err[CFG_ERR_LEN + 100];

		if (reload_check(err, sizeof(err)))
			send_all(SIGHUP);
		break;
	}
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

/* Signals from the signalfd, then the control channels. */
static void poll_once(void)
{
	struct pollfd pfd[WORKERS_MAX + 1];
	int index[WORKERS_MAX], n;
	struct signalfd_siginfo si;

	pfd[0].fd = sig_fd;
	pfd[0].events = POLLIN;
	pfd[0].revents = 0;
	n = wm_pollfds(&pfd[1], index);
	if (poll(pfd, (nfds_t)n + 1, 50) < 0 && errno != EINTR)
		fatal("workers: poll: %s", strerror(errno));
	proxy_tick();
	if (pfd[0].revents & POLLIN)
		while (read(sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			on_signal((int)si.ssi_signo);
	wm_io(&pfd[1], index, n);
}

int workers_main(struct cfg *cfg, const char *path, int n)
{
	int port_fd;

	nw = n;
	g.nworkers = n;
	master_cfg = cfg;
	master_path = path;
	log_current_level = cfg->log_level;
	if (!wstats_create(n))
		fatal("workers: cannot map the shared stats: %s", strerror(errno));
	port_fd = reserve_port(cfg);
	signal(SIGPIPE, SIG_IGN); /* a worker's channel closing under a write */
	sigemptyset(&master_set);
	sigaddset(&master_set, SIGHUP);
	sigaddset(&master_set, SIGTERM);
	sigaddset(&master_set, SIGINT);
	sigaddset(&master_set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &master_set, &old_set);
	sig_fd = signalfd(-1, &master_set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sig_fd < 0)
		fatal("workers: signalfd: %s", strerror(errno));
	wm_init(n, reload_check);
	log_notice("workers: master (pid %d) starting %d workers on port %d", (int)getpid(), n,
		   (int)cfg->listen_port);
	for (int i = 0; i < n; i++)
		start_worker(i, cfg, path, port_fd);
	while (!stopping || running() > 0) {
		poll_once();
		reap();
		for (int i = 0; i < nw && !stopping; i++)
			if (ws[i].pid == 0 && proxy_tick() >= ws[i].restart_usec)
				start_worker(i, cfg, path, port_fd);
		if (!notified && !stopping)
			check_ready();
	}
	log_notice("workers: every worker has exited; master exiting");
	wm_fini();
	close(sig_fd);
	if (port_fd >= 0)
		close(port_fd);
	cfg_free(cfg);
	return g.exit_code;
}
