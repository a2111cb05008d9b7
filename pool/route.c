/*
 * route.c — pool/'s part of a request (route.h): its size and what freeing
 * a request releases of it (a batch member's ids, the pin note, the kept
 * $readPreference).
 */
#include "pool/route.h"

#include "pool/batch.h"
#include "pool/pin.h"

static void route_fini(struct request *req)
{
	struct req_route *r = req->route;

	batch_lookup_free(r->lookup); /* a batch member's ids */
	r->lookup = NULL;
	pin_note_free(r->pin_note);
	r->pin_note = NULL;
	if (r->read_pref != NULL)
		bson_destroy(r->read_pref);
	r->read_pref = NULL;
}

const struct request_part pool_route_part = {
    .size = sizeof(struct req_route),
    .fini = route_fini,
};
