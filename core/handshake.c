/*
 * handshake.c — hello/isMaster answered by the proxy, and the proxy's own
 * hello to each backend connection.
 */
#include "core/handshake.h"

#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "core/errors.h"
#include "core/globals.h"
#include "core/topover.h"
#include "core/wire.h"
#include "version.h"

void handshake_backend_hello(bson_t *cmd)
{
	bson_t client, app, driver, os;

	bson_init(cmd);
	BSON_APPEND_INT32(cmd, "isMaster", 1); /* every backend knows isMaster; some lack hello */
	BSON_APPEND_BOOL(cmd, "helloOk", true);
	BSON_APPEND_DOCUMENT_BEGIN(cmd, "client", &client);
	BSON_APPEND_DOCUMENT_BEGIN(&client, "application", &app);
	BSON_APPEND_UTF8(&app, "name", "mongoplex");
	bson_append_document_end(&client, &app);
	BSON_APPEND_DOCUMENT_BEGIN(&client, "driver", &driver);
	BSON_APPEND_UTF8(&driver, "name", "mongoplex");
	BSON_APPEND_UTF8(&driver, "version", MP_VERSION);
	bson_append_document_end(&client, &driver);
	BSON_APPEND_DOCUMENT_BEGIN(&client, "os", &os);
	BSON_APPEND_UTF8(&os, "type", "Linux");
	bson_append_document_end(&client, &os);
	bson_append_document_end(cmd, &client);
	BSON_APPEND_UTF8(cmd, "$db", "admin");
}

static bool get_bool(const bson_t *doc, const char *key)
{
	bson_iter_t it;

	return bson_iter_init_find(&it, doc, key) && bson_iter_as_bool(&it);
}

static int32_t get_int(const bson_t *doc, const char *key, int32_t dflt)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it))
		return (int32_t)bson_iter_as_int64(&it);
	return dflt;
}

static enum backend_kind classify_backend(const bson_t *reply, struct backend_info *bi)
{
	bson_iter_t it;

	if (bson_iter_init_find(&it, reply, "msg") && BSON_ITER_HOLDS_UTF8(&it) &&
	    strcmp(bson_iter_utf8(&it, NULL), "isdbgrid") == 0)
		return BACKEND_MONGOS;
	if (bson_iter_init_find(&it, reply, "setName") && BSON_ITER_HOLDS_UTF8(&it)) {
		snprintf(bi->set_name, sizeof(bi->set_name), "%s", bson_iter_utf8(&it, NULL));
		return get_bool(reply, "isWritablePrimary") || get_bool(reply, "ismaster")
			   ? BACKEND_RS_PRIMARY
			   : BACKEND_RS_OTHER;
	}
	if (get_bool(reply, "isreplicaset"))
		return BACKEND_RS_OTHER;
	return BACKEND_STANDALONE;
}

bool handshake_parse_backend(const bson_t *reply, struct backend_info *bi, char *err, size_t errlen)
{
	memset(bi, 0, sizeof(*bi));
	if (!get_bool(reply, "ok")) {
		bson_iter_t it;
		const char *msg = "no errmsg";

		if (bson_iter_init_find(&it, reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it))
			msg = bson_iter_utf8(&it, NULL);
		snprintf(err, errlen, "backend refused hello: %s", msg);
		return false;
	}
	bi->kind = classify_backend(reply, bi);
	bi->min_wire_version = get_int(reply, "minWireVersion", 0);
	bi->max_wire_version = get_int(reply, "maxWireVersion", 0);
	bi->max_bson_object_size = get_int(reply, "maxBsonObjectSize", 16 * 1024 * 1024);
	bi->max_message_size_bytes = get_int(reply, "maxMessageSizeBytes", WIRE_MAX_MESSAGE);
	bi->max_write_batch_size = get_int(reply, "maxWriteBatchSize", 100000);
	bi->logical_session_timeout_minutes = get_int(reply, "logicalSessionTimeoutMinutes", -1);
	if (bi->max_wire_version < 6) {
		snprintf(err, errlen, "backend maxWireVersion %d is below 6 (OP_MSG, MongoDB 3.6)",
			 bi->max_wire_version);
		return false;
	}
	if (bi->max_message_size_bytes > WIRE_MAX_MESSAGE)
		bi->max_message_size_bytes = WIRE_MAX_MESSAGE;
	bi->known = true;
	return true;
}

