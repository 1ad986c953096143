/* What the scheduler needs from a model: a table of functions over an opaque
 * context. The real engine (Qwen3 forward pass, its KV caches, tokenizer,
 * template, sampler) fills it in engine_inferno.c; the unit tests fill it with
 * a small deterministic fake, so the scheduler is tested without a model.
 *
 * Threading: forward, truncate and the sampler functions are called only from
 * the scheduler thread. tokenize, piece, is_eog and render are called from
 * HTTP threads concurrently and must not touch mutable state. */
#ifndef INF_SERVER_ENGINE_H
#define INF_SERVER_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/oai.h"
#include "util/err.h"

/* One forward call: rows of (token, position, sequence). */
typedef struct srv_batch {
    int n_rows;
    const int32_t *tokens; /* [n_rows] */
    const int32_t *pos;    /* [n_rows] */
    const int32_t *seq;    /* [n_rows] slot index 0..n_seq-1 */
    const uint8_t *logits; /* [n_rows] nonzero: this row's logits are wanted */
} srv_batch;

/* The shared prefix cache's counters (paged KV), for /metrics. */
typedef struct srv_cache_stats {
    int blocks_total, blocks_used;
    int block_size;
    long long lookups, prefix_hits, tokens_reused, evicted_blocks, cached_tokens;
} srv_cache_stats;

typedef struct srv_engine {
    void *ctx;
    int n_seq;    /* sequences (slots) with their own KV cache */
    int n_ctx;    /* positions per sequence */
    int n_vocab;
    int max_rows; /* rows one forward call may carry */
    const char *model_name;

    /* Runs the rows; sequence s must hold positions 0..p-1 before a row at
     * position p. logits receives [n_selected][n_vocab]. 0 or -1 + err. */
    int (*forward)(void *ctx, const srv_batch *b, float *logits, inf_err *err);
    /* Keeps the first n positions of sequence seq's cache. */
    void (*truncate)(void *ctx, int seq, int n);

    /* Optional, all three or none (NULL: each slot keeps its own cache for
     * its next request). A prefix cache shared by all sequences:
     * cache_release donates the first n positions of sequence seq (token ids
     * tokens[0..n)) to it and empties the sequence; cache_attach starts the
     * empty sequence seq with the longest cached prefix of tokens[0..n) and
     * returns its length; cache_stats reads the counters. */
    int (*cache_attach)(void *ctx, int seq, const int32_t *tokens, int n);
    void (*cache_release)(void *ctx, int seq, const int32_t *tokens, int n);
    void (*cache_stats)(void *ctx, srv_cache_stats *out);

    /* Text -> ids (malloc'd *ids). parse_special: "<|im_start|>" etc. become
     * their ids (rendered chat prompts) rather than plain text. */
    int (*tokenize)(void *ctx, const char *text, size_t n, bool parse_special, int32_t **ids,
                    int *n_ids, inf_err *err);
    /* Token id -> its bytes (byte-level BPE decoded); returns the length
     * (truncated to cap), 0 for ids out of range. */
    int (*piece)(void *ctx, int32_t id, char *buf, int cap);
    bool (*is_eog)(void *ctx, int32_t id);
    /* The chat template over the request's messages (and tools, kwargs),
     * with the generation prompt. *out is malloc'd. */
    int (*render)(void *ctx, const srv_request *r, char **out, srv_error *e);

    /* A sampler per request. new: the request's parameters and the seed to use;
     * accept: a token entered the sequence (prompt or generated), for the
     * penalties; sample: picks the next id from raw logits (which it may
     * modify). */
    void *(*sampler_new)(void *ctx, const srv_sampling *s, uint64_t seed);
    void (*sampler_accept)(void *smpl, int32_t id);
    int32_t (*sampler_sample)(void *smpl, float *logits, int n_vocab);
    void (*sampler_free)(void *smpl);
} srv_engine;

#endif
