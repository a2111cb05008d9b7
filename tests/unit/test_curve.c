/*
 * test_curve.c — the curve model's math and curve-file parser
 * (bench/curve.h): the shipped seed curve, interpolation in the number in
 * service c, constant throughput beyond the last thread count, c below 1,
 * the running maximum in ids, interpolation in ids and the extension
 * beyond 20 ids, and every parse error naming its line.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/curve.h"

static struct curve *seed(void)
{
	static struct curve c;
	char err[512];

	cr_assert(curve_load_file(MP_SOURCE_DIR "/bench/curves/seed.csv", &c, err, sizeof err),
		  "%s", err);
	return &c;
}

static struct curve *parse_ok(const char *text)
{
	static struct curve c;
	char err[512];

	cr_assert(curve_parse(text, strlen(text), &c, err, sizeof err), "%s", err);
	return &c;
}

/* The error text of a curve that must not parse. */
static const char *parse_err(const char *text, size_t len)
{
	static char err[512];
	static struct curve c;

	err[0] = '\0';
	cr_assert(!curve_parse(text, len, &c, err, sizeof err), "accepted: %s", text);
	return err;
}

/* A string literal's bytes, embedded NULs included. */
#define PE(lit) parse_err((lit), sizeof(lit) - 1)

static void assert_close_at(double a, double b, int line)
{
	cr_assert(fabs(a - b) <= 1e-9 * fabs(b), "line %d: %.12g != %.12g", line, a, b);
}
#define assert_close(a, b) assert_close_at((a), (b), __LINE__)

Test(curve, seed_file_is_the_table_of_medians)
{
	struct curve *c = seed();

	cr_assert_eq(c->ncells, 18);
	cr_assert_eq(c->ncols, 3);
	cr_assert_eq(c->cols[0].ids, 1);
	cr_assert_eq(c->cols[2].ids, 20);
	/* at the table's own points the curve is the table (1 and 10 ids) */
	assert_close(curve_qps(c, 1, 1), 575.1423);
	assert_close(curve_qps(c, 1, 10), 3627.526);
	assert_close(curve_qps(c, 1, 100), 1572.606);
	assert_close(curve_qps(c, 10, 20), 1694.7);
	assert_close(curve_qps(c, 20, 50), 818.4552);
	assert_close(curve_latency_s(c, 1, 100), 100 / 1572.606);
}

Test(curve, linear_in_c_between_thread_counts)
{
	struct curve *c = seed();

	/* 7.5 in service: halfway between 5 (2073.398) and 10 (3627.526) */
	assert_close(curve_qps(c, 1, 7.5), (2073.398 + 3627.526) / 2);
	assert_close(curve_latency_s(c, 1, 7.5), 7.5 / ((2073.398 + 3627.526) / 2));
	/* 60 in service: a fifth of the way from 50 to 100 */
	assert_close(curve_qps(c, 10, 60), 1417.507 + (943.1595 - 1417.507) * 0.2);
}

Test(curve, constant_throughput_beyond_the_last_thread_count)
{
	struct curve *c = seed();

	assert_close(curve_qps(c, 1, 200), 1572.606);
	assert_close(curve_qps(c, 1, 1000), 1572.606);
	assert_close(curve_latency_s(c, 1, 200), 200 / 1572.606);
	assert_close(curve_qps(c, 20, 150), 681.6767);
}

Test(curve, c_below_one_counts_as_one)
{
	struct curve *c = seed();

	assert_close(curve_latency_s(c, 1, 0), 1 / 575.1423);
	assert_close(curve_latency_s(c, 1, 0.25), 1 / 575.1423);
	assert_close(curve_latency_s(c, 1, -3), 1 / 575.1423);
	assert_close(curve_latency_s(c, 1, NAN), 1 / 575.1423);
}

Test(curve, below_the_first_thread_count_latency_is_fixed)
{
	struct curve *c = parse_ok("1,4,400\n1,8,600\n");

	assert_close(curve_latency_s(c, 1, 1), 4.0 / 400);
	assert_close(curve_latency_s(c, 1, 3), 4.0 / 400);
	assert_close(curve_qps(c, 1, 2), 200);
}

