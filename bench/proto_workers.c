/*
 * proto_workers.c — mongoplex-proto-workers: a PROTOTYPE built for one
 * measurement only (issue 25: threads or processes behind one port;
 * bench/threads_vs_procs.sh), NOT the product. A deliberately small
 * MongoDB-wire forwarding proxy: no TLS, auth, compression, sessions,
 * cursors, batching, timeouts or reconnects (a lost backend connection fails
 * its client and is counted as an error; losing them all is fatal).
 *
 *   mongoplex-proto-workers (--threads N | --procs N) --backend HOST:PORT
 *                           [--listen PORT] [--pool-size N] [--log-level L]
 *
 * One request (transaction-level pooling, as mongoplex: a backend connection
 * is held for one request/reply exchange):
 *
 *   client bytes -- frame (core/wire.h) --> pool_take --free--> exchange_start
 *                                              | none free       requestID := the loop's own,
 *                                              v                 written to the backend
 *                                     pool->waiters (FIFO of           |
 *                                     every loop's clients)      the reply, framed
 *                                              ^                 responseTo := the client's id
 *                                              |                       v
 *                                        pool_release <-------- exchange_end: reply to the
 *                                                               client, counted
 *   The oldest waiter gets the released connection: on this loop its exchange
 *   starts at once; on another thread's loop the client goes to that loop's
 *   inbox and the loop is woken through its pipe (once per batch of grants).
 *
 * Both modes run this code and differ only in what issue 25 compares:
 *   --threads N  N pthreads, each its own event_base and SO_REUSEPORT listener
 *                on the one port; ONE pool of --pool-size connections shared
 *                by all under a mutex (what a threaded proxy that keeps the
 *                process-wide limits exactly needs); a released connection
 *                leaves its loop's epoll and joins the epoll of the loop that
 *                takes it next; the counters are one slot shared by all
 *                threads (atomics).
 *   --procs N    N forked processes (proxy/workers.c's shape), each one loop
 *                and listener with its own pool of ceil(pool-size / N)
 *                connections: no lock is taken, connections stay in their
 *                loop's epoll; a counter slot per process.
 *
 * stdout: the first line is mongodb://127.0.0.1:PORT/ once every loop listens
 * (--listen 0: a free port); on SIGUSR1 and at exit one line "counters:
 * requests=R errors=E waits=W handoffs=H migrations=M contended=L", summed over
 * the slots (contended: the shared pool's lock found taken by another thread).
 * Logs go to stderr. SIGTERM/SIGINT stop every thread or child (exit 0); a
 * child that dies stops the others (exit 1). Signals are read synchronously by
 * the main thread (sigwaitinfo): no work runs in a handler.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/list.h"
#include "core/log.h"
#include "core/wire.h"
#include "core/xalloc.h"

#define PROTO_LABEL "PROTOTYPE for the threads-vs-processes measurement (issue 25), not mongoplex"
#define MAX_LOOPS   64

/* The counters, declared once: a slot's fields and the counters line. */
#define PROTO_COUNTERS(X)                                                                          \
	X(requests)   /* replies delivered to clients */                                           \
	X(errors)     /* clients failed, backend connections lost */                               \
	X(waits)      /* requests that found no free connection */                                 \
	X(handoffs)   /* connections granted to a waiter of another loop */                        \
	X(migrations) /* connections attached to a loop other than their last */                   \
	X(contended)  /* the pool lock found held by another thread */

/* One slot of counters: the threads all count in slot 0, each process in its own. */
struct slot {
#define SLOT_FIELD(name) _Atomic uint64_t name;
	PROTO_COUNTERS(SLOT_FIELD)
#undef SLOT_FIELD
} __attribute__((aligned(64)));

#define COUNT(l, field) atomic_fetch_add_explicit(&(l)->slot->field, 1, memory_order_relaxed)

