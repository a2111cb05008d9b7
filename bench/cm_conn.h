/*
 * cm_conn.h — the curve model's client connections and its loop: accept,
 * frame, answer (cm_cmd.h), and hold each reply until it is due.
 *
 * Delay of one reply: a find of k ids arriving (its kernel receive time,
 * SO_TIMESTAMPNS) while n other queries are in service gets the curve's
 * latency L at (k, c = n + 1), fixed on arrival (curve_latency_s); it is in
 * service for L, and its reply is written L (less the connection's think
 * time with --think-compensation, never below 0) plus --rtt-us after its
 * arrival. Every other command waits --rtt-us only.
 *
 * CPU: one thread, two deadline heaps (cm_heap.h: replies by due time,
 * queries in service by service end) and one wake for the earliest reply,
 * no event per reply. While replies wait, the loop does not wake for
 * arrivals: it sleeps until the earliest due reply (armed earlier by the
 * loop's mean lateness) or at most the shortest latency a query arriving
 * meanwhile could get (curve_min_latency_s), then reads every connection
 * that has bytes and dates each message by its receive time; each wake
 * writes every reply due within --timer-slack-us (one write each, from a
 * reused buffer), so one wake serves several replies at high rates. A
 * non-query reply (hello, ping) arriving while queries are in service can
 * therefore wait up to that sleep. With no reply waiting the loop blocks
 * until a message arrives.
 *
 * Bounds: at most cm.max_conns connections (more are closed at accept with a
 * limited log line); a connection stops being read while it has
 * CM_MAX_PENDING replies in flight or CM_MAX_OUTPUT bytes unsent (TCP
 * backpressure); messages are framed by core/wire.c (16 bytes to 48 MB,
 * else the connection is closed with a logged reason).
 */
#pragma once

#include <event2/listener.h>

#define CM_MAX_PENDING 16
#define CM_MAX_OUTPUT  (32 * 1024 * 1024)

/* evconnlistener callback: a new client on fd. */
void cm_conn_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
		    void *arg);
/* Closes every connection and frees the heaps (at exit). */
void cm_conn_close_all(void);
/* The model's loop: runs until cm.stop (SIGTERM/SIGINT). */
void cm_conn_run(void);
