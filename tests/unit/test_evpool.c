/*
 * test_evpool.c — core/evpool: a buffer given back comes out again empty
 * (its bytes dropped), the list never holds more than EVPOOL_MAX, NULL is
 * accepted, and evpool_clear empties it; core/spare.h, the bounded stack
 * under it (and under core/request.c's kept requests).
 */
#include <criterion/criterion.h>

#include "core/evpool.h"
#include "core/spare.h"

Test(evpool, reuses_and_empties)
{
	struct evbuffer *a = evpool_get();

	evbuffer_add(a, "hello", 5);
	evpool_put(a);
	evpool_put(NULL);
	cr_assert_eq(evpool_get(), a, "the buffer given back is handed out again");
	cr_assert_eq(evbuffer_get_length(a), 0, "with its bytes dropped");
	evbuffer_add(a, "x", 1);
	cr_assert_eq(evbuffer_get_length(a), 1, "and usable");
	evbuffer_free(a);
	evpool_clear();
}

Test(evpool, bounded)
{
	struct evbuffer *b[EVPOOL_MAX + 10], *again[EVPOOL_MAX + 10];
	int reused = 0;

	for (int i = 0; i < EVPOOL_MAX + 10; i++)
		b[i] = evpool_get();
	for (int i = 0; i < EVPOOL_MAX + 10; i++)
		evpool_put(
		    b[i]); /* the last 10 are freed (ASan/valgrind would see a leak otherwise) */
	for (int i = 0; i < EVPOOL_MAX + 10; i++) {
		struct evbuffer *x = evpool_get();

		for (int j = 0; j < EVPOOL_MAX; j++)
			if (x == b[j])
				reused++;
		again[i] = x;
	}
	cr_assert_eq(reused, EVPOOL_MAX, "exactly EVPOOL_MAX kept, got %d", reused);
	for (int i = 0; i < EVPOOL_MAX + 10; i++)
		evbuffer_free(again[i]);
	evpool_clear();
}

Test(spare, last_in_first_out_and_bounded)
{
	void *items[2];
	struct spare s = SPARE_INIT(items, 2);
	int a, b, c;

	cr_assert_null(spare_take(&s), "empty: nothing to take");
	cr_assert(spare_keep(&s, &a));
	cr_assert(spare_keep(&s, &b));
	cr_assert(spare_full(&s));
	cr_assert_not(spare_keep(&s, &c), "full: refused, the caller frees it");
	cr_assert_eq(spare_take(&s), &b);
	cr_assert_eq(spare_take(&s), &a);
	cr_assert_null(spare_take(&s));
}

Test(spare, keep_nothing)
{
	struct spare s = SPARE_INIT(NULL, 0);
	int a;

	cr_assert_not(spare_keep(&s, &a), "max 0 (what ASan builds of request.c use)");
	cr_assert_null(spare_take(&s));
}