/*
 * A client connection, owned by its loop. CL_IDLE: no request in progress.
 * CL_QUEUED: its request waits on pool->waiters (conn NULL) or, granted a
 * connection by another loop, on its loop's inbox (conn set); both lists and
 * conn are under the pool lock while queued. CL_ACTIVE: its exchange runs on
 * conn. One request at a time: later ones stay in the input buffer. A client
 * closing while ACTIVE or on the inbox is marked closing and freed when the
 * connection comes back.
 */
enum cstate { CL_IDLE, CL_QUEUED, CL_ACTIVE };
struct client {
	struct loop *loop;
	struct bufferevent *bev;
	enum cstate state;
	bool closing;
	int32_t req_len, req_id; /* the request in progress: length, the client's requestID */
	struct bconn *conn;
	TAILQ_ENTRY(client) link; /* pool->waiters or loop->inbox */
};
TAILQ_HEAD(clist, client);

/*
 * A backend connection: on pool->idle between exchanges (owner NULL), else
 * held by its owner's exchange. Its events are in the epoll of `loop` (NULL:
 * none; a shared pool's connections are in none between exchanges). `last`
 * is the loop of its previous exchange.
 */
struct bconn {
	int fd;
	struct loop *loop, *last;
	struct event rd, wr;
	struct evbuffer *in, *out;
	struct client *owner;
	int32_t sent_id;
	TAILQ_ENTRY(bconn) link; /* pool->idle */
};

/* A pool: one for every thread (shared: all fields under mu) or one per process (no lock). */
struct pool {
	bool shared;
	pthread_mutex_t mu;
	TAILQ_HEAD(, bconn) idle; /* free connections, the last released first */
	struct clist waiters;	  /* queued clients of every loop, oldest first */
	int open;		  /* connections alive */
};

/* One event loop: a thread's (--threads) or a process's (--procs). */
struct loop {
	int id;
	struct event_base *base;
	struct pool *pool;
	struct slot *slot;
	int wake[2]; /* pipe: 'q' from main (stop), 'w' from other loops (inbox) */
	struct event wake_ev;
	struct clist inbox; /* clients granted a connection by another loop (pool lock) */
	bool woken;	    /* a 'w' is in the pipe and the inbox not yet taken (pool lock) */
	int32_t next_id;
	pthread_t thread;
	pid_t pid; /* --procs: the child, 0 once it has exited */
};

/* The settings and what main shares with the loops (read-only once they run). */
static struct {
	bool procs;
	int n, port, pool_size;
	struct sockaddr_storage backend;
	socklen_t backend_len;
	struct loop loops[MAX_LOOPS];
	struct slot *slots; /* a MAP_SHARED mapping: the master sums the children's */
	int ready[2];	    /* pipe: each loop writes one byte once it listens */
} P;

static void conn_read_cb(evutil_socket_t fd, short what, void *arg);
static void conn_write_cb(evutil_socket_t fd, short what, void *arg);
static void exchange_start(struct client *c);
static void client_close(struct client *c, const char *why, bool error);

/* The pool lock, taken by loop l: only a shared pool has one (a failed trylock is counted). */
static void pool_lock(struct loop *l)
{
	if (!l->pool->shared || pthread_mutex_trylock(&l->pool->mu) == 0)
		return;
	COUNT(l, contended);
	pthread_mutex_lock(&l->pool->mu);
}

static void pool_unlock(struct loop *l)
{
	if (l->pool->shared)
		pthread_mutex_unlock(&l->pool->mu);
}

static void loop_wake(struct loop *l, char what)
{
	if (write(l->wake[1], &what, 1) != 1)
		fatal("proto: cannot wake loop %d: %s", l->id, strerror(errno));
}

/* A framed message at the head of `in`: NEED_MORE, READY (*len bytes) or BAD. */
static enum wire_frame frame(struct evbuffer *in, int32_t *len)
{
	size_t avail = evbuffer_get_length(in);

	if (avail < WIRE_HEADER_LEN)
		return WIRE_FRAME_NEED_MORE;
	return wire_frame_check(evbuffer_pullup(in, WIRE_HEADER_LEN), avail, len);
}

