/* Errors and always-on checks.
 *
 * Library functions that can fail on input return int (0 on success, -1 on
 * failure) and take an `inf_err *` that receives one human-readable line
 * naming the file/field and what was expected. The library never exits and
 * never prints to stdout; the program decides what to do with the message. */
#ifndef INF_UTIL_ERR_H
#define INF_UTIL_ERR_H

#include <stdarg.h>

typedef struct inf_err {
    char msg[1024];
} inf_err;

/* Formats the message into e (if e is not NULL) and returns -1, so that
 * `return inf_fail(err, "...", ...);` reads as one statement. */
int inf_fail(inf_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to an existing message (adds context on the way up). */
int inf_fail_ctx(inf_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For bugs, never for file contents: prints file:line: condition and aborts. */
_Noreturn void inf_panic(const char *file, int line, const char *cond);
#define INF_ASSERT(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) inf_panic(__FILE__, __LINE__, #cond);                                         \
    } while (0)

#endif
