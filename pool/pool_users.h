/*
 * pool_users.h — per-user backend pools (auth_pool_mode = per_user) and the
 * cap on all backend connections (max_backend_conn).
 *
 * A logged-in client holds a reference to its `struct pool_user`: the
 * user's name, database and the keys recovered from its own SCRAM proof
 * (ClientKey, ServerKey, the backend's salt and iteration count). Under each
 * member pool (struct pool) a user has a child pool, created on first use;
 * the child is an ordinary struct pool whose connections log in as the user
 * with scram_start_keys (pool/auth.c), so the fair queue, batching keys,
 * sticky writes and admission work unchanged within it. Requests carry the
 * user (req->user) and pool_submit maps the member pool to the child.
 *
 * Rules:
 *  - The keys are in memory only: never logged, never in stats; wiped when
 *    the user is freed.
 *  - A user and its child pools are freed by the janitor once no client or
 *    batch references it and every child is empty (no connection, nothing
 *    waiting). Until then child pool pointers stay valid.
 *  - The cursor table and transaction pins record member pools
 *    (pool_member_of), never a child.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/list.h"
#include "core/scram_prim.h"

struct pool;
struct server;

/* What a user's backend connections log in with. */
struct pool_user_keys {
	enum scram_mech mech;
	uint8_t client_key[SCRAM_MAX_HASH];
	uint8_t server_key[SCRAM_MAX_HASH];
	uint8_t salt[SCRAM_MAX_SALT];
	size_t salt_len;
	uint32_t iterations;
};

/* A user (pool_users.c owns it; other files use the accessors below). */
struct pool_user {
	TAILQ_ENTRY(pool_user) link;
	char db[256];
	char user[256];
	struct pool_user_keys keys;
	int refs;
	struct pool **children;
	int nchildren;
};

/* Is auth_pool_mode = per_user in force (and client auth on)? */
bool pool_users_enabled(void);

/* A reference to db.user, created or found; `k` replaces its keys (a newer
 * login wins: e.g. the password changed). */
struct pool_user *pool_user_get(const char *db, const char *user, const struct pool_user_keys *k);
void pool_user_ref(struct pool_user *u);
void pool_user_put(struct pool_user *u);

/* Field reads, inline: no call between files (check-cycles.py). */
static inline const char *pool_user_name(const struct pool_user *u)
{
	return u->user;
}

static inline const char *pool_user_db(const struct pool_user *u)
{
	return u->db;
}

static inline const struct pool_user_keys *pool_user_keys(const struct pool_user *u)
{
	return &u->keys;
}

/* The user's child pool under `member` (created on first use). */
struct pool *pool_users_pool(struct pool *member, struct pool_user *u);

/* The member pool of p (p itself when it is one). */
struct pool *pool_member_of(struct pool *p);

/* Every child pool, for the janitor and the cap; then unreferenced empty
 * users are freed (only from the janitor: free_empty). */
void pool_users_foreach(void (*fn)(struct pool *p, void *arg), void *arg);
void pool_users_sweep(void);

/* Connections of all child pools (connecting + idle + active). */
int pool_users_live(void);

/* max_backend_conn over all pools (member and child). */
int pool_cap_total(void);
/* May p open one more connection? At the cap, with evict, the oldest idle
 * connection of another pool is closed to make room. */
bool pool_cap_room(struct pool *p, bool evict) __attribute__((warn_unused_result));
/* Is an eviction in progress (its pool_server_gone must not reconnect)? */
bool pool_cap_evicting(void);
/* At the cap: pools with waiters and no connection get one (evictions). */
void pool_cap_kick(void);
/* s is about to go idle or take its pool's next request: at the cap, with
 * another pool starved (waiters, no connection) and s's pool holding more
 * than one, s is closed instead (true) so that pool gets in. */
bool pool_cap_retire(struct server *s) __attribute__((warn_unused_result));
/* A connection was opened: keep backend_conn_peak. */
void pool_cap_note_peak(void);
