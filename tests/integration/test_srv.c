/*
 * test_srv.c — backend_uri = mongodb+srv:// against a real DNS server.
 *
 * Runs tests/integration/srv_netns.sh, which makes a network namespace with
 * its own resolv.conf and a dnsmasq inside it (SRV, TXT and A records),
 * starts three mockupdb members of replica set rs0 that require SCRAM on
 * database "authdb" (srv_mock.py) and three proxies inside it, and drives
 * them with pymongo and raw OP_MSG (srv_client.py).
 *
 * Asserts (each an "OK" line of the script; it stops at the first failure):
 *  - the SRV name resolves on the monitor thread: the proxy logs the seed
 *    list of the SRV records (m0, m1) and discovers m2 from the members'
 *    hello; mongoplexStats shows m0 RSPrimary, m1 and m2 RSSecondary;
 *  - queries work: a find goes to the primary, secondary reads land on a
 *    secondary;
 *  - TXT options apply: every backend login's saslStart ran on "authdb"
 *    (TXT authSource; the URI names none, so it would be "admin"); a TXT
 *    replicaSet=rsX makes the members of rs0 unusable (logged), and a find
 *    fails with 133 after serverSelectionTimeoutMS;
 *  - a name without SRV record: the proxy logs "DNS lookup failed" with
 *    libmongoc's reason, a raw find gets 133 naming the lookup failure after
 *    serverSelectionTimeoutMS, pymongo's hello gets code 6 with that reason
 *    (no hang);
 *  - mongoses behind an SRV name: finds are served by the SRV-listed ones;
 *  - every proxy exits 0 on SIGTERM with no sanitizer report in its log;
 *  - --test-config accepts the URI and says its DNS records are not looked up.
 * It FAILS (never skips) when the namespace, dnsmasq or mockupdb cannot be
 * had, with the script's reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

Test(srv, mongodb_srv_in_netns, .timeout = 240)
{
	const char *bin = getenv("MONGOPLEX_BIN");
	static char out[65536];
	const char *argv[] = {MP_SOURCE_DIR "/tests/integration/srv_netns.sh",
			      bin != NULL && *bin != '\0' ? bin : MP_BINARY, NULL};
	int st = h_run_capture(argv, out, sizeof(out), 200000);

	cr_log_info("%s", out);
	cr_assert(st == 0 && strstr(out, "SRV-TEST PASSED") != NULL,
		  "srv_netns.sh failed (status %d):\n%s", st, out);
	cr_assert(strstr(out, "OK every backend login used authSource authdb") != NULL, "%s", out);
	cr_assert(strstr(out, "OK no SRV record: raw find failed with 133") != NULL, "%s", out);
}
