/*
 * cursor.h — cursor ownership: every backend cursor opened through the proxy
 * belongs to the client connection whose command opened it.
 *
 * Every client shares the proxy's backend identity, so the backend cannot
 * tell clients apart: the proxy does. The table maps (cursor id, namespace)
 * to the owning client connection id and the pool whose server holds the
 * cursor. It is fed by the reply of every forwarded command (any reply with
 * a top-level cursor {id: nonzero, ns}), emptied by getMore replies with id
 * 0, by killCursors replies and when the owner disconnects (the proxy then
 * kills the owner's cursors on the backend itself).
 *
 * A getMore or killCursors naming a cursor the client does not own — another
 * client's or one that does not exist — is answered by the proxy exactly as
 * mongod answers an unknown cursor and never reaches the backend:
 *   getMore      {ok: 0, code: 43, codeName: CursorNotFound,
 *                 errmsg: "mongoplex: cursor id N not found"}
 *   killCursors  {ok: 1, cursorsKilled, cursorsNotFound: [N...], ...}
 * A killCursors mixing owned and foreign ids is forwarded with the owned ids
 * only; the foreign ones are added to the backend's cursorsNotFound.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

struct request;
struct wire_msg;
struct pool;
struct cursor_note;

/* Kill on close: ids per killCursors, internal killCursors in flight. */
#define CURSOR_KILL_CHUNK    500
#define CURSOR_KILL_INFLIGHT 2

/* A client's getMore/killCursors (route_info.cursor_op), before it is
 * forwarded. true: this module took the request over (answered it as an
 * unknown cursor, refused a malformed one, or submitted a killCursors
 * rewritten without the foreign ids to pool_submit); false: forward it
 * unchanged. */
bool cursor_admit(struct request *req, const struct wire_msg *m)
    __attribute__((warn_unused_result));

/* A backend reply to a forwarded request, before it goes to the client
 * (client_ops.c, through client_hooks.h): records the cursor it opened,
 * forgets the cursors it closed. true: this module answered the request
 * itself (merged killCursors reply); the caller must not deliver the raw
 * reply. */
bool cursor_on_reply(struct request *req, const struct wire_msg *reply)
    __attribute__((warn_unused_result));

/* The client went away (client_close, through client_hooks.h): its cursors
 * leave the table and are killed on the backend (one killCursors per
 * namespace and CURSOR_KILL_CHUNK ids). */
void cursor_client_closed(uint64_t client_id);

/* The same while the client stays (its user changed): `why` for the log. */
void cursor_client_dropped(uint64_t client_id, const char *why);

/* request_free (the client part's fini, through client_hooks.h): drop what
 * the request's reply would have updated. */
void cursor_note_free(struct cursor_note *note);

/* The table itself (id, ns → owner, pool): proxy/cursor_table.h. */

/* The readers of replies (cursor {id, ns}, ok/code, the merged
 * killCursors reply): proxy/cursor_read.h. */
#include "proxy/cursor_read.h"
