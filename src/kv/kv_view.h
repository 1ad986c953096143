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
 * its exact f32 value (inf_dtype_get(type)->dequant). For q8_0 a head's row
 * is whole blocks (head_dim a multiple of 32). */
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

/* One layer's K or V as attention reads them, contiguous or paged.
 *
 * The cache is made of blocks of block_size positions, and inside a block
 * each KV head's rows are contiguous (head-major): head h of position p
 * (physical) starts at element
 *   (p / block_size) * block_size * row_stride        its block
 *   + h * block_size * head_dim                       the head's part of the block
 *   + (p % block_size) * head_dim                     its row there
 * of k (of type k_type) or v (v_type). p is position j itself in a basic
 * cache (block_table = NULL) and
 *   block_table[j / block_size] * block_size + j % block_size
 * in a paged one. An attention item reads one KV head, so it streams
 * block_size * head_dim contiguous elements per block rather than one
 * head's slice of every row; a block still fills block_size * row_stride
 * contiguous elements, so blocks are copied and shared whole. */
typedef struct inf_kv_view {
    void *k;                    /* blocks of k_type elements, as above */
    void *v;                    /* the same of v_type */
    inf_dtype k_type, v_type;   /* INF_F32 (zero), INF_F16, INF_BF16 or INF_Q8_0 */
    int row_stride;             /* elements of one position: n_head_kv * head_dim */
    int head_dim;               /* elements of one KV head's row */
    int block_size;             /* positions per block: a power of two */
    const int32_t *block_table; /* logical -> physical block, or NULL */
    int capacity;               /* positions 0..capacity-1 are addressable (the forward
                                   pass refuses rows beyond); 0 = not stated */
    /* A recurrent layer (Qwen3.5's Gated DeltaNet) has no K/V (k, v NULL):
     * its sequence's state after its first n_past positions, of floats as
     * the architecture lays them out (kv_cache.h's inf_kv_layout). NULL for
     * an attention layer. */
    float *state;
    /* A recurrent layer in a cache that keeps rewind logs (kv_cache.h's
     * inf_kv_cache_mark): log_rows rows of the architecture's layout, and
     * the position row 0 stands for (-1: no mark now). The forward pass
     * writes there what redoing position p needs, in row p - log_from while
     * that is in 0..log_rows-1. */
    float *log;
    int log_from, log_rows;
} inf_kv_view;

/* Positions per block of a basic cache (whose capacity is allocated in
 * whole blocks): one key block of a decode step (kernels.h). */
#define INF_KV_BASIC_BLOCK 256

/* The physical position of sequence position j. */
static inline int64_t inf_kv_row_index(const inf_kv_view *kv, int j) {
    if (!kv->block_table) return j;
    const int sh = __builtin_ctz((unsigned)kv->block_size);
    return ((int64_t)kv->block_table[j >> sh] << sh) | (j & (kv->block_size - 1));
}
/* The element index where head h of row j starts. */
static inline int64_t inf_kv_elem(const inf_kv_view *kv, int j, int h) {
    const int sh = __builtin_ctz((unsigned)kv->block_size);
    const int64_t p = inf_kv_row_index(kv, j);
    return (((p >> sh) * kv->row_stride + (int64_t)h * kv->head_dim) << sh) +
           (p & (kv->block_size - 1)) * kv->head_dim;
}
/* Head h of K (V) row j: head_dim elements of the stored type. */
static inline void *inf_kv_k_at(const inf_kv_view *kv, int j, int h) {
    return (uint8_t *)kv->k + inf_kv_type_bytes(kv->k_type, inf_kv_elem(kv, j, h));
}
static inline void *inf_kv_v_at(const inf_kv_view *kv, int j, int h) {
    return (uint8_t *)kv->v + inf_kv_type_bytes(kv->v_type, inf_kv_elem(kv, j, h));
}

#endif
