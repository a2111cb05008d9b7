/*
 * users.c — loading auth_users_file and writing its lines (see users.h).
 */
#include "config/users.h"
#include "core/xalloc.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool fail(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return false;
}

/* db.user: the database up to the first '.'. */
static bool parse_name(const char *s, size_t len, struct users_entry *e, char *err, size_t errlen)
{
	const char *dot = memchr(s, '.', len);

	if (dot == NULL || dot == s || dot + 1 == s + len)
		return fail(err, errlen, "the first field must be db.user (e.g. admin.alice)");
	if ((size_t)(dot - s) >= sizeof(e->db) || (size_t)(s + len - dot - 1) >= sizeof(e->user))
		return fail(err, errlen, "db or user name too long");
	memcpy(e->db, s, (size_t)(dot - s));
	e->db[dot - s] = '\0';
	memcpy(e->user, dot + 1, (size_t)(s + len - dot - 1));
	e->user[s + len - dot - 1] = '\0';
	return true;
}

static bool b64_field(const char *s, size_t len, uint8_t *out, size_t cap, size_t *outlen)
{
	return scram_b64_decode(s, len, out, cap, outlen);
}

/* MECH$iter:salt$stored:server */
static bool parse_secret(const char *s, size_t len, struct users_entry *e, char *err, size_t errlen)
{
	char mech_name[32], buf[SCRAM_MSG_MAX];
	const char *d1, *colon1, *d2, *colon2;
	enum scram_mech m;
	struct scram_secret *sec;
	size_t kl1 = 0, kl2 = 0;
	unsigned long iter;
	char *endp;

	if (len >= sizeof(buf))
		return fail(err, errlen, "secret too long");
	memcpy(buf, s, len);
	buf[len] = '\0';
	d1 = strchr(buf, '$');
	colon1 = d1 ? strchr(d1, ':') : NULL;
	d2 = colon1 ? strchr(colon1, '$') : NULL;
	colon2 = d2 ? strchr(d2, ':') : NULL;
	if (colon2 == NULL || (size_t)(d1 - buf) >= sizeof(mech_name))
		return fail(err, errlen,
			    "a secret must read MECHANISM$iterations:salt$StoredKey:ServerKey");
	snprintf(mech_name, sizeof(mech_name), "%.*s", (int)(d1 - buf), buf);
	if (!scram_mech_parse(mech_name, &m))
		return fail(err, errlen, "unknown mechanism (SCRAM-SHA-256 or SCRAM-SHA-1)");
	sec = m == SCRAM_SHA_1 ? &e->sha1 : &e->sha256;
	if (sec->present)
		return fail(err, errlen, "two secrets for one mechanism");
	errno = 0;
	iter = strtoul(d1 + 1, &endp, 10);
	if (endp != colon1 || errno != 0 || iter < SCRAM_MIN_ITERATIONS ||
	    iter > SCRAM_MAX_ITERATIONS)
		return fail(err, errlen, "iterations must be a number in [4096, 10000000]");
	sec->iterations = (uint32_t)iter;
	if (!b64_field(colon1 + 1, (size_t)(d2 - colon1 - 1), sec->salt, sizeof(sec->salt),
		       &sec->salt_len) ||
	    !b64_field(d2 + 1, (size_t)(colon2 - d2 - 1), sec->stored_key, sizeof(sec->stored_key),
		       &kl1) ||
	    !b64_field(colon2 + 1, strlen(colon2 + 1), sec->server_key, sizeof(sec->server_key),
		       &kl2) ||
	    sec->salt_len == 0 || kl1 != scram_hash_len(m) || kl2 != scram_hash_len(m))
		return fail(err, errlen, "bad base64 salt or key (or a key of the wrong length)");
	sec->present = true;
	return true;
}

bool users_parse_line(const char *line, struct users_entry *e, bool *empty, char *err,
		      size_t errlen)
{
	const char *p = line;
	int field = 0;

	memset(e, 0, sizeof(*e));
	*empty = false;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\0' || *p == '#' || *p == '\r') {
		*empty = true;
		return true;
	}
	while (*p != '\0' && *p != '\r') {
		size_t n = strcspn(p, " \t\r");
		bool ok = field == 0 ? parse_name(p, n, e, err, errlen)
				     : parse_secret(p, n, e, err, errlen);

		if (!ok)
			return false;
		field++;
		p += n;
		while (*p == ' ' || *p == '\t')
			p++;
	}
	if (!e->sha1.present && !e->sha256.present)
		return fail(err, errlen, "a user needs at least one secret");
	return true;
}

