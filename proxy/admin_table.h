/*
 * admin_table.h — a mongoplexShow reply as an aligned text table, the way
 * psql prints PgBouncer's SHOW: a header, a separator, one line per row,
 * "(N rows)". Columns are the rows' keys in order of first appearance;
 * numbers are right-aligned; control characters in values (names that come
 * from clients' hellos) are printed as '?'.
 */
#pragma once

#include <bson/bson.h>
#include <stdio.h>

#define ADMIN_TABLE_MAX_COLS 64
#define ADMIN_TABLE_CELL     512 /* a value longer than this is cut (with "...") */

/* Print reply's `rows` (and its truncated/next note) to out. */
void admin_table_print(FILE *out, const bson_t *reply);
