/*
 * order.c — the paths' run order per repeat (order.h): a Williams Latin
 * square. Row 0 is 0, 1, n-1, 2, n-2, 3, ...: its successive differences
 * (mod n) are all distinct, so adding r (mod n) for r = 0..n-1 puts every
 * ordered pair side by side exactly once when n is even. When n is odd the
 * mirror of each row is added, and every ordered pair is side by side
 * exactly twice in 2n rows.
 */
#include "order.h"

int bench_order_period(int n)
{
	if (n <= 1)
		return 1;
	return n % 2 == 0 ? n : 2 * n;
}

void bench_order(int n, int rep, int *out)
{
	int row = rep % bench_order_period(n);
	int shift = row % n;
	int mirror = n % 2 == 1 && row >= n;

	for (int j = 0; j < n; j++) {
		int base = j == 0 ? 0 : (j % 2 == 1 ? (j + 1) / 2 : n - j / 2);
		int at = mirror ? n - 1 - j : j;

		out[at] = (base + shift) % n;
	}
}
