/*
 * evpool.c — the free list of empty evbuffers (see evpool.h).
 */
#include "core/evpool.h"

#include "core/xalloc.h"

/* Rules: spare[0..n_spare) are empty evbuffers nobody else holds. */
static struct evbuffer *spare[EVPOOL_MAX];
static int n_spare;

struct evbuffer *evpool_get(void)
{
	if (n_spare > 0)
		return spare[--n_spare];
	return xevbuffer_new();
}

void evpool_put(struct evbuffer *buf)
{
	size_t len;

	if (buf == NULL)
		return;
	if (n_spare == EVPOOL_MAX) {
		evbuffer_free(buf);
		return;
	}
	len = evbuffer_get_length(buf);
	if (len > 0)
		evbuffer_drain(buf, len);
	spare[n_spare++] = buf;
}

void evpool_clear(void)
{
	while (n_spare > 0)
		evbuffer_free(spare[--n_spare]);
}
