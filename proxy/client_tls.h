/*
 * client_tls.h — TLS for clients: the server context built from the
 * client_tls_* settings, rebuilt on every reload (certificate rotation:
 * connections keep the context they were accepted with; a context that
 * fails to build rejects the whole reload, and the log says why).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <openssl/ssl.h>

struct cfg;
struct sbuf;

/* Startup: build the context for g.cfg (nothing when disabled). */
bool client_tls_start(char *err, size_t errlen) __attribute__((warn_unused_result));

/* Reload, prepare: build the context of `next` into *out (NULL when client
 * TLS is off; client_tls_mode itself is not reloadable); false + err when
 * it cannot be built. The running context is untouched. */
bool client_tls_prepare(const struct cfg *next, SSL_CTX **out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Reload, commit: `fresh` (from client_tls_prepare, may be NULL) serves new
 * connections from now on. */
void client_tls_commit(SSL_CTX *fresh, const struct cfg *next);

/* Put a just-accepted TCP client on TLS per client_tls_mode (no-op when disabled). */
bool client_tls_attach(struct sbuf *sb) __attribute__((warn_unused_result));

void client_tls_stop(void);
