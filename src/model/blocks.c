/* The blocks the architectures share (see blocks.h). */
#include "model/blocks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_type.h"
#include "quant/quantize.h"
#include "util/mem.h"

/* ---- finding tensors ---------------------------------------------------- */

void blk_name_fmt(char *out, size_t cap, const inf_model_file *mf, blk_name n, int layer,
                  int expert) {
    snprintf(out, cap, mf->format == INF_FORMAT_GGUF ? n.gguf : n.hf, layer, expert);
}

/* "[256, 1024]" in the file's own convention: GGUF fastest-first, HF
 * slowest-first (as config and safetensors headers write it). */
static void fmt_shape(char *buf, size_t cap, inf_format f, int n_dims, const int64_t *ne) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int d = 0; d < n_dims && k < cap; d++) {
        int64_t v = f == INF_FORMAT_HF ? ne[n_dims - 1 - d] : ne[d];
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)v);
    }
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

int blk_find(const inf_tensor **out, const inf_model_file *mf, blk_name n, int layer, int expert,
             int n_dims, const int64_t *want, bool is_norm, bool optional, inf_err *err) {
    char name[160];
    blk_name_fmt(name, sizeof name, mf, n, layer, expert);
    const inf_tensor *t = *out = inf_model_find(mf, name);
    if (!t) return optional ? 0 : inf_fail(err, "%s: tensor %s is missing", mf->path, name);
    bool ok = t->n_dims == n_dims;
    for (int d = 0; d < n_dims && ok; d++)
        ok = t->ne[d] == want[d];
    if (!ok) {
        char a[96], e[96];
        fmt_shape(a, sizeof a, mf->format, t->n_dims, t->ne);
        fmt_shape(e, sizeof e, mf->format, n_dims, want);
        return inf_fail(err, "%s: tensor %s has shape %s, expected %s", mf->path, name, a, e);
    }
    if (is_norm && t->type != INF_F32 && t->type != INF_F16 && t->type != INF_BF16)
        return inf_fail(err, "%s: tensor %s has type %s; norm weights must be F32, F16 or BF16",
                        mf->path, name, inf_ggml_type_name(t->type));
    return 0;
}

int blk_bind_embedding(inf_model_file *mf, blk_name embd, blk_name output, inf_err *err) {
    char name[160];
    blk_name_fmt(name, sizeof name, mf, embd, -1, -1);
    const inf_tensor *te = inf_model_find(mf, name);
    if (!te) return inf_fail(err, "%s: tensor %s is missing", mf->path, name);
    if (te->n_dims != 2 || te->ne[0] != mf->hp.n_embd || te->ne[1] > INT32_MAX) {
        char a[96];
        fmt_shape(a, sizeof a, mf->format, te->n_dims, te->ne);
        return inf_fail(err, "%s: tensor %s has shape %s, expected a [n_vocab x %d] matrix",
                        mf->path, name, a, mf->hp.n_embd);
    }
    mf->hp.n_vocab = (int)te->ne[1];
    int64_t cfg_vocab;
    int have =
        mf->format == INF_FORMAT_HF ? inf_model_meta_int(mf, "vocab_size", &cfg_vocab, err) : 0;
    if (have < 0) return -1;
    if (mf->format == INF_FORMAT_HF && !have)
        return inf_fail(err, "%s: config.json field vocab_size is missing", mf->path);
    if (have && cfg_vocab != mf->hp.n_vocab)
        return inf_fail(err, "%s: config.json vocab_size is %lld but %s has %d rows", mf->path,
                        (long long)cfg_vocab, name, mf->hp.n_vocab);
    if (mf->vocab.n_tokens > mf->hp.n_vocab)
        return inf_fail(err, "%s: the tokenizer has %d tokens, more than the %d embedding rows",
                        mf->path, mf->vocab.n_tokens, mf->hp.n_vocab);
    const int64_t shape[2] = {mf->hp.n_embd, mf->hp.n_vocab};
    const inf_tensor *out;
    bool tie = false;
    int has_tie =
        mf->format == INF_FORMAT_HF ? inf_model_meta_bool(mf, "tie_word_embeddings", &tie, err) : 0;
    if (has_tie < 0) return -1;
    if (has_tie && tie) {
        out = NULL;
    } else if (blk_find(&out, mf, output, -1, -1, 2, shape, false, true, err)) {
        return -1;
    }
    /* No head tensor: GGUF and a config without tie_word_embeddings tie it
     * to the embedding (llama.cpp, transformers' default). A config that
     * says untied and has none is an embedding model saved from the base
     * model (Qwen3-Embedding-8B): it opens without a head. */
    mf->hp.tied_output = out == NULL && !(has_tie && !tie);
    mf->hp.no_head = out == NULL && has_tie && !tie;
    return 0;
}

