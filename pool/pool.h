/*
 * pool.h — one pool of backend connections per backend server, and the
 * choice of which server requests go to.
 *
 * Rules:
 *  - A pool never has more than pool_size connections (connecting + idle +
 *    active); min_pool_size are kept open by the janitor.
 *  - Requests that find no idle connection wait in `waiting`, ordered by
 *    fair-queuing round: each client has at most one request per round, so
 *    service is round-robin across clients, not one global FIFO.
 *  - A waiting request whose client cannot take more replies
 *    (its owner's may_dispatch) or that must follow its client's unacknowledged
 *    write (pool/sticky.h) is skipped, keeping its place; its wait is not
 *    counted against queue_timeout_ms while its own client is the cause.
 *  - Bounded: at most max_queue requests wait over all pools; the rest are
 *    refused with a retryable overload error.
 *  - When the backend cannot be reached and no connection is alive, waiting
 *    requests fail fast with HostUnreachable rather than hang; connects back
 *    off exponentially up to reconnect_backoff_max_ms.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pool/limit.h"
#include "pool/server.h"
#include "pool/topology.h"
#include "core/handshake.h"
#include "core/request.h"

struct pool_user;

struct pool {
	char name[300]; /* host:port, for logs */
	char host[256];
	uint16_t port;
	struct sockaddr_storage addr; /* resolved once at startup */
	socklen_t addrlen;
	struct server_list connecting; /* SV_CONNECTING */
	struct server_list idle;       /* SV_IDLE, most recently used first */
	struct server_list active;     /* SV_ACTIVE */
	int n_connecting, n_idle, n_active;
	struct waitq waiting; /* WAITQ_POOL: for a connection, by round */
	/* REQ_HELLO_WAIT: handshakes waiting for backend_info */
	struct request_queue hello_waiters;
	uint64_t round;		    /* round of the last dispatched request */
	struct backend_info info;   /* from the latest backend hello */
	bool usable;		    /* last hello said writable (or not yet known) */
	uint64_t next_connect_usec; /* backoff: no connect attempt before this */
	int64_t backoff_ms;
	char last_error[256];
	int last_code;		   /* of the last failed connect: 18 = authentication */
	const char *last_codename; /* static string */
	bool tls_failed;	   /* the last failed connect failed its TLS handshake */
	/* figures */
	uint64_t connects_ok, connects_failed, requests_dispatched;
	/* Replica sets (pool/select.c): the member's latest description, whether
	 * the topology lists it now, and the time before which its descriptions
	 * are not trusted (it answered "not primary" or failed to connect). */
	struct topo_member member;
	bool rs_present;
	int64_t suspect_usec;
	/* Per-user child pools (pool/pool_users.h): the member pool it belongs
	 * to and the user its connections log in as; NULL for a member pool. */
	struct pool *parent;
	struct pool_user *user;
	bool empty_seen; /* empty at the last sweep (pool_users.c) */
	bool recheck;	 /* a connection went idle beside held waiters (pool_dispatch.c) */
	/* Maintenance (pool/pool_pause.h): a member pool paused on its own (a
	 * child follows its member), since when, the pause's completion logged;
	 * the generation new connections get (reconnect raises it). */
	bool paused, pause_logged;
	uint64_t paused_usec;
	uint32_t generation;
	/* adaptive_concurrency (pool/limit.h): the limit, fed by every exchange
	 * that ends on this pool; `inflight` counts exchanges started by
	 * server_start and not yet released or closed (with the setting on or
	 * off), `inflight_ids` the lookups they carry (batch_hold_us). */
	struct climit limit;
	int inflight, inflight_ids;
};

/* Create the pools from the backend URI (host list). */
bool pool_init_all(const char *uri_str, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void pool_shutdown_all(void);

int pool_count(void);
struct pool *pool_at(int i);

/* The pool requests go to: the writable backend. */
struct pool *pool_target(void);

/* Run `req` on the target pool, now or when a connection frees up. */
void pool_submit(struct request *req);

/* A handshake that needs backend_info: `answer` is called when it is known
 * (or the request fails when the backend cannot be reached). */
void pool_wait_hello(struct request *req,
		     void (*answer)(struct request *req, const struct backend_info *bi));

/* Remove a waiting request (its client went away). */
void pool_unqueue(struct request *req);

/* Start a queued or new request on a server that is free for it. */
void pool_dispatch(struct server *s, struct request *req);
/* Run o's queued requests that may now go (its output drained). */
void pool_owner_kick(struct request_owner *o);
/* Refuse a request that waited longer than queue_timeout_ms. */
void pool_refuse_timeout(struct request *req);
/* queue_timeout_ms in µs (0: no limit), the limit of the connection waits. */
uint64_t pool_queue_limit_usec(void);

/* Server callbacks. */
void pool_server_ready(struct server *s, const struct backend_info *bi);
void pool_server_idle(struct server *s);
void pool_connect_failed(struct pool *p, int code, const char *codename, const char *why);
void pool_server_gone(struct pool *p);

/* Janitor: minimums, idle reaping, shrink after reload, timeouts. */
void pool_janitor(uint64_t now);

/* Replica sets: one pool per member of the snapshot (pool/topology.h);
 * members that left are drained. */
void pool_sync_members(const struct topo_snapshot *snap);

/* ping answered locally: is there a backend that can serve requests? */
bool pool_healthy(char *why, size_t whylen);

/* adaptive_concurrency: an exchange started on s / ended (dropped: its
 * connection closed under it: an error or timeout, congestion). */
void pool_limit_begin(struct server *s, const struct request *req);
void pool_limit_end(struct server *s, bool dropped);

int pool_total_waiting(void);

/* Field reads, inline: they make no call between files (check-cycles.py). */
static inline const char *pool_name(const struct pool *p)
{
	return p->name;
}

/* Its connections: connecting, idle and active. */
static inline int pool_live(const struct pool *p)
{
	return p->n_connecting + p->n_idle + p->n_active;
}
