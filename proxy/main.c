/*
 * main.c — command line: parse options, load and check the config, run.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "config/cfg.h"
#include "config/secret.h"
#include "core/errors.h"
#include "pool/auth.h"
#include "proxy/admin_cli.h"
#include "proxy/cauth.h"
#include "proxy/proxy.h"
#include "proxy/workers.h"
#include "version.h"

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: mongoplex [-c FILE] [options]\n"
	    "       mongoplex --admin ADDRESS [--json] COMMAND...\n"
	    "Connection-pooling query proxy for MongoDB.\n\n"
	    "  -c, --config FILE          configuration file (INI; see mongoplex.ini(5))\n"
	    "  -t, --test-config          load and validate the configuration, then exit\n"
	    "  -v, --verbose              log at debug level (overrides log_level)\n"
	    "      --help-config          describe every setting\n"
	    "      --write-example-config print the annotated example configuration\n"
	    "      --write-settings-md    print docs/settings.md (the settings reference)\n"
	    "      --write-errors-md      print docs/errors.md (the errors the proxy returns)\n"
	    "      --scram-secret USER    read a password on stdin, print the auth_users_file\n"
	    "                             line for USER (db.user; plain user means admin.user)\n"
	    "      --admin ADDRESS        run an admin command on the proxy at ADDRESS (its\n"
	    "                             unix socket path or a mongodb:// URI) and print the\n"
	    "                             answer: show pools|clients|servers|config|mem,\n"
	    "                             pause [MEMBER], resume [MEMBER], reconnect [MEMBER],\n"
	    "                             kill ID, reload\n"
	    "      --json                 with --admin: print the reply as JSON, not a table\n"
	    "  -V, --version              print the version\n"
	    "  -h, --help                 this text\n\n"
	    "Signals: SIGHUP reloads the config, SIGTERM shuts down gracefully, SIGINT exits.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"test-config", no_argument, NULL, 't'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {"help-config", no_argument, NULL, 1},
	    {"write-example-config", no_argument, NULL, 2},
	    {"scram-secret", required_argument, NULL, 3},
	    {"write-settings-md", no_argument, NULL, 20},
	    {"write-errors-md", no_argument, NULL, 21},
	    {"admin", required_argument, NULL, 4},
	    {"json", no_argument, NULL, 5},
	    {NULL, 0, NULL, 0},
	};
	const char *path = NULL, *admin = NULL;
	bool test_only = false, verbose = false, json = false;
	char err[CFG_ERR_LEN];
	struct cfg cfg;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "c:tvVh", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			path = optarg;
			break;
		case 't':
			test_only = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'V':
			printf("mongoplex %s\n", MP_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		case 1:
			cfg_write_help(stdout);
			return 0;
		case 2:
			cfg_write_example(stdout);
			return 0;
		case 3:
			return cauth_secret_main(optarg);
		case 20:
			cfg_write_markdown(stdout);
			return 0;
		case 21:
			mp_errors_write_markdown(stdout);
			return 0;
		case 4:
			admin = optarg;
			break;
		case 5:
			json = true;
			break;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (admin != NULL)
		return admin_cli_main(admin, json, argc - optind, argv + optind);
	if (json) {
		fprintf(stderr, "mongoplex: --json goes with --admin\n");
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "mongoplex: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	mongoc_init();
	if (path != NULL) {
		if (!cfg_load(path, &cfg, err, sizeof(err))) {
			fprintf(stderr, "mongoplex: %s\n", err);
			return 1;
		}
	} else {
		cfg_defaults(&cfg);
		if (!cfg_validate(&cfg, err, sizeof(err))) {
			fprintf(stderr, "mongoplex: %s\n", err);
			return 1;
		}
	}
	if (test_only) {
		if (!auth_check_config(path, &cfg, stderr) || !cauth_check_config(&cfg, stderr)) {
			cfg_free(&cfg);
			return 1;
		}
		if (strncmp(cfg.backend_uri, "mongodb+srv://", 14) == 0)
			printf(
			    "mongoplex: note: backend_uri is a mongodb+srv:// URI; its SRV and TXT "
			    "records are not looked up here (the running proxy looks them up on "
			    "its monitor thread and logs the result)\n");
		printf("mongoplex: configuration %s is valid\n", path ? path : "(defaults)");
		cfg_free(&cfg);
		return 0;
	}
	if (verbose)
		cfg.log_level = LOG_LVL_DEBUG;
	if (workers_wanted(&cfg) > 1)
		rc = workers_main(&cfg, path, workers_wanted(&cfg));
	else
		rc = proxy_main(&cfg, path);
	mongoc_cleanup();
	return rc;
}