Test(curve, running_maximum_in_ids)
{
	struct curve *c = seed();

	/* 1 thread: the table says 20 ids (320.85/s) beat 10 ids (295.96/s);
	 * the model never gets faster with more ids */
	assert_close(curve_qps(c, 20, 1), 295.9631);
	assert_close(curve_latency_s(c, 15, 1), 1 / 295.9631);
	/* where the table is already monotone, it is kept */
	assert_close(curve_qps(c, 20, 10), 1317.089);
}

Test(curve, linear_in_ids_between_columns)
{
	struct curve *c = seed();
	double l1 = 10 / 3627.526, l10 = 10 / 1840.028, l20 = 10 / 1317.089;

	assert_close(curve_latency_s(c, 15, 10), (l10 + l20) / 2);
	assert_close(curve_latency_s(c, 4, 10), l1 + (l10 - l1) * 3 / 9);
	assert_close(curve_latency_s(c, 0, 10), l1); /* below the first column */
}

Test(curve, beyond_20_ids_the_average_slope_per_id)
{
	struct curve *c = seed();
	double l1 = 10 / 3627.526, l20 = 10 / 1317.089, slope = (l20 - l1) / 19;

	assert_close(curve_latency_s(c, 40, 10), l20 + 20 * slope);
	assert_close(curve_latency_s(c, 80, 10), l20 + 60 * slope);
	/* at 1 thread, with the running maximum: (max(l10, l20) - l1) / 19 */
	double m1 = 1 / 575.1423, m20 = 1 / 295.9631;
	assert_close(curve_latency_s(c, 100, 1), m20 + 80 * (m20 - m1) / 19);
}

Test(curve, never_faster_with_more_ids)
{
	struct curve *c = seed();

	for (double conc = 1; conc <= 150; conc += 0.5) {
		double prev = 0;

		for (int k = 0; k <= 60; k++) {
			double l = curve_latency_s(c, k, conc);

			cr_assert(l >= prev && l > 0, "latency(%d, %g) = %g < %g", k, conc, l,
				  prev);
			prev = l;
		}
	}
}

Test(curve, one_column_same_latency_for_every_k)
{
	struct curve *c =
	    parse_ok("# one column\nids,threads,queries_per_second\n1,1,100\n1,10,500\n");

	assert_close(curve_latency_s(c, 50, 10), 10.0 / 500);
	assert_close(curve_latency_s(c, 1, 5.5), 5.5 / 300);
}

Test(curve, accepts_comments_blanks_spaces_crlf_any_order)
{
	struct curve *c = parse_ok("\r\n# a comment\r\n  ids , threads , queries_per_second \r\n"
				   "\r\n10, 5, 200.5\r\n  # indented comment\n1,5,1e3\n1,1,500");

	cr_assert_eq(c->ncells, 3);
	cr_assert_eq(c->ncols, 2);
	cr_assert_eq(c->cols[0].n, 2);
	assert_close(curve_qps(c, 1, 5), 1000);
	assert_close(curve_qps(c, 10, 5), 200.5);
}

Test(curve, errors_name_their_line)
{
	const char *e;

	e = PE("ids,threads,queries_per_second\n1,1,abc\n");
	cr_assert(strstr(e, "line 2: queries_per_second \"abc\""), "%s", e);
	e = PE("1,1,100\n# c\n1,2\n");
	cr_assert(strstr(e, "line 3: want 3 comma-separated fields"), "%s", e);
	e = PE("1,1,100\n1,2,3,4\n");
	cr_assert(strstr(e, "line 2: want 3") && strstr(e, "got 4"), "%s", e);
	e = PE("1,5,100\n1,1,50\n\n1,5,120\n");
	cr_assert(strstr(e, "line 4: duplicate cell ids=1 threads=5 (also on line 1)"), "%s", e);
	e = PE("1,1,100\nids,threads,queries_per_second\n");
	cr_assert(strstr(e, "line 2: the header line must come before"), "%s", e);
	e = PE("1,1,0\n");
	cr_assert(strstr(e, "line 1: queries_per_second \"0\""), "%s", e);
	e = PE("1,1,-5\n");
	cr_assert(strstr(e, "line 1:"), "%s", e);
	e = PE("1,1,inf\n");
	cr_assert(strstr(e, "line 1: queries_per_second \"inf\""), "%s", e);
	e = PE("1,1,nan\n");
	cr_assert(strstr(e, "line 1:"), "%s", e);
	e = PE("\n\n0,1,100\n");
	cr_assert(strstr(e, "line 3: ids \"0\""), "%s", e);
	e = PE("1,5.5,100\n");
	cr_assert(strstr(e, "line 1: threads \"5.5\""), "%s", e);
	e = PE("1,99999999999999999999,100\n");
	cr_assert(strstr(e, "line 1: threads"), "%s", e);
	e = PE("1,,100\n");
	cr_assert(strstr(e, "line 1: threads \"\""), "%s", e);
	e = PE("# only comments\n\n");
	cr_assert(strstr(e, "no cells"), "%s", e);
	e = PE("");
	cr_assert(strstr(e, "no cells"), "%s", e);
	e = PE("1,1,100\n1,2,1\0000\n");
	cr_assert(strstr(e, "line 2: contains a NUL byte"), "%s", e);
}

