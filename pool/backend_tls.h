/*
 * backend_tls.h — TLS to the backend: the options of backend_uri (tls=true,
 * tlsCAFile, tlsCertificateKeyFile[Password], tlsAllowInvalidHostnames,
 * tlsAllowInvalidCertificates, tlsInsecure, as libmongoc parses them) and
 * one client context every backend connection uses. Chain and hostname are
 * verified unless the URI says otherwise. Loaded once at startup
 * (backend_uri is not reloadable).
 */
#pragma once

#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stddef.h>

struct sbuf;

/* Parse the URI's TLS options and build the context (nothing if tls is off). */
bool backend_tls_load(const mongoc_uri_t *uri, char *err, size_t errlen)
    __attribute__((warn_unused_result));

bool backend_tls_enabled(void);

/* Put a just-connecting backend stream on TLS to `host` (no-op if off). */
bool backend_tls_attach(struct sbuf *sb, const char *host) __attribute__((warn_unused_result));

void backend_tls_free(void);
