#include "server/engine_inferno.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/select.h"
#include "kv/kv_basic.h"
#include "kv/kv_paged.h"
#include "kv/radix.h"
#include "model/qwen3.h"
#include "modelfile/model.h"
#include "runtime/sampler.h"
#include "template/template.h"
#include "tokenizer/tokenizer.h"

typedef struct eng_ctx {
    inf_model_file *mf;
    inf_tokenizer *tok;
    inf_backend *be; /* owned (inf_backend_free) */
    inf_qwen3 *model;
    int n_seq, n_ctx, n_layer;
    inf_kv_basic **kv;  /* basic: [n_seq] one cache per slot */
    inf_kv_pool *pool;  /* paged: the blocks of all slots */
    inf_kv_seq **seqs;  /* paged: [n_seq] */
    inf_radix *radix;   /* paged: the prefix cache */
    int32_t *counts;    /* paged: [n_blocks] reference check scratch */
    inf_kv_view *views; /* [n_seq][n_layer] */
    char name[128];
    char backend_name[64];
} eng_ctx;

static int eng_forward(void *ctx, const srv_batch *b, float *logits, inf_err *err) {
    eng_ctx *c = ctx;
    inf_batch ib = {.n_rows = b->n_rows,
                    .tokens = b->tokens,
                    .pos = b->pos,
                    .seq = b->seq,
                    .logits = b->logits};
    if (inf_qwen3_forward(c->model, &ib, c->views, c->n_seq, logits, err)) return -1;
    for (int r = 0; r < b->n_rows; r++) {
        int *n_past = c->pool ? &c->seqs[b->seq[r]]->n_past : &c->kv[b->seq[r]]->n_past;
        if (b->pos[r] + 1 > *n_past) *n_past = b->pos[r] + 1;
    }
    return 0;
}

static void eng_truncate(void *ctx, int seq, int n) {
    eng_ctx *c = ctx;
    if (c->pool) {
        if (n < c->seqs[seq]->n_past) inf_kv_seq_truncate(c->seqs[seq], n);
    } else if (n < c->kv[seq]->n_past)
        inf_kv_basic_truncate(c->kv[seq], n);
}

/* ---- paged: the prefix cache ---- */

static int eng_seq_begin(void *ctx, int seq, const int32_t *prompt, int n) {
    eng_ctx *c = ctx;
    inf_kv_seq *s = c->seqs[seq];
    inf_kv_seq_truncate(s, 0);
    /* The last prompt token must run for its logits; at least two do, so
     * they run as a prefill span (a one-row span takes the decode attention,
     * which sums in another order): a prompt gives the same bits cold or warm. */
    int m = inf_radix_attach(c->radix, s, prompt, n >= 2 ? n - 2 : 0, NULL);
    if (m < 0) m = 0;
    inf_kv_seq_views(s, c->views + (size_t)seq * (size_t)c->n_layer);
    return m;
}

static int eng_seq_reserve(void *ctx, int seq, int n_new, inf_err *err) {
    eng_ctx *c = ctx;
    /* The pool asks the prefix cache to evict when it runs low. */
    if (inf_kv_seq_reserve(c->seqs[seq], n_new, err)) return -1;
    inf_kv_seq_views(c->seqs[seq], c->views + (size_t)seq * (size_t)c->n_layer);
    return 0;
}

static void eng_seq_publish(void *ctx, int seq, const int32_t *tokens, int n) {
    eng_ctx *c = ctx;
    INF_ASSERT(n == c->seqs[seq]->n_past);
    inf_radix_insert_seq(c->radix, c->seqs[seq], tokens, NULL);
}

static void eng_seq_end(void *ctx, int seq, const int32_t *tokens, int n) {
    eng_ctx *c = ctx;
    inf_kv_seq *s = c->seqs[seq];
    INF_ASSERT(n == s->n_past);
    if (n > 0) inf_radix_insert_seq(c->radix, s, tokens, NULL);
    inf_kv_seq_truncate(s, 0);
}

