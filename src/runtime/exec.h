/* What the scheduler drives: a model with its caches, tokenizer, chat
 * template and sampler, as a table of functions over an opaque context. The
 * real one (exec_model.c: an architecture's forward pass over the KV caches
 * of kv/) is built by inf_engine_open; the unit tests fill the table with a
 * small deterministic fake, so the scheduler is tested without a model.
 *
 * Threading: forward, the seq_* functions and the sampler functions are
 * called only from the scheduler thread. tokenize, piece, is_eog and render
 * are called from other threads concurrently and must not touch mutable
 * state. */
#ifndef INF_RUNTIME_EXEC_H
#define INF_RUNTIME_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/kv_cache.h"     /* inf_kv_stats */
#include "model/model.h"     /* INF_OUT_* */
#include "modelfile/model.h" /* inf_pooling */
#include "runtime/sampler.h"
#include "runtime/spec_params.h"
#include "util/err.h"

/* One forward call: rows of (token, position, sequence). */
typedef struct inf_exec_batch {
    int n_rows;
    const int32_t *tokens; /* [n_rows] */
    const int32_t *pos;    /* [n_rows] */
    const int32_t *seq;    /* [n_rows] slot index 0..n_seq-1 */
    const uint8_t *logits; /* [n_rows] INF_OUT_*: what the row hands back */
    /* [n_rows] or NULL: 1 marks a decode row, computed as a one-row span even
     * beside its sequence's next position (speculative verification) */
    const uint8_t *decode;
    float *hidden; /* out [n_hidden][n_embd]: the final-normed states of the INF_OUT_HIDDEN rows */
} inf_exec_batch;

/* What a chat prompt is rendered from: the messages (an array of
 * {"role", "content"} with string or null content), optional tools, and
 * extra template variables (chat_template_kwargs: enable_thinking, ...). */
typedef struct inf_chat_input {
    const json_t *messages;
    const json_t *tools;  /* NULL: none */
    const json_t *kwargs; /* NULL: none */
} inf_chat_input;

