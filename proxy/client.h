/*
 * client.h — one client connection.
 *
 * States and their lists (client_set_state moves a client between them):
 *   CL_ACTIVE    clients_active: connected; zero or more requests in flight
 *   CL_JUSTFREE  clients_justfree: closed, freed after this loop iteration
 * Within CL_ACTIVE the client's requests say whether it is idle, waiting for
 * a backend or running; counts per phase are kept for stats.
 */
#pragma once

#include <event2/event.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/list.h"

#include "core/log.h"
#include "core/request.h"
#include "core/sbuf.h"

enum client_state {
	CL_ACTIVE,   /* list: clients_active */
	CL_JUSTFREE, /* list: clients_justfree */
};

struct client {
	uint64_t id;
	enum client_state state;
	TAILQ_ENTRY(client) link;
	struct sbuf sb;		 /* the socket and its buffers */
	struct event *resume_ev; /* deferred "parse more input" */
	char peer[64];
	struct request_list requests; /* parsed and not yet answered */
	int inflight;		      /* entries in `requests` */
	uint64_t last_round;	      /* fair-queuing round of its last queued request */
	uint64_t connected_usec;
	uint64_t last_active_usec;   /* last byte received or reply sent */
	uint64_t partial_since_usec; /* 0, or when an incomplete message began */
	bool hello_seen;	     /* first hello (with metadata) done */
	bool over_limit;	     /* accepted beyond max_client_conn: refuse and close */
	bool closing;		     /* flush output, then close */
	bool reading_paused;
	/* proxy/client_compress.c: compressor id negotiated in its hello (-1:
	 * none), and the id of the OP_COMPRESSED message being handled (-1). */
	int8_t compressor, msg_compressor;
	/* Memory bound (proxy/membound.c): bytes in sb's buffers, and request
	 * messages parsed but not yet sent to a backend. */
	size_t io_bytes, req_bytes;
	size_t reply_est; /* recent reply size (decaying max); starts at the limit */
	/* Order (pool/sticky.c): the backend connection that carried this
	 * client's unacknowledged write, until an acknowledged exchange ends there. */
	struct server *sticky;
	struct awaited_hello *awaiting; /* its held hello (proxy/awaithello.c), or NULL */
	struct cauth_conn *auth; /* proxy/cauth.c: login state (NULL until the first SASL step) */
};

TAILQ_HEAD(client_list, client);

#define client_log(lvl, c, fmt, ...)                                                               \
	log_msg(lvl, "C-%" PRIu64 " %s: " fmt, (c)->id, (c)->peer, ##__VA_ARGS__)
#define client_warning(c, fmt, ...)                                                                \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_WARNING))                                                  \
			client_log(LOG_LVL_WARNING, c, fmt, ##__VA_ARGS__);                        \
	} while (0)
#define client_info(c, fmt, ...)                                                                   \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_INFO))                                                     \
			client_log(LOG_LVL_INFO, c, fmt, ##__VA_ARGS__);                           \
	} while (0)
#define client_debug(c, fmt, ...)                                                                  \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_DEBUG))                                                    \
			client_log(LOG_LVL_DEBUG, c, fmt, ##__VA_ARGS__);                          \
	} while (0)

/* Take over an accepted socket. */
void client_accept(int fd, const struct sockaddr *addr, int addrlen);

/* Close with a reason that reaches the log; the free is deferred. */
void client_close(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A reply was queued or a request finished: resume parsing input. */
void client_request_finished(struct client *c);

/* Append a whole reply message; applies output backpressure. */
void client_send(struct client *c, struct evbuffer *msg);

/* Answer a handshake request now that the backend's limits are known. */
struct backend_info;
void client_answer_hello(struct request *req, const struct backend_info *bi);

void client_free_deferred(void);
void client_close_all(const char *reason);
void client_janitor(uint64_t now);
void client_apply_cfg(void);

/* Counts for stats. */
int client_count(void);
/* Bytes of replies queued to clients and not yet written. */
size_t client_unsent_bytes(void);
void client_phase_counts(int *idle, int *waiting, int *running);

/* May one more of this client's requests be sent to a backend now? False
 * while its unsent replies are at max_client_buffer_bytes, or when the
 * replies of one more running request could take it past that (judged by
 * its recent reply sizes; one request may always run while output is below
 * the limit). So buffered replies stay within the limit plus one message. */
bool client_may_dispatch(const struct client *c);
/* Requests of c running on a backend or waiting in a batch. */
int client_running(const struct client *c);
/* The memory bound was entered or left: stop or resume reading everyone. */
void client_memory_paused(bool paused);
int client_count_memory_paused(void);
