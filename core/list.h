/*
 * list.h — <sys/queue.h> plus the BSD macros glibc leaves out.
 */
#pragma once

#include <sys/queue.h>

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)                                                 \
	for ((var) = TAILQ_FIRST(head); (var) && ((tvar) = TAILQ_NEXT(var, field), 1);             \
	     (var) = (tvar))
#endif
