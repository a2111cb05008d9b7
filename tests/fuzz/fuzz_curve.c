// FUZZ_SOURCES: bench/curve.c
// FUZZ_SEEDS: tests/fuzz/seeds_curve.py
// FUZZ_ARGS: -max_len=8192
/*
 * fuzz_curve.c — libFuzzer target for the curve model's curve-file parser
 * and latency math (bench/curve.c): the file is the operator's, so any
 * bytes must parse or be refused with a message, within the bounds.
 *
 * Input: the file's bytes. Checked:
 *  - refused => a NUL-terminated message starting with "line N: " and N at
 *    most the input's line count + 1;
 *  - accepted => 1..CURVE_MAX_CELLS cells sorted by (ids, threads) with no
 *    duplicate, every value in bounds, columns covering the cells exactly;
 *  - on an accepted curve, for c in 0..300 and k in 0..120: the latency is
 *    finite and > 0, never decreasing in k, curve_qps = max(c, 1) / latency,
 *    and at each cell of the first column the curve is that cell;
 *  - no sanitizer report (ASan, UBSan).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/curve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static struct curve c;

static void check_refused(const uint8_t *data, size_t size, const char *err, size_t errlen)
{
	size_t lines = 1;
	long n;

	CHECK(memchr(err, '\0', errlen) != NULL);
	CHECK(strncmp(err, "line ", 5) == 0);
	n = strtol(err + 5, NULL, 10);
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	CHECK(n >= 0 && (size_t)n <= lines);
}

static void check_shape(void)
{
	int covered = 0;

	CHECK(c.ncells >= 1 && c.ncells <= CURVE_MAX_CELLS);
	CHECK(c.ncols >= 1 && c.ncols <= CURVE_MAX_COLS);
	for (int i = 0; i < c.ncells; i++) {
		const struct curve_cell *x = &c.cells[i];

		CHECK(x->ids >= 1 && x->ids <= CURVE_MAX_IDS);
		CHECK(x->threads >= 1 && x->threads <= CURVE_MAX_THREADS);
		CHECK(isfinite(x->qps) && x->qps > 0 && x->qps <= CURVE_MAX_QPS);
		if (i > 0)
			CHECK(x->ids > x[-1].ids ||
			      (x->ids == x[-1].ids && x->threads > x[-1].threads));
	}
	for (int j = 0; j < c.ncols; j++) {
		CHECK(c.cols[j].first == covered && c.cols[j].n >= 1);
		CHECK(j == 0 || c.cols[j].ids > c.cols[j - 1].ids);
		for (int i = 0; i < c.cols[j].n; i++)
			CHECK(c.cells[covered + i].ids == c.cols[j].ids);
		covered += c.cols[j].n;
	}
	CHECK(covered == c.ncells);
}

static void check_math(void)
{
	for (double conc = 0; conc <= 300; conc += 7.5) {
		double prev = 0, cc = conc < 1 ? 1 : conc;

		for (int k = 0; k <= 120; k += 3) {
			double l = curve_latency_s(&c, k, conc);

			CHECK(isfinite(l) && l > 0 && l >= prev * (1 - 1e-12));
			CHECK(fabs(curve_qps(&c, k, conc) - cc / l) <= 1e-9 * (cc / l));
			prev = l;
		}
	}
	for (int i = 0; i < c.cols[0].n; i++) {
		const struct curve_cell *x = &c.cells[i];
		double q = curve_qps(&c, x->ids, x->threads);

		CHECK(fabs(q - x->qps) <= 1e-9 * x->qps);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];

	memset(err, 'x', sizeof err);
	if (!curve_parse((const char *)data, size, &c, err, sizeof err)) {
		check_refused(data, size, err, sizeof err);
		return 0;
	}
	check_shape();
	check_math();
	return 0;
}
