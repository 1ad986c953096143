#include "server/engine_inferno.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kv/kv_basic.h"
#include "kv/radix.h"
#include "model/qwen3.h"
#include "modelfile/model.h"
#include "runtime/sampler.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

typedef struct eng_ctx {
    inf_model_file *mf;
    inf_tokenizer *tok;
    inf_backend be;
    inf_qwen3 *model;
    int n_seq, n_ctx, n_layer;
    inf_kv_basic **kv;   /* [n_seq] one cache per slot (basic) */
    inf_kv_pool *pool;   /* paged: the block pool of all slots */
    inf_radix *radix;    /* paged: the prefix cache shared across requests */
    inf_kv_seq **seqs;   /* [n_seq] paged: each slot's block table */
    inf_kv_view *views;  /* [n_seq][n_layer] */
    char name[128];
} eng_ctx;

static int eng_forward(void *ctx, const srv_batch *b, float *logits, inf_err *err) {
    eng_ctx *c = ctx;
    inf_batch ib = {.n_rows = b->n_rows, .tokens = b->tokens, .pos = b->pos, .seq = b->seq,
                    .logits = b->logits};
    if (c->pool) {
        /* Blocks for every row first (all or nothing per sequence; the pool
         * evicts cached prefixes when short), then the forward pass. */
        for (int r = 0; r < b->n_rows; r++) {
            if (b->seq[r] < 0 || b->seq[r] >= c->n_seq)
                return inf_fail(err, "row %d: sequence %d, expected 0..%d", r, b->seq[r],
                                c->n_seq - 1);
            inf_kv_seq *s = c->seqs[b->seq[r]];
            int need = b->pos[r] + 1 - s->n_past;
            if (b->pos[r] < s->n_past) continue;
            if (inf_kv_seq_reserve(s, need, err)) return -1;
            s->n_past += need; /* rows below are reserved and written by this call */
        }
        for (int q = 0; q < c->n_seq; q++)
            inf_kv_seq_views(c->seqs[q], c->views + (size_t)q * (size_t)c->n_layer);
        return inf_qwen3_forward(c->model, &ib, c->views, c->n_seq, logits, err);
    }
    if (inf_qwen3_forward(c->model, &ib, c->views, c->n_seq, logits, err)) return -1;
    for (int r = 0; r < b->n_rows; r++) {
        inf_kv_basic *kv = c->kv[b->seq[r]];
        if (b->pos[r] + 1 > kv->n_past) kv->n_past = b->pos[r] + 1;
    }
    return 0;
}

static void eng_truncate(void *ctx, int seq, int n) {
    eng_ctx *c = ctx;
    if (c->pool) {
        if (n < c->seqs[seq]->n_past) inf_kv_seq_truncate(c->seqs[seq], n);
    } else if (n < c->kv[seq]->n_past) {
        inf_kv_basic_truncate(c->kv[seq], n);
    }
}

static void eng_cache_release(void *ctx, int seq, const int32_t *tokens, int n) {
    eng_ctx *c = ctx;
    inf_kv_seq *s = c->seqs[seq];
    if (n > s->n_past) n = s->n_past;
    inf_kv_seq_truncate(s, n);
    inf_err err;
    /* Out of memory for a tree node only loses the cached copy. */
    (void)inf_radix_insert_seq(c->radix, s, tokens, &err);
    inf_kv_seq_truncate(s, 0);
}

static int eng_cache_attach(void *ctx, int seq, const int32_t *tokens, int n) {
    eng_ctx *c = ctx;
    inf_kv_seq_truncate(c->seqs[seq], 0);
    inf_err err;
    return inf_radix_attach(c->radix, c->seqs[seq], tokens, n, &err);
}

static void eng_cache_stats(void *ctx, srv_cache_stats *o) {
    eng_ctx *c = ctx;
    const inf_radix_stats *st = &c->radix->stats;
    *o = (srv_cache_stats){.blocks_total = c->pool->n_blocks,
                           .blocks_used = inf_kv_pool_used(c->pool),
                           .block_size = c->pool->block_size,
                           .lookups = st->n_lookups,
                           .prefix_hits = st->n_hits,
                           .tokens_reused = st->tokens_reused,
                           .evicted_blocks = st->n_evicted_blocks,
                           .cached_tokens = st->n_cached_tokens};
}

