/*
 * topology.c — libmongoc SDAM on a monitor thread; a snapshot for the loop.
 * This file is the loop side (start/stop, the pipe, the snapshot and its
 * accessors); the thread side is topology_monitor.c (topology_monitor.h).
 *
 * Thread side: a mongoc_client_pool_t (background monitoring: one monitor
 * per member, heartbeatFrequencyMS, credentials from the URI) reports through
 * its APM callbacks: server opening/closed (membership), server description
 * changed (type, tags, lastWrite, setName, electionId, topologyVersion) and
 * heartbeats (round trip). Each is applied to `shared` under `mu` and the
 * loop is poked through a pipe. A recheck runs a
 * short-lived single-threaded client's server selection (a blocking scan of
 * every member) with the same callbacks.
 * Loop side: the pipe's read event copies `shared` into `loop_snap` and runs
 * the on_change hook.
 * mongodb+srv://: libmongoc looks the SRV and TXT records up when the
 * client pool is made (mongoc_topology_new), so that happens here on the
 * thread; a failed lookup is published (srv_error) and retried every
 * heartbeatFrequencyMS until it succeeds. The resolved URI's replicaSet and
 * authSource (TXT options) are published too; libmongoc 1.23 takes its SDAM
 * set name from the URI as written, so a member of another set is described
 * here as RSOther (serves nothing).
 */
#include "pool/topology.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <mongoc/mongoc.h>

#include "core/globals.h"
#include "core/log.h"
#include "pool/topology_monitor.h"

static bool active;
static int pipefd[2] = {-1, -1};
static struct event *pipe_ev;
static struct topo_snapshot loop_snap;
static void (*change_hook)(void);
static int64_t local_threshold_ms = 15, selection_timeout_ms = 30000, heartbeat_ms = 10000;
static struct topo_srv loop_srv;

bool topology_wanted(const char *uri_str)
{
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_str, NULL);
	bool want;

	if (uri == NULL)
		return false;
	want =
	    mongoc_uri_get_replica_set(uri) != NULL || strncmp(uri_str, "mongodb+srv://", 14) == 0;
	mongoc_uri_destroy(uri);
	return want;
}

bool topology_active(void)
{
	return active;
}

const struct topo_snapshot *topology_snapshot(void)
{
	return &loop_snap;
}

const struct topo_srv *topology_srv(void)
{
	return &loop_srv;
}

int64_t topology_local_threshold_ms(void)
{
	return local_threshold_ms;
}

int64_t topology_selection_timeout_ms(void)
{
	return selection_timeout_ms;
}

int64_t topology_heartbeat_ms(void)
{
	return heartbeat_ms;
}

uint64_t topology_rechecks(void)
{
	uint64_t n;

	n = topo_monitor_rechecks();
	return n;
}

const char *topology_type_name(enum topo_type t)
{
	static const char *const names[] = {"Unknown", "RSPrimary",  "RSSecondary",
					    "RSOther", "Standalone", "Mongos"};

	return names[t];
}

/* ---- loop side ---- */

static void pipe_cb(evutil_socket_t fd, short what, void *arg)
{
	char buf[256];

	(void)what;
	(void)arg;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	topo_monitor_copy(&loop_snap, &loop_srv);
	for (int i = 0; i < loop_snap.n && log_enabled(LOG_LVL_DEBUG); i++)
		log_debug("topology: %s %s rtt %" PRId64 " us", loop_snap.m[i].addr,
			  topology_type_name(loop_snap.m[i].type), loop_snap.m[i].rtt_usec);
	if (change_hook != NULL)
		change_hook();
}

void topology_recheck(const char *why)
{
	if (!active)
		return;
	topo_monitor_recheck(why);
}

static bool read_options(const char *uri_str, char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_str, &berr);

	if (uri == NULL) {
		snprintf(err, errlen, "backend_uri: %s", berr.message);
		return false;
	}
	local_threshold_ms = mongoc_uri_get_option_as_int32(uri, MONGOC_URI_LOCALTHRESHOLDMS, 15);
	selection_timeout_ms =
	    mongoc_uri_get_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 30000);
	heartbeat_ms = mongoc_uri_get_option_as_int32(uri, MONGOC_URI_HEARTBEATFREQUENCYMS, 10000);
	mongoc_uri_destroy(uri);
	return true;
}

bool topology_start(const char *uri_str, void (*on_change)(void), char *err, size_t errlen)
{
	if (!read_options(uri_str, err, errlen))
		return false;
	if (pipe(pipefd) != 0 || fcntl(pipefd[0], F_SETFL, O_NONBLOCK) != 0 ||
	    fcntl(pipefd[1], F_SETFL, O_NONBLOCK) != 0) {
		snprintf(err, errlen, "topology: pipe: %s", strerror(errno));
		return false;
	}
	pipe_ev = event_new(g.base, pipefd[0], EV_READ | EV_PERSIST, pipe_cb, NULL);
	if (pipe_ev == NULL || event_add(pipe_ev, NULL) != 0) {
		snprintf(err, errlen, "topology: cannot watch the monitor pipe");
		return false;
	}
	change_hook = on_change;
	if (strncmp(uri_str, "mongodb+srv://", 14) == 0)
		log_info("topology: looking up the SRV and TXT records of backend_uri on the "
			 "monitor thread");
	if (!topo_monitor_start(uri_str, pipefd[1], heartbeat_ms)) {
		snprintf(err, errlen, "topology: cannot start the monitor thread");
		return false;
	}
	active = true;
	log_info("topology: monitoring the replica set (heartbeatFrequencyMS %" PRId64
		 ", serverSelectionTimeoutMS %" PRId64 ", localThresholdMS %" PRId64 ")",
		 heartbeat_ms, selection_timeout_ms, local_threshold_ms);
	return true;
}

void topology_stop(void)
{
	if (!active)
		return;
	topo_monitor_stop();
	active = false;
	event_free(pipe_ev);
	pipe_ev = NULL;
	close(pipefd[0]);
	close(pipefd[1]);
}
