/*
 * proxy.h — the lifecycle: startup, reload, shutdown. The process-wide
 * state it fills in (event loop, settings, clock) is core/globals.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/globals.h"

/* Set everything up from `cfg` (ownership moves) and run until shutdown. */
int proxy_main(struct cfg *cfg, const char *cfg_path);

/* Re-read the config file (SIGHUP). */
/* Re-read the config file (SIGHUP, mongoplexReload); false when rejected or
 * impossible. msg (may be NULL) gets the outcome as it is logged. */
bool proxy_reload(char *msg, size_t msglen);

/* Apply settings that need action after a config swap. */
void proxy_apply_cfg(void);
