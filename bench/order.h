/*
 * order.h — the order in which mongoplex-bench runs its paths in each
 * repeat: a Williams design, so that over a full period every path runs
 * first equally often AND every path immediately follows every other path
 * equally often. A plain rotation (path k + rep) keeps each path's
 * predecessor fixed, and on this machine the order moved mongoplex's
 * ratio to the relay by several percent (direct, relay, mongoplex
 * rotated: 0.90-0.94; direct, mongoplex, relay: 0.96): a rotation gives
 * one path the same neighbours every time (docs/benchmark-results.md,
 * "Link-time optimisation, and the order of the paths").
 */
#ifndef MONGOPLEX_BENCH_ORDER_H
#define MONGOPLEX_BENCH_ORDER_H

/* Repeats after which the design balances: n for even n, 2n for odd n
 * (each row and its mirror); 1 for n <= 1. */
int bench_order_period(int n);

/* The path indexes 0..n-1 of repeat `rep` (any rep >= 0), in run order. */
void bench_order(int n, int rep, int *out);

#endif
