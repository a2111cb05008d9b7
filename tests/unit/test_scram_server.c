/*
 * test_scram_server.c — the proxy's SCRAM server (core/scram_msg.c) and
 * auth_users_file (config/users.c): the RFC 7677 vector played from the
 * server's side (exact server-first and server-final), full conversations
 * with the proxy's own SCRAM client (pool/scram.c) for SHA-1 and SHA-256,
 * wrong passwords and tampered messages refused, the client-message parser's
 * refusals, users-file lines written by --scram-secret read back, malformed
 * lines and group-writable files refused.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/users.h"
#include "core/scram_msg.h"
#include "pool/scram.h"

#define SF(s) (s), strlen(s)

/* The verifier of `password` with a given salt. */
static void secret_for(enum scram_mech m, const char *user, const char *password,
		       const char *salt_b64, uint32_t iter, struct scram_secret *s)
{
	char prepared[256], err[128];
	uint8_t ck[SCRAM_MAX_HASH];

	memset(s, 0, sizeof(*s));
	cr_assert(scram_b64_decode(SF(salt_b64), s->salt, sizeof(s->salt), &s->salt_len));
	s->iterations = iter;
	cr_assert(scram_prepare_password(m, user, password, prepared, sizeof(prepared), err,
					 sizeof(err)));
	cr_assert(scram_derive_keys(m, prepared, s->salt, s->salt_len, iter, ck, s->server_key));
	cr_assert(scram_hash(m, ck, scram_hash_len(m), s->stored_key));
	s->present = true;
}

