/*
 * owner.c — pool/'s part of a request owner (struct owner_route, declared
 * in route.h): made on first use, freed with the owner (pool_owner_fini).
 * A leaf: it calls nothing else in pool/, so the sticky and pin code can
 * reach it without joining a call circle.
 */
#include <stdlib.h>

#include "core/xalloc.h"
#include "pool/route.h"

struct owner_route *owner_route(struct request_owner *o)
{
	if (o->route == NULL) {
		o->route = xcalloc(1, sizeof(*o->route));
		TAILQ_INIT(&o->route->pins);
	}
	return o->route;
}

struct server *owner_sticky(const struct request_owner *o)
{
	return o->route != NULL ? o->route->sticky : NULL;
}

bool owner_load_balanced(const struct request_owner *o)
{
	return o->route != NULL && o->route->load_balanced;
}

int owner_pin_count(const struct request_owner *o)
{
	return o->route != NULL ? o->route->n_pins : 0;
}

void pool_owner_fini(struct request_owner *o)
{
	free(o->route);
	o->route = NULL;
}
