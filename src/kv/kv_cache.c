#include "kv/kv_cache.h"

#include <stdlib.h>
#include <string.h>

int inf_kv_parse_kind(inf_kv_kind *out, const char *text, inf_err *err) {
    if (text && !strcmp(text, "basic"))
        *out = INF_KV_BASIC;
    else if (text && !strcmp(text, "paged"))
        *out = INF_KV_PAGED;
    else
        return inf_fail(err, "--kv \"%s\": expected basic or paged", text ? text : "");
    return 0;
}

const char *inf_kv_kind_name(inf_kv_kind k) {
    return k == INF_KV_PAGED ? "paged" : "basic";
}

/* The stores' views of seq's attention layers, placed at their layers; a
 * recurrent layer's view is its state. */
static void refresh_views(inf_kv_cache *c, int seq) {
    inf_kv_view *v = c->views + (size_t)seq * (size_t)c->n_layer;
    if (c->kind == INF_KV_BASIC)
        inf_kv_basic_views(c->basic[seq], c->kv_views);
    else
        inf_kv_seq_views(c->seqs[seq], c->kv_views);
    for (int l = 0, r = 0; l < c->n_layer; l++) {
        if (c->kv_index[l] >= 0) {
            v[l] = c->kv_views[c->kv_index[l]];
            continue;
        }
        const size_t at = (size_t)seq * (size_t)c->n_rec_layer + (size_t)r++;
        v[l] = (inf_kv_view){.capacity = c->n_ctx,
                             .state = c->states + at * c->state_floats,
                             .log = c->logs ? c->logs + at * (size_t)c->log_rows * c->log_floats
                                            : NULL,
                             .log_from = c->mark_pos ? c->mark_pos[seq] : -1,
                             .log_rows = c->log_rows};
    }
}

