/*
 * spare.h — a bounded stack of freed objects of one kind, kept for reuse
 * by the hot path's per-request allocations (core/evpool.c's buffers,
 * core/request.c's requests): taking one costs a few instructions where
 * malloc and free cost a few hundred per request.
 *
 * Rules: the event loop's thread only (no locks); spare_keep refuses an
 * object once `max` are kept (the caller frees it); the owner frees what is
 * left at exit (spare_take until NULL). SPARE_UNDER_ASAN is true in
 * AddressSanitizer builds, where an owner may keep nothing so that a use
 * after free is still caught.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define SPARE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARE_UNDER_ASAN 1
#endif
#endif
#ifndef SPARE_UNDER_ASAN
#define SPARE_UNDER_ASAN 0
#endif

struct spare {
	void **item; /* item[0..n) are kept */
	int n, max;
};

#define SPARE_INIT(array, keep)                                                                    \
	{                                                                                          \
		(array), 0, (keep)                                                                 \
	}

static inline void *spare_take(struct spare *s)
{
	return s->n > 0 ? s->item[--s->n] : NULL;
}

static inline bool spare_full(const struct spare *s)
{
	return s->n >= s->max;
}

/* Keep p (true), or refuse it when full (false: the caller frees it). */
static inline bool spare_keep(struct spare *s, void *p)
{
	if (spare_full(s))
		return false;
	s->item[s->n++] = p;
	return true;
}
