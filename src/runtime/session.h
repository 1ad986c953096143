/* One conversation with the model: a KV cache (basic or paged), the tokens it holds, a
 * sampler, and the generation loop (prefill, then sample → emit → decode).
 *
 * The session remembers which tokens its cache holds, so a new prompt that
 * starts with them (the next turn of a chat, rendered whole) only prefills
 * what is new. Everything is allocated at creation; generating allocates
 * nothing. */
#ifndef INF_RUNTIME_SESSION_H
#define INF_RUNTIME_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "kv/kv_cache.h"
#include "model/qwen3.h"
#include "runtime/sampler.h"
#include "util/err.h"

typedef struct inf_session {
    inf_qwen3 *model;     /* borrowed */
    inf_kv_cache *kv;     /* owned: basic or paged behind one interface */
    inf_sampler *sampler; /* owned */
    int n_ctx;
    int32_t *tokens;      /* [n_ctx] what the cache holds, kv->n_past of them */
    int32_t *pos, *seq;   /* [max_rows] batch scratch */
    float *logits;        /* [n_vocab] logits after the last token fed */
    /* counters of the last inf_session_generate call */
    int n_prompt_eval;    /* prompt tokens actually computed (after prefix reuse) */
    int n_prompt_reused;  /* prompt tokens found in the cache */
    int n_gen;            /* tokens sampled */
    double t_prompt_s, t_gen_s;
} inf_session;

/* A session over model m with a cache of n_ctx positions (at most the
 * model's n_ctx) and sampler parameters sp. Returns 0, or -1 with a message.
 * Free with inf_session_free (NULL is a no-op); m must outlive it. */
int inf_session_create(inf_session **out, inf_qwen3 *m, int n_ctx, const inf_sampler_params *sp,
                       inf_err *err);
/* The same with a choice of cache (kv NULL: basic). */
int inf_session_create_kv(inf_session **out, inf_qwen3 *m, int n_ctx, const inf_sampler_params *sp,
                          const inf_kv_opts *kv, inf_err *err);
void inf_session_free(inf_session *s);

/* Makes the cache hold exactly tokens[0..n): keeps the longest common prefix
 * with what it holds, computes the rest in chunks of the model's max_rows
 * (always at least the last token, whose logits end in s->logits).
 * Returns 0, or -1 when n is 0 or does not fit the context (the message
 * says both numbers). */
int inf_session_prefill(inf_session *s, const int32_t *tokens, int n, inf_err *err);

/* Feeds one token after what the cache holds; its logits end in s->logits.
 * Returns -1 when the context is full. */
int inf_session_decode(inf_session *s, int32_t token, inf_err *err);

typedef enum inf_stop_reason {
    INF_STOP_EOG,      /* the model ended its turn/text ("stop") */
    INF_STOP_LENGTH,   /* n_predict reached, or the context is full ("length") */
    INF_STOP_CALLER,   /* on_token asked to stop */
} inf_stop_reason;

/* "stop", "length" or "caller". */
const char *inf_stop_reason_name(inf_stop_reason r);

typedef struct inf_gen_opts {
    int n_predict;   /* tokens to generate at most; -1: until the context is full */
    bool ignore_eos; /* keep going past end-of-generation tokens */
    /* End-of-generation test (NULL: never). */
    bool (*is_eog)(void *ud, int32_t token);
    /* Called with each sampled token that is kept (an end-of-generation token
     * that stops the run is not passed). Return nonzero to stop. */
    int (*on_token)(void *ud, int32_t token);
    /* Called with the logits each token is sampled from (NULL: not called). */
    void (*on_logits)(void *ud, const float *logits, int n_vocab);
    void *ud;
} inf_gen_opts;

/* Prefills prompt[0..n_prompt) (reusing the cached prefix), feeds its tokens
 * to the sampler's penalty window, then samples until end-of-generation,
 * n_predict or a full context. Sampled tokens that were emitted are in the
 * cache afterwards (except the very last one, which was never fed), so the
 * next call's prompt can continue the conversation. Sets the counters and
 * *reason. Returns 0, or -1 with a message (prompt over the context, ...). */
int inf_session_generate(inf_session *s, const int32_t *prompt, int n_prompt,
                         const inf_gen_opts *o, inf_stop_reason *reason, inf_err *err);

#endif
