/*
 * fake_backend.h — a scriptable fake MongoDB server for the backend-fault
 * tests (test_backend_faults.c): a thread in the test process listening on
 * a loopback port, speaking just enough OP_MSG.
 *
 * It answers the proxy's isMaster with the handshake the test configured
 * (struct fake_cfg) and every other command according to a fault chosen by
 * the command's first value (the collection name, see fault_names in
 * fake_backend.c): {find: "f_reset"} resets mid-reply, {insert: "f_stall"}
 * never gets an answer, {find: "c"} is answered normally. Normal replies
 * carry `conn` (which backend connection answered) and `echo` (the
 * request's `tag`).
 *
 * Rules: the fake thread never asserts; the test's main thread reads what
 * the fake saw through FAKE_GET and the fake_* accessors (under `mu`).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fault {
	F_NONE,
	F_RESET_MID_REPLY,    /* half a reply, pause, then RST (SO_LINGER 0) */
	F_CLOSE_BEFORE_REPLY, /* FIN, no reply */
	F_STALL,	      /* never reply */
	F_HALF_THEN_STALL,    /* half a reply, then nothing */
	F_LEN5,		      /* header with messageLength 5 */
	F_LEN60M,	      /* header with messageLength 60,000,000 */
	F_OP_REPLY,	      /* a complete OP_REPLY to the request */
	F_WRONG_RESPONSE_TO,  /* a complete reply with a wrong responseTo, then nothing */
	F_STRAY_THEN_RIGHT,   /* a reply with a wrong responseTo, then the right one */
	F_EXHAUST,	      /* the right reply, with moreToCome set */
	F_BAD_BSON,	      /* an OP_MSG reply whose body is not valid BSON */
	F_HEADER_ONLY,	      /* an OP_MSG of 16 bytes: header, no flags, no body */
	F_CMD_ERROR,	      /* {ok: 0, code: 2, errmsg} from the "server" */
	F_CHECKSUM_OK,	      /* the right reply with a correct CRC-32C */
	F_CHECKSUM_BAD,	      /* the right reply with a wrong CRC-32C */
	F_SLOW,		      /* the right reply after 300 ms (blocks the fake meanwhile) */
};

enum fake_kind { FK_STANDALONE, FK_SECONDARY, FK_RS_PRIMARY };

/* What a moreToCome message gets (FerretDB replies to them anyway). */
enum mtc_reply { MTC_NONE, MTC_IMMEDIATE, MTC_DEFERRED };

struct fake_cfg {
	int min_wire, max_wire, max_write_batch;
	enum fake_kind kind;
	bool hello_stall;	  /* accept, read the hello, never answer */
	bool hello_error;	  /* answer the hello with {ok: 0} */
	enum mtc_reply mtc;	  /* replies to moreToCome messages */
	enum fault default_fault; /* for commands without an f_ name */
	int session_minutes;	  /* > 0: logicalSessionTimeoutMinutes in the hello */
};

struct fconn {
	int fd;
	int serial;
	uint8_t *in;
	size_t len, cap;
	uint8_t *deferred; /* MTC_DEFERRED: an unsolicited reply, sent before the next one */
	size_t deferred_len;
};

#define FAKE_MAX_CONNS 64

struct fake {
	int lfd, port;
	int wake[2];
	pthread_t thr;
	pthread_mutex_t mu;
	/* under mu */
	struct fake_cfg cfg;
	int accepted, hellos, commands, mtc_seen, faults_done;
	char appname[64];
	/* thread-owned */
	struct fconn conns[FAKE_MAX_CONNS];
	int nconns;
	int next_serial;
	int32_t next_reply_id;
};

/* A configuration with the common defaults: standalone, wire 0..8. */
struct fake_cfg fake_default_cfg(void);
/* Listen on 127.0.0.1:port (0: any) and start the thread; asserts on failure. */
struct fake *fake_start_cfg(int port, const struct fake_cfg *cfg);
struct fake *fake_start(void);
/* Stop: close the listener and every connection (FIN), join the thread. */
void fake_stop(struct fake *f);
void fake_set_cfg(struct fake *f, const struct fake_cfg *cfg);
/* The appname of the last hello the fake received. */
void fake_appname(struct fake *f, char *buf, size_t len);
/* A loopback port nothing listens on, kept so: bound without listening in
 * *hold (connects to it are refused, and no other socket of the parallel
 * tests can take it) until the caller closes *hold. */
int fake_hold_port(int *hold);

/* Accessors for the main thread. */
#define FAKE_GET(f, field)                                                                         \
	({                                                                                         \
		__typeof__((f)->field) v_;                                                         \
		pthread_mutex_lock(&(f)->mu);                                                      \
		v_ = (f)->field;                                                                   \
		pthread_mutex_unlock(&(f)->mu);                                                    \
		v_;                                                                                \
	})
