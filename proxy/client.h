/*
 * client.h — one client connection.
 *
 * States and their lists (client_set_state moves a client between them):
 *   CL_ACTIVE    clients_active: connected; zero or more requests in flight
 *   CL_JUSTFREE  clients_justfree: closed, freed after this loop iteration
 *   CL_NEW       on no list: being set up (client_accept)
 * Within CL_ACTIVE the client's requests say whether it is idle, waiting for
 * a backend or running; counts per phase come from the request states
 * (request_owner_phases).
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
	CL_NEW,	     /* no list */
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
	/* Its requests as the lower layers see them (core/request.h): parsed
	 * and not yet answered, counts per state, the sticky connection of
	 * its unacknowledged write (pool/sticky.c). */
	struct request_owner owner;
	uint64_t connected_usec;
	uint64_t last_active_usec;   /* last byte received or reply sent */
	uint64_t partial_since_usec; /* 0, or when an incomplete message began */
	bool hello_seen;	     /* first hello (with metadata) done */
	/* Accepted beyond this limit ("max_client_conn", "max_unauth_conn"):
	 * refuse its first request and close. NULL: admitted. */
	const char *refused_by;
	bool authenticated; /* logged in (proxy/cauth.c); else counted in max_unauth_conn */
	bool closing;	    /* flush output, then close */
	bool reading_paused;
	bool memory_held; /* not read: heavy while at max_buffer_bytes (proxy/membound.h) */
	/* proxy/client_compress.c: compressor id negotiated in its hello (-1:
	 * none), and the id of the OP_COMPRESSED message being handled (-1). */
	int8_t compressor, msg_compressor;
	/* Memory bound (proxy/membound.c): bytes in sb's buffers, and request
	 * messages parsed but not yet sent to a backend. */
	size_t io_bytes, req_bytes;
	size_t reply_est; /* recent reply size (decaying max); starts at the limit */
	/* When its output last became non-empty or shrank (bytes written): unsent
	 * output older than client_write_timeout_ms closes the client. */
	uint64_t out_progress_usec;
	struct awaited_hello *awaiting; /* its held hello (proxy/awaithello.c), or NULL */
	struct cauth_conn *auth; /* proxy/cauth.c: login state (NULL until the first SASL step) */
	char app_name[129];	 /* client.application.name of its first hello, "" if none */
	/* Its first hello's client.driver name and version ("" if none). */
	char driver_name[65], driver_version[65];
	/* The unix socket's peer uid (SO_PEERCRED at accept); -1: TCP or unknown. */
	int64_t peer_uid;
	/* For mongoplexShow clients: requests parsed (bytes: sb.in_total, out_total). */
	uint64_t requests;
	/* client_account_sync's view at its last call: sb.out_total and out's length. */
	uint64_t acct_out_total;
	size_t acct_out_len;
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
/* A line an attacker can repeat (core/log.h, struct log_rl). */
#define client_log_rl(rl, lvl, c, fmt, ...)                                                        \
	log_rl_msg(rl, lvl, "C-%" PRIu64 " %s: " fmt, (c)->id, (c)->peer, ##__VA_ARGS__)
#define client_debug(c, fmt, ...)                                                                  \
	do {                                                                                       \
		if (log_enabled(LOG_LVL_DEBUG))                                                    \
			client_log(LOG_LVL_DEBUG, c, fmt, ##__VA_ARGS__);                          \
	} while (0)

/* proxy/client_ops.c: the callbacks of a client's requests and of the
 * client as their owner; a new request of `c` (NULL: the proxy's own). */
extern const struct request_ops client_request_ops;
extern const struct request_owner_ops client_owner_ops;
struct request *client_request_new(struct client *c);

/* The client a request belongs to, NULL when it has none (any more). */
static inline struct client *client_of(const struct request *req)
{
	if (req->owner == NULL)
		return NULL;
	return (struct client *)((char *)req->owner - offsetof(struct client, owner));
}

/* Take over an accepted socket. */
void client_accept(int fd, const struct sockaddr *addr, int addrlen);

/* Close with a reason that reaches the log; the free is deferred. */
void client_close(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, the reason logged through rl (closes an attacker can repeat). */
void client_close_rl(struct client *c, struct log_rl *rl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* c logged in (true) or out (proxy/cauth.c): max_unauth_conn counts the others. */
void client_set_authenticated(struct client *c, bool on);
/* Connections not logged in (auth_mode = scram; else 0), and their cap. */
int client_count_unauthenticated(void);
int64_t client_max_unauth(void);

/* A reply was queued or a request finished: resume parsing input. */
void client_request_finished(struct client *c);

/* Append a whole reply message; applies output backpressure. */
void client_send(struct client *c, struct evbuffer *msg);

/* Answer a handshake request now that the backend's limits are known. */
struct backend_info;
void client_answer_hello(struct request *req, const struct backend_info *bi);

void client_free_deferred(void);
void client_close_all(const char *reason);
/* The connected client with this id (C-<id>, hello's connectionId), or NULL. */
struct client *client_find(uint64_t id);

/* Count c's buffered bytes as they are now into the memory bound, and note
 * output progress (proxy/membound.c); stop takes c's bytes out of the bound. */
void client_account_sync(struct client *c);
void client_account_stop(struct client *c);
void client_janitor(uint64_t now);
void client_apply_cfg(void);

/* Counts for stats. */
int client_count(void);
/* The connected clients (CL_ACTIVE), oldest first, for mongoplexShow. */
const struct client_list *client_active_list(void);
/* Bytes of replies queued to clients and not yet written. */
size_t client_unsent_bytes(void);
void client_phase_counts(int *idle, int *waiting, int *running);

/* May one more of this client's requests be sent to a backend now? False
 * while its unsent replies are at max_client_buffer_bytes (at
 * max_buffer_bytes: at its share, if lower; proxy/membound.h), or when the
 * replies of one more running request could take it past that (judged by
 * its recent reply sizes; one request may always run while output is below
 * the limit). So buffered replies stay within the limit plus one message. */
bool client_may_dispatch(const struct client *c);
/* Requests of c running on a backend or waiting in a batch. */
int client_running(const struct client *c);
/* The memory bound was entered (stop reading the heavy clients) or left
 * (resume everyone). */
void client_memory_paused(bool paused);
int client_count_memory_paused(void);
