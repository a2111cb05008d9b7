/*
 * cfg_check.c — cross-field validation of a configuration: pool bounds,
 * something to listen on, client TLS, auth, metrics address, compressors
 * and the backend URI. Every failure goes through refuse(), which writes
 * the message and names the settings it blames.
 */
#include "config/cfg_check.h"

#include <inttypes.h>
#include <mongoc/mongoc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compress.h"
#include "core/tls.h"
#include "core/xalloc.h"

/* A failed check: the message, and the settings it is about in blame
 * (b1 NULL: one setting). Always false, to be returned. */
static bool refuse(const char *blame[2], const char *b0, const char *b1, char *err, size_t errlen,
		   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static bool refuse(const char *blame[2], const char *b0, const char *b1, char *err, size_t errlen,
		   const char *fmt, ...)
{
	va_list ap;

	blame[0] = b0;
	blame[1] = b1;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return false;
}

static bool validate_hostport(const char *name, const char *v, const char *blame[2], char *err,
			      size_t errlen)
{
	const char *colon = strrchr(v, ':');
	char *end;
	long port;

	if (v[0] == '\0')
		return true;
	if (colon == NULL || colon == v)
		return refuse(blame, name, NULL, err, errlen, "%s: \"%s\" is not host:port", name,
			      v);
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port < 0 || port > 65535)
		return refuse(blame, name, NULL, err, errlen, "%s: bad port in \"%s\"", name, v);
	return true;
}

static bool validate_client_tls(const struct cfg *c, const char *blame[2], char *err, size_t errlen)
{
	static const char *const modes[] = {"disabled", "allowTLS", "preferTLS", "requireTLS"};
	bool known = false;
	int v;

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		known = known || strcmp(c->client_tls_mode, modes[i]) == 0;
	if (!known)
		return refuse(blame, "client_tls_mode", NULL, err, errlen,
			      "client_tls_mode: \"%s\" is not disabled, allowTLS, preferTLS or "
			      "requireTLS",
			      c->client_tls_mode);
	if (!tls_parse_version(c->client_tls_min_version, &v))
		return refuse(blame, "client_tls_min_version", NULL, err, errlen,
			      "client_tls_min_version: \"%s\" is not TLS1.0, TLS1.1, TLS1.2 or "
			      "TLS1.3",
			      c->client_tls_min_version);
	if (strcmp(c->client_tls_mode, "disabled") == 0)
		return true;
	if (c->client_tls_cert_file[0] == '\0')
		return refuse(blame, "client_tls_mode", "client_tls_cert_file", err, errlen,
			      "client_tls_mode %s needs client_tls_cert_file", c->client_tls_mode);
	if (c->client_tls_verify_peer && c->client_tls_ca_file[0] == '\0')
		return refuse(blame, "client_tls_verify_peer", "client_tls_ca_file", err, errlen,
			      "client_tls_verify_peer needs client_tls_ca_file");
	return true;
}

static bool validate_auth(const struct cfg *c, const char *blame[2], char *err, size_t errlen)
{
	if (strcmp(c->auth_mode, "none") != 0 && strcmp(c->auth_mode, "scram") != 0)
		return refuse(blame, "auth_mode", NULL, err, errlen,
			      "auth_mode: \"%s\" is not none or scram", c->auth_mode);
	if (strcmp(c->auth_mode, "scram") == 0 && c->auth_users_file[0] == '\0' && !c->auth_query)
		return refuse(blame, "auth_mode", "auth_users_file", err, errlen,
			      "auth_mode = scram needs auth_users_file or auth_query = on");
	if (c->max_unauth_conn > c->max_client_conn)
		return refuse(blame, "max_unauth_conn", "max_client_conn", err, errlen,
			      "max_unauth_conn (%" PRId64 ") exceeds max_client_conn (%" PRId64
			      "): connections not logged in are a part of all connections",
			      c->max_unauth_conn, c->max_client_conn);
	if (strcmp(c->auth_pool_mode, "per_user") != 0 && strcmp(c->auth_pool_mode, "shared") != 0)
		return refuse(blame, "auth_pool_mode", NULL, err, errlen,
			      "auth_pool_mode: \"%s\" is not per_user or shared",
			      c->auth_pool_mode);
	return true;
}

/* The backend URI and the client compressor list parse. */
static bool validate_parsers(const struct cfg *c, const char *blame[2], char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *uri;
	struct compress_list cl;
	char cerr[128];

	if (!compress_list_parse(c->compressors, &cl, cerr, sizeof(cerr)))
		return refuse(blame, "compressors", NULL, err, errlen, "compressors: %s", cerr);
	uri = mongoc_uri_new_with_error(c->backend_uri, &berr);
	if (uri == NULL)
		return refuse(blame, "backend_uri", NULL, err, errlen, "backend_uri: %s",
			      berr.message);
	mongoc_uri_destroy(uri);
	return true;
}

bool cfg_check(const struct cfg *c, const char *blame[2], char *err, size_t errlen)
{
	if (c->min_pool_size > c->pool_size)
		return refuse(blame, "min_pool_size", "pool_size", err, errlen,
			      "min_pool_size (%" PRId64 ") exceeds pool_size (%" PRId64 ")",
			      c->min_pool_size, c->pool_size);
	if (c->client_write_timeout_ms > 0 && c->client_write_timeout_ms < 1000)
		return refuse(blame, "client_write_timeout_ms", NULL, err, errlen,
			      "client_write_timeout_ms (%" PRId64 ") is below 1000: a client "
			      "reading a large reply would be cut off (0 turns it off)",
			      c->client_write_timeout_ms);
	if (c->listen_addr[0] == '\0' && c->unix_socket[0] == '\0')
		return refuse(blame, "listen_addr", "unix_socket", err, errlen,
			      "neither listen_addr nor unix_socket is set: nothing to listen on");
	return validate_client_tls(c, blame, err, errlen) && validate_auth(c, blame, err, errlen) &&
	       validate_hostport("metrics_listen", c->metrics_listen, blame, err, errlen) &&
	       validate_parsers(c, blame, err, errlen);
}

bool cfg_validate(const struct cfg *c, char *err, size_t errlen)
{
	const char *blame[2] = {NULL, NULL};

	return cfg_check(c, blame, err, errlen);
}

static int64_t share(int64_t v, int n, int64_t floor)
{
	int64_t q = (v + n - 1) / n;

	return q < floor ? floor : q;
}

void cfg_for_worker(struct cfg *c, int n, int id)
{
	if (n <= 1)
		return;
	if (id != 0) {
		free(c->unix_socket);
		c->unix_socket = xstrdup("");
		free(c->metrics_listen);
		c->metrics_listen = xstrdup("");
	}
	c->max_client_conn = share(c->max_client_conn, n, 1);
	c->max_unauth_conn = c->max_unauth_conn ? share(c->max_unauth_conn, n, 1) : 0;
	c->max_backend_conn = c->max_backend_conn ? share(c->max_backend_conn, n, 1) : 0;
	c->max_queue = share(c->max_queue, n, 1);
	c->max_buffer_bytes = share(c->max_buffer_bytes, n, 1024 * 1024);
	c->pool_size = share(c->pool_size, n, 1);
	c->min_pool_size = c->min_pool_size ? share(c->min_pool_size, n, 0) : 0;
	if (c->adaptive_min_limit > c->pool_size)
		c->adaptive_min_limit = c->pool_size;
}