Test(curve, bounded_line_file_cells_columns)
{
	size_t big = CURVE_MAX_FILE + 10, n = 0;
	char *text = malloc(big + 200);
	const char *e;

	memset(text, '#', CURVE_MAX_LINE + 1);
	e = parse_err(text, CURVE_MAX_LINE + 1);
	cr_assert(strstr(e, "line 1: longer than"), "%s", e);
	memset(text, '\n', big);
	e = parse_err(text, big);
	cr_assert(strstr(e, "larger than"), "%s", e);
	for (int i = 0; i <= CURVE_MAX_CELLS; i++)
		n += (size_t)sprintf(text + n, "1,%d,10\n", i + 1);
	e = parse_err(text, n);
	cr_assert(strstr(e, "line 1025: more than 1024 cells"), "%s", e);
	n = 0;
	for (int i = 0; i <= CURVE_MAX_COLS; i++)
		n += (size_t)sprintf(text + n, "%d,1,10\n", i + 1);
	e = parse_err(text, n);
	cr_assert(strstr(e, "line 65: more than 64 distinct ids values"), "%s", e);
	free(text);
}

Test(curve, load_file_errors_name_the_file)
{
	char path[] = "/tmp/test_curve_XXXXXX", err[512];
	struct curve c;
	FILE *f;
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	f = fdopen(fd, "w");
	fputs("ids,threads,queries_per_second\n1,1,100\n1,x,5\n", f);
	fclose(f);
	cr_assert(!curve_load_file(path, &c, err, sizeof err));
	cr_assert(strstr(err, path) && strstr(err, "line 3: threads \"x\""), "%s", err);
	unlink(path);
	cr_assert(!curve_load_file(path, &c, err, sizeof err));
	cr_assert(strstr(err, path) && strstr(err, "No such file"), "%s", err);
}

/* ---------------------------------------------------------------- deadline heap */

#include "bench/cm_heap.h"

/* A reply of one of many connections, on the heap by its due time. */
struct due_reply {
	struct cm_heap_node node;
	int conn;
	int64_t due;
};

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

/* 100 connections x 20 replies pushed in arrival order with due times in no
 * order (ties included); a fifth of them removed (their connection closed);
 * the rest come out earliest first, each once, and count_le agrees with a
 * count by hand at every step. */
Test(curve, heap_orders_replies_of_many_connections_by_due_time)
{
	enum { N = 2000 };
	static struct due_reply r[N];
	static bool gone[N], out[N];
	struct cm_heap h = {0};
	struct cm_heap_node *x;
	uint64_t seed = 42;
	int64_t last = INT64_MIN;
	int left = 0;

	for (int i = 0; i < N; i++) {
		r[i].conn = i % 100;
		r[i].due = (int64_t)(lcg(&seed) % 5000); /* µs: many equal keys */
		cm_heap_node_init(&r[i].node);
		cr_assert(!cm_heap_in(&r[i].node));
		cm_heap_push(&h, &r[i].node, r[i].due);
		cr_assert(cm_heap_in(&r[i].node));
	}
	for (int i = 0; i < N; i++) {
		if (r[i].conn % 5 == 3) { /* connections 3, 8, 13, ... closed */
			cm_heap_remove(&h, &r[i].node);
			cr_assert(!cm_heap_in(&r[i].node));
			gone[i] = true;
		} else {
			left++;
		}
	}
	cr_assert_eq(h.n, left);
	for (int64_t t = -1; t <= 5000; t += 250) {
		int want = 0;

		for (int i = 0; i < N; i++)
			want += !gone[i] && r[i].due <= t;
		cr_assert_eq(cm_heap_count_le(&h, t), want, "count_le(%lld)", (long long)t);
	}
	while ((x = cm_heap_pop(&h))) {
		struct due_reply *p = cm_heap_entry(x, struct due_reply, node);
		int i = (int)(p - r);

		cr_assert(!gone[i] && !out[i], "reply %d once, not removed", i);
		cr_assert(p->due >= last, "%lld after %lld", (long long)p->due, (long long)last);
		cr_assert(!cm_heap_in(x));
		out[i] = true;
		last = p->due;
		left--;
	}
	cr_assert_eq(left, 0, "every reply came out");
	cr_assert(cm_heap_pop(&h) == NULL && cm_heap_top(&h) == NULL);
	cm_heap_free(&h);
}

