/*
 * cfg.c — table-driven configuration: the settings table, defaults, value
 * parsing, reload rules and generated documentation. Loading a file is in
 * cfg_load.c, the cross-field validation in cfg_check.c.
 */
#include "config/cfg.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/secret.h"
#include "core/wire.h"
#include "core/xalloc.h"

#define OFF(field) offsetof(struct cfg, field)
#define MB	   (1024LL * 1024LL)

/* The table. Order is the order of the example file. */
static const struct cfg_key keys[] = {
    {"listen_addr", CFG_STRING, OFF(listen_addr), "127.0.0.1", 0, 0, false, "network",
     "TCP address to listen on for clients. Loopback by default: the backend credentials "
     "give every admitted client the proxy's rights. Empty disables TCP."},
    {"listen_port", CFG_INT, OFF(listen_port), "27018", 0, 65535, false, "network",
     "TCP port to listen on (0 picks a free port, logged at startup)."},
    {"unix_socket", CFG_STRING, OFF(unix_socket), "", 0, 0, false, "network",
     "Path of a unix socket to listen on as well (empty: none). The proxy refuses to start "
     "if something other than a stale socket (one nothing accepts on) is at the path."},
    {"unix_socket_mode", CFG_MODE, OFF(unix_socket_mode), "0700", 0, 0777, false, "network",
     "Permission bits of the unix socket file, in octal (like mongod's filePermissions). "
     "Anyone who can connect gets the proxy's backend rights: widen with care, e.g. 0770 "
     "and a group."},
    {"metrics_listen", CFG_STRING, OFF(metrics_listen), "", 0, 0, false, "network",
     "host:port for the Prometheus text endpoint (/metrics; port 0 picks a free port, "
     "logged at startup). Empty: off. Only GET and HEAD of /metrics are served; requests "
     "with more than 8 KB of headers or 4 KB of body are refused."},
    {"workers", CFG_INT, OFF(workers), "1", 0, 64, false, "network",
     "Worker processes, each an event loop on its own listening socket (SO_REUSEPORT on "
     "the same address: the kernel spreads connections). 1: one process, as before. 0: one "
     "per online CPU. max_client_conn, max_unauth_conn, max_backend_conn, max_queue, "
     "max_buffer_bytes, pool_size and min_pool_size are divided by the number of workers "
     "(rounded up, at least 1) so the limits stay process-wide (docs/scaling.md)."},
    {"metrics_timeout_ms", CFG_INT, OFF(metrics_timeout_ms), "10000", 100, 600000, true, "network",
     "A metrics connection is closed this long after it was accepted, whatever it is doing "
     "(a slow or half-sent request); each connection serves one request."},
    {"metrics_max_connections", CFG_INT, OFF(metrics_max_connections), "16", 1, 10000, true,
     "network", "Metrics connections open at once; a connection beyond it is closed at once."},

    {"client_tls_mode", CFG_STRING, OFF(client_tls_mode), "disabled", 0, 0, false, "client TLS",
     "TLS for clients on the TCP listener (mongod's names): disabled; allowTLS and preferTLS "
     "accept TLS and plain clients on the same port (the first bytes tell a TLS handshake "
     "apart); requireTLS closes plain clients. The unix socket is always plain."},
    {"client_tls_cert_file", CFG_STRING, OFF(client_tls_cert_file), "", 0, 0, true, "client TLS",
     "The proxy's certificate chain (PEM), required unless client_tls_mode is disabled. "
     "Re-read on every reload (SIGHUP): new handshakes use the new certificate, open "
     "connections keep theirs; a certificate or key that does not load keeps the old one."},
    {"client_tls_key_file", CFG_STRING, OFF(client_tls_key_file), "", 0, 0, true, "client TLS",
     "The private key (PEM) of client_tls_cert_file (empty: in the certificate file)."},
    {"client_tls_ca_file", CFG_STRING, OFF(client_tls_ca_file), "", 0, 0, true, "client TLS",
     "CA certificates (PEM) client certificates are verified against "
     "(needed by client_tls_verify_peer)."},
    {"client_tls_verify_peer", CFG_BOOL, OFF(client_tls_verify_peer), "off", 0, 0, true,
     "client TLS",
     "Require a client certificate signed by client_tls_ca_file; a TLS client without one "
     "is refused during the handshake."},
    {"client_tls_min_version", CFG_STRING, OFF(client_tls_min_version), "TLS1.2", 0, 0, true,
     "client TLS", "Oldest TLS version accepted from clients: TLS1.0, TLS1.1, TLS1.2 or TLS1.3."},

    {"backend_uri", CFG_URI, OFF(backend_uri), "mongodb://127.0.0.1:27017/", 0, 0, false, "backend",
     "The MongoDB deployment behind the proxy, as a mongodb:// URI (parsed by libmongoc). "
     "With several hosts the proxy uses the one that reports itself writable. Credentials "
     "(user:password@, authSource, authMechanism SCRAM-SHA-256 or SCRAM-SHA-1; default: "
     "negotiated) authenticate every backend connection."},
    {"backend_password_file", CFG_STRING, OFF(backend_password_file), "", 0, 0, true, "backend",
     "File holding the password for backend_uri's user (one line; a trailing newline is "
     "stripped), so the config file need not hold it. Re-read on every reload: fixing it "
     "and sending SIGHUP recovers from wrong credentials. Refused if writable by group or "
     "others; a warning if readable by everyone. Empty: the password is in backend_uri."},
    {"pool_size", CFG_INT, OFF(pool_size), "16", 1, 100000, true, "backend",
     "Maximum backend connections per backend server. Requests beyond it wait "
     "(see max_queue, queue_timeout_ms)."},
    {"min_pool_size", CFG_INT, OFF(min_pool_size), "0", 0, 100000, true, "backend",
     "Backend connections kept open even when idle."},
    {"adaptive_concurrency", CFG_BOOL, OFF(adaptive_concurrency), "off", 0, 0, true, "backend",
     "Limit the requests in flight on each backend pool (each member's, each user's) to what "
     "its round trips say the backend serves without queueing, found from latency samples "
     "(gradient style, pool/limit.h) with pool_size as the ceiling; errors and timeouts "
     "shrink it, a probe every 5 s at adaptive_min_limit re-measures the idle round trip. "
     "Requests over the limit wait in the pool's queue (where lookups merge into batches). "
     "Off by default until measured on every backend (docs/benchmark-results.md). "
     "A reload applies at once; the learnt limit is kept."},
    {"adaptive_tolerance_pct", CFG_INT, OFF(adaptive_tolerance_pct), "200", 110, 1000, true,
     "backend",
     "adaptive_concurrency: round trips up to this percentage of the idle round trip (of "
     "requests of the same size) let the limit grow; beyond it the limit shrinks. Lower "
     "keeps latency nearer the idle one at some cost in throughput."},
    {"adaptive_min_limit", CFG_INT, OFF(adaptive_min_limit), "3", 1, 100000, true, "backend",
     "adaptive_concurrency: the limit never goes below this (nor above pool_size), and the "
     "periodic probe runs at this concurrency."},
    {"connect_timeout_ms", CFG_INT, OFF(connect_timeout_ms), "5000", 1, 600000, true, "backend",
     "Time allowed to connect to a backend and complete its handshake."},
    {"server_idle_timeout_ms", CFG_INT, OFF(server_idle_timeout_ms), "600000", 0, INT64_C(86400000),
     true, "backend",
     "Idle backend connections above min_pool_size are closed after this long (0: never)."},
    {"reconnect_backoff_max_ms", CFG_INT, OFF(reconnect_backoff_max_ms), "5000", 10, 600000, true,
     "backend",
     "After a failed connect the pool waits 100 ms, doubling up to this, before the next "
     "attempt; requests meanwhile get HostUnreachable if no connection is alive."},
    {"advertise_mongos", CFG_BOOL, OFF(advertise_mongos), "off", 0, 0, true, "backend",
     "Present the proxy as a mongos (hello msg: isdbgrid) even over a standalone backend, so "
     "drivers accept several proxies in one seed list and move between them (a drain is "
     "noticed through the awaitable hello). A replica set or mongos backend is always "
     "presented as a mongos. A change on reload bumps the topologyVersion."},

    {"auth_mode", CFG_STRING, OFF(auth_mode), "none", 0, 0, false, "client authentication",
     "none: every client that reaches the listener gets the proxy's backend rights (for "
     "loopback sidecars; --test-config warns when listen_addr is not loopback). scram: "
     "clients log in with SCRAM-SHA-256 or SCRAM-SHA-1 against auth_users_file (and/or "
     "auth_query); before "
     "that only hello, ping, buildInfo and the SASL commands run (others: code 13). "
     "Which backend identity authenticated clients run on: auth_pool_mode."},
    {"auth_users_file", CFG_STRING, OFF(auth_users_file), "", 0, 0, true, "client authentication",
     "With auth_mode = scram: the users and their SCRAM verifiers, one line each: db.user "
     "SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey [SCRAM-SHA-1$...] (write lines with "
     "mongoplex --scram-secret db.user, password on stdin). Never a password. Re-read on "
     "reload; refused if writable by group or others."},
    {"auth_query", CFG_BOOL, OFF(auth_query), "off", 0, 0, true, "client authentication",
     "With auth_mode = scram: a user not in auth_users_file (or with no file) is looked up on "
     "the backend with usersInfo {showCredentials: true} as the proxy's backend_uri identity "
     "(which then needs the viewUser privilege on the user's database); logins wait for the "
     "lookup (bounded by queue_timeout_ms)."},
    {"auth_pool_mode", CFG_STRING, OFF(auth_pool_mode), "per_user", 0, 0, false,
     "client authentication",
     "With auth_mode = scram: per_user: each logged-in user's requests run only on backend "
     "connections that logged in as that user, with the ClientKey recovered from the user's "
     "own login (needs the backend's salt and iteration count: auth_query, or a users-file "
     "line copied from the backend); pool_size applies per user. shared: authentication "
     "only gates admission and every user runs on the proxy's backend_uri identity."},
    {"max_backend_conn", CFG_INT, OFF(max_backend_conn), "0", 0, 1000000, true, "backend",
     "Cap on all backend connections of all pools together (the proxy's own and every "
     "user's; not the replica-set monitor's). At the cap a pool that needs a connection "
     "closes the oldest idle connection of another pool; with none idle the request waits "
     "(queue_timeout_ms). 0: no cap beyond pool_size per pool."},
    {"auth_cache_ttl_ms", CFG_INT, OFF(auth_cache_ttl_ms), "60000", 0, INT64_C(86400000), true,
     "client authentication",
     "With auth_query: how long a looked-up secret is reused (\"no such user\": "
     "auth_negative_ttl_ms). A login that fails with a cached secret refreshes it once before its "
     "error. "
     "Within this time a password changed or a user dropped on the backend still logs in "
     "with the old secret (0: look up on every login)."},
    {"auth_negative_ttl_ms", CFG_INT, OFF(auth_negative_ttl_ms), "5000", 0, INT64_C(86400000), true,
     "client authentication",
     "With auth_query: how long the backend's \"no such user\" is reused. Logins and hellos "
     "naming that user meanwhile are answered from the cache (a login gets code 18) without "
     "a lookup; a user created on the backend logs in after at most this long (0: not "
     "cached)."},
    {"auth_cache_max_entries", CFG_INT, OFF(auth_cache_max_entries), "10000", 1, INT64_C(10000000),
     true, "client authentication",
     "With auth_query: users cached at most, lookups in progress included; the least "
     "recently fetched answer makes room. When every entry is a lookup in progress, a login "
     "that needs another one gets code 18 (logged)."},
    {"auth_query_max_inflight", CFG_INT, OFF(auth_query_max_inflight), "2", 1, 1000, true,
     "client authentication",
     "With auth_query: usersInfo lookups sent to the backend at once (never more than "
     "pool_size - 1, so they cannot take every connection clients' requests need); logins "
     "needing more wait their turn. Each connection starts at most 2 lookups until it logs "
     "in (a hello's saslSupportedMechs and a failed login's refresh included); beyond that "
     "its logins of uncached users get code 18 and its hellos no mechanisms."},
    {"auth_max_failures", CFG_INT, OFF(auth_max_failures), "3", 0, 1000000, true,
     "client authentication",
     "A client connection that fails this many logins in a row is closed after the error "
     "(0: never closed for failed logins). Every failure is logged and counted."},
    {"auth_timeout_ms", CFG_INT, OFF(auth_timeout_ms), "10000", 0, INT64_C(86400000), true,
     "client authentication",
     "With auth_mode = scram: a client connection that started a login (saslStart, or a "
     "hello with speculativeAuthenticate or saslSupportedMechs) and has not finished it "
     "within this time is closed, and so is one that sent neither a hello nor a login "
     "within this time of connecting (logged, counter clients_auth_timeout). Connections "
     "that only send hellos (drivers' monitoring connections never log in) stay open and "
     "count against max_unauth_conn. 0: no limit."},
    {"auth_stats_unauthenticated", CFG_BOOL, OFF(auth_stats_unauthenticated), "off", 0, 0, true,
     "client authentication",
     "With auth_mode = scram: allow mongoplexStats before a client has logged in."},
    {"admin_users", CFG_STRING, OFF(admin_users), "", 0, 0, true, "client authentication",
     "With auth_mode = scram: the logged-in users who may run the admin commands "
     "(mongoplexShow, pause, resume, reconnect, kill, reload; mongoplex --admin), comma-"
     "separated, each db.user or user (meaning admin.user). Empty: nobody. With auth_mode = "
     "none only clients on unix_socket whose peer uid is root or the proxy's own user may; "
     "everyone else gets code 13 (logged). mongoplexStats keeps its own rule."},

    {"batching", CFG_BOOL, OFF(batching), "on", 0, 0, true, "batching",
     "Coalesce concurrent find-by-_id lookups into one {_id: {$in: [...]}} query."},
    {"batch_max_ids", CFG_INT, OFF(batch_max_ids), "1000", 1, 100000, true, "batching",
     "Most distinct _id values in one merged query."},
    {"batch_max_wait_us", CFG_INT, OFF(batch_max_wait_us), "0", 0, 1000000, true, "batching",
     "If set, a lookup waits at most this long for others to join its batch even when a "
     "backend connection is free. 0: never wait (batches form only under load)."},
    {"batch_hold_us", CFG_INT, OFF(batch_hold_us), "1000", 0, 1000000, true, "batching",
     "Under load, a batch waiting in the queue goes to a free backend connection once it holds "
     "its share of the pool's lookups (the lookups queued and in flight divided by the "
     "requests the pool may run at once), or after waiting about this long (at most about "
     "twice: the pools are looked at again this long after a connection went idle): every "
     "query then "
     "carries about as many ids as the others, instead of one large batch and many single "
     "lookups. Only while other requests of the pool are in flight; 0: a free connection "
     "takes whatever has joined."},

    {"compressors", CFG_STRING, OFF(compressors), "snappy,zstd,zlib", 0, 0, true, "compression",
     "Wire compressors (OP_COMPRESSED) the proxy accepts from clients: a client's hello "
     "`compression` list is answered with the ones of its list found here (in the client's "
     "order), and replies are compressed with the first of them. Any of snappy, zlib, zstd; "
     "empty: no compression with clients (compressed messages are then refused). The backend "
     "side follows backend_uri's compressors= option instead. Reload: new hellos."},
    {"compression_min_bytes", CFG_INT, OFF(compression_min_bytes), "512", 0, WIRE_MAX_MESSAGE, true,
     "compression",
     "Replies (and requests to a backend) shorter than this are sent uncompressed, as are "
     "those compression would not make smaller."},

    {"max_client_conn", CFG_INT, OFF(max_client_conn), "10000", 1, 1000000, true, "admission",
     "Client connections beyond this are answered with an error on their first request "
     "and closed."},
    {"max_unauth_conn", CFG_INT, OFF(max_unauth_conn), "0", 0, 1000000, true, "admission",
     "With auth_mode = scram: client connections not logged in (yet) at once, at most "
     "max_client_conn; a connection beyond it gets an error on its first request and is "
     "closed (logged, counter clients_refused_unauth), so connections that never log in "
     "cannot take the room of logged-in clients. Drivers' monitoring connections never log "
     "in and count here. 0: half of max_client_conn."},
    {"max_inflight_per_client", CFG_INT, OFF(max_inflight_per_client), "16", 1, 100000, true,
     "admission",
     "Requests one client may have parsed and waiting at once (pipelining). At the limit "
     "the proxy stops reading that client's socket."},
    {"max_queue", CFG_INT, OFF(max_queue), "10000", 1, 10000000, true, "admission",
     "Requests waiting for a backend connection, over all clients. Beyond it requests get "
     "a retryable overload error."},
    {"max_client_buffer_bytes", CFG_INT, OFF(max_client_buffer_bytes), "16777216", 65536, 1024 * MB,
     true, "admission",
     "Bytes buffered per client in each direction before the proxy stops reading it "
     "(a single message may exceed it, up to the 48 MB wire limit). Replies: a client with "
     "this much unsent output gets none of its requests sent to a backend until it reads."},
    {"max_buffer_bytes", CFG_INT, OFF(max_buffer_bytes), "1073741824", MB,
     INT64_C(1024) * 1024 * MB, true, "admission",
     "Bytes buffered for all clients together (unread input, parsed requests not yet sent, "
     "unsent replies). At this much, until it is back under three quarters of it (logged; "
     "gauge memory_paused), the clients that hold more than their share of it "
     "(max_buffer_bytes / clients connected) are not read and get none of their requests "
     "sent; the others are still read and served, one request at a time unless their "
     "recent replies are small. A client that never reads is closed after "
     "client_write_timeout_ms."},
    {"queue_timeout_ms", CFG_INT, OFF(queue_timeout_ms), "30000", 0, INT64_C(86400000), true,
     "admission",
     "A request waiting longer than this for a backend connection gets a "
     "retryable overload error (0: no limit)."},
    {"pause_timeout_ms", CFG_INT, OFF(pause_timeout_ms), "60000", 1, INT64_C(86400000), true,
     "admission",
     "While the pools are paused (the mongoplexPause admin command), new requests wait up to "
     "this long, counted from the pause or their arrival if later; queue_timeout_ms does not "
     "run during a pause and counts again from the resume. A request that waits longer was "
     "never sent and gets ExceededTimeLimit (262) with the RetryableError and "
     "RetryableWriteError labels: safe to retry, writes included."},
    {"lb_max_pinned_per_client", CFG_INT, OFF(lb_max_pinned_per_client), "2", 1, 100000, true,
     "admission",
     "Load-balanced clients (loadBalanced=true): backend connections one client may hold "
     "pinned for its open cursors and transactions at once, over all its connections. A "
     "client is its logged-in user, else the application name of its hello, else the one "
     "connection. Beyond it a connection's next cursor or transaction runs on one of its own "
     "pinned connections (after what runs there); a cursor opened on a connection with no "
     "pin of its own is killed on the backend and waits for room (queue_timeout_ms). All "
     "pins of a pool together never take more than pool_size - 1 connections. 2 lets a "
     "client iterate one cursor while it runs a transaction or a nested cursor."},
    {"lb_pin_idle_timeout_ms", CFG_INT, OFF(lb_pin_idle_timeout_ms), "60000", 0, INT64_C(86400000),
     true, "admission",
     "Load-balanced clients: a connection pinned to cursors that has run nothing for this "
     "long is released: the proxy kills its cursors on the backend and the client's next "
     "getMore gets 43 CursorNotFound saying why. Transactions keep their pin until commit, "
     "abort or close. 0: pins never expire."},
    {"query_timeout_ms", CFG_INT, OFF(query_timeout_ms), "0", 0, INT64_C(86400000), true,
     "admission",
     "A backend exchange running longer than this is abandoned: the request gets an error "
     "and the backend connection is closed and replaced (0: no limit)."},
    {"client_idle_timeout_ms", CFG_INT, OFF(client_idle_timeout_ms), "0", 0, INT64_C(86400000),
     true, "admission", "Close client connections idle for this long (0: never)."},
    {"client_read_timeout_ms", CFG_INT, OFF(client_read_timeout_ms), "30000", 100,
     INT64_C(86400000), true, "admission",
     "A client that sent part of a message must send the rest within this time, or is "
     "disconnected."},
    {"client_write_timeout_ms", CFG_INT, OFF(client_write_timeout_ms), "60000", 0,
     INT64_C(86400000), true, "admission",
     "A client with unsent replies that has read none of them for this long is disconnected "
     "(logged; counter clients_closed_write_timeout): a client that never reads would "
     "otherwise hold its buffered replies, and its share of max_buffer_bytes, for ever. "
     "0: never (not recommended); else at least 1000."},

    {"shutdown_timeout_ms", CFG_INT, OFF(shutdown_timeout_ms), "30000", 0, INT64_C(3600000), true,
     "lifecycle", "On SIGTERM, in-flight requests get this long to finish before the proxy exits."},
    {"shutdown_quiesce_ms", CFG_INT, OFF(shutdown_quiesce_ms), "1000", 0, INT64_C(3600000), true,
     "lifecycle",
     "On SIGTERM the proxy stays up at least this long (within shutdown_timeout_ms), answering "
     "hellos and late requests with the retryable ShutdownInProgress, so drivers learn of the "
     "drain and move to another proxy before their connections close."},
    {"log_level", CFG_LOGLEVEL, OFF(log_level), "info", 0, 0, true, "lifecycle",
     "error, warning, info or debug."},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

const struct cfg_key *cfg_keys(size_t *count)
{
	*count = NKEYS;
	return keys;
}

const struct cfg_key *cfg_find_key(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static bool parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"on", "true", "yes", "1"};
	static const char *const no[] = {"off", "false", "no", "0"};

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return true;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return true;
		}
	}
	return false;
}