static int backend_connect(void)
{
	int one = 1, fd = socket(P.backend.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&P.backend, P.backend_len) != 0)
		fatal("proto: cannot connect to the backend: %s", strerror(errno));
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0 ||
	    evutil_make_socket_nonblocking(fd) != 0)
		fatal("proto: backend socket options: %s", strerror(errno));
	return fd;
}

/* size connections, connected now (blocking), all idle and in no loop. */
static void pool_open(struct pool *p, int size, bool shared)
{
	p->shared = shared;
	pthread_mutex_init(&p->mu, NULL);
	TAILQ_INIT(&p->idle);
	TAILQ_INIT(&p->waiters);
	for (int i = 0; i < size; i++) {
		struct bconn *b = xcalloc(1, sizeof(*b));

		b->fd = backend_connect();
		b->in = xevbuffer_new();
		b->out = xevbuffer_new();
		TAILQ_INSERT_TAIL(&p->idle, b, link);
	}
	p->open = size;
}

/* b's events join l's epoll (a no-op when they are there already). */
static void conn_attach(struct bconn *b, struct loop *l)
{
	if (b->loop == l)
		return;
	if (b->last && b->last != l)
		COUNT(l, migrations);
	event_assign(&b->rd, l->base, b->fd, EV_READ | EV_PERSIST, conn_read_cb, b);
	event_assign(&b->wr, l->base, b->fd, EV_WRITE, conn_write_cb, b);
	if (event_add(&b->rd, NULL) != 0)
		fatal("proto: event_add of a backend connection failed");
	b->loop = b->last = l;
}

/* b's events leave its loop's epoll: from then on any loop may attach it. */
static void conn_detach(struct bconn *b)
{
	if (!b->loop)
		return;
	event_del(&b->rd);
	event_del(&b->wr);
	b->loop = NULL;
}

/* c's request gets a free connection (c->conn set: true), or c is queued. */
static bool pool_take(struct loop *l, struct client *c)
{
	struct pool *p = l->pool;
	struct bconn *b;

	pool_lock(l);
	b = TAILQ_FIRST(&p->idle);
	if (b) {
		TAILQ_REMOVE(&p->idle, b, link);
		c->conn = b;
	} else {
		TAILQ_INSERT_TAIL(&p->waiters, c, link);
	}
	pool_unlock(l);
	if (!b)
		COUNT(l, waits);
	return b != NULL;
}

/* b's exchange is over: to the oldest waiter (here or on another loop), else idle. */
static void pool_release(struct loop *l, struct bconn *b)
{
	struct pool *p = l->pool;
	struct client *w;
	struct loop *to = NULL;
	bool wake = false;

	if (p->shared)
		conn_detach(b); /* its next exchange may run on another thread's loop */
	pool_lock(l);
	w = TAILQ_FIRST(&p->waiters);
	if (!w) {
		TAILQ_INSERT_HEAD(&p->idle, b, link);
	} else {
		TAILQ_REMOVE(&p->waiters, w, link);
		w->conn = b;
		to = w->loop;
		if (to != l) {
			TAILQ_INSERT_TAIL(&to->inbox, w, link);
			wake = !to->woken;
			to->woken = true;
		}
	}
	pool_unlock(l);
	if (to == l) {
		exchange_start(w);
	} else if (to) {
		COUNT(l, handoffs);
		if (wake)
			loop_wake(to, 'w');
	}
}

static void client_free(struct client *c)
{
	bufferevent_free(c->bev);
	free(c);
}

/* b cannot be used any more: closed, its client failed; losing the last one is fatal. */
static void conn_lost(struct bconn *b, const char *why)
{
	struct loop *l = b->loop;
	struct client *c = b->owner;
	int left;

	log_error("proto: loop %d: backend connection lost: %s", l->id, why);
	COUNT(l, errors);
	conn_detach(b);
	pool_lock(l);
	if (!c) /* --procs: an idle connection's event fired */
		TAILQ_REMOVE(&l->pool->idle, b, link);
	left = --l->pool->open;
	pool_unlock(l);
	close(b->fd);
	evbuffer_free(b->in);
	evbuffer_free(b->out);
	free(b);
	if (c) {
		c->conn = NULL;
		c->state = CL_IDLE;
		if (c->closing)
			client_free(c);
		else
			client_close(c, "its backend connection was lost", false);
	}
	if (left == 0)
		fatal("proto: every backend connection is lost");
}

