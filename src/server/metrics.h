/* /metrics: the scheduler's counters in Prometheus text format, under
 * llama.cpp's metric names (llamacpp:*), plus inferno's own (inferno:*). */
#ifndef INF_SERVER_METRICS_H
#define INF_SERVER_METRICS_H

#include "runtime/sched.h"

/* HTTP-side counters, kept by the server. */
typedef struct srv_http_counts {
    unsigned long requests_total; /* every HTTP request answered */
    unsigned long errors_total;   /* answered with a 4xx/5xx status */
} srv_http_counts;

/* The exposition text (malloc'd); n_ctx_total is the positions of all slots. */
char *srv_metrics_text(const inf_sched_metrics *m, const srv_http_counts *h, long n_ctx_total);

#endif