const inf_tensor *blk_output_tensor(const inf_model_file *mf, blk_name embd, blk_name output) {
    char name[160];
    blk_name_fmt(name, sizeof name, mf, mf->hp.tied_output ? embd : output, -1, -1);
    return inf_model_find(mf, name);
}

int blk_check_layer_range(const inf_model_file *mf, const char *gguf_prefix, const char *hf_prefix,
                          inf_err *err) {
    const char *pre = mf->format == INF_FORMAT_GGUF ? gguf_prefix : hf_prefix;
    size_t k = strlen(pre);
    for (int i = 0; i < mf->n_tensors; i++) {
        const char *nm = mf->tensors[i].name;
        if (strncmp(nm, pre, k) || nm[k] < '0' || nm[k] > '9') continue;
        long layer = strtol(nm + k, NULL, 10);
        if (layer >= mf->hp.n_layer)
            return inf_fail(err, "%s: tensor %s belongs to layer %ld, but the model has %d layers",
                            mf->path, nm, layer, mf->hp.n_layer);
    }
    return 0;
}

int blk_key_int(const inf_model_file *mf, const char *key, int def, int *out, inf_err *err) {
    int64_t v;
    int have = inf_model_meta_int(mf, key, &v, err);
    if (have < 0) return -1;
    if (!have) {
        if (def < 0) return inf_fail(err, "%s: %s is missing", mf->path, key);
        *out = def;
        return 0;
    }
    if (v <= 0 || v > INT32_MAX)
        return inf_fail(err, "%s: %s is %lld, expected a positive number", mf->path, key,
                        (long long)v);
    *out = (int)v;
    return 1;
}

/* ---- binding ------------------------------------------------------------ */

static int bind_matrix(inf_weight *w, const inf_model_file *mf, const inf_backend *be,
                       const inf_tensor *t, int64_t n_out, int64_t n_in, bool drop, inf_err *err) {
    memset(w, 0, sizeof *w);
    INF_ASSERT(t);
    const inf_dtype_info *info = inf_dtype_get(t->type);
    if (!info)
        return inf_fail(err, "%s: tensor %s has type %s, which inferno does not support", mf->path,
                        t->name, inf_ggml_type_name(t->type));
    if (t->ne[0] != n_in || t->ne[1] != n_out)
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
    inf_model_locate(mf, t, &w->src_file, &w->src_offset);
    if (be->prepare_weight(be, w) != 0) {
        w->t = NULL;
        return inf_fail(err,
                        "%s: backend %s could not prepare tensor %s: out of memory for its "
                        "repacked copy",
                        mf->path, be->name, t->name);
    }
    /* the backend reads its packed copy from now on: the file's pages of
       this weight can leave the resident set */
    if (drop && w->packed) inf_model_drop_pages(mf, t);
    /* read in place: its pages mapped at load, not faulted in one by one
       while it runs (a MoE model reaches new experts on most tokens) */
    if (!w->packed) inf_model_populate_pages(mf, t);
    return 0;
}

int blk_bind_matrix(inf_weight *w, const inf_model_file *mf, const inf_backend *be,
                    const inf_tensor *t, int64_t n_out, int64_t n_in, inf_err *err) {
    return bind_matrix(w, mf, be, t, n_out, n_in, true, err);
}

int blk_bind_matrix_shared(inf_weight *w, const inf_model_file *mf, const inf_backend *be,
                           const inf_tensor *t, int64_t n_out, int64_t n_in, inf_err *err) {
    return bind_matrix(w, mf, be, t, n_out, n_in, false, err);
}

