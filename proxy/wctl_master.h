/*
 * wctl_master.h — the master's end of the workers' control channels
 * (proxy/wctl.h says what goes over them), driven by proxy/workers.c's
 * poll loop.
 */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

/* n workers; `check` validates the config file for a console reload
 * (false: *err says why, nothing is sent to the workers). */
void wm_init(int n, bool (*check)(char *err, size_t len));
void wm_fini(void);
/* A new channel for worker i (its old one closed): the worker's end, to
 * hand to the child (-1: none, logged; the worker runs without). */
int wm_open(int i);
/* In a new child: close the master's ends. */
void wm_child(void);
/* Worker i exited (or its channel broke): what it was asked fails. */
void wm_gone(int i);
/* The channels to poll: fills pfd and index (the worker of each), returns
 * how many (at most WORKERS_MAX). */
int wm_pollfds(struct pollfd *pfd, int *index);
/* After poll: read, answer, write, and time out fans. */
void wm_io(const struct pollfd *pfd, const int *index, int n);
