/* Blocks the architectures share (model/ only): finding a tensor by its
 * name in the file's layout, binding matrices and norm vectors, the Qwen3
 * attention block (per-head Q/K RMSNorm + RoPE), the SwiGLU FFN, the MoE FFN
 * (router, top-k, experts grouped over the batch) and the output head.
 *
 * Every block takes the batch and works in place on the residual stream
 * x [T][n_embd]. Matmuls split rows by kind (prompt rows: spans of two or
 * more; decode rows: one-row spans) and run each kind as one call, so a
 * row's result depends on its kind, never on how many rows share the call. */
#ifndef INF_MODEL_BLOCKS_H
#define INF_MODEL_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"

/* A tensor's name in each layout; "%d" is the layer (and the expert). */
typedef struct blk_name {
    const char *gguf, *hf;
} blk_name;

/* The name of n in mf's layout for layer (and expert; -1 when unused). */
void blk_name_fmt(char *out, size_t cap, const inf_model_file *mf, blk_name n, int layer,
                  int expert);

/* Finds tensor n (layer, expert) and checks its shape: n_dims dims equal to
 * want[] (fastest-first), and for norms an F32/F16/BF16 type. A missing
 * tensor is an error unless optional (then *out = NULL, 0). */
int blk_find(const inf_tensor **out, const inf_model_file *mf, blk_name n, int layer, int expert,
             int n_dims, const int64_t *want, bool is_norm, bool optional, inf_err *err);

/* n_vocab from the embedding's rows, checked against config.json's
 * vocab_size and the tokenizer; then the output head: absent in GGUF means
 * tied; HF's tie_word_embeddings decides (a stored lm_head is then ignored,
 * as transformers does). */
int blk_bind_embedding(inf_model_file *mf, blk_name embd, blk_name output, inf_err *err);
/* The output head's tensor (the embedding when tied). */
const inf_tensor *blk_output_tensor(const inf_model_file *mf, blk_name embd, blk_name output);

/* A layer count lower than the layers the file holds would silently run a
 * truncated model: refuse tensors under prefix (GGUF "blk.", HF
 * "model.layers.") past the last layer. */
int blk_check_layer_range(const inf_model_file *mf, const char *gguf_prefix, const char *hf_prefix,
                          inf_err *err);

/* An integer key (inf_model_meta_int) that must be positive; absent is an
 * error unless def >= 0 (then *out = def). Returns 1 when present, 0 when
 * defaulted, -1 with a message naming the key. */
int blk_key_int(const inf_model_file *mf, const char *key, int def, int *out, inf_err *err);

/* A matrix [n_out][n_in] of any weight type for be (prepare_weight runs on
 * it; when the backend made a packed copy, the file's pages of the weight
 * are dropped from the resident set); a norm vector copied to f32. The
 * _shared form keeps the pages: for a tensor also read as it is stored (the
 * tied embedding). */
int blk_bind_matrix(inf_weight *w, const inf_model_file *mf, const inf_backend *be,
                    const inf_tensor *t, int64_t n_out, int64_t n_in, inf_err *err);
int blk_bind_matrix_shared(inf_weight *w, const inf_model_file *mf, const inf_backend *be,
                           const inf_tensor *t, int64_t n_out, int64_t n_in, inf_err *err);
int blk_bind_vector(float **out, const inf_model_file *mf, const inf_tensor *t, int64_t n,
                    inf_err *err);
void blk_release(const inf_backend *be, inf_weight *w); /* no-op for an unbound weight */

/* The Qwen3 attention block's tensors and weights. */
typedef struct blk_attn_names {
    blk_name norm, q, k, v, o, q_norm, k_norm;
} blk_attn_names;

typedef struct blk_attn {
    float *norm;   /* [n_embd] */
    inf_weight wq; /* [n_head*head_dim][n_embd] */
    inf_weight wk; /* [n_head_kv*head_dim][n_embd] */
    inf_weight wv; /* [n_head_kv*head_dim][n_embd] */
    inf_weight wo; /* [n_embd][n_head*head_dim] */
    float *q_norm; /* [head_dim] Qwen3: per-head RMSNorm of q, before RoPE */
    float *k_norm; /* [head_dim] */
} blk_attn;

/* The dense SwiGLU FFN. */
typedef struct blk_ffn_names {
    blk_name norm, gate, up, down;
} blk_ffn_names;

typedef struct blk_ffn {
    float *norm;       /* [n_embd] */
    inf_weight w_gate; /* [n_ff][n_embd] */
    inf_weight w_up;   /* [n_ff][n_embd] */
    inf_weight w_down; /* [n_embd][n_ff] */
} blk_ffn;

