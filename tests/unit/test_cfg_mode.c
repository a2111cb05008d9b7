/*
 * test_cfg_mode.c — octal settings (CFG_MODE, unix_socket_mode): parsed as
 * octal, only permission bits 0..0777, rendered back as four octal digits.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "config/cfg.h"

static void set_ok(const char *text, int64_t want)
{
	struct cfg c;
	char err[CFG_ERR_LEN] = "", buf[32];
	size_t n;
	const struct cfg_key *keys = cfg_keys(&n), *k = NULL;

	for (size_t i = 0; i < n; i++)
		if (strcmp(keys[i].name, "unix_socket_mode") == 0)
			k = &keys[i];
	cr_assert_not_null(k);
	cfg_defaults(&c);
	cr_assert(cfg_set(&c, "unix_socket_mode", text, err, sizeof(err)), "\"%s\": %s", text, err);
	cr_assert_eq(c.unix_socket_mode, want, "\"%s\" -> %lo, expected %lo", text,
		     (long)c.unix_socket_mode, (long)want);
	cfg_format_value(&c, k, buf, sizeof(buf));
	cr_assert_eq(strtol(buf, NULL, 8), want, "\"%s\" rendered as %s", text, buf);
	cr_assert_eq(strlen(buf), 4, "\"%s\" rendered as %s", text, buf);
	cfg_free(&c);
}

static void set_bad(const char *text)
{
	struct cfg c;
	char err[CFG_ERR_LEN] = "";

	cfg_defaults(&c);
	cr_assert_not(cfg_set(&c, "unix_socket_mode", text, err, sizeof(err)),
		      "\"%s\" accepted as %lo", text, (long)c.unix_socket_mode);
	cr_assert_not_null(strstr(err, "unix_socket_mode"), "%s", err);
	cr_assert_eq(c.unix_socket_mode, 0700, "a refused value changed the setting");
	cfg_free(&c);
}

Test(cfg_mode, default_is_0700)
{
	struct cfg c;

	cfg_defaults(&c);
	cr_assert_eq(c.unix_socket_mode, 0700);
	cfg_free(&c);
}

Test(cfg_mode, octal_values)
{
	set_ok("0660", 0660);
	set_ok("660", 0660); /* octal even without the leading 0 */
	set_ok("0", 0);
	set_ok("0777", 0777);
	set_ok("00700", 0700);
	set_ok("0600", 0600);
}

Test(cfg_mode, refused_values)
{
	static const char *const bad[] = {"",	   "0800", "01000", "1777",  "4755", "-1", "+0600",
					  "0x1ff", "rw-",  "0660 ", "0o660", "0778", "9"};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		set_bad(bad[i]);
}
