/*
 * evpool.c — the free list of empty evbuffers (see evpool.h).
 */
#include "core/evpool.h"

#include "core/spare.h"
#include "core/xalloc.h"

/* Rules: the kept ones are empty evbuffers nobody else holds. */
static void *items[EVPOOL_MAX];
static struct spare kept = SPARE_INIT(items, EVPOOL_MAX);

struct evbuffer *evpool_get(void)
{
	struct evbuffer *buf = spare_take(&kept);

	return buf != NULL ? buf : xevbuffer_new();
}

void evpool_put(struct evbuffer *buf)
{
	size_t len;

	if (buf == NULL)
		return;
	if (spare_full(&kept)) {
		evbuffer_free(buf);
		return;
	}
	len = evbuffer_get_length(buf);
	if (len > 0)
		evbuffer_drain(buf, len);
	(void)spare_keep(&kept, buf);
}

void evpool_clear(void)
{
	struct evbuffer *buf;

	while ((buf = spare_take(&kept)) != NULL)
		evbuffer_free(buf);
}
