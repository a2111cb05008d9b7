/*
 * sbuf.h — a thin stream buffer over a nonblocking socket: one input and
 * one output evbuffer, one callback driven by an event enum.
 *
 * Why not bufferevents: a proxy hop must cost as few system calls as
 * possible. sbuf writes immediately when the output was empty (no extra
 * loop iteration), reads with readv into reserved space (no FIONREAD ioctl),
 * and adds/removes its write event only when a write would block (the epoll
 * changelist folds the rest).
 *
 * Rules:
 *  - Callbacks are never invoked from inside sbuf_write/sbuf_connect; errors
 *    and "drained" notifications found there are delivered from the loop.
 *    Output written by the loop (a write that had blocked, or plaintext a
 *    TLS read let through) is reported with SBUF_WROTE; output written
 *    inside sbuf_write is not (the caller knows).
 *  - After sbuf_close the callback is never called again; the memory is
 *    released by sbuf_free (the owner's deferred free).
 *  - Reading is on while the owner wants it and the input holds less than
 *    read_high bytes.
 *  - TLS (sbuf_use_tls, core/tls.c): `in` and `out` stay plaintext; the
 *    ciphertext to send waits in `wire` (at most SBUF_TLS_WIRE_HIGH beyond
 *    one record: the rest stays in `out`). A connecting TLS client reports
 *    SBUF_CONNECTED once the handshake is done; a TLS failure is SBUF_ERROR
 *    with err EPROTO and the reason in sbuf_tls_error. A plain connection
 *    pays one test of `tls` per read and per flush.
 */
#pragma once

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

enum sbuf_event {
	SBUF_READ,	/* new bytes in sb->in */
	SBUF_DRAINED,	/* output dropped to write_low (when asked with sbuf_notify_drained) */
	SBUF_CONNECTED, /* outgoing connect completed */
	SBUF_EOF,	/* peer closed */
	SBUF_ERROR,	/* socket error; errno-style code in sb->err */
	SBUF_WROTE,	/* the loop wrote some of the output (out_total grew) */
};

struct sbuf;
struct tls_conn;
typedef void (*sbuf_cb)(struct sbuf *sb, enum sbuf_event ev, void *arg);

struct sbuf {
	evutil_socket_t fd;
	struct event *rev, *wev;
	struct evbuffer *in, *out;
	sbuf_cb cb;
	void *arg;
	size_t read_high; /* stop reading at this much buffered input */
	size_t write_low; /* SBUF_DRAINED once output is at or below this */
	bool want_read;	  /* the owner wants input */
	bool reading;	  /* rev is added */
	bool writing;	  /* wev is added */
	bool connecting;
	bool notify_drained;
	bool closed;
	int err;	       /* pending error to deliver, 0: none */
	struct tls_conn *tls;  /* NULL: plain */
	bool tls_client;       /* TLS: we connected (SBUF_CONNECTED after the handshake) */
	struct evbuffer *wire; /* TLS: ciphertext to send */
	char tls_err[256];     /* TLS: why the connection failed */
	/* Bytes ever appended to `in` by reads (TLS: plaintext), and taken
	 * from `out` (written, or TLS: encrypted). The owner's accounting reads
	 * them (proxy/membound.c), instead of a callback on every buffer change. */
	uint64_t in_total, out_total;
};

#define SBUF_TLS_WIRE_HIGH (64 * 1024)

/* Take over a connected socket (made nonblocking here). */
bool sbuf_accept(struct sbuf *sb, struct event_base *base, evutil_socket_t fd, sbuf_cb cb,
		 void *arg) __attribute__((warn_unused_result));

/* Start a nonblocking connect; SBUF_CONNECTED or SBUF_ERROR follows. */
bool sbuf_connect(struct sbuf *sb, struct event_base *base, const struct sockaddr *addr,
		  socklen_t len, sbuf_cb cb, void *arg) __attribute__((warn_unused_result));

/* Run TLS over this connection (owns `t`): call right after sbuf_accept
 * (server side) or a successful sbuf_connect (client side). */
bool sbuf_use_tls(struct sbuf *sb, struct tls_conn *t) __attribute__((warn_unused_result));
/* True while a TLS handshake is in progress (or the first bytes are awaited). */
bool sbuf_tls_handshaking(const struct sbuf *sb);
/* Why the TLS layer failed ("" if it did not). */
const char *sbuf_tls_error(const struct sbuf *sb);

/* Queue bytes (moved out of `data`) and write as much as the socket takes. */
void sbuf_write(struct sbuf *sb, struct evbuffer *data);
void sbuf_write_bytes(struct sbuf *sb, const void *data, size_t len);

/* The first `len` bytes of the input (len <= its length), as an evbuffer
 * of their own for the caller to keep or give back (core/evpool.h). When
 * they are the whole input (the usual message), the input buffer itself is
 * handed over and replaced with an empty one: no chain is moved. Callers
 * re-read sb->in afterwards. */
struct evbuffer *sbuf_take_input(struct sbuf *sb, size_t len);

/* Ask for one SBUF_DRAINED once the output is at or below `low` bytes
 * (delivered from the loop even if that is already the case). */
void sbuf_notify_drained(struct sbuf *sb, size_t low);

void sbuf_set_reading(struct sbuf *sb, bool on);
void sbuf_set_read_high(struct sbuf *sb, size_t high);
size_t sbuf_pending_out(const struct sbuf *sb);

/* Stop all I/O and callbacks; closes the socket. */
void sbuf_close(struct sbuf *sb);
/* Release the buffers and events (after sbuf_close, outside callbacks). */
void sbuf_free(struct sbuf *sb);
