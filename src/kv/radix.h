/* The radix prefix cache: a tree over token ids whose paths are cached
 * prefixes, each mapped to the paged-cache blocks that hold its K/V rows.
 *
 * A new request looks up its prompt, takes the longest cached prefix's
 * blocks by reference (no copy) and prefills only the rest; a finished
 * request donates its blocks. Edges are token runs of any length, so a
 * prefix may end inside a block: such a partly filled last block is shared
 * read-only and the sequence that continues it gets a private copy first
 * (copy-on-write in inf_kv_seq_reserve).
 *
 * Each node holds one reference to every block its edge touches: the blocks
 * of logical indices depth/bs .. (depth+len-1)/bs. A block straddling a
 * branch point is either the same block in parent and child or, where the
 * continuations differ, a copy per branch; in both cases its rows before the
 * branch are the parent's. Lookup takes, for each logical block, the
 * deepest node's id.
 *
 * When the pool runs low it asks the tree (the pool's reclaim hook) to evict
 * least-recently-used leaves. A leaf is evictable only when no one outside
 * the tree holds any of its blocks, so the blocks of running requests are
 * never taken (and refcounting would keep them alive anyway).
 *
 * Threading: one thread, like the pool it belongs to. */
#ifndef INF_KV_RADIX_H
#define INF_KV_RADIX_H

#include <stdint.h>

#include "kv/kv_paged.h"
#include "util/err.h"

typedef struct kv_radix_node kv_radix_node;

typedef struct inf_radix_stats {
    int64_t n_lookups;        /* inf_radix_match calls */
    int64_t n_hits;           /* lookups that reused at least one token */
    int64_t tokens_looked_up; /* tokens asked for */
    int64_t tokens_reused;    /* tokens found (prefill skipped) */
    int64_t n_inserts;
    int64_t tokens_inserted; /* new tokens added to the tree */
    int64_t n_evicted_nodes;
    int64_t n_evicted_blocks; /* blocks the tree let go of by eviction */
    int n_states;             /* recurrent-state checkpoints held now */
    int64_t n_states_dropped; /* checkpoints let go of to make room for newer ones */
    int n_nodes;              /* nodes now, root excluded */
    int64_t n_cached_tokens;  /* tokens on all edges now */
    int n_blocks_held;        /* distinct blocks the tree references now */
} inf_radix_stats;

typedef struct inf_radix {
    inf_kv_pool *pool; /* borrowed; must outlive the tree */
    kv_radix_node *root;
    int32_t *tree_refs;  /* [pool->n_blocks] references held by nodes */
    uint64_t clock;      /* LRU time, one tick per match/insert */
    size_t state_floats; /* of one checkpoint; 0: the tree keeps none */
    int max_states;      /* checkpoints kept at most (least recently used dropped) */
    inf_radix_stats stats;
} inf_radix;

/* An empty tree over pool; installs itself as the pool's reclaim hook.
 * Returns 0, or -1 with a message. Free with inf_radix_free (NULL is a
 * no-op), which lets go of every block the tree holds. */
int inf_radix_create(inf_radix **out, inf_kv_pool *pool, inf_err *err);
void inf_radix_free(inf_radix *r);

/* Longest cached prefix of tokens[0..n): returns its length L (0..n) and
 * writes the ceil(L/block_size) block ids that hold it to blocks_out, each
 * with one reference added for the caller. Marks the path as recently used
 * and counts the lookup in the stats. */
int inf_radix_match(inf_radix *r, const int32_t *tokens, int n, int32_t *blocks_out);

/* Starts the empty sequence s with the longest cached prefix of
 * tokens[0..n) (call it with n-1 when the last prompt token must be run for
 * its logits). Returns the tokens reused, or -1 with a message. */
int inf_radix_attach(inf_radix *r, inf_kv_seq *s, const int32_t *tokens, int n, inf_err *err);

/* Caches the prefix tokens[0..n) whose rows are in blocks[ceil(n/bs)]
 * (the tree adds its own references; the caller keeps its own). Parts
 * already cached keep their blocks. Returns 0, or -1 (out of memory) with
 * the tree still consistent. */
int inf_radix_insert(inf_radix *r, const int32_t *tokens, int n, const int32_t *blocks,
                     inf_err *err);

/* Donates sequence s: caches its first s->n_past positions, whose token ids
 * are tokens[0..s->n_past). The sequence keeps its blocks too (free it, or
 * keep using it: a later write into a shared block copies it first). */
int inf_radix_insert_seq(inf_radix *r, const inf_kv_seq *s, const int32_t *tokens, inf_err *err);

/* Recurrent-state checkpoints, for models whose layers keep a state beside
 * (or instead of) K/V rows (Qwen3.5's DeltaNet layers). Such a state stands
 * for all the positions before it, so a prefix is reusable only where the
 * tree holds the state at its end: a checkpoint sits at the end of a node's
 * edge (an insert splits an edge to make one end there), moves with the
 * edge's end when the edge is split, and goes with its node when the node is
 * evicted. At most max_states are kept; a new one takes the place of the
 * least recently used. set_states(state_floats, max_states) turns them on. */
void inf_radix_set_states(inf_radix *r, size_t state_floats, int max_states);
/* Caches tokens[0..n) as inf_radix_insert does, and a copy of state (the
 * states after those n tokens) at depth n, unless one is there already. */
int inf_radix_insert_state(inf_radix *r, const int32_t *tokens, int n, const int32_t *blocks,
                           const float *state, inf_err *err);
/* The longest cached prefix of tokens[0..n) that ends at a checkpoint: its
 * length L, its blocks in blocks_out (referenced for the caller, as
 * inf_radix_match), *state the checkpoint (the tree's; NULL when L = 0). */
int inf_radix_match_state(inf_radix *r, const int32_t *tokens, int n, int32_t *blocks_out,
                          const float **state);
/* inf_radix_attach for such a model: the prefix found ends at a checkpoint,
 * which is copied to state_out (NULL: inf_radix_attach, K/V rows only). */
int inf_radix_attach_state(inf_radix *r, inf_kv_seq *s, const int32_t *tokens, int n,
                           float *state_out, inf_err *err);

/* Evicts least-recently-used evictable leaves until the pool has n_want
 * free blocks or nothing more can go. Returns the blocks freed in the pool. */
int inf_radix_evict(inf_radix *r, int n_want);

/* Drops every evictable entry (the whole tree when no request runs). */
void inf_radix_clear(inf_radix *r);

#endif