int inf_kv_cache_create(inf_kv_cache **out, const inf_kv_opts *o, const inf_kv_layout *lay,
                        int n_seq, int n_ctx, inf_err *err) {
    *out = NULL;
    static const inf_kv_opts basic = {0};
    if (!o) o = &basic;
    const int n_layer = lay->n_layer, kv_dim = lay->kv_dim, head_dim = lay->head_dim;
    int n_rec = 0;
    for (int l = 0; lay->recurrent && l < n_layer; l++)
        n_rec += lay->recurrent[l];
    const int n_kv_layer = n_layer - n_rec;
    if (n_layer < 1 || n_kv_layer < 1 || n_seq < 1 || n_ctx < 1 || kv_dim < 1 ||
        (n_rec && lay->state_floats == 0))
        return inf_fail(err,
                        "kv cache: bad sizes (%d layers of which %d attention, %d sequences, "
                        "%d positions, %d)",
                        n_layer, n_kv_layer, n_seq, n_ctx, kv_dim);
    inf_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return inf_fail(err, "kv cache: out of memory");
    c->kind = o->kind;
    c->n_layer = n_layer;
    c->n_kv_layer = n_kv_layer;
    c->n_rec_layer = n_rec;
    c->state_floats = n_rec ? lay->state_floats : 0;
    c->n_seq = n_seq;
    c->n_ctx = n_ctx;
    c->kv_dim = kv_dim;
    c->head_dim = head_dim;
    c->type_k = o->type_k;
    c->type_v = o->type_v;
    c->n_past = calloc((size_t)n_seq, sizeof *c->n_past);
    c->tokens = calloc((size_t)n_seq * (size_t)n_ctx, sizeof *c->tokens);
    c->views = calloc((size_t)n_seq * (size_t)n_layer, sizeof *c->views);
    c->kv_views = calloc((size_t)n_kv_layer, sizeof *c->kv_views);
    c->kv_index = calloc((size_t)n_layer, sizeof *c->kv_index);
    if (!c->n_past || !c->tokens || !c->views || !c->kv_views || !c->kv_index) goto oom;
    for (int l = 0, k = 0; l < n_layer; l++)
        c->kv_index[l] = lay->recurrent && lay->recurrent[l] ? -1 : k++;
    if (n_rec &&
        (!(c->states = calloc((size_t)n_seq * (size_t)n_rec * c->state_floats, sizeof(float))) ||
         (o->kind == INF_KV_BASIC &&
          (!(c->snaps = calloc((size_t)n_seq * (size_t)n_rec * c->state_floats, sizeof(float))) ||
           !(c->snap_pos = malloc((size_t)n_seq * sizeof *c->snap_pos)))))) {
        inf_fail(err,
                 "kv cache: out of memory for the recurrent states (%d sequences x %d layers x %zu "
                 "floats)",
                 n_seq, n_rec, c->state_floats);
        goto fail;
    }
    for (int s = 0; c->snap_pos && s < n_seq; s++)
        c->snap_pos[s] = -1;
    if (n_rec && lay->log_rows > 0) {
        /* the logs are written only as far as a step's rows reach */
        c->log_rows = lay->log_rows;
        c->log_floats = lay->log_floats;
        const size_t per_seq = (size_t)n_rec * (size_t)lay->log_rows * lay->log_floats;
        if (!(c->marks = calloc((size_t)n_seq * (size_t)n_rec * c->state_floats, sizeof(float))) ||
            !(c->logs = calloc((size_t)n_seq * per_seq, sizeof(float))) ||
            !(c->mark_pos = malloc((size_t)n_seq * sizeof *c->mark_pos))) {
            inf_fail(err, "kv cache: out of memory for the rewind logs (%d sequences x %d rows)",
                     n_seq, lay->log_rows);
            goto fail;
        }
        for (int s = 0; s < n_seq; s++)
            c->mark_pos[s] = -1;
    }
    if (o->kind == INF_KV_BASIC) {
        if (!(c->basic = calloc((size_t)n_seq, sizeof *c->basic))) goto oom;
        for (int s = 0; s < n_seq; s++)
            if (inf_kv_basic_create_typed(&c->basic[s], n_kv_layer, n_ctx, kv_dim, head_dim,
                                          o->type_k, o->type_v, err)) {
                inf_fail_ctx(err, "KV cache of slot %d (%d positions)", s, n_ctx);
                goto fail;
            }
    } else {
        int bs = o->block_size ? o->block_size : INF_KV_BLOCK_SIZE_DEFAULT;
        int per_ctx = (n_ctx + bs - 1) / bs;
        /* By default one spare block beyond the contexts: room for a copy-on-write. */
        long n_blocks = o->mem_bytes
                            ? inf_kv_pool_blocks_for_bytes_typed(o->mem_bytes, n_kv_layer, kv_dim,
                                                                 bs, o->type_k, o->type_v)
                            : (long)n_seq * per_ctx + 1;
        if (n_blocks < per_ctx) {
            inf_fail(err,
                     "--cache-mem %zu bytes hold %ld blocks of %d positions, fewer than one "
                     "context of %d needs (%d)",
                     o->mem_bytes, n_blocks, bs, n_ctx, per_ctx);
            goto fail;
        }
        if (inf_kv_pool_create_typed(&c->pool, n_kv_layer, kv_dim, head_dim, bs, (int)n_blocks,
                                     o->type_k, o->type_v, err) ||
            inf_radix_create(&c->radix, c->pool, err))
            goto fail;
        /* recurrent states: checkpoints where prefills paused for one and
           where requests ended, two per sequence and two more */
        if (n_rec) inf_radix_set_states(c->radix, (size_t)n_rec * c->state_floats, 2 * n_seq + 2);
        c->seqs = calloc((size_t)n_seq, sizeof *c->seqs);
        c->counts = malloc((size_t)n_blocks * sizeof *c->counts);
        if (!c->seqs || !c->counts) goto oom;
        for (int s = 0; s < n_seq; s++)
            if (inf_kv_seq_create(&c->seqs[s], c->pool, n_ctx, err)) goto fail;
    }
    for (int s = 0; s < n_seq; s++)
        refresh_views(c, s);
    *out = c;
    return 0;
oom:
    inf_fail(err, "kv cache: out of memory");
fail:
    inf_kv_cache_free(c);
    return -1;
}

