/*
 * stats_report.h — mongoplexStats and /metrics renderings of the counters,
 * gauges, pools and histograms.
 */
#pragma once

#include <bson/bson.h>
#include <event2/buffer.h>

/* The whole picture: counters, gauges, pools, histograms. */
void stats_to_bson(bson_t *out);
void stats_to_prometheus(struct evbuffer *out);
/* workers > 1: publish this worker's gauges and histograms into its shared
 * slot (the janitor, every tick), so that any worker can report the whole
 * proxy's; nothing with one worker. */
void stats_publish(void);

struct pool;
/* A pool's member type: the monitor's (replica sets), else the kind its last
 * hello reported (also mongoplexShow pools). */
const char *stats_member_type(const struct pool *p);
/* Shown per member: every pool but the unresolved mongodb+srv:// placeholder. */
bool stats_pool_shown(const struct pool *p);