/* Norm weights are tiny: keep an f32 copy whatever the file stores. */
int blk_bind_vector(float **out, const inf_model_file *mf, const inf_tensor *t, int64_t n,
                    inf_err *err) {
    *out = NULL;
    INF_ASSERT(t);
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

void blk_release(const inf_backend *be, inf_weight *w) {
    if (w->t) be->release_weight(be, w);
    w->t = NULL;
}

/* ---- activations -------------------------------------------------------- */

int blk_acts_alloc(blk_acts *a, const inf_hparams *hp, int max_rows) {
    memset(a, 0, sizeof *a);
    const size_t R = (size_t)max_rows, E = (size_t)hp->n_embd,
                 Q = (size_t)hp->n_head * (size_t)hp->head_dim,
                 KV = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    size_t F = (size_t)(hp->n_ff > hp->n_ff_exp ? hp->n_ff : hp->n_ff_exp);
    if ((size_t)hp->n_ff_shexp > F) F = (size_t)hp->n_ff_shexp;
    a->x = inf_alloc(R * E * sizeof(float));
    a->xb = inf_alloc(R * E * sizeof(float));
    a->q = inf_alloc(R * Q * sizeof(float));
    a->k = inf_alloc(R * KV * sizeof(float));
    a->v = inf_alloc(R * KV * sizeof(float));
    a->att = inf_alloc(R * Q * sizeof(float));
    a->gate = inf_alloc(R * F * sizeof(float));
    a->up = inf_alloc(R * F * sizeof(float));
    a->xl = inf_alloc(R * E * sizeof(float));
    if (!a->x || !a->xb || !a->q || !a->k || !a->v || !a->att || !a->gate || !a->up || !a->xl)
        return -1;
    if (hp->n_expert > 0) {
        const size_t X = (size_t)hp->n_expert, K = (size_t)hp->n_expert_used;
        a->probs = inf_alloc(R * X * sizeof(float));
        a->chosen = inf_alloc(R * K * sizeof(int));
        a->weight = inf_alloc(R * K * sizeof(float));
        a->by_expert = inf_alloc(R * K * sizeof(int));
        a->start = inf_alloc((X + 1) * sizeof(int));
        a->cursor = inf_alloc(X * sizeof(int));
        a->xe = inf_alloc(R * E * sizeof(float));
        a->ye = inf_alloc(R * E * sizeof(float));
        a->yk = inf_alloc(R * K * E * sizeof(float));
        if (!a->probs || !a->chosen || !a->weight || !a->by_expert || !a->start || !a->cursor ||
            !a->xe || !a->ye || !a->yk)
            return -1;
    }
    return 0;
}

void blk_acts_free(blk_acts *a) {
    float *fs[] = {a->x,  a->xb, a->q,     a->k,      a->v,  a->att, a->gate,
                   a->up, a->xl, a->probs, a->weight, a->xe, a->ye,  a->yk};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
        inf_free(fs[i]);
    inf_free(a->chosen);
    inf_free(a->by_expert);
    inf_free(a->start);
    inf_free(a->cursor);
    memset(a, 0, sizeof *a);
}

/* ---- row kinds ---------------------------------------------------------- */

/* Whether rows r - 1 and r are one span: the same sequence at consecutive
 * positions, neither marked a decode row. */
static bool linked(const inf_batch *b, int r) {
    return r > 0 && r < b->n_rows && b->seq[r - 1] == b->seq[r] && b->pos[r - 1] == b->pos[r] - 1 &&
           !(b->decode && (b->decode[r - 1] || b->decode[r]));
}

int blk_span_len(const inf_batch *b, int r) {
    int n = 1;
    while (linked(b, r + n))
        n++;
    return n;
}

/* Whether row r is a prompt row: part of a span of two or more rows (a
 * one-row span is a decode step). The backend computes prompt rows and decode
 * rows with different kernels; the kind of a row, never the batch around it,
 * decides (a prompt gives the same bits in any chunking of two or more rows). */
static bool prompt_row(const inf_batch *b, int r) {
    return linked(b, r) || linked(b, r + 1);
}

/* ys[i] = x . ws[i]^T for T rows all of one kind, one call. */
static void matmul_kind(const inf_backend *be, float *const *ys, const float *x,
                        const inf_weight *const *ws, int n, int T, bool prompt) {
    if (be->matmul_n) {
        be->matmul_n(be, ys, x, ws, n, T, prompt);
        return;
    }
    for (int i = 0; i < n; i++)
        be->matmul(be, ys[i], x, ws[i], T);
}

void blk_matmul_rows(const inf_backend *be, const inf_batch *b, float *const *ys, const float *x,
                     const inf_weight *const *ws, int n) {
    for (int r0 = 0, r1; r0 < b->n_rows; r0 = r1) {
        bool kind = prompt_row(b, r0);
        for (r1 = r0 + 1; r1 < b->n_rows && prompt_row(b, r1) == kind; r1++) {
        }
        float *y[4];
        for (int i = 0; i < n; i++)
            y[i] = ys[i] + (int64_t)r0 * ws[i]->n_out;
        matmul_kind(be, y, x + (int64_t)r0 * ws[0]->n_in, ws, n, r1 - r0, kind);
    }
}

/* ---- attention ---------------------------------------------------------- */

void blk_attn_core(const inf_model *m, blk_acts *a, const inf_batch *b, const inf_kv_view *kv,
                   int l, const blk_attn *w) {
    const inf_backend *be = m->be;
    const inf_hparams *hp = &m->hp;
    const int T = b->n_rows, D = hp->head_dim;
    const int Q = hp->n_head * D, KV = hp->n_head_kv * D;

    /* Qwen3: RMSNorm over each head's head_dim slice of q and k, before RoPE. */
    be->rmsnorm(be, a->q, a->q, w->q_norm, T * hp->n_head, D, hp->rms_eps);
    be->rmsnorm(be, a->k, a->k, w->k_norm, T * hp->n_head_kv, D, hp->rms_eps);
    be->rope(be, a->q, b->pos, T, hp->n_head, D, m->n_rot, m->rope_cos, m->rope_sin);
    be->rope(be, a->k, b->pos, T, hp->n_head_kv, D, m->n_rot, m->rope_cos, m->rope_sin);

    /* The K/V store and attention, in one place. Every row's K and V go into
     * its sequence's cache first, so each span's attention below finds its
     * own keys in place. */
    for (int r = 0; r < T; r++) {
        const inf_kv_view *view = &kv[(int64_t)b->seq[r] * hp->n_layer + l];
        inf_kv_store_row(view, b->pos[r], a->k + (int64_t)r * KV, a->v + (int64_t)r * KV);
    }
    for (int r = 0, n; r < T; r += n) {
        n = blk_span_len(b, r);
        const inf_kv_view *view = &kv[(int64_t)b->seq[r] * hp->n_layer + l];
        float *out = a->att + (int64_t)r * Q;
        const float *q = a->q + (int64_t)r * Q;
        if (n == 1)
            be->attn_decode(be, out, q, view, b->pos[r] + 1, &m->attn);
        else
            be->attn_prefill(be, out, q, view, b->pos[r], n, &m->attn);
    }
}

void blk_attention(const inf_model *m, blk_acts *a, const inf_batch *b, const inf_kv_view *kv,
                   int l, const blk_attn *w) {
    const inf_backend *be = m->be;
    const int T = b->n_rows, E = m->hp.n_embd;
    be->rmsnorm(be, a->xb, a->x, w->norm, T, E, m->hp.rms_eps);
    blk_matmul_rows(be, b, (float *const[]){a->q, a->k, a->v}, a->xb,
                    (const inf_weight *const[]){&w->wq, &w->wk, &w->wv}, 3);
    blk_attn_core(m, a, b, kv, l, w);
    /* Qwen3: n_head*head_dim need not equal n_embd; wo maps Q back to E. */
    blk_matmul_rows(be, b, (float *const[]){a->xb}, a->att, (const inf_weight *const[]){&w->wo}, 1);
    be->add(be, a->x, a->xb, (int64_t)T * E);
}

/* ---- FFN ---------------------------------------------------------------- */

void blk_ffn_swiglu(const inf_model *m, blk_acts *a, const inf_batch *b, const blk_ffn *w) {
    const inf_backend *be = m->be;
    const int T = b->n_rows, E = m->hp.n_embd;
    const int64_t F = w->w_gate.n_out;
    be->rmsnorm(be, a->xb, a->x, w->norm, T, E, m->hp.rms_eps);
    blk_matmul_rows(be, b, (float *const[]){a->gate, a->up}, a->xb,
                    (const inf_weight *const[]){&w->w_gate, &w->w_up}, 2);
    be->swiglu(be, a->gate, a->gate, a->up, T * F);
    blk_matmul_rows(be, b, (float *const[]){a->xb}, a->gate,
                    (const inf_weight *const[]){&w->w_down}, 1);
    be->add(be, a->x, a->xb, (int64_t)T * E);
}

/* The router of row r: softmax over all experts (f32), the top k by weight
 * (ties to the lower expert id), renormalized to sum 1 when the model says. */
static void route_row(const inf_model *m, blk_acts *a, int r, int n_expert) {
    const int K = m->hp.n_expert_used;
    float *p = a->probs + (int64_t)r * n_expert;
    int *ids = a->chosen + (int64_t)r * K;
    float *wt = a->weight + (int64_t)r * K;
    m->be->softmax(m->be, p, n_expert);
    /* one pass, keeping the k best sorted (a later expert passes an earlier
     * one only when strictly greater: ties go to the lower id) */
    int n = 0;
    for (int e = 0; e < n_expert; e++) {
        if (n == K && !(p[e] > wt[K - 1])) continue;
        int at = n < K ? n++ : K - 1;
        while (at > 0 && p[e] > wt[at - 1]) {
            ids[at] = ids[at - 1];
            wt[at] = wt[at - 1];
            at--;
        }
        ids[at] = e;
        wt[at] = p[e];
    }
    float sum = 0;
    for (int j = 0; j < K; j++)
        sum += wt[j];
    if (m->hp.norm_topk_prob)
        for (int j = 0; j < K; j++)
            wt[j] /= sum;
}

/* One expert over the rows routed to it (by_expert[i0..i1), all of one
 * kind): gathered, gate/up, SwiGLU, down, scattered to each (row, slot). */
static void run_expert(const inf_model *m, blk_acts *a, const blk_moe *w, int e, int i0, int i1,
                       bool prompt) {
    const inf_backend *be = m->be;
    const int K = m->hp.n_expert_used, E = m->hp.n_embd, n = i1 - i0;
    const int64_t F = w->w_gate[e].n_out;
    for (int i = 0; i < n; i++)
        memcpy(a->xe + (int64_t)i * E, a->xb + (int64_t)(a->by_expert[i0 + i] / K) * E,
               E * sizeof(float));
    matmul_kind(be, (float *const[]){a->gate, a->up}, a->xe,
                (const inf_weight *const[]){&w->w_gate[e], &w->w_up[e]}, 2, n, prompt);
    be->swiglu(be, a->gate, a->gate, a->up, n * F);
    matmul_kind(be, (float *const[]){a->ye}, a->gate, (const inf_weight *const[]){&w->w_down[e]}, 1,
                n, prompt);
    for (int i = 0; i < n; i++)
        memcpy(a->yk + (int64_t)a->by_expert[i0 + i] * E, a->ye + (int64_t)i * E,
               E * sizeof(float));
}

void blk_ffn_moe(const inf_model *m, blk_acts *a, const inf_batch *b, const blk_moe *w) {
    const inf_backend *be = m->be;
    const int T = b->n_rows, E = m->hp.n_embd, K = m->hp.n_expert_used, X = w->n_expert;

    be->rmsnorm(be, a->xb, a->x, w->norm, T, E, m->hp.rms_eps);
    blk_matmul_rows(be, b, (float *const[]){a->probs}, a->xb,
                    (const inf_weight *const[]){&w->router}, 1);
    for (int r = 0; r < T; r++)
        route_row(m, a, r, X);

    /* Group the (row, slot) pairs by expert, rows in batch order, so each
     * chosen expert's weights are read once for the whole batch and the
     * experts no row chose are not read at all. */
    memset(a->start, 0, (size_t)(X + 1) * sizeof(int));
    for (int i = 0; i < T * K; i++)
        a->start[a->chosen[i] + 1]++;
    for (int e = 0; e < X; e++)
        a->start[e + 1] += a->start[e];
    /* each expert's decode rows first, then its prompt rows: one call per kind */
    memcpy(a->cursor, a->start, (size_t)X * sizeof(int));
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < T * K; i++)
            if (prompt_row(b, i / K) == (pass == 1)) a->by_expert[a->cursor[a->chosen[i]]++] = i;
    for (int e = 0; e < X; e++) {
        int i0 = a->start[e], i1 = a->start[e + 1];
        if (i0 == i1) continue;
        int split = i0;
        while (split < i1 && !prompt_row(b, a->by_expert[split] / K))
            split++;
        if (split > i0) run_expert(m, a, w, e, i0, split, false);
        if (i1 > split) run_expert(m, a, w, e, split, i1, true);
    }

    /* The weighted sum, per row in its own slot order (highest weight first),
     * so a row's sum is the same whatever else the batch holds. */
    be->moe_sum(be, a->x, a->yk, a->weight, T, K, E);
}

