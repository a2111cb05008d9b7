/*
 * test_metrics_members.c — per-member fields of /metrics (Prometheus labels
 * member="host:port") and of mongoplexStats' pools, against the test
 * backend (MONGOPLEX_TEST_URI, one member).
 *
 * Asserts: /metrics has mongoplex_member_info{member="H:P",type=...} 1 and
 * member_pool_size / member_in_use / member_idle / member_connecting /
 * member_queued samples for the backend, whose values equal mongoplexStats'
 * pools[0] {poolSize, inUse, idle, connecting, queued, type} read just
 * before (an idle proxy: nothing moves in between); after a query the pool
 * has an idle connection (member_idle >= 1). The replica-set fields
 * (types from the monitor, mongoplex_member_rtt_seconds) are asserted by
 * the srv test (srv_client.py) against three mockupdb members.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "harness.h"

/* The value of the sample line that starts with `prefix` (-1: none). */
static long long sample(const char *text, const char *prefix)
{
	const char *s = text;
	size_t n = strlen(prefix);

	while ((s = strstr(s, prefix)) != NULL) {
		if (s == text || s[-1] == '\n')
			return atoll(s + n);
		s += n;
	}
	return -1;
}

static int32_t pool_int(const bson_t *st, const char *field)
{
	bson_iter_t it;
	char path[64];

	snprintf(path, sizeof(path), "pools.0.%s", field);
	cr_assert(bson_iter_init(&it, st) && bson_iter_find_descendant(&it, path, &it),
		  "mongoplexStats has no %s", path);
	return bson_iter_as_int64(&it) & 0x7fffffff;
}

static void check_member(const char *m, const char *member, const bson_t *st)
{
	static const char *const fams[][2] = {{"member_pool_size", "poolSize"},
					      {"member_in_use", "inUse"},
					      {"member_idle", "idle"},
					      {"member_connecting", "connecting"},
					      {"member_queued", "queued"}};
	char prefix[400];
	bson_iter_t it;

	cr_assert(bson_iter_init(&it, st) && bson_iter_find_descendant(&it, "pools.0.type", &it) &&
		  BSON_ITER_HOLDS_UTF8(&it));
	snprintf(prefix, sizeof(prefix), "mongoplex_member_info{member=\"%s\",type=\"%s\"} ",
		 member, bson_iter_utf8(&it, NULL));
	cr_assert_eq(sample(m, prefix), 1, "no %s1 in:\n%s", prefix, m);
	for (size_t i = 0; i < sizeof(fams) / sizeof(fams[0]); i++) {
		snprintf(prefix, sizeof(prefix), "mongoplex_%s{member=\"%s\"} ", fams[i][0],
			 member);
		cr_assert_eq(sample(m, prefix), pool_int(st, fams[i][1]), "%s vs pools.0.%s:\n%s",
			     prefix, fams[i][1], m);
	}
}

Test(metrics_members, labelled_member_fields, .timeout = 60)
{
	char extra[200], host[256], member[300], prefix[400], *m;
	int mport = h_free_port(), bport;
	struct proxy *p;
	mongoc_client_t *c;
	bson_error_t err;
	bson_t st, reply;
	long long idle;

	h_proxy_backend_hostport(host, sizeof(host), &bport);
	snprintf(member, sizeof(member), "%s:%d", host, bport);
	snprintf(extra, sizeof(extra), "metrics_listen = 127.0.0.1:%d\n", mport);
	p = proxy_start(extra);
	proxy_stats(p, &st);
	m = h_get_metrics(mport);
	check_member(m, member, &st);
	free(m);
	bson_destroy(&st);
	/* A forwarded find leaves its connection in the member's pool. */
	c = h_proxy_client(p, "metrics_members");
	cr_assert(h_cmd_json(c, "mongoplex_test", "{\"find\": \"metrics_members\", \"filter\": {}}",
			     &reply, &err),
		  "find: %s", err.message);
	bson_destroy(&reply);
	mongoc_client_destroy(c);
	m = h_get_metrics(mport);
	snprintf(prefix, sizeof(prefix), "mongoplex_member_idle{member=\"%s\"} ", member);
	idle = sample(m, prefix);
	snprintf(prefix, sizeof(prefix), "mongoplex_member_in_use{member=\"%s\"} ", member);
	cr_assert(idle >= 0 && sample(m, prefix) >= 0 && idle + sample(m, prefix) >= 1,
		  "after a find the member's pool holds a connection:\n%s", m);
	cr_log_info("%s", strstr(m, "# HELP mongoplex_member_info"));
	free(m);
	proxy_stop(p);
}
