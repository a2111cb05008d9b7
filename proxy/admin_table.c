/*
 * admin_table.c — the psql-style table of mongoplex --admin (see
 * admin_table.h). Two passes over the rows: column names and widths, then
 * the lines.
 */
#include "proxy/admin_table.h"

#include <inttypes.h>
#include <string.h>

struct table {
	char names[ADMIN_TABLE_MAX_COLS][64];
	size_t width[ADMIN_TABLE_MAX_COLS];
	bool numeric[ADMIN_TABLE_MAX_COLS];
	int ncols;
};

/* Characters of a UTF-8 string (continuation bytes not counted). */
static size_t text_width(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* One value as text; control characters become '?'. */
static void cell(const bson_iter_t *it, char *buf, size_t len)
{
	const char *s;

	switch (bson_iter_type(it)) {
	case BSON_TYPE_UTF8:
		s = bson_iter_utf8(it, NULL);
		if (strlen(s) >= len)
			snprintf(buf, len, "%.*s...", (int)(len - 4), s);
		else
			snprintf(buf, len, "%s", s);
		break;
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		snprintf(buf, len, "%" PRId64, bson_iter_as_int64(it));
		break;
	case BSON_TYPE_DOUBLE:
		snprintf(buf, len, "%g", bson_iter_double(it));
		break;
	case BSON_TYPE_BOOL:
		snprintf(buf, len, "%s", bson_iter_bool(it) ? "t" : "f");
		break;
	case BSON_TYPE_NULL:
		buf[0] = '\0';
		break;
	case BSON_TYPE_DOCUMENT:
	case BSON_TYPE_ARRAY:
		snprintf(buf, len, "(document)"); /* --json shows it */
		break;
	default:
		snprintf(buf, len, "(value)");
		break;
	}
	for (char *p = buf; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

static bool is_number(const bson_iter_t *it)
{
	return BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it) || BSON_ITER_HOLDS_DOUBLE(it);
}

static int column(struct table *t, const char *name)
{
	for (int i = 0; i < t->ncols; i++)
		if (strcmp(t->names[i], name) == 0)
			return i;
	if (t->ncols == ADMIN_TABLE_MAX_COLS)
		return -1;
	snprintf(t->names[t->ncols], sizeof(t->names[0]), "%s", name);
	t->width[t->ncols] = text_width(t->names[t->ncols]);
	t->numeric[t->ncols] = true;
	return t->ncols++;
}

/* First pass: the columns, their widths, which hold only numbers. */
static int64_t measure(struct table *t, bson_iter_t *rows)
{
	bson_iter_t row, f;
	char buf[ADMIN_TABLE_CELL];
	int64_t n = 0;

	while (bson_iter_next(rows)) {
		n++;
		if (!BSON_ITER_HOLDS_DOCUMENT(rows) || !bson_iter_recurse(rows, &row))
			continue;
		while (bson_iter_next(&row)) {
			int col = column(t, bson_iter_key(&row));

			if (col < 0)
				continue;
			f = row;
			cell(&f, buf, sizeof(buf));
			if (text_width(buf) > t->width[col])
				t->width[col] = text_width(buf);
			t->numeric[col] = t->numeric[col] && is_number(&f);
		}
	}
	return n;
}

static void pad(FILE *out, size_t n)
{
	while (n-- > 0)
		fputc(' ', out);
}

static void put_cell(FILE *out, const struct table *t, int col, const char *text)
{
	size_t w = text_width(text);

	fputs(col == 0 ? " " : " | ", out);
	if (t->numeric[col] && (text[0] != '\0' || col + 1 < t->ncols)) /* no trailing blanks */
		pad(out, t->width[col] - w);
	fputs(text, out);
	if (!t->numeric[col] && col + 1 < t->ncols)
		pad(out, t->width[col] - w);
}

static void print_row(FILE *out, const struct table *t, bson_iter_t *rowit)
{
	char vals[ADMIN_TABLE_MAX_COLS][ADMIN_TABLE_CELL];
	bson_iter_t row;

	for (int i = 0; i < t->ncols; i++)
		vals[i][0] = '\0';
	if (BSON_ITER_HOLDS_DOCUMENT(rowit) && bson_iter_recurse(rowit, &row))
		while (bson_iter_next(&row))
			for (int i = 0; i < t->ncols; i++)
				if (strcmp(t->names[i], bson_iter_key(&row)) == 0)
					cell(&row, vals[i], sizeof(vals[i]));
	for (int i = 0; i < t->ncols; i++)
		put_cell(out, t, i, vals[i]);
	fputc('\n', out);
}

static void print_header(FILE *out, const struct table *t)
{
	for (int i = 0; i < t->ncols; i++) { /* names centred, as psql does */
		size_t w = text_width(t->names[i]), left = (t->width[i] - w) / 2;

		fputs(i == 0 ? " " : " | ", out);
		pad(out, left);
		fputs(t->names[i], out);
		if (i + 1 < t->ncols)
			pad(out, t->width[i] - w - left);
	}
	fputc('\n', out);
	for (int i = 0; i < t->ncols; i++) {
		if (i > 0)
			fputc('+', out);
		for (size_t k = 0; k < t->width[i] + 2; k++)
			fputc('-', out);
	}
	fputc('\n', out);
}

void admin_table_print(FILE *out, const bson_t *reply)
{
	struct table t = {0};
	bson_iter_t it, rows;
	int64_t n;

	if (!bson_iter_init_find(&it, reply, "rows") || !BSON_ITER_HOLDS_ARRAY(&it) ||
	    !bson_iter_recurse(&it, &rows)) {
		fprintf(out, "(no rows in the reply)\n");
		return;
	}
	n = measure(&t, &rows);
	bson_iter_recurse(&it, &rows);
	if (t.ncols > 0)
		print_header(out, &t);
	while (bson_iter_next(&rows))
		print_row(out, &t, &rows);
	fprintf(out, "(%" PRId64 " row%s)\n", n, n == 1 ? "" : "s");
	if (bson_iter_init_find(&it, reply, "truncated") && bson_iter_as_bool(&it) &&
	    bson_iter_init_find(&it, reply, "next"))
		fprintf(out,
			"(truncated: the reply reached its size bound; more rows from skip "
			"%" PRId64 ")\n",
			bson_iter_as_int64(&it));
}
