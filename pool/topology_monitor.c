/*
 * topology_monitor.c — the thread side of topology.c (whose header comment
 * tells the whole story): a mongoc_client_pool_t's background monitoring
 * reports through APM callbacks (membership, server descriptions,
 * heartbeats); each report is applied to `shared` under `mu` and the loop
 * is poked through its pipe. Rechecks (a short-lived single-threaded
 * client's blocking scan) and the SRV lookup with its retries run here too.
 * Nothing here touches the event loop; the loop copies `shared` with
 * topo_monitor_copy.
 */
#include "pool/topology_monitor.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mongoc/mongoc.h>

#include "core/globals.h"
#include "core/log.h"
#include "core/xalloc.h"

enum source { SRC_POOLED = 1, SRC_RECHECK = 2 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct topo_snapshot shared; /* under mu */
static struct topo_srv shared_srv;  /* under mu */
static bool stop_wanted;	    /* under mu */
static bool recheck_wanted;	    /* under mu */
static uint64_t n_rechecks;	    /* under mu */
static char *uri_copy;
static pthread_t thread;
static int poke_fd = -1; /* the loop's pipe, write end */
static int64_t heartbeat_ms = 10000;

static enum topo_type type_of(const char *s)
{
	if (strcmp(s, "RSPrimary") == 0)
		return TOPO_PRIMARY;
	if (strcmp(s, "RSSecondary") == 0)
		return TOPO_SECONDARY;
	if (strcmp(s, "Standalone") == 0)
		return TOPO_STANDALONE;
	if (strcmp(s, "Mongos") == 0)
		return TOPO_MONGOS;
	if (strcmp(s, "RSArbiter") == 0 || strcmp(s, "RSOther") == 0 || strcmp(s, "RSGhost") == 0)
		return TOPO_OTHER;
	return TOPO_UNKNOWN;
}

static void poke_loop(void)
{
	char b = 1;

	if (write(poke_fd, &b, 1) < 0 && errno != EAGAIN)
		log_warning("topology: cannot wake the event loop: %s", strerror(errno));
}

/* Resolve outside the mutex; reuse an address `shared` already knows. */
static void resolve_member(struct topo_member *m)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char port[8];

	pthread_mutex_lock(&mu);
	for (int i = 0; i < shared.n; i++)
		if (strcmp(shared.m[i].addr, m->addr) == 0 && shared.m[i].salen > 0) {
			m->sa = shared.m[i].sa;
			m->salen = shared.m[i].salen;
		}
	pthread_mutex_unlock(&mu);
	if (m->salen > 0)
		return;
	snprintf(port, sizeof(port), "%u", m->port);
	if (getaddrinfo(m->host, port, &hints, &res) != 0 || res == NULL) {
		log_warning("topology: cannot resolve member %s", m->addr);
		return;
	}
	memcpy(&m->sa, res->ai_addr, res->ai_addrlen);
	m->salen = res->ai_addrlen;
	freeaddrinfo(res);
}

static void read_hello(struct topo_member *m, const bson_t *hello)
{
	bson_iter_t it, sub;

	m->set_version = -1;
	if (bson_iter_init_find(&it, hello, "setName") && BSON_ITER_HOLDS_UTF8(&it))
		snprintf(m->set_name, sizeof(m->set_name), "%s", bson_iter_utf8(&it, NULL));
	if (bson_iter_init_find(&it, hello, "setVersion") && BSON_ITER_HOLDS_NUMBER(&it))
		m->set_version = bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, hello, "electionId") && BSON_ITER_HOLDS_OID(&it)) {
		m->has_election_id = true;
		bson_oid_copy(bson_iter_oid(&it), &m->election_id);
	}
	if (bson_iter_init_find(&it, hello, "tags") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		const uint8_t *data;
		uint32_t len;

		bson_iter_document(&it, &len, &data);
		if (len <= TOPO_TAGS_MAX) {
			memcpy(m->tags, data, len);
			m->tags_len = len;
		}
	}
	if (bson_iter_init_find(&it, hello, "lastWrite") && bson_iter_recurse(&it, &sub) &&
	    bson_iter_find(&sub, "lastWriteDate") && BSON_ITER_HOLDS_DATE_TIME(&sub))
		m->last_write_ms = bson_iter_date_time(&sub);
	if (bson_iter_init_find(&it, hello, "topologyVersion") && bson_iter_recurse(&it, &sub))
		while (bson_iter_next(&sub)) {
			if (strcmp(bson_iter_key(&sub), "processId") == 0 &&
			    BSON_ITER_HOLDS_OID(&sub)) {
				m->has_topology_version = true;
				bson_oid_copy(bson_iter_oid(&sub), &m->tv_process_id);
			} else if (strcmp(bson_iter_key(&sub), "counter") == 0 &&
				   BSON_ITER_HOLDS_NUMBER(&sub)) {
				m->tv_counter = bson_iter_as_int64(&sub);
			}
		}
}

