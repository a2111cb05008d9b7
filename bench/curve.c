/*
 * curve.c — parsing a curve file and the latency model on it (see curve.h
 * for the file format and the rules; bench/README.md for the why).
 */
#include "bench/curve.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_FIELDS "ids,threads,queries_per_second"

/* Parser state: where it is and where errors go. */
struct parser {
	struct curve *out;
	int line;
	bool header_ok; /* no cell yet: a header line is still allowed */
	char *err;
	size_t errlen;
};

static bool fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(p->err, p->errlen, "line %d: ", p->line);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < p->errlen)
		vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

/* s[0..len) without leading and trailing blanks. */
static const char *trim(const char *s, size_t *len)
{
	while (*len > 0 && (*s == ' ' || *s == '\t')) {
		s++;
		(*len)--;
	}
	while (*len > 0 && (s[*len - 1] == ' ' || s[*len - 1] == '\t' || s[*len - 1] == '\r'))
		(*len)--;
	return s;
}

/* An integer field in [1, max]. */
static bool parse_int(struct parser *p, const char *f, const char *name, long max, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(f, &end, 10);
	if (end == f || *end != '\0' || errno != 0 || v < 1 || v > max)
		return fail(p, "%s \"%s\" is not a whole number from 1 to %ld", name, f, max);
	*out = (int)v;
	return true;
}

static bool parse_qps(struct parser *p, const char *f, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(f, &end);
	if (end == f || *end != '\0' || errno != 0 || !isfinite(v) || v <= 0 || v > CURVE_MAX_QPS)
		return fail(p, "queries_per_second \"%s\" is not a number above 0 and at most %.0f",
			    f, CURVE_MAX_QPS);
	*out = v;
	return true;
}

/* Splits line (NUL-terminated, modified) at commas into at most 4 trimmed fields. */
static int split(char *line, char *fields[4])
{
	int n = 0;
	char *s = line;

	for (;;) {
		char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		const char *t = trim(s, &len);

		if (n == 4)
			return 5;
		fields[n] = (char *)t;
		fields[n][len] = '\0';
		n++;
		if (!comma)
			return n;
		s = comma + 1;
	}
}

/* One non-blank, non-comment line (NUL-terminated, trimmed, modifiable). */
static bool parse_line(struct parser *p, char *line)
{
	char *f[4];
	int n = split(line, f);
	struct curve_cell *c;

	if (n != 3)
		return fail(p, "want 3 comma-separated fields (" HEADER_FIELDS "), got %s",
			    n > 4 ? "more than 4" : (n == 4 ? "4" : (n == 2 ? "2" : "1")));
	if (!strcmp(f[0], "ids") && !strcmp(f[1], "threads") &&
	    !strcmp(f[2], "queries_per_second")) {
		if (!p->header_ok)
			return fail(p, "the header line must come before the first cell");
		p->header_ok = false;
		return true;
	}
	p->header_ok = false;
	if (p->out->ncells == CURVE_MAX_CELLS)
		return fail(p, "more than %d cells", CURVE_MAX_CELLS);
	c = &p->out->cells[p->out->ncells];
	if (!parse_int(p, f[0], "ids", CURVE_MAX_IDS, &c->ids) ||
	    !parse_int(p, f[1], "threads", CURVE_MAX_THREADS, &c->threads) ||
	    !parse_qps(p, f[2], &c->qps))
		return false;
	c->line = p->line;
	p->out->ncells++;
	return true;
}

static int cmp_cell(const void *a, const void *b)
{
	const struct curve_cell *x = a, *y = b;

	if (x->ids != y->ids)
		return (x->ids > y->ids) - (x->ids < y->ids);
	if (x->threads != y->threads)
		return (x->threads > y->threads) - (x->threads < y->threads);
	return (x->line > y->line) - (x->line < y->line);
}

/* Sorts the cells, refuses duplicates, builds the columns. */
static bool finish(struct parser *p)
{
	struct curve *c = p->out;

	if (c->ncells == 0)
		return fail(p, "no cells (want lines of " HEADER_FIELDS ")");
	qsort(c->cells, (size_t)c->ncells, sizeof c->cells[0], cmp_cell);
	c->ncols = 0;
	for (int i = 0; i < c->ncells; i++) {
		struct curve_cell *cell = &c->cells[i];

		p->line = cell->line;
		if (i > 0 && cell->ids == cell[-1].ids && cell->threads == cell[-1].threads)
			return fail(p, "duplicate cell ids=%d threads=%d (also on line %d)",
				    cell->ids, cell->threads, cell[-1].line);
		if (i > 0 && cell->ids == cell[-1].ids) {
			c->cols[c->ncols - 1].n++;
			continue;
		}
		if (c->ncols == CURVE_MAX_COLS)
			return fail(p, "more than %d distinct ids values", CURVE_MAX_COLS);
		c->cols[c->ncols++] = (struct curve_col){cell->ids, i, 1};
	}
	return true;
}

