/*
 * test_pool_users.c — per-user pools (pool/pool_users.c): one user object
 * per db.user whose keys a newer login replaces; one child pool per (member,
 * user), which names the member and the user and maps back to its member;
 * a user is freed only once unreferenced and its children were empty at
 * this sweep and the one before; no cap (max_backend_conn = 0) always leaves room.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "core/globals.h"
#include "pool/pool.h"
#include "pool/pool_int.h"
#include "pool/pool_ops.h"
#include "pool/pool_users.h"

static void keys_of(struct pool_user_keys *k, uint8_t fill)
{
	memset(k, 0, sizeof(*k));
	k->mech = SCRAM_SHA_256;
	memset(k->client_key, fill, sizeof(k->client_key));
	memset(k->server_key, fill, sizeof(k->server_key));
	memset(k->salt, fill, 16);
	k->salt_len = 16;
	k->iterations = 15000;
}

static void count_cb(struct pool *p, void *arg)
{
	(void)p;
	(*(int *)arg)++;
}

static int children(void)
{
	int n = 0;

	pool_users_foreach(count_cb, &n);
	return n;
}

Test(pool_users, one_user_per_name_and_newer_keys_win)
{
	struct pool_user_keys k1, k2;
	struct pool_user *a, *a2, *b;

	keys_of(&k1, 1);
	keys_of(&k2, 2);
	a = pool_user_get("admin", "ua", &k1);
	a2 = pool_user_get("admin", "ua", &k2);
	b = pool_user_get("app", "ua", &k1);
	cr_assert_eq(a, a2);
	cr_assert_neq(a, b, "another database is another user");
	cr_assert_eq(pool_user_keys(a)->client_key[0], 2, "the newer login's keys");
	cr_assert_str_eq(pool_user_name(a), "ua");
	cr_assert_str_eq(pool_user_db(b), "app");
	pool_user_put(a);
	pool_user_put(a2);
	pool_user_put(b);
	pool_users_sweep();
	pool_users_sweep();
}

Test(pool_users, child_pool_per_member_and_user_freed_when_unused)
{
	struct pool member = {0};
	struct pool_user_keys k;
	struct pool_user *u;
	struct pool *c;

	pool_ops_install(); /* child pools are made through it (pool/pool_ops.h) */
	pool_init(&member, "db1:27017", "db1", 27017);
	keys_of(&k, 3);
	u = pool_user_get("admin", "uc", &k);
	c = pool_users_pool(&member, u);
	cr_assert_eq(pool_users_pool(&member, u), c, "created once");
	cr_assert_eq(c->parent, &member);
	cr_assert_eq(c->user, u);
	cr_assert_eq(pool_member_of(c), &member);
	cr_assert_eq(pool_member_of(&member), &member);
	cr_assert(strstr(c->name, "db1:27017 as admin.uc") != NULL, "%s", c->name);
	cr_assert_eq(pool_users_pool(c, u), c, "a child maps through its member");
	cr_assert_eq(children(), 1);
	pool_users_sweep();
	pool_users_sweep();
	cr_assert_eq(children(), 1, "a referenced user stays");
	pool_user_put(u);
	pool_users_sweep(); /* empty at this sweep and the one before: freed */
	cr_assert_eq(children(), 0, "not freed once unreferenced and empty");
}

Test(pool_users, no_cap_always_has_room)
{
	struct pool member = {0};

	pool_init(&member, "db1:27017", "db1", 27017);
	g.cfg.max_backend_conn = 0;
	cr_assert(pool_cap_room(&member, true));
	cr_assert_not(pool_cap_evicting());
	g.cfg.max_backend_conn = 5;
	cr_assert(pool_cap_room(&member, true), "nothing open: below the cap");
	g.cfg.max_backend_conn = 0;
}
