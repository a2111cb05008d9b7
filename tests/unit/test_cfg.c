/*
 * test_cfg.c — configuration defaults, loading, errors and reload rules
 * (config/cfg.h).
 *
 * Every rejected file must say "path:LINE: message" with the line the user has
 * to fix, whether the problem is found while parsing (syntax, unknown key, bad
 * value) or afterwards (cross-field checks). The shipped example file must be
 * exactly what the settings table generates, and must load as is.
 */
#include <criterion/criterion.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/cfg.h"
#include "proxy/workers.h"

#define EXAMPLE_PATH MP_SOURCE_DIR "/config/mongoplex.ini"

static void setup(void)
{
	mongoc_init();
	mongoc_log_set_handler(NULL, NULL); /* libmongoc's own URI complaints */
	log_current_level = LOG_LVL_ERROR;  /* keep reload warnings out of the output */
}

TestSuite(cfg, .init = setup);

/* ---- helpers ------------------------------------------------------------- */

/* Writes `text` to a fresh temporary file; the caller unlinks and frees it. */
static char *write_tmp(const char *text)
{
	char *path = strdup("/tmp/mongoplex-test-cfg-XXXXXX");
	int fd = mkstemp(path);
	FILE *f;

	cr_assert_geq(fd, 0, "mkstemp");
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* Loads `text`; on success `c` holds the result (caller frees). */
static bool load_text(const char *text, struct cfg *c, char *err, char **path_out)
{
	char *path = write_tmp(text);
	bool ok;

	err[0] = '\0';
	ok = cfg_load(path, c, err, CFG_ERR_LEN);
	unlink(path);
	if (path_out != NULL)
		*path_out = path;
	else
		free(path);
	return ok;
}

/* `text` must be refused with "path:LINE: ..." containing `words`. */
static void expect_error(const char *text, int line, const char *words)
{
	struct cfg c;
	char err[CFG_ERR_LEN], prefix[256];
	char *path;

	cr_assert_not(load_text(text, &c, err, &path), "accepted:\n%s", text);
	snprintf(prefix, sizeof(prefix), "%s:%d: ", path, line);
	cr_assert(strncmp(err, prefix, strlen(prefix)) == 0,
		  "error \"%s\" does not start with \"%s\"", err, prefix);
	cr_assert_not_null(strstr(err + strlen(prefix), words), "error \"%s\" does not say \"%s\"",
			   err, words);
	cfg_free(&c);
	free(path);
}

static void value_of(const struct cfg *c, const char *name, char *buf, size_t len)
{
	size_t n;
	const struct cfg_key *keys = cfg_keys(&n);

	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i].name, name) == 0) {
			cfg_format_value(c, &keys[i], buf, len);
			return;
		}
	cr_assert_fail("no setting \"%s\"", name);
}

/* Every setting of `c` equals its table default. */
static void check_all_defaults(const struct cfg *c)
{
	size_t n;
	const struct cfg_key *keys = cfg_keys(&n);
	char buf[256];

	cr_assert_gt(n, 10);
	for (size_t i = 0; i < n; i++) {
		cfg_format_value(c, &keys[i], buf, sizeof(buf));
		cr_assert_str_eq(buf, keys[i].def, "%s is \"%s\", its default is \"%s\"",
				 keys[i].name, buf, keys[i].def);
	}
}

/* ---- defaults and good files ----------------------------------------------- */

Test(cfg, defaults_valid)
{
	struct cfg c;
	char err[CFG_ERR_LEN] = "";

	cfg_defaults(&c);
	cr_assert(cfg_validate(&c, err, sizeof(err)), "%s", err);
	check_all_defaults(&c);
	cr_assert_str_eq(c.listen_addr, "127.0.0.1", "loopback unless told otherwise");
	cr_assert_eq(c.listen_port, 27018);
	cr_assert(c.batching);
	cr_assert_eq(c.log_level, LOG_LVL_INFO);
	cfg_free(&c);
	cr_assert_null(c.listen_addr, "cfg_free clears the strings");
}

Test(cfg, table_is_consistent)
{
	size_t n;
	const struct cfg_key *keys = cfg_keys(&n);

	for (size_t i = 0; i < n; i++) {
		cr_assert_not_null(keys[i].help, "%s", keys[i].name);
		cr_assert_gt(strlen(keys[i].help), 10, "%s has no help", keys[i].name);
		if (keys[i].type == CFG_INT)
			cr_assert_leq(keys[i].min, keys[i].max, "%s", keys[i].name);
		for (size_t j = i + 1; j < n; j++)
			cr_assert_str_neq(keys[i].name, keys[j].name);
	}
}

