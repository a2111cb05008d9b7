/*
 * cfg_check.h — the cross-field checks of a loaded configuration (which
 * settings go together, which strings name a known mode), run by cfg_load
 * and cfg_validate (config/cfg.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/cfg.h"

/* Check `c`. On failure `err` holds the message and `blame` names the one or
 * two settings it is about (NULL for none), for the loader to point at the
 * line that set them. */
bool cfg_check(const struct cfg *c, const char *blame[2], char *err, size_t errlen)
    __attribute__((warn_unused_result));
