/*
 * awaithello.h — awaitable (streaming) hello, server-monitoring specification.
 *
 * A hello carrying topologyVersion + maxAwaitTimeMS whose topologyVersion is
 * the proxy's current one is held on one timer (never on a backend
 * connection) until the counter is bumped (core/topover.h) or
 * maxAwaitTimeMS runs out. With exhaustAllowed each answer has moreToCome
 * and the proxy keeps answering on that connection only, each reply a
 * response to the previous one, until the client closes, the answer is an
 * error, or the proxy shuts down (that answer ends the stream).
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>

struct client;
struct request;

/* Register with core/topover.c (at start). */
void awaithello_init(void);

/* A hello (req->hello_cmd set): true when this module answered or holds
 * it; false when it is an ordinary hello for the caller to answer now. */
bool awaithello_take(struct client *c, struct request *req, bool exhaust_allowed);

/* Its client is closing: drop the held hello (before its requests go;
 * client_close, through client_hooks.h). */
void awaithello_client_closed(struct client *c);

/* Hellos held right now (gauge hellos_held). */
int awaithello_held_count(void);
