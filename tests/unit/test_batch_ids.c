/*
 * test_batch_ids.c — pool/batch_ids.c beyond classification (test_batch.c
 * has the classifier and the comparison tables): exact int64/double
 * comparison at the edges, the union sent as the merged $in, and the split
 * of a merged reply, including the cross-client leak of issue 8 (a lookup
 * of 0 received the decimal 0.5 that a lookup of the double 0.5 found).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "pool/batch_ids.h"

static bson_value_t I32(int32_t x)
{
	return (bson_value_t){.value_type = BSON_TYPE_INT32, .value.v_int32 = x};
}

static bson_value_t I64(int64_t x)
{
	return (bson_value_t){.value_type = BSON_TYPE_INT64, .value.v_int64 = x};
}

static bson_value_t DBL(double x)
{
	return (bson_value_t){.value_type = BSON_TYPE_DOUBLE, .value.v_double = x};
}

static bson_value_t DEC(const char *s)
{
	bson_value_t v = {.value_type = BSON_TYPE_DECIMAL128};

	cr_assert(bson_decimal128_from_string(s, &v.value.v_decimal128));
	return v;
}

static bson_value_t STR(const char *s)
{
	bson_value_t v = {.value_type = BSON_TYPE_UTF8};

	v.value.v_utf8.str = (char *)s;
	v.value.v_utf8.len = (uint32_t)strlen(s);
	return v;
}

static int sgn(int c)
{
	return c < 0 ? -1 : c > 0;
}

static void cmp_is(bson_value_t a, bson_value_t b, int want)
{
	cr_expect_eq(sgn(batch_ids_compare(&a, &b)), want, "compare line: want %d", want);
	cr_expect_eq(sgn(batch_ids_compare(&b, &a)), -want, "reverse: want %d", -want);
}

Test(batch_ids_compare, int64_against_double_exactly)
{
	const int64_t p53 = INT64_C(1) << 53;

	cmp_is(I64(INT64_MAX), DBL(9223372036854775808.0), -1); /* 2^63 */
	cmp_is(I64(INT64_MAX), DBL(9223372036854774784.0), 1);	/* largest double < 2^63 */
	cmp_is(I64(INT64_MIN), DBL(-9223372036854775808.0), 0);
	cmp_is(I64(INT64_MIN + 1), DBL(-9223372036854775808.0), 1);
	cmp_is(I64(p53 + 1), DBL((double)p53), 1);
	cmp_is(I64(p53 + 1), DBL((double)(p53 + 2)), -1);
	cmp_is(I64(p53 - 1), DBL((double)(p53 - 1)), 0);
	cmp_is(I64(-p53 - 1), DBL(-(double)p53), -1);
	cmp_is(I64(INT64_MAX), DBL(INFINITY), -1);
	cmp_is(I64(INT64_MIN), DBL(-INFINITY), 1);
	cmp_is(I32(0), DBL(-0.0), 0);
	cmp_is(I32(0), DBL(5e-324), -1);
	cmp_is(I32(0), DBL(-5e-324), 1);
	cmp_is(I32(0), DBL(0.5), -1);
	cmp_is(I32(0), DBL(-0.5), 1);
	cmp_is(I32(-1), DBL(-1.5), 1); /* truncation goes toward zero */
	cmp_is(I32(-2), DBL(-1.5), -1);
	cmp_is(I32(1), DBL(1.0000000000000002), -1);
	cmp_is(DBL(-0.0), DBL(0.0), 0);
	cmp_is(DBL(-INFINITY), DBL(-1e308), -1);
	cmp_is(DEC("-0"), DBL(-0.0), 0);
	cmp_is(DEC("9007199254740992"), I64(p53 + 1), -1);
}

Test(batch_ids_value, what_is_compared_exactly)
{
	bson_value_t yes[] = {I32(0),
			      I64(INT64_MAX),
			      DBL(-0.0),
			      DBL(5e-324),
			      DBL(-9223372036854775808.0),
			      DEC("0E-6176"),
			      DEC("-9007199254740992"),
			      DEC("1.000E+3")};
	bson_value_t no[] = {DBL(NAN),
			     DBL(INFINITY),
			     DBL(-INFINITY),
			     DBL(9223372036854775808.0),
			     DBL(-1e300),
			     DEC("0.5"),
			     DEC("1234567890123456789"),
			     DEC("9007199254740993"),
			     DEC("1E-400"),
			     DEC("NaN"),
			     DEC("Infinity")};
	bson_value_t noncanon = {.value_type = BSON_TYPE_DECIMAL128};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cr_expect(batch_ids_value_ok(&yes[i]), "yes[%zu]", i);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_expect_not(batch_ids_value_ok(&no[i]), "no[%zu]", i);
	/* coefficient 10^34 (one above the largest canonical), exponent 0 */
	noncanon.value.v_decimal128.high = 0x3040000000000000ULL | 0x1ED09BEAD87C0ULL;
	noncanon.value.v_decimal128.low = 0x378D8E6400000000ULL;
	cr_expect_not(batch_ids_value_ok(&noncanon), "non-canonical decimal (MongoDB: 0)");
}

/* ---- union and split ---------------------------------------------------- */

static void make_docs(const bson_value_t *ids, int n, bson_t **store, struct batch_ids_doc *docs)
{
	for (int j = 0; j < n; j++) {
		store[j] = bson_new();
		bson_append_value(store[j], "_id", 3, &ids[j]);
		BSON_APPEND_INT32(store[j], "k", j);
		cr_assert(batch_ids_doc_init(&docs[j], bson_get_data(store[j]), store[j]->len));
	}
}

