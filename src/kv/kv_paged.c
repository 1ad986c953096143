#include "kv/kv_paged.h"

#include "kv/kv_mem.h"
#include "kv/kv_type.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>

/* ---- pool ------------------------------------------------------------- */

size_t inf_kv_block_bytes(int n_layer, int kv_dim, int block_size) {
    return inf_kv_block_bytes_typed(n_layer, kv_dim, block_size, INF_F32, INF_F32);
}

size_t inf_kv_block_bytes_typed(int n_layer, int kv_dim, int block_size, inf_dtype k_type,
                                inf_dtype v_type) {
    return (size_t)n_layer * (size_t)block_size *
           (inf_kv_type_bytes(k_type, kv_dim) + inf_kv_type_bytes(v_type, kv_dim));
}

int inf_kv_pool_blocks_for_bytes(size_t bytes, int n_layer, int kv_dim, int block_size) {
    return inf_kv_pool_blocks_for_bytes_typed(bytes, n_layer, kv_dim, block_size, INF_F32, INF_F32);
}

int inf_kv_pool_blocks_for_bytes_typed(size_t bytes, int n_layer, int kv_dim, int block_size,
                                       inf_dtype k_type, inf_dtype v_type) {
    size_t per = inf_kv_block_bytes_typed(n_layer, kv_dim, block_size, k_type, v_type);
    if (per == 0) return 0;
    size_t n = bytes / per;
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

int inf_kv_parse_mem(size_t *out, const char *text, inf_err *err) {
    const char *s = text;
    if (!s || !isdigit((unsigned char)*s))
        return inf_fail(err, "memory size \"%s\": expected a number with an optional K, M or G",
                        s ? s : "");
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || !(v > 0))
        return inf_fail(err, "memory size \"%s\": expected a positive number", s);
    double mul = 1024.0 * 1024.0; /* a bare number is MiB */
    switch (toupper((unsigned char)*end)) {
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'M':
        mul = 1024.0 * 1024.0;
        end++;
        break;
    case 'G':
        mul = 1024.0 * 1024.0 * 1024.0;
        end++;
        break;
    case 'B':
        if (end[1] == 0) {
            mul = 1;
            end++;
        }
        break;
    default:
        break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end)
        return inf_fail(err, "memory size \"%s\": unknown suffix \"%s\" (expected K, M or G)", s,
                        end);
    double bytes = v * mul;
    if (bytes >= 9.0e18) return inf_fail(err, "memory size \"%s\": too large", s);
    *out = (size_t)bytes;
    return 0;
}

int inf_kv_pool_create(inf_kv_pool **out, int n_layer, int kv_dim, int head_dim, int block_size,
                       int n_blocks, inf_err *err) {
    return inf_kv_pool_create_typed(out, n_layer, kv_dim, head_dim, block_size, n_blocks, INF_F32,
                                    INF_F32, err);
}

int inf_kv_pool_create_typed(inf_kv_pool **out, int n_layer, int kv_dim, int head_dim,
                             int block_size, int n_blocks, inf_dtype k_type, inf_dtype v_type,
                             inf_err *err) {
    *out = NULL;
    if (n_layer <= 0 || kv_dim <= 0)
        return inf_fail(err, "kv pool: n_layer %d, kv_dim %d: expected positive sizes", n_layer,
                        kv_dim);
    if (block_size < 1 || block_size > 1024 || (block_size & (block_size - 1)))
        return inf_fail(err, "kv pool: block size %d: expected a power of two in 1..1024",
                        block_size);
    if (n_blocks <= 0)
        return inf_fail(err, "kv pool: %d blocks: expected at least one (cache memory too small?)",
                        n_blocks);
    if (inf_kv_check_type(k_type, kv_dim, head_dim, err) ||
        inf_kv_check_type(v_type, kv_dim, head_dim, err))
        return -1;
    /* Row indices are int64 in inf_kv_row_index but block ids are int32. */
    size_t layer_floats = (size_t)n_blocks * (size_t)block_size * (size_t)kv_dim;
    size_t rows = (size_t)n_blocks * (size_t)block_size;
    size_t kl = rows * inf_kv_type_bytes(k_type, kv_dim),
           vl = rows * inf_kv_type_bytes(v_type, kv_dim);
    size_t bytes = (kl + vl) * (size_t)n_layer;
    if ((double)n_blocks * block_size * kv_dim * n_layer * 8.0 > (double)(SIZE_MAX / 2))
        return inf_fail(err, "kv pool: %d blocks of %d rows overflow the address space", n_blocks,
                        block_size);

    inf_kv_pool *p = calloc(1, sizeof *p);
    if (!p) return inf_fail(err, "kv pool: out of memory");
    p->n_layer = n_layer;
    p->kv_dim = kv_dim;
    p->head_dim = head_dim;
    p->block_size = block_size;
    p->n_blocks = n_blocks;
    p->layer_floats = layer_floats;
    p->k_type = k_type;
    p->v_type = v_type;
    p->k_layer_bytes = kl;
    p->v_layer_bytes = vl;
    p->refcount = calloc((size_t)n_blocks, sizeof *p->refcount);
    p->free_list = calloc((size_t)n_blocks, sizeof *p->free_list);
    void *mem = kv_mem_map(bytes);
    if (!p->refcount || !p->free_list || mem == MAP_FAILED) {
        if (mem != MAP_FAILED) kv_mem_unmap(mem, bytes);
        free(p->refcount);
        free(p->free_list);
        free(p);
        return inf_fail(err, "kv pool: cannot allocate %d blocks (%.1f MiB)", n_blocks,
                        (double)bytes / (1024.0 * 1024.0));
    }
    p->map_bytes = bytes;
    p->k = mem;
    p->v = p->k + kl * (size_t)n_layer;
    /* Low ids on top of the stack: used memory stays compact. */
    for (int i = 0; i < n_blocks; i++)
        p->free_list[i] = n_blocks - 1 - i;
    p->n_free = n_blocks;
    *out = p;
    return 0;
}

