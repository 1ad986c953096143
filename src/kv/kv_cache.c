#include "kv/kv_cache.h"

#include <stdlib.h>
#include <string.h>

int inf_kv_parse_kind(inf_kv_kind *out, const char *text, inf_err *err) {
    if (text && !strcmp(text, "basic"))
        *out = INF_KV_BASIC;
    else if (text && !strcmp(text, "paged"))
        *out = INF_KV_PAGED;
    else
        return inf_fail(err, "--kv \"%s\": expected basic or paged", text ? text : "");
    return 0;
}

const char *inf_kv_kind_name(inf_kv_kind k) {
    return k == INF_KV_PAGED ? "paged" : "basic";
}

int inf_kv_cache_create(inf_kv_cache **out, const inf_kv_opts *o, int n_layer, int n_ctx,
                        int kv_dim, inf_err *err) {
    *out = NULL;
    static const inf_kv_opts basic = {0};
    if (!o) o = &basic;
    inf_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return inf_fail(err, "kv cache: out of memory");
    c->kind = o->kind;
    c->n_layer = n_layer;
    c->n_ctx = n_ctx;
    c->views = calloc((size_t)(n_layer > 0 ? n_layer : 1), sizeof *c->views);
    if (!c->views) {
        free(c);
        return inf_fail(err, "kv cache: out of memory");
    }
    int rc;
    if (o->kind == INF_KV_BASIC) {
        rc = inf_kv_basic_create(&c->basic, n_layer, n_ctx, kv_dim, err);
        if (!rc) inf_kv_basic_views(c->basic, c->views);
    } else {
        c->pool = o->pool;
        rc = 0;
        if (!c->pool) {
            int bs = o->block_size ? o->block_size : INF_KV_BLOCK_SIZE_DEFAULT;
            /* One spare block beyond n_ctx: room for a copy-on-write. */
            int n_blocks = (n_ctx + bs - 1) / bs + 1;
            if (o->mem_bytes)
                n_blocks = inf_kv_pool_blocks_for_bytes(o->mem_bytes, n_layer, kv_dim, bs);
            if (n_blocks <= 0)
                rc = inf_fail(err, "kv cache: %zu bytes hold no block of %d tokens (%zu bytes)",
                              o->mem_bytes, bs, inf_kv_block_bytes(n_layer, kv_dim, bs));
            else
                rc = inf_kv_pool_create(&c->pool, n_layer, kv_dim, bs, n_blocks, err);
            c->own_pool = rc == 0;
        } else if (c->pool->n_layer != n_layer || c->pool->kv_dim != kv_dim) {
            rc = inf_fail(err, "kv cache: the shared pool has %d layers of %d, expected %d of %d",
                          c->pool->n_layer, c->pool->kv_dim, n_layer, kv_dim);
        }
        if (!rc) rc = inf_kv_seq_create(&c->seq, c->pool, n_ctx, err);
        if (!rc) inf_kv_seq_views(c->seq, c->views);
    }
    if (rc) {
        inf_kv_cache_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void inf_kv_cache_free(inf_kv_cache *c) {
    if (!c) return;
    inf_kv_basic_free(c->basic);
    inf_kv_seq_free(c->seq);
    if (c->own_pool) inf_kv_pool_free(c->pool);
    free(c->views);
    free(c);
}

int inf_kv_cache_reserve(inf_kv_cache *c, int n_new, inf_err *err) {
    if (c->basic) return inf_kv_basic_reserve(c->basic, n_new, err);
    if (inf_kv_seq_reserve(c->seq, n_new, err)) return -1;
    inf_kv_seq_views(c->seq, c->views); /* capacity moved */
    return 0;
}

void inf_kv_cache_advance(inf_kv_cache *c, int n_new) {
    c->n_past += n_new;
    if (c->basic) {
        INF_ASSERT(c->n_past <= c->basic->n_ctx);
        c->basic->n_past = c->n_past;
    } else {
        INF_ASSERT(c->n_past <= c->seq->n_blocks * c->pool->block_size);
        c->seq->n_past = c->n_past;
    }
}

void inf_kv_cache_truncate(inf_kv_cache *c, int n) {
    if (c->basic)
        inf_kv_basic_truncate(c->basic, n);
    else {
        inf_kv_seq_truncate(c->seq, n);
        inf_kv_seq_views(c->seq, c->views);
    }
    c->n_past = n;
}

size_t inf_kv_cache_bytes(const inf_kv_cache *c) {
    if (c->basic)
        return 2 * (size_t)c->basic->n_layer * (size_t)c->basic->n_ctx * (size_t)c->basic->kv_dim *
               sizeof(float);
    return (size_t)c->seq->n_blocks *
           inf_kv_block_bytes(c->pool->n_layer, c->pool->kv_dim, c->pool->block_size);
}