/* The MoE FFN: a router, then n_expert SwiGLU experts of n_ff_exp. */
typedef struct blk_moe {
    float *norm;       /* [n_embd] */
    inf_weight router; /* [n_expert][n_embd] */
    int n_expert;
    inf_weight *w_gate; /* [n_expert] each [n_ff_exp][n_embd] */
    inf_weight *w_up;   /* [n_expert] each [n_ff_exp][n_embd] */
    inf_weight *w_down; /* [n_expert] each [n_embd][n_ff_exp] */
    /* Experts stored as slices of a 3-D tensor (GGUF, HF's fused layout):
     * each slice an ordinary matrix, described here (names borrowed). */
    inf_tensor *slices; /* [3 * n_expert] or NULL */
} blk_moe;

/* Activations, sized once for max_rows (R) rows. */
typedef struct blk_acts {
    float *x;    /* [R][n_embd] residual stream */
    float *xb;   /* [R][n_embd] normed input / projection output */
    float *q;    /* [R][n_head*head_dim] */
    float *k;    /* [R][n_head_kv*head_dim] */
    float *v;    /* [R][n_head_kv*head_dim] */
    float *att;  /* [R][n_head*head_dim] attention output, heads side by side */
    float *gate; /* [R][max(n_ff, n_ff_exp, n_ff_shexp)] */
    float *up;   /* [R][max(n_ff, n_ff_exp, n_ff_shexp)] */
    float *xl;   /* [R][n_embd] final-normed rows that need logits */
    /* MoE only (NULL for dense models); K = n_expert_used */
    float *probs;   /* [R][n_expert] router softmax */
    int *chosen;    /* [R][K] expert ids, highest weight first */
    float *weight;  /* [R][K] their weights */
    int *by_expert; /* [R*K] (row*K + slot) grouped by expert, rows in batch order */
    int *start;     /* [n_expert + 1] where each expert's group starts in by_expert */
    int *cursor;    /* [n_expert] filling by_expert */
    float *xe;      /* [R][n_embd] one expert's rows, gathered */
    float *ye;      /* [R][n_embd] their outputs */
    float *yk;      /* [R*K][n_embd] each (row, slot)'s expert output */
} blk_acts;

int blk_acts_alloc(blk_acts *a, const inf_hparams *hp, int max_rows);
void blk_acts_free(blk_acts *a);

/* Length of the span starting at row r: same sequence, consecutive positions. */
int blk_span_len(const inf_batch *b, int r);
/* ys[i] = x . ws[i]^T over the batch's rows (x rows n_in apart, ys[i] rows
 * ws[i]->n_out apart; n <= 4), one call per run of prompt or decode rows. */
void blk_matmul_rows(const inf_backend *be, const inf_batch *b, float *const *ys, const float *x,
                     const inf_weight *const *ws, int n);

/* x += attention(rmsnorm(x)) for layer l: Q/K/V, per-head Q/K norm, RoPE,
 * K/V into each row's cache, attention per span, output projection. */
void blk_attention(const inf_model *m, blk_acts *a, const inf_batch *b, const inf_kv_view *kv,
                   int l, const blk_attn *w);
/* Its middle, for blocks that project and gate their own way: from the
 * projected a->q, a->k, a->v to the heads' outputs in a->att (per-head Q/K
 * norm, RoPE, K/V into each row's cache, attention per span). */
void blk_attn_core(const inf_model *m, blk_acts *a, const inf_batch *b, const inf_kv_view *kv,
                   int l, const blk_attn *w);
/* x += down(silu(gate(h)) * up(h)), h = rmsnorm(x). */
void blk_ffn_swiglu(const inf_model *m, blk_acts *a, const inf_batch *b, const blk_ffn *w);
/* x += sum over the row's top-k experts of weight * expert(h), h = rmsnorm(x). */
void blk_ffn_moe(const inf_model *m, blk_acts *a, const inf_batch *b, const blk_moe *w);
/* inf_model_facts for the Qwen family: every tensor of the trunk once (the
 * routed experts' n_expert_used of n_expert; a GGUF's MTP blocks past
 * n_layer and HF's mtp.* not at all), the whole output head, one embedding
 * row (the tensors named embd, output); the FFN type that of layer 0's
 * ffn_gate, or of the experts' gate. */
void blk_decode_facts(const inf_model_file *mf, inf_model_facts *f, blk_name embd, blk_name output,
                      blk_name ffn_gate);

/* Final norm and head for the rows that want logits. Returns -1 on a backend
 * failure (take_error). */
int blk_logits(const inf_model *m, blk_acts *a, const inf_batch *b, const float *norm,
               const inf_weight *output, float *logits, inf_err *err);

#endif