Test(cfg, load_good_file)
{
	static const char text[] = "; comment\n"
				   "# another comment\n"
				   "\n"
				   "[mongoplex]\n"
				   "listen_addr = 0.0.0.0\n"
				   "listen_port=27100\n"
				   "  pool_size   =   64  \n"
				   "min_pool_size = 4\n"
				   "batching = off\n"
				   "batch_max_wait_us = 250\n"
				   "log_level = debug\n"
				   "backend_uri = mongodb://a:1,b:2/?replicaSet=rs0\n"
				   "metrics_listen = 127.0.0.1:9216\n"
				   "unix_socket = /tmp/mongoplex.sock\n";
	struct cfg c;
	char err[CFG_ERR_LEN], buf[64];

	cr_assert(load_text(text, &c, err, NULL), "%s", err);
	cr_assert_str_eq(c.listen_addr, "0.0.0.0");
	cr_assert_eq(c.listen_port, 27100);
	cr_assert_eq(c.pool_size, 64);
	cr_assert_eq(c.min_pool_size, 4);
	cr_assert_not(c.batching);
	cr_assert_eq(c.batch_max_wait_us, 250);
	cr_assert_eq(c.log_level, LOG_LVL_DEBUG);
	cr_assert_str_eq(c.backend_uri, "mongodb://a:1,b:2/?replicaSet=rs0");
	cr_assert_str_eq(c.metrics_listen, "127.0.0.1:9216");
	cr_assert_str_eq(c.unix_socket, "/tmp/mongoplex.sock");
	value_of(&c, "max_queue", buf, sizeof(buf));
	cr_assert_str_eq(buf, "10000", "settings not in the file keep their defaults");
	cfg_free(&c);
}

Test(cfg, hash_after_a_value_is_a_comment)
{
	static const char text[] =
	    "[mongoplex]\n"
	    "pool_size = 50   # the peak of the curve\n"
	    "backend_uri = mongodb://u:p%23w@db:27017/\t# percent-encoded #\n"
	    "unix_socket = /tmp/a#b.sock ; inih's own inline comment\n"
	    "  # an indented comment line\n";
	struct cfg c;
	char err[CFG_ERR_LEN];

	cr_assert(load_text(text, &c, err, NULL), "%s", err);
	cr_assert_eq(c.pool_size, 50);
	cr_assert_str_eq(c.backend_uri, "mongodb://u:p%23w@db:27017/");
	cr_assert_str_eq(c.unix_socket, "/tmp/a#b.sock", "a '#' inside a value stays");
	cfg_free(&c);
}

Test(cfg, bool_spellings)
{
	static const char *const on[] = {"on", "true", "yes", "1", "ON", "True"};
	static const char *const off[] = {"off", "false", "no", "0", "OFF", "No"};
	char text[128], err[CFG_ERR_LEN];
	struct cfg c;

	for (size_t i = 0; i < 6; i++) {
		snprintf(text, sizeof(text), "[mongoplex]\nbatching = %s\n", off[i]);
		cr_assert(load_text(text, &c, err, NULL), "%s", err);
		cr_assert_not(c.batching, "%s", off[i]);
		cfg_free(&c);
		snprintf(text, sizeof(text), "[mongoplex]\nbatching = off\nbatching = %s\n", on[i]);
		cr_assert(load_text(text, &c, err, NULL), "%s", err);
		cr_assert(c.batching, "%s", on[i]);
		cfg_free(&c);
	}
}

Test(cfg, empty_file_gives_defaults)
{
	struct cfg c;
	char err[CFG_ERR_LEN];

	cr_assert(load_text("", &c, err, NULL), "%s", err);
	check_all_defaults(&c);
	cfg_free(&c);
	cr_assert(load_text("[mongoplex]\n", &c, err, NULL), "%s", err);
	check_all_defaults(&c);
	cfg_free(&c);
}

Test(cfg, missing_file)
{
	struct cfg c;
	char err[CFG_ERR_LEN];

	cr_assert_not(cfg_load("/nonexistent/mongoplex.ini", &c, err, sizeof(err)));
	cr_assert_not_null(strstr(err, "/nonexistent/mongoplex.ini"), "%s", err);
	cr_assert_not_null(strstr(err, "cannot read"), "%s", err);
	cr_assert_not_null(strstr(err, "No such file"), "%s", err);
	cfg_free(&c);
}

/* ---- errors, with their line numbers ---------------------------------------- */

