/*
 * cursor_table.h — the cursor table: which client connection owns which
 * backend cursor (id, namespace), and on which pool it lives. A plain data
 * structure: no requests, no I/O; proxy/cursor.c feeds and reads it.
 */
#pragma once

#include <stdint.h>

struct pool;

/* Record (id, ns) → owner; a later record of the same key moves it (the
 * server handed the id out again). ns "" means "the reply named none". */
void cursor_table_record(uint64_t owner, struct pool *pool, int64_t id, const char *ns);
/* Owner of (id, ns), or of (id, "") when the reply named no namespace;
 * 0 when no client owns it. */
uint64_t cursor_table_owner(int64_t id, const char *ns);
/* The pool (replica set member) a cursor lives on, NULL: unknown. */
struct pool *cursor_table_pool(int64_t id, const char *ns);
/* Forget (id, ns) if `owner` owns it. */
void cursor_table_forget(uint64_t owner, int64_t id, const char *ns);

/* Remove every entry of `owner`, calling cb for each in (pool, ns) order
 * before it goes; returns how many there were. */
typedef void (*cursor_table_cb)(struct pool *pool, const char *ns, int64_t id, void *arg);
int cursor_table_drop_owner(uint64_t owner, cursor_table_cb cb, void *arg);

/* Entries in the table (the cursors_open gauge). */
int cursor_open_count(void);
/* Entries of one owner (mongoplexShow clients). */
int cursor_table_owner_count(uint64_t owner);
