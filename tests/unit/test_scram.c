/*
 * test_scram.c — SCRAM client messages against the published vectors
 * (RFC 5802 SCRAM-SHA-1, RFC 7677 SCRAM-SHA-256, the MongoDB auth spec's
 * SCRAM-SHA-1 with the MD5 password digest), refusal of servers that cannot
 * prove the password or weaken the exchange, the salted-password cache, and
 * the password-file / URI-redaction helpers.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/secret.h"
#include "pool/scram.h"

#define SF(s) (s), strlen(s)

static void conversation(enum scram_mech m, const char *prepared, const char *nonce,
			 const char *server_first, const char *want_final, const char *server_final)
{
	struct scram sc;
	char out[SCRAM_MSG_MAX], err[256], want_first[128];

	cr_assert(scram_start(&sc, m, "user", prepared, nonce, out, sizeof(out), err, sizeof(err)),
		  "%s", err);
	snprintf(want_first, sizeof(want_first), "n,,n=user,r=%s", nonce);
	cr_assert_str_eq(out, want_first);
	cr_assert(scram_client_final(&sc, SF(server_first), out, sizeof(out), err, sizeof(err)),
		  "%s", err);
	cr_assert_str_eq(out, want_final);
	cr_assert(scram_verify_final(&sc, SF(server_final), err, sizeof(err)), "%s", err);
	scram_clear(&sc);
}

#define RFC7677_FIRST                                                                              \
	"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"

Test(scram, rfc7677_sha256_vector)
{
	conversation(SCRAM_SHA_256, "pencil", "rOprNGfwEbeRWgbNEkqO", RFC7677_FIRST,
		     "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
		     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		     "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

Test(scram, rfc5802_sha1_vector)
{
	/* RFC 5802 uses the plain password (no MongoDB digest). */
	conversation(
	    SCRAM_SHA_1, "pencil", "fyko+d2lbbFgONRv9qkxdawL",
	    "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
	    "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
	    "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=");
}

Test(scram, mongodb_spec_sha1_vector_with_md5_digest)
{
	char prepared[64], err[128];

	cr_assert(scram_prepare_password(SCRAM_SHA_1, "user", "pencil", prepared, sizeof(prepared),
					 err, sizeof(err)));
	conversation(SCRAM_SHA_1, prepared, "fyko+d2lbbFgONRv9qkxdawL",
		     "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,"
		     "s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000",
		     "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,"
		     "p=MC2T8BvbmWRckDw8oWl5IVghwCY=",
		     "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=");
}

