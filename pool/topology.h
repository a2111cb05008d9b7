/*
 * topology.h — replica-set discovery and monitoring through libmongoc's SDAM,
 * on a thread of its own, described to the event loop.
 *
 * Rules:
 *  - Active only for a backend_uri with replicaSet= (or mongodb+srv://); a
 *    standalone / plain seed-list URI keeps the seed-list behaviour of pool.c.
 *  - The monitor thread only describes: it owns a mongoc_client_pool_t whose
 *    APM callbacks (server opening/closed/changed, heartbeats) fill a snapshot
 *    under a mutex and poke the loop through a pipe. The loop copies the
 *    snapshot on its own side and calls the `on_change` hook; nothing on the
 *    loop ever blocks on the thread (the mutex is held only for copies).
 *  - topology_recheck() asks the thread for an immediate check (libmongoc
 *    has no public "check now"): the thread runs a short-lived
 *    single-threaded client's server selection, whose fresh descriptions
 *    replace older ones (newest last-update time wins per member).
 *  - Addresses are resolved on the thread, never on the loop.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define TOPO_MAX_MEMBERS 50
#define TOPO_TAGS_MAX	 512

enum topo_type {
	TOPO_UNKNOWN = 0,
	TOPO_PRIMARY,
	TOPO_SECONDARY,
	TOPO_OTHER, /* arbiter, ghost, RSOther: serves nothing */
	TOPO_STANDALONE,
	TOPO_MONGOS,
};

/* One member as the monitor last described it. */
struct topo_member {
	char addr[300]; /* host:port, as libmongoc names it */
	char host[256];
	uint16_t port;
	struct sockaddr_storage sa; /* resolved on the monitor thread */
	socklen_t salen;	    /* 0: could not be resolved */
	enum topo_type type;
	int64_t rtt_usec;	  /* last heartbeat round trip, -1: not measured */
	int64_t last_write_ms;	  /* lastWrite.lastWriteDate, 0: unknown */
	int64_t last_update_usec; /* monotonic time of the check it comes from */
	char set_name[128];
	int64_t set_version; /* -1: absent */
	bool has_election_id;
	bson_oid_t election_id;
	bool has_topology_version;
	bson_oid_t tv_process_id;
	int64_t tv_counter;
	uint32_t tags_len; /* 0: no tags; else a BSON document */
	uint8_t tags[TOPO_TAGS_MAX];
};

/* The whole replica set; `seq` grows with every published change. */
struct topo_snapshot {
	uint64_t seq;
	int n;
	struct topo_member m[TOPO_MAX_MEMBERS];
};

/* mongodb+srv:// resolution, as the monitor thread last published it.
 * Rules: error is empty while nothing failed (or once resolved); set_name
 * and auth_source are the resolved URI's (URI options, then TXT ones). */
struct topo_srv {
	bool resolved;
	char error[256];
	char set_name[128];
	char auth_source[256];
};

/* Does this URI ask for replica-set monitoring? */
bool topology_wanted(const char *uri_str);

/* Start the monitor thread; `on_change` runs on the loop after each change. */
bool topology_start(const char *uri_str, void (*on_change)(void), char *err, size_t errlen)
    __attribute__((warn_unused_result));
void topology_stop(void);
bool topology_active(void);

/* Ask for an immediate check (a "not primary" reply, a network error). */
void topology_recheck(const char *why);

/* The loop's copy of the latest snapshot (valid until the next on_change). */
const struct topo_snapshot *topology_snapshot(void);

/* The loop's copy of the mongodb+srv:// state (all empty for mongodb://). */
const struct topo_srv *topology_srv(void);

/* URI options, in milliseconds. */
int64_t topology_local_threshold_ms(void);
int64_t topology_selection_timeout_ms(void);
int64_t topology_heartbeat_ms(void);
uint64_t topology_rechecks(void);

const char *topology_type_name(enum topo_type t);