Test(cfg, unknown_key)
{
	expect_error("[mongoplex]\npool_size = 4\npool_sise = 5\n", 3,
		     "unknown setting \"pool_sise\"");
}

Test(cfg, bad_integer)
{
	expect_error("[mongoplex]\n\n; comment\npool_size = 12abc\n", 4,
		     "pool_size: \"12abc\" is not an integer");
	expect_error("[mongoplex]\nmax_queue =\n", 2, "max_queue: \"\" is not an integer");
	expect_error("[mongoplex]\nmax_queue = 1.5\n", 2, "is not an integer");
	expect_error("[mongoplex]\nmax_queue = 99999999999999999999999\n", 2, "is not an integer");
}

Test(cfg, integer_out_of_range)
{
	expect_error("[mongoplex]\nlisten_port = 70000\n", 2,
		     "listen_port: 70000 is out of range [0, 65535]");
	expect_error("[mongoplex]\nlog_level = warning\npool_size = 0\n", 3,
		     "pool_size: 0 is out of range [1, 100000]");
	expect_error("[mongoplex]\nclient_read_timeout_ms = -5\n", 2, "out of range");
}

Test(cfg, bad_bool_and_log_level)
{
	expect_error("[mongoplex]\nbatching = maybe\n", 2, "batching: \"maybe\" is not on/off");
	expect_error("[mongoplex]\n\n\nlog_level = loud\n", 4, "log_level: \"loud\"");
}

Test(cfg, key_outside_mongoplex_section)
{
	expect_error("pool_size = 4\n[mongoplex]\n", 1,
		     "\"pool_size\" outside the [mongoplex] section");
	expect_error("[mongoplex]\npool_size = 4\n[pool]\nsize = 4\n", 4,
		     "\"size\" outside the [mongoplex] section");
}

Test(cfg, syntax_error)
{
	expect_error("[mongoplex]\npool_size = 4\nthis line has no equals sign\n", 3,
		     "syntax error");
	expect_error("[mongoplex\npool_size = 4\n", 1, "syntax error");
}

Test(cfg, first_error_wins)
{
	/* A syntax error before a bad setting: the syntax error is reported... */
	expect_error("[mongoplex]\ngarbage\npool_sise = 5\n", 2, "syntax error");
	/* ...and a bad setting before a syntax error: the bad setting. */
	expect_error("[mongoplex]\npool_sise = 5\ngarbage\n", 2, "unknown setting");
}

Test(cfg, min_pool_size_above_pool_size)
{
	/* Blamed on the line that made the two disagree (the later one). */
	expect_error("[mongoplex]\npool_size = 4\nmin_pool_size = 8\n", 3,
		     "min_pool_size (8) exceeds pool_size (4)");
	expect_error("[mongoplex]\nmin_pool_size = 8\n\n; smaller pool\npool_size = 4\n", 5,
		     "min_pool_size (8) exceeds pool_size (4)");
	expect_error("[mongoplex]\nlog_level = info\nmin_pool_size = 20\n", 3,
		     "min_pool_size (20) exceeds pool_size (16)");
}

Test(cfg, max_unauth_conn_above_max_client_conn)
{
	expect_error("[mongoplex]\nmax_client_conn = 50\nmax_unauth_conn = 64\n", 3,
		     "max_unauth_conn (64) exceeds max_client_conn (50)");
	expect_error("[mongoplex]\nmax_unauth_conn = 20000\n", 2,
		     "max_unauth_conn (20000) exceeds max_client_conn (10000)");
}

Test(cfg, bad_backend_uri)
{
	expect_error("[mongoplex]\npool_size = 4\n\nbackend_uri = http://localhost:27017\n", 4,
		     "backend_uri: ");
	expect_error("[mongoplex]\nbackend_uri = mongodb://\n", 2, "backend_uri: ");
}

Test(cfg, other_cross_field_checks)
{
	expect_error("[mongoplex]\nmetrics_listen = localhost\n", 2,
		     "metrics_listen: \"localhost\" is not host:port");
	expect_error("[mongoplex]\nmetrics_listen = localhost:99999\n", 2, "bad port");
	expect_error("[mongoplex]\nlisten_port = 1\nlisten_addr =\n", 3, "nothing to listen on");
}

Test(cfg, client_write_timeout_floor)
{
	struct cfg c;
	char err[CFG_ERR_LEN];
	char *path;

	expect_error("[mongoplex]\nclient_write_timeout_ms = 500\n", 2,
		     "client_write_timeout_ms (500) is below 1000");
	cr_assert(load_text("[mongoplex]\nclient_write_timeout_ms = 0\n", &c, err, &path), "%s",
		  err);
	cr_assert_eq(c.client_write_timeout_ms, 0, "0 (off) is allowed");
	cfg_free(&c);
	free(path);
}