/* ---- facts -------------------------------------------------------------- */

void blk_decode_facts(const inf_model_file *mf, inf_model_facts *f, blk_name embd, blk_name output,
                      blk_name ffn_gate) {
    char e[160], g[160];
    blk_name_fmt(e, sizeof e, mf, embd, -1, -1);
    blk_name_fmt(g, sizeof g, mf, ffn_gate, 0, -1);
    const inf_tensor *te = inf_model_find(mf, e), *tg = inf_model_find(mf, g);
    const inf_tensor *head = blk_output_tensor(mf, embd, output);
    const double share = mf->hp.n_expert > 0 ? (double)mf->hp.n_expert_used / mf->hp.n_expert : 1;
    f->ffn_type = tg ? tg->type : INF_F32;
    for (int i = 0; i < mf->n_tensors; i++) {
        const inf_tensor *t = &mf->tensors[i];
        if (t == te || t == head || !strncmp(t->name, "mtp.", 4)) continue;
        if (!strncmp(t->name, "blk.", 4) && atoi(t->name + 4) >= mf->hp.n_layer) continue;
        const bool expert = strstr(t->name, "_exps") || strstr(t->name, ".experts.");
        f->decode_bytes += expert ? (uint64_t)((double)t->nbytes * share) : t->nbytes;
        if (expert && strstr(t->name, "gate")) f->ffn_type = t->type;
    }
    /* the output head reads its whole table; the embedding lookup only one row */
    if (head) f->decode_bytes += head->nbytes;
}

