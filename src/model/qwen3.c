#include "model/qwen3.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_type.h"
#include "model/rope.h"
#include "quant/quantize.h"
#include "util/mem.h"

/* ---- binding ---------------------------------------------------------- */

static int bind_matrix(inf_weight *w, const inf_model_file *mf, const inf_backend *be,
                       const inf_tensor *t, const char *what, int64_t n_out, int64_t n_in,
                       inf_err *err) {
    memset(w, 0, sizeof *w);
    if (!t) return inf_fail(err, "%s: tensor %s is missing", mf->path, what);
    const inf_dtype_info *info = inf_dtype_get(t->type);
    if (!info)
        return inf_fail(err, "%s: tensor %s has type %s, which inferno does not support", mf->path,
                        t->name, inf_ggml_type_name(t->type));
    if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
        return inf_fail(err, "%s: tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                        mf->path, t->name, (long long)t->ne[1], (long long)t->ne[0],
                        (long long)n_out, (long long)n_in);
    size_t row_bytes = inf_dtype_row_bytes(t->type, n_in);
    if (row_bytes == 0)
        return inf_fail(err, "%s: tensor %s: row of %lld is not a multiple of %s's block of %d",
                        mf->path, t->name, (long long)n_in, info->name, info->block);
    if (t->nbytes < row_bytes * (size_t)n_out)
        return inf_fail(err, "%s: tensor %s holds %zu bytes, expected %zu", mf->path, t->name,
                        t->nbytes, row_bytes * (size_t)n_out);
    *w = (inf_weight){.t = t, .n_in = n_in, .n_out = n_out, .row_bytes = row_bytes};
    if (be->prepare_weight(be, w) != 0)
        return inf_fail(err,
                        "%s: backend %s could not prepare tensor %s: out of memory for its "
                        "repacked copy",
                        mf->path, be->name, t->name);
    return 0;
}

/* Norm weights are tiny: keep an f32 copy whatever the file stores. */
static int bind_vector(float **out, const inf_model_file *mf, const inf_tensor *t, const char *what,
                       int64_t n, inf_err *err) {
    *out = NULL;
    if (!t) return inf_fail(err, "%s: tensor %s is missing", mf->path, what);
    if (!inf_dtype_get(t->type) || t->ne[0] != n || t->ne[1] != 1 ||
        inf_dtype_row_bytes(t->type, n) == 0 || t->nbytes < inf_dtype_row_bytes(t->type, n))
        return inf_fail(err,
                        "%s: tensor %s: expected a vector of %lld weights, got %s [%lld, %lld]",
                        mf->path, t->name, (long long)n, inf_ggml_type_name(t->type),
                        (long long)t->ne[1], (long long)t->ne[0]);
    *out = inf_alloc((size_t)n * sizeof(float));
    if (!*out)
        return inf_fail(err, "%s: tensor %s: out of memory for its f32 copy (%lld floats)",
                        mf->path, t->name, (long long)n);
    inf_dequantize_row(t->type, *out, t->data, n);
    return 0;
}

static int check_hparams(const inf_model_file *mf, int n_ctx, int max_rows, inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    if (hp->n_layer <= 0 || hp->n_embd <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->head_dim <= 0 || hp->n_ff <= 0 || hp->n_vocab <= 0)
        return inf_fail(err,
                        "%s: hyperparameters must be positive (layers %d, embd %d, heads "
                        "%d/%d, head_dim %d, ff %d, vocab %d)",
                        mf->path, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim,
                        hp->n_ff, hp->n_vocab);
    if (hp->n_head % hp->n_head_kv != 0)
        return inf_fail(err, "%s: %d query heads are not a multiple of %d KV heads", mf->path,
                        hp->n_head, hp->n_head_kv);
    if (hp->head_dim % 2 != 0 || hp->head_dim > 512)
        return inf_fail(err, "%s: head_dim %d: expected an even number up to 512", mf->path,
                        hp->head_dim);
    if (!(hp->rope_theta > 0) || !(hp->rms_eps > 0))
        return inf_fail(err, "%s: rope theta %g and rms eps %g must be positive", mf->path,
                        hp->rope_theta, hp->rms_eps);
    if (n_ctx <= 0 || max_rows <= 0)
        return inf_fail(err, "context size %d and batch rows %d must be positive", n_ctx, max_rows);
    if (!mf->layers) return inf_fail(err, "%s: no layers bound", mf->path);
    return 0;
}

