/* batch.c — placeholder until the batcher lands: every find is forwarded. */
#include "pool/batch.h"

const char *batch_classify(const bson_t *find_cmd)
{
	(void)find_cmd;
	return "batching not built yet";
}

bool batch_try_submit(struct request *req, const bson_t *body)
{
	(void)req;
	(void)body;
	return false;
}

void batch_seal(struct request *batch_req)
{
	(void)batch_req;
}

void batch_on_reply(struct server *s, struct request *batch_req, uint8_t *data, size_t len)
{
	(void)s;
	(void)batch_req;
	(void)data;
	(void)len;
}

void batch_server_failed(struct request *batch_req, int code, const char *codename, const char *why)
{
	(void)batch_req;
	(void)code;
	(void)codename;
	(void)why;
}

void batch_expired(struct request *batch_req)
{
	(void)batch_req;
}

void batch_abandon(struct request *lookup_req)
{
	(void)lookup_req;
}
