/*
 * admin_cli.c — mongoplex --admin (see admin_cli.h): build the command from
 * the words, send it on the admin database, print the reply as a table
 * (proxy/admin_table.c), as "key: value" lines, or as JSON.
 */
#include "proxy/admin_cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "proxy/admin_table.h"

/* The command for the words, false: not a command (usage). */
static bool build(int argc, char *const argv[], bson_t *cmd)
{
	static const struct {
		const char *word, *cmd;
		int args; /* 0: none, 1: optional member, 2: required id, 3: required list */
	} words[] = {
	    {"show", "mongoplexShow", 3},     {"pause", "mongoplexPause", 1},
	    {"resume", "mongoplexResume", 1}, {"reconnect", "mongoplexReconnect", 1},
	    {"kill", "mongoplexKill", 2},     {"reload", "mongoplexReload", 0},
	};
	char *end;

	if (argc < 1)
		return false;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		if (strcmp(argv[0], words[i].word) != 0)
			continue;
		if (argc > 2 || (argc == 2 && words[i].args == 0) ||
		    (argc == 1 && words[i].args >= 2))
			return false;
		if (argc == 1)
			BSON_APPEND_INT32(cmd, words[i].cmd, 1);
		else if (words[i].args == 2) {
			long long id = strtoll(argv[1], &end, 10);

			if (*end != '\0' || end == argv[1] || id < 0)
				return false;
			BSON_APPEND_INT64(cmd, words[i].cmd, id);
		} else
			BSON_APPEND_UTF8(cmd, words[i].cmd, argv[1]);
		return true;
	}
	return false;
}

/* A unix socket path as a libmongoc URI (the path percent-encoded). */
static mongoc_uri_t *address_uri(const char *address, bson_error_t *err)
{
	char uri[1200];
	size_t n = 0;

	if (strncmp(address, "mongodb://", 10) == 0 || strncmp(address, "mongodb+srv://", 14) == 0)
		return mongoc_uri_new_with_error(address, err);
	n += (size_t)snprintf(uri, sizeof(uri), "mongodb://");
	for (const char *p = address; *p != '\0' && n + 4 < sizeof(uri); p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-')
			uri[n++] = *p;
		else
			n +=
			    (size_t)snprintf(uri + n, sizeof(uri) - n, "%%%02X", (unsigned char)*p);
	}
	snprintf(uri + n, sizeof(uri) - n, "/?serverSelectionTimeoutMS=5000");
	return mongoc_uri_new_with_error(uri, err);
}

/* Replies without rows: their fields but ok, one per line ("OK" if none). */
static void print_fields(const bson_t *reply)
{
	bson_iter_t it;
	bool any = false;

	if (!bson_iter_init(&it, reply))
		return;
	while (bson_iter_next(&it)) {
		const bson_value_t *v = bson_iter_value(&it);
		bson_t one = BSON_INITIALIZER;
		char *j;

		if (strcmp(bson_iter_key(&it), "ok") == 0 || bson_iter_key(&it)[0] == '$' ||
		    strcmp(bson_iter_key(&it), "operationTime") == 0)
			continue;
		if (v->value_type == BSON_TYPE_UTF8) {
			printf("%s: %s\n", bson_iter_key(&it), v->value.v_utf8.str);
		} else {
			bson_append_value(&one, "v", 1, v);
			j = bson_as_relaxed_extended_json(&one, NULL);
			printf("%s: %s\n", bson_iter_key(&it), j ? j : "?");
			bson_free(j);
		}
		bson_destroy(&one);
		any = true;
	}
	if (!any)
		printf("OK\n");
}

static int run(mongoc_client_t *client, const bson_t *cmd, bool json)
{
	bson_t reply;
	bson_error_t err;
	bson_iter_t it;
	int rc = 0;

	if (!mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, &err)) {
		fprintf(stderr, "mongoplex --admin: %s\n", err.message);
		rc = 1;
	} else if (json) {
		char *j = bson_as_relaxed_extended_json(&reply, NULL);

		printf("%s\n", j);
		bson_free(j);
	} else if (bson_iter_init_find(&it, &reply, "rows")) {
		admin_table_print(stdout, &reply);
	} else {
		print_fields(&reply);
	}
	bson_destroy(&reply);
	return rc;
}

/* libmongoc's own notices (e.g. "Couldn't send endSessions" when a server
 * has no such command) are not the operator's output: only its errors reach
 * stderr, and stdout holds the table or the JSON alone. */
static void cli_log(mongoc_log_level_t level, const char *domain, const char *message, void *arg)
{
	(void)arg;
	if (level <= MONGOC_LOG_LEVEL_ERROR)
		fprintf(stderr, "mongoplex --admin: %s: %s\n", domain, message);
}

int admin_cli_main(const char *address, bool json, int argc, char *const argv[])
{
	bson_t cmd = BSON_INITIALIZER;
	bson_error_t err;
	mongoc_uri_t *uri;
	mongoc_client_t *client;
	int rc;

	if (!build(argc, argv, &cmd)) {
		fprintf(stderr,
			"mongoplex --admin: expected show pools|clients|servers|config|mem, "
			"pause [MEMBER], resume [MEMBER], reconnect [MEMBER], kill ID or "
			"reload\n");
		bson_destroy(&cmd);
		return 2;
	}
	mongoc_init();
	mongoc_log_set_handler(cli_log, NULL);
	uri = address_uri(address, &err);
	if (uri == NULL) {
		fprintf(stderr, "mongoplex --admin: bad address %s: %s\n", address, err.message);
		bson_destroy(&cmd);
		mongoc_cleanup();
		return 2;
	}
	if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
		mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
	mongoc_uri_set_option_as_utf8(uri, MONGOC_URI_APPNAME, "mongoplex-admin");
	client = mongoc_client_new_from_uri(uri);
	mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
	rc = run(client, &cmd, json);
	mongoc_client_destroy(client);
	mongoc_uri_destroy(uri);
	bson_destroy(&cmd);
	mongoc_cleanup();
	return rc;
}