Test(scram, mongodb_spec_sha256_vector_with_saslprep)
{
	char prepared[64], err[128];

	cr_assert(scram_prepare_password(SCRAM_SHA_256, "user", "pencil", prepared,
					 sizeof(prepared), err, sizeof(err)));
	cr_assert_str_eq(prepared, "pencil");
	conversation(SCRAM_SHA_256, prepared, "rOprNGfwEbeRWgbNEkqO", RFC7677_FIRST,
		     "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
		     "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		     "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
}

Test(scram, saslprep_maps_and_refuses)
{
	char out[64], err[128];

	/* RFC 4013 examples: soft hyphen removed, non-ASCII space mapped to space. */
	cr_assert(scram_prepare_password(SCRAM_SHA_256, "u",
					 "I\xc2\xad"
					 "X",
					 out, sizeof(out), err, sizeof(err)));
	cr_assert_str_eq(out, "IX");
	cr_assert(scram_prepare_password(SCRAM_SHA_256, "u",
					 "a\xe2\x80\x80"
					 "b",
					 out, sizeof(out), err, sizeof(err)));
	cr_assert_str_eq(out, "a b");
	/* A prohibited control character. */
	cr_assert_not(scram_prepare_password(SCRAM_SHA_256, "u", "a\x07", out, sizeof(out), err,
					     sizeof(err)));
}

Test(scram, username_is_escaped)
{
	struct scram sc;
	char out[256], err[128];

	cr_assert(scram_start(&sc, SCRAM_SHA_256, "a,b=c", "p", "NONCE", out, sizeof(out), err,
			      sizeof(err)));
	cr_assert_str_eq(out, "n,,n=a=2Cb=3Dc,r=NONCE");
}

Test(scram, random_nonce_is_fresh)
{
	struct scram a, b;
	char out1[256], out2[256], err[128];

	cr_assert(
	    scram_start(&a, SCRAM_SHA_256, "u", "p", NULL, out1, sizeof(out1), err, sizeof(err)));
	cr_assert(
	    scram_start(&b, SCRAM_SHA_256, "u", "p", NULL, out2, sizeof(out2), err, sizeof(err)));
	cr_assert_eq(strlen(a.client_nonce), 32);
	cr_assert_str_neq(a.client_nonce, b.client_nonce);
}

/* Start the RFC 7677 conversation and return the client-final verdict. */
static bool sha256_final(struct scram *sc, const char *server_first, char *err, size_t errlen)
{
	char out[SCRAM_MSG_MAX];

	cr_assert(scram_start(sc, SCRAM_SHA_256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO", out,
			      sizeof(out), err, errlen));
	return scram_client_final(sc, SF(server_first), out, sizeof(out), err, errlen);
}

Test(scram, bad_server_signature_is_refused)
{
	struct scram sc;
	char err[256];

	cr_assert(sha256_final(&sc, RFC7677_FIRST, err, sizeof(err)), "%s", err);
	cr_assert_not(scram_verify_final(&sc, SF("v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
					 err, sizeof(err)));
	cr_assert(strstr(err, "signature") != NULL, "%s", err);
	cr_assert_not(scram_verify_final(&sc, SF("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4"),
					 err, sizeof(err)),
		      "a truncated signature must not pass");
	cr_assert_not(scram_verify_final(&sc, SF("e=invalid-proof"), err, sizeof(err)));
	cr_assert(strstr(err, "invalid-proof") != NULL, "%s", err);
	cr_assert_not(scram_verify_final(&sc, SF(""), err, sizeof(err)));
}

Test(scram, weak_or_malformed_server_first_is_refused)
{
	static const char *const bad[] = {
	    /* nonce does not extend ours */
	    "r=XXXXNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i="
	    "4096",
	    /* nonce not extended at all */
	    "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
	    /* iteration count below the spec minimum, and absurdly high */
	    "r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095",
	    "r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999",
	    /* missing salt / iterations, bad base64, mandatory extension, garbage */
	    "r=rOprNGfwEbeRWgbNEkqOxyz,i=4096",
	    "r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==",
	    "r=rOprNGfwEbeRWgbNEkqOxyz,s=!!!!,i=4096",
	    /* '=' inside the salt, not as padding (found by fuzz_scram_client) */
	    "r=rOprNGfwEbeRWgbNEkqOxyz,s=eA=5,i=4096",
	    "r=rOprNGfwEbeRWgbNEkqOxyz,s=W2=ZaJ0SNY7soEsUEjb6gQ==,i=4096",
	    "r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6g=A=,i=4096",
	    "m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
	    "garbage",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct scram sc;
		char err[256];

		cr_assert_not(sha256_final(&sc, bad[i], err, sizeof(err)), "accepted: %s", bad[i]);
	}
}

Test(scram, pbkdf2_runs_once_per_salt)
{
	struct scram sc;
	char err[256];
	uint64_t before;

	scram_cache_flush();
	before = scram_pbkdf2_runs();
	for (int i = 0; i < 100; i++) {
		cr_assert(sha256_final(&sc, RFC7677_FIRST, err, sizeof(err)), "%s", err);
		cr_assert_eq(sc.computed_pbkdf2, i == 0);
	}
	cr_assert_eq(scram_pbkdf2_runs() - before, 1);
	/* Another salt (or password) is another derivation. */
	cr_assert(sha256_final(&sc, "r=rOprNGfwEbeRWgbNEkqOxyz,s=QSXCR+Q6sek8bf92,i=4096", err,
			       sizeof(err)));
	cr_assert_eq(scram_pbkdf2_runs() - before, 2);
}

Test(secret, redact_uri)
{
	char out[256];

	secret_redact_uri("mongodb://u:s3cret@h:1,h2:2/db?authSource=admin", out, sizeof(out));
	cr_assert_str_eq(out, "mongodb://u:***@h:1,h2:2/db?authSource=admin");
	secret_redact_uri("mongodb://u:p@ss@h/", out, sizeof(out));
	cr_assert_str_eq(out, "mongodb://u:***@h/");
	secret_redact_uri("mongodb://h:27017/", out, sizeof(out));
	cr_assert_str_eq(out, "mongodb://h:27017/");
	secret_redact_uri("mongodb://user@h/", out, sizeof(out));
	cr_assert_str_eq(out, "mongodb://user@h/");
	secret_redact_uri("127.0.0.1", out, sizeof(out));
	cr_assert_str_eq(out, "127.0.0.1");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	cr_assert(f != NULL);
	fputs(text, f);
	fclose(f);
	cr_assert(chmod(path, mode) == 0);
}

Test(secret, password_file_rules)
{
	char path[] = "/tmp/mp_pwfile_XXXXXX", out[64], warn[256], err[256];
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	close(fd);
	write_file(path, "hunter2\n", 0600);
	cr_assert(secret_read_file(path, out, sizeof(out), warn, sizeof(warn), err, sizeof(err)),
		  "%s", err);
	cr_assert_str_eq(out, "hunter2");
	cr_assert_str_eq(warn, "");
	write_file(path, "hunter2", 0644);
	cr_assert(secret_read_file(path, out, sizeof(out), warn, sizeof(warn), err, sizeof(err)));
	cr_assert_str_eq(out, "hunter2");
	cr_assert(strstr(warn, "readable by every user") != NULL, "%s", warn);
	write_file(path, "hunter2\n", 0620);
	cr_assert_not(
	    secret_read_file(path, out, sizeof(out), warn, sizeof(warn), err, sizeof(err)));
	cr_assert(strstr(err, "writable by group or others") != NULL, "%s", err);
	cr_assert(strstr(err, "hunter2") == NULL);
	write_file(path, "\n", 0600);
	cr_assert_not(
	    secret_read_file(path, out, sizeof(out), warn, sizeof(warn), err, sizeof(err)));
	write_file(path, "two\nlines\n", 0600);
	cr_assert_not(
	    secret_read_file(path, out, sizeof(out), warn, sizeof(warn), err, sizeof(err)));
	unlink(path);
	cr_assert_not(
	    secret_read_file(path, out, sizeof(out), warn, sizeof(warn), err, sizeof(err)));
}