/* Permission bits: octal digits only ("0660", "660"), within the key's bounds. */
static bool parse_mode(const struct cfg_key *k, const char *v, int64_t *out, char *err,
		       size_t errlen)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 8);
	if (errno != 0 || end == v || *end != '\0' || v[0] < '0' || v[0] > '7') {
		snprintf(err, errlen, "%s: \"%s\" is not an octal mode such as 0700", k->name, v);
		return false;
	}
	if (n < k->min || n > k->max) {
		snprintf(err, errlen, "%s: %s is out of range [%04" PRIo64 ", %04" PRIo64 "]",
			 k->name, v, k->min, k->max);
		return false;
	}
	*out = n;
	return true;
}

static bool parse_int(const struct cfg_key *k, const char *v, int64_t *out, char *err,
		      size_t errlen)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0') {
		snprintf(err, errlen, "%s: \"%s\" is not an integer", k->name, v);
		return false;
	}
	if (n < k->min || n > k->max) {
		snprintf(err, errlen, "%s: %lld is out of range [%" PRId64 ", %" PRId64 "]",
			 k->name, n, k->min, k->max);
		return false;
	}
	*out = n;
	return true;
}

bool cfg_set(struct cfg *c, const char *name, const char *value, char *err, size_t errlen)
{
	const struct cfg_key *k = cfg_find_key(name);
	void *field;

	if (k == NULL) {
		snprintf(err, errlen, "unknown setting \"%s\"", name);
		return false;
	}
	field = (char *)c + k->offset;
	switch (k->type) {
	case CFG_STRING:
	case CFG_URI:
		free(*(char **)field);
		*(char **)field = xstrdup(value);
		return true;
	case CFG_INT:
		return parse_int(k, value, (int64_t *)field, err, errlen);
	case CFG_MODE:
		return parse_mode(k, value, (int64_t *)field, err, errlen);
	case CFG_BOOL:
		if (parse_bool(value, (bool *)field))
			return true;
		snprintf(err, errlen, "%s: \"%s\" is not on/off", name, value);
		return false;
	case CFG_LOGLEVEL:
		if (log_parse_level(value, (enum log_level *)field))
			return true;
		snprintf(err, errlen, "%s: \"%s\" is not error/warning/info/debug", name, value);
		return false;
	}
	return false;
}

