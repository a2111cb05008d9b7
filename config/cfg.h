/*
 * cfg.h — the configuration table, loader and validation.
 *
 * Every setting is one row of a table (name, type, offset, default, bounds,
 * reloadable, help). The same table drives the INI loader, the defaults,
 * `--help-config`, the annotated example file and the man page section, so
 * documentation cannot drift from the code. Loading always fills a fresh
 * struct; the caller swaps it in only once it validated (reload keeps the old
 * config on any error).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/log.h"

/* All settings. Strings are heap-owned (cfg_free releases them). */
struct cfg {
	/* network */
	char *listen_addr;
	int64_t listen_port;
	char *unix_socket;
	int64_t unix_socket_mode; /* permission bits of the socket file */
	char *metrics_listen;
	int64_t metrics_timeout_ms;
	int64_t metrics_max_connections;
	int64_t workers; /* processes (proxy/workers.c); 0: one per CPU */
	/* client TLS (proxy/client_tls.c) */
	char *client_tls_mode; /* disabled | allowTLS | preferTLS | requireTLS */
	char *client_tls_cert_file;
	char *client_tls_key_file;
	char *client_tls_ca_file;
	bool client_tls_verify_peer;
	char *client_tls_min_version; /* TLS1.0 .. TLS1.3 */
	/* backend */
	char *backend_uri;
	char *backend_password_file;
	int64_t pool_size;
	int64_t min_pool_size;
	int64_t connect_timeout_ms;
	int64_t server_idle_timeout_ms;
	int64_t reconnect_backoff_max_ms;
	bool advertise_mongos;	   /* hello says isdbgrid over a standalone backend */
	int64_t max_backend_conn;  /* all pools together, 0: no cap (pool/pool_users.c) */
	bool adaptive_concurrency; /* pool/limit.h, a term of pool/gate.c */
	int64_t adaptive_tolerance_pct;
	int64_t adaptive_min_limit;
	/* client authentication (proxy/cauth.c) */
	char *auth_mode; /* "none" | "scram" */
	char *auth_users_file;
	bool auth_query;
	char *auth_pool_mode; /* "per_user" | "shared" */
	int64_t auth_cache_ttl_ms;
	int64_t auth_negative_ttl_ms;	 /* auth_query's "no such user" */
	int64_t auth_cache_max_entries;	 /* auth_query's cache, pending lookups included */
	int64_t auth_query_max_inflight; /* lookups sent at once (below pool_size) */
	int64_t auth_max_failures;
	int64_t auth_timeout_ms; /* a login must finish within this (proxy/cauth.c) */
	bool auth_stats_unauthenticated;
	char *
	    admin_users; /* who may run the admin commands with auth_mode = scram (proxy/admin.c) */
	/* batching */
	bool batching;
	int64_t batch_max_ids;
	int64_t batch_max_wait_us;
	int64_t batch_hold_us; /* a queued batch waits for its share (pool/batch.c) */
	/* compression */
	char *compressors; /* client side (core/compress.h list syntax) */
	int64_t compression_min_bytes;
	/* admission control */
	int64_t max_client_conn;
	int64_t max_unauth_conn; /* of them not logged in; 0: half of max_client_conn */
	int64_t max_inflight_per_client;
	int64_t max_queue;
	int64_t max_client_buffer_bytes;
	int64_t max_buffer_bytes;
	int64_t queue_timeout_ms;
	int64_t pause_timeout_ms;
	int64_t query_timeout_ms;
	int64_t lb_max_pinned_per_client;
	int64_t lb_pin_idle_timeout_ms;
	int64_t client_idle_timeout_ms;
	int64_t client_read_timeout_ms;
	int64_t client_write_timeout_ms;
	/* lifecycle */
	int64_t shutdown_timeout_ms;
	int64_t shutdown_quiesce_ms;
	enum log_level log_level;
};

enum cfg_type {
	CFG_STRING,
	CFG_URI, /* a string, a URI whose password is a secret: redacted wherever it is shown */
	CFG_INT,
	CFG_BOOL,
	CFG_LOGLEVEL,
	CFG_MODE, /* file permission bits, written in octal ("0700"); min/max bound them */
};

/* One row of the table. */
struct cfg_key {
	const char *name;
	enum cfg_type type;
	size_t offset;
	const char *def;  /* default, as it would be written in the file */
	int64_t min, max; /* CFG_INT and CFG_MODE bounds, inclusive */
	bool reloadable;
	const char *section; /* heading in the example file */
	const char *help;
};

#define CFG_ERR_LEN 512

const struct cfg_key *cfg_keys(size_t *count);
/* The table entry named `name`, or NULL. */
const struct cfg_key *cfg_find_key(const char *name);

/* Fill `c` with the defaults. */
void cfg_defaults(struct cfg *c);

/* Load `path` into `c` (defaults first, then the file), then validate.
 * On failure `err` holds "path:line: message". */
bool cfg_load(const char *path, struct cfg *c, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Parse one setting from its text form; used by the loader and for defaults. */
bool cfg_set(struct cfg *c, const char *name, const char *value, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Cross-field checks (min <= max, URI parses, ...). */
bool cfg_validate(const struct cfg *c, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Worker id's settings of n workers (n > 1; n <= 1: unchanged): its share of
 * the process-wide limits, each of max_client_conn, max_unauth_conn,
 * max_backend_conn (when set), max_queue, max_buffer_bytes, pool_size,
 * min_pool_size divided by n, rounded up, at least 1 (max_buffer_bytes: its
 * 1 MB minimum); and only worker 0 serves unix_socket and metrics_listen. */
void cfg_for_worker(struct cfg *c, int n, int id);

/* Reload: copy into `next` the old values of keys that cannot change at
 * runtime, logging each one that the new file tried to change. */
void cfg_keep_static(const struct cfg *old, struct cfg *next);

/* The annotated example file and `--help-config` text, from the table. */
void cfg_write_example(FILE *out);
void cfg_write_help(FILE *out);
/* docs/settings.md, from the table (mongoplex --write-settings-md). */
void cfg_write_markdown(FILE *out);

/* Render one setting's current value as text (reload compares and logs them). */
void cfg_format_value(const struct cfg *c, const struct cfg_key *k, char *buf, size_t len);
/* The same for showing it (logs, mongoplexShow config): secrets redacted. */
void cfg_format_shown(const struct cfg *c, const struct cfg_key *k, char *buf, size_t len);

void cfg_free(struct cfg *c);