void inf_kv_cache_free(inf_kv_cache *c) {
    if (!c) return;
    for (int s = 0; c->basic && s < c->n_seq; s++)
        inf_kv_basic_free(c->basic[s]);
    free(c->basic);
    for (int s = 0; c->seqs && s < c->n_seq; s++)
        inf_kv_seq_free(c->seqs[s]);
    free(c->seqs);
    inf_radix_free(c->radix);
    inf_kv_pool_free(c->pool);
    free(c->counts);
    free(c->n_past);
    free(c->tokens);
    free(c->views);
    free(c->kv_views);
    free(c->kv_index);
    free(c->states);
    free(c->snaps);
    free(c->snap_pos);
    free(c->marks);
    free(c->logs);
    free(c->mark_pos);
    free(c);
}

static int32_t *seq_tokens(const inf_kv_cache *c, int seq) {
    return c->tokens + (size_t)seq * (size_t)c->n_ctx;
}

/* seq's recurrent states, all layers */
static float *seq_states(const inf_kv_cache *c, int seq) {
    return c->states + (size_t)seq * (size_t)c->n_rec_layer * c->state_floats;
}

/* paged: caches what seq holds (with its states at its end) */
static void donate(inf_kv_cache *c, int seq) {
    const inf_kv_seq *s = c->seqs[seq];
    if (c->n_rec_layer)
        inf_radix_insert_state(c->radix, seq_tokens(c, seq), s->n_past, s->blocks,
                               seq_states(c, seq), NULL);
    else
        inf_radix_insert_seq(c->radix, s, seq_tokens(c, seq), NULL);
}

int inf_kv_cache_match(const inf_kv_cache *c, int seq, const int32_t *prompt, int n) {
    if (c->kind == INF_KV_PAGED) return 0;
    const int32_t *t = seq_tokens(c, seq);
    int m = c->n_past[seq] < n ? c->n_past[seq] : n, i = 0;
    while (i < m && t[i] == prompt[i])
        i++;
    /* a recurrent state stands for all n_past positions: no shorter prefix
       but the snapshot's */
    if (c->n_rec_layer && i != c->n_past[seq])
        return c->snap_pos[seq] >= 0 && c->snap_pos[seq] <= i ? c->snap_pos[seq] : 0;
    return i;
}

/* Keeps the first n positions of seq. */
static void truncate_to(inf_kv_cache *c, int seq, int n) {
    if (n >= c->n_past[seq]) return;
    if (c->snap_pos && c->snap_pos[seq] > n) c->snap_pos[seq] = -1;
    if (c->mark_pos && c->mark_pos[seq] > n) c->mark_pos[seq] = -1;
    if (c->kind == INF_KV_BASIC)
        inf_kv_basic_truncate(c->basic[seq], n);
    else
        inf_kv_seq_truncate(c->seqs[seq], n);
    c->n_past[seq] = n;
}

