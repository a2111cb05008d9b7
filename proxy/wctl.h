/*
 * wctl.h — the control channel between the master and its workers
 * (workers = N > 1): a socketpair per worker, carrying BSON documents
 * (each framed by its own length). An admin command that must reach every
 * worker (proxy/admin_fan.c) goes from the worker that received it to the
 * master, which runs it on each worker and sends back every answer.
 *
 *   worker ─{op:"fan", id, target, cmd}──▶ master          target -1: all
 *   worker ─{op:"reload", id}────────────▶ master          checks the file, then
 *                                                          fans mongoplexReload
 *   master ─{op:"exec", id, cmd}─────────▶ each worker ─{op:"done", id, reply}─▶ master
 *   master ─{op:"result", id, replies: [{worker, reply} | {worker, error}]}
 *          or {op:"result", id, error} ──▶ the asking worker
 *
 * Rules: messages are at most WCTL_MAX_MSG bytes; a worker answers "exec"
 * synchronously from its loop (admin commands do not wait); the master
 * answers within WCTL_FAN_TIMEOUT_MS with an error for each worker that
 * did not; the asking worker gives up after WCTL_ASK_TIMEOUT_MS.
 */
#pragma once

#include <bson/bson.h>
#include <event2/buffer.h>
#include <stdbool.h>
#include <stdint.h>

#define WCTL_MAX_MSG	    (32 * 1024 * 1024)
#define WCTL_FAN_TIMEOUT_MS 5000
#define WCTL_ASK_TIMEOUT_MS 10000

/* Framing, both sides. Take one whole document from `in` into *doc (the
 * caller destroys it): 1 taken, 0 not complete yet, -1 not a valid frame
 * (the channel is broken: close it). */
int wctl_take(struct evbuffer *in, bson_t **doc);
/* Append `doc` to `out`. */
void wctl_put(struct evbuffer *out, const bson_t *doc);

/* Worker side. The master's end is fd; runs on g.base. */
void wctl_attach(int fd);
/* True in a worker of workers = N > 1 whose channel is open. */
bool wctl_active(void);
/* How a worker runs a command for the master: the admin's table, without
 * authorization (the asking worker checked it); fills *reply (ok or an
 * error document). Set by proxy/admin.c. */
void wctl_set_exec(void (*exec)(const bson_t *cmd, bson_t *reply));
/* Ask the master: op "fan" (cmd on `target`, -1: every worker) or
 * "reload" (cmd NULL). `done` gets the master's result document, or an
 * error document {error} when the channel fails or the time is up; it is
 * called exactly once, never from within wctl_ask. */
void wctl_ask(const char *op, int target, const bson_t *cmd,
	      void (*done)(void *arg, const bson_t *result), void *arg);
/* Fail every question still open (teardown) and close the channel. */
void wctl_stop(void);
