/* The paged KV cache: one pool of fixed-size blocks shared by many sequences.
 *
 * A block holds block_size consecutive positions of K and V for every layer.
 * A sequence owns a block table (logical block i -> physical block id) and
 * reads and writes its rows through an inf_kv_view per layer:
 *
 *   pool->k  [n_layer][n_blocks][block_size*kv_dim] of k_type   (likewise pool->v)
 *   layer l's view: k = pool->k + l*k_layer_bytes,
 *                   row_stride = kv_dim, block_table = seq->blocks
 *
 * so position j of a sequence at layer l is in block blocks[j / block_size]
 * of that layer's slab, row j % block_size of each head's part of it (the
 * formulas of kv_view.h); the attention ops need no gather.
 *
 * Blocks are refcounted: a sequence and the radix prefix cache (kv/radix.h)
 * may hold the same block. A block with more than one holder is read-only:
 * before a sequence writes into it, reserve gives the sequence a private copy
 * (copy-on-write; only a partly filled last block can be in that state).
 * A block goes back to the free list when its last holder lets go.
 *
 * Threading: a pool and its sequences belong to one thread (the scheduler's
 * or the CLI's); nothing here locks. */
#ifndef INF_KV_KV_PAGED_H
#define INF_KV_KV_PAGED_H

#include <stddef.h>
#include <stdint.h>

#include "kv/kv_view.h"
#include "util/err.h"

#define INF_KV_BLOCK_SIZE_DEFAULT 16

typedef struct inf_kv_pool inf_kv_pool;

/* Called by the pool when a reservation needs n_want free blocks and fewer
 * are free; it may release blocks it holds (the prefix cache evicts) and
 * returns how many it released. */
typedef int (*inf_kv_reclaim_fn)(void *ud, inf_kv_pool *pool, int n_want);

struct inf_kv_pool {
    int n_layer, kv_dim;      /* kv_dim = n_head_kv*head_dim */
    int head_dim;             /* elements of one KV head */
    inf_dtype k_type, v_type; /* element types (kv_view.h) */
    int block_size;           /* rows per block, a power of two */
    int n_blocks;
    size_t layer_floats;  /* n_blocks*block_size*kv_dim: elements of one layer's slab */
    size_t k_layer_bytes; /* bytes of one layer's K slab (likewise V) */
    size_t v_layer_bytes;
    uint8_t *k;         /* [n_layer][n_blocks][block_size*kv_dim] of k_type (kv_view.h) */
    uint8_t *v;         /* the same of v_type */
    size_t map_bytes;   /* bytes mapped for k and v together */
    int32_t *refcount;  /* [n_blocks] holders of each block; 0 = free */
    int32_t *free_list; /* [n_blocks] stack of free block ids, n_free of them */
    int n_free;
    int n_used_peak;     /* most blocks in use at once since creation */
    int64_t n_cow;       /* copy-on-write copies made */
    int64_t n_exhausted; /* reservations refused for lack of blocks */
    inf_kv_reclaim_fn reclaim;
    void *reclaim_ud;
};

/* Bytes one f32 block takes (K and V, all layers). */
size_t inf_kv_block_bytes(int n_layer, int kv_dim, int block_size);
/* The same with K of k_type and V of v_type. */
size_t inf_kv_block_bytes_typed(int n_layer, int kv_dim, int block_size, inf_dtype k_type,
                                inf_dtype v_type);

/* Creates a pool of n_blocks f32 blocks of block_size rows (a power of two,
 * 1..1024). The memory is mapped lazily (pages are touched as blocks are
 * first written). Returns 0, or -1 with a message (bad sizes, out of memory).
 * Free with inf_kv_pool_free (NULL is a no-op) after every sequence. */
int inf_kv_pool_create(inf_kv_pool **out, int n_layer, int kv_dim, int head_dim, int block_size,
                       int n_blocks, inf_err *err);
/* The same with K of k_type and V of v_type (kv_type.h). */
int inf_kv_pool_create_typed(inf_kv_pool **out, int n_layer, int kv_dim, int head_dim,
                             int block_size, int n_blocks, inf_dtype k_type, inf_dtype v_type,
                             inf_err *err);
void inf_kv_pool_free(inf_kv_pool *p);

