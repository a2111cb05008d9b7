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