/* b's pending request bytes to the socket; the rest when it is writable. */
static void conn_flush(struct bconn *b)
{
	if (evbuffer_write(b->out, b->fd) < 0 && errno != EAGAIN && errno != EINTR) {
		conn_lost(b, strerror(errno));
		return;
	}
	if (evbuffer_get_length(b->out) && event_add(&b->wr, NULL) != 0)
		fatal("proto: event_add of a backend write failed");
}

/* c's request goes out on c->conn under this loop's requestID. */
static void exchange_start(struct client *c)
{
	struct loop *l = c->loop;
	struct bconn *b = c->conn;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	uint8_t *m = evbuffer_pullup(in, c->req_len);
	size_t len = (size_t)c->req_len, out = len;

	conn_attach(b, l);
	c->state = CL_ACTIVE;
	b->owner = c;
	c->req_id = wire_read_i32(m + 4);
	l->next_id = l->next_id == INT32_MAX ? 1 : l->next_id + 1;
	b->sent_id = l->next_id;
	wire_write_i32(m + 4, b->sent_id);
	if (wire_read_i32(m + 12) == OP_MSG)
		out = wire_msg_prepare_forward(m, len); /* no checksum (the id changed) */
	evbuffer_remove_buffer(in, b->out, out);
	evbuffer_drain(in, len - out);
	conn_flush(b);
}

/* The next request of c, when one is complete and none is in progress. */
static void client_input(struct client *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	enum wire_frame f;
	int32_t len = 0, op;
	uint8_t *m;

	if (c->state != CL_IDLE || (f = frame(in, &len)) == WIRE_FRAME_NEED_MORE)
		return;
	if (f == WIRE_FRAME_BAD) {
		client_close(c, "bad message length", true);
		return;
	}
	m = evbuffer_pullup(in, len);
	op = wire_read_i32(m + 12);
	if (op != OP_QUERY &&
	    (op != OP_MSG || len < 21 || (wire_read_i32(m + 16) & (int32_t)MSG_MORE_TO_COME))) {
		client_close(c, "not an OP_QUERY or acknowledged OP_MSG (prototype)", true);
		return;
	}
	c->req_len = len;
	c->state = CL_QUEUED;
	if (pool_take(c->loop, c))
		exchange_start(c);
}

/* The reply of b's exchange goes to its client; b goes back to the pool. */
static void exchange_end(struct bconn *b, int32_t len)
{
	struct client *c = b->owner;
	struct loop *l = b->loop;
	uint8_t *m = evbuffer_pullup(b->in, WIRE_HEADER_LEN);

	if (wire_read_i32(m + 8) != b->sent_id || evbuffer_get_length(b->in) != (size_t)len) {
		conn_lost(b, "a reply to another request, or more than one reply");
		return;
	}
	wire_write_i32(m + 8, c->req_id);
	if (c->closing)
		evbuffer_drain(b->in, len);
	else
		evbuffer_remove_buffer(b->in, bufferevent_get_output(c->bev), len);
	COUNT(l, requests);
	b->owner = NULL;
	c->conn = NULL;
	c->state = CL_IDLE;
	pool_release(l, b);
	if (c->closing)
		client_free(c);
	else
		client_input(c);
}

static void conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bconn *b = arg;
	int n = evbuffer_read(b->in, fd, -1);
	int32_t len = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		conn_lost(b, n ? strerror(errno) : "closed by the backend");
		return;
	}
	if (!b->owner) {
		conn_lost(b, "bytes with no request in progress");
		return;
	}
	switch (frame(b->in, &len)) {
	case WIRE_FRAME_NEED_MORE:
		return;
	case WIRE_FRAME_BAD:
		conn_lost(b, "bad reply length");
		return;
	case WIRE_FRAME_READY:
		exchange_end(b, len);
		return;
	}
}

