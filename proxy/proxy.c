/*
 * proxy.c — process lifecycle: start the modules, signals (through
 * evsignal_new, no work in raw handlers), reload, graceful shutdown,
 * systemd notification.
 *
 *   SIGHUP   reload the config file (proxy/reload.c: every part checked,
 *            then all applied); on any error keep the old config whole
 *   SIGTERM  bump the topologyVersion (held hellos answered: drivers move
 *            away), stop accepting, let in-flight requests finish (up to
 *            shutdown_timeout_ms, and stay up shutdown_quiesce_ms at least),
 *            refuse new ones with a retryable error, exit 0
 *   SIGINT   exit now
 */
#include "proxy/proxy.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#ifdef MP_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "pool/auth.h"
#include "pool/backend_tls.h"
#include "proxy/client_tls.h"
#include "proxy/janitor.h"
#include "pool/pool.h"
#include "proxy/admin.h"
#include "proxy/admin_ctl.h"
#include "proxy/awaithello.h"
#include "proxy/cauth.h"
#include "proxy/client.h"
#include "proxy/client_hooks.h"
#include "proxy/listener.h"
#include "proxy/membound.h"
#include "proxy/metrics.h"
#include "proxy/reload.h"
#include "proxy/stats_report.h"
#include "proxy/wctl.h"
#include "core/evpool.h"
#include "core/stats.h"
#include "core/topover.h"
#include "core/wstats.h"
#include "version.h"

/* The janitor's work in proxy/ (proxy/janitor.h), in its order there. */
static const struct janitor_tasks janitor_tasks = {
    .clients = client_janitor,
    .publish = stats_publish,
    .free_clients = client_free_deferred,
};

static struct event *sig_hup, *sig_term, *sig_int, *drain_ev;
static uint64_t quiesce_end_usec; /* SIGTERM + shutdown_quiesce_ms */

/* With workers the master alone talks to systemd (proxy/workers.c). */
static void notify(const char *state)
{
#ifdef MP_HAVE_SYSTEMD
	if (g.nworkers <= 1)
		sd_notify(0, state);
#else
	(void)state;
#endif
}

void proxy_apply_cfg(void)
{
	log_current_level = g.cfg.log_level;
	client_apply_cfg();
	membound_apply_cfg();
}

bool proxy_reload(char *msg, size_t msglen)
{
	struct reload_parts rp;
	char err[CFG_ERR_LEN], own[CFG_ERR_LEN + 100];
	bool bump;

	if (msg == NULL) { /* SIGHUP: logged only */
		msg = own;
		msglen = sizeof(own);
	}
	if (g.cfg_path == NULL) {
		snprintf(msg, msglen, "reload: no config file (-c) to re-read");
		log_warning("%s", msg);
		return false;
	}
	notify("RELOADING=1");
	/* Every part first; any refusal leaves everything as it was. */
	if (!reload_prepare(g.cfg_path, &rp, err, sizeof(err))) {
		STAT_INC(reload_failures);
		snprintf(msg, msglen, "reload rejected, keeping the current config: %s", err);
		log_error("%s", msg);
		reload_discard(&rp);
		notify("READY=1");
		return false;
	}
	bump = rp.cfg.advertise_mongos != g.cfg.advertise_mongos;
	reload_commit(&rp);
	proxy_apply_cfg();
	if (bump)
		topover_bump("reload changed what the hello advertises (advertise_mongos)");
	STAT_INC(reloads);
	snprintf(msg, msglen, "reloaded %s (pool_size=%" PRId64 ", batching=%s, log_level=%s)",
		 g.cfg_path, g.cfg.pool_size, g.cfg.batching ? "on" : "off",
		 log_level_name(g.cfg.log_level));
	log_notice("%s", msg);
	notify("READY=1");
	return true;
}

/* Work still in flight: requests parsed and not yet answered. */
static bool drained(void)
{
	int idle, waiting, running;

	client_phase_counts(&idle, &waiting, &running);
	/* ...and replies written: exiting closes the sockets, dropping unsent bytes. */
	return waiting == 0 && running == 0 && client_unsent_bytes() == 0;
}

static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	proxy_tick();
	if (g.now_usec >= quiesce_end_usec && drained()) {
		log_notice("shutdown: all in-flight requests done, exiting");
		event_base_loopexit(g.base, NULL);
	} else if (g.now_usec >= g.shutdown_deadline_usec) {
		log_warning("shutdown: shutdown_timeout_ms (%" PRId64 ") expired with requests in "
			    "flight, exiting",
			    g.cfg.shutdown_timeout_ms);
		event_base_loopexit(g.base, NULL);
	}
}

