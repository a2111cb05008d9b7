/*
 * wstats.c — the shared slots of wstats.h.
 */
#include "core/wstats.h"

#include <string.h>
#include <sys/mman.h>

#include "core/globals.h"

static struct wslot *slots;
static int nslots;

bool wstats_create(int n)
{
	void *m = mmap(NULL, sizeof(struct wslot) * (size_t)n, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return false;
	slots = m;
	nslots = n;
	return true;
}

void wstats_attach(int i)
{
	stats_p = &slots[i].counters;
}

int wstats_count(void)
{
	return nslots;
}

struct wslot *wstats_slot(int i)
{
	return &slots[i];
}

void wstats_sum(struct mp_counters *out)
{
	uint64_t *o = (uint64_t *)out;
	size_t nf = sizeof(*out) / sizeof(uint64_t);

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < nslots; i++) {
		const uint64_t *s = (const uint64_t *)&slots[i].counters;

		for (size_t f = 0; f < nf; f++)
			o[f] += s[f];
	}
}

void wstats_ready(void)
{
	if (nslots > 0)
		slots[g.worker_id].ready = 1;
}
