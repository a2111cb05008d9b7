/*
 * listener.h — the TCP and unix-socket listeners that accept clients.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

bool listener_start(char *err, size_t errlen) __attribute__((warn_unused_result));
void listener_stop(void);
