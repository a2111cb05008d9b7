/*
 * client_tls.h — TLS for clients: the server context built from the
 * client_tls_* settings, rebuilt on every reload (certificate rotation:
 * connections keep the context they were accepted with; a context that
 * fails to build keeps the current one, and the log says why).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cfg;
struct sbuf;

/* Startup: build the context for g.cfg (nothing when disabled). */
bool client_tls_start(char *err, size_t errlen) __attribute__((warn_unused_result));

/* Reload: rebuild from `next` (client_tls_mode itself is not reloadable). */
void client_tls_reload(const struct cfg *next);

/* Put a just-accepted TCP client on TLS per client_tls_mode (no-op when disabled). */
bool client_tls_attach(struct sbuf *sb) __attribute__((warn_unused_result));

void client_tls_stop(void);
