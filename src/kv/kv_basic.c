#include "kv/kv_basic.h"

#include "kv/kv_mem.h"
#include "kv/kv_type.h"

#include <stdlib.h>

#include "util/mem.h"

int inf_kv_basic_create(inf_kv_basic **out, int n_layer, int n_ctx, int kv_dim, int head_dim,
                        inf_err *err) {
    return inf_kv_basic_create_typed(out, n_layer, n_ctx, kv_dim, head_dim, INF_F32, INF_F32, err);
}

int inf_kv_basic_create_typed(inf_kv_basic **out, int n_layer, int n_ctx, int kv_dim, int head_dim,
                              inf_dtype k_type, inf_dtype v_type, inf_err *err) {
    *out = NULL;
    if (n_layer <= 0 || n_ctx <= 0 || kv_dim <= 0 || n_ctx > INT32_MAX - INF_KV_BASIC_BLOCK)
        return inf_fail(err, "kv cache: bad size (layers %d, context %d, row %d)", n_layer, n_ctx,
                        kv_dim);
    if (inf_kv_check_type(k_type, kv_dim, head_dim, err) ||
        inf_kv_check_type(v_type, kv_dim, head_dim, err))
        return -1;
    inf_kv_basic *c = calloc(1, sizeof *c);
    if (!c) return inf_fail(err, "kv cache: out of memory");
    c->n_layer = n_layer;
    c->n_ctx = n_ctx;
    c->kv_dim = kv_dim;
    c->head_dim = head_dim;
    c->n_alloc = (n_ctx + INF_KV_BASIC_BLOCK - 1) / INF_KV_BASIC_BLOCK * INF_KV_BASIC_BLOCK;
    c->k_type = k_type;
    c->v_type = v_type;
    size_t rows = (size_t)n_layer * (size_t)c->n_alloc;
    size_t kb = rows * inf_kv_type_bytes(k_type, kv_dim),
           vb = rows * inf_kv_type_bytes(v_type, kv_dim);
    void *k = kv_mem_map(kb), *v = kv_mem_map(vb);
    c->k = k == MAP_FAILED ? NULL : k;
    c->v = v == MAP_FAILED ? NULL : v;
    c->map_bytes_k = kb;
    c->map_bytes_v = vb;
    if (!c->k || !c->v) {
        inf_kv_basic_free(c);
        return inf_fail(err, "kv cache: out of memory for %d positions (%zu MiB)", n_ctx,
                        (kb + vb) >> 20);
    }
    *out = c;
    return 0;
}

void inf_kv_basic_free(inf_kv_basic *c) {
    if (!c) return;
    if (c->k) kv_mem_unmap(c->k, c->map_bytes_k);
    if (c->v) kv_mem_unmap(c->v, c->map_bytes_v);
    free(c);
}

void inf_kv_basic_views(const inf_kv_basic *c, inf_kv_view *views) {
    size_t kl = (size_t)c->n_alloc * inf_kv_type_bytes(c->k_type, c->kv_dim);
    size_t vl = (size_t)c->n_alloc * inf_kv_type_bytes(c->v_type, c->kv_dim);
    for (int l = 0; l < c->n_layer; l++) {
        views[l] = (inf_kv_view){
            .k = (uint8_t *)c->k + l * kl,
            .v = (uint8_t *)c->v + l * vl,
            .k_type = c->k_type,
            .v_type = c->v_type,
            .row_stride = c->kv_dim,
            .head_dim = c->head_dim,
            .block_size = INF_KV_BASIC_BLOCK,
            .block_table = NULL,
            .capacity = c->n_ctx,
        };
    }
}

int inf_kv_basic_reserve(const inf_kv_basic *c, int n_new, inf_err *err) {
    if (n_new < 0 || n_new > c->n_ctx - c->n_past)
        return inf_fail(err, "%d tokens do not fit: %d already cached, context size is %d", n_new,
                        c->n_past, c->n_ctx);
    return 0;
}

void inf_kv_basic_truncate(inf_kv_basic *c, int n) {
    INF_ASSERT(n >= 0 && n <= c->n_past);
    c->n_past = n;
}