Test(cfg, line_longer_than_parser_buffer)
{
	/* inih reads at most 199 characters per line: a longer one must not be
	 * silently cut into a truncated value plus a bogus next line. */
	char text[600];
	char hosts[400] = "";

	for (int i = 0; i < 12; i++) {
		char h[40];

		snprintf(h, sizeof(h), "%smongo-node-%02d.example.com:27017", i ? "," : "", i);
		strcat(hosts, h);
	}
	snprintf(text, sizeof(text), "[mongoplex]\npool_size = 4\nbackend_uri = mongodb://%s/\n",
		 hosts);
	expect_error(text, 3, "too long");
}

Test(cfg, longest_lines_accepted)
{
	/* 198 characters plus the newline fit inih's buffer, and so do 199
	 * characters on a last line without one. */
	char text[600], uri[200];
	struct cfg c;
	char err[CFG_ERR_LEN];
	int n;

	n = snprintf(uri, sizeof(uri), "mongodb://h:1/?replicaSet=");
	memset(uri + n, 'a', sizeof(uri) - 1 - (size_t)n);
	uri[198 - strlen("backend_uri = ")] = '\0';
	snprintf(text, sizeof(text), "[mongoplex]\nbackend_uri = %s\npool_size = 5\n", uri);
	cr_assert_eq(strlen(strchr(text, 'b')) - strlen("\npool_size = 5\n"), 198);
	cr_assert(load_text(text, &c, err, NULL), "%s", err);
	cr_assert_str_eq(c.backend_uri, uri);
	cr_assert_eq(c.pool_size, 5);
	cfg_free(&c);

	uri[199 - strlen("backend_uri = ")] = 'a';
	uri[199 - strlen("backend_uri = ") + 1] = '\0';
	snprintf(text, sizeof(text), "[mongoplex]\npool_size = 5\nbackend_uri = %s", uri);
	cr_assert(load_text(text, &c, err, NULL), "%s", err);
	cr_assert_str_eq(c.backend_uri, uri);
	cfg_free(&c);
}

/* ---- reload ------------------------------------------------------------------ */

Test(cfg, keep_static_on_reload)
{
	struct cfg old, next;
	char err[CFG_ERR_LEN];

	cr_assert(load_text("[mongoplex]\nlisten_addr = 127.0.0.1\nlisten_port = 27018\n"
			    "backend_uri = mongodb://old:27017/\npool_size = 8\n",
			    &old, err, NULL),
		  "%s", err);
	cr_assert(load_text("[mongoplex]\nlisten_addr = 0.0.0.0\nlisten_port = 3000\n"
			    "backend_uri = mongodb://new:27017/\npool_size = 50\n"
			    "batching = off\nlog_level = debug\n",
			    &next, err, NULL),
		  "%s", err);
	cfg_keep_static(&old, &next);
	/* Not reloadable: the old values stay. */
	cr_assert_str_eq(next.listen_addr, "127.0.0.1");
	cr_assert_eq(next.listen_port, 27018);
	cr_assert_str_eq(next.backend_uri, "mongodb://old:27017/");
	/* Reloadable: the new values apply. */
	cr_assert_eq(next.pool_size, 50);
	cr_assert_not(next.batching);
	cr_assert_eq(next.log_level, LOG_LVL_DEBUG);
	/* The old struct is untouched and both can be freed independently. */
	cr_assert_str_eq(old.listen_addr, "127.0.0.1");
	cr_assert_eq(old.pool_size, 8);
	cfg_free(&old);
	cr_assert_str_eq(next.backend_uri, "mongodb://old:27017/");
	cfg_free(&next);
}

Test(cfg, reloadable_flags_match_intent)
{
	static const char *const fixed[] = {
	    "listen_addr", "listen_port",     "unix_socket", "unix_socket_mode", "metrics_listen",
	    "backend_uri", "client_tls_mode", "auth_mode",   "auth_pool_mode",	 "workers"};
	size_t n;
	const struct cfg_key *keys = cfg_keys(&n);

	for (size_t i = 0; i < n; i++) {
		bool is_fixed = false;

		for (size_t j = 0; j < sizeof(fixed) / sizeof(fixed[0]); j++)
			is_fixed |= strcmp(keys[i].name, fixed[j]) == 0;
		cr_assert_eq(keys[i].reloadable, !is_fixed, "%s", keys[i].name);
	}
}