static void conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	conn_flush(arg);
}

/* c goes now, or (ACTIVE, or on the inbox) when its connection comes back. */
static void client_close(struct client *c, const char *why, bool error)
{
	struct loop *l = c->loop;
	bool waiting = false;

	log_debug("proto: loop %d: client closed: %s", l->id, why);
	if (error) {
		log_error("proto: loop %d: client failed: %s", l->id, why);
		COUNT(l, errors);
	}
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	if (c->state == CL_QUEUED) {
		pool_lock(l);
		waiting = c->conn == NULL;
		if (waiting)
			TAILQ_REMOVE(&l->pool->waiters, c, link);
		pool_unlock(l);
	}
	if (c->state == CL_IDLE || waiting)
		client_free(c);
	else
		c->closing = true;
}

static void client_read_cb(struct bufferevent *bev, void *arg)
{
	client_input(arg);
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	if (what & BEV_EVENT_EOF)
		client_close(arg, "closed by the client", false);
	else if (what & BEV_EVENT_ERROR)
		client_close(arg, strerror(EVUTIL_SOCKET_ERROR()), false);
}

static void accept_cb(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa, int slen,
		      void *arg)
{
	struct loop *l = arg;
	struct client *c = xcalloc(1, sizeof(*c));
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		log_warning("proto: TCP_NODELAY: %s", strerror(errno));
	c->loop = l;
	c->bev = bufferevent_socket_new(l->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev)
		fatal("proto: bufferevent_socket_new failed");
	bufferevent_setcb(c->bev, client_read_cb, NULL, client_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0, WIRE_MAX_MESSAGE);
	bufferevent_enable(c->bev, EV_READ);
}

/* The clients other loops granted a connection: their exchanges start here. */
static void inbox_run(struct loop *l)
{
	struct clist granted = TAILQ_HEAD_INITIALIZER(granted);
	struct client *c;

	pool_lock(l);
	TAILQ_CONCAT(&granted, &l->inbox, link);
	l->woken = false;
	pool_unlock(l);
	while ((c = TAILQ_FIRST(&granted))) {
		TAILQ_REMOVE(&granted, c, link);
		if (c->closing) {
			struct bconn *b = c->conn;

			client_free(c);
			pool_release(l, b);
		} else {
			exchange_start(c);
		}
	}
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct loop *l = arg;
	char buf[64];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0 || memchr(buf, 'q', (size_t)n))
		event_base_loopbreak(l->base);
	else
		inbox_run(l);
}

/* One loop: its own listener on the port and its wake pipe; runs until 'q'. */
static void loop_run(struct loop *l)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)P.port)};
	struct evconnlistener *lst;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l->base = event_base_new();
	if (!l->base)
		fatal("proto: event_base_new failed");
	lst = evconnlistener_new_bind(l->base, accept_cb, l,
				      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
					  LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT,
				      1024, (struct sockaddr *)&sin, sizeof(sin));
	if (!lst)
		fatal("proto: loop %d cannot listen on port %d: %s", l->id, P.port,
		      strerror(errno));
	event_assign(&l->wake_ev, l->base, l->wake[0], EV_READ | EV_PERSIST, wake_cb, l);
	if (event_add(&l->wake_ev, NULL) != 0 || write(P.ready[1], "r", 1) != 1)
		fatal("proto: loop %d: cannot start", l->id);
	event_base_dispatch(l->base);
	evconnlistener_free(lst);
}

static void *loop_thread(void *arg)
{
	loop_run(arg);
	return NULL;
}

