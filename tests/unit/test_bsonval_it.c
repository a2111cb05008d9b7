/*
 * test_bsonval_it.c — bsonval_it (core/bsonval.c), the cheap top-level walk
 * over validated documents that the router and the batcher use instead of
 * bson_iter: for a document holding every BSON type it must visit the same
 * keys, types and value bytes as libbson's iterator, and stop at the end.
 */
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/bsonval.h"

static void build_all_types(bson_t *d)
{
	bson_t sub;
	bson_oid_t oid;
	bson_decimal128_t dec;
	const uint8_t bin[3] = {1, 2, 3};

	bson_init(d);
	BSON_APPEND_UTF8(d, "find", "docs");
	BSON_APPEND_DOUBLE(d, "dbl", 1.5);
	BSON_APPEND_DOCUMENT_BEGIN(d, "filter", &sub);
	BSON_APPEND_INT32(&sub, "_id", 7);
	bson_append_document_end(d, &sub);
	BSON_APPEND_ARRAY_BEGIN(d, "arr", &sub);
	BSON_APPEND_INT64(&sub, "0", 1);
	bson_append_array_end(d, &sub);
	BSON_APPEND_BINARY(d, "bin", BSON_SUBTYPE_BINARY, bin, sizeof(bin));
	BSON_APPEND_UNDEFINED(d, "undef");
	bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
	BSON_APPEND_OID(d, "oid", &oid);
	BSON_APPEND_BOOL(d, "autocommit", false);
	BSON_APPEND_DATE_TIME(d, "date", 12345);
	BSON_APPEND_NULL(d, "null");
	BSON_APPEND_REGEX(d, "re", "^a.*", "i");
	BSON_APPEND_DBPOINTER(d, "dbp", "db.coll", &oid);
	BSON_APPEND_CODE(d, "code", "function(){}");
	BSON_APPEND_SYMBOL(d, "sym", "s");
	bson_init(&sub);
	BSON_APPEND_INT32(&sub, "x", 1);
	BSON_APPEND_CODE_WITH_SCOPE(d, "cws", "x", &sub);
	bson_destroy(&sub);
	BSON_APPEND_INT32(d, "i32", -1);
	BSON_APPEND_TIMESTAMP(d, "ts", 1, 2);
	BSON_APPEND_INT64(d, "txnNumber", 9);
	cr_assert(bson_decimal128_from_string("1.25", &dec));
	BSON_APPEND_DECIMAL128(d, "dec", &dec);
	BSON_APPEND_MINKEY(d, "min");
	BSON_APPEND_MAXKEY(d, "max");
	BSON_APPEND_UTF8(d, "$db", "bench");
}

Test(bsonval_it, same_walk_as_bson_iter)
{
	bson_t d;
	bson_iter_t ref;
	struct bsonval_it it;
	int n = 0;
	size_t err;

	build_all_types(&d);
	cr_assert_eq(bsonval_check(bson_get_data(&d), d.len, 100, &err), BSONVAL_OK);
	cr_assert(bson_iter_init(&ref, &d));
	bsonval_it_init(&it, bson_get_data(&d));
	while (bson_iter_next(&ref)) {
		const uint8_t *raw = bson_get_data(&d) + bson_iter_offset(&ref);
		size_t klen = strlen(bson_iter_key(&ref));

		cr_assert(bsonval_it_next(&it), "stopped before %s", bson_iter_key(&ref));
		cr_assert_str_eq(it.key, bson_iter_key(&ref));
		cr_assert_eq(it.type, (uint8_t)bson_iter_type(&ref), "%s", it.key);
		cr_assert_eq((const void *)it.value, (const void *)(raw + 1 + klen + 1), "%s",
			     it.key);
		n++;
	}
	cr_assert_not(bsonval_it_next(&it), "walked past the end");
	cr_assert_eq(n, 22); /* every element of build_all_types */
	bson_destroy(&d);
}

Test(bsonval_it, empty_document)
{
	bson_t d = BSON_INITIALIZER;
	struct bsonval_it it;

	bsonval_it_init(&it, bson_get_data(&d));
	cr_assert_not(bsonval_it_next(&it));
}

/* bsonval_truthy is bson_iter_as_bool for every type and value here, and
 * bsonval_int64 reads the numbers as the cursor table and the router need:
 * int32/int64 exactly, doubles truncated with `integral` false on a
 * fraction, NaN / infinities / out of range refused. */