static void describe(struct topo_member *m, const mongoc_server_description_t *sd)
{
	const mongoc_host_list_t *h = mongoc_server_description_host(sd);
	const bson_t *hello = mongoc_server_description_hello_response(sd);

	memset(m, 0, sizeof(*m));
	snprintf(m->addr, sizeof(m->addr), "%s", h->host_and_port);
	snprintf(m->host, sizeof(m->host), "%s", h->host);
	m->port = h->port;
	m->type = type_of(mongoc_server_description_type(sd));
	m->rtt_usec = mongoc_server_description_round_trip_time(sd);
	if (m->rtt_usec >= 0)
		m->rtt_usec *= 1000; /* libmongoc keeps milliseconds */
	m->last_update_usec = mongoc_server_description_last_update_time(sd);
	if (hello != NULL)
		read_hello(m, hello);
	else
		m->set_version = -1;
}

static int find_member(const struct topo_snapshot *s, const char *addr)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->m[i].addr, addr) == 0)
			return i;
	return -1;
}

/* Under mu: a member's new description from `src`. The pooled client's
 * descriptions always apply; a recheck's only when newer and known. */
static void apply(enum source src, const struct topo_member *m)
{
	int j = find_member(&shared, m->addr);
	struct sockaddr_storage sa;
	socklen_t salen;
	int64_t rtt;

	if (j < 0)
		return; /* membership comes from server opening/closed events */
	if (src == SRC_RECHECK &&
	    (m->type == TOPO_UNKNOWN || m->last_update_usec <= shared.m[j].last_update_usec))
		return;
	if (src == SRC_POOLED && m->last_update_usec < shared.m[j].last_update_usec)
		return; /* a recheck saw it more recently */
	rtt = shared.m[j].rtt_usec;
	sa = shared.m[j].sa;
	salen = shared.m[j].salen;
	shared.m[j] = *m;
	shared.m[j].sa = sa; /* resolved when it was added */
	shared.m[j].salen = salen;
	if (m->rtt_usec < 0)
		shared.m[j].rtt_usec = rtt;
	shared.seq++;
}

/* Under mu: the replica set named by the resolved URI (a TXT record's
 * replicaSet=) is the only one whose members serve. */
static void check_set_name(struct topo_member *m)
{
	const char *want = shared_srv.set_name;

	if (want[0] == '\0' || m->set_name[0] == '\0' || strcmp(want, m->set_name) == 0)
		return;
	if (m->type == TOPO_PRIMARY || m->type == TOPO_SECONDARY)
		log_warning("topology: member %s belongs to replica set \"%s\", not \"%s\" "
			    "(replicaSet): not used",
			    m->addr, m->set_name, want);
	m->type = TOPO_OTHER;
}

static void on_server_changed(const mongoc_apm_server_changed_t *ev)
{
	enum source src = (enum source)(intptr_t)mongoc_apm_server_changed_get_context(ev);
	struct topo_member m;

	describe(&m, mongoc_apm_server_changed_get_new_description(ev));
	pthread_mutex_lock(&mu);
	check_set_name(&m);
	apply(src, &m);
	pthread_mutex_unlock(&mu);
	poke_loop();
}

/* The pooled client added a server to its topology: a member. */
static void on_server_opening(const mongoc_apm_server_opening_t *ev)
{
	const mongoc_host_list_t *h = mongoc_apm_server_opening_get_host(ev);
	struct topo_member m;

	if ((enum source)(intptr_t)mongoc_apm_server_opening_get_context(ev) != SRC_POOLED)
		return;
	memset(&m, 0, sizeof(m));
	snprintf(m.addr, sizeof(m.addr), "%s", h->host_and_port);
	snprintf(m.host, sizeof(m.host), "%s", h->host);
	m.port = h->port;
	m.rtt_usec = -1;
	m.set_version = -1;
	resolve_member(&m);
	pthread_mutex_lock(&mu);
	if (find_member(&shared, m.addr) < 0 && shared.n < TOPO_MAX_MEMBERS) {
		shared.m[shared.n++] = m;
		shared.seq++;
	}
	pthread_mutex_unlock(&mu);
	poke_loop();
}

/* The pooled client removed a server: no longer a member. */
static void on_server_closed(const mongoc_apm_server_closed_t *ev)
{
	const mongoc_host_list_t *h = mongoc_apm_server_closed_get_host(ev);
	int j;

	if ((enum source)(intptr_t)mongoc_apm_server_closed_get_context(ev) != SRC_POOLED)
		return;
	pthread_mutex_lock(&mu);
	j = find_member(&shared, h->host_and_port);
	if (j >= 0) {
		shared.m[j] = shared.m[--shared.n];
		shared.seq++;
	}
	pthread_mutex_unlock(&mu);
	poke_loop();
}