static int eng_tokenize(void *ctx, const char *text, size_t n, bool parse_special, int32_t **ids,
                        int *n_ids, inf_err *err) {
    eng_ctx *c = ctx;
    *ids = NULL;
    *n_ids = 0;
    int32_t *raw = NULL;
    int n_raw = 0;
    if (inf_tok_encode(c->tok, text, n, parse_special, &raw, &n_raw, err)) return -1;
    bool bos = inf_tok_add_bos(c->tok) && inf_tok_bos(c->tok) >= 0;
    if (!bos) {
        *ids = raw;
        *n_ids = n_raw;
        return 0;
    }
    *ids = malloc(((size_t)n_raw + 1) * sizeof **ids);
    if (!*ids) {
        free(raw);
        return inf_fail(err, "out of memory");
    }
    (*ids)[0] = inf_tok_bos(c->tok);
    if (n_raw) memcpy(*ids + 1, raw, (size_t)n_raw * sizeof *raw);
    *n_ids = n_raw + 1;
    free(raw);
    return 0;
}

static int eng_piece(void *ctx, int32_t id, char *buf, int cap) {
    eng_ctx *c = ctx;
    size_t len = 0;
    const char *p = inf_tok_token_bytes(c->tok, id, &len);
    if (!p) return 0;
    if (len > (size_t)cap) len = (size_t)cap;
    memcpy(buf, p, len);
    return (int)len;
}

static bool eng_is_eog(void *ctx, int32_t id) {
    eng_ctx *c = ctx;
    return inf_tok_is_eog(c->tok, id);
}

static int eng_render(void *ctx, const srv_request *r, char **out, srv_error *e) {
    eng_ctx *c = ctx;
    const char *src = c->mf->vocab.chat_template;
    if (!src)
        return srv_error_set(e, 400, "invalid_request_error", NULL, "messages",
                             "this model has no chat template; use /v1/completions");
    json_t *kw = r->template_kwargs ? json_deep_copy(r->template_kwargs) : json_object();
    json_object_set_new(kw, "enable_thinking", json_boolean(r->enable_thinking));
    int32_t ids[2] = {inf_tok_bos(c->tok), inf_tok_eos(c->tok)};
    const char *names[2] = {"bos_token", "eos_token"};
    for (int i = 0; i < 2; i++) {
        const char *t = ids[i] >= 0 ? inf_tok_token_text(c->tok, ids[i]) : NULL;
        if (t && !json_object_get(kw, names[i])) json_object_set_new(kw, names[i], json_string(t));
    }
    inf_err err = {{0}};
    int rc = inf_chat_render(out, src, r->messages, r->tools, true, kw, &err);
    json_decref(kw);
    if (rc)
        return srv_error_set(e, 400, "invalid_request_error", NULL, "messages",
                             "chat template: %s", err.msg);
    return 0;
}

static void *eng_sampler_new(void *ctx, const srv_sampling *p, uint64_t seed) {
    eng_ctx *c = ctx;
    inf_sampler_params sp = inf_sampler_defaults();
    sp.temp = p->temperature;
    sp.top_k = p->top_k;
    sp.top_p = p->top_p;
    sp.min_p = p->min_p;
    sp.repeat_penalty = p->repeat_penalty;
    sp.repeat_last_n = p->penalty_last_n;
    sp.presence_penalty = p->presence_penalty;
    sp.frequency_penalty = p->frequency_penalty;
    sp.seed = seed == INF_SEED_RANDOM ? seed ^ 1 : seed;
    inf_sampler *s = NULL;
    inf_err err;
    if (inf_sampler_create(&s, &sp, c->mf->hp.n_vocab, c->n_ctx, &err)) return NULL;
    return s;
}

static void eng_sampler_accept(void *s, int32_t id) { inf_sampler_accept(s, id); }
static int32_t eng_sampler_sample(void *s, float *logits, int n_vocab) {
    return inf_sampler_sample(s, logits);
}
static void eng_sampler_free(void *s) { inf_sampler_free(s); }

static void eng_free(eng_ctx *c) {
    if (!c) return;
    for (int i = 0; c->kv && i < c->n_seq; i++) inf_kv_basic_free(c->kv[i]);
    free(c->kv);
    for (int i = 0; c->seqs && i < c->n_seq; i++) inf_kv_seq_free(c->seqs[i]);
    free(c->seqs);
    inf_radix_free(c->radix);
    inf_kv_pool_free(c->pool);
    free(c->views);
    inf_qwen3_free(c->model);
    inf_tok_free(c->tok);
    inf_model_close(c->mf);
    free(c);
}

