/* The scheduler: one thread owns the model and its KV caches. Requests
 * (tasks) wait in a queue until one of N slots is free; every step runs one
 * batched forward holding one decode row for each generating slot plus a
 * chunk of some slot's prompt, so long prompts never stall running streams.
 * A new request goes to the free slot that can reuse the most of its prompt
 * (its own cache, or the shared prefix cache), so the next turn of a
 * conversation prefills only what is new. Every program generates through
 * it: `run` and `chat` are one-slot clients, `serve` puts HTTP in front.
 *
 * A task is shared by the thread that made it and the scheduler: both hold a
 * reference and the last release frees it. The scheduler appends released
 * text (whole UTF-8 from the streaming detokenizer, stop strings already cut)
 * and logprobs under the task's mutex and signals its condition; the client
 * reads from its own cursor (inf_task_wait). */
#ifndef INF_RUNTIME_SCHED_H
#define INF_RUNTIME_SCHED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "runtime/exec.h"
#include "runtime/sampler.h"
#include "runtime/text.h"

#define INF_MAX_STOPS 16
#define INF_MAX_TOP_LOGPROBS 20

/* When a grammar starts to constrain the output. */
typedef enum inf_gram_start {
    INF_GRAM_AT_ONCE,      /* from the first token */
    INF_GRAM_AFTER_THINK,  /* the prompt ends inside <think>: after the model's </think> */
    INF_GRAM_UNLESS_THINK, /* the model may open with <think> (its first token): then after
                              </think>, else at once */
} inf_gram_start;

#define INF_MAX_LOGIT_BIAS 1024

typedef struct inf_logit_bias {
    int32_t id;
    float bias;
} inf_logit_bias;

/* How to generate: what every program sets the same way for the same result. */
typedef struct inf_gen_params {
    inf_sampler_params sampling;     /* seed INF_SEED_RANDOM: the scheduler draws one */
    int max_tokens;                  /* -1: until the context ends */
    const char *stop[INF_MAX_STOPS]; /* stop strings (copied at inf_task_new) */
    int n_stop;
    /* Ends the reply right after this string, which stays in the text
     * (copied at inf_task_new; NULL: none): "</tool_call>" when only one
     * tool call is allowed. See inf_stop. */
    const char *end_after;
    /* Added to the logits of these tokens before anything reads them
     * (logprobs, the grammar, the sampler): OpenAI's logit_bias. Copied at
     * inf_task_new; ids must be below n_vocab (inf_sched_submit checks). */
    const inf_logit_bias *logit_bias; /* [n_logit_bias] */
    int n_logit_bias;
    bool logprobs;
    int top_logprobs; /* 0..INF_MAX_TOP_LOGPROBS */
    bool ignore_eos;  /* end-of-generation tokens are never picked (banned) */
    bool no_reuse;    /* prefill the whole prompt, reusing no cached prefix (bench) */
    /* Embed rather than generate: the task's result is the last prompt
     * token's final-normed hidden state (inf_task.embd, not normalized);
     * nothing is sampled. The prompt may fill the whole context. */
    bool embed;
    /* Speculative decoding's knobs (llama.cpp's speculative.n_max, n_min,
     * p_min); n_max -1: the engine's (inf_exec.spec). It never changes the
     * output, only how fast it comes. */
    inf_spec_params spec;
    /* The output must be a sentence of this grammar (NULL: free). Owned by
     * the task from inf_task_new on (freed with it, or on its failure). */
    inf_gram *grammar;
    inf_gram_start grammar_start;
    /* Called on the scheduler thread with the logits each token is sampled
     * from, before sampling (NULL: not called). */
    void (*on_logits)(void *ud, const float *logits, int n_vocab);
    void *ud;
} inf_gen_params;

/* inf_gen_params with llama.cpp's sampling defaults and no limits. */
inf_gen_params inf_gen_defaults(void);

typedef enum inf_finish { INF_FINISH_NONE, INF_FINISH_STOP, INF_FINISH_LENGTH } inf_finish;

/* "stop", "length" or "none". */
const char *inf_finish_name(inf_finish f);

/* Why a task failed: UNAVAILABLE (shutting down, out of memory or cache:
 * try again later; HTTP 503) or INTERNAL (the forward pass failed: 500). */
typedef enum inf_task_status {
    INF_TASK_OK,
    INF_TASK_UNAVAILABLE,
    INF_TASK_INTERNAL
} inf_task_status;

/* One generated token's log-probabilities, for `logprobs`. */
typedef struct inf_logprob {
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_id[INF_MAX_TOP_LOGPROBS];    /* [n_top] best first */
    float top_logprob[INF_MAX_TOP_LOGPROBS]; /* [n_top] */
} inf_logprob;

/* llama.cpp's timings. */
typedef struct inf_timings {
    int grammar_masks;          /* constrained steps whose sampled token was refused (mask built) */
    int grammar_masks_walk;     /* of those, masks computed by a trie walk (not cached) */
    double grammar_ms;          /* time in the grammar: checks, masks, resampling */
    double grammar_mask_ms_max; /* the slowest step's mask */
    int cache_n;                /* prompt tokens reused from a cache */
    int prompt_n;               /* prompt tokens evaluated */
    double prompt_ms;
    int predicted_n;
    double predicted_ms;
    int draft_n;        /* tokens drafted for speculative decoding */
    int draft_accepted; /* of those, taken as the output */
    int draft_steps;    /* forward calls that verified drafts */
} inf_timings;