Test(bsonval_it, truth_and_numbers_as_libbson)
{
	bson_t d;
	bson_iter_t ref;
	struct bsonval_it it;
	int64_t v;
	bool integral;
	int n = 0;

	build_all_types(&d);
	BSON_APPEND_BOOL(&d, "t", true);
	BSON_APPEND_INT32(&d, "z32", 0);
	BSON_APPEND_INT64(&d, "z64", 0);
	BSON_APPEND_DOUBLE(&d, "zd", 0.0);
	BSON_APPEND_DOUBLE(&d, "negzero", -0.0);
	BSON_APPEND_DOUBLE(&d, "nan", NAN);
	BSON_APPEND_DOUBLE(&d, "inf", INFINITY);
	BSON_APPEND_DOUBLE(&d, "big", 9223372036854775808.0);
	BSON_APPEND_DOUBLE(&d, "whole", -42.0);
	BSON_APPEND_INT64(&d, "i64max", INT64_MAX);
	cr_assert(bson_iter_init(&ref, &d));
	bsonval_it_init(&it, bson_get_data(&d));
	while (bson_iter_next(&ref)) {
		cr_assert(bsonval_it_next(&it));
		cr_assert_eq(bsonval_truthy(&it), bson_iter_as_bool(&ref), "truth of %s", it.key);
		n++;
	}
	cr_assert_eq(n, 32);

	bsonval_it_init(&it, bson_get_data(&d));
	while (bsonval_it_next(&it)) {
		bool ok = bsonval_int64(&it, &v, &integral);

		if (strcmp(it.key, "i32") == 0)
			cr_assert(ok && v == -1 && integral);
		else if (strcmp(it.key, "txnNumber") == 0)
			cr_assert(ok && v == 9 && integral);
		else if (strcmp(it.key, "i64max") == 0)
			cr_assert(ok && v == INT64_MAX && integral);
		else if (strcmp(it.key, "dbl") == 0)
			cr_assert(ok && v == 1 && !integral, "1.5: %lld", (long long)v);
		else if (strcmp(it.key, "whole") == 0)
			cr_assert(ok && v == -42 && integral);
		else if (strcmp(it.key, "nan") == 0 || strcmp(it.key, "inf") == 0 ||
			 strcmp(it.key, "big") == 0)
			cr_assert_not(ok, "%s must be refused", it.key);
		else if (it.type != BSON_TYPE_INT32 && it.type != BSON_TYPE_INT64 &&
			 it.type != BSON_TYPE_DOUBLE)
			cr_assert_not(ok, "%s is not a number", it.key);
	}
	bson_destroy(&d);
}

/* BSONVAL_KEY_IS: equal keys only (not a prefix, not an extension), the
 * empty key included; a key last in its document with a value of no bytes
 * (null) is compared without reading past it (ASan would see it).
 * bsonval_key_len is the key's strlen. */
Test(bsonval_it, key_is_exact)
{
	bson_t b = BSON_INITIALIZER;
	const char *keys[] = {"o", "ok", "okk", "", "cursor"};
	struct bsonval_it it;
	uint8_t *copy;
	int n = 0;

	for (int i = 0; i < 5; i++)
		cr_assert(bson_append_null(&b, keys[i], -1));
	copy = malloc(b.len); /* exactly the document's bytes, for ASan */
	memcpy(copy, bson_get_data(&b), b.len);
	bsonval_it_init(&it, copy);
	while (bsonval_it_next(&it)) {
		bool is_ok = BSONVAL_KEY_IS(&it, "ok"), is_empty = BSONVAL_KEY_IS(&it, "");
		bool is_cursor = BSONVAL_KEY_IS(&it, "cursor");

		cr_assert_eq(is_ok, strcmp(keys[n], "ok") == 0, "key '%s' as ok", keys[n]);
		cr_assert_eq(is_empty, keys[n][0] == 0, "key '%s' as empty", keys[n]);
		cr_assert_eq(is_cursor, strcmp(keys[n], "cursor") == 0, "key '%s' as cursor",
			     keys[n]);
		cr_assert_not(BSONVAL_KEY_IS(&it, "cursorX"));
		cr_assert_eq(bsonval_key_len(&it), strlen(keys[n]));
		n++;
	}
	cr_assert_eq(n, 5);
	free(copy);
	bson_destroy(&b);
}
