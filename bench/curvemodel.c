/*
 * curvemodel.c — mongoplex-curvemodel: a MODEL of the user's MongoDB,
 * calibrated to the table of shared/000_6c2d24415accf5c2.txt (or any curve
 * file), never MongoDB itself. A small MongoDB-wire server for the
 * benchmark: it answers _id lookups over a virtual collection and delays
 * each reply so that clients in a closed loop see the curve's throughput
 * (bench/curve.h, bench/cm_conn.h), using almost no CPU.
 *
 *   mongoplex-curvemodel --curve FILE [--port PORT] [--docs N] [--rtt-us N]
 *                        [--max-conns N] [--log-level LEVEL]
 *   mongoplex-curvemodel --curve FILE --print-curve
 *       prints what the model serves at each cell of FILE (its queries/s and
 *       latency at c = threads; bench/calibrate.sh compares with it) and exits
 *
 * The first stdout line is mongodb://127.0.0.1:PORT/ (port 0: a free one);
 * logs go to stderr, the first line saying what this is. SIGHUP re-reads
 * FILE (a bad file keeps the curve in force and logs why); SIGTERM or
 * SIGINT stop it. Not for correctness tests of the proxy: it is a model.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bench/cm.h"
#include "bench/cm_conn.h"
#include "bench/cm_docs.h"
#include "bench/cm_sched.h"
#include "core/log.h"
#include "core/xalloc.h"

struct cm_state cm;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: mongoplex-curvemodel --curve FILE [--port PORT] [--docs N] [--rtt-us N]\n"
	    "                            [--max-conns N] [--log-level error|warning|info|debug]\n"
	    "                            [--timer-slack-us N] [--think-compensation on|off]\n"
	    "\n"
	    "A " CM_LABEL ": a MongoDB-wire server MODELLED on the user's table\n"
	    "(shared/000_6c2d24415accf5c2.txt; bench/curves/seed.csv), for the benchmark only.\n"
	    "Each find on _id is delayed so that closed-loop clients see the curve FILE\n"
	    "(CSV ids,threads,queries_per_second): latency = c / throughput(k ids, c), c = the\n"
	    "queries in service when it arrives (itself included). See bench/README.md.\n"
	    "\n"
	    "  --curve FILE    the curve (required); SIGHUP re-reads it (a bad file keeps the\n"
	    "                  old curve and the log says why)\n"
	    "  --port PORT     127.0.0.1 port, 0 = a free one (default 0); the first stdout\n"
	    "                  line is mongodb://127.0.0.1:PORT/\n"
	    "  --docs N        virtual documents, _id 0..N-1, ~550 bytes each, made on the\n"
	    "                  fly (default 20000000); other ids are simply not found\n"
	    "  --rtt-us N      a fixed network round trip added to every reply (default 0)\n"
	    "  --max-conns N   open connections at most (default 4096)\n"
	    "  --timer-slack-us N  a wake also writes the replies due within N us, at most a\n"
	    "                  fifth of each one's delay (early by that much at most; the\n"
	    "                  wake is set by the running mean error so that replies are on\n"
	    "                  time on average; default 500, 0 = none early)\n"
	    "  --think-compensation on|off  subtract each connection's think time (from its\n"
	    "                  reply being written to its next query arriving, a running mean)\n"
	    "                  from the delay, never below 0, so that a closed-loop client's\n"
	    "                  whole cycle matches the curve (default on; bench/README.md)\n"
	    "  --log-level L   default warning\n"
	    "  --print-curve   print ids,threads,queries_per_second,latency_ms as the model\n"
	    "                  serves each cell of FILE (c = threads) and exit\n"
	    "\n"
	    "Answers hello/isMaster (OP_MSG and legacy OP_QUERY; wire versions 0..21), ping,\n"
	    "buildInfo, find on _id ({_id: v}, $eq, $in; getMore past batchSize or 16 MB),\n"
	    "getMore, killCursors, count, endSessions, curveModelStatus. insert, update,\n"
	    "delete, drop, dropDatabase, create, createIndexes and dropIndexes are ACCEPTED\n"
	    "AND IGNORED (the collection is virtual: every database and collection holds the\n"
	    "same N documents). Anything else: code 59 CommandNotFound. SIGTERM stops it.\n");
}

/* A whole number in [min, max] for option name, or exit 2. */
static int64_t num_arg(const char *name, const char *v, int64_t min, int64_t max)
{
	char *end;
	long long n;

	errno = 0;
	n = v ? strtoll(v, &end, 10) : 0;
	if (!v || errno || end == v || *end || n < min || n > max) {
		fprintf(stderr, "mongoplex-curvemodel: %s wants a whole number from %lld to %lld\n",
			name, (long long)min, (long long)max);
		exit(2);
	}
	return n;
}