int inf_kv_cache_begin(inf_kv_cache *c, int seq, const int32_t *prompt, int n, int max_keep) {
    if (max_keep > n) max_keep = n;
    if (max_keep < 0) max_keep = 0;
    if (c->kind == INF_KV_BASIC) {
        int m = inf_kv_cache_match(c, seq, prompt, n);
        int keep = m < max_keep ? m : max_keep;
        /* the states are valid at n_past, or at the snapshot (restored) */
        if (c->n_rec_layer && keep != c->n_past[seq]) {
            const int at = c->snap_pos[seq];
            if (at >= 0 && at <= keep) {
                const size_t f = (size_t)c->n_rec_layer * c->state_floats;
                memcpy(seq_states(c, seq), c->snaps + (size_t)seq * f, f * sizeof(float));
                keep = at;
            } else {
                keep = 0;
            }
        }
        truncate_to(c, seq, keep);
    } else {
        truncate_to(c, seq, 0);
        /* with recurrent layers, a prefix that ends at a state checkpoint */
        int m = c->n_rec_layer ? inf_radix_attach_state(c->radix, c->seqs[seq], prompt, max_keep,
                                                        seq_states(c, seq), NULL)
                               : inf_radix_attach(c->radix, c->seqs[seq], prompt, max_keep, NULL);
        c->n_past[seq] = c->seqs[seq]->n_past = m > 0 ? m : 0;
        memcpy(seq_tokens(c, seq), prompt, (size_t)c->n_past[seq] * sizeof *prompt);
    }
    refresh_views(c, seq);
    return c->n_past[seq];
}

int inf_kv_cache_reserve(inf_kv_cache *c, int seq, int n_new, inf_err *err) {
    if (c->n_past[seq] + n_new > c->n_ctx)
        return inf_fail(err, "kv cache: %d + %d positions exceed the context of %d", c->n_past[seq],
                        n_new, c->n_ctx);
    if (c->kind == INF_KV_BASIC) return inf_kv_basic_reserve(c->basic[seq], n_new, err);
    /* The pool asks the prefix cache to evict when it runs low. */
    if (inf_kv_seq_reserve(c->seqs[seq], n_new, err)) return -1;
    refresh_views(c, seq);
    return 0;
}

void inf_kv_cache_commit(inf_kv_cache *c, int seq, int pos, int32_t token) {
    INF_ASSERT(pos == c->n_past[seq] && pos < c->n_ctx);
    seq_tokens(c, seq)[pos] = token;
    c->n_past[seq] = pos + 1;
    if (c->kind == INF_KV_BASIC)
        c->basic[seq]->n_past = pos + 1;
    else
        c->seqs[seq]->n_past = pos + 1;
}

void inf_kv_cache_publish(inf_kv_cache *c, int seq) {
    if (c->kind == INF_KV_PAGED && !c->n_rec_layer) donate(c, seq);
}

int inf_kv_cache_checkpoint_pos(const inf_kv_cache *c, int n_prompt) {
    if (!c->n_rec_layer) return -1;
    const int p =
        (n_prompt - INF_KV_CHECKPOINT_TAIL) / INF_KV_CHECKPOINT_STEP * INF_KV_CHECKPOINT_STEP;
    return p > 0 ? p : -1;
}

void inf_kv_cache_checkpoint(inf_kv_cache *c, int seq) {
    if (!c->n_rec_layer || c->n_past[seq] == 0) return;
    if (c->kind == INF_KV_PAGED) {
        donate(c, seq);
        return;
    }
    const size_t f = (size_t)c->n_rec_layer * c->state_floats;
    memcpy(c->snaps + (size_t)seq * f, seq_states(c, seq), f * sizeof(float));
    c->snap_pos[seq] = c->n_past[seq];
}

void inf_kv_cache_end(inf_kv_cache *c, int seq) {
    if (c->kind == INF_KV_BASIC) return;
    if (c->n_past[seq] > 0) donate(c, seq);
    truncate_to(c, seq, 0);
}

void inf_kv_cache_reset(inf_kv_cache *c, int seq) {
    truncate_to(c, seq, 0);
}

void inf_kv_cache_mark(inf_kv_cache *c, int seq) {
    if (!c->marks) return;
    const size_t f = (size_t)c->n_rec_layer * c->state_floats;
    memcpy(c->marks + (size_t)seq * f, seq_states(c, seq), f * sizeof(float));
    c->mark_pos[seq] = c->n_past[seq];
    refresh_views(c, seq);
}

