/* The basic KV cache: one sequence, contiguous per layer, allocated once.
 *
 * Layer l holds n_ctx positions of K and of V (rounded up to whole blocks
 * of INF_KV_BASIC_BLOCK), each n_head_kv*head_dim elements of the cache's K
 * (V) type, laid out as kv_view.h says; position j of the sequence is
 * physical position j. Appending a token writes its row in place (nothing
 * else moves), so the attention ops read the cache through an inf_kv_view
 * with block_table = NULL. */
#ifndef INF_KV_KV_BASIC_H
#define INF_KV_KV_BASIC_H

#include "kv/kv_view.h"
#include "util/err.h"

typedef struct inf_kv_basic {
    int n_layer, n_ctx, kv_dim;      /* kv_dim = n_head_kv*head_dim */
    int head_dim;                    /* elements of one KV head */
    int n_alloc;                     /* positions allocated: n_ctx in whole blocks */
    inf_dtype k_type, v_type;        /* element types (kv_view.h) */
    void *k;                         /* [n_layer][n_alloc * kv_dim] of k_type (kv_view.h) */
    void *v;                         /* the same of v_type */
    size_t map_bytes_k, map_bytes_v; /* mapped lazily (kv_mem.h) */
    int n_past;                      /* positions 0..n_past-1 hold valid rows */
} inf_kv_basic;

/* Allocates an f32 cache for n_ctx positions. Returns 0, or -1 with a message
 * (bad sizes, out of memory). Free with inf_kv_basic_free (NULL is a no-op). */
int inf_kv_basic_create(inf_kv_basic **out, int n_layer, int n_ctx, int kv_dim, int head_dim,
                        inf_err *err);
/* The same with K of k_type and V of v_type (f32, f16, bf16, q8_0; q8_0
 * needs head_dim a multiple of 32). */
int inf_kv_basic_create_typed(inf_kv_basic **out, int n_layer, int n_ctx, int kv_dim, int head_dim,
                              inf_dtype k_type, inf_dtype v_type, inf_err *err);
void inf_kv_basic_free(inf_kv_basic *c);

/* Fills views[n_layer]: the view of each layer, for the forward pass. */
void inf_kv_basic_views(const inf_kv_basic *c, inf_kv_view *views);

/* Checks that n_new more positions fit after n_past. Returns 0, or -1 with a
 * message naming both numbers and the context size. */
int inf_kv_basic_reserve(const inf_kv_basic *c, int n_new, inf_err *err);

/* Forgets positions n..n_past-1 (keeps the first n), e.g. to reuse a common
 * prefix; the rows are simply overwritten later. n must be <= n_past. */
void inf_kv_basic_truncate(inf_kv_basic *c, int n);

#endif