static void begin_shutdown(void)
{
	struct timeval tick = {0, 20000};

	if (g.shutting_down)
		return;
	g.shutting_down = true;
	notify("STOPPING=1");
	/* First tell the drivers that hold an awaitable hello: they move away. */
	topover_bump("draining (SIGTERM)");
	log_notice("SIGTERM: no longer accepting; draining in-flight requests (up to %" PRId64
		   " ms)",
		   g.cfg.shutdown_timeout_ms);
	listener_stop();
	g.shutdown_deadline_usec = g.now_usec + (uint64_t)g.cfg.shutdown_timeout_ms * 1000;
	quiesce_end_usec = g.now_usec + (uint64_t)g.cfg.shutdown_quiesce_ms * 1000;
	drain_ev = event_new(g.base, -1, EV_PERSIST, drain_cb, NULL);
	event_add(drain_ev, &tick);
	drain_cb(-1, 0, NULL);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	(void)arg;
	proxy_tick();
	switch (sig) {
	case SIGHUP:
		log_info("SIGHUP: reloading configuration");
		(void)proxy_reload(NULL, 0);
		break;
	case SIGTERM:
		begin_shutdown();
		break;
	case SIGINT:
		log_notice("SIGINT: exiting now");
		notify("STOPPING=1");
		event_base_loopexit(g.base, NULL);
		break;
	}
}

static void setup_signals(void)
{
	signal(SIGPIPE, SIG_IGN);
	sig_hup = evsignal_new(g.base, SIGHUP, signal_cb, NULL);
	sig_term = evsignal_new(g.base, SIGTERM, signal_cb, NULL);
	sig_int = evsignal_new(g.base, SIGINT, signal_cb, NULL);
	event_add(sig_hup, NULL);
	event_add(sig_term, NULL);
	event_add(sig_int, NULL);
}

static void teardown(void)
{
	wctl_stop();	     /* console commands still asking the master: failed */
	pool_shutdown_all(); /* requests still running get ShutdownInProgress */
	client_close_all("proxy exiting");
	listener_stop();
	client_tls_stop();
	backend_tls_free();
	metrics_stop();
	janitor_stop();
	if (drain_ev)
		event_free(drain_ev);
	event_free(sig_hup);
	event_free(sig_term);
	event_free(sig_int);
	membound_free();
	evpool_clear();
	request_spare_clear();
	event_base_free(g.base);
	cfg_free(&g.cfg);
}

/* One thread, so no locks; the epoll changelist folds the add/remove of a
 * write event within one loop iteration into nothing. */
static struct event_base *new_base(void)
{
	struct event_config *ec = event_config_new();
	struct event_base *base;

	event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	base = event_base_new_with_config(ec);
	event_config_free(ec);
	return base;
}

int proxy_main(struct cfg *cfg, const char *cfg_path)
{
	char err[CFG_ERR_LEN];

	g.cfg = *cfg;
	g.cfg_path = cfg_path;
	log_current_level = g.cfg.log_level;
	proxy_tick();
	g.base = new_base();
	if (g.base == NULL)
		fatal("cannot create the event loop");
	if (!pool_init_all(g.cfg.backend_uri, err, sizeof(err)))
		fatal("%s", err);
	if (!cauth_start(err, sizeof(err)))
		fatal("auth_users_file: %s", err);
	setup_signals();
	admin_ctl_set_reload(proxy_reload);
	/* with workers, the master runs console commands on every worker */
	if (g.nworkers > 1 && g.ctl_fd >= 0) {
		wctl_set_exec(admin_exec);
		wctl_attach(g.ctl_fd);
	}
	awaithello_init();
	client_hooks_install();
	membound_set_tell(client_memory_paused);
	janitor_start(&janitor_tasks);
	if (!client_tls_start(err, sizeof(err)))
		fatal("%s", err);
	if (!listener_start(err, sizeof(err)))
		fatal("%s", err);
	if (!metrics_start(err, sizeof(err)))
		fatal("%s", err);
	log_notice("mongoplex %s started: backend %s, pool_size %" PRId64 ", batching %s",
		   MP_VERSION, pool_target()->name, g.cfg.pool_size, g.cfg.batching ? "on" : "off");
	wstats_ready();
	notify("READY=1");
	event_base_dispatch(g.base);
	teardown();
	return g.exit_code;
}