int inf_kv_cache_truncate(inf_kv_cache *c, int seq, int n) {
    INF_ASSERT(n >= 0 && n <= c->n_past[seq]);
    if (!c->n_rec_layer || n == c->n_past[seq]) {
        truncate_to(c, seq, n);
        return -1;
    }
    /* the callers mark before every step they may cut back (exec.h) */
    const int from = c->mark_pos ? c->mark_pos[seq] : -1;
    INF_ASSERT(from >= 0 && from <= n && c->n_past[seq] - from <= c->log_rows);
    const size_t f = (size_t)c->n_rec_layer * c->state_floats;
    memcpy(seq_states(c, seq), c->marks + (size_t)seq * f, f * sizeof(float));
    truncate_to(c, seq, n);
    return from;
}

size_t inf_kv_cache_token_bytes(const inf_kv_cache *c) {
    return (size_t)c->n_kv_layer *
           (inf_kv_type_bytes(c->type_k, c->kv_dim) + inf_kv_type_bytes(c->type_v, c->kv_dim));
}

/* Bytes of one sequence's recurrent states (basic: and its snapshot; with
 * rewind logs: the mark's states and the log). */
static size_t state_bytes(const inf_kv_cache *c) {
    const size_t one = (size_t)c->n_rec_layer * c->state_floats * sizeof(float);
    return one * (1 + (c->snaps != NULL) + (c->marks != NULL)) +
           (size_t)c->n_rec_layer * (size_t)c->log_rows * c->log_floats * sizeof(float);
}

size_t inf_kv_cache_bytes(const inf_kv_cache *c, int seq) {
    if (c->kind == INF_KV_BASIC)
        return (size_t)c->n_ctx * inf_kv_cache_token_bytes(c) + state_bytes(c);
    return (size_t)c->seqs[seq]->n_blocks * (size_t)c->pool->block_size *
               inf_kv_cache_token_bytes(c) +
           state_bytes(c);
}

size_t inf_kv_cache_total_bytes(const inf_kv_cache *c) {
    const size_t states = (size_t)c->n_seq * state_bytes(c);
    if (c->kind == INF_KV_BASIC)
        return (size_t)c->n_seq * (size_t)c->n_ctx * inf_kv_cache_token_bytes(c) + states;
    return (size_t)c->pool->n_blocks * (size_t)c->pool->block_size * inf_kv_cache_token_bytes(c) +
           states;
}

void inf_kv_cache_stats(inf_kv_cache *c, inf_kv_stats *st) {
    *st = (inf_kv_stats){0};
    if (c->kind != INF_KV_PAGED) return;
    const inf_kv_pool *p = c->pool;
    const inf_radix_stats *rs = &c->radix->stats;
    /* Every reference in the pool must belong to a sequence or the tree. */
    memcpy(c->counts, c->radix->tree_refs, (size_t)p->n_blocks * sizeof *c->counts);
    for (int i = 0; i < c->n_seq; i++)
        for (int b = 0; b < c->seqs[i]->n_blocks; b++)
            c->counts[c->seqs[i]->blocks[b]]++;
    long bad = inf_kv_pool_audit(p, NULL) ? 1 : 0;
    for (int b = 0; b < p->n_blocks; b++)
        bad += c->counts[b] != p->refcount[b];
    *st =
        (inf_kv_stats){.block_size = p->block_size,
                       .blocks_total = p->n_blocks,
                       .blocks_free = p->n_free,
                       .prefix_lookups = rs->n_lookups,
                       .prefix_hits = rs->n_hits,
                       .prefix_tokens_reused = rs->tokens_reused,
                       .tree_nodes = rs->n_nodes,
                       .tree_tokens = rs->n_cached_tokens,
                       .evictions = rs->n_evicted_nodes,
                       .states = rs->n_states,
                       .states_dropped = (long)rs->n_states_dropped,
                       .state_bytes = (double)c->radix->state_floats * sizeof(float),
                       .ref_errors = bad,
                       .block_bytes = (double)p->block_size * (double)inf_kv_cache_token_bytes(c)};
}
