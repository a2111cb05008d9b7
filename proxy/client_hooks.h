/*
 * client_hooks.h — the calls the client connection (client.c) and its
 * requests' callbacks (client_ops.c) make up into the modules above them,
 * the way pool/pool_ops.h serves pool/'s lower files: one table, installed
 * at start (client_hooks_install, from proxy_main; the unit tests that make
 * client requests install it too), so that client.c and client_ops.c call
 * nothing above them by name and proxy/'s file-level calls have no circle
 * (scripts/check-cycles.py).
 *
 *   entry         is                        called by
 *   owner_ops     client_owner_ops          client_accept (client_ops.c's callbacks)
 *   message       client_handle_message     process_input: one whole message
 *   framing_lost  client_framing_lost       process_input: a bad messageLength
 *   closing       awaithello_client_closed  client_close, before its requests go
 *   closed        cursor_client_closed      client_close, after its requests and pins
 *   freed         cauth_client_free         client_free_deferred
 *   reply         cursor_on_reply           client_ops.c: a backend reply, before
 *                                           the client gets it
 *   note_free     cursor_note_free          client_ops.c: a request's part is freed
 */
#pragma once

#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct client;
struct cursor_note;
struct request;
struct request_owner_ops;
struct wire_msg;

struct client_hooks {
	/* The client as the owner of its requests (request_owner_init). */
	const struct request_owner_ops *owner_ops;
	/* One complete message of `len` bytes in *bufp: route, answer or
	 * forward it (may take *bufp). */
	void (*message)(struct client *c, struct evbuffer **bufp, size_t len);
	/* Framing is lost: say why (as a reply, if the client can read one)
	 * and mark the client closing. */
	void (*framing_lost)(struct client *c, int32_t len, const uint8_t *hdr, size_t avail);
	/* The client closes: before its requests are abandoned (its held
	 * hello), then after they and its pins let go (its cursors). */
	void (*closing)(struct client *c);
	void (*closed)(struct client *c);
	/* The client's memory is about to go (its login state). */
	void (*freed)(struct client *c);
	/* A backend reply to one of its requests: true when it was answered
	 * there (the raw reply must not be delivered). */
	bool (*reply)(struct request *req, const struct wire_msg *m);
	/* A request is freed: what its reply would have updated (not NULL). */
	void (*note_free)(struct cursor_note *note);
};

/* The table (client.c; NULL until client_hooks_install). */
extern const struct client_hooks *client_hooks;

/* Install client_hooks.c's table (proxy_main; unit tests). */
void client_hooks_install(void);