static void free_docs(bson_t **store, int n)
{
	for (int j = 0; j < n; j++)
		bson_destroy(store[j]);
}

/* The `k` (position when made) of document idx. */
static int k_of(const struct batch_ids_doc *d)
{
	bson_t view;
	bson_iter_t it;

	cr_assert(bson_init_static(&view, d->data, d->len));
	cr_assert(bson_iter_init_find(&it, &view, "k"));
	return bson_iter_int32(&it);
}

static bool split(bson_value_t *docids, int nd, struct batch_id_list *lists, int nl, bson_t **store,
		  struct batch_ids_doc *docs)
{
	const struct batch_id_list *lp[8];

	for (int i = 0; i < nl; i++)
		lp[i] = &lists[i];
	make_docs(docids, nd, store, docs);
	return batch_ids_split_ok(docs, nd, lp, nl);
}

/* Issue 8: {_id: 0} and {_id: 0.5} merged; the backend finds the decimal 0.5
 * for the double 0.5. Its _id cannot be compared exactly: no split. */
Test(batch_ids_split, leak_of_the_decimal_half)
{
	bson_value_t a[] = {I32(0)}, b[] = {DBL(0.5)}, d[] = {DEC("0.5")};
	bson_value_t d19[] = {DEC("1234567890123456789")}, b19[] = {DBL(1.2345678901234568e18)};
	struct batch_id_list lists[2] = {{a, 1}, {b, 1}};
	bson_t *store[4];
	struct batch_ids_doc docs[4];

	cr_expect_not(split(d, 1, lists, 2, store, docs));
	free_docs(store, 1);
	lists[1] = (struct batch_id_list){b19, 1};
	cr_expect_not(split(d19, 1, lists, 2, store, docs));
	free_docs(store, 1);
}

Test(batch_ids_split, each_member_gets_its_documents_in_order)
{
	bson_value_t a[] = {I32(1), STR("a")}, b[] = {DBL(1.0), I32(2)}, c[] = {I32(7)};
	bson_value_t d[] = {STR("a"), I32(2), I64(1)};
	struct batch_id_list lists[3] = {{a, 2}, {b, 2}, {c, 1}};
	bson_t *store[3];
	struct batch_ids_doc docs[3];
	int idx[4], n;

	cr_assert(split(d, 3, lists, 3, store, docs));
	n = batch_ids_docs_for(docs, 3, &lists[0], idx);
	cr_assert_eq(n, 2);
	cr_expect_eq(k_of(&docs[idx[0]]), 2); /* the int64 1 */
	cr_expect_eq(k_of(&docs[idx[1]]), 0); /* "a" */
	n = batch_ids_docs_for(docs, 3, &lists[1], idx);
	cr_assert_eq(n, 2);
	cr_expect_eq(k_of(&docs[idx[0]]), 2);
	cr_expect_eq(k_of(&docs[idx[1]]), 1);
	cr_expect_eq(batch_ids_docs_for(docs, 3, &lists[2], idx), 0);
	free_docs(store, 3);
}

Test(batch_ids_split, unclaimed_or_duplicate_documents_refuse)
{
	bson_value_t a[] = {I32(1)}, unclaimed[] = {I32(1), I32(3)}, dup[] = {I32(1), DBL(1.0)};
	struct batch_id_list lists[1] = {{a, 1}};
	bson_t *store[2];
	struct batch_ids_doc docs[2];

	cr_expect_not(split(unclaimed, 2, lists, 1, store, docs));
	free_docs(store, 2);
	cr_expect_not(split(dup, 2, lists, 1, store, docs));
	free_docs(store, 2);
}

Test(batch_ids_union, same_value_other_type_is_kept)
{
	bson_value_t a[] = {I32(1)}, b[] = {DBL(1.0), I32(1), DBL(-0.0)}, c[] = {DBL(0.0)};
	struct batch_id_list la = {a, 1}, lb = {b, 3}, lc = {c, 1};
	const struct batch_id_list *lp[] = {&la, &lb, &lc};
	bson_value_t out[5];
	int n = batch_ids_union(lp, 3, out);

	/* int32 1 once, double 1.0, one of the double zeros */
	cr_expect_eq(n, 3);
	for (int i = 1; i < n; i++)
		cr_expect_leq(batch_ids_compare(&out[i - 1], &out[i]), 0);
}

Test(batch_ids_list, from_find_sorted_unique)
{
	bson_error_t err;
	bson_t *cmd = bson_new_from_json(
	    (const uint8_t *)"{\"find\": \"c\", \"filter\": {\"_id\": {\"$in\": [3, 1, 1.0, "
			     "{\"$numberLong\": \"2\"}, \"x\", 3]}}, \"$db\": \"d\"}",
	    -1, &err);
	struct batch_id_list l;

	cr_assert_not_null(cmd);
	cr_assert_null(batch_ids_classify(cmd));
	batch_ids_list_from_find(cmd, &l);
	cr_expect_eq(l.n, 4); /* 1, 2, 3, "x" */
	for (int i = 1; i < l.n; i++)
		cr_expect_lt(batch_ids_compare(&l.ids[i - 1], &l.ids[i]), 0);
	batch_ids_list_free(&l);
	bson_destroy(cmd);
}