Test(scram_server, rfc7677_vector_from_the_server_side)
{
	struct scram_client_first cf;
	struct scram_server ss;
	struct scram_secret sec;
	char out[SCRAM_MSG_MAX], err[256];
	const char *first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";

	secret_for(SCRAM_SHA_256, "user", "pencil", "W22ZaJ0SNY7soEsUEjb6gQ==", 4096, &sec);
	cr_assert(scram_msg_parse_first(SF(first), &cf, err, sizeof(err)), "%s", err);
	cr_assert_str_eq(cf.user, "user");
	cr_assert(scram_server_start(&ss, SCRAM_SHA_256, &cf, &sec,
				     "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", out, sizeof(out), err,
				     sizeof(err)),
		  "%s", err);
	cr_assert_str_eq(out, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
			      "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
	cr_assert(scram_server_finish(&ss,
				      SF("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)"
					 "hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
				      out, sizeof(out), err, sizeof(err)),
		  "%s", err);
	cr_assert_str_eq(out, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
	scram_server_clear(&ss);
}

/* The proxy's client against the proxy's server; `client_pw` may differ. */
static bool converse(enum scram_mech m, const char *user, const char *client_pw,
		     const struct scram_secret *sec, char *why, size_t whylen)
{
	struct scram sc;
	struct scram_server ss;
	struct scram_client_first cf;
	char prepared[256], a[SCRAM_MSG_MAX], b[SCRAM_MSG_MAX], err[256];
	bool ok;

	cr_assert(scram_prepare_password(m, user, client_pw, prepared, sizeof(prepared), err,
					 sizeof(err)));
	cr_assert(scram_start(&sc, m, user, prepared, NULL, a, sizeof(a), err, sizeof(err)));
	cr_assert(scram_msg_parse_first(SF(a), &cf, err, sizeof(err)), "%s", err);
	cr_assert_str_eq(cf.user, user);
	cr_assert(scram_server_start(&ss, m, &cf, sec, NULL, b, sizeof(b), err, sizeof(err)));
	cr_assert(scram_client_final(&sc, SF(b), a, sizeof(a), err, sizeof(err)), "%s", err);
	ok = scram_server_finish(&ss, SF(a), b, sizeof(b), why, whylen);
	if (ok)
		cr_assert(scram_verify_final(&sc, SF(b), err, sizeof(err)),
			  "the client refused the server's signature: %s", err);
	scram_clear(&sc);
	scram_server_clear(&ss);
	return ok;
}

Test(scram_server, both_mechanisms_round_trip_and_refuse_a_wrong_password)
{
	enum scram_mech mechs[] = {SCRAM_SHA_1, SCRAM_SHA_256};

	for (size_t i = 0; i < 2; i++) {
		struct scram_secret sec;
		char why[256] = "";

		cr_assert(
		    scram_make_secret(mechs[i], "a,l=ice", "s3cret", 4096, &sec, why, sizeof(why)),
		    "%s", why);
		cr_assert(converse(mechs[i], "a,l=ice", "s3cret", &sec, why, sizeof(why)), "%s: %s",
			  scram_mech_name(mechs[i]), why);
		cr_assert_not(converse(mechs[i], "a,l=ice", "s3cres", &sec, why, sizeof(why)));
		cr_assert(strstr(why, "wrong proof") != NULL, "%s", why);
	}
}

Test(scram_server, tampered_final_messages_are_refused)
{
	struct scram_client_first cf;
	struct scram_server ss;
	struct scram_secret sec;
	char out[SCRAM_MSG_MAX], err[256];
	const char *proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
	const char *bad[] = {
	    "c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,", /* wrong gs2 */
	    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k1,", /* wrong nonce */
	    "c=biws,r=rOprNGfwEbeRWgbNEkqO,",				    /* client nonce only */
	    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,c=biws,", /* order */
	};
	char msg[512];

	secret_for(SCRAM_SHA_256, "user", "pencil", "W22ZaJ0SNY7soEsUEjb6gQ==", 4096, &sec);
	cr_assert(
	    scram_msg_parse_first(SF("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), &cf, err, sizeof(err)));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert(scram_server_start(&ss, SCRAM_SHA_256, &cf, &sec,
					     "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", out, sizeof(out),
					     err, sizeof(err)));
		snprintf(msg, sizeof(msg), "%s%s", bad[i], proof);
		cr_assert_not(scram_server_finish(&ss, SF(msg), out, sizeof(out), err, sizeof(err)),
			      "accepted %s", msg);
	}
	/* One flipped bit of the proof. */
	cr_assert(scram_server_start(&ss, SCRAM_SHA_256, &cf, &sec,
				     "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", out, sizeof(out), err,
				     sizeof(err)));
	cr_assert_not(
	    scram_server_finish(&ss,
				SF("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="
				   "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU="),
				out, sizeof(out), err, sizeof(err)));
	cr_assert(strstr(err, "wrong proof") != NULL, "%s", err);
}

Test(scram_server, client_first_parser_refusals)
{
	const char *bad[] = {
	    "",
	    "n,,",
	    "p=tls-unique,,n=u,r=abc",
	    "n,a=admin,n=u,r=abc",
	    "x,,n=u,r=abc",
	    "n,,r=abc,n=u",
	    "n,,n=,r=abc",
	    "n,,n=u",
	    "n,,n=u,r=",
	    "n,,n=u=ZZ,r=abc",
	    "n,,n=u,r=abc,m=ext",
	    "n,,n=u,r=a,bc",
	    "n,,n=u,r=a b",
	};
	struct scram_client_first cf;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(scram_msg_parse_first(SF(bad[i]), &cf, err, sizeof(err)),
			      "accepted \"%s\"", bad[i]);
	cr_assert(scram_msg_parse_first(SF("y,,n=a=2Cb=3Dc,r=abc,x=ext"), &cf, err, sizeof(err)),
		  "%s", err);
	cr_assert_str_eq(cf.user, "a,b=c");
}

Test(scram_server, client_final_parser_refusals)
{
	const char *bad[] = {
	    "",
	    "c=biws",
	    "c=biws,r=abc",
	    "c=biws,r=abc,p=!!!!",
	    "c=biws,r=abc,p=AAAA,x=1",
	    "r=abc,c=biws,p=AAAA",
	    "c=biws,r=abc,p=",
	};
	struct scram_client_final f;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(scram_msg_parse_final(SF(bad[i]), &f, err, sizeof(err)),
			      "accepted \"%s\"", bad[i]);
	cr_assert(scram_msg_parse_final(SF("c=biws,r=abc,x=1,p=AAAA"), &f, err, sizeof(err)), "%s",
		  err);
	cr_assert_eq(f.without_proof_len, strlen("c=biws,r=abc,x=1"));
	cr_assert_eq(f.proof_len, 3);
}

Test(users, secret_lines_read_back_and_verify)
{
	char line[2048], err[256], why[256];
	struct users_entry e;
	bool empty;

	cr_assert(users_format_line("app.bob", "hunter2", line, sizeof(line), err, sizeof(err)),
		  "%s", err);
	cr_assert(strncmp(line, "app.bob SCRAM-SHA-256$15000:", 28) == 0, "%s", line);
	cr_assert(strstr(line, " SCRAM-SHA-1$10000:") != NULL, "%s", line);
	cr_assert(strstr(line, "hunter2") == NULL);
	cr_assert(users_parse_line(line, &e, &empty, err, sizeof(err)), "%s", err);
	cr_assert_not(empty);
	cr_assert_str_eq(e.db, "app");
	cr_assert_str_eq(e.user, "bob");
	cr_assert(converse(SCRAM_SHA_256, "bob", "hunter2", &e.sha256, why, sizeof(why)), "%s",
		  why);
	cr_assert(converse(SCRAM_SHA_1, "bob", "hunter2", &e.sha1, why, sizeof(why)), "%s", why);
	cr_assert_not(converse(SCRAM_SHA_1, "bob", "hunter3", &e.sha1, why, sizeof(why)));
	/* A plain user name means admin. */
	cr_assert(users_format_line("carol", "pw", line, sizeof(line), err, sizeof(err)));
	cr_assert(strncmp(line, "admin.carol ", 12) == 0, "%s", line);
}

Test(users, malformed_lines_are_refused)
{
	const char *bad[] = {
	    "alice SCRAM-SHA-256$15000:AAAA$AAAA:AAAA",
	    "admin.alice",
	    "admin.alice SCRAM-SHA-512$15000:AAAA$AAAA:AAAA",
	    "admin.alice SCRAM-SHA-1$100:c2FsdA==$AAAAAAAAAAAAAAAAAAAAAAAAAAA=:"
	    "AAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	    "admin.alice SCRAM-SHA-1$10000:c2FsdA==$AAAA:AAAA",
	    "admin.alice SCRAM-SHA-1$10000:c2FsdA==",
	};
	struct users_entry e;
	char err[256];
	bool empty;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_not(users_parse_line(bad[i], &e, &empty, err, sizeof(err)),
			      "accepted \"%s\"", bad[i]);
	cr_assert(users_parse_line("  # comment", &e, &empty, err, sizeof(err)) && empty);
	cr_assert(users_parse_line("", &e, &empty, err, sizeof(err)) && empty);
}

Test(users, load_refuses_group_writable_files_and_duplicates)
{
	char path[] = "/tmp/mp-users-XXXXXX", line[2048], err[512];
	struct users_table t;
	int fd = mkstemp(path);
	FILE *f;

	cr_assert(fd >= 0);
	f = fdopen(fd, "w");
	cr_assert(users_format_line("admin.a", "pw", line, sizeof(line), err, sizeof(err)));
	fprintf(f, "# users\n%s\n", line);
	cr_assert(users_format_line("db2.a", "pw", line, sizeof(line), err, sizeof(err)));
	fprintf(f, "%s\n", line);
	fclose(f);
	chmod(path, 0600);
	cr_assert(users_load(path, &t, err, sizeof(err)), "%s", err);
	cr_assert_eq(t.n, 2);
	cr_assert(users_find(&t, "db2", "a") != NULL);
	cr_assert(users_find(&t, "admin", "b") == NULL);
	users_free(&t);
	chmod(path, 0620);
	cr_assert_not(users_load(path, &t, err, sizeof(err)));
	cr_assert(strstr(err, "writable by group or others") != NULL, "%s", err);
	chmod(path, 0600);
	f = fopen(path, "a");
	fprintf(f, "%s\n", line);
	fclose(f);
	cr_assert_not(users_load(path, &t, err, sizeof(err)));
	cr_assert(strstr(err, ":4: db2.a is listed twice") != NULL, "%s", err);
	unlink(path);
}

/* Per-user backend logins: the ClientKey recovered from a client's proof
 * logs in to a server holding the same verifier (the RFC 7677 exchange is
 * reproduced byte for byte), and a server with another salt is refused. */
Test(scram_server, recovered_client_key_logs_in_without_the_password)
{
	struct scram_client_first cf;
	struct scram_server ss;
	struct scram_secret sec, other;
	struct scram sc;
	char out[SCRAM_MSG_MAX], err[256];
	uint8_t client_key[SCRAM_MAX_HASH];
	const char *final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="
			    "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";

	secret_for(SCRAM_SHA_256, "user", "pencil", "W22ZaJ0SNY7soEsUEjb6gQ==", 4096, &sec);
	cr_assert(
	    scram_msg_parse_first(SF("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), &cf, err, sizeof(err)));
	cr_assert(scram_server_start(&ss, SCRAM_SHA_256, &cf, &sec,
				     "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", out, sizeof(out), err,
				     sizeof(err)));
	cr_assert(scram_server_finish(&ss, SF(final), out, sizeof(out), err, sizeof(err)), "%s",
		  err);
	memcpy(client_key, ss.client_key, sizeof(client_key));
	scram_server_clear(&ss);
	/* The proxy as the user's backend client, with keys only. */
	cr_assert(scram_start_keys(&sc, SCRAM_SHA_256, "user", client_key, sec.server_key, sec.salt,
				   sec.salt_len, 4096, "rOprNGfwEbeRWgbNEkqO", out, sizeof(out),
				   err, sizeof(err)),
		  "%s", err);
	cr_assert_str_eq(out, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
	cr_assert(scram_client_final(&sc,
				     SF("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s="
					"W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"),
				     out, sizeof(out), err, sizeof(err)),
		  "%s", err);
	cr_assert_str_eq(out, final);
	cr_assert(scram_verify_final(&sc, SF("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="), err,
				     sizeof(err)),
		  "%s", err);
	scram_clear(&sc);
	/* The backend's verifier has another salt (the password was changed). */
	secret_for(SCRAM_SHA_256, "user", "pencil", "QSXCR+Q6sek8bf92", 4096, &other);
	cr_assert(scram_start_keys(&sc, SCRAM_SHA_256, "user", client_key, sec.server_key, sec.salt,
				   sec.salt_len, 4096, NULL, out, sizeof(out), err, sizeof(err)));
	cr_assert(scram_msg_parse_first(SF(out), &cf, err, sizeof(err)));
	cr_assert(scram_server_start(&ss, SCRAM_SHA_256, &cf, &other, NULL, out, sizeof(out), err,
				     sizeof(err)));
	cr_assert_not(scram_client_final(&sc, SF(out), out, sizeof(out), err, sizeof(err)));
	cr_assert(strstr(err, "the user's secret changed") != NULL, "%s", err);
	scram_clear(&sc);
	scram_server_clear(&ss);
}
