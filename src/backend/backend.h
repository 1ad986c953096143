/* The backend interface: a table of ops the forward pass is written against.
 *
 * A backend fills the slots it implements and leaves the rest NULL;
 * inf_backend_complete() then fills every empty slot with the scalar
 * reference, so a new backend can start with one op. Ops write into
 * caller-owned buffers (output first, sizes last); the only memory they
 * allocate is their own scratch, grown on the first use of a larger shape,
 * and a failure to get it is reported through take_error, never by aborting.
 * Activations are f32 row-major: a [T][n] buffer holds T rows of n floats. */
#ifndef INF_BACKEND_BACKEND_H
#define INF_BACKEND_BACKEND_H

#include <stdint.h>

#include "kv/kv_view.h"
#include "quant/tensor.h"
#include "util/err.h"

/* A weight matrix as the matmul op sees it: W is [n_out][n_in] of t->type. */
typedef struct inf_weight {
    const inf_tensor *t;
    int64_t n_in, n_out;
    size_t row_bytes;
    void *packed; /* backend-owned repacked copy (e.g. AMX tile layout) or NULL */
    /* where t's bytes lie in the model's files, the weight's key in a pack
       cache: 1 + the file's index (0: in no file, never cached) and offset */
    int src_file;
    uint64_t src_offset;
} inf_weight;

/* Attention shape shared by both attention ops. */
typedef struct inf_attn_shape {
    int n_head, n_head_kv, head_dim;
    float scale; /* 1/sqrt(head_dim) */
} inf_attn_shape;

/* The shape of a Gated DeltaNet recurrence (the linear-attention layers of
 * Qwen3.5 / Qwen3.6). */
typedef struct inf_delta_shape {
    int n_k_heads, n_v_heads; /* q/k heads; v heads, a multiple of n_k_heads */
    int d_k, d_v;             /* head sizes, d_k <= INF_DELTA_MAX_DK */
    /* which K head V head h reads: h % n_k_heads when k_tiled (llama.cpp's
       GGUF order, V heads tiled over K heads), else h / (n_v_heads / n_k_heads)
       (Hugging Face's, V heads grouped by K head) */
    int k_tiled;
    float eps; /* of the L2 norms of q and k: x / sqrt(sum x^2 + eps) */
} inf_delta_shape;
#define INF_DELTA_MAX_DK 512

typedef struct inf_backend inf_backend;

struct inf_backend {
    const char *name;
    void *ctx; /* backend state (thread pool, ISA choice, ...) */

    /* Optional: repack w once at load time (sets w->packed). Returns 0, or -1
     * when the memory for the repacked copy cannot be had. */
    int (*prepare_weight)(const inf_backend *be, inf_weight *w);
    void (*release_weight)(const inf_backend *be, inf_weight *w);

    /* out[T][n_embd] = rows ids[t] of the embedding table (any weight type). */
    void (*embed)(const inf_backend *be, float *out, const inf_tensor *table, const int32_t *ids,
                  int T);

    /* y[T][n_out] = x[T][n_in] . W^T */
    void (*matmul)(const inf_backend *be, float *y, const float *x, const inf_weight *w, int T);

    /* Optional (inf_backend_complete leaves it NULL): ys[i] = x . ws[i]^T for
     * n weights with the same n_in (Q/K/V, gate/up) in one pass over x.
     * prefill = 0: equal bit for bit to n matmul calls (decode rows);
     * prefill = 1: the rows are prompt rows, computed by the backend's prefill
     * kernels (e.g. AMX bf16 tiles), whatever their number — a row's result
     * depends on its kind, never on how many rows share the call. Callers
     * without it call matmul. */
    void (*matmul_n)(const inf_backend *be, float *const *ys, const float *x,
                     const inf_weight *const *ws, int n, int T, int prefill);

    /* out[r] = x[r] / rms(x[r]) * w, for rows r < rows of n floats (in place allowed).
     * Used for the block norms (rows = T, n = n_embd) and for Qwen3's per-head
     * q/k norms (rows = T*n_heads, n = head_dim). */
    void (*rmsnorm)(const inf_backend *be, float *out, const float *x, const float *w, int rows,
                    int n, float eps);