/* ---- head --------------------------------------------------------------- */

int blk_logits(const inf_model *m, blk_acts *a, const inf_batch *b, const float *norm,
               const inf_weight *output, float *logits, inf_err *err) {
    const inf_backend *be = m->be;
    const int T = b->n_rows, E = m->hp.n_embd;
    /* Only the rows that hand something back go through the final norm, and
     * only the logits rows through the head: in a prefill that is one row out
     * of T, and the head is the biggest matmul. The norm is per row, so a
     * row's bits do not depend on which others share the call. */
    int n_sel = 0, n_hidden = 0;
    for (int r = 0; r < T; r++) {
        int want = b->logits ? b->logits[r] : (r == T - 1 ? INF_OUT_LOGITS : INF_OUT_NONE);
        if (want == INF_OUT_NONE) continue;
        memcpy(a->xl + (int64_t)n_sel * E, a->x + (int64_t)r * E, E * sizeof(float));
        n_sel++;
    }
    if (n_sel == 0) return 0;
    be->rmsnorm(be, a->xl, a->xl, norm, n_sel, E, m->hp.rms_eps);
    /* hidden rows out, logits rows packed to the front for the head */
    int n_logits = 0;
    for (int r = 0, k = 0; r < T; r++) {
        int want = b->logits ? b->logits[r] : (r == T - 1 ? INF_OUT_LOGITS : INF_OUT_NONE);
        if (want == INF_OUT_NONE) continue;
        const float *row = a->xl + (int64_t)k++ * E;
        if (want == INF_OUT_HIDDEN)
            memcpy(b->hidden + (int64_t)n_hidden++ * E, row, E * sizeof(float));
        else if (n_logits++ != k - 1)
            memmove(a->xl + (int64_t)(n_logits - 1) * E, row, E * sizeof(float));
    }
    if (n_logits) be->matmul(be, logits, a->xl, output, n_logits);
    if (be->take_error(be, err)) return -1;
    return 0;
}
