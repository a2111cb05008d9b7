/*
 * client_msg.h — handling one complete client message (proxy/client_msg.c);
 * private to the client: proxy/client.c frames the input and calls these
 * through its hooks (proxy/client_hooks.h: message, framing_lost).
 */
#pragma once

#include <event2/buffer.h>
#include <stddef.h>
#include <stdint.h>

struct client;

/* One complete message of `len` bytes in `buf`: route, answer or forward it. */
void client_handle_message(struct client *c, struct evbuffer **bufp, size_t len);

/* Framing is lost: say why (as a reply, if the client can read one) and
 * mark the client closing. */
void client_framing_lost(struct client *c, int32_t len, const uint8_t *hdr, size_t avail);
