/*
 * cfg_load.c — reading a config file into a struct cfg: libinih fed one
 * line at a time so that every setting, and every refusal, has its line
 * number ("path:line: why"); the first error wins and nothing is applied
 * by the caller unless the whole file loads and checks (cfg_check.c).
 */
#include "config/cfg.h"

#include <errno.h>
#include <ini.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_check.h"
#include "core/xalloc.h"

/* Loader state. inih numbers lines only in its return value (the Debian build
 * has no INI_HANDLER_LINENO), so the loader feeds it lines itself and counts
 * them, to know which line set each setting. The first error wins. */
struct load_ctx {
	struct cfg *c;
	const struct cfg_key *keys; /* the table (cfg_keys) */
	FILE *f;
	int line;      /* the line inih is parsing */
	int long_line; /* first line too long for inih's buffer, or 0 */
	int max_line;  /* inih's buffer size */
	int *key_line; /* per table entry: the line that last set it, 0: default */
	char err[CFG_ERR_LEN];
	int err_line; /* line of the first setting refused, or 0 */
};

/* A '#' after a blank starts a comment, as ';' does in inih: "pool_size =
 * 50  # peak" is 50, not a bad number, and no URI or path keeps a comment
 * in its value ('#' in a URI's password is percent-encoded, %23). A '#'
 * that starts the line is inih's own comment line. */
static void cut_hash_comment(char *line)
{
	for (char *p = line + 1; *p != '\0'; p++)
		if (*p == '#' && (p[-1] == ' ' || p[-1] == '\t')) {
			p[0] = '\n';
			p[1] = '\0';
			return;
		}
}

/* An ini_reader: one whole line per call. Leading blanks are dropped, so an
 * indented setting is a setting and not inih's continuation of the previous
 * value. A line longer than inih's buffer ends the parse (reported by
 * cfg_load) instead of being split into a cut value and a bogus line. */
static char *read_line(char *buf, int size, void *stream)
{
	struct load_ctx *ctx = stream;
	size_t n, blanks;
	int ch;

	if (fgets(buf, size, ctx->f) == NULL)
		return NULL;
	ctx->line++;
	ctx->max_line = size;
	n = strlen(buf);
	if (n == (size_t)size - 1 && buf[n - 1] != '\n' && (ch = getc(ctx->f)) != EOF) {
		ungetc(ch, ctx->f);
		ctx->long_line = ctx->line;
		return NULL;
	}
	blanks = strspn(buf, " \t");
	memmove(buf, buf + blanks, n - blanks + 1);
	cut_hash_comment(buf);
	return buf;
}

static int on_ini_line(void *user, const char *section, const char *name, const char *value)
{
	struct load_ctx *ctx = user;
	const struct cfg_key *k;
	char err[CFG_ERR_LEN];

	if (ctx->err_line != 0)
		return 0;
	if (strcmp(section, "mongoplex") != 0) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "setting \"%s\" outside the [mongoplex] section", name);
		ctx->err_line = ctx->line;
		return 0;
	}
	if (!cfg_set(ctx->c, name, value, err, sizeof(err))) {
		snprintf(ctx->err, sizeof(ctx->err), "%s", err);
		ctx->err_line = ctx->line;
		return 0;
	}
	k = cfg_find_key(name);
	ctx->key_line[k - ctx->keys] = ctx->line;
	return 1;
}

/* The line to point at for a failed cross-field check: the later of the
 * lines that set the settings involved (0 if all are defaults). */
static int blame_line(const struct load_ctx *ctx, const char *const blame[2])
{
	int line = 0;

	for (int i = 0; i < 2; i++) {
		const struct cfg_key *k = blame[i] ? cfg_find_key(blame[i]) : NULL;

		if (k != NULL && ctx->key_line[k - ctx->keys] > line)
			line = ctx->key_line[k - ctx->keys];
	}
	return line;
}

/* Parses the open file and checks the result; err gets "path:line: why". */
static bool load_stream(struct load_ctx *ctx, const char *path, char *err, size_t errlen)
{
	const char *blame[2] = {NULL, NULL};
	char msg[CFG_ERR_LEN];
	int rc, line;

	rc = ini_parse_stream(read_line, ctx, on_ini_line, ctx);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot read: out of memory", path);
		return false;
	}
	if (rc > 0) {
		/* inih reports the first bad line, ours or its own syntax error. */
		snprintf(err, errlen, "%s:%d: %s", path, rc,
			 ctx->err_line == rc ? ctx->err
					     : "syntax error (expected key = value or [section])");
		return false;
	}
	if (ctx->long_line != 0) {
		snprintf(err, errlen, "%s:%d: line too long (at most %d characters)", path,
			 ctx->long_line, ctx->max_line - 2);
		return false;
	}
	if (!cfg_check(ctx->c, blame, msg, sizeof(msg))) {
		line = blame_line(ctx, blame);
		if (line > 0)
			snprintf(err, errlen, "%s:%d: %s", path, line, msg);
		else
			snprintf(err, errlen, "%s: %s", path, msg);
		return false;
	}
	return true;
}

bool cfg_load(const char *path, struct cfg *c, char *err, size_t errlen)
{
	struct load_ctx ctx = {.c = c};
	size_t nkeys;
	bool ok;

	cfg_defaults(c);
	ctx.f = fopen(path, "r");
	if (ctx.f == NULL) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		return false;
	}
	ctx.keys = cfg_keys(&nkeys);
	ctx.key_line = xcalloc(nkeys, sizeof(*ctx.key_line));
	ok = load_stream(&ctx, path, err, errlen);
	fclose(ctx.f);
	free(ctx.key_line);
	return ok;
}