int srv_engine_open(srv_engine *e, const srv_engine_opts *o, inf_err *err) {
    memset(e, 0, sizeof *e);
    eng_ctx *c = calloc(1, sizeof *c);
    if (!c) return inf_fail(err, "out of memory");
    if (inf_model_open(&c->mf, o->model_path, err)) goto fail;
    if (inf_tok_create(&c->tok, &c->mf->vocab, err)) {
        inf_fail_ctx(err, "%s: tokenizer", o->model_path);
        goto fail;
    }
    if (o->backend && strcmp(o->backend, "scalar")) {
        inf_fail(err, "unknown backend '%s' (available: scalar)", o->backend);
        goto fail;
    }
    c->be = *inf_backend_scalar();
    inf_backend_complete(&c->be);
    const inf_hparams *hp = &c->mf->hp;
    c->n_seq = o->n_seq;
    c->n_ctx = o->n_ctx;
    if (c->n_ctx == 0) c->n_ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train
                                                                                  : 4096;
    c->n_layer = hp->n_layer;
    int max_rows = o->max_rows > c->n_seq ? o->max_rows : c->n_seq + 1;
    if (inf_qwen3_create(&c->model, c->mf, &c->be, c->n_ctx, max_rows, err)) goto fail;
    c->kv = calloc((size_t)c->n_seq, sizeof *c->kv);
    c->seqs = calloc((size_t)c->n_seq, sizeof *c->seqs);
    c->views = calloc((size_t)c->n_seq * (size_t)c->n_layer, sizeof *c->views);
    if (!c->kv || !c->seqs || !c->views) {
        inf_fail(err, "out of memory");
        goto fail;
    }
    int kv_dim = hp->n_head_kv * hp->head_dim;
    if (o->kv.kind == INF_KV_PAGED) {
        int bs = o->kv.block_size ? o->kv.block_size : INF_KV_BLOCK_SIZE_DEFAULT;
        int per_slot = (c->n_ctx + bs - 1) / bs + 1;
        long want = 2L * per_slot * c->n_seq;
        int n_blocks = want > INT32_MAX ? INT32_MAX : (int)want;
        if (o->kv.mem_bytes) {
            n_blocks = inf_kv_pool_blocks_for_bytes(o->kv.mem_bytes, hp->n_layer, kv_dim, bs);
            if (n_blocks <= 0) {
                inf_fail(err, "--cache-mem %zu bytes holds no KV block of %d tokens (%zu bytes)",
                         o->kv.mem_bytes, bs, inf_kv_block_bytes(hp->n_layer, kv_dim, bs));
                goto fail;
            }
        }
        if (inf_kv_pool_create(&c->pool, hp->n_layer, kv_dim, bs, n_blocks, err) ||
            inf_radix_create(&c->radix, c->pool, err))
            goto fail;
        for (int s = 0; s < c->n_seq; s++) {
            if (inf_kv_seq_create(&c->seqs[s], c->pool, c->n_ctx, err)) goto fail;
            inf_kv_seq_views(c->seqs[s], c->views + (size_t)s * (size_t)c->n_layer);
        }
    }
    for (int s = 0; !c->pool && s < c->n_seq; s++) {
        if (inf_kv_basic_create(&c->kv[s], hp->n_layer, c->n_ctx, hp->n_head_kv * hp->head_dim,
                                err)) {
            inf_fail_ctx(err, "KV cache of slot %d (%d positions)", s, c->n_ctx);
            goto fail;
        }
        inf_kv_basic_views(c->kv[s], c->views + (size_t)s * (size_t)c->n_layer);
    }
    snprintf(c->name, sizeof c->name, "%s", c->mf->name ? c->mf->name : o->model_path);
    *e = (srv_engine){
        .ctx = c,
        .n_seq = c->n_seq,
        .n_ctx = c->n_ctx,
        .n_vocab = hp->n_vocab,
        .max_rows = max_rows,
        .model_name = c->name,
        .forward = eng_forward,
        .truncate = eng_truncate,
        .cache_attach = c->pool ? eng_cache_attach : NULL,
        .cache_release = c->pool ? eng_cache_release : NULL,
        .cache_stats = c->pool ? eng_cache_stats : NULL,
        .tokenize = eng_tokenize,
        .piece = eng_piece,
        .is_eog = eng_is_eog,
        .render = eng_render,
        .sampler_new = eng_sampler_new,
        .sampler_accept = eng_sampler_accept,
        .sampler_sample = eng_sampler_sample,
        .sampler_free = eng_sampler_free,
    };
    return 0;
fail:
    eng_free(c);
    return -1;
}

void srv_engine_close(srv_engine *e) {
    eng_free(e->ctx);
    memset(e, 0, sizeof *e);
}
