/* Qwen3: the weights bound for a backend, and the forward pass.
 *
 * The forward pass is written once over backend ops and takes a batch of
 * rows: each row is one token with its own position and its own sequence
 * (a KV cache). A prefill is T rows of one sequence at consecutive positions;
 * a batched decode step is one row from each of several sequences. Matmuls
 * run over all rows at once; attention runs per sequence. */
#ifndef INF_MODEL_QWEN3_H
#define INF_MODEL_QWEN3_H

#include <stdint.h>

#include "backend/backend.h"
#include "modelfile/model.h"
#include "util/err.h"

typedef struct inf_qwen3_layer {
    inf_weight wq;     /* [n_head*head_dim][n_embd] */
    inf_weight wk;     /* [n_head_kv*head_dim][n_embd] */
    inf_weight wv;     /* [n_head_kv*head_dim][n_embd] */
    inf_weight wo;     /* [n_embd][n_head*head_dim] */
    inf_weight w_gate; /* [n_ff][n_embd] */
    inf_weight w_up;   /* [n_ff][n_embd] */
    inf_weight w_down; /* [n_embd][n_ff] */
    float *attn_norm;  /* [n_embd] (owned f32 copy, whatever the file's type) */
    float *ffn_norm;   /* [n_embd] */
    float *q_norm;     /* [head_dim] Qwen3: per-head RMSNorm of q, before RoPE */
    float *k_norm;     /* [head_dim] */
} inf_qwen3_layer;

typedef struct inf_qwen3 {
    const inf_model_file *file; /* borrowed; must outlive the model */
    const inf_backend *be;      /* borrowed, complete (every slot filled) */
    inf_hparams hp;
    int n_ctx;    /* positions the RoPE tables cover */
    int max_rows; /* rows one forward call may carry */
    inf_attn_shape attn;

    const inf_tensor *token_embd; /* [n_vocab][n_embd] */
    inf_qwen3_layer *layers;      /* [n_layer] */
    float *output_norm;           /* [n_embd] */
    inf_weight output;            /* [n_vocab][n_embd]; the embedding table when tied */
    float *rope_cos;              /* [n_ctx][head_dim/2] */
    float *rope_sin;              /* [n_ctx][head_dim/2] */

    /* Activations, sized once for max_rows (R) rows. */
    float *x;    /* [R][n_embd] residual stream */
    float *xb;   /* [R][n_embd] normed input / projection output */
    float *q;    /* [R][n_head*head_dim] */
    float *k;    /* [R][n_head_kv*head_dim] */
    float *v;    /* [R][n_head_kv*head_dim] */
    float *att;  /* [R][n_head*head_dim] attention output, heads side by side */
    float *gate; /* [R][n_ff] */
    float *up;   /* [R][n_ff] */
    float *xl;   /* [R][n_embd] final-normed rows that need logits */
} inf_qwen3;

/* Binds the Qwen3 weights of mf for backend be (which must be complete; see
 * inf_backend_complete), checking every tensor's presence, type and shape,
 * and allocates every buffer: RoPE tables for n_ctx positions and
 * activations for max_rows rows. be->prepare_weight runs once per matrix.
 * Returns 0, or -1 with a message naming the tensor and what was expected.
 * Free with inf_qwen3_free (NULL is a no-op). */
int inf_qwen3_create(inf_qwen3 **out, const inf_model_file *mf, const inf_backend *be, int n_ctx,
                     int max_rows, inf_err *err);
void inf_qwen3_free(inf_qwen3 *m);

/* One forward call's rows. Rows of the same sequence at consecutive
 * positions form a span whose attention runs as one (flash prefill when it
 * has more than one row, fused decode for one row). */
typedef struct inf_batch {
    int n_rows;
    const int32_t *tokens; /* [n_rows] */
    const int32_t *pos;    /* [n_rows] position of the row in its sequence */
    const int32_t *seq;    /* [n_rows] which sequence: index into the kv views */
    const uint8_t *logits; /* [n_rows] nonzero: compute logits for this row;
                              NULL: only for the last row */
} inf_batch;

/* Runs the model over the batch. kv[s * n_layer + l] is sequence s's cache
 * at layer l; it must already hold positions 0..p-1 of every span starting at
 * position p, and room for the batch's rows, which the call writes.
 * logits receives [n_selected][n_vocab] floats, the selected rows in batch
 * order. Nothing is allocated here (the backend's ops may grow their scratch
 * on the first use of a larger batch). Returns 0, or -1 with a message for a
 * batch that does not fit (row count, token id, position, sequence index) or
 * for memory the backend could not get ("out of memory: ..."). After -1 the
 * logits and the cache rows at the batch's positions are unspecified (the
 * caller treats them as not written); the model and the backend stay usable,
 * and the next call runs normally. */
int inf_qwen3_forward(inf_qwen3 *m, const inf_batch *b, const inf_kv_view *kv, int n_seq,
                      float *logits, inf_err *err);

#endif
