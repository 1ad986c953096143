/* The architecture registry and what every model shares: opening and
 * binding a file to its architecture, the RoPE tables, checking a batch.
 * See model.h and arch.h. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/rope.h"
#include "util/mem.h"

/* Every architecture inferno runs. */
static const inf_arch *const archs[] = {&inf_arch_qwen3, &inf_arch_qwen3moe, &inf_arch_qwen35,
                                        &inf_arch_qwen35moe};
#define N_ARCHS (int)(sizeof archs / sizeof archs[0])

static bool in_list(const char *const *list, const char *s) {
    for (; *list; list++)
        if (!strcmp(*list, s)) return true;
    return false;
}

static const inf_arch *find_arch(const inf_model_file *mf) {
    if (!mf->arch) return NULL;
    for (int i = 0; i < N_ARCHS; i++)
        if (in_list(mf->format == INF_FORMAT_GGUF ? archs[i]->gguf_archs : archs[i]->hf_types,
                    mf->arch))
            return archs[i];
    return NULL;
}

const char *inf_model_arch_name(const inf_model_file *mf) {
    const inf_arch *a = find_arch(mf);
    return a ? a->name : NULL;
}

int inf_model_bind_file(inf_model_file *mf, inf_err *err) {
    const inf_arch *a = find_arch(mf);
    if (!a) {
        char names[256];
        size_t k = 0;
        for (int i = 0; i < N_ARCHS && k < sizeof names; i++) {
            const char *const *l =
                mf->format == INF_FORMAT_GGUF ? archs[i]->gguf_archs : archs[i]->hf_types;
            for (; *l && k < sizeof names; l++)
                k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", *l);
        }
        return inf_fail(err, "%s%s: %s is \"%s\"; inferno supports %s", mf->path,
                        mf->format == INF_FORMAT_GGUF ? "" : "/config.json",
                        mf->format == INF_FORMAT_GGUF ? "general.architecture" : "model_type",
                        mf->arch ? mf->arch : "", names);
    }
    return a->bind_file(mf, err);
}

