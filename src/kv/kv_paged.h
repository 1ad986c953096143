/* The paged KV cache: one pool of fixed-size blocks shared by every sequence.
 *
 * A block holds block_size positions of K and V for all layers. A sequence
 * is a block table (logical block -> physical block) and a length; position j
 * lives in block table[j / block_size], row j % block_size. The attention ops
 * read through the table (inf_kv_view.block_table), never a gathered copy.
 *
 * Blocks are reference counted: a sequence holds one reference per table
 * entry, the radix prefix cache (kv_radix.h) one per block it keeps, so a
 * prefix is shared by reference. Before a sequence writes into a block that
 * someone else also references (a shared, partly filled last block), the
 * block is copied (copy-on-write). Allocation and release are O(1) (a free
 * stack). Single-threaded: the scheduler thread owns the pool. */
#ifndef INF_KV_KV_PAGED_H
#define INF_KV_KV_PAGED_H

#include <stdint.h>

#include "backend/backend.h"
#include "util/err.h"

typedef struct inf_kv_pool {
    int n_layer, kv_dim; /* kv_dim = n_head_kv*head_dim */
    int block_size;      /* positions per block, a power of two */
    int n_blocks;
    float *k;            /* [n_layer][n_blocks*block_size][kv_dim] */
    float *v;            /* [n_layer][n_blocks*block_size][kv_dim] */
    int32_t *refs;       /* [n_blocks] references; 0 = free */
    int32_t *free_stack; /* [n_blocks] ids of free blocks, n_free of them */
    int n_free;
} inf_kv_pool;

/* Allocates the pool (all blocks free). block_size must be a power of two.
 * Returns 0, or -1 with a message (bad sizes, out of memory). Free with
 * inf_kv_pool_free (NULL is a no-op). */
int inf_kv_pool_create(inf_kv_pool **out, int n_layer, int kv_dim, int block_size, int n_blocks,
                       inf_err *err);
void inf_kv_pool_free(inf_kv_pool *p);

/* A free block with one reference, or -1 when none is free. */
int32_t inf_kv_pool_alloc(inf_kv_pool *p);
void inf_kv_pool_ref(inf_kv_pool *p, int32_t b);
/* Drops one reference; the block returns to the free stack at zero. */
void inf_kv_pool_unref(inf_kv_pool *p, int32_t b);
/* Copies rows [0, n_rows) of block src into block dst, K and V, every layer. */
void inf_kv_pool_copy(inf_kv_pool *p, int32_t dst, int32_t src, int n_rows);

/* One sequence's view of the pool. */
typedef struct inf_kv_seq {
    inf_kv_pool *pool;  /* borrowed */
    int32_t *table;     /* [max_blocks] physical block of each logical block */
    int max_blocks;
    int n_tokens;       /* positions 0..n_tokens-1 hold valid rows */
} inf_kv_seq;

/* An empty sequence able to hold max_positions. 0 or -1 (out of memory). */
int inf_kv_seq_init(inf_kv_seq *s, inf_kv_pool *p, int max_positions, inf_err *err);
/* Releases every block and the table. */
void inf_kv_seq_free(inf_kv_seq *s);

/* Starts the sequence as the given prefix: n_tokens positions whose blocks
 * are blocks[0 .. ceil(n_tokens / block_size)) (one reference taken on each).
 * The sequence must be empty. */
void inf_kv_seq_adopt(inf_kv_seq *s, const int32_t *blocks, int n_tokens);

/* Makes positions [n_tokens, n_tokens + n_new) writable: allocates the
 * blocks they need and copies a shared partly filled block before it is
 * written. Returns 0, or -1 with a message when the context or the pool is
 * exhausted (nothing is changed then, except that a needed copy may have
 * been made). */
int inf_kv_seq_reserve(inf_kv_seq *s, int n_new, inf_err *err);

/* Keeps the first n positions (n <= n_tokens) and releases blocks past them. */
void inf_kv_seq_truncate(inf_kv_seq *s, int n);

/* Fills views[n_layer] for the forward pass; they stay valid for the
 * sequence's life (the table is never moved). */
void inf_kv_seq_views(const inf_kv_seq *s, inf_kv_view *views);

/* Blocks a sequence of n positions occupies. */
static inline int inf_kv_blocks_for(int n, int block_size) {
    return (n + block_size - 1) / block_size;
}

#endif
