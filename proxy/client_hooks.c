/*
 * client_hooks.c — the table of client_hooks.h: which module above the
 * client connection hears each of its events, and what its requests'
 * callbacks ask of the cursor table. Installed by proxy_main before the
 * listener accepts; it runs nothing itself.
 */
#include "proxy/client_hooks.h"

#include "proxy/awaithello.h"
#include "proxy/cauth.h"
#include "proxy/client.h"
#include "proxy/client_msg.h"
#include "proxy/cursor.h"

/* Its cursors leave the table and are killed on the backend. */
static void cursors_closed(struct client *c)
{
	cursor_client_closed(c->id);
}

static const struct client_hooks hooks = {
    .owner_ops = &client_owner_ops,
    .message = client_handle_message,
    .framing_lost = client_framing_lost,
    .closing = awaithello_client_closed,
    .closed = cursors_closed,
    .freed = cauth_client_free,
    .reply = cursor_on_reply,
    .note_free = cursor_note_free,
};

void client_hooks_install(void)
{
	client_hooks = &hooks;
}
