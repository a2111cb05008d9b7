/*
 * test_xalloc.c — the allocation wrappers (core/xalloc.h): a success is never
 * NULL and keeps the contents (xrealloc, xstrdup); a failure ends the process
 * with exit status 1 and a fatal log line naming the call, the size and the
 * caller's file:line. Each failing allocation runs in a forked child whose
 * stderr is read back through a pipe.
 */
#include <criterion/criterion.h>
#include <event2/buffer.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/xalloc.h"

#if defined(__SANITIZE_ADDRESS__)
#define XALLOC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XALLOC_TEST_ASAN 1
#endif
#endif
#ifdef XALLOC_TEST_ASAN
/* ASan reports an impossible size instead of returning NULL unless told. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#endif

/* Runs fn in a child; returns its exit status (-1 if it did not exit) and its stderr. */
static int run_child(void (*fn)(void), char *err, size_t errlen)
{
	int fds[2], status = 0;
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		fn();
		_exit(0); /* the allocation did not end the process */
	}
	close(fds[1]);
	while (got + 1 < errlen && (r = read(fds[0], err + got, errlen - 1 - got)) > 0)
		got += (size_t)r;
	err[got] = '\0';
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static volatile size_t huge = SIZE_MAX - 4096; /* volatile: no compile-time size warning */

static void fail_malloc(void)
{
	free(xmalloc(huge));
}
static void fail_calloc(void)
{
	free(xcalloc(huge / 2, 4));
}
static char *volatile realloc_block; /* a global: still reachable when the child exits */

static void fail_realloc(void)
{
	realloc_block = xmalloc(16);
	realloc_block = xrealloc(realloc_block, huge);
}

static void expect_fatal(void (*fn)(void), const char *call)
{
	char err[1024];
	int rc = run_child(fn, err, sizeof(err));

	cr_assert_eq(rc, 1, "%s on an impossible size: exit status %d, want 1; stderr: %s", call,
		     rc, err);
	cr_assert(strstr(err, "fatal") != NULL, "no fatal level in: %s", err);
	cr_assert(strstr(err, "out of memory") != NULL, "no reason in: %s", err);
	cr_assert(strstr(err, call) != NULL, "the call %s is not named in: %s", call, err);
	cr_assert(strstr(err, "test_xalloc.c:") != NULL, "the caller is not named in: %s", err);
}

Test(xalloc, malloc_failure_is_fatal_with_reason)
{
	expect_fatal(fail_malloc, "malloc(");
}

Test(xalloc, calloc_failure_is_fatal_with_reason)
{
	expect_fatal(fail_calloc, "calloc(");
}

Test(xalloc, realloc_failure_is_fatal_with_reason)
{
	expect_fatal(fail_realloc, "realloc(");
}

Test(xalloc, successes_keep_contents)
{
	char *s = xstrdup("mongoplex");
	char *p = xmalloc(0);
	int *z = xcalloc(8, sizeof(int));
	struct evbuffer *b = xevbuffer_new();

	cr_assert_str_eq(s, "mongoplex");
	s = xrealloc(s, 64);
	cr_assert_str_eq(s, "mongoplex", "xrealloc keeps the old contents");
	cr_assert_not_null(p, "a zero size still returns a block");
	for (int i = 0; i < 8; i++)
		cr_assert_eq(z[i], 0);
	cr_assert_eq(evbuffer_get_length(b), 0);
	evbuffer_free(b);
	free(z);
	free(p);
	free(s);
}
