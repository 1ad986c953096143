/* The scheduler: one thread owns the engine (model and KV caches). Requests
 * wait in a queue until one of N slots is free; every step runs one batched
 * forward holding one decode row for each generating slot plus a chunk of
 * some slot's prompt, so long prompts never stall running streams. A slot
 * keeps its tokens' KV after a request ends, and a new request goes to the
 * free slot sharing the longest token prefix with it, so the next turn of a
 * conversation prefills only what is new.
 *
 * A task is shared by the HTTP thread that made it and the scheduler: both
 * hold a reference and the last release frees it. The scheduler appends
 * released text (whole UTF-8, stop strings already cut) and logprobs under
 * the task's mutex and signals its condition; the HTTP side reads from its
 * own cursor. */
#ifndef INF_SERVER_SCHED_H
#define INF_SERVER_SCHED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/engine.h"
#include "server/oai.h"
#include "server/text.h"

typedef enum srv_finish { SRV_FINISH_NONE, SRV_FINISH_STOP, SRV_FINISH_LENGTH } srv_finish;

typedef struct srv_task {
    /* Input, fixed before submit. */
    int32_t *prompt; /* [n_prompt] owned */
    int n_prompt;
    srv_sampling samp;
    int max_tokens; /* -1: until the context ends */
    srv_stop stop;
    bool want_logprobs;
    int top_logprobs;
    bool ignore_eos;

    /* Output, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_buf text;    /* released text so far */
    srv_logprob *lp; /* [n_lp] one per generated token (when want_logprobs) */
    int n_lp, cap_lp;
    int n_gen;    /* tokens generated */
    bool started; /* holds a slot */
    bool done;
    srv_finish finish;
    srv_error err; /* err.status != 0: failed */
    srv_timings timings;

    atomic_bool cancelled; /* the client went away */
    atomic_int refs;
} srv_task;

/* A new task holding one reference for the caller; takes ownership of prompt
 * (malloc'd). Stop strings are copied. NULL when out of memory. */
srv_task *srv_task_new(int32_t *prompt, int n_prompt, const srv_request *r);
/* Drops one reference; the last frees the task. */
void srv_task_release(srv_task *t);

/* Counters for /metrics (llama.cpp's names), read under the scheduler's lock. */
typedef struct srv_metrics {
    uint64_t prompt_tokens_total; /* prompt tokens evaluated */
    double prompt_seconds_total;
    uint64_t tokens_predicted_total;
    double tokens_predicted_seconds_total;
    uint64_t n_decode_total;      /* forward calls */
    uint64_t n_busy_slots_total;  /* sum over forward calls of slots in the batch */
    uint64_t n_tokens_max;        /* longest sequence seen */
    uint64_t cache_tokens_reused; /* prompt tokens served from a slot's cache */
    int requests_processing;      /* gauge: tasks holding a slot */
    int requests_deferred;        /* gauge: tasks waiting */
    int kv_tokens;                /* gauge: positions held in all slots */
    uint64_t requests_finished_total;
    uint64_t requests_cancelled_total;
    bool has_kv_stats;
    srv_kv_stats kv; /* paged engines */
} srv_metrics;

typedef struct srv_sched srv_sched;

/* Starts the scheduler thread over eng (borrowed; must outlive the
 * scheduler) with eng->n_seq slots. prefill_chunk bounds the prompt rows per
 * step. 0 or -1 with a message. */
int srv_sched_create(srv_sched **out, const srv_engine *eng, int prefill_chunk, inf_err *err);
/* Stops the thread: running and waiting tasks end with a 503. NULL is a no-op. */
void srv_sched_free(srv_sched *s);

/* Queues a task (the scheduler takes its own reference). -1 when shutting down. */
int srv_sched_submit(srv_sched *s, srv_task *t);
/* Marks t as abandoned; its slot is freed at the next step. */
void srv_sched_cancel(srv_sched *s, srv_task *t);
/* A snapshot of the counters. */
void srv_sched_metrics(srv_sched *s, srv_metrics *m);

/* Helpers the scheduler uses, public for tests. */

/* Length of the common prefix of a and b. */
int srv_common_prefix(const int32_t *a, int na, const int32_t *b, int nb);
/* Log-softmax of logits[n_vocab] at id, and the k best (ids, logprobs), best
 * first, ties to the lower id. */
void srv_logprobs_from_logits(srv_logprob *out, const float *logits, int n_vocab, int32_t id,
                              int k);

#endif