void cfg_defaults(struct cfg *c)
{
	char err[CFG_ERR_LEN];

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < NKEYS; i++)
		if (!cfg_set(c, keys[i].name, keys[i].def, err, sizeof(err)))
			fatal("bad built-in default: %s", err);
}

void cfg_keep_static(const struct cfg *old, struct cfg *next)
{
	char a[256], b[256], ra[256], rb[256];

	for (size_t i = 0; i < NKEYS; i++) {
		const struct cfg_key *k = &keys[i];

		if (k->reloadable)
			continue;
		cfg_format_value(old, k, a, sizeof(a));
		cfg_format_value(next, k, b, sizeof(b));
		if (strcmp(a, b) == 0)
			continue;
		cfg_format_shown(old, k, ra, sizeof(ra));
		cfg_format_shown(next, k, rb, sizeof(rb));
		log_warning("reload: %s cannot change at runtime (restart needed); keeping \"%s\", "
			    "ignoring \"%s\"",
			    k->name, ra, rb);
		if (!cfg_set(next, k->name, a, b, sizeof(b)))
			fatal("reload: cannot restore %s: %s", k->name, b);
	}
}

void cfg_format_value(const struct cfg *c, const struct cfg_key *k, char *buf, size_t len)
{
	const void *field = (const char *)c + k->offset;

	switch (k->type) {
	case CFG_STRING:
	case CFG_URI:
		snprintf(buf, len, "%s", *(char *const *)field);
		break;
	case CFG_INT:
		snprintf(buf, len, "%" PRId64, *(const int64_t *)field);
		break;
	case CFG_MODE:
		snprintf(buf, len, "%04" PRIo64, *(const int64_t *)field);
		break;
	case CFG_BOOL:
		snprintf(buf, len, "%s", *(const bool *)field ? "on" : "off");
		break;
	case CFG_LOGLEVEL:
		snprintf(buf, len, "%s", log_level_name(*(const enum log_level *)field));
		break;
	}
}