void inf_kv_pool_free(inf_kv_pool *p) {
    if (!p) return;
    if (p->k) kv_mem_unmap(p->k, p->map_bytes);
    free(p->refcount);
    free(p->free_list);
    free(p);
}

void inf_kv_pool_set_reclaim(inf_kv_pool *p, inf_kv_reclaim_fn fn, void *ud) {
    p->reclaim = fn;
    p->reclaim_ud = ud;
}

int32_t kv_block_alloc(inf_kv_pool *p) {
    if (p->n_free == 0) return -1;
    int32_t b = p->free_list[--p->n_free];
    INF_ASSERT(p->refcount[b] == 0);
    p->refcount[b] = 1;
    int used = p->n_blocks - p->n_free;
    if (used > p->n_used_peak) p->n_used_peak = used;
    return b;
}

void kv_block_ref(inf_kv_pool *p, int32_t b) {
    INF_ASSERT(b >= 0 && b < p->n_blocks && p->refcount[b] > 0);
    p->refcount[b]++;
}

void kv_block_unref(inf_kv_pool *p, int32_t b) {
    INF_ASSERT(b >= 0 && b < p->n_blocks && p->refcount[b] > 0);
    if (--p->refcount[b] == 0) {
        INF_ASSERT(p->n_free < p->n_blocks);
        p->free_list[p->n_free++] = b;
    }
}

int inf_kv_pool_ensure_free(inf_kv_pool *p, int n, inf_err *err) {
    if (p->n_free >= n) return 0;
    if (p->reclaim) p->reclaim(p->reclaim_ud, p, n);
    if (p->n_free >= n) return 0;
    p->n_exhausted++;
    return inf_fail(err,
                    "kv cache exhausted: %d more blocks of %d tokens needed, %d of %d free "
                    "(raise --cache-mem or lower the load)",
                    n, p->block_size, p->n_free, p->n_blocks);
}

int inf_kv_pool_audit(const inf_kv_pool *p, inf_err *err) {
    if (p->n_free < 0 || p->n_free > p->n_blocks)
        return inf_fail(err, "kv pool: %d free blocks of %d", p->n_free, p->n_blocks);
    unsigned char *seen = calloc((size_t)p->n_blocks, 1);
    if (!seen) return inf_fail(err, "kv pool audit: out of memory");
    int rc = 0;
    for (int i = 0; i < p->n_free && !rc; i++) {
        int32_t b = p->free_list[i];
        if (b < 0 || b >= p->n_blocks)
            rc = inf_fail(err, "kv pool: free list holds id %d", b);
        else if (seen[b])
            rc = inf_fail(err, "kv pool: block %d is on the free list twice", b);
        else if (p->refcount[b] != 0)
            rc = inf_fail(err, "kv pool: block %d is free with refcount %d", b, p->refcount[b]);
        else
            seen[b] = 1;
    }
    for (int b = 0; b < p->n_blocks && !rc; b++)
        if (!seen[b] && p->refcount[b] <= 0)
            rc = inf_fail(err, "kv pool: block %d is neither free nor held (refcount %d)", b,
                          p->refcount[b]);
    free(seen);
    return rc;
}

/* Copies rows 0..n_rows-1 of block src into block dst at every layer: the
 * first n_rows rows of each head's part of the block (kv_view.h). */
static void copy_block_rows(inf_kv_pool *p, int32_t dst, int32_t src, int n_rows) {
    const size_t bs = (size_t)p->block_size;
    const size_t kh = inf_kv_type_bytes(p->k_type, p->head_dim),
                 vh = inf_kv_type_bytes(p->v_type, p->head_dim);
    const size_t kb = bs * inf_kv_type_bytes(p->k_type, p->kv_dim),
                 vb = bs * inf_kv_type_bytes(p->v_type, p->kv_dim);
    for (int l = 0; l < p->n_layer; l++) {
        uint8_t *k = p->k + (size_t)l * p->k_layer_bytes, *v = p->v + (size_t)l * p->v_layer_bytes;
        for (int h = 0; h < p->kv_dim / p->head_dim; h++) {
            memcpy(k + dst * kb + h * bs * kh, k + src * kb + h * bs * kh, (size_t)n_rows * kh);
            memcpy(v + dst * vb + h * bs * vh, v + src * vb + h * bs * vh, (size_t)n_rows * vh);
        }
    }
}

