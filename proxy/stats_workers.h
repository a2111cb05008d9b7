/*
 * stats_workers.h — the Prometheus families of workers = N > 1, per worker
 * and labelled worker="i", from the shared slots (core/wstats.h): counters,
 * restarts, and every worker's pools as it last published them.
 */
#pragma once

#include <event2/buffer.h>
#include <stddef.h>

/* Append the per-worker families (nothing without workers). */
void stats_workers_prom(struct evbuffer *out);
/* A Prometheus label value with backslash, double quote and newline
 * escaped (member names come from the backends' hello host lists). */
void stats_label_value(char *buf, size_t len, const char *v);