int inf_qwen3_create(inf_qwen3 **out, const inf_model_file *mf, const inf_backend *be, int n_ctx,
                     int max_rows, inf_err *err) {
    *out = NULL;
    if (check_hparams(mf, n_ctx, max_rows, err)) return -1;
    const inf_hparams *hp = &mf->hp;
    inf_qwen3 *m = calloc(1, sizeof *m);
    if (!m) return inf_fail(err, "out of memory");
    m->file = mf;
    m->be = be;
    m->hp = *hp;
    m->n_ctx = n_ctx;
    m->max_rows = max_rows;
    m->attn = (inf_attn_shape){.n_head = hp->n_head,
                               .n_head_kv = hp->n_head_kv,
                               .head_dim = hp->head_dim,
                               .scale = 1.0f / sqrtf((float)hp->head_dim)};

    int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim,
            KV = (int64_t)hp->n_head_kv * hp->head_dim, F = hp->n_ff, D = hp->head_dim;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) goto oom;

    m->token_embd = mf->token_embd;
    if (bind_matrix(&m->output, mf, be, hp->tied_output ? mf->token_embd : mf->output,
                    hp->tied_output ? "token_embd (tied output)" : "output", hp->n_vocab, E, err))
        goto fail;
    if (!mf->token_embd || mf->token_embd->ne[0] != E || mf->token_embd->ne[1] != hp->n_vocab ||
        !inf_dtype_row_bytes(mf->token_embd->type, E)) {
        inf_fail(err, "%s: token_embd: expected [%d, %lld]", mf->path, hp->n_vocab, (long long)E);
        goto fail;
    }
    if (bind_vector(&m->output_norm, mf, mf->output_norm, "output_norm", E, err)) goto fail;

    for (int l = 0; l < hp->n_layer; l++) {
        const inf_layer_weights *src = &mf->layers[l];
        inf_qwen3_layer *L = &m->layers[l];
        if (bind_matrix(&L->wq, mf, be, src->wq, "attn_q", Q, E, err) ||
            bind_matrix(&L->wk, mf, be, src->wk, "attn_k", KV, E, err) ||
            bind_matrix(&L->wv, mf, be, src->wv, "attn_v", KV, E, err) ||
            bind_matrix(&L->wo, mf, be, src->wo, "attn_output", E, Q, err) ||
            bind_matrix(&L->w_gate, mf, be, src->w_gate, "ffn_gate", F, E, err) ||
            bind_matrix(&L->w_up, mf, be, src->w_up, "ffn_up", F, E, err) ||
            bind_matrix(&L->w_down, mf, be, src->w_down, "ffn_down", E, F, err) ||
            bind_vector(&L->attn_norm, mf, src->attn_norm, "attn_norm", E, err) ||
            bind_vector(&L->ffn_norm, mf, src->ffn_norm, "ffn_norm", E, err) ||
            bind_vector(&L->q_norm, mf, src->q_norm, "attn_q_norm", D, err) ||
            bind_vector(&L->k_norm, mf, src->k_norm, "attn_k_norm", D, err)) {
            inf_fail_ctx(err, "layer %d", l);
            goto fail;
        }
    }

    m->rope_cos = inf_alloc((size_t)n_ctx * (size_t)(D / 2) * sizeof(float));
    m->rope_sin = inf_alloc((size_t)n_ctx * (size_t)(D / 2) * sizeof(float));
    size_t R = (size_t)max_rows;
    m->x = inf_alloc(R * (size_t)E * sizeof(float));
    m->xb = inf_alloc(R * (size_t)E * sizeof(float));
    m->q = inf_alloc(R * (size_t)Q * sizeof(float));
    m->k = inf_alloc(R * (size_t)KV * sizeof(float));
    m->v = inf_alloc(R * (size_t)KV * sizeof(float));
    m->att = inf_alloc(R * (size_t)Q * sizeof(float));
    m->gate = inf_alloc(R * (size_t)F * sizeof(float));
    m->up = inf_alloc(R * (size_t)F * sizeof(float));
    m->xl = inf_alloc(R * (size_t)E * sizeof(float));
    if (!m->rope_cos || !m->rope_sin || !m->x || !m->xb || !m->q || !m->k || !m->v || !m->att ||
        !m->gate || !m->up || !m->xl)
        goto oom;
    inf_rope_tables(m->rope_cos, m->rope_sin, n_ctx, hp->head_dim, hp->rope_theta);
    *out = m;
    return 0;

oom:
    inf_fail(err, "out of memory for the model's buffers (context %d, batch %d)", n_ctx, max_rows);
