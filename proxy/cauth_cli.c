/*
 * cauth_cli.c — client authentication outside the event loop: the checks
 * of the auth settings at --check-config / startup (cauth_check_config:
 * auth_mode = none on a non-loopback address, the users file) and
 * --scram-secret (a users-file line from a password on stdin).
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "config/cfg.h"
#include "config/users.h"
#include "proxy/cauth.h"

static bool loopback(const char *addr)
{
	return addr[0] == '\0' || strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0 ||
	       strcmp(addr, "localhost") == 0;
}

bool cauth_check_config(const struct cfg *c, FILE *out)
{
	struct users_table t;
	char err[CFG_ERR_LEN];

	if (strcmp(c->auth_mode, "none") == 0) {
		if (!loopback(c->listen_addr))
			fprintf(
			    out,
			    "mongoplex: warning: listen_addr %s is not loopback and auth_mode = "
			    "none: every client that can reach it gets the proxy's backend "
			    "rights (set auth_mode = scram)\n",
			    c->listen_addr);
		return true;
	}
	if (c->auth_users_file[0] == '\0')
		return true; /* auth_query only */
	if (!users_load(c->auth_users_file, &t, err, sizeof(err))) {
		fprintf(out, "mongoplex: auth_users_file: %s\n", err);
		return false;
	}
	if (t.n == 0 && !c->auth_query)
		fprintf(out, "mongoplex: warning: %s lists no users: nobody can log in\n",
			c->auth_users_file);
	users_free(&t);
	return true;
}

int cauth_secret_main(const char *dbuser)
{
	char pw[1024], line[2048], err[256];
	size_t n;

	if (fgets(pw, sizeof(pw), stdin) == NULL) {
		fprintf(stderr, "mongoplex: --scram-secret: no password on stdin\n");
		return 1;
	}
	n = strcspn(pw, "\r\n");
	pw[n] = '\0';
	if (n == 0) {
		fprintf(stderr, "mongoplex: --scram-secret: empty password\n");
		return 1;
	}
	if (!users_format_line(dbuser, pw, line, sizeof(line), err, sizeof(err))) {
		OPENSSL_cleanse(pw, sizeof(pw));
		fprintf(stderr, "mongoplex: --scram-secret: %s\n", err);
		return 1;
	}
	OPENSSL_cleanse(pw, sizeof(pw));
	printf("%s\n", line);
	return 0;
}
