/*
 * test_backend_login.c — what the proxy's pool really did against the
 * suite's own backend (MONGOPLEX_TEST_URI), so that a FerretDB pass of
 * scripts/test.sh cannot quietly run another login or transport than it
 * claims:
 *  - with credentials in the URI, every backend connection logs in with the
 *    URI's authMechanism (SCRAM-SHA-256 when none is given: FerretDB and
 *    mongod offer it first), read from the proxy's debug log line
 *    'authenticated as "USER" on SOURCE (MECH';
 *  - with tls=true, the proxy logged its TLS context with chain and
 *    hostname verified, and the backend's port refuses a plain ping (so the
 *    queries that just worked went over TLS);
 *  - MONGOPLEX_FERRETDB_VARIANT (set by scripts/test.sh) must match the URI:
 *    "sha256" wants SCRAM-SHA-256 without TLS, "sha1-tls" SCRAM-SHA-1 with
 *    TLS. Without credentials (mongo-java-server) no login may be logged.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define LOGIN_CLIENTS 3

/* What the suite's URI asks of the proxy. */
struct want {
	char user[128], source[128], mech[32];
	bool auth, tls;
};

static void want_from_uri(struct want *w)
{
	mongoc_uri_t *u = mongoc_uri_new(h_backend_uri());
	const char *m, *src;

	cr_assert(u != NULL, "MONGOPLEX_TEST_URI is not a valid URI");
	memset(w, 0, sizeof(*w));
	w->auth = mongoc_uri_get_username(u) != NULL;
	w->tls = mongoc_uri_get_tls(u);
	if (w->auth) {
		m = mongoc_uri_get_auth_mechanism(u);
		src = mongoc_uri_get_auth_source(u);
		snprintf(w->user, sizeof(w->user), "%s", mongoc_uri_get_username(u));
		snprintf(w->source, sizeof(w->source), "%s", src ? src : "admin");
		snprintf(w->mech, sizeof(w->mech), "%s", m ? m : "SCRAM-SHA-256");
	}
	mongoc_uri_destroy(u);
}

/* The variant scripts/test.sh says it runs must be what the URI holds. */
static void check_variant(const struct want *w)
{
	const char *v = getenv("MONGOPLEX_FERRETDB_VARIANT");

	if (v == NULL || *v == '\0')
		return;
	cr_assert(h_backend_is("ferretdb"), "MONGOPLEX_FERRETDB_VARIANT=%s but the backend is %s",
		  v, h_backend_name());
	if (strcmp(v, "sha256") == 0) {
		cr_assert(w->auth && strcmp(w->mech, "SCRAM-SHA-256") == 0 && !w->tls,
			  "variant sha256: the URI must log in with SCRAM-SHA-256 without TLS");
	} else if (strcmp(v, "sha1-tls") == 0) {
		cr_assert(w->auth && strcmp(w->mech, "SCRAM-SHA-1") == 0 && w->tls,
			  "variant sha1-tls: the URI must log in with SCRAM-SHA-1 over TLS");
		cr_assert(strcmp(h_direct_uri(), h_backend_uri()) != 0,
			  "variant sha1-tls: the direct URI must be the plain port");
	} else {
		cr_assert_fail("unknown MONGOPLEX_FERRETDB_VARIANT=%s", v);
	}
}

/* Make the pool open several connections: LOGIN_CLIENTS clients at once. */
static void use_pool(struct proxy *p)
{
	mongoc_client_t *c[LOGIN_CLIENTS];
	bson_t reply;
	bson_error_t err;

	for (int i = 0; i < LOGIN_CLIENTS; i++) {
		c[i] = h_proxy_client(p, "backend-login");
		cr_assert(h_cmd_json(c[i], "admin", "{\"ping\": 1}", &reply, &err),
			  "ping through the proxy: %s", err.message);
		bson_destroy(&reply);
	}
	for (int i = 0; i < LOGIN_CLIENTS; i++)
		mongoc_client_destroy(c[i]);
}

/* Lines of the log containing `needle` (and `also`, if not NULL). */
static int count_lines(const char *log, const char *needle, const char *also)
{
	int n = 0;

	for (const char *l = log; l != NULL && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *end = strchr(l, '\n'), *hit = strstr(l, needle);

		if (hit == NULL || (end != NULL && hit > end))
			continue;
		if (also != NULL) {
			const char *h2 = strstr(l, also);

			if (h2 == NULL || (end != NULL && h2 > end))
				continue;
		}
		n++;
	}
	return n;
}

Test(backend_login, as_the_uri_says, .timeout = 120)
{
	struct want w;
	struct proxy *p;
	char needle[400];
	char *log;
	int logins, other;

	want_from_uri(&w);
	check_variant(&w);
	p = proxy_start("log_level = debug\n");
	use_pool(p);
	log = proxy_log(p);
	snprintf(needle, sizeof(needle), "authenticated as \"%s\" on %s (", w.user, w.source);
	logins = count_lines(log, "authenticated as \"", NULL);
	if (!w.auth) {
		cr_assert_eq(logins, 0, "no credentials in the URI, yet the proxy logged in:\n%s",
			     log);
	} else {
		char mech[48];

		snprintf(mech, sizeof(mech), "(%s", w.mech);
		other = logins - count_lines(log, needle, mech);
		cr_assert_geq(logins, 1, "no backend login logged:\n%s", log);
		cr_assert_eq(other, 0, "%d backend logins not %s%s:\n%s", other, needle, w.mech,
			     log);
		cr_log_info("%d backend connections logged in with %s", logins, w.mech);
	}
	cr_assert_eq(log_contains(p, "backend TLS: CA "), w.tls,
		     "backend TLS line %s though the URI has tls=%s", w.tls ? "missing" : "present",
		     w.tls ? "true" : "false");
	if (w.tls)
		cr_assert(log_contains(p, "chain and hostname verified"), "TLS not verified:\n%s",
			  log);
	free(log);
	proxy_stop(p);
}

/* The proxy's backend port speaks only TLS: a plain ping to it gets no
 * reply, so the queries above went over TLS. Without tls=true it replies
 * (ok or not: an unauthenticated ping may be refused with code 13). */
Test(backend_login, backend_port_transport, .timeout = 60)
{
	struct want w;
	mongoc_uri_t *u = mongoc_uri_new(h_backend_uri());
	const mongoc_host_list_t *hl;
	bson_t cmd = BSON_INITIALIZER, reply;
	int fd;
	bool plain_ok;

	want_from_uri(&w);
	cr_assert(u != NULL);
	hl = mongoc_uri_get_hosts(u);
	cr_assert(hl != NULL);
	fd = raw_connect_to(hl->host, hl->port);
	cr_assert(fd >= 0, "cannot connect to %s:%d", hl->host, hl->port);
	BSON_APPEND_INT32(&cmd, "ping", 1);
	BSON_APPEND_UTF8(&cmd, "$db", "admin");
	plain_ok = raw_command(fd, 1, &cmd, &reply, 5000);
	close(fd);
	bson_destroy(&cmd);
	bson_destroy(&reply);
	cr_assert_eq(plain_ok, !w.tls, "a plain ping to the backend port %s:%d %s, tls=%s",
		     hl->host, hl->port, plain_ok ? "got a reply" : "got none",
		     w.tls ? "true" : "false");
	mongoc_uri_destroy(u);
}
