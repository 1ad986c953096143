/* The view attention reads K/V through, contiguous or paged, in the cache's
 * element types.
 *
 * Both caches (kv_basic.h, kv_paged.h) hand the forward pass one view per
 * layer and the attention ops (backend/backend.h) read rows through it, so a
 * paged cache needs no attention code of its own. Header-only (the type ids
 * and the row sizes come from quant/dtype.h).
 *
 * K and V each have an element type (`--cache-type-k/-v`): f32, f16, bf16
 * or q8_0 (ggml's block: an f16 scale d and 32 int8 q, value d*q). A row is
 * converted once when it is stored (kv_cache.h's inf_kv_store_row, with the
 * scalar reference quantizer, so the bits do not depend on the CPU) and
 * attention reads the stored type in place; what a stored element means is
 * its exact f32 value (inf_dtype_get(type)->dequant). For q8_0 a row splits
 * into whole blocks at every head (head_dim a multiple of 32). */
#ifndef INF_KV_KV_VIEW_H
#define INF_KV_KV_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "quant/dtype.h"

/* Bytes of n elements of a K/V type (n whole blocks for q8_0). */
static inline size_t inf_kv_type_bytes(inf_dtype t, int64_t n) {
    switch (t) {
    case INF_F16:
    case INF_BF16:
        return 2 * (size_t)n;
    case INF_Q8_0:
        return (size_t)n / INF_QK8_0 * sizeof(inf_block_q8_0);
    default:
        return 4 * (size_t)n;
    }
}

/* One layer's K or V rows as attention reads them, contiguous or paged.
 * Row j (position j of the sequence) starts at element
 *   (block_table ? block_table[j / block_size] * block_size + j % block_size : j) * row_stride
 * of k (of type k_type) or v (v_type). A basic cache passes block_table = NULL. */
typedef struct inf_kv_view {
    void *k;                    /* rows of n_head_kv*head_dim elements of k_type */
    void *v;                    /* rows of v_type */
    inf_dtype k_type, v_type;   /* INF_F32 (zero), INF_F16, INF_BF16 or INF_Q8_0 */
    int row_stride;             /* elements between consecutive rows */
    int block_size;             /* rows per block; power of two (paged only) */
    const int32_t *block_table; /* logical -> physical block, or NULL */
    int capacity;               /* positions 0..capacity-1 are addressable (the forward
                                   pass refuses rows beyond); 0 = not stated */
} inf_kv_view;

static inline int64_t inf_kv_row_index(const inf_kv_view *kv, int j) {
    if (!kv->block_table) return j;
    return (int64_t)kv->block_table[j / kv->block_size] * kv->block_size + j % kv->block_size;
}
/* Element off of K (V) row j, in the stored type (off whole blocks). */
static inline void *inf_kv_k_at(const inf_kv_view *kv, int j, int off) {
    return (uint8_t *)kv->k +
           inf_kv_type_bytes(kv->k_type, inf_kv_row_index(kv, j) * kv->row_stride + off);
}
static inline void *inf_kv_v_at(const inf_kv_view *kv, int j, int off) {
    return (uint8_t *)kv->v +
           inf_kv_type_bytes(kv->v_type, inf_kv_row_index(kv, j) * kv->row_stride + off);
}
/* Row j of an f32 view. */
static inline float *inf_kv_k_row(const inf_kv_view *kv, int j) {
    return (float *)kv->k + inf_kv_row_index(kv, j) * kv->row_stride;
}
static inline float *inf_kv_v_row(const inf_kv_view *kv, int j) {
    return (float *)kv->v + inf_kv_row_index(kv, j) * kv->row_stride;
}

#endif
