/*
 * errors.c — the error table generated from MP_ERRORS (see errors.h).
 */
#include "core/errors.h"

const char *const mp_labels_overload[] = {"SystemOverloadedError", "RetryableError", NULL};
const char *const mp_labels_not_run[] = {"RetryableError", "RetryableWriteError", NULL};

const struct mp_error mp_errors[MP_ERR_COUNT] = {
#define MP_ERR_ROW(id, c, n, l) [MP_ERR_##id] = {.code = (c), .name = (n), .labels = (l)},
    MP_ERRORS(MP_ERR_ROW)
#undef MP_ERR_ROW
};
