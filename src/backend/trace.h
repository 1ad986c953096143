/* The tracing backend: wraps any backend, counts and times every op.
 *
 * inf_trace_format writes the histogram (op, calls, total ms, share of the
 * traced time), largest first; matmuls are listed per weight type and split
 * into decode (T = 1) and batched calls. */
#ifndef INF_BACKEND_TRACE_H
#define INF_BACKEND_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/backend.h"

/* A backend forwarding every op to `inner` (not owned) and timing it. NULL on
 * allocation failure. Free with inf_trace_free. */
inf_backend *inf_trace_wrap(const inf_backend *inner);
void inf_trace_free(inf_backend *tr);
void inf_trace_reset(inf_backend *tr);
const inf_backend *inf_trace_inner(const inf_backend *tr);
/* Whether be was made by inf_trace_wrap. */
bool inf_trace_is(const inf_backend *be);

/* The histogram as text (NUL-terminated, truncated to cap). Returns the length written. */
size_t inf_trace_format(const inf_backend *tr, char *buf, size_t cap);

#endif
