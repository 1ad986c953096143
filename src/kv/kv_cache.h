/* The KV caches of all sequences (slots) of a model, basic or paged, behind
 * one interface (`--kv basic|paged`), so the runtime is written once for
 * both.
 *
 * Each sequence remembers the tokens whose K/V it holds. A request starts a
 * sequence with its prompt (begin), which keeps the longest reusable prefix:
 * - basic: one contiguous cache per sequence; it reuses its own tokens, and
 *   keeps them after the request ends for the next one (a chat's next turn);
 * - paged: one pool of blocks for all sequences and a radix tree over token
 *   ids (radix.h): a prompt adopts the longest cached prefix any request
 *   left (by reference), a finished request donates its blocks, and
 *   unreferenced entries are evicted least recently used first.
 * Then for each forward call: reserve room for the new rows, run the forward
 * pass over the views, commit the rows' tokens. */
#ifndef INF_KV_KV_CACHE_H
#define INF_KV_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/kv_basic.h"
#include "kv/kv_paged.h"
#include "kv/kv_type.h"
#include "kv/kv_view.h"
#include "kv/radix.h"
#include "util/err.h"

typedef enum inf_kv_kind { INF_KV_BASIC, INF_KV_PAGED } inf_kv_kind;

/* What one sequence keeps per layer. An attention layer keeps K and V rows
 * of kv_dim elements (heads of head_dim) per position; a recurrent layer
 * (recurrent[l]) keeps no rows but a state of state_floats floats that
 * stands for all its positions at once (Qwen3.5's DeltaNet layers: the conv
 * history and the delta-rule state). A state is valid at n_past only: a
 * basic cache keeps a sequence's past whole, back to its one snapshot, or
 * not at all (begin); the paged cache's tree keeps state checkpoints where
 * prefills paused for one and where requests ended (radix.h), and a prompt
 * resumes from the deepest one on its cached path.
 * The forward pass zeroes a state when a span starts at position 0. */
typedef struct inf_kv_layout {
    int n_layer;
    int kv_dim, head_dim;
    const bool *recurrent; /* [n_layer], or NULL: every layer is attention */
    size_t state_floats;   /* of each recurrent layer */
    /* Speculative decoding with recurrent layers: rows of the rewind log a
     * sequence keeps after its mark (inf_kv_cache_mark; 0: none), and the
     * floats of one row of one recurrent layer (the architecture's layout:
     * inf_model_log_floats). */
    int log_rows;
    size_t log_floats;
} inf_kv_layout;

/* How to build the caches. Zero-initialized means basic, f32 K and V (the
 * programs default to f16: --cache-type-k/-v). */
typedef struct inf_kv_opts {
    inf_kv_kind kind;
    int block_size;   /* paged: rows per block; 0 = INF_KV_BLOCK_SIZE_DEFAULT */
    size_t mem_bytes; /* paged: pool budget (--cache-mem); 0 = n_seq contexts */
    inf_dtype type_k; /* K element type (kv_type.h); INF_F32 = 0 */
    inf_dtype type_v; /* V element type */
} inf_kv_opts;

/* Parses "basic" or "paged". Returns 0, or -1 with a message quoting text. */
int inf_kv_parse_kind(inf_kv_kind *out, const char *text, inf_err *err);
const char *inf_kv_kind_name(inf_kv_kind k);

/* A paged cache's counters, for /metrics. */
typedef struct inf_kv_stats {
    long block_size, blocks_total, blocks_free;
    long prefix_lookups, prefix_hits, prefix_tokens_reused;
    long tree_nodes, tree_tokens, evictions;
    long states, states_dropped; /* recurrent-state checkpoints held, and let go of for newer */
    double state_bytes;          /* bytes of one checkpoint (0: the model keeps no states) */
    long ref_errors;             /* pool references not accounted for by a sequence or the tree */
    double block_bytes; /* bytes of one block (K and V, all layers, in the cache's types) */
} inf_kv_stats;

typedef struct inf_kv_cache {
    inf_kv_kind kind;
    int n_layer, n_seq, n_ctx, kv_dim, head_dim;
    int n_kv_layer;        /* the attention layers, which hold K/V (the stores below) */
    int n_rec_layer;       /* the recurrent layers, which hold a state */
    int *kv_index;         /* [n_layer] layer -> its index among the attention layers, or -1 */
    size_t state_floats;   /* of one recurrent layer */
    float *states;         /* [n_seq][n_rec_layer][state_floats] */
    float *snaps;          /* basic: [n_seq][n_rec_layer][state_floats] a checkpoint each */
    int *snap_pos;         /* basic: [n_seq] where it was taken, or -1 */
    int log_rows;          /* rewind log rows per sequence (0: none) */
    size_t log_floats;     /* of one row of one recurrent layer */
    float *marks;          /* [n_seq][n_rec_layer][state_floats] the states at the mark */
    float *logs;           /* [n_seq][n_rec_layer][log_rows * log_floats] */
    int *mark_pos;         /* [n_seq] the mark's position, or -1 */
    inf_kv_view *kv_views; /* [n_kv_layer] scratch: the stores' views */
    inf_dtype type_k, type_v;
    int *n_past;          /* [n_seq] positions 0..n_past-1 hold valid rows */
    int32_t *tokens;      /* [n_seq][n_ctx] the tokens of those rows */
    inf_kv_view *views;   /* [n_seq][n_layer] for the forward pass */
    inf_kv_basic **basic; /* basic: [n_seq] */
    inf_kv_pool *pool;    /* paged: the blocks of all sequences */
    inf_kv_seq **seqs;    /* paged: [n_seq] */
    inf_radix *radix;     /* paged: the prefix cache */
    int32_t *counts;      /* paged: [n_blocks] reference audit scratch */
} inf_kv_cache;

