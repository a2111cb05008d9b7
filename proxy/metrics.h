/*
 * metrics.h — the Prometheus text endpoint (evhttp), off unless
 * metrics_listen is set.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

bool metrics_start(char *err, size_t errlen) __attribute__((warn_unused_result));
void metrics_stop(void);
