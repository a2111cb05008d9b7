/*
 * cm_conn.h — the curve model's client connections and its loop: accept,
 * frame, answer (cm_cmd.h), and hold each reply until it is due.
 *
 * When replies go out, the loop, and what the delays are: cm_sched.h. The
 * think time of a connection (for --think-compensation) is measured here:
 * from its last reply being written to a find arriving with nothing else in
 * flight on it, a running mean over about 8 samples; gaps over 5 ms are an
 * idle client and are not counted.
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
/* Closes every connection and frees the scheduler's state (at exit). */
void cm_conn_close_all(void);
