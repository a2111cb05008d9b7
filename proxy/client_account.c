/*
 * client_account.c — what a client's socket buffers hold and move: every
 * change is added to the memory bound (proxy/membound.c), the bytes in and
 * out are counted (mongoplexShow clients), and the time the output last
 * moved is kept (client_write_timeout_ms).
 */
#include <event2/buffer.h>

#include "core/globals.h"
#include "proxy/client.h"
#include "proxy/membound.h"

/* Every change of a client's socket buffers, for the memory bound. */
static void account_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct client *c = arg;
	int64_t delta = (int64_t)info->n_added - (int64_t)info->n_deleted;

	if (buf == c->sb.out && (info->n_deleted > 0 || info->orig_size == 0))
		c->out_progress_usec = g.now_usec; /* written, or the first unsent byte */
	if (buf == c->sb.out)
		c->bytes_out += info->n_deleted;
	else
		c->bytes_in += info->n_added;
	c->io_bytes = (size_t)((int64_t)c->io_bytes + delta);
	membound_add(delta);
}

bool client_account_start(struct client *c)
{
	return evbuffer_add_cb(c->sb.in, account_cb, c) != NULL &&
	       evbuffer_add_cb(c->sb.out, account_cb, c) != NULL;
}

void client_account_stop(struct client *c)
{
	if (c->sb.in != NULL)
		evbuffer_remove_cb(c->sb.in, account_cb, c);
	if (c->sb.out != NULL)
		evbuffer_remove_cb(c->sb.out, account_cb, c);
	membound_add(-(int64_t)c->io_bytes);
	c->io_bytes = 0;
}
