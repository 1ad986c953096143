/* A model bound for a backend, and its forward pass, whatever its
 * architecture.
 *
 * inf_model_open reads a model file (modelfile/) and binds it to its
 * architecture: the one file under model/arch_*.c that knows its tensor
 * names in GGUF and Hugging Face layout, its particular keys and its forward
 * pass (model/arch.h lists them). inf_model_create binds the weights for a
 * backend; inf_model_forward runs a batch of rows: each row is one token
 * with its own position and its own sequence (a KV cache). A prefill is T
 * rows of one sequence at consecutive positions; a batched decode step is
 * one row from each of several sequences. */
#ifndef INF_MODEL_MODEL_H
#define INF_MODEL_MODEL_H

#include <stdint.h>

#include "backend/backend.h"
#include "modelfile/model.h"
#include "util/err.h"

struct inf_arch;

typedef struct inf_model {
    const struct inf_arch *arch;
    const inf_model_file *file; /* borrowed; must outlive the model */
    const inf_backend *be;      /* borrowed, complete (every slot filled) */
    inf_hparams hp;
    int n_ctx;    /* positions the RoPE tables cover */
    int max_rows; /* rows one forward call may carry */
    inf_attn_shape attn;
    int n_rot;       /* RoPE'd leading dims of a head: hp.n_rot, or head_dim */
    float *rope_cos; /* [n_ctx][n_rot/2], filled for positions < rope_filled */
    float *rope_sin; /* [n_ctx][n_rot/2] */
    int rope_filled; /* grown by inf_model_forward (one call at a time per model) */
    void *w;         /* the architecture's bound weights and activations */
} inf_model;

/* Opens a model file (inf_modelfile_open) and binds it to its architecture
 * (inf_model_bind_file). Free with inf_model_close. Returns -1 with a
 * message naming the file, the field or the tensor. */
int inf_model_open(inf_model_file **out, const char *path, inf_err *err);

/* Finds mf's architecture by the name the file gives (general.architecture,
 * config.json model_type) and lets it complete mf->hp (n_vocab from the
 * embedding, the tied head, its particular keys) and check that every tensor
 * it needs is there with its shape. Returns -1 with a message naming the
 * architecture (and the ones inferno runs), the key or the tensor. */
int inf_model_bind_file(inf_model_file *mf, inf_err *err);

/* The name inferno gives mf's architecture ("qwen3", "qwen3moe"), or NULL
 * when it has none. */
const char *inf_model_arch_name(const inf_model_file *mf);

/* Binds the weights of mf (opened by inf_model_open) for backend be (which
 * must be complete; see inf_backend_complete), checking every tensor's
 * presence, type and shape, and allocates every buffer: RoPE tables for
 * n_ctx positions and activations for max_rows rows. be->prepare_weight runs
 * once per matrix (per expert for MoE). Returns 0, or -1 with a message
 * naming the tensor and what was expected. Free with inf_model_free (NULL is
 * a no-op). */
int inf_model_create(inf_model **out, const inf_model_file *mf, const inf_backend *be, int n_ctx,
                     int max_rows, inf_err *err);
void inf_model_free(inf_model *m);

/* Floats of one recurrent layer's state for one sequence (0 when the model
 * has no recurrent layers): a Gated DeltaNet layer's conv history
 * [ssm_d_conv - 1][2 * n_k_heads * d_k + n_v_heads * d_v], then its
 * delta-rule state [n_v_heads][d_k][d_v]. The KV cache keeps it beside the
 * attention layers' K/V (kv_view.h's state). */
size_t inf_model_state_floats(const inf_hparams *hp);
/* Floats of one row of a recurrent layer's rewind log (kv_cache.h's
 * inf_kv_cache_mark; 0 without recurrent layers): what redoing the row's
 * update of the state takes, a Gated DeltaNet layer's conv input
 * [2 * n_k_heads * d_k + n_v_heads * d_v] and its decay and write strength
 * [n_v_heads] each. A layer's log of R rows holds R conv inputs, then R
 * decays, then R strengths. */
size_t inf_model_log_floats(const inf_hparams *hp);

/* Brings one sequence's recurrent states (kv: its views, [n_layer]) from
 * position from to n by redoing the rows from..n-1 its views' logs hold
 * (from its mark on): after the KV cache cut a speculative step back to the
 * mark (inf_kv_cache_truncate). The states get the bits decoding those rows
 * gave them. Nothing is allocated. */
void inf_model_replay(inf_model *m, const inf_kv_view *kv, int from, int n);

/* The layers that hold K/V rows (not recurrent). */
int inf_model_kv_layers(const inf_hparams *hp);

/* What a row of a batch hands back (inf_batch.logits[r]). */
enum {
    INF_OUT_NONE = 0,   /* nothing: the row only enters the cache */
    INF_OUT_LOGITS = 1, /* its logits (the head over the final-normed state) */
    INF_OUT_HIDDEN = 2, /* its final-normed hidden state (embeddings: last-token pooling) */
};

