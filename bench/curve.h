/*
 * curve.h — the curve of mongoplex-curvemodel: a table of queries/s by ids
 * per query and client threads (a CSV file the operator gives), and the
 * latency a query gets from it.
 *
 * File: one cell per line, `ids,threads,queries_per_second` (an optional
 * header line of exactly those names; blank lines and lines starting with
 * '#' are ignored). Bounded: at most CURVE_MAX_FILE bytes, CURVE_MAX_LINE
 * bytes a line, CURVE_MAX_CELLS cells, CURVE_MAX_COLS distinct ids values;
 * every error names its line.
 *
 * Latency of a query of k ids arriving when c queries are in service
 * (itself included), curve_latency_s():
 *   - per ids column: throughput linear in c between the column's thread
 *     counts, constant beyond the last one (latency = c / throughput grows
 *     with c), and below the first one the first point's latency (c below 1
 *     counts as 1);
 *   - across columns, at that c: the running maximum of latency in ascending
 *     ids (never faster with more ids: the seed's 1-thread row is faster at
 *     20 ids than at 10), then linear in k between columns; below the first
 *     column the first column's latency; beyond the last column extended
 *     with the average per-id slope from the first to the last column (no
 *     slope with one column).
 * Pure functions: no I/O but curve_load_file, no globals.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define CURVE_MAX_FILE	  (1024 * 1024)
#define CURVE_MAX_LINE	  1024
#define CURVE_MAX_CELLS	  1024
#define CURVE_MAX_COLS	  64
#define CURVE_MAX_IDS	  1000000 /* largest ids value in a file */
#define CURVE_MAX_THREADS 1000000 /* largest threads value in a file */
#define CURVE_MAX_QPS	  1e9

/* One cell of the table. */
struct curve_cell {
	int ids;
	int threads;
	double qps;
	int line; /* where it was read (for duplicate errors) */
};

/* One ids value: its cells are cells[first .. first + n), ascending threads. */
struct curve_col {
	int ids;
	int first;
	int n;
};

/* A parsed curve. cells are sorted by (ids, threads); cols by ids. */
struct curve {
	int ncells;
	struct curve_cell cells[CURVE_MAX_CELLS];
	int ncols;
	struct curve_col cols[CURVE_MAX_COLS];
};

/* Parses text[0..len) into *out. On failure returns false with a message
 * ("line N: ...") in err; *out is then unspecified. */
bool curve_parse(const char *text, size_t len, struct curve *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Reads and parses the file at path (at most CURVE_MAX_FILE bytes). */
bool curve_load_file(const char *path, struct curve *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Seconds a query of `ids` ids takes when `conc` queries are in service. */
double curve_latency_s(const struct curve *c, int ids, double conc);

/* The curve's throughput at (ids, conc): conc / latency (conc at least 1). */
double curve_qps(const struct curve *c, int ids, double conc);

/* The shortest latency any query can get while at least conc queries are in
 * service (itself included): the minimum of curve_latency_s over every ids
 * value and every c' >= conc. The model sleeps at most this long while
 * queries are in service (bench/cm_conn.c). */
double curve_min_latency_s(const struct curve *c, double conc);

/* The delay of a reply whose curve latency is latency_s when the client's
 * think time (from its last reply being written to this query arriving) is
 * think_s: latency_s - think_s, never below 0 (a negative think counts as 0). */
double curve_compensated_s(double latency_s, double think_s);
