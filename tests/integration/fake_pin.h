/*
 * fake_pin.h — connection-bound cursors and transactions in the fake
 * backend (fake_pin.c), for the load-balanced pinning tests.
 */
#pragma once

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* Documents per "pin…" cursor (one per batch). */
#define FAKE_PIN_DOCS 4

/* What the fake saw (cumulative for the test process). */
struct fake_pin_stats {
	int finds, finds_closed, getmores_ok, getmores_wrong_conn, getmores_unknown, exhausted;
	int kills_ok, kills_wrong_conn;
	int txn_started, txn_ops_ok, txn_wrong_conn, txn_commits, txn_aborts;
};

void fake_pin_stats(struct fake_pin_stats *out);

/* The fake's thread: answer cmd (first key `name`, first string value
 * `coll`) received on connection `serial` if it is a pinning case;
 * false: not one, *out untouched. *out is initialised already. */
bool fake_pin_reply(int serial, const bson_t *cmd, const char *name, const char *coll, bson_t *out);
