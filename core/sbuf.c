/*
 * sbuf.c — stream buffers over nonblocking sockets (see sbuf.h).
 */
#include "core/sbuf.h"

#include "core/tls.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/evpool.h"
#include "core/xalloc.h"

#define READ_CHUNK (64 * 1024)

static void on_readable(evutil_socket_t fd, short what, void *arg);
static void on_writable(evutil_socket_t fd, short what, void *arg);

static void update_reading(struct sbuf *sb)
{
	bool on = !sb->closed && sb->want_read && !sb->connecting &&
		  (sb->read_high == 0 || evbuffer_get_length(sb->in) < sb->read_high);

	if (on == sb->reading)
		return;
	sb->reading = on;
	if (on)
		event_add(sb->rev, NULL);
	else
		event_del(sb->rev);
}

static void set_writing(struct sbuf *sb, bool on)
{
	if (on == sb->writing)
		return;
	sb->writing = on;
	if (on)
		event_add(sb->wev, NULL);
	else
		event_del(sb->wev);
}

static bool setup(struct sbuf *sb, struct event_base *base, evutil_socket_t fd, sbuf_cb cb,
		  void *arg)
{
	memset(sb, 0, sizeof(*sb));
	sb->fd = fd;
	sb->cb = cb;
	sb->arg = arg;
	sb->in = xevbuffer_new();
	sb->out = xevbuffer_new();
	sb->rev = event_new(base, fd, EV_READ | EV_PERSIST, on_readable, sb);
	sb->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, on_writable, sb);
	sb->want_read = true;
	return sb->rev && sb->wev && evutil_make_socket_nonblocking(fd) == 0;
}

bool sbuf_accept(struct sbuf *sb, struct event_base *base, evutil_socket_t fd, sbuf_cb cb,
		 void *arg)
{
	if (!setup(sb, base, fd, cb, arg))
		return false;
	update_reading(sb);
	return true;
}

bool sbuf_connect(struct sbuf *sb, struct event_base *base, const struct sockaddr *addr,
		  socklen_t len, sbuf_cb cb, void *arg)
{
	evutil_socket_t fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		memset(sb, 0, sizeof(*sb));
		sb->fd = -1;
		sb->err = errno;
		return false;
	}
	if (!setup(sb, base, fd, cb, arg)) {
		sb->err = errno ? errno : ENOMEM;
		return false;
	}
	sb->connecting = true;
	if (connect(fd, addr, len) < 0 && errno != EINPROGRESS) {
		sb->err = errno;
		return false;
	}
	set_writing(sb, true); /* writable = connected (or failed) */
	return true;
}

/* Deliver an error from the loop, never from inside a caller's call. */
static void defer_error(struct sbuf *sb, int err)
{
	if (sb->err == 0)
		sb->err = err;
	event_active(sb->wev, EV_WRITE, 1);
}

static void flush_tls(struct sbuf *sb);

/* Write `buf` (the plaintext `out`, or TLS's ciphertext `wire`) until it is
 * empty (true) or the socket blocks (the write event is added) or fails (the
 * error is deferred to the loop), both false. */