/* ---- sequence ---------------------------------------------------------- */

int inf_kv_seq_create(inf_kv_seq **out, inf_kv_pool *pool, int n_ctx, inf_err *err) {
    *out = NULL;
    if (n_ctx <= 0) return inf_fail(err, "kv sequence: context %d: expected > 0", n_ctx);
    inf_kv_seq *s = calloc(1, sizeof *s);
    if (!s) return inf_fail(err, "kv sequence: out of memory");
    s->pool = pool;
    s->n_ctx = n_ctx;
    s->max_blocks = (n_ctx + pool->block_size - 1) / pool->block_size;
    s->blocks = calloc((size_t)s->max_blocks, sizeof *s->blocks);
    if (!s->blocks) {
        free(s);
        return inf_fail(err, "kv sequence: out of memory");
    }
    *out = s;
    return 0;
}

void inf_kv_seq_free(inf_kv_seq *s) {
    if (!s) return;
    inf_kv_seq_truncate(s, 0);
    free(s->blocks);
    free(s);
}

int inf_kv_seq_reserve(inf_kv_seq *s, int n_new, inf_err *err) {
    inf_kv_pool *p = s->pool;
    if (n_new < 0) return inf_fail(err, "kv sequence: reserve of %d positions", n_new);
    if (n_new == 0) return 0;
    if (n_new > s->n_ctx - s->n_past)
        return inf_fail(err, "kv sequence: %d positions after %d exceed the context size %d", n_new,
                        s->n_past, s->n_ctx);
    int bs = p->block_size;
    int first = s->n_past / bs, last = (s->n_past + n_new - 1) / bs;
    /* Count what is needed before touching anything: all or nothing. */
    int need = 0;
    for (int i = first; i <= last; i++)
        if (i >= s->n_blocks || p->refcount[s->blocks[i]] > 1) need++;
    if (need && inf_kv_pool_ensure_free(p, need, err)) return -1;
    for (int i = first; i <= last; i++) {
        if (i >= s->n_blocks) {
            s->blocks[s->n_blocks++] = kv_block_alloc(p);
        } else if (p->refcount[s->blocks[i]] > 1) {
            /* Shared: copy the rows before n_past that this block holds; the
             * rows from n_past on are about to be written. */
            int32_t copy = kv_block_alloc(p);
            int keep = s->n_past - i * bs;
            if (keep > 0) copy_block_rows(p, copy, s->blocks[i], keep > bs ? bs : keep);
            kv_block_unref(p, s->blocks[i]);
            s->blocks[i] = copy;
            p->n_cow++;
        }
    }
    return 0;
}

void inf_kv_seq_truncate(inf_kv_seq *s, int n) {
    INF_ASSERT(n >= 0 && n <= s->n_past);
    int keep = (n + s->pool->block_size - 1) / s->pool->block_size;
    while (s->n_blocks > keep)
        kv_block_unref(s->pool, s->blocks[--s->n_blocks]);
    s->n_past = n;
}

int inf_kv_seq_attach(inf_kv_seq *s, const int32_t *blocks, int n_tokens, inf_err *err) {
    if (s->n_past || s->n_blocks)
        return inf_fail(err, "kv sequence: attach to a sequence that holds %d positions",
                        s->n_past);
    if (n_tokens < 0 || n_tokens > s->n_ctx)
        return inf_fail(err, "kv sequence: attach of %d positions, context size %d", n_tokens,
                        s->n_ctx);
    int nb = (n_tokens + s->pool->block_size - 1) / s->pool->block_size;
    for (int i = 0; i < nb; i++) {
        INF_ASSERT(blocks[i] >= 0 && blocks[i] < s->pool->n_blocks &&
                   s->pool->refcount[blocks[i]] > 0);
        s->blocks[i] = blocks[i];
    }
    s->n_blocks = nb;
    s->n_past = n_tokens;
    return 0;
}

void inf_kv_seq_views(const inf_kv_seq *s, inf_kv_view *views) {
    const inf_kv_pool *p = s->pool;
    int cap = s->n_blocks * p->block_size;
    if (cap > s->n_ctx) cap = s->n_ctx;
    for (int l = 0; l < p->n_layer; l++) {
        views[l] = (inf_kv_view){
            .k = p->k + (size_t)l * p->k_layer_bytes,
            .v = p->v + (size_t)l * p->v_layer_bytes,
            .k_type = p->k_type,
            .v_type = p->v_type,
            .row_stride = p->kv_dim,
            .head_dim = p->head_dim,
            .block_size = p->block_size,
            .block_table = s->blocks,
            .capacity = cap,
        };
    }
}
