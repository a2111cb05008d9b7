// clang-format off
// FUZZ_SOURCES: core/topover.c core/wire.c core/log.c core/stats.c core/globals.c core/crc32c.c core/bsonval.c core/errors.c
// FUZZ_SEEDS: tests/fuzz/seeds_topover.py
// clang-format on
/*
 * fuzz_topover.c — libFuzzer target for the awaitable-hello reader
 * (topover_parse_await, core/topover.c): the input is a hello command's
 * BSON (any bytes; only valid BSON reaches the parser, as in the proxy,
 * which validates every message first). Checks: the result is one of the
 * three kinds; a refusal carries a nonzero code, a codename and a message; an
 * accepted one has maxAwaitTimeMS >= 0 and counter >= 0, and a counter of
 * our own process that is not above ours; plain means neither field exists.
 * Any failed check aborts. Build and run: tests/fuzz/README.md.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/topover.h"
#include "core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bson_t cmd;
	struct topover_await a;
	struct wire_error err;
	bson_iter_t it;

	if (!bson_init_static(&cmd, data, size) || !bson_validate(&cmd, BSON_VALIDATE_NONE, NULL))
		return 0;
	memset(&err, 0, sizeof(err));
	switch (topover_parse_await(&cmd, &a, &err)) {
	case TOPOVER_PLAIN:
		if (bson_iter_init_find(&it, &cmd, "topologyVersion") ||
		    bson_iter_init_find(&it, &cmd, "maxAwaitTimeMS"))
			abort();
		break;
	case TOPOVER_AWAIT:
		if (a.max_await_ms < 0 || a.counter < 0 ||
		    (a.same_process && a.counter > topover_counter()))
			abort();
		break;
	case TOPOVER_REFUSE:
		if (err.code == 0 || err.codename == NULL || err.msg[0] == '\0')
			abort();
		break;
	default:
		abort();
	}
	return 0;
}