/* --procs: the child's signals back to default, gone with the master, its own pool. */
static void loop_child(struct loop *l, pid_t master, const sigset_t *sigs)
{
	static struct pool own;

	if (sigprocmask(SIG_UNBLOCK, sigs, NULL) != 0 || prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
		fatal("proto: worker %d: signal setup failed", l->id);
	if (getppid() != master)
		_exit(1);
	close(l->wake[1]);
	pool_open(&own, (P.pool_size + P.n - 1) / P.n, false);
	l->pool = &own;
	loop_run(l);
	_exit(0);
}

static void loop_start(struct loop *l, int id, struct pool *shared, const sigset_t *sigs)
{
	pid_t master = getpid();

	l->id = id;
	l->slot = &P.slots[P.procs ? id : 0];
	l->pool = shared;
	TAILQ_INIT(&l->inbox);
	if (pipe2(l->wake, O_CLOEXEC | O_NONBLOCK) != 0)
		fatal("proto: pipe: %s", strerror(errno));
	if (!P.procs) {
		if (pthread_create(&l->thread, NULL, loop_thread, l) != 0)
			fatal("proto: pthread_create failed");
		return;
	}
	l->pid = fork();
	if (l->pid < 0)
		fatal("proto: fork: %s", strerror(errno));
	if (l->pid == 0)
		loop_child(l, master, sigs);
}

/* --procs: a child has exited (logged, and its pid cleared): true. */
static bool child_exited(void)
{
	int st;
	pid_t pid = waitpid(-1, &st, WNOHANG);

	if (pid <= 0)
		return false;
	for (int i = 0; i < P.n; i++) {
		if (P.loops[i].pid == pid) {
			P.loops[i].pid = 0;
			log_error("proto: worker %d (pid %d) exited (status 0x%x); stopping all", i,
				  (int)pid, st);
		}
	}
	return true;
}

/* Waits (10 s at most) until every loop listens; a child that exits first is fatal. */
static void wait_ready(void)
{
	struct pollfd pfd = {.fd = P.ready[0], .events = POLLIN};
	char buf[MAX_LOOPS];
	int got = 0, waited = 0;
	ssize_t n;

	while (got < P.n) {
		if (P.procs && child_exited())
			fatal("proto: a worker exited before it listened");
		if (poll(&pfd, 1, 100) != 1) {
			if ((waited += 100) >= 10000)
				fatal("proto: the loops did not all listen within 10 s");
			continue;
		}
		n = read(P.ready[0], buf, sizeof(buf));
		if (n <= 0)
			fatal("proto: ready pipe: %s", n ? strerror(errno) : "closed");
		got += (int)n;
	}
}

/* "counters: NAME=VALUE ..." on stdout, each summed over the slots. */
static void print_counters(void)
{
	uint64_t v;

	printf("counters:");
#define PRINT_COUNTER(name)                                                                        \
	v = 0;                                                                                     \
	for (int i = 0; i < (P.procs ? P.n : 1); i++)                                              \
		v += atomic_load(&P.slots[i].name);                                                \
	printf(" " #name "=%llu", (unsigned long long)v);
	PROTO_COUNTERS(PRINT_COUNTER)
#undef PRINT_COUNTER
	printf("\n");
	fflush(stdout);
}

/* The main thread's work while the loops run: signals, read synchronously. */
static int serve_signals(const sigset_t *sigs)
{
	for (;;) {
		int sig = sigwaitinfo(sigs, NULL);

		if (sig == SIGUSR1)
			print_counters();
		else if (sig == SIGCHLD && P.procs && child_exited())
			return 1;
		else if (sig == SIGTERM || sig == SIGINT)
			return 0;
	}
}

static void stop_loops(void)
{
	for (int i = 0; i < P.n; i++) {
		if (!P.procs || P.loops[i].pid > 0)
			loop_wake(&P.loops[i], 'q');
	}
	for (int i = 0; i < P.n; i++) {
		if (!P.procs)
			pthread_join(P.loops[i].thread, NULL);
		else if (P.loops[i].pid > 0)
			waitpid(P.loops[i].pid, NULL, 0);
	}
}

/* The port, bound (never listening, open until exit) with SO_REUSEPORT: 0 resolves once for all. */
static void reserve_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)P.port)};
	socklen_t len = sizeof(sin);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) != 0)
		fatal("proto: cannot bind 127.0.0.1:%d: %s", P.port, strerror(errno));
	P.port = ntohs(sin.sin_port);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mongoplex-proto-workers (--threads N | --procs N) --backend HOST:PORT\n"
		"                               [--listen PORT] [--pool-size N] [--log-level L]\n"
		"\n"
		"A " PROTO_LABEL ":\n"
		"a small MongoDB-wire forwarding proxy with a transaction-level pool, run as N\n"
		"threads sharing one pool under a mutex, or as N processes with a pool of\n"
		"ceil(pool-size / N) each (bench/threads_vs_procs.sh; bench/README.md).\n"
		"  --listen PORT  127.0.0.1 port, 0 = a free one (default); stdout's first line\n"
		"                 is mongodb://127.0.0.1:PORT/\n"
		"  --pool-size N  backend connections in all (default 8)\n"
		"SIGUSR1 prints the counters on stdout; SIGTERM stops it and prints them.\n");
}

