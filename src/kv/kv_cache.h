/* One sequence's KV cache, basic or paged, behind one small interface, so
 * the generation loop is written once for both (`--kv basic|paged`).
 *
 * Both kinds hand the forward pass an inf_kv_view per layer; a basic cache's
 * view is contiguous, a paged one's goes through the sequence's block table.
 * The caller's protocol is the same: reserve room for n new positions, run
 * the forward pass over the views, then advance. */
#ifndef INF_KV_KV_CACHE_H
#define INF_KV_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "kv/kv_basic.h"
#include "kv/kv_paged.h"
#include "kv/kv_view.h"
#include "util/err.h"

typedef enum inf_kv_kind { INF_KV_BASIC, INF_KV_PAGED } inf_kv_kind;

/* How to build a cache. Zero-initialized means basic. */
typedef struct inf_kv_opts {
    inf_kv_kind kind;
    int block_size;    /* paged: rows per block; 0 = INF_KV_BLOCK_SIZE_DEFAULT */
    size_t mem_bytes;  /* paged: pool budget (--cache-mem); 0 = enough for n_ctx */
    inf_kv_pool *pool; /* paged: a shared pool to draw from (borrowed), or NULL
                          for a pool of the cache's own */
} inf_kv_opts;

/* Parses "basic" or "paged". Returns 0, or -1 with a message quoting text. */
int inf_kv_parse_kind(inf_kv_kind *out, const char *text, inf_err *err);
const char *inf_kv_kind_name(inf_kv_kind k);

typedef struct inf_kv_cache {
    inf_kv_kind kind;
    int n_layer, n_ctx;
    int n_past;          /* positions 0..n_past-1 hold valid rows (read-only here) */
    inf_kv_basic *basic; /* INF_KV_BASIC */
    inf_kv_pool *pool;   /* INF_KV_PAGED */
    bool own_pool;
    inf_kv_seq *seq;    /* INF_KV_PAGED */
    inf_kv_view *views; /* [n_layer] */
} inf_kv_cache;

/* A cache for one sequence of up to n_ctx positions of kv_dim floats per
 * layer. Returns 0, or -1 with a message (bad sizes or options, no memory,
 * a budget that holds no block). Free with inf_kv_cache_free (NULL is a
 * no-op). */
int inf_kv_cache_create(inf_kv_cache **out, const inf_kv_opts *o, int n_layer, int n_ctx,
                        int kv_dim, inf_err *err);
void inf_kv_cache_free(inf_kv_cache *c);

/* Makes room for positions n_past..n_past+n_new-1 and refreshes the views.
 * Returns 0, or -1 with a message (past the context, pool exhausted);
 * nothing changes on failure. */
int inf_kv_cache_reserve(inf_kv_cache *c, int n_new, inf_err *err);

/* Marks n_new reserved positions as written. */
void inf_kv_cache_advance(inf_kv_cache *c, int n_new);

/* Keeps the first n positions (n <= n_past). */
void inf_kv_cache_truncate(inf_kv_cache *c, int n);

/* The per-layer views for the forward pass ([n_layer]); valid until the
 * next reserve or truncate. */
static inline const inf_kv_view *inf_kv_cache_views(const inf_kv_cache *c) {
    return c->views;
}

/* Bytes of K/V memory this cache holds now: the whole allocation for basic,
 * the blocks the sequence holds for paged. */
size_t inf_kv_cache_bytes(const inf_kv_cache *c);

#endif
