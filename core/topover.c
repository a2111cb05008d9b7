/*
 * topover.c — the proxy's topologyVersion: processId and change counter.
 */
#include "core/topover.h"

#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "core/errors.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/wire.h"

static bson_oid_t process_id;
static bool made;
static int64_t counter;
static void (*listener)(void);

void topover_init(void)
{
	if (made)
		return;
	bson_oid_init(&process_id, NULL);
	made = true;
}

const bson_oid_t *topover_process_id(void)
{
	topover_init();
	return &process_id;
}

int64_t topover_counter(void)
{
	return counter;
}

void topover_append(bson_t *doc, const char *key)
{
	bson_t tv;

	topover_init();
	bson_append_document_begin(doc, key, -1, &tv);
	BSON_APPEND_OID(&tv, "processId", &process_id);
	BSON_APPEND_INT64(&tv, "counter", counter);
	bson_append_document_end(doc, &tv);
}

void topover_bump(const char *why)
{
	counter++;
	STAT_INC(topology_changes);
	log_info("topologyVersion counter -> %" PRId64 ": %s", counter, why);
	if (listener != NULL)
		listener();
}

void topover_set_listener(void (*cb)(void))
{
	listener = cb;
}

static const char *type_name(bson_type_t t)
{
	switch (t) {
	case BSON_TYPE_UTF8:
		return "string";
	case BSON_TYPE_DOCUMENT:
		return "object";
	case BSON_TYPE_ARRAY:
		return "array";
	case BSON_TYPE_BOOL:
		return "bool";
	case BSON_TYPE_NULL:
		return "null";
	case BSON_TYPE_OID:
		return "objectId";
	case BSON_TYPE_DECIMAL128:
		return "decimal";
	case BSON_TYPE_DATE_TIME:
		return "date";
	default:
		return "another type";
	}
}

static bool read_counter(bson_iter_t *it, int64_t *out)
{
	if (BSON_ITER_HOLDS_INT64(it))
		*out = bson_iter_int64(it);
	else if (BSON_ITER_HOLDS_INT32(it))
		*out = bson_iter_int32(it);
	else
		return false;
	return true;
}

/* maxAwaitTimeMS: an integer (int32, int64, or a double holding one). */
static bool read_max_await(bson_iter_t *it, int64_t *out, struct wire_error *err)
{
	double d;

	if (BSON_ITER_HOLDS_DOUBLE(it)) {
		d = bson_iter_double(it);
		if (!(d >= -9.2e18 && d <= 9.2e18) || d != (double)(int64_t)d) {
			wire_set_error(err, MP_ERR(BAD_VALUE),
				       "mongoplex: maxAwaitTimeMS must be an integer");
			return false;
		}
		*out = (int64_t)d;
	} else if (!read_counter(it, out)) {
		wire_set_error(err, MP_ERR(TYPE_MISMATCH),
			       "mongoplex: maxAwaitTimeMS must be a number, not %s",
			       type_name(bson_iter_type(it)));
		return false;
	}
	if (*out < 0) {
		wire_set_error(err, MP_ERR(LOCATION_31373),
			       "mongoplex: maxAwaitTimeMS must be a non-negative integer");
		return false;
	}
	return true;
}

/* topologyVersion: {processId: ObjectId, counter: int64 >= 0}. */
static bool read_tv(bson_iter_t *tv, struct topover_await *a, struct wire_error *err)
{
	bson_iter_t in, f;

	if (!BSON_ITER_HOLDS_DOCUMENT(tv) || !bson_iter_recurse(tv, &in)) {
		wire_set_error(err, MP_ERR(TYPE_MISMATCH),
			       "mongoplex: BSON field 'topologyVersion' is the wrong type '%s', "
			       "expected type 'object'",
			       type_name(bson_iter_type(tv)));
		return false;
	}
	f = in;
	if (!bson_iter_find(&f, "processId") || !BSON_ITER_HOLDS_OID(&f)) {
		wire_set_error(err, MP_ERR(TYPE_MISMATCH),
			       "mongoplex: topologyVersion.processId must be an ObjectId");
		return false;
	}
	a->same_process = bson_oid_equal(bson_iter_oid(&f), topover_process_id());
	f = in;
	if (!bson_iter_find(&f, "counter") || !read_counter(&f, &a->counter)) {
		wire_set_error(err, MP_ERR(TYPE_MISMATCH),
			       "mongoplex: topologyVersion.counter must be an integer (long)");
		return false;
	}
	if (a->counter < 0) {
		wire_set_error(err, MP_ERR(LOCATION_31372),
			       "mongoplex: topologyVersion must have a non-negative counter");
		return false;
	}
	if (a->same_process && a->counter > counter) {
		wire_set_error(
		    err, MP_ERR(LOCATION_31382),
		    "mongoplex: Received a topology version with counter: %" PRId64
		    " which is greater than the server topology version counter: %" PRId64,
		    a->counter, counter);
		return false;
	}
	return true;
}

enum topover_await_kind topover_parse_await(const bson_t *cmd, struct topover_await *a,
					    struct wire_error *err)
{
	bson_iter_t tv, mat;
	bool has_tv = bson_iter_init_find(&tv, cmd, "topologyVersion");
	bool has_mat = bson_iter_init_find(&mat, cmd, "maxAwaitTimeMS");

	memset(a, 0, sizeof(*a));
	if (!has_tv && !has_mat)
		return TOPOVER_PLAIN;
	if (has_tv != has_mat) {
		wire_set_error(err, MP_ERR(LOCATION_31368), "mongoplex: %s",
			       has_tv ? "A request with a 'topologyVersion' must include "
					"'maxAwaitTimeMS'"
				      : "A request with 'maxAwaitTimeMS' must include a "
					"'topologyVersion'");
		return TOPOVER_REFUSE;
	}
	if (!read_max_await(&mat, &a->max_await_ms, err) || !read_tv(&tv, a, err))
		return TOPOVER_REFUSE;
	return TOPOVER_AWAIT;
}