static int parse_int(const char *opt, const char *s, int lo, int hi)
{
	char *end;
	long v = strtol(s ? s : "", &end, 10);

	if (!s || !*s || *end || v < lo || v > hi)
		fatal("proto: %s wants a whole number from %d to %d", opt, lo, hi);
	return (int)v;
}

static void parse_backend(const char *s)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	char host[256];
	const char *colon = s ? strrchr(s, ':') : NULL;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(host))
		fatal("proto: --backend wants HOST:PORT");
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
		fatal("proto: --backend %s does not resolve", s);
	memcpy(&P.backend, res->ai_addr, res->ai_addrlen);
	P.backend_len = res->ai_addrlen;
	freeaddrinfo(res);
}

static void parse_args(int argc, char **argv)
{
	P.pool_size = 8;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		enum log_level lvl;

		if (!strcmp(o, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(o, "--threads") || !strcmp(o, "--procs")) {
			if (P.n)
				fatal("proto: give one of --threads N and --procs N");
			P.procs = !strcmp(o, "--procs");
			P.n = parse_int(o, v, 1, MAX_LOOPS);
		} else if (!strcmp(o, "--listen")) {
			P.port = parse_int(o, v, 0, 65535);
		} else if (!strcmp(o, "--pool-size")) {
			P.pool_size = parse_int(o, v, 1, 10000);
		} else if (!strcmp(o, "--backend")) {
			parse_backend(v);
		} else if (!strcmp(o, "--log-level") && v && log_parse_level(v, &lvl)) {
			log_current_level = lvl;
		} else {
			usage(stderr);
			exit(2);
		}
		i++;
	}
	if (!P.n || !P.backend_len)
		fatal("proto: --threads N or --procs N, and --backend HOST:PORT, are required");
}

int main(int argc, char **argv)
{
	static struct pool shared;
	sigset_t sigs;
	int rc;

	parse_args(argc, argv);
	log_notice("proto: " PROTO_LABEL ": --%s %d, pool size %d", P.procs ? "procs" : "threads",
		   P.n, P.pool_size);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGCHLD);
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR || pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0)
		fatal("proto: signal setup failed");
	reserve_port();
	P.slots = mmap(NULL, sizeof(struct slot) * (size_t)P.n, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (P.slots == MAP_FAILED || pipe2(P.ready, O_CLOEXEC) != 0)
		fatal("proto: setup: %s", strerror(errno));
	if (!P.procs)
		pool_open(&shared, P.pool_size, true);
	for (int i = 0; i < P.n; i++)
		loop_start(&P.loops[i], i, &shared, &sigs);
	wait_ready();
	printf("mongodb://127.0.0.1:%d/\n", P.port);
	fflush(stdout);
	rc = serve_signals(&sigs);
	stop_loops();
	print_counters();
	return rc;
}
