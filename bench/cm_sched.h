/*
 * cm_sched.h — when the curve model's replies go out, and its loop.
 *
 * Delay of one reply: a find of k ids arriving (its kernel receive time,
 * SO_TIMESTAMPNS) while n other queries are in service gets the curve's
 * latency L at (k, c = n + 1), fixed on arrival (curve_latency_s); its
 * reply is due L (less the connection's think time with
 * --think-compensation, never below 0) plus --rtt-us after its arrival.
 * It is in service for L; with the compensation, until its connection's
 * next find arrives, at most 5 ms (CM_THINK_MAX_US) more. Every other
 * command is due --rtt-us after its arrival.
 *
 * CPU: two deadline heaps (cm_heap.h: replies by due time, queries in
 * service by the end of their service) and one wake for the earliest reply,
 * no event per reply. While replies wait, the loop does not wake for
 * arrivals: it sleeps until the earliest due reply (set earlier by the
 * loop's mean lateness) or at most the shortest latency a query arriving
 * meanwhile could get (curve_min_latency_s), then polls the event loop
 * without blocking, which reads every connection that has bytes; messages
 * are dated by their receive time and scheduled in that order. Each wake
 * writes every reply due within --timer-slack-us (at most a fifth of its
 * delay); the wake's offset is the running mean of (written - due) over
 * replies, so that they are on time on average. A non-query reply (hello, ping) arriving while
 * queries are in service can wait up to that sleep. With no reply waiting the loop blocks in the
 * event loop until something arrives. No per-query malloc: pending structs and their reply buffers
 * are reused.
 */
#pragma once

#include <event2/buffer.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench/cm_heap.h"
#include "core/list.h"

struct cm_conn;

#define CM_THINK_MAX_US 5000 /* a longer gap is an idle client, not its think time */

/* One reply from its message's arrival until written (or its connection
 * closes), and a find until its service ends. Rules: conn is set while it
 * is on its connection's list (cm_conn.c); queued while read but not yet
 * scheduled; in the due heap from the service pass until written; in the
 * in-service heap (finds) for its curve latency, even after its connection
 * closed (the server would still be working on it); reused when in none. */
struct cm_pending {
	struct cm_heap_node due; /* key: when to write it (µs, monotonic) */
	struct cm_heap_node svc; /* key: when its service ends */
	struct cm_conn *conn;	 /* NULL once off its connection */
	struct evbuffer *reply;	 /* the framed reply (kept for reuse) */
	int64_t arrival_us;	 /* the message's kernel receive time */
	double think_us;	 /* the connection's think time then (-1: none) */
	int cost_ids;		 /* ids of a find, -1 for other commands */
	uint32_t gen;		 /* bumped on every reuse (cm_sched_end_service) */
	bool queued;
	TAILQ_ENTRY(cm_pending) link; /* on its connection's list */
};
TAILQ_HEAD(cm_pending_list, cm_pending);

int64_t cm_mono_usec(void);
/* A pending reply for c, its buffer empty (the caller frames the reply into
 * it and puts it on c's list). */
struct cm_pending *cm_sched_new(struct cm_conn *c);
/* The message was read (received at arrival_us): its delay is fixed at the
 * next service pass, in receive order. */
void cm_sched_queue(struct cm_pending *p, int64_t arrival_us, int cost_ids, double think_us);
/* p is off its connection (written, or the connection closed): out of the
 * due heap; reused once it is out of service too. */
void cm_sched_forget(struct cm_pending *p);
/* A connection's next find arrived while its previous find p, already
 * answered (early, by the think-time compensation), is still in service:
 * p's service ends now, the client has moved on (so a closed-loop client
 * counts once in c). Nothing when p was reused since (gen differs) or its
 * service already ended. */
void cm_sched_end_service(struct cm_pending *p, uint32_t gen);
/* The model's loop: runs until cm.stop (SIGTERM/SIGINT). */
void cm_sched_run(void);
/* Frees everything (at exit, after every connection closed). */
void cm_sched_free_all(void);

/* cm_conn.c: writes p's reply now (p is out of the due heap, p->conn set). */
void cm_conn_write(struct cm_pending *p, int64_t now);