void cfg_format_shown(const struct cfg *c, const struct cfg_key *k, char *buf, size_t len)
{
	if (k->type == CFG_URI)
		secret_redact_uri(*(char *const *)((const char *)c + k->offset), buf, len);
	else
		cfg_format_value(c, k, buf, len);
}

/* Write `text` as comment lines of at most ~76 columns. */
static void write_wrapped(FILE *out, const char *prefix, const char *text)
{
	const char *p = text;

	while (*p) {
		size_t n = strlen(p), cut = n;

		if (n > 74) {
			cut = 74;
			while (cut > 0 && p[cut] != ' ')
				cut--;
			if (cut == 0)
				cut = 74;
		}
		fprintf(out, "%s%.*s\n", prefix, (int)cut, p);
		p += cut;
		while (*p == ' ')
			p++;
	}
}

void cfg_write_example(FILE *out)
{
	const char *section = "";

	fprintf(out, "; mongoplex configuration file.\n"
		     "; Generated from the settings table (mongoplex --write-example-config);\n"
		     "; every setting is shown with its default. Settings marked [reload] take\n"
		     "; effect on SIGHUP; the others need a restart.\n\n[mongoplex]\n");
	for (size_t i = 0; i < NKEYS; i++) {
		const struct cfg_key *k = &keys[i];

		if (strcmp(section, k->section) != 0) {
			section = k->section;
			fprintf(out, "\n;;; %s\n", section);
		}
		fprintf(out, "\n");
		write_wrapped(out, "; ", k->help);
		if (k->type == CFG_INT)
			fprintf(out, "; range %" PRId64 "..%" PRId64 "%s\n", k->min, k->max,
				k->reloadable ? " [reload]" : "");
		else if (k->type == CFG_MODE)
			fprintf(out, "; range %04" PRIo64 "..%04" PRIo64 " (octal)%s\n", k->min,
				k->max, k->reloadable ? " [reload]" : "");
		else if (k->reloadable)
			fprintf(out, "; [reload]\n");
		fprintf(out, "%s = %s\n", k->name, k->def);
	}
}

