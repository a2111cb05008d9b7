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

void wstats_rows_put(const bson_t *doc)
{
	struct wslot *w;
	bson_t small = BSON_INITIALIZER;

	if (nslots == 0)
		return;
	w = &slots[g.worker_id];
	if (doc->len > WSTATS_ROWS) {
		BSON_APPEND_BOOL(&small, "truncated", true);
		doc = &small;
	}
	__atomic_store_n(&w->rows_seq, w->rows_seq + 1, __ATOMIC_RELEASE); /* odd: writing */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memcpy(w->rows, bson_get_data(doc), doc->len);
	__atomic_store_n(&w->rows_len, doc->len, __ATOMIC_RELAXED);
	__atomic_store_n(&w->rows_seq, w->rows_seq + 1, __ATOMIC_RELEASE);
	bson_destroy(&small);
}

bool wstats_rows_get(int i, bson_t *out)
{
	const struct wslot *w = &slots[i];
	uint8_t *buf = bson_malloc(WSTATS_ROWS);
	uint32_t s1, s2, len = 0;
	bool ok = false;
	bson_t tmp;

	for (int tries = 0; tries < 4 && !ok; tries++) {
		s1 = __atomic_load_n(&w->rows_seq, __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		len = __atomic_load_n(&w->rows_len, __ATOMIC_RELAXED);
		if (len < 5 || len > WSTATS_ROWS)
			break;
		memcpy(buf, w->rows, len);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		s2 = __atomic_load_n(&w->rows_seq, __ATOMIC_ACQUIRE);
		ok = s1 == s2;
	}
	ok = ok && bson_init_static(&tmp, buf, len) && bson_validate(&tmp, 0, NULL);
	if (ok)
		bson_copy_to(&tmp, out);
	else
		bson_init(out);
	bson_free(buf);
	return ok;
}

void wstats_ready(void)
{
	if (nslots > 0)
		slots[g.worker_id].ready = 1;
}