int inf_model_open(inf_model_file **out, const char *path, inf_err *err) {
    if (inf_modelfile_open(out, path, err)) return -1;
    if (inf_model_bind_file(*out, err)) {
        inf_model_close(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int check_hparams(const inf_model_file *mf, int n_ctx, int max_rows, inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    if (hp->n_layer <= 0 || hp->n_embd <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->head_dim <= 0 || (hp->n_ff <= 0 && hp->n_expert <= 0) || hp->n_vocab <= 0)
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
    if (hp->n_rot < 0 || hp->n_rot % 2 || hp->n_rot > hp->head_dim)
        return inf_fail(err, "%s: %d RoPE dimensions: expected an even number up to head_dim %d",
                        mf->path, hp->n_rot, hp->head_dim);
    if (!(hp->rope_theta > 0) || !(hp->rms_eps > 0))
        return inf_fail(err, "%s: rope theta %g and rms eps %g must be positive", mf->path,
                        hp->rope_theta, hp->rms_eps);
    if (hp->n_expert < 0 || hp->n_expert_used < 0 || hp->n_expert_used > hp->n_expert ||
        (hp->n_expert > 0 && (hp->n_expert_used == 0 || hp->n_ff_exp <= 0)))
        return inf_fail(err,
                        "%s: %d experts, %d used per token, expert FFN %d: expected 1..%d used",
                        mf->path, hp->n_expert, hp->n_expert_used, hp->n_ff_exp, hp->n_expert);
    if (n_ctx <= 0 || max_rows <= 0)
        return inf_fail(err, "context size %d and batch rows %d must be positive", n_ctx, max_rows);
    return 0;
}

int inf_model_create(inf_model **out, const inf_model_file *mf, const inf_backend *be, int n_ctx,
                     int max_rows, inf_err *err) {
    *out = NULL;
    const inf_arch *a = find_arch(mf);
    if (!a) return inf_model_bind_file((inf_model_file *)mf, err);
    if (check_hparams(mf, n_ctx, max_rows, err)) return -1;
    const inf_hparams *hp = &mf->hp;
    inf_model *m = calloc(1, sizeof *m);
    if (!m) return inf_fail(err, "out of memory");
    *m = (inf_model){
        .arch = a, .file = mf, .be = be, .hp = *hp, .n_ctx = n_ctx, .max_rows = max_rows};
    m->attn = (inf_attn_shape){.n_head = hp->n_head,
                               .n_head_kv = hp->n_head_kv,
                               .head_dim = hp->head_dim,
                               .scale = 1.0f / sqrtf((float)hp->head_dim)};
    m->n_rot = hp->n_rot ? hp->n_rot : hp->head_dim;
    const size_t half = (size_t)n_ctx * (size_t)(m->n_rot / 2);
    /* calloc: pages past the positions reached are never touched */
    m->rope_cos = calloc(half, sizeof(float));
    m->rope_sin = calloc(half, sizeof(float));
    if (!m->rope_cos || !m->rope_sin) {
        inf_fail(err, "out of memory for the RoPE tables (context %d)", n_ctx);
        goto fail;
    }
    if (a->create(m, err)) goto fail;
    *out = m;
    return 0;
fail:
    inf_model_free(m);
    return -1;
}

void inf_model_free(inf_model *m) {
    if (!m) return;
    m->arch->free_model(m);
    free(m->rope_cos);
    free(m->rope_sin);
    free(m);
}

static int check_batch(const inf_model *m, const inf_batch *b, const inf_kv_view *kv, int n_seq,
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
        int want = b->logits ? b->logits[r] : INF_OUT_LOGITS;
        if (want > INF_OUT_HIDDEN || (want == INF_OUT_HIDDEN && !b->hidden))
            return inf_fail(err,
                            "row %d: output kind %d (expected INF_OUT_*, hidden rows need "
                            "b->hidden)",
                            r, want);
        if (want == INF_OUT_LOGITS && m->hp.no_head && (b->logits || r == b->n_rows - 1))
            return inf_fail(err,
                            "%s has no output head (an embedding model): it cannot generate "
                            "text, only embed",
                            m->file->path);
        int cap = kv[(int64_t)b->seq[r] * m->hp.n_layer].capacity;
        if (cap > 0 && b->pos[r] >= cap)
            return inf_fail(
                err, "row %d: position %d is beyond its cache (%d positions, the context size)", r,
                b->pos[r], cap);
    }
    return 0;
}

int inf_model_forward(inf_model *m, const inf_batch *b, const inf_kv_view *kv, int n_seq,
                      float *logits, inf_err *err) {
    if (check_batch(m, b, kv, n_seq, err)) return -1;
    /* the RoPE tables, as far as this batch reaches (a 40K context's take
       tens of ms to fill, and most runs never get near its end) */
    int top = 0;
    for (int r = 0; r < b->n_rows; r++)
        if (b->pos[r] >= top) top = b->pos[r] + 1;
    if (top > m->rope_filled) {
        const int to = top + 1023 < m->n_ctx ? (top + 1023) / 1024 * 1024 : m->n_ctx;
        inf_rope_fill(m->rope_cos, m->rope_sin, m->rope_filled, to, m->n_rot, &m->hp);
        m->rope_filled = to;
    }
    /* An op that cannot get its scratch memory skips its work and says so
     * through take_error (backend.h): the architectures check after every
     * layer, so a failed call stops early, and before the logits are handed
     * back. A failure left by ops run outside a forward call is not this
     * call's. */
    m->be->take_error(m->be, NULL);
    return m->arch->forward(m, b, kv, logits, err);
}

size_t inf_model_state_floats(const inf_hparams *hp) {
    bool any = false;
    for (int l = 0; l < hp->n_layer && l < INF_MAX_LAYERS; l++)
        any |= hp->recurrent[l];
    if (!any) return 0;
    const size_t ch = 2 * (size_t)hp->ssm_n_k_heads * (size_t)hp->ssm_d_k +
                      (size_t)hp->ssm_n_v_heads * (size_t)hp->ssm_d_v;
    return (size_t)(hp->ssm_d_conv - 1) * ch +
           (size_t)hp->ssm_n_v_heads * (size_t)hp->ssm_d_k * (size_t)hp->ssm_d_v;
}

size_t inf_model_log_floats(const inf_hparams *hp) {
    if (!inf_model_state_floats(hp)) return 0;
    return 2 * (size_t)hp->ssm_n_k_heads * (size_t)hp->ssm_d_k +
           (size_t)hp->ssm_n_v_heads * (size_t)hp->ssm_d_v + 2 * (size_t)hp->ssm_n_v_heads;
}

void inf_model_replay(inf_model *m, const inf_kv_view *kv, int from, int n) {
    if (m->arch->replay && n > from) m->arch->replay(m, kv, from, n);
}

int inf_model_kv_layers(const inf_hparams *hp) {
    int n = 0;
    for (int l = 0; l < hp->n_layer && l < INF_MAX_LAYERS; l++)
        n += !hp->recurrent[l];
    return n;
}

void inf_model_facts_get(const inf_model_file *mf, inf_model_facts *f) {
    memset(f, 0, sizeof *f);
    const inf_arch *a = find_arch(mf);
    if (a) a->facts(mf, f);
}

static int plan_grow(inf_gguf_plan *p) {
    if (p->n < p->cap) return 0;
    int cap = p->cap ? 2 * p->cap : 64;
    inf_gguf_tensor *t = realloc(p->t, (size_t)cap * sizeof *t);
    if (!t) return -1;
    p->t = t;
    p->cap = cap;
    return 0;
}

int inf_gguf_plan_add_runs(inf_gguf_plan *p, const char *name, int layer, int n_dims,
                           const int64_t *ne, const inf_rows *runs, int n_runs) {
    if (plan_grow(p)) return -1;
    inf_gguf_tensor *t = &p->t[p->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->layer = layer;
    t->n_dims = n_dims;
    for (int d = 0; d < 4; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    if (!(t->runs = malloc((size_t)(n_runs ? n_runs : 1) * sizeof *runs))) return -1;
    memcpy(t->runs, runs, (size_t)n_runs * sizeof *runs);
    t->n_runs = n_runs;
    p->n++;
    return 0;
}

int inf_gguf_plan_add(inf_gguf_plan *p, const char *name, int layer, const inf_tensor *src) {
    int64_t rows = 1;
    for (int d = 1; d < src->n_dims; d++)
        rows *= src->ne[d];
    const inf_rows run = {.src = src, .row0 = 0, .n_rows = rows};
    return inf_gguf_plan_add_runs(p, name, layer, src->n_dims, src->ne, &run, 1);
}

void inf_gguf_plan_free(inf_gguf_plan *p) {
    for (int i = 0; i < p->n; i++) {
        free(p->t[i].runs);
        free(p->t[i].perm);
    }
    free(p->t);
    memset(p, 0, sizeof *p);
}

int inf_model_gguf_plan(const inf_model_file *mf, inf_gguf_plan *p, inf_err *err) {
    memset(p, 0, sizeof *p);
    int rc = 0;
    if (mf->format == INF_FORMAT_GGUF) {
        for (int i = 0; i < mf->n_tensors && !rc; i++) {
            const inf_tensor *t = &mf->tensors[i];
            rc = inf_gguf_plan_add(p, t->name,
                                   !strncmp(t->name, "blk.", 4) ? atoi(t->name + 4) : -1, t);
            if (rc) inf_fail(err, "out of memory");
        }
    } else {
        const inf_arch *a = find_arch(mf);
        if (!a)
            rc = inf_fail(err, "%s: no GGUF names for architecture %s", mf->path,
                          mf->arch ? mf->arch : "?");
        else
            rc = a->gguf_plan(mf, p, err);
    }
    if (rc) inf_gguf_plan_free(p);
    return rc;
}