/* Caches for n_seq sequences of up to n_ctx positions laid out as lay says
 * (K/V of o->type_k / o->type_v). Returns 0, or -1 with a message (bad sizes
 * or options, no memory, a budget that holds less than one context). Free
 * with inf_kv_cache_free (NULL is a no-op). */
int inf_kv_cache_create(inf_kv_cache **out, const inf_kv_opts *o, const inf_kv_layout *lay,
                        int n_seq, int n_ctx, inf_err *err);
void inf_kv_cache_free(inf_kv_cache *c);

/* How many leading tokens of prompt[0..n) sequence seq could reuse now
 * (paged: 0, every sequence sees the same shared tree; with recurrent
 * layers: all it holds, its snapshot's position, or 0). */
int inf_kv_cache_match(const inf_kv_cache *c, int seq, const int32_t *prompt, int n);

/* Starts seq for prompt[0..n): keeps (basic) or adopts from the prefix
 * cache (paged) at most max_keep of its leading tokens, forgets the rest.
 * Returns how many positions seq now holds. */
int inf_kv_cache_begin(inf_kv_cache *c, int seq, const int32_t *prompt, int n, int max_keep);

/* Makes positions n_past..n_past+n_new-1 of seq writable and refreshes its
 * views. Returns 0, or -1 with a message (past the context, pool exhausted
 * even after evicting); nothing changes on failure. */
int inf_kv_cache_reserve(inf_kv_cache *c, int seq, int n_new, inf_err *err);

/* The row at position pos (== n_past, reserved) of seq was written with
 * token: it is now held. */
void inf_kv_cache_commit(inf_kv_cache *c, int seq, int pos, int32_t token);

/* paged: offers what seq holds to other requests now (a prompt is
 * prefilled). basic, and models with recurrent layers: nothing (those keep
 * checkpoints instead). */
void inf_kv_cache_publish(inf_kv_cache *c, int seq);

/* With recurrent layers: where a prefill of a prompt of n tokens should
 * pause for a state checkpoint, or -1 (none, or no recurrent layers). It is
 * the last multiple of INF_KV_CHECKPOINT_STEP at least INF_KV_CHECKPOINT_TAIL
 * tokens before the prompt's end: a chat's next turn renders the history
 * the same up to the generation prompt (<|im_start|>assistant\n, a think
 * block), and resumes from there. */
int inf_kv_cache_checkpoint_pos(const inf_kv_cache *c, int n_prompt);
#define INF_KV_CHECKPOINT_STEP 16
#define INF_KV_CHECKPOINT_TAIL 8
/* Keeps seq's states at its n_past: paged, in the prefix tree (radix.h);
 * basic, as the sequence's one snapshot, which a later begin whose prompt
 * leaves the cached tokens after it resumes from. */
void inf_kv_cache_checkpoint(inf_kv_cache *c, int seq);

/* The request on seq ended. paged: donates its tokens to the prefix cache
 * and lets go of its blocks. basic: keeps them for the next request. */
void inf_kv_cache_end(inf_kv_cache *c, int seq);

/* Forgets everything seq holds (after a failed forward). */
void inf_kv_cache_reset(inf_kv_cache *c, int seq);

/* With recurrent layers and a rewind log (lay->log_rows): a speculative
 * step starts on seq. Its states now are kept, and the forward pass logs
 * each row after them (kv_view.h's log), so inf_kv_cache_truncate can go
 * back to any position from here to log_rows past it. Without: nothing. */
void inf_kv_cache_mark(inf_kv_cache *c, int seq);

/* Keeps positions 0..n-1 of seq and forgets the rest (n <= what it holds):
 * a speculative step's rejected rows. Returns -1, or with recurrent layers
 * (where n is less than what seq held) the position p its states went back
 * to: its mark, at most n, no more than log_rows behind what seq held. The
 * model then redoes the logged rows p..n-1 (inf_model_replay), which brings
 * the states to n. */
int inf_kv_cache_truncate(inf_kv_cache *c, int seq, int n);

/* The per-layer views of seq ([n_layer]); valid until its next reserve. */
static inline const inf_kv_view *inf_kv_cache_views(const inf_kv_cache *c, int seq) {
    return c->views + (size_t)seq * (size_t)c->n_layer;
}

/* Bytes of K/V memory seq holds now: its whole allocation for basic, the
 * blocks it holds for paged; and its recurrent states. */
size_t inf_kv_cache_bytes(const inf_kv_cache *c, int seq);

/* Bytes one position takes (K and V, all attention layers) in the cache's types. */
size_t inf_kv_cache_token_bytes(const inf_kv_cache *c);

/* Bytes of K/V memory all sequences can use: the basic caches together, or
 * the paged pool; and every sequence's recurrent states. */
size_t inf_kv_cache_total_bytes(const inf_kv_cache *c);

/* The paged counters, with an audit of every pool reference (basic: zeros). */
void inf_kv_cache_stats(inf_kv_cache *c, inf_kv_stats *st);

#endif