/* workers = 2: each worker's share of the process-wide limits, rounded up. */
Test(cfg, limits_divided_per_worker)
{
	struct cfg c;

	cfg_defaults(&c);
	c.max_client_conn = 5;
	c.pool_size = 1;
	c.max_backend_conn = 0;
	c.max_queue = 10;
	cfg_for_worker(&c, 2, 1);
	cr_assert_eq(c.max_client_conn, 3);
	cr_assert_eq(c.pool_size, 1);
	cr_assert_eq(c.max_backend_conn, 0, "0 (no cap) stays 0");
	cr_assert_eq(c.max_queue, 5);
	cr_assert_str_eq(c.unix_socket, "", "only worker 0 serves the unix socket");
	cfg_for_worker(&c, 1, 0);
	cr_assert_eq(c.max_client_conn, 3, "1 worker: unchanged");
	cfg_free(&c);
}

/* ---- the shipped example file --------------------------------------------------- */

Test(cfg, example_file_is_generated)
{
	char *gen = NULL, *shipped;
	size_t gen_len = 0;
	long file_len;
	FILE *mem = open_memstream(&gen, &gen_len);
	FILE *f;

	cr_assert_not_null(mem);
	cfg_write_example(mem);
	fclose(mem);
	f = fopen(EXAMPLE_PATH, "rb");
	cr_assert_not_null(f,
			   "%s is missing; regenerate it with: "
			   "build/mongoplex --write-example-config > config/mongoplex.ini",
			   EXAMPLE_PATH);
	fseek(f, 0, SEEK_END);
	file_len = ftell(f);
	rewind(f);
	shipped = malloc((size_t)file_len + 1);
	cr_assert_eq(fread(shipped, 1, (size_t)file_len, f), (size_t)file_len);
	fclose(f);
	cr_assert(gen_len == (size_t)file_len && memcmp(gen, shipped, gen_len) == 0,
		  "%s differs from what the settings table generates (%zu vs %ld bytes); "
		  "regenerate it with: build/mongoplex --write-example-config > "
		  "config/mongoplex.ini",
		  EXAMPLE_PATH, gen_len, file_len);
	free(gen);
	free(shipped);
}

Test(cfg, example_file_loads_as_defaults)
{
	struct cfg c;
	char err[CFG_ERR_LEN] = "";

	cr_assert(cfg_load(EXAMPLE_PATH, &c, err, sizeof(err)), "%s", err);
	check_all_defaults(&c);
	cfg_free(&c);
}

Test(cfg, help_lists_every_setting)
{
	char *text = NULL;
	size_t len = 0, n;
	const struct cfg_key *keys = cfg_keys(&n);
	FILE *mem = open_memstream(&text, &len);

	cfg_write_help(mem);
	fclose(mem);
	for (size_t i = 0; i < n; i++)
		cr_assert_not_null(strstr(text, keys[i].name), "--help-config lacks %s",
				   keys[i].name);
	free(text);
}

/* The workers master's restart rule (proxy/workers.c): a worker that had
 * listened is forked again at once, at most 5 in a one-second window, the
 * rest 1 s later; one that failed before listening waits 0.2 s, 0.4 s, ...
 * (the rate rule never shortens that). */
Test(cfg, workers_restart_rate_bound)
{
	struct workers_restart_window w = {0, 0};
	uint64_t t = 5000000;

	for (int i = 0; i < WORKERS_RESTARTS_PER_SEC; i++)
		cr_assert_eq(workers_restart_delay(&w, t + (uint64_t)i * 100000, 0), 0,
			     "restart %d of the window goes at once", i + 1);
	cr_assert_eq(workers_restart_delay(&w, t + 600000, 0), 1000000, "the 6th waits 1 s");
	cr_assert_eq(workers_restart_delay(&w, t + 700000, 0), 1000000);
	cr_assert_eq(workers_restart_delay(&w, t + 1000000, 0), 0, "a new window");
	cr_assert_eq(workers_restart_delay(&w, t + 3000000, 1), 200000, "1 start failure: 0.2 s");
	cr_assert_eq(workers_restart_delay(&w, t + 3000001, 2), 400000);
	cr_assert_eq(workers_restart_delay(&w, t + 3000002, 4), 1600000);
	for (int i = 0; i < 5; i++)
		(void)workers_restart_delay(&w, t + 3000003 + (uint64_t)i, 0);
	cr_assert_eq(workers_restart_delay(&w, t + 3000100, 4), 1600000,
		     "over the rate: still the longer of the two");
}
