#include "runtime/engine_draft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int inf_exec_forward_kv(inf_model *m, inf_kv_cache *kv, const inf_exec_batch *b, float *logits,
                        inf_err *err) {
    inf_batch ib = {.n_rows = b->n_rows,
                    .tokens = b->tokens,
                    .pos = b->pos,
                    .seq = b->seq,
                    .logits = b->logits,
                    .decode = b->decode,
                    .hidden = b->hidden};
    if (inf_model_forward(m, &ib, kv->views, kv->n_seq, logits, err)) return -1;
    for (int r = 0; r < b->n_rows; r++)
        inf_kv_cache_commit(kv, b->seq[r], b->pos[r], b->tokens[r]);
    return 0;
}

void inf_exec_truncate_kv(inf_model *m, inf_kv_cache *kv, int seq, int n) {
    const int from = inf_kv_cache_truncate(kv, seq, n);
    if (from >= 0) inf_model_replay(m, inf_kv_cache_views(kv, seq), from, n);
}

inf_kv_layout inf_exec_kv_layout(const inf_hparams *hp, bool spec) {
    const size_t log = inf_model_log_floats(hp);
    return (inf_kv_layout){.n_layer = hp->n_layer,
                           .kv_dim = hp->n_head_kv * hp->head_dim,
                           .head_dim = hp->head_dim,
                           .recurrent = hp->recurrent,
                           .state_floats = inf_model_state_floats(hp),
                           .log_rows = spec && log ? INF_SPEC_MAX_DRAFT + 1 : 0,
                           .log_floats = log};
}

static int dr_forward(void *ctx, const inf_exec_batch *b, float *logits, inf_err *err) {
    inf_draft *d = ctx;
    return inf_exec_forward_kv(d->model, d->kv, b, logits, err);
}
static int dr_seq_begin(void *ctx, int seq, const int32_t *prompt, int n, int max_keep) {
    return inf_kv_cache_begin(((inf_draft *)ctx)->kv, seq, prompt, n, max_keep);
}
static int dr_seq_reserve(void *ctx, int seq, int n_new, inf_err *err) {
    return inf_kv_cache_reserve(((inf_draft *)ctx)->kv, seq, n_new, err);
}
static void dr_seq_truncate(void *ctx, int seq, int n) {
    inf_draft *d = ctx;
    inf_exec_truncate_kv(d->model, d->kv, seq, n);
}
static void dr_seq_mark(void *ctx, int seq) {
    inf_kv_cache_mark(((inf_draft *)ctx)->kv, seq);
}
static void dr_seq_end(void *ctx, int seq) {
    inf_kv_cache_end(((inf_draft *)ctx)->kv, seq);
}
static void dr_seq_reset(void *ctx, int seq) {
    inf_kv_cache_reset(((inf_draft *)ctx)->kv, seq);
}

/* The draft proposes token ids the target reads as its own: the same
 * vocabulary, id for id. */
static int check_vocab(const inf_model_file *t, const inf_model_file *d, const char *path,
                       inf_err *err) {
    if (t->hp.n_vocab != d->hp.n_vocab)
        return inf_fail(err,
                        "-md %s: a vocabulary of %d tokens, the model has %d (a draft model "
                        "must share the model's tokenizer)",
                        path, d->hp.n_vocab, t->hp.n_vocab);
    const inf_vocab_desc *a = &t->vocab, *b = &d->vocab;
    if (a->n_tokens != b->n_tokens)
        return inf_fail(err, "-md %s: its tokenizer has %d tokens, the model's %d", path,
                        b->n_tokens, a->n_tokens);
    for (int i = 0; i < a->n_tokens; i++)
        if (strcmp(a->tokens[i], b->tokens[i]))
            return inf_fail(err,
                            "-md %s: token %d is \"%.40s\", the model's is \"%.40s\" (a draft "
                            "model must share the model's tokenizer)",
                            path, i, b->tokens[i], a->tokens[i]);
    return 0;
}

int inf_draft_open(inf_draft **out, const char *path, const inf_backend *be,
                   const inf_model_file *target, int n_seq, int n_ctx, int max_rows,
                   const inf_kv_opts *kv, inf_err *err) {
    *out = NULL;
    inf_draft *d = calloc(1, sizeof *d);
    if (!d) return inf_fail(err, "-md %s: out of memory", path);
    if (inf_model_open(&d->mf, path, err)) {
        inf_fail_ctx(err, "-md (the draft model)");
        goto fail;
    }
    const inf_hparams *hp = &d->mf->hp;
    if (check_vocab(target, d->mf, path, err)) goto fail;
    if (hp->no_head) {
        inf_fail(err, "-md %s: an embedding model (no output head) cannot draft", path);
        goto fail;
    }
    if (hp->n_ctx_train > 0 && n_ctx > hp->n_ctx_train) {
        inf_fail(err, "-md %s: trained for %d positions, the context is %d (-c)", path,
                 hp->n_ctx_train, n_ctx);
        goto fail;
    }
    if (inf_model_create(&d->model, d->mf, be, n_ctx, max_rows, err)) {
        inf_fail_ctx(err, "-md %s", path);
        goto fail;
    }
    const inf_kv_layout lay = inf_exec_kv_layout(hp, true);
    inf_kv_opts o = {.kind = INF_KV_BASIC, .type_k = kv->type_k, .type_v = kv->type_v};
    if ((o.type_k == INF_Q8_0 || o.type_v == INF_Q8_0) && hp->head_dim % INF_QK8_0)
        o.type_k = o.type_v = INF_F16; /* the draft's bits only change its guesses */
    if (inf_kv_cache_create(&d->kv, &o, &lay, n_seq, n_ctx, err)) {
        inf_fail_ctx(err, "-md %s", path);
        goto fail;
    }
    snprintf(d->name, sizeof d->name, "%s", d->mf->name ? d->mf->name : path);
    d->ex = (inf_exec){.ctx = d,
                       .n_seq = n_seq,
                       .n_ctx = n_ctx,
                       .n_vocab = hp->n_vocab,
                       .max_rows = max_rows,
                       .model_name = d->name,
                       .model_path = path,
                       .forward = dr_forward,
                       .seq_begin = dr_seq_begin,
                       .seq_reserve = dr_seq_reserve,
                       .seq_truncate = dr_seq_truncate,
                       .seq_mark = d->kv->n_rec_layer ? dr_seq_mark : NULL,
                       .seq_end = dr_seq_end,
                       .seq_reset = dr_seq_reset};
    *out = d;
    return 0;
fail:
    inf_draft_close(d);
    return -1;
}

void inf_draft_close(inf_draft *d) {
    if (!d) return;
    inf_kv_cache_free(d->kv);
    inf_model_free(d->model);
    inf_model_close(d->mf);
    free(d);
}
