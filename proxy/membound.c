/*
 * membound.c — the global memory bound: one byte count, a paused flag with
 * hysteresis, and a deferred event that tells the clients (see membound.h);
 * and the client socket buffers' accounting that feeds it (and the output's
 * progress for client_write_timeout_ms). A leaf: it reads struct client's fields and
 * calls no other file of proxy/ (the clients are told through the function
 * of membound_set_tell).
 */
#include "proxy/membound.h"

#include <event2/buffer.h>
#include <event2/event.h>

#include "proxy/client.h"
#include "core/globals.h"
#include "core/log.h"
#include "proxy/proxy.h"

static int64_t bytes;	   /* everything counted, see membound.h */
static bool paused;	   /* at the bound: heavy clients are not read */
static bool told_paused;   /* the state the clients were last told */
static struct event *tell; /* deferred: clients are never stopped inside their accounting */
static void (*tell_fn)(bool paused); /* who is told (membound_set_tell) */

static void tell_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	proxy_tick();
	if (told_paused == paused)
		return;
	told_paused = paused;
	if (tell_fn != NULL)
		tell_fn(paused);
}

void membound_set_tell(void (*fn)(bool paused))
{
	tell_fn = fn;
}

/* A client can make the bound flap (fill, drain, fill): both lines are
 * rate-limited. */
static struct log_rl rl_paused = {.what = "memory bound pauses"};
static struct log_rl rl_resumed = {.what = "memory bound resumes"};

static void update(void)
{
	int64_t max = g.cfg.max_buffer_bytes;
	bool next = paused ? bytes >= max / 4 * 3 : bytes >= max;

	if (next == paused || max <= 0)
		return;
	paused = next;
	if (paused)
		log_rl_msg(&rl_paused, LOG_LVL_WARNING,
			   "memory bound: %lld bytes buffered for clients (max_buffer_bytes = "
			   "%lld): clients holding more than their share are not read until it "
			   "drains",
			   (long long)bytes, (long long)max);
	else
		log_rl_msg(&rl_resumed, LOG_LVL_WARNING,
			   "memory bound: %lld bytes buffered for clients, reading resumed",
			   (long long)bytes);
	if (tell == NULL && g.base != NULL)
		tell = event_new(g.base, -1, 0, tell_cb, NULL);
	if (tell != NULL)
		event_active(tell, EV_TIMEOUT, 1);
}

void membound_add(int64_t delta)
{
	bytes += delta;
	update();
}

bool membound_paused(void)
{
	return paused;
}

size_t membound_share(int clients)
{
	return (size_t)g.cfg.max_buffer_bytes / (size_t)(clients > 0 ? clients : 1);
}

bool membound_heavy(size_t held, int clients)
{
	return paused && held >= membound_share(clients);
}

int64_t membound_bytes(void)
{
	return bytes;
}

void membound_apply_cfg(void)
{
	update();
}

void membound_free(void)
{
	if (tell != NULL)
		event_free(tell);
	tell = NULL;
}

/* A client's socket buffers as they are now, for the memory bound: called
 * after everything that changes them (client.c: its socket callback, the
 * end of parsing, each reply sent), not from a callback on every evbuffer
 * operation, which cost a tenth of a proxied request's instructions. */
void client_account_sync(struct client *c)
{
	size_t out = evbuffer_get_length(c->sb.out);
	size_t held = evbuffer_get_length(c->sb.in) + out;

	if (c->sb.out_total != c->acct_out_total || (c->acct_out_len == 0 && out > 0))
		c->out_progress_usec = g.now_usec; /* written, or the first unsent byte */
	c->acct_out_total = c->sb.out_total;
	c->acct_out_len = out;
	if (held == c->io_bytes)
		return;
	membound_add((int64_t)held - (int64_t)c->io_bytes);
	c->io_bytes = held;
}

void client_account_stop(struct client *c)
{
	membound_add(-(int64_t)c->io_bytes);
	c->io_bytes = 0;
}