bool handshake_info_differs(const struct backend_info *a, const struct backend_info *b)
{
	return (a->kind == BACKEND_STANDALONE) != (b->kind == BACKEND_STANDALONE) ||
	       a->min_wire_version != b->min_wire_version ||
	       a->max_wire_version != b->max_wire_version ||
	       a->max_bson_object_size != b->max_bson_object_size ||
	       a->max_message_size_bytes != b->max_message_size_bytes ||
	       a->max_write_batch_size != b->max_write_batch_size ||
	       a->logical_session_timeout_minutes != b->logical_session_timeout_minutes;
}

const char *handshake_kind_name(enum backend_kind kind)
{
	static const char *const names[] = {"unknown", "standalone", "replica set primary",
					    "replica set member (not primary)", "mongos"};

	return names[kind];
}

bool handshake_client_reply(const bson_t *cmd, const char *cmd_name, const struct backend_info *bi,
			    int64_t connection_id, bool first_hello, bson_t *out)
{
	struct timeval tv;
	bson_iter_t it;

	if (!first_hello && bson_iter_init_find(&it, cmd, "client")) {
		wire_error_doc(out, MP_ERR(CLIENT_METADATA_CANNOT_BE_MUTATED),
			       "The client metadata document may only be sent in the first hello",
			       NULL);
		return false;
	}
	if (g.shutting_down) {
		/* As a mongos in quiesce mode: drivers mark the proxy Unknown, keep it
		 * in their topology, and select another one. */
		static const char *const labels[] = {"RetryableError", NULL};

		wire_error_doc(out, MP_ERR(SHUTDOWN_IN_PROGRESS),
			       "mongoplex: shutting down (draining); not accepting new operations",
			       labels);
		topover_append(out, "topologyVersion");
		return false;
	}
	gettimeofday(&tv, NULL);
	bson_init(out);
	if (strcmp(cmd_name, "hello") == 0)
		BSON_APPEND_BOOL(out, "isWritablePrimary", true);
	else
		BSON_APPEND_BOOL(out, "ismaster", true);
	if (get_bool(cmd, "helloOk"))
		BSON_APPEND_BOOL(out, "helloOk", true);
	if (bi->kind != BACKEND_STANDALONE || g.cfg.advertise_mongos)
		BSON_APPEND_UTF8(out, "msg", "isdbgrid");
	if (get_bool(cmd, "loadBalanced")) /* load-balancers.md: the proxy is the service */
		BSON_APPEND_OID(out, "serviceId", topover_process_id());
	topover_append(out, "topologyVersion");
	BSON_APPEND_INT32(out, "maxBsonObjectSize", bi->max_bson_object_size);
	BSON_APPEND_INT32(out, "maxMessageSizeBytes", bi->max_message_size_bytes);
	BSON_APPEND_INT32(out, "maxWriteBatchSize", bi->max_write_batch_size);
	BSON_APPEND_DATE_TIME(out, "localTime", (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000);
	if (bi->logical_session_timeout_minutes >= 0)
		BSON_APPEND_INT32(out, "logicalSessionTimeoutMinutes",
				  bi->logical_session_timeout_minutes);
	BSON_APPEND_INT64(out, "connectionId", connection_id);
	BSON_APPEND_INT32(out, "minWireVersion", bi->min_wire_version);
	BSON_APPEND_INT32(out, "maxWireVersion", bi->max_wire_version);
	BSON_APPEND_BOOL(out, "readOnly", false);
	BSON_APPEND_DOUBLE(out, "ok", 1.0);
	return true;
}