fail:
    inf_qwen3_free(m);
    return -1;
}

void inf_qwen3_free(inf_qwen3 *m) {
    if (!m) return;
    if (m->layers) {
        for (int l = 0; l < m->hp.n_layer; l++) {
            inf_qwen3_layer *L = &m->layers[l];
            inf_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
                if (ws[i]->t) m->be->release_weight(m->be, ws[i]);
            inf_free(L->attn_norm);
            inf_free(L->ffn_norm);
            inf_free(L->q_norm);
            inf_free(L->k_norm);
        }
        free(m->layers);
    }
    if (m->output.t) m->be->release_weight(m->be, &m->output);
    inf_free(m->output_norm);
    inf_free(m->rope_cos);
    inf_free(m->rope_sin);
    inf_free(m->x);
    inf_free(m->xb);
    inf_free(m->q);
    inf_free(m->k);
    inf_free(m->v);
    inf_free(m->att);
    inf_free(m->gate);
    inf_free(m->up);
    inf_free(m->xl);
    free(m);
}

/* ---- forward ---------------------------------------------------------- */

static int check_batch(const inf_qwen3 *m, const inf_batch *b, const inf_kv_view *kv, int n_seq,
                       inf_err *err) {
    if (b->n_rows <= 0 || b->n_rows > m->max_rows)
        return inf_fail(err, "batch of %d rows: expected 1..%d", b->n_rows, m->max_rows);
    for (int r = 0; r < b->n_rows; r++) {
        if (b->tokens[r] < 0 || b->tokens[r] >= m->hp.n_vocab)
            return inf_fail(err, "row %d: token id %d is outside the vocabulary (0..%d)", r,
                            b->tokens[r], m->hp.n_vocab - 1);
        if (b->pos[r] < 0 || b->pos[r] >= m->n_ctx)
            return inf_fail(err, "row %d: position %d is outside the context (0..%d)", r, b->pos[r],
                            m->n_ctx - 1);
        if (b->seq[r] < 0 || b->seq[r] >= n_seq)
            return inf_fail(err, "row %d: sequence %d, expected 0..%d", r, b->seq[r], n_seq - 1);
        int cap = kv[(int64_t)b->seq[r] * m->hp.n_layer].capacity;
        if (cap > 0 && b->pos[r] >= cap)
            return inf_fail(
                err, "row %d: position %d is beyond its cache (%d positions, the context size)", r,
                b->pos[r], cap);
    }
    return 0;
}

/* Length of the span starting at row r: same sequence, consecutive positions. */
static int span_len(const inf_batch *b, int r) {
    int n = 1;
    while (r + n < b->n_rows && b->seq[r + n] == b->seq[r] && b->pos[r + n] == b->pos[r] + n)
        n++;
    return n;
}

/* Whether row r is a prompt row: part of a span of two or more rows (a
 * one-row span is a decode step). The backend computes prompt rows and decode
 * rows with different kernels; the kind of a row, never the batch around it,
 * decides (a prompt gives the same bits in any chunking of two or more rows). */
static bool prompt_row(const inf_batch *b, int r) {
    bool prev = r > 0 && b->seq[r - 1] == b->seq[r] && b->pos[r - 1] == b->pos[r] - 1;
    bool next = r + 1 < b->n_rows && b->seq[r + 1] == b->seq[r] && b->pos[r + 1] == b->pos[r] + 1;
    return prev || next;
}

/* ys[i] = x . ws[i]^T over the batch's rows (x rows n_in apart, ys[i] rows
 * ws[i]->n_out apart), one call per run of prompt or decode rows. */
static void matmul_rows(const inf_backend *be, const inf_batch *b, float *const *ys, const float *x,
                        const inf_weight *const *ws, int n) {
    for (int r0 = 0, r1; r0 < b->n_rows; r0 = r1) {
        bool kind = prompt_row(b, r0);
        for (r1 = r0 + 1; r1 < b->n_rows && prompt_row(b, r1) == kind; r1++) {
        }
        float *y[4];
        for (int i = 0; i < n; i++)
            y[i] = ys[i] + (int64_t)r0 * ws[i]->n_out;
        const float *xr = x + (int64_t)r0 * ws[0]->n_in;
        if (be->matmul_n) {
            be->matmul_n(be, y, xr, ws, n, r1 - r0, kind);
            continue;
        }
        for (int i = 0; i < n; i++)
            be->matmul(be, y[i], xr, ws[i], r1 - r0);
    }
}