/* The role a heartbeat's hello reply states. */
static enum topo_type reply_type(const bson_t *reply)
{
	bson_iter_t it;
	bool rs = bson_iter_init_find(&it, reply, "setName");

	if ((bson_iter_init_find(&it, reply, "isWritablePrimary") ||
	     bson_iter_init_find(&it, reply, "ismaster")) &&
	    bson_iter_as_bool(&it))
		return rs ? TOPO_PRIMARY : TOPO_STANDALONE;
	if (rs && bson_iter_init_find(&it, reply, "secondary") && bson_iter_as_bool(&it))
		return TOPO_SECONDARY;
	return TOPO_UNKNOWN;
}

static void on_heartbeat_ok(const mongoc_apm_server_heartbeat_succeeded_t *ev)
{
	const mongoc_host_list_t *h = mongoc_apm_server_heartbeat_succeeded_get_host(ev);
	int64_t usec = mongoc_apm_server_heartbeat_succeeded_get_duration(ev);
	int j;

	enum topo_type t = reply_type(mongoc_apm_server_heartbeat_succeeded_get_reply(ev));
	bool awaited = mongoc_apm_server_heartbeat_succeeded_get_awaited(ev);

	pthread_mutex_lock(&mu);
	j = find_member(&shared, h->host_and_port);
	if (j >= 0) {
		/* An awaitable hello's duration is its wait, not a round trip. */
		if (!awaited)
			shared.m[j].rtt_usec = usec;
		/* Same role as described: the description is current (a change of
		 * role comes as a topology change right after). */
		if (t == shared.m[j].type)
			shared.m[j].last_update_usec = bson_get_monotonic_time();
		shared.seq++;
	}
	pthread_mutex_unlock(&mu);
	if (j >= 0)
		poke_loop();
}

static mongoc_apm_callbacks_t *callbacks(void)
{
	mongoc_apm_callbacks_t *cbs = mongoc_apm_callbacks_new();

	mongoc_apm_set_server_opening_cb(cbs, on_server_opening);
	mongoc_apm_set_server_closed_cb(cbs, on_server_closed);
	mongoc_apm_set_server_changed_cb(cbs, on_server_changed);
	mongoc_apm_set_server_heartbeat_succeeded_cb(cbs, on_heartbeat_ok);
	return cbs;
}

/* A blocking scan of every member by a short-lived single-threaded client. */
static void run_recheck(mongoc_uri_t *uri)
{
	mongoc_client_t *c = mongoc_client_new_from_uri(uri);
	mongoc_apm_callbacks_t *cbs = callbacks();
	mongoc_server_description_t *sd;
	bson_error_t err;

	if (c == NULL) {
		mongoc_apm_callbacks_destroy(cbs);
		return;
	}
	mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
	mongoc_client_set_apm_callbacks(c, cbs, (void *)(intptr_t)SRC_RECHECK);
	sd = mongoc_client_select_server(c, true, NULL, &err);
	if (sd != NULL)
		mongoc_server_description_destroy(sd);
	mongoc_client_destroy(c);
	mongoc_apm_callbacks_destroy(cbs);
	pthread_mutex_lock(&mu);
	n_rechecks++;
	pthread_mutex_unlock(&mu);
	poke_loop();
}

/* Under mu: wait `ms` or until stop is asked for. */
static void pause_ms(int64_t ms)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(ms / 1000);
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (!stop_wanted && pthread_cond_timedwait(&cond, &mu, &until) == 0)
		;
}

/* Under mu: at most one recheck per RECHECK_GAP_MS, however many requests
 * ask (each waiting request does); stop still wakes it at once. */
#define RECHECK_GAP_MS 200
static void pause_between_rechecks(void)
{
	pause_ms(RECHECK_GAP_MS);
}

/* The resolved URI (SRV hosts, TXT options): published and logged. */
static void publish_resolved(const mongoc_uri_t *u)
{
	const char *rs = mongoc_uri_get_replica_set(u);
	char hosts[512] = "";
	size_t n = 0;

	for (const mongoc_host_list_t *h = mongoc_uri_get_hosts(u); h != NULL; h = h->next)
		n += (size_t)snprintf(hosts + n, n < sizeof(hosts) ? sizeof(hosts) - n : 0, "%s%s",
				      n ? ", " : "", h->host_and_port);
	pthread_mutex_lock(&mu);
	shared_srv.resolved = true;
	shared_srv.error[0] = '\0';
	snprintf(shared_srv.set_name, sizeof(shared_srv.set_name), "%s", rs ? rs : "");
	snprintf(shared_srv.auth_source, sizeof(shared_srv.auth_source), "%s",
		 mongoc_uri_get_auth_source(u));
	shared.seq++;
	pthread_mutex_unlock(&mu);
	log_notice("topology: mongodb+srv://%s resolved: seed list %s; replicaSet \"%s\", "
		   "authSource \"%s\" (URI and TXT options)",
		   mongoc_uri_get_srv_hostname(u), hosts, rs ? rs : "",
		   mongoc_uri_get_auth_source(u));
	poke_loop();
}