typedef struct inf_task {
    /* Input, fixed before submit. */
    int32_t *prompt; /* [n_prompt] owned */
    int n_prompt;
    inf_gen_params p; /* stop strings, end_after and logit_bias point at the task's copies */
    inf_stop stop;
    inf_logit_bias *bias; /* [p.n_logit_bias] owned copy */

    /* Output, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    inf_buf text;    /* released text so far */
    inf_logprob *lp; /* [n_lp] one per generated token (when p.logprobs) */
    float *embd;     /* [n_embd] p.embed: the hidden state, once done */
    int n_embd;
    int n_lp, cap_lp;
    int n_gen;     /* tokens generated */
    uint64_t seed; /* the seed its sampler used */
    bool started;  /* holds a slot */
    bool done;
    inf_finish finish;
    /* Which of p.stop ended it (-1: none; an end-of-generation token, the
     * grammar's end, p.end_after or the length). */
    int stop_index;
    inf_task_status status; /* != INF_TASK_OK: failed, err says why */
    char err[512];
    inf_timings timings;

    atomic_bool cancelled; /* the client went away */
    atomic_int refs;
} inf_task;

/* A new task holding one reference for the caller; takes ownership of prompt
 * (malloc'd) and of p->grammar. Stop strings are copied. NULL when out of
 * memory (prompt and grammar are freed). */
inf_task *inf_task_new(int32_t *prompt, int n_prompt, const inf_gen_params *p);
/* Drops one reference; the last frees the task. NULL is a no-op. */
void inf_task_release(inf_task *t);

/* What a client reads of a task: text after its cursor, logprobs after its
 * cursor, and whether it ended. Waits up to wait_ms (-1: until something
 * new or the end) when there is nothing new. Advances the cursors. */
typedef struct inf_task_cursor {
    size_t text_pos;
    int lp_pos;
} inf_task_cursor;
typedef struct inf_task_update {
    char *text; /* malloc'd new text (NULL when none) */
    size_t n_text;
    int lp_from, lp_to; /* new logprobs are t->lp[lp_from..lp_to): written once, never moved */
    bool done;
} inf_task_update;
void inf_task_wait(inf_task *t, inf_task_cursor *c, int wait_ms, inf_task_update *u);

/* Counters for /metrics (llama.cpp's names), read under the scheduler's lock. */
typedef struct inf_sched_metrics {
    uint64_t prompt_tokens_total; /* prompt tokens evaluated */
    double prompt_seconds_total;
    uint64_t tokens_predicted_total;
    double tokens_predicted_seconds_total;
    uint64_t n_decode_total;      /* forward calls */
    uint64_t n_busy_slots_total;  /* sum over forward calls of slots in the batch */
    uint64_t n_tokens_max;        /* longest sequence seen */
    uint64_t cache_tokens_reused; /* prompt tokens served from a cache */
    int requests_processing;      /* gauge: tasks holding a slot */
    int requests_deferred;        /* gauge: tasks waiting */
    int kv_tokens;                /* gauge: positions held in all slots */
    uint64_t requests_finished_total;
    uint64_t requests_cancelled_total;
    uint64_t spec_steps_total;    /* speculative steps (forward calls verifying drafts) */
    uint64_t spec_drafted_total;  /* tokens drafted */
    uint64_t spec_accepted_total; /* of those, taken */
    bool has_kv_stats;
    inf_kv_stats kv; /* paged caches */
} inf_sched_metrics;

typedef struct inf_sched inf_sched;

/* Starts the scheduler thread over ex (borrowed; must outlive the scheduler)
 * with ex->n_seq slots. prefill_chunk bounds the prompt rows per step.
 * 0 or -1 with a message. */
int inf_sched_create(inf_sched **out, const inf_exec *ex, int prefill_chunk, inf_err *err);
/* Stops the thread: running and waiting tasks end UNAVAILABLE. NULL is a no-op. */
void inf_sched_free(inf_sched *s);

/* Queues a task (the scheduler takes its own reference). -1 with a message
 * when shutting down, the queue is full, or the prompt is empty or leaves
 * no room in the context. */
int inf_sched_submit(inf_sched *s, inf_task *t, inf_err *err);
/* Marks t as abandoned; its slot is freed at the next step. */
void inf_sched_cancel(inf_sched *s, inf_task *t);
/* A snapshot of the counters. */
void inf_sched_metrics_get(inf_sched *s, inf_sched_metrics *m);

/* What one slot is doing (GET /slots), as of the last step. */
typedef enum { INF_SLOT_IDLE, INF_SLOT_PREFILL, INF_SLOT_DECODE } inf_slot_state;
typedef struct inf_slot_info {
    int id;
    inf_slot_state state;
    int n_cache;       /* positions the slot's sequence holds */
    int n_prompt;      /* the running task's prompt tokens (0 when idle) */
    int n_prompt_done; /* of those, in the cache */
    int n_reused;      /* of those, taken from a cache */
    int n_gen;         /* tokens generated so far */
    int max_tokens;    /* the task's limit; -1: the context */
    double seconds;    /* since the task took the slot */
} inf_slot_info;
/* Copies min(cap, slots) slot snapshots into out; returns the slot count. */
int inf_sched_slots_get(inf_sched *s, inf_slot_info *out, int cap);

/* Helpers the scheduler uses, public for tests. */

/* Length of the common prefix of a and b. */
int inf_common_prefix(const int32_t *a, int na, const int32_t *b, int nb);
/* Log-softmax of logits[n_vocab] at id, and the k best (ids, logprobs), best
 * first, ties to the lower id. */
void inf_logprobs_from_logits(inf_logprob *out, const float *logits, int n_vocab, int32_t id,
                              int k);

#endif