void cfg_write_help(FILE *out)
{
	for (size_t i = 0; i < NKEYS; i++) {
		const struct cfg_key *k = &keys[i];

		fprintf(out, "%s (default: %s%s)\n", k->name, k->def[0] ? k->def : "\"\"",
			k->reloadable ? ", reloadable" : "");
		write_wrapped(out, "    ", k->help);
	}
}

void cfg_free(struct cfg *c)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (keys[i].type == CFG_STRING || keys[i].type == CFG_URI) {
			char **p = (char **)((char *)c + keys[i].offset);

			free(*p);
			*p = NULL;
		}
}

/* Markdown text: '|' would end a table cell, '<' start a tag, '*' emphasis. */
static void md_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|' || *s == '<' || *s == '*')
			fputc('\\', out);
		fputc(*s, out);
	}
}

void cfg_write_markdown(FILE *out)
{
	const char *section = "";

	fprintf(out, "# Settings\n\n"
		     "<!-- Generated from the settings table in config/cfg.c by `mongoplex "
		     "--write-settings-md`;\n     do not edit: run scripts/gen-docs.sh. -->\n\n"
		     "One INI file, one `[mongoplex]` section (`mongoplex -c FILE`). The table in "
		     "`config/cfg.c` is the single source of this page, of `mongoplex "
		     "--help-config`, of the annotated example `config/mongoplex.ini` (`mongoplex "
		     "--write-example-config`) and of the `mongoplex.ini(5)` man page. Settings "
		     "marked *reloadable* take effect on `SIGHUP` (`systemctl reload mongoplex`); "
		     "the others need a restart. Check a file with `mongoplex -c FILE "
		     "--test-config`.\n\n"
		     "| setting | default | reload |\n|---|---|---|\n");
	for (size_t i = 0; i < NKEYS; i++)
		fprintf(out, "| [`%s`](#%s) | %s%s%s | %s |\n", keys[i].name, keys[i].name,
			keys[i].def[0] ? "`" : "", keys[i].def[0] ? keys[i].def : "empty",
			keys[i].def[0] ? "`" : "", keys[i].reloadable ? "yes" : "no");
	for (size_t i = 0; i < NKEYS; i++) {
		const struct cfg_key *k = &keys[i];

		if (strcmp(section, k->section) != 0) {
			section = k->section;
			fprintf(out, "\n## %c%s\n", toupper((unsigned char)section[0]),
				section + 1);
		}
		fprintf(out, "\n### `%s`\n\nDefault: %s%s%s", k->name, k->def[0] ? "`" : "",
			k->def[0] ? k->def : "empty", k->def[0] ? "`" : "");
		if (k->type == CFG_INT)
			fprintf(out, "; range %" PRId64 " to %" PRId64, k->min, k->max);
		else if (k->type == CFG_MODE)
			fprintf(out, "; range %04" PRIo64 " to %04" PRIo64 " (octal)", k->min,
				k->max);
		fprintf(out, "; %s.\n\n", k->reloadable ? "reloadable" : "needs a restart");
		md_text(out, k->help);
		fprintf(out, "\n");
	}
}
