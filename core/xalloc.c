/*
 * xalloc.c — allocation wrappers: a failed allocation is fatal (logged reason,
 * exit 1). A zero size asks for one byte so a success is never NULL.
 */
#include "core/xalloc.h"

#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

static _Noreturn void xalloc_fail(const char *what, size_t n, const char *file, int line)
{
	fatal("out of memory: %s(%zu bytes) failed at %s:%d", what, n, file, line);
}

void *xmalloc_at(size_t n, const char *file, int line)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		xalloc_fail("malloc", n, file, line);
	return p;
}

void *xcalloc_at(size_t n, size_t size, const char *file, int line)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
		fatal("out of memory: calloc(%zu x %zu bytes) failed at %s:%d", n, size, file,
		      line);
	return p;
}

void *xrealloc_at(void *p, size_t n, const char *file, int line)
{
	void *np = realloc(p, n ? n : 1);

	if (np == NULL)
		xalloc_fail("realloc", n, file, line);
	return np;
}

char *xstrdup_at(const char *s, const char *file, int line)
{
	size_t n = strlen(s) + 1;
	char *p = xmalloc_at(n, file, line);

	memcpy(p, s, n);
	return p;
}

struct evbuffer *xevbuffer_new_at(const char *file, int line)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL)
		fatal("out of memory: evbuffer_new() failed at %s:%d", file, line);
	return b;
}