typedef struct inf_exec {
    void *ctx;
    int n_seq; /* sequences (slots), each with its own KV cache */
    int n_ctx; /* positions per sequence */
    int n_vocab;
    int max_rows;        /* rows one forward call may carry */
    int n_embd;          /* the hidden state's width; 0: cannot embed */
    bool no_head;        /* an embedding model: it cannot generate */
    int32_t embd_eos;    /* appended to a text to embed (the tokenizer's add_eos rule); -1: none */
    inf_pooling pooling; /* as the model file states it */
    /* The sampling a request gets when it names none: the model file's
     * recommendation (rec_set: INF_REC_* it stated) over llama.cpp's. */
    inf_sampler_params sampling;
    unsigned rec_set;
    const char *model_name;
    const char *model_path;    /* may be NULL */
    const char *chat_template; /* the model's Jinja source; may be NULL */
    const char *backend_name;  /* e.g. "pool-avx2 x2"; may be NULL */
    /* The model file as read (format, architecture, hyperparameters,
     * tensors, metadata), for what servers show about the model (Ollama's
     * /api/show, /api/tags); NULL in fakes. */
    const struct inf_model_file *model_file;
    /* Speculative decoding: the drafter (INF_SPEC_NONE: off), the knobs a
     * request gets when it sets none, and for INF_SPEC_DRAFT the draft
     * model's table (forward, seq_begin, seq_reserve, seq_truncate, seq_end,
     * seq_reset, n_ctx, max_rows; the same vocabulary) and its name. */
    inf_spec_kind spec_kind;
    inf_spec_params spec;
    const struct inf_exec *draft;
    const char *draft_name;

    /* Runs the rows; sequence s must hold positions 0..p-1 before a row at
     * position p, and have room reserved for it. The rows' tokens enter the
     * caches. logits receives [n_logits][n_vocab], b->hidden [n_hidden][n_embd]
     * (rows in batch order). 0 or -1 + err. */
    int (*forward)(void *ctx, const inf_exec_batch *b, float *logits, inf_err *err);

    /* The cache of sequence seq, across requests:
     * seq_match: how many leading tokens of prompt[0..n) seq could reuse
     *   (its own tokens, or the shared prefix cache); chooses a slot.
     * seq_begin: starts seq for prompt[0..n), keeping at most max_keep of
     *   the matched tokens; returns how many it kept.
     * seq_reserve: makes n_new more positions of seq writable (a paged pool
     *   evicts cached prefixes if it must); -1 + err when it cannot.
     * seq_publish: the prompt is prefilled: offer seq's tokens to other
     *   requests now.
     * seq_checkpoint_pos (optional): where a prompt of n tokens should pause
     *   so the cache can keep the state there (models with recurrent layers:
     *   the state is kept only at positions a forward call ends at), or -1;
     *   the prefill ends a chunk there and calls seq_checkpoint.
     * seq_end: the request on seq ended: donate its tokens to the prefix
     *   cache (paged) or keep them for the next request (basic).
     * seq_reset: forget everything seq holds (after a failed forward).
     * kv_stats: the counters (NULL: none). */
    int (*seq_match)(void *ctx, int seq, const int32_t *prompt, int n);
    int (*seq_begin)(void *ctx, int seq, const int32_t *prompt, int n, int max_keep);
    int (*seq_reserve)(void *ctx, int seq, int n_new, inf_err *err);
    void (*seq_publish)(void *ctx, int seq);
    int (*seq_checkpoint_pos)(void *ctx, int n_prompt);
    void (*seq_checkpoint)(void *ctx, int seq);
    void (*seq_end)(void *ctx, int seq);
    void (*seq_reset)(void *ctx, int seq);
    /* seq_truncate (NULL: the model cannot, its recurrent layers keep a
     * state and the caches keep no rewind log): keep positions 0..n-1 of
     * seq, forget the rest.
     * seq_mark (NULL: not needed): a speculative step starts on seq; with
     *   recurrent layers seq_truncate may then cut back to any position from
     *   what seq holds now to INF_SPEC_MAX_DRAFT + 1 rows past it, and only
     *   there (the state is kept here and the rows after it logged). */
    void (*seq_truncate)(void *ctx, int seq, int n);
    void (*seq_mark)(void *ctx, int seq);
    void (*kv_stats)(void *ctx, inf_kv_stats *st);

    /* Text -> ids (malloc'd *ids), with the model's BOS rule. parse_special:
     * "<|im_start|>" etc. become their ids (rendered chat prompts) rather
     * than plain text. */
    int (*tokenize)(void *ctx, const char *text, size_t n, bool parse_special, int32_t **ids,
                    int *n_ids, inf_err *err);
    /* Token id -> its bytes (byte-level BPE decoded); returns the length
     * (truncated to cap), 0 for ids out of range. */
    int (*piece)(void *ctx, int32_t id, char *buf, int cap);
    bool (*is_eog)(void *ctx, int32_t id);
    /* Control tokens (<|im_start|> ...): never text a grammar may allow.
     * NULL: none. */
    bool (*is_control)(void *ctx, int32_t id);
    /* The chat template over in, with the generation prompt. *out is
     * malloc'd. -1 + err when the model has none or the template fails. */
    int (*render)(void *ctx, const inf_chat_input *in, char **out, inf_err *err);

    /* A sampler per request. new: the request's parameters with a concrete
     * seed (NULL when out of memory); accept: a token entered the sequence
     * (prompt or generated), for the penalties; sample: picks the next id
     * from raw logits (which it may modify). */
    void *(*sampler_new)(void *ctx, const inf_sampler_params *p);
    void (*sampler_accept)(void *smpl, int32_t id);
    int32_t (*sampler_sample)(void *smpl, float *logits, int n_vocab);
    /* sampler_dist: the distribution sample draws from (inf_sampler_dist:
     * ids and probs of n_vocab entries; returns how many are kept);
     * sampler_uniform: a number in [0, 1) from the sampler's generator.
     * Both NULL in fakes: then only greedy drafts are verified. */
    int (*sampler_dist)(void *smpl, const float *logits, int n_vocab, int32_t *ids, double *probs);
    double (*sampler_uniform)(void *smpl);
    void (*sampler_free)(void *smpl);
} inf_exec;

/* The most cached tokens a prompt of n tokens may reuse: n - 2. The last
 * prompt token always runs (its logits are needed), and at least two run, so
 * that they form a prefill span: a one-row span takes the decode attention,
 * which sums in another order. So a prompt gives the same bits cold, warm,
 * or after a reused prefix, in every program. */
static inline int inf_exec_max_reuse(int n) {
    return n >= 2 ? n - 2 : 0;
}

#endif
