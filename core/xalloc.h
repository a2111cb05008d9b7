/*
 * xalloc.h — allocation wrappers that cannot return NULL.
 *
 * The daemon cannot run on without memory: a failed allocation ends the
 * process with a fatal log line naming the call, the size and the source
 * location (twemproxy's nc_alloc does the same). Product code allocates only
 * through these; callers never test the result. libbson's own allocator
 * (bson_new, bson_malloc) already aborts on failure and needs no wrapper.
 */
#pragma once

#include <stddef.h>

struct evbuffer;

#define xmalloc(n)	 xmalloc_at((n), __FILE__, __LINE__)
#define xcalloc(n, size) xcalloc_at((n), (size), __FILE__, __LINE__)
#define xrealloc(p, n)	 xrealloc_at((p), (n), __FILE__, __LINE__)
#define xstrdup(s)	 xstrdup_at((s), __FILE__, __LINE__)
#define xevbuffer_new()	 xevbuffer_new_at(__FILE__, __LINE__)

void *xmalloc_at(size_t n, const char *file, int line) __attribute__((malloc, returns_nonnull));
void *xcalloc_at(size_t n, size_t size, const char *file, int line)
    __attribute__((malloc, returns_nonnull));
/* Like realloc, but the old block is never lost: on failure the process ends. */
void *xrealloc_at(void *p, size_t n, const char *file, int line) __attribute__((returns_nonnull));
char *xstrdup_at(const char *s, const char *file, int line)
    __attribute__((malloc, returns_nonnull));
struct evbuffer *xevbuffer_new_at(const char *file, int line) __attribute__((returns_nonnull));