    /* NeoX rotation in place of the first n_rot elements of each head of
     * x[T][n_heads*head_dim]: pairs (i, i + n_rot/2); the rest of the head is
     * left as it is (partial RoPE; n_rot = head_dim rotates it all). Row t is
     * at position pos[t]; cos/sin tables are [n_ctx][n_rot/2]. */
    void (*rope)(const inf_backend *be, float *x, const int32_t *pos, int T, int n_heads,
                 int head_dim, int n_rot, const float *cos_tab, const float *sin_tab);

    /* Causal flash attention for T query rows at positions pos0..pos0+T-1 of one
     * sequence whose cache already holds keys 0..pos0+T-1.
     * out, q: [T][n_head*head_dim]. Keys are walked in tiles of 64 with an
     * online softmax; no [T][T] score matrix exists. */
    void (*attn_prefill)(const inf_backend *be, float *out, const float *q, const inf_kv_view *kv,
                         int pos0, int T, const inf_attn_shape *s);

    /* Fused decode attention: one query row (n_head*head_dim) over keys 0..n_keys-1. */
    void (*attn_decode)(const inf_backend *be, float *out, const float *q, const inf_kv_view *kv,
                        int n_keys, const inf_attn_shape *s);

    /* out[i] = silu(gate[i]) * up[i], i < n */
    void (*swiglu)(const inf_backend *be, float *out, const float *gate, const float *up,
                   int64_t n);

    /* y[i] += x[i], i < n */
    void (*add)(const inf_backend *be, float *y, const float *x, int64_t n);

    /* The MoE block's weighted sum, added to the residual: for rows r < T,
     * y[r][i] += sum over j < k of w[r][j] * x[r][j][i], i < n (x is
     * [T][k][n], w [T][k]). Each row's sum is formed alone, in j order, as
     * mul then add (no FMA): the same bits at every ISA level, whatever the
     * batch holds. */
    void (*moe_sum)(const inf_backend *be, float *y, const float *x, const float *w, int T, int k,
                    int64_t n);

    /* Gated DeltaNet's short causal convolution, depthwise, then SiLU, over
     * one sequence's T rows x[T][C] with kernel w[C][K]:
     *   out[t][c] = silu(sum over i < K of w[c][i] * x[t - K + 1 + i][c])
     * where the rows before x[0] are the sequence's previous K - 1 rows,
     * state[K-1][C], oldest first (zeros for a new sequence); state then
     * holds the last K - 1 rows. Running the rows in pieces gives the same
     * bits as at once. out must not overlap x or state. */
    void (*ssm_conv)(const inf_backend *be, float *out, const float *x, float *state,
                     const float *w, int T, int C, int K);

    /* The gated delta rule over one sequence's T rows. q, k: [T][n_k_heads *
     * d_k], L2-normalized here (s->eps) and q then scaled by 1/sqrt(d_k);
     * v, out: [T][n_v_heads * d_v]; g (log decay, <= 0) and beta (write
     * strength): [T][n_v_heads]; state: [n_v_heads][d_k][d_v], the
     * sequence's recurrent state (zeros for a new one). For each row in
     * order and V head h, with S its state and k, q of its K head:
     *   S = exp(g) S;  u = beta (v - S^T k);  S = S + k u^T;  out = S^T q.
     * Running the rows in pieces gives the same bits as at once. */
    void (*gated_delta)(const inf_backend *be, float *out, const float *q, const float *k,
                        const float *v, const float *g, const float *beta, float *state, int T,
                        const inf_delta_shape *s);

    /* In-place softmax of x[n] (used by sampling). */
    void (*softmax)(const inf_backend *be, float *x, int n);

    /* Whether every op since the last call did its work. Ops never abort on
     * allocation failure: an op that cannot get the scratch memory it needs
     * (grown on the first use of a larger shape) records what it could not
     * have, skips its work and leaves its outputs unspecified; the first such
     * failure is kept, and later ops may skip theirs too until the record is
     * taken (the call they belong to fails anyway). Returns 0 when there was
     * none, else -1 with that message in err ("out of memory: ..."); either
     * way the record is cleared, so later ops run normally. Call it from the
     * thread that runs the ops, before their results are used
     * (inf_model_forward does, and returns -1). inf_backend_complete fills
     * the scalar reference's, which reports the scalar ops run on the
     * calling thread. */
    int (*take_error)(const inf_backend *be, inf_err *err);
};

/* Fills every NULL slot of be with the scalar reference implementation. */
void inf_backend_complete(inf_backend *be);

/* The scalar reference backend (every slot filled). */
const inf_backend *inf_backend_scalar(void);

#endif