static void eng_kv_stats(void *ctx, srv_kv_stats *st) {
    eng_ctx *c = ctx;
    const inf_kv_pool *p = c->pool;
    const inf_radix_stats *rs = &c->radix->stats;
    /* Every reference in the pool must belong to a sequence or the tree. */
    memcpy(c->counts, c->radix->tree_refs, (size_t)p->n_blocks * sizeof *c->counts);
    for (int i = 0; i < c->n_seq; i++)
        for (int b = 0; b < c->seqs[i]->n_blocks; b++)
            c->counts[c->seqs[i]->blocks[b]]++;
    long bad = inf_kv_pool_audit(p, NULL) ? 1 : 0;
    for (int b = 0; b < p->n_blocks; b++)
        bad += c->counts[b] != p->refcount[b];
    *st = (srv_kv_stats){.block_size = p->block_size,
                         .blocks_total = p->n_blocks,
                         .blocks_free = p->n_free,
                         .prefix_lookups = rs->n_lookups,
                         .prefix_hits = rs->n_hits,
                         .prefix_tokens_reused = rs->tokens_reused,
                         .tree_nodes = rs->n_nodes,
                         .tree_tokens = rs->n_cached_tokens,
                         .evictions = rs->n_evicted_nodes,
                         .ref_errors = bad};
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
        return srv_error_set(e, 400, "invalid_request_error", NULL, "messages", "chat template: %s",
                             err.msg);
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

static void eng_sampler_accept(void *s, int32_t id) {
    inf_sampler_accept(s, id);
}
static int32_t eng_sampler_sample(void *s, float *logits, int n_vocab) {
    return inf_sampler_sample(s, logits);
}
static void eng_sampler_free(void *s) {
    inf_sampler_free(s);
}

static void eng_free(eng_ctx *c) {
    if (!c) return;
    for (int i = 0; c->kv && i < c->n_seq; i++)
        inf_kv_basic_free(c->kv[i]);
    free(c->kv);
    for (int i = 0; c->seqs && i < c->n_seq; i++)
        inf_kv_seq_free(c->seqs[i]);
    free(c->seqs);
    inf_radix_free(c->radix);
    inf_kv_pool_free(c->pool);
    free(c->counts);
    free(c->views);
    inf_qwen3_free(c->model);
    inf_tok_free(c->tok);
    inf_backend_free(c->be);
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
    inf_backend_opts bo = {.name = o->backend, .n_threads = o->n_threads};
    if (inf_backend_create(&c->be, &bo, err)) goto fail;
    inf_backend_describe(c->be, c->backend_name, sizeof c->backend_name);
    const inf_hparams *hp = &c->mf->hp;
    c->n_seq = o->n_seq;
    c->n_ctx = o->n_ctx;
    if (c->n_ctx == 0)
        c->n_ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    c->n_layer = hp->n_layer;
    int max_rows = o->max_rows > c->n_seq ? o->max_rows : c->n_seq + 1;
    if (inf_qwen3_create(&c->model, c->mf, c->be, c->n_ctx, max_rows, err)) goto fail;
    c->views = calloc((size_t)c->n_seq * (size_t)c->n_layer, sizeof *c->views);
    if (!c->views) {
        inf_fail(err, "out of memory");
        goto fail;
    }
    int kv_dim = hp->n_head_kv * hp->head_dim;
    if (o->paged) {
        int bs = o->block_size ? o->block_size : INF_KV_BLOCK_SIZE_DEFAULT;
        int per_ctx = (c->n_ctx + bs - 1) / bs;
        long n_blocks = o->cache_bytes > 0
                            ? inf_kv_pool_blocks_for_bytes(o->cache_bytes, hp->n_layer, kv_dim, bs)
                            : (long)c->n_seq * per_ctx;
        if (n_blocks < per_ctx) {
            inf_fail(err,
                     "--cache-mem %zu bytes hold %ld blocks of %d positions, fewer than one "
                     "context of %d needs (%d)",
                     o->cache_bytes, n_blocks, bs, c->n_ctx, per_ctx);
            goto fail;
        }
        if (inf_kv_pool_create(&c->pool, hp->n_layer, kv_dim, bs, (int)n_blocks, err)) goto fail;
        if (inf_radix_create(&c->radix, c->pool, err)) goto fail;
        c->seqs = calloc((size_t)c->n_seq, sizeof *c->seqs);
        c->counts = malloc((size_t)n_blocks * sizeof *c->counts);
        if (!c->seqs || !c->counts) {
            inf_fail(err, "out of memory");
            goto fail;
        }
        for (int s = 0; s < c->n_seq; s++) {
            if (inf_kv_seq_create(&c->seqs[s], c->pool, c->n_ctx, err)) goto fail;
            inf_kv_seq_views(c->seqs[s], c->views + (size_t)s * (size_t)c->n_layer);
        }
    } else {
        c->kv = calloc((size_t)c->n_seq, sizeof *c->kv);
        if (!c->kv) {
            inf_fail(err, "out of memory");
            goto fail;
        }
        for (int s = 0; s < c->n_seq; s++) {
            if (inf_kv_basic_create(&c->kv[s], hp->n_layer, c->n_ctx, kv_dim, err)) {
                inf_fail_ctx(err, "KV cache of slot %d (%d positions)", s, c->n_ctx);
                goto fail;
            }
            inf_kv_basic_views(c->kv[s], c->views + (size_t)s * (size_t)c->n_layer);
        }
    }
    snprintf(c->name, sizeof c->name, "%s", c->mf->name ? c->mf->name : o->model_path);
    *e = (srv_engine){
        .ctx = c,
        .n_seq = c->n_seq,
        .n_ctx = c->n_ctx,
        .n_vocab = hp->n_vocab,
        .max_rows = max_rows,
        .model_name = c->name,
        .backend_name = c->backend_name,
        .forward = eng_forward,
        .truncate = eng_truncate,
        .tokenize = eng_tokenize,
        .piece = eng_piece,
        .is_eog = eng_is_eog,
        .render = eng_render,
        .sampler_new = eng_sampler_new,
        .sampler_accept = eng_sampler_accept,
        .sampler_sample = eng_sampler_sample,
        .sampler_free = eng_sampler_free,
    };
    if (c->pool) {
        e->seq_begin = eng_seq_begin;
        e->seq_reserve = eng_seq_reserve;
        e->seq_publish = eng_seq_publish;
        e->seq_end = eng_seq_end;
        e->kv_stats = eng_kv_stats;
    }
    return 0;
fail:
    eng_free(c);
    return -1;
}

void srv_engine_close(srv_engine *e) {
    eng_free(e->ctx);
    memset(e, 0, sizeof *e);
}