/* One forward call's rows. Rows of the same sequence at consecutive
 * positions form a span whose attention runs as one (flash prefill when it
 * has more than one row, fused decode for one row), unless decode marks
 * them as decode rows. */
typedef struct inf_batch {
    int n_rows;
    const int32_t *tokens; /* [n_rows] */
    const int32_t *pos;    /* [n_rows] position of the row in its sequence */
    const int32_t *seq;    /* [n_rows] which sequence: index into the kv views */
    const uint8_t *logits; /* [n_rows] INF_OUT_*; NULL: logits for the last row only */
    /* [n_rows] or NULL: a row marked 1 is a decode row, a one-row span of
     * its own even beside rows of its sequence at the next positions. A
     * speculative step's verification rows: each computed with the kernels
     * of the decode step it stands for, so its logits are those bits. */
    const uint8_t *decode;
    float *hidden; /* out [n_hidden][n_embd]: the INF_OUT_HIDDEN rows in batch order (NULL
                      when no row asks) */
} inf_batch;

/* Runs the model over the batch. kv[s * n_layer + l] is sequence s's cache
 * at layer l; it must already hold positions 0..p-1 of every span starting at
 * position p, and room for the batch's rows, which the call writes.
 * logits receives [n_logits][n_vocab] floats, the INF_OUT_LOGITS rows in
 * batch order; b->hidden the INF_OUT_HIDDEN rows' final-normed states. A
 * model without an output head (hp.no_head: an embedding model) refuses
 * logits rows. Nothing is allocated here (the backend's ops may grow their
 * scratch on the first use of a larger batch). Returns 0, or -1 with a message for a
 * batch that does not fit (row count, token id, position, sequence index) or
 * for memory the backend could not get ("out of memory: ..."). After -1 the
 * logits and the cache rows at the batch's positions are unspecified (the
 * caller treats them as not written); the model and the backend stay usable,
 * and the next call runs normally. */
int inf_model_forward(inf_model *m, const inf_batch *b, const inf_kv_view *kv, int n_seq,
                      float *logits, inf_err *err);

/* What one decode step reads, for benchmarks: the bytes of every weight a
 * token goes through (the chosen experts only: n_expert_used of n_expert),
 * the output head whole, one embedding row; and the type of the model's
 * representative FFN matrix. */
typedef struct inf_model_facts {
    uint64_t decode_bytes;
    inf_dtype ffn_type;
} inf_model_facts;
void inf_model_facts_get(const inf_model_file *mf, inf_model_facts *f);

/* The GGUF file of mf's model, as a list of tensors in llama.cpp's naming:
 * each its name, its layer (-1 outside the blocks), its shape (ne fastest
 * first) and the runs of rows of mf's tensors it is made of, in order. For
 * a GGUF file each tensor is itself; a Hugging Face folder's architecture
 * maps its names, and may stack tensors (experts into 3-D tensors) or split
 * them (a fused gate_up into gate and up). A tied head stored beside the
 * embedding is left out, as transformers ignores it. */
typedef struct inf_rows {
    const inf_tensor *src;
    int64_t row0, n_rows; /* rows of src (a row: ne[0] elements) */
} inf_rows;
/* What a plan tensor's values are made of beside the rows it copies (the
 * Qwen3.5 hybrids: llama.cpp's converter stores other values than
 * transformers). Applied to each row after it is read as f32: first the
 * permutation, then the map. */
typedef enum inf_row_map {
    INF_ROW_COPY = 0,
    INF_ROW_ONE_PLUS, /* 1 + w: a zero-centred RMSNorm weight as its multiplier */
    INF_ROW_NEG_EXP,  /* -exp(w): A_log as A */
} inf_row_map;

typedef struct inf_gguf_tensor {
    char name[64];
    int layer;
    int n_dims;
    int64_t ne[4];
    int n_runs;
    inf_rows *runs;  /* [n_runs] owned; their rows sum to ne[1]·ne[2]·ne[3] */
    int32_t *perm;   /* [ne[0]] owned, or NULL: element i of a row is the source row's perm[i] */
    inf_row_map map; /* then each element mapped */
} inf_gguf_tensor;
typedef struct inf_gguf_plan {
    inf_gguf_tensor *t;
    int n, cap;
} inf_gguf_plan;

/* -1 with a message when the architecture cannot write some tensor as GGUF. */
int inf_model_gguf_plan(const inf_model_file *mf, inf_gguf_plan *p, inf_err *err);
void inf_gguf_plan_free(inf_gguf_plan *p);
/* For the architectures' plans: a whole tensor under a new name; a tensor of
 * n_dims/ne made of runs (copied). -1 when out of memory. */
int inf_gguf_plan_add(inf_gguf_plan *p, const char *name, int layer, const inf_tensor *src);
int inf_gguf_plan_add_runs(inf_gguf_plan *p, const char *name, int layer, int n_dims,
                           const int64_t *ne, const inf_rows *runs, int n_runs);

#endif