/* f32 blocks that fit in a memory budget of `bytes` (0 when not even one does). */
int inf_kv_pool_blocks_for_bytes(size_t bytes, int n_layer, int kv_dim, int block_size);
/* The same for blocks of k_type/v_type. */
int inf_kv_pool_blocks_for_bytes_typed(size_t bytes, int n_layer, int kv_dim, int block_size,
                                       inf_dtype k_type, inf_dtype v_type);

/* Parses a memory size for --cache-mem: a number with an optional suffix
 * K, M, G (powers of 1024; "MiB"/"GiB"/"MB"/"GB" accepted, all binary).
 * A bare number is MiB. Returns 0, or -1 with a message quoting the text. */
int inf_kv_parse_mem(size_t *out, const char *text, inf_err *err);

/* The reclaim hook (NULL to remove); see inf_kv_reclaim_fn. */
void inf_kv_pool_set_reclaim(inf_kv_pool *p, inf_kv_reclaim_fn fn, void *ud);

static inline int inf_kv_pool_used(const inf_kv_pool *p) {
    return p->n_blocks - p->n_free;
}

/* Takes one free block (refcount 1); -1 when none is free (no reclaim). */
int32_t kv_block_alloc(inf_kv_pool *p);
/* Adds a holder to block b, which must be in use. */
void kv_block_ref(inf_kv_pool *p, int32_t b);
/* Drops a holder of block b; the last one puts it back on the free list. */
void kv_block_unref(inf_kv_pool *p, int32_t b);

/* Makes at least n blocks free, asking the reclaim hook when needed.
 * Returns 0, or -1 with a message (pool size, blocks free, blocks wanted). */
int inf_kv_pool_ensure_free(inf_kv_pool *p, int n, inf_err *err);

/* Checks the pool's bookkeeping: every block is either on the free list
 * exactly once with refcount 0 or off it with refcount > 0. Returns 0, or -1
 * with a message naming the first inconsistent block. */
int inf_kv_pool_audit(const inf_kv_pool *p, inf_err *err);

/* One sequence's block table. */
typedef struct inf_kv_seq {
    inf_kv_pool *pool; /* borrowed */
    int n_ctx;         /* positions the sequence may reach */
    int max_blocks;    /* ceil(n_ctx / block_size) */
    int32_t *blocks;   /* [max_blocks] logical -> physical; n_blocks are held */
    int n_blocks;
    int n_past; /* positions 0..n_past-1 hold valid rows */
} inf_kv_seq;

/* An empty sequence of up to n_ctx positions over pool (no block taken yet).
 * Returns 0, or -1 with a message. Free with inf_kv_seq_free (NULL is a
 * no-op), which lets go of its blocks; the pool must outlive it. */
int inf_kv_seq_create(inf_kv_seq **out, inf_kv_pool *pool, int n_ctx, inf_err *err);
void inf_kv_seq_free(inf_kv_seq *s);

/* Makes room for positions n_past..n_past+n_new-1: takes new blocks from the
 * pool and gives the sequence a private copy of any shared block those rows
 * fall in. O(1) per block. All or nothing: on failure (past n_ctx, pool
 * exhausted even after reclaim) nothing changes and -1 comes back with a
 * message naming the numbers. Does not move n_past: the caller advances it
 * once the rows are written. */
int inf_kv_seq_reserve(inf_kv_seq *s, int n_new, inf_err *err);

/* Forgets positions n..n_past-1 and lets go of blocks no longer needed.
 * n must be <= n_past. */
void inf_kv_seq_truncate(inf_kv_seq *s, int n);

/* Makes an empty sequence start with n_tokens positions held by blocks
 * [ceil(n_tokens/block_size)] (e.g. a prefix found in the radix cache). The
 * sequence takes over one reference to each block: the caller must have
 * counted it (kv_block_ref). Returns 0, or -1 when the sequence is not empty
 * or n_tokens exceeds n_ctx. */
int inf_kv_seq_attach(inf_kv_seq *s, const int32_t *blocks, int n_tokens, inf_err *err);

/* Fills views[n_layer] for the forward pass. The views stay valid for the
 * life of the sequence (the block table never moves); their capacity is the
 * positions reserved so far, so refill after each reserve. */
void inf_kv_seq_views(const inf_kv_seq *s, inf_kv_view *views);

#endif
