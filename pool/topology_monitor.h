/*
 * topology_monitor.h — the monitor thread of pool/topology.c (inside pool/
 * only: topology.c is its one user). It keeps the shared snapshot under its
 * own mutex and pokes the loop by writing a byte to `fd`.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "pool/topology.h"

/* Start the thread monitoring `uri` (copied); false: it could not start. */
bool topo_monitor_start(const char *uri, int fd, int64_t heartbeat_ms);
/* Stop it and wait for it. */
void topo_monitor_stop(void);
/* Ask for an immediate recheck (logged once until it runs). */
void topo_monitor_recheck(const char *why);
/* Copy the shared snapshot and SRV state (the loop side, on a poke). */
void topo_monitor_copy(struct topo_snapshot *snap, struct topo_srv *srv);
/* Rechecks run so far. */
uint64_t topo_monitor_rechecks(void);
