/*
 * test_admin_table.c — the admin console's pieces that need no server: the
 * psql-style table of mongoplex --admin (proxy/admin_table.c), the
 * admin_users match (proxy/admin.c), the router's ROUTE_ADMIN and the
 * redacted rendering of settings (config/cfg.c, cfg_format_shown).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg.h"
#include "proxy/admin.h"
#include "proxy/admin_table.h"
#include "proxy/router.h"

/* The table printed for `reply`, malloc'd. */
static char *table_of(const bson_t *reply)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	admin_table_print(f, reply);
	fclose(f);
	return buf;
}

static bson_t *json(const char *j)
{
	bson_error_t err;
	bson_t *b = bson_new_from_json((const uint8_t *)j, -1, &err);

	cr_assert_not_null(b, "bad JSON in the test: %s", err.message);
	return b;
}

Test(admin_table, aligned_like_psql)
{
	bson_t *r =
	    json("{\"rows\": [{\"member\": \"127.0.0.1:27017\", \"size\": 12, \"tls\": true},"
		 " {\"member\": \"h:1\", \"size\": 3, \"tls\": false}], \"ok\": 1}");
	char *t = table_of(r);

	cr_assert_str_eq(t,
			 "     member      | size | tls\n"
			 "-----------------+------+-----\n"
			 " 127.0.0.1:27017 |   12 | t\n"
			 " h:1             |    3 | f\n"
			 "(2 rows)\n",
			 "got:\n%s", t);
	free(t);
	bson_destroy(r);
}

Test(admin_table, missing_fields_empty_and_one_row)
{
	bson_t *r = json("{\"rows\": [{\"a\": \"x\"}, {\"b\": 7}], \"ok\": 1}");
	bson_t *one = json("{\"rows\": [{\"name\": \"clients\", \"value\": 1}]}");
	char *t = table_of(r), *u = table_of(one);

	cr_assert_str_eq(t, " a | b\n---+---\n x | \n   | 7\n(2 rows)\n", "got:\n%s", t);
	cr_assert(strstr(u, "(1 row)\n") != NULL, "got:\n%s", u);
	free(t);
	free(u);
	bson_destroy(r);
	bson_destroy(one);
}

/* Names come from clients' hellos: no escape sequence reaches the terminal. */
Test(admin_table, control_characters_and_long_values)
{
	char big[2000];
	bson_t r = BSON_INITIALIZER, rows, row;
	char *t;

	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	BSON_APPEND_ARRAY_BEGIN(&r, "rows", &rows);
	BSON_APPEND_DOCUMENT_BEGIN(&rows, "0", &row);
	BSON_APPEND_UTF8(&row, "app", "evil\x1b[2J\n\tname");
	BSON_APPEND_UTF8(&row, "long", big);
	bson_append_document_end(&rows, &row);
	bson_append_array_end(&r, &rows);
	t = table_of(&r);
	cr_assert(strstr(t, "evil?[2J??name") != NULL, "got:\n%s", t);
	cr_assert(strchr(t, '\x1b') == NULL);
	cr_assert(strstr(t, "yyy...") != NULL && strlen(t) < ADMIN_TABLE_CELL * 3, "long value");
	free(t);
	bson_destroy(&r);
}

Test(admin_table, truncated_note_and_no_rows)
{
	bson_t *r = json("{\"rows\": [{\"id\": 1}], \"truncated\": true, \"next\": 1, \"ok\": 1}");
	bson_t *none = json("{\"ok\": 1}");
	char *t = table_of(r), *u = table_of(none);

	cr_assert(strstr(t, "(1 row)\n(truncated: the reply reached its size bound; more rows "
			    "from skip 1)\n") != NULL,
		  "got:\n%s", t);
	cr_assert_str_eq(u, "(no rows in the reply)\n");
	free(t);
	free(u);
	bson_destroy(r);
	bson_destroy(none);
}

Test(admin_table, admin_users_match)
{
	cr_assert(admin_user_listed("ops, admin.root ,app.dba", "admin.ops"));
	cr_assert(admin_user_listed("ops, admin.root ,app.dba", "admin.root"));
	cr_assert(admin_user_listed("ops, admin.root ,app.dba", "app.dba"));
	cr_assert(!admin_user_listed("ops, admin.root ,app.dba", "app.ops"));
	cr_assert(!admin_user_listed("ops", "admin.opsx"));
	cr_assert(!admin_user_listed("", "admin.ops"));
	cr_assert(!admin_user_listed(",,", "admin."));
}

Test(admin_table, router_admin_commands)
{
	static const char *const admin[] = {"mongoplexShow", "mongoplexPause", "mongoplexKill"};
	struct route_info ri;

	for (size_t i = 0; i < 3; i++) {
		bson_t *b = BCON_NEW(admin[i], BCON_UTF8("pools"), "$db", BCON_UTF8("admin"));

		cr_assert(router_classify(b, &ri));
		cr_assert_eq(ri.route, ROUTE_ADMIN, "%s", admin[i]);
		bson_destroy(b);
	}
	{
		bson_t *b = BCON_NEW("mongoplexStats", BCON_INT32(1), "$db", BCON_UTF8("admin"));

		cr_assert(router_classify(b, &ri));
		cr_assert_eq(ri.route, ROUTE_STATS);
		bson_destroy(b);
	}
}

Test(admin_table, config_shown_redacted)
{
	struct cfg c;
	char err[CFG_ERR_LEN], v[512];

	cfg_defaults(&c);
	cr_assert(cfg_set(&c, "backend_uri", "mongodb://ops:hunter2@db:27017/?authSource=admin",
			  err, sizeof(err)));
	cfg_format_shown(&c, cfg_find_key("backend_uri"), v, sizeof(v));
	cr_assert(strstr(v, "hunter2") == NULL, "%s", v);
	cr_assert(strstr(v, "ops:***@db:27017") != NULL, "%s", v);
	cfg_format_value(&c, cfg_find_key("backend_uri"), v, sizeof(v));
	cr_assert(strstr(v, "hunter2") != NULL, "the config itself keeps it: %s", v);
	cfg_format_shown(&c, cfg_find_key("pool_size"), v, sizeof(v));
	cr_assert_str_eq(v, "16");
	cfg_free(&c);
}
