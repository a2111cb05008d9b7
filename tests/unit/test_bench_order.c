/*
 * test_bench_order.c — mongoplex-bench's path order per repeat
 * (bench/order.h): every row is a permutation; over a period every path
 * runs first equally often and every ordered pair of paths is adjacent
 * equally often (once per period for an even count, twice for an odd one);
 * the period repeats; one path and none are handled.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "bench/order.h"

#define MAXN 12

Test(bench_order, balanced_for_every_count_up_to_12)
{
	for (int n = 1; n <= MAXN; n++) {
		int period = bench_order_period(n), pairs[MAXN][MAXN], first[MAXN];
		int want_pair = n % 2 == 0 ? 1 : 2;

		cr_assert_eq(period, n == 1 ? 1 : (n % 2 == 0 ? n : 2 * n), "n=%d", n);
		memset(pairs, 0, sizeof pairs);
		memset(first, 0, sizeof first);
		for (int rep = 0; rep < period; rep++) {
			int row[MAXN], seen[MAXN] = {0};

			bench_order(n, rep, row);
			for (int j = 0; j < n; j++) {
				cr_assert(row[j] >= 0 && row[j] < n, "n=%d rep=%d: %d", n, rep,
					  row[j]);
				cr_assert_eq(seen[row[j]]++, 0, "n=%d rep=%d: %d twice", n, rep,
					     row[j]);
				if (j > 0)
					pairs[row[j - 1]][row[j]]++;
			}
			first[row[0]]++;
		}
		for (int a = 0; a < n; a++) {
			cr_assert_eq(first[a], period / n, "n=%d: path %d first %d times", n, a,
				     first[a]);
			for (int b = 0; b < n; b++)
				if (a != b)
					cr_assert_eq(pairs[a][b], want_pair,
						     "n=%d: %d then %d %d times, want %d", n, a, b,
						     pairs[a][b], want_pair);
		}
	}
}

Test(bench_order, repeats_with_its_period)
{
	for (int n = 2; n <= 7; n++) {
		int p = bench_order_period(n), a[MAXN], b[MAXN];

		for (int rep = 0; rep < p; rep++) {
			bench_order(n, rep, a);
			bench_order(n, rep + 3 * p, b);
			cr_assert_arr_eq(a, b, (size_t)n * sizeof a[0], "n=%d rep=%d", n, rep);
		}
	}
}

Test(bench_order, three_paths_known_rows)
{
	/* the rows ab.sh's three paths (relay, old, new) run in */
	static const int want[6][3] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1},
				       {2, 1, 0}, {0, 2, 1}, {1, 0, 2}};
	int row[3];

	for (int rep = 0; rep < 6; rep++) {
		bench_order(3, rep, row);
		cr_assert_arr_eq(row, want[rep], sizeof row, "rep %d", rep);
	}
}
