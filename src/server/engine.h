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

/* A paged engine's cache counters, for /metrics. */
typedef struct srv_kv_stats {
    long block_size, blocks_total, blocks_free;
    long prefix_lookups, prefix_hits, prefix_tokens_reused;
    long tree_nodes, tree_tokens, evictions;
    long ref_errors; /* pool references not accounted for by a sequence or the tree */
} srv_kv_stats;

typedef struct srv_engine {
    void *ctx;
    int n_seq; /* sequences (slots) with their own KV cache */
    int n_ctx; /* positions per sequence */
    int n_vocab;
    int max_rows; /* rows one forward call may carry */
    const char *model_name;
    const char *backend_name; /* e.g. "pool-avx2 x2"; may be NULL */

    /* Runs the rows; sequence s must hold positions 0..p-1 before a row at
     * position p. logits receives [n_selected][n_vocab]. 0 or -1 + err. */
    int (*forward)(void *ctx, const srv_batch *b, float *logits, inf_err *err);
    /* Keeps the first n positions of sequence seq's cache. */
    void (*truncate)(void *ctx, int seq, int n);

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

    /* Optional, for an engine whose sequences share a prefix cache (the
     * paged KV cache with its radix tree). When seq_begin is NULL the
     * scheduler reuses each slot's own cache by longest common prefix.
     * seq_begin: starts sequence seq for prompt[0..n), adopting the longest
     *   cached prefix (at most n-1 tokens); returns its length.
     * seq_reserve: makes n_new more positions of seq writable (evicting
     *   cached prefixes if needed); -1 + err when the pool is exhausted.
     * seq_publish: seq holds tokens[0..n): offer them to other requests now
     *   (called when a prompt is fully prefilled).
     * seq_end: the request on seq ended holding tokens[0..n): donate them to
     *   the prefix cache and release the sequence.
     * kv_stats: the counters. */
    int (*seq_begin)(void *ctx, int seq, const int32_t *prompt, int n);
    int (*seq_reserve)(void *ctx, int seq, int n_new, inf_err *err);
    void (*seq_publish)(void *ctx, int seq, const int32_t *tokens, int n);
    void (*seq_end)(void *ctx, int seq, const int32_t *tokens, int n);
    void (*kv_stats)(void *ctx, srv_kv_stats *st);
} srv_engine;

#endif
