#include "kv/kv_paged.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

int inf_kv_pool_create(inf_kv_pool **out, int n_layer, int kv_dim, int block_size, int n_blocks,
                       inf_err *err) {
    *out = NULL;
    if (n_layer < 1 || kv_dim < 1 || n_blocks < 1 || block_size < 1 ||
        (block_size & (block_size - 1)))
        return inf_fail(err, "paged KV: need n_layer, kv_dim, n_blocks >= 1 and a power-of-two "
                        "block size (got %d, %d, %d, %d)", n_layer, kv_dim, n_blocks, block_size);
    inf_kv_pool *p = calloc(1, sizeof *p);
    if (!p) return inf_fail(err, "paged KV: out of memory");
    p->n_layer = n_layer;
    p->kv_dim = kv_dim;
    p->block_size = block_size;
    p->n_blocks = n_blocks;
    size_t floats = (size_t)n_layer * (size_t)n_blocks * (size_t)block_size * (size_t)kv_dim;
    p->k = inf_alloc(floats * sizeof(float));
    p->v = inf_alloc(floats * sizeof(float));
    p->refs = calloc((size_t)n_blocks, sizeof *p->refs);
    p->free_stack = malloc((size_t)n_blocks * sizeof *p->free_stack);
    if (!p->k || !p->v || !p->refs || !p->free_stack) {
        inf_kv_pool_free(p);
        return inf_fail(err, "paged KV: out of memory for %d blocks of %d positions (%zu MiB)",
                        n_blocks, block_size, 2 * floats * sizeof(float) >> 20);
    }
    /* Lowest ids on top, so a fresh pool hands out blocks in order. */
    for (int i = 0; i < n_blocks; i++) p->free_stack[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    *out = p;
    return 0;
}

void inf_kv_pool_free(inf_kv_pool *p) {
    if (!p) return;
    inf_free(p->k);
    inf_free(p->v);
    free(p->refs);
    free(p->free_stack);
    free(p);
}

int32_t inf_kv_pool_alloc(inf_kv_pool *p) {
    if (p->n_free == 0) return -1;
    int32_t b = p->free_stack[--p->n_free];
    INF_ASSERT(p->refs[b] == 0);
    p->refs[b] = 1;
    return b;
}

void inf_kv_pool_ref(inf_kv_pool *p, int32_t b) {
    INF_ASSERT(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
    p->refs[b]++;
}

void inf_kv_pool_unref(inf_kv_pool *p, int32_t b) {
    INF_ASSERT(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
    if (--p->refs[b] == 0) p->free_stack[p->n_free++] = b;
}

void inf_kv_pool_copy(inf_kv_pool *p, int32_t dst, int32_t src, int n_rows) {
    size_t row = (size_t)p->kv_dim, layer = (size_t)p->n_blocks * (size_t)p->block_size * row;
    size_t bytes = (size_t)n_rows * row * sizeof(float);
    for (int l = 0; l < p->n_layer; l++) {
        size_t base = (size_t)l * layer;
        memcpy(p->k + base + (size_t)dst * p->block_size * row,
               p->k + base + (size_t)src * p->block_size * row, bytes);
        memcpy(p->v + base + (size_t)dst * p->block_size * row,
               p->v + base + (size_t)src * p->block_size * row, bytes);
    }
}

int inf_kv_seq_init(inf_kv_seq *s, inf_kv_pool *p, int max_positions, inf_err *err) {
    memset(s, 0, sizeof *s);
    s->pool = p;
    s->max_blocks = inf_kv_blocks_for(max_positions, p->block_size);
    s->table = malloc((size_t)s->max_blocks * sizeof *s->table);
    if (!s->table) return inf_fail(err, "paged KV: out of memory");
    for (int i = 0; i < s->max_blocks; i++) s->table[i] = -1;
    return 0;
}

void inf_kv_seq_free(inf_kv_seq *s) {
    if (!s->table) return;
    inf_kv_seq_truncate(s, 0);
    free(s->table);
    s->table = NULL;
}

void inf_kv_seq_adopt(inf_kv_seq *s, const int32_t *blocks, int n_tokens) {
    INF_ASSERT(s->n_tokens == 0);
    int nb = inf_kv_blocks_for(n_tokens, s->pool->block_size);
    INF_ASSERT(nb <= s->max_blocks);
    for (int i = 0; i < nb; i++) {
        inf_kv_pool_ref(s->pool, blocks[i]);
        s->table[i] = blocks[i];
    }
    s->n_tokens = n_tokens;
}

int inf_kv_seq_reserve(inf_kv_seq *s, int n_new, inf_err *err) {
    inf_kv_pool *p = s->pool;
    int bs = p->block_size, end = s->n_tokens + n_new;
    if (n_new <= 0) return 0;
    if (end > s->max_blocks * bs)
        return inf_fail(err, "paged KV: %d positions do not fit the sequence's %d", end,
                        s->max_blocks * bs);
    int first = s->n_tokens / bs, have = inf_kv_blocks_for(s->n_tokens, bs);
    int need = inf_kv_blocks_for(end, bs) - have;
    /* A partly filled last block that is shared gets a private copy first. */
    bool cow = s->n_tokens % bs != 0 && p->refs[s->table[first]] > 1;
    if (need + (cow ? 1 : 0) > p->n_free)
        return inf_fail(err, "paged KV: pool exhausted (%d blocks needed, %d free of %d)",
                        need + (cow ? 1 : 0), p->n_free, p->n_blocks);
    if (cow) {
        int32_t b = inf_kv_pool_alloc(p);
        inf_kv_pool_copy(p, b, s->table[first], s->n_tokens % bs);
        inf_kv_pool_unref(p, s->table[first]);
        s->table[first] = b;
    }
    for (int i = 0; i < need; i++) s->table[have + i] = inf_kv_pool_alloc(p);
    return 0;
}

void inf_kv_seq_truncate(inf_kv_seq *s, int n) {
    INF_ASSERT(n >= 0);
    if (n > s->n_tokens) n = s->n_tokens;
    int bs = s->pool->block_size;
    /* Blocks reserved past n_tokens (never written) go too. */
    int keep = inf_kv_blocks_for(n, bs);
    for (int i = keep; i < s->max_blocks && s->table[i] >= 0; i++) {
        inf_kv_pool_unref(s->pool, s->table[i]);
        s->table[i] = -1;
    }
    s->n_tokens = n;
}

void inf_kv_seq_views(const inf_kv_seq *s, inf_kv_view *views) {
    const inf_kv_pool *p = s->pool;
    size_t layer = (size_t)p->n_blocks * (size_t)p->block_size * (size_t)p->kv_dim;
    for (int l = 0; l < p->n_layer; l++) {
        views[l] = (inf_kv_view){
            .k = p->k + (size_t)l * layer,
            .v = p->v + (size_t)l * layer,
            .row_stride = p->kv_dim,
            .block_size = p->block_size,
            .block_table = s->table,
            .capacity = s->max_blocks * p->block_size,
        };
    }
}