/* Removing the top, a leaf and a middle node keeps the order and the slots. */
Test(curve, heap_remove_anywhere)
{
	struct due_reply r[7];
	struct cm_heap h = {0};
	int64_t keys[7] = {50, 10, 40, 30, 20, 60, 70}, want[4] = {30, 40, 50, 70};
	struct cm_heap_node *x;
	int n = 0;

	for (int i = 0; i < 7; i++) {
		cm_heap_node_init(&r[i].node);
		cm_heap_push(&h, &r[i].node, keys[i]);
	}
	cm_heap_remove(&h, cm_heap_top(&h)); /* 10 */
	cm_heap_remove(&h, &r[5].node);	     /* 60 */
	cm_heap_remove(&h, &r[4].node);	     /* 20 */
	for (int i = 0; i < h.n; i++)
		cr_assert_eq(h.v[i]->idx, i);
	while ((x = cm_heap_pop(&h))) {
		cr_assert(n < 4);
		cr_assert_eq(x->key, want[n], "pop %d: %lld", n, (long long)x->key);
		n++;
	}
	cr_assert_eq(n, 4);
	cm_heap_free(&h);
}

/* ---------------------------------------------------------------- sleep bound, compensation */

/* curve_min_latency_s(conc) is the minimum latency over every ids value and
 * every c >= conc: checked against curve_latency_s on a grid, on the seed
 * and on a curve whose latency falls with c. */
Test(curve, min_latency_is_the_minimum_over_ids_and_larger_c)
{
	struct curve *cs[2] = {seed(), NULL};
	static struct curve falling;
	char err[256];
	const char *t = "1,1,100\n1,10,10000\n1,20,10000\n5,1,50\n5,10,2000\n";

	cr_assert(curve_parse(t, strlen(t), &falling, err, sizeof err), "%s", err);
	cs[1] = &falling;
	for (int k = 0; k < 2; k++) {
		for (int conc = 1; conc <= 150; conc++) {
			double m = curve_min_latency_s(cs[k], conc), lo = 1e9;

			for (int ids = 0; ids <= 40; ids++)
				for (int c2 = conc; c2 <= 400; c2++) {
					double l = curve_latency_s(cs[k], ids, c2);

					lo = l < lo ? l : lo;
				}
			cr_assert(m <= lo * (1 + 1e-12), "curve %d conc %d: %g > %g", k, conc, m,
				  lo);
			cr_assert(m >= lo * (1 - 1e-12), "curve %d conc %d: %g < %g", k, conc, m,
				  lo);
		}
	}
	assert_close(curve_min_latency_s(seed(), 1), 1 / 575.1423);
	assert_close(curve_min_latency_s(&falling, 1), 10 / 10000.0); /* at c = 10, not 1 */
	assert_close(curve_min_latency_s(&falling, 0.2), curve_min_latency_s(&falling, 1));
}

/* The think-time compensation subtracts, and never makes a delay negative. */
Test(curve, compensation_never_negative)
{
	assert_close(curve_compensated_s(0.003, 0.001), 0.002);
	cr_assert_eq(curve_compensated_s(0.001, 0.002), 0.0);
	cr_assert_eq(curve_compensated_s(0.001, 0.001), 0.0);
	assert_close(curve_compensated_s(0.002, -0.5), 0.002); /* negative think: none */
	cr_assert_eq(curve_compensated_s(0, 0), 0.0);
	for (int i = 0; i <= 100; i++)
		for (int j = -10; j <= 100; j++) {
			double d = curve_compensated_s(i * 1e-4, j * 1e-4);

			cr_assert(d >= 0 && d <= i * 1e-4, "%d %d: %g", i, j, d);
		}
}
