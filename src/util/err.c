#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int inf_fail(inf_err *e, const char *fmt, ...) {
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int inf_fail_ctx(inf_err *e, const char *fmt, ...) {
    if (!e) return -1;
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old);
    return -1;
}

void inf_panic(const char *file, int line, const char *cond) {
    fprintf(stderr, "%s:%d: internal error: %s\n", file, line, cond);
    fflush(stderr);
    abort();
}
