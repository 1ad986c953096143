/* The radix prefix cache: a radix tree over token ids whose nodes keep
 * references to the paged KV blocks holding those tokens.
 *
 * Each node is an edge label (a run of token ids starting at position
 * `depth`) and the physical blocks of every logical block its positions
 * touch. A block cut by a node boundary is referenced by both nodes: along
 * any root-to-node path the deepest node's block for a logical block holds
 * valid rows for all positions of the path in that block.
 *
 * A new request looks up its longest cached prefix and adopts those blocks
 * by reference (no copy); the sequence copies a shared, partly filled last
 * block before writing into it (kv_paged.h). A finished request donates its
 * tokens and blocks (insert). When the pool runs low, least recently used
 * leaves are evicted; a block still referenced by a running sequence stays
 * alive through its own reference, so running requests never lose blocks.
 * Single-threaded, like the pool. */
#ifndef INF_KV_KV_RADIX_H
#define INF_KV_KV_RADIX_H

#include <stdint.h>

#include "kv/kv_paged.h"

typedef struct kv_radix kv_radix;

/* An empty tree over pool p (borrowed). NULL when out of memory. */
kv_radix *kv_radix_create(inf_kv_pool *p);
/* Drops every node and its block references. NULL is a no-op. */
void kv_radix_free(kv_radix *r);

/* The longest prefix of tokens[0..n) in the tree: returns its length m and
 * fills blocks[0 .. ceil(m / block_size)) with the blocks holding it (no
 * references taken: adopt them into a sequence at once). Marks the path as
 * used now (LRU). */
int kv_radix_match(kv_radix *r, const int32_t *tokens, int n, int32_t *blocks);

/* Records tokens[0..n) held in blocks[0 .. ceil(n / block_size)) (a
 * sequence's table). Parts already in the tree keep their blocks; new parts
 * take one reference on each of their blocks. Returns 0, -1 when out of
 * memory (the tree is unchanged then). */
int kv_radix_insert(kv_radix *r, const int32_t *tokens, int n, const int32_t *blocks);

/* Evicts least recently used leaves until the pool has at least n_free free
 * blocks or nothing more can be evicted. Returns the number of nodes evicted. */
int kv_radix_evict(kv_radix *r, int n_free);

/* Counters. */
typedef struct kv_radix_stats {
    long nodes;          /* nodes in the tree (root excluded) */
    long tokens;         /* tokens held by all edges */
    long block_refs;     /* block references the tree holds */
    long lookups, hits;  /* kv_radix_match calls, and those that found >= 1 token */
    long tokens_matched; /* sum of matched lengths */
    long evictions;      /* nodes evicted */
} kv_radix_stats;
void kv_radix_get_stats(const kv_radix *r, kv_radix_stats *s);

/* Adds the tree's references per block to counts[n_blocks] (for checking
 * that every pool reference is accounted for). */
void kv_radix_count_refs(const kv_radix *r, int32_t *counts);

#endif