int inf_qwen3_forward(inf_qwen3 *m, const inf_batch *b, const inf_kv_view *kv, int n_seq,
                      float *logits, inf_err *err) {
    if (check_batch(m, b, kv, n_seq, err)) return -1;
    const inf_backend *be = m->be;
    const inf_hparams *hp = &m->hp;
    const int T = b->n_rows;
    const int E = hp->n_embd, F = hp->n_ff, D = hp->head_dim;
    const int Q = hp->n_head * D, KV = hp->n_head_kv * D;

    /* An op that cannot get its scratch memory skips its work and says so
     * through take_error (backend.h): checked after every layer, so a failed
     * call stops early, and before the logits are handed back. A failure left
     * by ops run outside a forward call is not this call's. */
    be->take_error(be, NULL);

    be->embed(be, m->x, m->token_embd, b->tokens, T);

    for (int l = 0; l < hp->n_layer; l++) {
        const inf_qwen3_layer *L = &m->layers[l];

        /* attention block */
        be->rmsnorm(be, m->xb, m->x, L->attn_norm, T, E, hp->rms_eps);
        matmul_rows(be, b, (float *const[]){m->q, m->k, m->v}, m->xb,
                    (const inf_weight *const[]){&L->wq, &L->wk, &L->wv}, 3);
        /* Qwen3: RMSNorm over each head's head_dim slice of q and k, before RoPE. */
        be->rmsnorm(be, m->q, m->q, L->q_norm, T * hp->n_head, D, hp->rms_eps);
        be->rmsnorm(be, m->k, m->k, L->k_norm, T * hp->n_head_kv, D, hp->rms_eps);
        be->rope(be, m->q, b->pos, T, hp->n_head, D, m->rope_cos, m->rope_sin);
        be->rope(be, m->k, b->pos, T, hp->n_head_kv, D, m->rope_cos, m->rope_sin);

        /* Every row's K and V go into its sequence's cache first, so each span's
         * attention below finds its own keys in place. */
        for (int r = 0; r < T; r++) {
            const inf_kv_view *view = &kv[(int64_t)b->seq[r] * hp->n_layer + l];
            inf_kv_store_row(view, b->pos[r], m->k + (int64_t)r * KV, m->v + (int64_t)r * KV);
        }
        for (int r = 0, n; r < T; r += n) {
            n = span_len(b, r);
            const inf_kv_view *view = &kv[(int64_t)b->seq[r] * hp->n_layer + l];
            float *out = m->att + (int64_t)r * Q;
            const float *q = m->q + (int64_t)r * Q;
            if (n == 1)
                be->attn_decode(be, out, q, view, b->pos[r] + 1, &m->attn);
            else
                be->attn_prefill(be, out, q, view, b->pos[r], n, &m->attn);
        }
        /* Qwen3: n_head*head_dim need not equal n_embd; wo maps Q back to E. */
        matmul_rows(be, b, (float *const[]){m->xb}, m->att, (const inf_weight *const[]){&L->wo}, 1);
        be->add(be, m->x, m->xb, (int64_t)T * E);

        /* MLP block */
        be->rmsnorm(be, m->xb, m->x, L->ffn_norm, T, E, hp->rms_eps);
        matmul_rows(be, b, (float *const[]){m->gate, m->up}, m->xb,
                    (const inf_weight *const[]){&L->w_gate, &L->w_up}, 2);
        be->swiglu(be, m->gate, m->gate, m->up, (int64_t)T * F);
        matmul_rows(be, b, (float *const[]){m->xb}, m->gate,
                    (const inf_weight *const[]){&L->w_down}, 1);
        be->add(be, m->x, m->xb, (int64_t)T * E);
        if (be->take_error(be, err)) return -1;
    }

    /* Only the rows that need logits go through the final norm and the head:
     * in a prefill that is one row out of T, and the head is the biggest matmul. */
    int n_sel = 0;
    for (int r = 0; r < T; r++) {
        if (b->logits ? b->logits[r] : r == T - 1) {
            memcpy(m->xl + (int64_t)n_sel * E, m->x + (int64_t)r * E, E * sizeof(float));
            n_sel++;
        }
    }
    if (n_sel == 0) return 0;
    be->rmsnorm(be, m->xl, m->xl, m->output_norm, n_sel, E, hp->rms_eps);
    be->matmul(be, logits, m->xl, &m->output, n_sel);
    if (be->take_error(be, err)) return -1;
    return 0;
}
