/*
 * cm_conn.h — the curve model's client connections: accept, frame, answer
 * (cm_cmd.h), and hold each reply on a libevent timer for its delay.
 *
 * Delay of one reply: a find of k ids arriving while n other queries are in
 * service gets the curve's latency at (k, c = n + 1), fixed on arrival
 * (curve_latency_s); it is in service for that long, then waits --rtt-us
 * more (not in service: that is the network) and is written. Every other
 * command waits --rtt-us only. No threads, no sleeping, no polling: one
 * timer per reply in flight.
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
/* Closes every connection (at exit). */
void cm_conn_close_all(void);