bool curve_parse(const char *text, size_t len, struct curve *out, char *err, size_t errlen)
{
	struct parser p = {out, 0, true, err, errlen};
	char buf[CURVE_MAX_LINE + 1];
	size_t pos = 0;

	out->ncells = 0;
	out->ncols = 0;
	if (len > CURVE_MAX_FILE)
		return fail(&p, "the file is larger than %d bytes", CURVE_MAX_FILE);
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		const char *t;

		p.line++;
		if (n > CURVE_MAX_LINE)
			return fail(&p, "longer than %d bytes", CURVE_MAX_LINE);
		if (memchr(text + pos, '\0', n))
			return fail(&p, "contains a NUL byte");
		t = trim(text + pos, &n);
		pos += (nl ? (size_t)(nl - (text + pos)) + 1 : len - pos);
		if (n == 0 || t[0] == '#')
			continue;
		memcpy(buf, t, n);
		buf[n] = '\0';
		if (!parse_line(&p, buf))
			return false;
	}
	return finish(&p);
}

bool curve_load_file(const char *path, struct curve *out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t n;
	bool ok = false;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return false;
	}
	text = malloc(CURVE_MAX_FILE + 1);
	if (!text) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	n = fread(text, 1, CURVE_MAX_FILE + 1, f);
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		goto out;
	}
	if (n > CURVE_MAX_FILE) {
		snprintf(err, errlen, "%s: larger than %d bytes", path, CURVE_MAX_FILE);
		goto out;
	}
	ok = curve_parse(text, n, out, err, errlen);
	if (!ok) { /* name the file in front of "line N: ..." */
		char tmp[512];

		snprintf(tmp, sizeof tmp, "%s", err);
		snprintf(err, errlen, "%s: %s", path, tmp);
	}
out:
	free(text);
	fclose(f);
	return ok;
}

/* Latency of column col at concurrency conc (at least 1). */
static double col_latency(const struct curve *c, const struct curve_col *col, double conc)
{
	const struct curve_cell *p = &c->cells[col->first];
	int n = col->n;

	if (conc <= p[0].threads)
		return p[0].threads / p[0].qps; /* fixed latency below the first point */
	if (conc >= p[n - 1].threads)
		return conc / p[n - 1].qps; /* constant throughput beyond the last */
	for (int i = 0; i + 1 < n; i++) {
		if (conc <= p[i + 1].threads) {
			double f = (conc - p[i].threads) / (p[i + 1].threads - p[i].threads);

			/* a(1-f) + bf, not a + (b-a)f: exact at both cells even
			 * when they differ by orders of magnitude (a fuzzed curve
			 * from 3,627,257 to 0.145723 q/s lost 9 digits) */
			return conc / (p[i].qps * (1 - f) + p[i + 1].qps * f);
		}
	}
	return conc / p[n - 1].qps; /* not reached */
}

double curve_latency_s(const struct curve *c, int ids, double conc)
{
	double first, prev = 0, cur = 0;

	if (c->ncols == 0)
		return 0;
	if (!(conc >= 1)) /* also NaN */
		conc = 1;
	first = col_latency(c, &c->cols[0], conc);
	if (ids <= c->cols[0].ids)
		return first;
	prev = first;
	for (int j = 1; j < c->ncols; j++) {
		double l = col_latency(c, &c->cols[j], conc);

		cur = l > prev ? l : prev; /* running maximum in ids */
		if (ids <= c->cols[j].ids) {
			double f = (double)(ids - c->cols[j - 1].ids) /
				   (c->cols[j].ids - c->cols[j - 1].ids);
			return prev + (cur - prev) * f;
		}
		prev = cur;
	}
	if (c->ncols == 1)
		return first;
	/* beyond the last column: the average per-id slope first -> last */
	double slope = (prev - first) / (c->cols[c->ncols - 1].ids - c->cols[0].ids);
	return prev + slope * (ids - c->cols[c->ncols - 1].ids);
}

double curve_qps(const struct curve *c, int ids, double conc)
{
	double l;

	if (!(conc >= 1))
		conc = 1;
	l = curve_latency_s(c, ids, conc);
	return l > 0 ? conc / l : 0;
}

double curve_min_latency_s(const struct curve *c, double conc)
{
	const struct curve_col *col;
	double best;

	if (c->ncols == 0)
		return 0;
	if (!(conc >= 1))
		conc = 1;
	/* the first column is the fastest at every c (running maximum in ids);
	 * on each segment latency c / (a + b c) is monotone, so the minimum over
	 * c' >= conc is at conc or at a thread count above it; beyond the last
	 * one latency grows */
	col = &c->cols[0];
	best = col_latency(c, col, conc);
	for (int i = 0; i < col->n; i++) {
		const struct curve_cell *p = &c->cells[col->first + i];

		if (p->threads > conc && p->threads / p->qps < best)
			best = p->threads / p->qps;
	}
	return best;
}

double curve_compensated_s(double latency_s, double think_s)
{
	double d = latency_s - (think_s > 0 ? think_s : 0);

	return d > 0 ? d : 0;
}
