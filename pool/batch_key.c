/*
 * batch_key.c — the key under which lookups merge (see batch_key.h).
 */
#include "pool/batch_key.h"

#include <string.h>

#include "core/bsonval.h"

/* The fields that must agree for lookups to merge, copied into the query. */
static const char *const key_fields[] = {"projection", "readConcern", "$readPreference",
					 "maxTimeMS", NULL};

/* One cheap pass over the validated body (wire_parse_msg; classify refused
 * duplicate keys): no iterator, no copy. */
void batch_key_parts(const bson_t *body, struct key_parts *kp)
{
	struct bsonval_it it;

	memset(kp, 0, sizeof(*kp));
	kp->extra_len = 5;
	bsonval_it_init(&it, bson_get_data(body));
	while (bsonval_it_next(&it))
		for (int i = 0; key_fields[i]; i++)
			if (kp->elem[i] == NULL && it.key[0] == key_fields[i][0] &&
			    strcmp(it.key, key_fields[i]) == 0) {
				kp->elem[i] = (const uint8_t *)it.key - 1;
				kp->len[i] = (size_t)(it.value + it.vlen - kp->elem[i]);
				kp->extra_len += kp->len[i];
				break;
			}
}

size_t batch_key_len(const struct key_parts *kp, const char *db, const char *coll)
{
	return strlen(db) + 1 + strlen(coll) + 1 + kp->extra_len;
}

/* The key (batch_key_len bytes): db NUL coll NUL, then the document of the key
 * fields in key_fields order, so equal lookups give equal keys (the bytes
 * bson_append_iter of each field would give). */
void batch_key_write(const struct key_parts *kp, const char *db, const char *coll, char *out)
{
	size_t dl = strlen(db) + 1, cl = strlen(coll) + 1, pos = dl + cl + 4;
	uint32_t le = BSON_UINT32_TO_LE((uint32_t)kp->extra_len);

	memcpy(out, db, dl);
	memcpy(out + dl, coll, cl);
	memcpy(out + dl + cl, &le, 4);
	for (int i = 0; i < N_KEY_FIELDS; i++)
		if (kp->elem[i] != NULL) {
			memcpy(out + pos, kp->elem[i], kp->len[i]);
			pos += kp->len[i];
		}
	out[pos] = 0;
}
