// FUZZ_SOURCES: proxy/admin_table.c
// FUZZ_PKGS: libbson-1.0
// FUZZ_ARGS: -max_len=8192
/*
 * fuzz_admin_table.c — libFuzzer target for the table of mongoplex --admin
 * (proxy/admin_table.c), which prints a reply whose values come from other
 * clients (application and driver names of their hellos).
 *
 * Mode (first byte, even): the rest is a BSON document (if libbson accepts
 * it) printed as a reply. Mode (odd): the rest, split at NUL bytes, becomes
 * string values of rows under keys picked by the next byte, so rows with
 * odd keys, missing fields, long and hostile strings are reached. Checks
 * (any failure aborts): the output holds no control character but '\n' (no
 * escape sequence reaches a terminal), ends with a newline, and its last
 * line (or the one before the truncation note) is "(N row[s])".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/admin_table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			fprintf(stderr, "fuzz_admin_table: check failed: %s\n", #x);               \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void check_output(const bson_t *reply)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f != NULL);
	admin_table_print(f, reply);
	CHECK(fclose(f) == 0);
	CHECK(len > 0 && buf[len - 1] == '\n');
	for (size_t i = 0; i < len; i++)
		CHECK((unsigned char)buf[i] >= 0x20 || buf[i] == '\n');
	CHECK(strstr(buf, " row") != NULL || strstr(buf, "(no rows in the reply)") != NULL);
	free(buf);
}

/* Rows of strings built from the input. */
static void assemble(const uint8_t *data, size_t size)
{
	static const char *const keys[] = {"id", "peer", "app_name", "driver", "x", ""};
	bson_t reply = BSON_INITIALIZER, rows, row;
	size_t pos = 0, nrow = 0;
	char k[16];

	BSON_APPEND_ARRAY_BEGIN(&reply, "rows", &rows);
	while (pos < size && nrow < 50) {
		uint8_t ctl = data[pos++];
		size_t n = strnlen((const char *)data + pos, size - pos);
		char *s = strndup((const char *)data + pos, n);

		pos += n + 1;
		snprintf(k, sizeof(k), "%zu", nrow++);
		BSON_APPEND_DOCUMENT_BEGIN(&rows, k, &row);
		if (ctl & 1)
			BSON_APPEND_INT64(&row, "id", (int64_t)ctl * 1000003);
		if (bson_utf8_validate(s, n, false))
			BSON_APPEND_UTF8(&row, keys[(ctl >> 1) % 6], s);
		if (ctl & 0x80)
			BSON_APPEND_BOOL(&row, "tls", ctl & 0x40);
		bson_append_document_end(&rows, &row);
		free(s);
	}
	bson_append_array_end(&reply, &rows);
	if (size > 0 && (data[0] & 2)) {
		BSON_APPEND_BOOL(&reply, "truncated", true);
		BSON_APPEND_INT64(&reply, "next", (int64_t)nrow);
	}
	check_output(&reply);
	bson_destroy(&reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bson_t doc;

	if (size < 1)
		return 0;
	if ((data[0] & 1) == 0) {
		if (bson_init_static(&doc, data + 1, size - 1) && bson_validate(&doc, 0, NULL))
			check_output(&doc);
	} else {
		assemble(data + 1, size - 1);
	}
	return 0;
}
