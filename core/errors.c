/*
 * errors.c — the error table generated from MP_ERRORS (see errors.h), and
 * docs/errors.md generated from it.
 */
#include "core/errors.h"

const char *const mp_labels_overload[] = {"SystemOverloadedError", "RetryableError", NULL};
const char *const mp_labels_not_run[] = {"RetryableError", "RetryableWriteError", NULL};

const struct mp_error mp_errors[MP_ERR_COUNT] = {
#define MP_ERR_ROW(id, c, n, l, w)                                                                 \
	[MP_ERR_##id] = {.code = (c), .name = (n), .labels = (l), .when = (w)},
    MP_ERRORS(MP_ERR_ROW)
#undef MP_ERR_ROW
};

/* A table cell: '|' would end the cell. */
static void md_cell(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', out);
		fputc(*s, out);
	}
}

void mp_errors_write_markdown(FILE *out)
{
	fprintf(out,
		"# Errors mongoplex itself returns\n\n"
		"<!-- Generated from MP_ERRORS in core/errors.h by `mongoplex --write-errors-md`;\n"
		"     do not edit: run scripts/gen-docs.sh. -->\n\n"
		"Every refusal is an OP_MSG reply `{ok: 0, errmsg, code, codeName, errorLabels?}` "
		"to the request that caused it; every `errmsg` starts with `" MP_ERRMSG_PREFIX
		"`. The connection stays usable unless the framing itself is broken (then it "
		"is closed and the log says why). Errors from the backend reach the client "
		"unchanged. Writes are never retried by the proxy.\n\n"
		"Labels: the `errorLabels` of the proxy's own refusal of a request that never "
		"reached a backend. A forwarded request that fails on the network (6 "
		"`HostUnreachable`, 89 `NetworkTimeout`, 133 `FailedToSatisfyReadPreference`) "
		"carries `RetryableWriteError` only when it is a retryable write (it has a "
		"`txnNumber` outside a transaction), so a driver retries it once elsewhere.\n\n"
		"| code | codeName | labels | when |\n"
		"|---|---|---|---|\n");
	for (int i = 0, last = -1; i < MP_ERR_COUNT; i++) {
		const struct mp_error *e = NULL;

		/* In code order: the next code above the last one written. */
		for (int k = 0; k < MP_ERR_COUNT; k++)
			if (mp_errors[k].code > last && (e == NULL || mp_errors[k].code < e->code))
				e = &mp_errors[k];
		last = e->code;

		fprintf(out, "| %d | `%s` | ", e->code, e->name);
		for (int j = 0; e->labels != NULL && e->labels[j] != NULL; j++)
			fprintf(out, "%s`%s`", j ? ", " : "", e->labels[j]);
		fprintf(out, " | ");
		md_cell(out, e->when);
		fprintf(out, " |\n");
	}
	fprintf(out, "\nHow overload errors arise and how drivers handle them: "
		     "[admission.md](admission.md).\n");
}