static bool print_curve;

static void parse_args(int argc, char **argv, int *port)
{
	cm.docs = 20000000;
	cm.max_conns = 4096;
	cm.slack_us = 500;
	cm.think_comp = true;
	log_current_level = LOG_LVL_WARNING;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--print-curve")) {
			print_curve = true;
			continue;
		} else if (!strcmp(a, "--curve") && v) {
			cm.curve_path = v;
		} else if (!strcmp(a, "--port")) {
			*port = (int)num_arg(a, v, 0, 65535);
		} else if (!strcmp(a, "--docs")) {
			cm.docs = num_arg(a, v, 0, INT64_C(1) << 53);
		} else if (!strcmp(a, "--rtt-us")) {
			cm.rtt_us = num_arg(a, v, 0, 60000000);
		} else if (!strcmp(a, "--timer-slack-us")) {
			cm.slack_us = num_arg(a, v, 0, 100000);
		} else if (!strcmp(a, "--think-compensation") && v &&
			   (!strcmp(v, "on") || !strcmp(v, "off"))) {
			cm.think_comp = !strcmp(v, "on");
		} else if (!strcmp(a, "--max-conns")) {
			cm.max_conns = (int)num_arg(a, v, 1, 1000000);
		} else if (!strcmp(a, "--log-level") && v &&
			   log_parse_level(v, &log_current_level)) {
		} else {
			fprintf(stderr, "mongoplex-curvemodel: bad argument %s\n", a);
			usage(stderr);
			exit(2);
		}
		i++;
	}
	if (!cm.curve_path) {
		fprintf(stderr, "mongoplex-curvemodel: --curve FILE is required\n");
		usage(stderr);
		exit(2);
	}
}

/* --print-curve: the model at every cell of the file (c = its threads). */
static int print_cells(void)
{
	const struct curve *c = cm.curve;

	printf("ids,threads,queries_per_second,latency_ms\n");
	for (int i = 0; i < c->ncells; i++) {
		const struct curve_cell *x = &c->cells[i];

		printf("%d,%d,%.4f,%.4f\n", x->ids, x->threads, curve_qps(c, x->ids, x->threads),
		       curve_latency_s(c, x->ids, x->threads) * 1e3);
	}
	free(cm.curve);
	return 0;
}

/* The curve at (1, 10, 20 ids) x (1, 10, 100 in service), for the log. */
static void log_curve(const char *what)
{
	const struct curve *c = cm.curve;

	log_notice("curve-model: %s %s: %d cells, %d ids columns; queries/s at 1/10/100 in "
		   "service: 1 id %.0f/%.0f/%.0f, 10 ids %.0f/%.0f/%.0f, 20 ids %.0f/%.0f/%.0f",
		   what, cm.curve_path, c->ncells, c->ncols, curve_qps(c, 1, 1),
		   curve_qps(c, 1, 10), curve_qps(c, 1, 100), curve_qps(c, 10, 1),
		   curve_qps(c, 10, 10), curve_qps(c, 10, 100), curve_qps(c, 20, 1),
		   curve_qps(c, 20, 10), curve_qps(c, 20, 100));
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct curve *next = xmalloc(sizeof *next);
	char err[600];

	if (!curve_load_file(cm.curve_path, next, err, sizeof err)) {
		cm.reload_failures++;
		log_error("curve-model: reload failed, keeping the curve in force: %s", err);
		free(next);
		return;
	}
	free(cm.curve); /* replies in flight keep the latency fixed on their arrival */
	cm.curve = next;
	cm.reloads++;
	log_curve("reloaded");
}