static void publish_srv_error(const mongoc_uri_t *uri, const char *msg)
{
	bool changed;

	pthread_mutex_lock(&mu);
	changed = strcmp(shared_srv.error, msg) != 0;
	snprintf(shared_srv.error, sizeof(shared_srv.error), "%s", msg);
	shared.seq++;
	pthread_mutex_unlock(&mu);
	if (changed)
		log_error("topology: mongodb+srv://%s: DNS lookup failed: %s (retried every "
			  "%" PRId64 " ms)",
			  mongoc_uri_get_srv_hostname(uri), msg, heartbeat_ms);
	poke_loop();
}

/* The client pool; for mongodb+srv:// its SRV/TXT lookup is retried until
 * it succeeds or stop is asked for (NULL). */
static mongoc_client_pool_t *open_pool(mongoc_uri_t *uri)
{
	bool srv = mongoc_uri_get_srv_hostname(uri) != NULL;
	mongoc_client_pool_t *cp;
	bson_error_t err;

	for (;;) {
		cp = mongoc_client_pool_new_with_error(uri, &err);
		if (cp != NULL || !srv)
			return cp;
		publish_srv_error(uri, err.message);
		pthread_mutex_lock(&mu);
		pause_ms(heartbeat_ms > 500 ? heartbeat_ms : 500);
		if (stop_wanted) {
			pthread_mutex_unlock(&mu);
			return NULL;
		}
		pthread_mutex_unlock(&mu);
	}
}

static void *thread_main(void *arg)
{
	mongoc_uri_t *uri = mongoc_uri_new(uri_copy);
	mongoc_client_pool_t *cp = open_pool(uri);
	mongoc_apm_callbacks_t *cbs = callbacks();
	mongoc_client_t *client = NULL;

	(void)arg;
	if (cp != NULL) {
		mongoc_client_pool_set_error_api(cp, MONGOC_ERROR_API_VERSION_2);
		mongoc_client_pool_set_apm_callbacks(cp, cbs, (void *)(intptr_t)SRC_POOLED);
		client = mongoc_client_pool_pop(cp); /* starts the background monitors */
		if (mongoc_uri_get_srv_hostname(uri) != NULL)
			publish_resolved(mongoc_client_get_uri(client));
	} else if (mongoc_uri_get_srv_hostname(uri) == NULL) {
		log_error("topology: cannot create the monitoring client for backend_uri");
	}
	pthread_mutex_lock(&mu);
	while (!stop_wanted) {
		if (!recheck_wanted || cp == NULL) {
			pthread_cond_wait(&cond, &mu);
			continue;
		}
		recheck_wanted = false;
		pthread_mutex_unlock(&mu);
		run_recheck(uri);
		pthread_mutex_lock(&mu);
		pause_between_rechecks();
	}
	pthread_mutex_unlock(&mu);
	if (cp != NULL) {
		mongoc_client_pool_push(cp, client);
		mongoc_client_pool_destroy(cp);
	}
	mongoc_apm_callbacks_destroy(cbs);
	mongoc_uri_destroy(uri);
	return NULL;
}

bool topo_monitor_start(const char *uri, int fd, int64_t heartbeat)
{
	uri_copy = xstrdup(uri);
	poke_fd = fd;
	heartbeat_ms = heartbeat;
	if (pthread_create(&thread, NULL, thread_main, NULL) != 0) {
		free(uri_copy);
		uri_copy = NULL;
		return false;
	}
	return true;
}

void topo_monitor_stop(void)
{
	pthread_mutex_lock(&mu);
	stop_wanted = true;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&mu);
	pthread_join(thread, NULL);
	free(uri_copy);
	uri_copy = NULL;
}

void topo_monitor_recheck(const char *why)
{
	pthread_mutex_lock(&mu);
	if (!recheck_wanted)
		log_info("topology: immediate recheck (%s)", why);
	recheck_wanted = true;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&mu);
}

void topo_monitor_copy(struct topo_snapshot *snap, struct topo_srv *srv)
{
	pthread_mutex_lock(&mu);
	*snap = shared;
	*srv = shared_srv;
	pthread_mutex_unlock(&mu);
}

uint64_t topo_monitor_rechecks(void)
{
	uint64_t n;

	pthread_mutex_lock(&mu);
	n = n_rechecks;
	pthread_mutex_unlock(&mu);
	return n;
}
