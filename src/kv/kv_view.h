/* The view attention reads K/V through, contiguous or paged.
 *
 * Both caches (kv_basic.h, kv_paged.h) hand the forward pass one view per
 * layer and the attention ops (backend/backend.h) read rows through it, so a
 * paged cache needs no attention code of its own. Header-only; no module
 * below kv/ is needed. */
#ifndef INF_KV_KV_VIEW_H
#define INF_KV_KV_VIEW_H

#include <stdint.h>

/* One layer's K or V rows as attention reads them, contiguous or paged.
 * Row j (position j of the sequence) lives at
 *   base + (block_table ? block_table[j / block_size] * block_size + j % block_size : j) *
 * row_stride A basic cache passes block_table = NULL. */
typedef struct inf_kv_view {
    float *k; /* rows of n_head_kv*head_dim floats */
    float *v;
    int row_stride;             /* floats between consecutive rows */
    int block_size;             /* rows per block; power of two (paged only) */
    const int32_t *block_table; /* logical -> physical block, or NULL */
    int capacity;               /* positions 0..capacity-1 are addressable (the forward
                                   pass refuses rows beyond); 0 = not stated */
} inf_kv_view;

static inline int64_t inf_kv_row_index(const inf_kv_view *kv, int j) {
    if (!kv->block_table) return j;
    return (int64_t)kv->block_table[j / kv->block_size] * kv->block_size + j % kv->block_size;
}
static inline float *inf_kv_k_row(const inf_kv_view *kv, int j) {
    return kv->k + inf_kv_row_index(kv, j) * kv->row_stride;
}
static inline float *inf_kv_v_row(const inf_kv_view *kv, int j) {
    return kv->v + inf_kv_row_index(kv, j) * kv->row_stride;
}

#endif