static void on_term(evutil_socket_t sig, short what, void *arg)
{
	log_notice("curve-model: signal %d: stopping (%llu queries, %llu commands, at most %d in "
		   "service)",
		   (int)sig, (unsigned long long)cm.queries, (unsigned long long)cm.commands,
		   cm.max_in_service);
	cm.stop = true;
	event_base_loopexit(cm.base, NULL);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	cm_cursor_expire(false);
}

/* Listens on 127.0.0.1:port; sets cm.port. */
static struct evconnlistener *listen_on(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	socklen_t sl = sizeof sin;
	struct evconnlistener *l;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = evconnlistener_new_bind(cm.base, cm_conn_accept, NULL,
				    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
					LEV_OPT_CLOSE_ON_EXEC,
				    1024, (struct sockaddr *)&sin, sizeof sin);
	if (!l)
		fatal("curve-model: cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
	getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&sin, &sl);
	cm.port = ntohs(sin.sin_port);
	return l;
}

/* The event loop: sockets, signals, the cursor sweep. No precise timers
 * (they cost a timerfd_settime per pass): the replies' deadlines are kept
 * by cm_sched.c, which sleeps with clock_nanosleep. */
static struct event_base *make_base(void)
{
	struct event_config *ec = event_config_new();
	struct event_base *b;

	event_config_set_flag(ec, EVENT_BASE_FLAG_NOLOCK);
	b = event_base_new_with_config(ec);
	event_config_free(ec);
	if (!b)
		fatal("curve-model: cannot create the event loop");
	return b;
}

int main(int argc, char **argv)
{
	struct event *sig_hup, *sig_term, *sig_int, *sweep;
	struct timeval minute = {60, 0};
	struct evconnlistener *l;
	char err[600];
	int port = 0;

	parse_args(argc, argv, &port);
	if (print_curve) {
		cm.curve = xmalloc(sizeof *cm.curve);
		if (!curve_load_file(cm.curve_path, cm.curve, err, sizeof err))
			fatal("curve-model: %s", err);
		return print_cells();
	}
	log_notice("mongoplex-curvemodel: " CM_LABEL ", a model calibrated to the user's table "
		   "(shared/000_6c2d24415accf5c2.txt), never MongoDB; for the benchmark only");
	cm.curve = xmalloc(sizeof *cm.curve);
	if (!curve_load_file(cm.curve_path, cm.curve, err, sizeof err))
		fatal("curve-model: %s", err);
	signal(SIGPIPE, SIG_IGN);
	cm.base = make_base();
	l = listen_on(port);
	sig_hup = evsignal_new(cm.base, SIGHUP, on_hup, NULL);
	sig_term = evsignal_new(cm.base, SIGTERM, on_term, NULL);
	sig_int = evsignal_new(cm.base, SIGINT, on_term, NULL);
	sweep = event_new(cm.base, -1, EV_PERSIST, on_sweep, NULL);
	evsignal_add(sig_hup, NULL);
	evsignal_add(sig_term, NULL);
	evsignal_add(sig_int, NULL);
	evtimer_add(sweep, &minute);
	log_curve("curve");
	log_notice("curve-model: listening on 127.0.0.1:%d, docs %lld, rtt-us %lld, max-conns %d, "
		   "timer-slack-us %lld, think-compensation %s",
		   cm.port, (long long)cm.docs, (long long)cm.rtt_us, cm.max_conns,
		   (long long)cm.slack_us, cm.think_comp ? "on" : "off");
	printf("mongodb://127.0.0.1:%d/\n", cm.port);
	fflush(stdout);
	cm_sched_run();
	cm_conn_close_all();
	cm_cursor_expire(true);
	evconnlistener_free(l);
	event_free(sig_hup);
	event_free(sig_term);
	event_free(sig_int);
	event_free(sweep);
	event_base_free(cm.base);
	free(cm.curve);
	return 0;
}