static bool write_until_blocked(struct sbuf *sb, struct evbuffer *buf)
{
	while (evbuffer_get_length(buf) > 0) {
		int n = evbuffer_write(buf, sb->fd);

		if (n > 0) {
			if (buf == sb->out)
				sb->out_total += (uint64_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			set_writing(sb, true);
			return false;
		}
		defer_error(sb, n < 0 ? errno : EPIPE);
		return false;
	}
	return true;
}

/* Everything is written: no write event; a pending "drained" is delivered. */
static void flushed(struct sbuf *sb)
{
	set_writing(sb, false);
	if (sb->notify_drained)
		event_active(sb->wev, EV_WRITE, 1);
}

static void flush(struct sbuf *sb)
{
	if (sb->tls != NULL) {
		flush_tls(sb);
		return;
	}
	if (write_until_blocked(sb, sb->out))
		flushed(sb);
}

void sbuf_write(struct sbuf *sb, struct evbuffer *data)
{
	bool was_empty = evbuffer_get_length(sb->out) == 0;

	if (sb->closed)
		return;
	evbuffer_add_buffer(sb->out, data);
	if (was_empty && !sb->connecting)
		flush(sb);
}

void sbuf_write_bytes(struct sbuf *sb, const void *data, size_t len)
{
	bool was_empty = evbuffer_get_length(sb->out) == 0;

	if (sb->closed)
		return;
	evbuffer_add(sb->out, data, len);
	if (was_empty && !sb->connecting)
		flush(sb);
}

struct evbuffer *sbuf_take_input(struct sbuf *sb, size_t len)
{
	struct evbuffer *taken = evpool_get();

	if (len == evbuffer_get_length(sb->in)) {
		struct evbuffer *whole = sb->in;

		sb->in = taken;
		return whole;
	}
	evbuffer_remove_buffer(sb->in, taken, len);
	return taken;
}

void sbuf_notify_drained(struct sbuf *sb, size_t low)
{
	sb->write_low = low;
	sb->notify_drained = true;
	if (evbuffer_get_length(sb->out) <= low)
		event_active(sb->wev, EV_WRITE, 1);
}

void sbuf_set_reading(struct sbuf *sb, bool on)
{
	sb->want_read = on;
	update_reading(sb);
}

void sbuf_set_read_high(struct sbuf *sb, size_t high)
{
	sb->read_high = high;
	update_reading(sb);
}

size_t sbuf_pending_out(const struct sbuf *sb)
{
	return evbuffer_get_length(sb->out) + (sb->wire ? evbuffer_get_length(sb->wire) : 0);
}

static void tls_failed(struct sbuf *sb)
{
	snprintf(sb->tls_err, sizeof(sb->tls_err), "%s", tls_conn_error(sb->tls));
	if (evbuffer_get_length(sb->wire) > 0) /* the alert, best effort */
		(void)evbuffer_write(sb->wire, sb->fd);
	sb->err = EPROTO;
	sb->cb(sb, SBUF_ERROR, sb->arg);
}

/* Sniffing found a plain peer: drop TLS, the bytes are already in `in`. */
static void tls_drop(struct sbuf *sb)
{
	tls_conn_free(sb->tls);
	sb->tls = NULL;
	evbuffer_free(sb->wire);
	sb->wire = NULL;
}

/* The outcome of a read(2) into sb that returned r, with errno err: true
 * when r bytes arrived; else the would-block (nothing), the error
 * (SBUF_ERROR) or the end of stream (SBUF_EOF) is handled here. */
static bool read_arrived(struct sbuf *sb, ssize_t r, int err)
{
	if (r > 0)
		return true;
	if (r == 0) {
		sb->cb(sb, SBUF_EOF, sb->arg);
		return false;
	}
	if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
		return false;
	sb->err = err;
	sb->cb(sb, SBUF_ERROR, sb->arg);
	return false;
}

static void read_tls(struct sbuf *sb)
{
	uint8_t raw[READ_CHUNK];
	size_t before = evbuffer_get_length(sb->in);
	ssize_t r = read(sb->fd, raw, sizeof(raw));
	enum tls_io st;
	uint64_t out_before;

	if (!read_arrived(sb, r, errno))
		return;
	st = tls_conn_input(sb->tls, raw, (size_t)r, sb->in, sb->wire);
	sb->in_total += evbuffer_get_length(sb->in) - before;
	if (st == TLS_IO_ERROR) {
		tls_failed(sb);
		return;
	}
	if (st == TLS_IO_PLAIN)
		tls_drop(sb);
	out_before = sb->out_total;
	flush(sb); /* handshake records, then plaintext held back by it */
	if (sb->closed || sb->err != 0)
		return;
	if (st == TLS_IO_HANDSHAKE_DONE && sb->tls_client)
		sb->cb(sb, SBUF_CONNECTED, sb->arg);
	if (!sb->closed && sb->out_total != out_before) /* the loop wrote: as on_writable */
		sb->cb(sb, SBUF_WROTE, sb->arg);
	if (!sb->closed && evbuffer_get_length(sb->in) > before)
		sb->cb(sb, SBUF_READ, sb->arg);
	if (!sb->closed && st == TLS_IO_EOF)
		sb->cb(sb, SBUF_EOF, sb->arg);
	update_reading(sb);
}

/* A read into an empty buffer (the start of a message, most often all of
 * it): into the stack, then copied into `in` at its size. Reserving
 * READ_CHUNK there instead allocates and frees a 128 KB chain per message,
 * which costs more than the copy of a small one; a message longer than the
 * chunk continues with reads into the buffer's own space. */
static void read_first(struct sbuf *sb)
{
	uint8_t raw[READ_CHUNK];
	ssize_t r = read(sb->fd, raw, sizeof(raw));

	if (!read_arrived(sb, r, errno))
		return;
	if (evbuffer_add(sb->in, raw, (size_t)r) != 0) {
		sb->err = ENOMEM;
		sb->cb(sb, SBUF_ERROR, sb->arg);
		return;
	}
	sb->in_total += (uint64_t)r;
	sb->cb(sb, SBUF_READ, sb->arg);
	update_reading(sb);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct sbuf *sb = arg;
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	ssize_t r;
	int n, used, err;

	(void)what;
	if (sb->tls != NULL) {
		read_tls(sb);
		return;
	}
	if (evbuffer_get_length(sb->in) == 0) {
		read_first(sb);
		return;
	}
	n = evbuffer_reserve_space(sb->in, READ_CHUNK, v, 2);
	for (int i = 0; i < n; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
	}
	r = readv(fd, iov, n);
	err = errno;
	if (r <= 0) {
		evbuffer_commit_space(sb->in, v, 0);
		(void)read_arrived(sb, r, err);
		return;
	}
	sb->in_total += (uint64_t)r;
	used = 0;
	while (r > 0) {
		size_t take = (size_t)r < v[used].iov_len ? (size_t)r : v[used].iov_len;

		v[used++].iov_len = take;
		r -= (ssize_t)take;
	}
	evbuffer_commit_space(sb->in, v, used);
	sb->cb(sb, SBUF_READ, sb->arg);
	update_reading(sb);
}

static void on_connected(struct sbuf *sb)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(sb->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	sb->connecting = false;
	if (err != 0) {
		set_writing(sb, false);
		sb->err = err;
		sb->cb(sb, SBUF_ERROR, sb->arg);
		return;
	}
	update_reading(sb);
	if (sb->tls != NULL) { /* SBUF_CONNECTED once the handshake is done */
		if (!tls_conn_start(sb->tls, sb->wire)) {
			tls_failed(sb);
			return;
		}
		flush(sb);
		return;
	}
	flush(sb);
	if (!sb->closed)
		sb->cb(sb, SBUF_CONNECTED, sb->arg);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
	struct sbuf *sb = arg;
	uint64_t out_before = sb->out_total;

	(void)fd;
	(void)what;
	if (sb->closed)
		return;
	if (sb->err != 0) {
		set_writing(sb, false);
		sb->cb(sb, SBUF_ERROR, sb->arg);
		return;
	}
	if (sb->connecting) {
		on_connected(sb);
		return;
	}
	if (sbuf_pending_out(sb) > 0) /* TLS: ciphertext may wait with `out` empty */
		flush(sb);
	if (!sb->closed && sb->err == 0 && sb->out_total != out_before)
		sb->cb(sb, SBUF_WROTE, sb->arg);
	if (!sb->closed && sb->err == 0 && sb->notify_drained &&
	    sbuf_pending_out(sb) <= sb->write_low) {
		sb->notify_drained = false;
		sb->cb(sb, SBUF_DRAINED, sb->arg);
	}
}

void sbuf_close(struct sbuf *sb)
{
	if (sb->closed)
		return;
	sb->closed = true;
	if (sb->rev)
		event_del(sb->rev);
	if (sb->wev)
		event_del(sb->wev);
	sb->reading = sb->writing = false;
	if (sb->fd >= 0)
		close(sb->fd);
	sb->fd = -1;
}

void sbuf_free(struct sbuf *sb)
{
	sbuf_close(sb);
	tls_conn_free(sb->tls);
	sb->tls = NULL;
	if (sb->wire)
		evbuffer_free(sb->wire);
	sb->wire = NULL;
	if (sb->rev)
		event_free(sb->rev);
	if (sb->wev)
		event_free(sb->wev);
	if (sb->in)
		evbuffer_free(sb->in);
	if (sb->out)
		evbuffer_free(sb->out);
	sb->rev = sb->wev = NULL;
	sb->in = sb->out = NULL;
}

/* ---------------------------------------------------------------- TLS */

bool sbuf_use_tls(struct sbuf *sb, struct tls_conn *t)
{
	sb->wire = xevbuffer_new();
	sb->tls = t;
	sb->tls_client = sb->connecting;
	return true;
}

bool sbuf_tls_handshaking(const struct sbuf *sb)
{
	return sb->tls != NULL && tls_conn_handshaking(sb->tls);
}

const char *sbuf_tls_error(const struct sbuf *sb)
{
	return sb->tls_err;
}

/* Encrypt and write until the socket blocks, the plaintext is gone, or
 * the handshake holds it back. */
static void flush_tls(struct sbuf *sb)
{
	for (;;) {
		size_t plain = evbuffer_get_length(sb->out);
		bool ok = tls_conn_output(sb->tls, sb->out, sb->wire, SBUF_TLS_WIRE_HIGH);

		sb->out_total += plain - evbuffer_get_length(sb->out);
		if (!ok) {
			snprintf(sb->tls_err, sizeof(sb->tls_err), "%s", tls_conn_error(sb->tls));
			defer_error(sb, EPROTO);
			return;
		}
		if (evbuffer_get_length(sb->wire) == 0)
			break;
		if (!write_until_blocked(sb, sb->wire))
			return;
	}
	flushed(sb);
}