static bool check_mode(const char *path, FILE *f, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return false;
	}
	if (st.st_mode & 022) {
		snprintf(err, errlen,
			 "%s: writable by group or others (mode %03o): it decides who may log in; "
			 "chmod go-w it",
			 path, (unsigned)(st.st_mode & 0777));
		return false;
	}
	return true;
}

static bool add_entry(struct users_table *t, const struct users_entry *e, size_t *cap)
{
	if (users_find(t, e->db, e->user) != NULL)
		return false;
	if (t->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		t->v = xrealloc(t->v, ncap * sizeof(*t->v));
		*cap = ncap;
	}
	t->v[t->n++] = *e;
	return true;
}

static bool load_lines(const char *path, FILE *f, struct users_table *out, char *err, size_t errlen)
{
	char line[4096], why[256];
	struct users_entry e;
	size_t cap = 0;
	int lineno = 0;
	bool empty;

	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		line[strcspn(line, "\n")] = '\0';
		if (!users_parse_line(line, &e, &empty, why, sizeof(why))) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			return false;
		}
		if (!empty && !add_entry(out, &e, &cap)) {
			snprintf(err, errlen, "%s:%d: %s.%s is listed twice", path, lineno, e.db,
				 e.user);
			return false;
		}
	}
	OPENSSL_cleanse(&e, sizeof(e));
	return true;
}

bool users_load(const char *path, struct users_table *out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	bool ok;

	memset(out, 0, sizeof(*out));
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return false;
	}
	ok = check_mode(path, f, err, errlen) && load_lines(path, f, out, err, errlen);
	fclose(f);
	if (!ok)
		users_free(out);
	return ok;
}

const struct users_entry *users_find(const struct users_table *t, const char *db, const char *user)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->v[i].db, db) == 0 && strcmp(t->v[i].user, user) == 0)
			return &t->v[i];
	return NULL;
}

const struct scram_secret *users_secret(const struct users_entry *e, enum scram_mech m)
{
	const struct scram_secret *s = m == SCRAM_SHA_1 ? &e->sha1 : &e->sha256;

	return s->present ? s : NULL;
}

void users_free(struct users_table *t)
{
	if (t->v != NULL)
		OPENSSL_cleanse(t->v, t->n * sizeof(*t->v));
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

static void format_secret(enum scram_mech m, const struct scram_secret *s, char *out, size_t outlen)
{
	char salt[4 * (SCRAM_MAX_SALT / 3) + 8], k1[64], k2[64];

	scram_b64_encode(s->salt, s->salt_len, salt);
	scram_b64_encode(s->stored_key, scram_hash_len(m), k1);
	scram_b64_encode(s->server_key, scram_hash_len(m), k2);
	snprintf(out, outlen, "%s$%u:%s$%s:%s", scram_mech_name(m), s->iterations, salt, k1, k2);
}

bool users_format_line(const char *dbuser, const char *password, char *out, size_t outlen,
		       char *err, size_t errlen)
{
	struct users_entry e;
	char s256[512], s1[512], name[USERS_DB_MAX + USERS_NAME_MAX + 8];
	bool ok;

	memset(&e, 0, sizeof(e));
	snprintf(name, sizeof(name), "%s%s", strchr(dbuser, '.') ? "" : "admin.", dbuser);
	if (!parse_name(name, strlen(name), &e, err, errlen))
		return false;
	ok = scram_make_secret(SCRAM_SHA_256, e.user, password, 15000, &e.sha256, err, errlen) &&
	     scram_make_secret(SCRAM_SHA_1, e.user, password, 10000, &e.sha1, err, errlen);
	if (ok) {
		format_secret(SCRAM_SHA_256, &e.sha256, s256, sizeof(s256));
		format_secret(SCRAM_SHA_1, &e.sha1, s1, sizeof(s1));
		ok = snprintf(out, outlen, "%s.%s %s %s", e.db, e.user, s256, s1) < (int)outlen;
		if (!ok)
			snprintf(err, errlen, "line too long");
	}
	OPENSSL_cleanse(&e, sizeof(e));
	return ok;
}
