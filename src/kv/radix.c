#include "kv/radix.h"

#include <stdlib.h>
#include <string.h>

struct kv_radix_node {
    kv_radix_node *parent;
    kv_radix_node **children; /* [n_children] */
    int n_children, cap_children;
    int depth; /* tokens on the path above this edge */
    int n_tokens;
    int32_t *tokens; /* [n_tokens] the edge label */
    int n_blocks;
    int32_t *blocks; /* [n_blocks] logical depth/bs .. (depth+n_tokens-1)/bs */
    uint64_t last_use;
    float *state; /* [r->state_floats] the recurrent states after depth + n_tokens, or NULL */
};

static int first_block(const inf_radix *r, int pos) {
    return pos / r->pool->block_size;
}

/* Blocks an edge [depth, depth+n) touches. */
static int edge_blocks(const inf_radix *r, int depth, int n) {
    return first_block(r, depth + n - 1) - first_block(r, depth) + 1;
}

static void hold(inf_radix *r, int32_t b) {
    kv_block_ref(r->pool, b);
    if (r->tree_refs[b]++ == 0) r->stats.n_blocks_held++;
}

static void release(inf_radix *r, int32_t b) {
    INF_ASSERT(r->tree_refs[b] > 0);
    if (--r->tree_refs[b] == 0) r->stats.n_blocks_held--;
    kv_block_unref(r->pool, b);
}

static void node_free_tree(inf_radix *r, kv_radix_node *n) {
    for (int i = 0; i < n->n_children; i++)
        node_free_tree(r, n->children[i]);
    for (int i = 0; i < n->n_blocks; i++)
        release(r, n->blocks[i]);
    if (n != r->root) {
        r->stats.n_nodes--;
        r->stats.n_cached_tokens -= n->n_tokens;
    }
    if (n->state) r->stats.n_states--;
    free(n->state);
    free(n->children);
    free(n->tokens);
    free(n->blocks);
    free(n);
}

static int add_child(kv_radix_node *parent, kv_radix_node *c) {
    if (parent->n_children == parent->cap_children) {
        int cap = parent->cap_children ? 2 * parent->cap_children : 4;
        kv_radix_node **nc = realloc(parent->children, (size_t)cap * sizeof *nc);
        if (!nc) return -1;
        parent->children = nc;
        parent->cap_children = cap;
    }
    parent->children[parent->n_children++] = c;
    c->parent = parent;
    return 0;
}

static kv_radix_node *find_child(const kv_radix_node *n, int32_t tok) {
    for (int i = 0; i < n->n_children; i++)
        if (n->children[i]->tokens[0] == tok) return n->children[i];
    return NULL;
}

static int common_len(const int32_t *a, int na, const int32_t *b, int nb) {
    int m = 0;
    while (m < na && m < nb && a[m] == b[m])
        m++;
    return m;
}

/* A node for edge tokens[0..n) at depth, holding blocks[edge_blocks]. */
static kv_radix_node *node_new(inf_radix *r, int depth, const int32_t *tokens, int n,
                               const int32_t *blocks) {
    kv_radix_node *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->depth = depth;
    c->n_tokens = n;
    c->n_blocks = n ? edge_blocks(r, depth, n) : 0;
    c->tokens = malloc((size_t)(n ? n : 1) * sizeof *c->tokens);
    c->blocks = malloc((size_t)(c->n_blocks ? c->n_blocks : 1) * sizeof *c->blocks);
    if (!c->tokens || !c->blocks) {
        free(c->tokens);
        free(c->blocks);
        free(c);
        return NULL;
    }
    if (n) memcpy(c->tokens, tokens, (size_t)n * sizeof *tokens);
    for (int i = 0; i < c->n_blocks; i++) {
        c->blocks[i] = blocks[i];
        hold(r, blocks[i]);
    }
    c->last_use = r->clock;
    return c;
}

static int reclaim_hook(void *ud, inf_kv_pool *pool, int n_want) {
    (void)pool;
    return inf_radix_evict(ud, n_want);
}

int inf_radix_create(inf_radix **out, inf_kv_pool *pool, inf_err *err) {
    *out = NULL;
    inf_radix *r = calloc(1, sizeof *r);
    if (!r) return inf_fail(err, "radix cache: out of memory");
    r->pool = pool;
    r->tree_refs = calloc((size_t)pool->n_blocks, sizeof *r->tree_refs);
    r->root = r->tree_refs ? node_new(r, 0, NULL, 0, NULL) : NULL;
    if (!r->root) {
        free(r->tree_refs);
        free(r);
        return inf_fail(err, "radix cache: out of memory");
    }
    inf_kv_pool_set_reclaim(pool, reclaim_hook, r);
    *out = r;
    return 0;
}

void inf_radix_free(inf_radix *r) {
    if (!r) return;
    if (r->pool->reclaim_ud == r) inf_kv_pool_set_reclaim(r->pool, NULL, NULL);
    node_free_tree(r, r->root);
    free(r->tree_refs);
    free(r);
}

/* ---- lookup ------------------------------------------------------------ */

/* Walks the cached path of tokens[0..n): writes the blocks of the prefix
 * found to blocks_out (no references added), marks it used, returns its
 * length. */
static int walk(inf_radix *r, const int32_t *tokens, int n, int32_t *blocks_out) {
    int pos = 0;
    kv_radix_node *node = r->root;
    while (pos < n) {
        kv_radix_node *c = find_child(node, tokens[pos]);
        if (!c) break;
        int m = common_len(c->tokens, c->n_tokens, tokens + pos, n - pos);
        /* The deeper node's copy of a straddling block wins: its rows after
         * the branch point are this path's. */
        int b0 = first_block(r, c->depth), nb = edge_blocks(r, c->depth, m);
        for (int i = 0; i < nb; i++)
            blocks_out[b0 + i] = c->blocks[i];
        c->last_use = r->clock;
        pos += m;
        if (m < c->n_tokens) break;
        node = c;
    }
    return pos;
}

/* Adds the caller's reference to the blocks of a prefix of n tokens and
 * counts the lookup's result. */
static int take(inf_radix *r, int n, const int32_t *blocks) {
    int nb = (n + r->pool->block_size - 1) / r->pool->block_size;
    for (int i = 0; i < nb; i++)
        kv_block_ref(r->pool, blocks[i]);
    if (n > 0) r->stats.n_hits++;
    r->stats.tokens_reused += n;
    return n;
}

/* A lookup of n tokens: the LRU clock and the stats. */
static void count_lookup(inf_radix *r, int n) {
    r->clock++;
    r->stats.n_lookups++;
    r->stats.tokens_looked_up += n > 0 ? n : 0;
}

int inf_radix_match(inf_radix *r, const int32_t *tokens, int n, int32_t *blocks_out) {
    count_lookup(r, n);
    return take(r, walk(r, tokens, n, blocks_out), blocks_out);
}

int inf_radix_attach(inf_radix *r, inf_kv_seq *s, const int32_t *tokens, int n, inf_err *err) {
    return inf_radix_attach_state(r, s, tokens, n, NULL, err);
}

/* ---- insert ------------------------------------------------------------ */

/* Splits c's edge after m tokens (0 < m < len): c keeps the first m tokens
 * and a new child takes the rest with c's children. Allocates first, so a
 * failure changes nothing. */
static int split(inf_radix *r, kv_radix_node *c, int m) {
    kv_radix_node **slot = malloc(4 * sizeof *slot);
    int d_low = c->depth + m;
    int skip = first_block(r, d_low) - first_block(r, c->depth);
    kv_radix_node *low =
        slot ? node_new(r, d_low, c->tokens + m, c->n_tokens - m, c->blocks + skip) : NULL;
    if (!low) {
        free(slot);
        return -1;
    }
    /* node_new took the lower node's references; drop the upper node's
     * references to blocks it no longer touches. */
    int nb_up = edge_blocks(r, c->depth, m);
    for (int i = nb_up; i < c->n_blocks; i++)
        release(r, c->blocks[i]);
    low->children = c->children;
    low->n_children = c->n_children;
    low->cap_children = c->cap_children;
    for (int i = 0; i < low->n_children; i++)
        low->children[i]->parent = low;
    low->last_use = c->last_use;
    low->state = c->state; /* it belongs to the edge's end */
    c->state = NULL;
    low->parent = c;
    c->children = slot;
    c->children[0] = low;
    c->n_children = 1;
    c->cap_children = 4;
    c->n_tokens = m;
    c->n_blocks = nb_up;
    r->stats.n_nodes++;
    return 0;
}

int inf_radix_insert(inf_radix *r, const int32_t *tokens, int n, const int32_t *blocks,
                     inf_err *err) {
    r->clock++;
    r->stats.n_inserts++;
    int pos = 0;
    kv_radix_node *node = r->root;
    node->last_use = r->clock;
    while (pos < n) {
        kv_radix_node *c = find_child(node, tokens[pos]);
        if (!c) {
            c = node_new(r, pos, tokens + pos, n - pos, blocks + first_block(r, pos));
            if (!c || add_child(node, c)) {
                if (c) node_free_tree(r, c);
                return inf_fail(err, "radix cache: out of memory");
            }
            r->stats.n_nodes++;
            r->stats.n_cached_tokens += n - pos;
            r->stats.tokens_inserted += n - pos;
            return 0;
        }
        int m = common_len(c->tokens, c->n_tokens, tokens + pos, n - pos);
        c->last_use = r->clock;
        if (pos + m == n) return 0; /* already cached, perhaps inside a longer edge */
        if (m < c->n_tokens && split(r, c, m)) return inf_fail(err, "radix cache: out of memory");
        pos += m;
        node = c;
    }
    return 0;
}

int inf_radix_insert_seq(inf_radix *r, const inf_kv_seq *s, const int32_t *tokens, inf_err *err) {
    if (s->pool != r->pool)
        return inf_fail(err, "radix cache: the sequence belongs to another pool");
    if (s->n_past == 0) return 0;
    return inf_radix_insert(r, tokens, s->n_past, s->blocks, err);
}

/* ---- eviction ---------------------------------------------------------- */

/* A leaf whose blocks no one outside the tree holds. */
static int evictable(const inf_radix *r, const kv_radix_node *n) {
    if (n == r->root || n->n_children) return 0;
    for (int i = 0; i < n->n_blocks; i++)
        if (r->pool->refcount[n->blocks[i]] != r->tree_refs[n->blocks[i]]) return 0;
    return 1;
}

/* leaves whose every block is the tree's alone (pinned = 0), or leaves some
 * running sequence still reads a block of (pinned = 1) */
static void collect_leaves(const inf_radix *r, kv_radix_node *n, kv_radix_node **out, int *k,
                           int pinned) {
    if (n != r->root && !n->n_children && evictable(r, n) == !pinned) out[(*k)++] = n;
    for (int i = 0; i < n->n_children; i++)
        collect_leaves(r, n->children[i], out, k, pinned);
}

/* Lets go of the blocks at the end of a pinned leaf that only the tree holds.
 * A sequence shares a cached path from its start, so what it reads of a leaf
 * is the leaf's head: the edge keeps the tokens up to the end of the last
 * block a sequence reads. Without this, one shared block (a request that
 * attached a prefix ending inside the leaf's first block, before it copies
 * that block) pins the whole leaf and everything above it. The state at the
 * leaf's old end no longer belongs to the edge: it goes too. */
static void trim_leaf(inf_radix *r, kv_radix_node *n) {
    int keep = 0; /* blocks up to and including the last one read outside the tree */
    for (int i = 0; i < n->n_blocks; i++)
        if (r->pool->refcount[n->blocks[i]] != r->tree_refs[n->blocks[i]]) keep = i + 1;
    if (keep == 0 || keep == n->n_blocks) return;
    const int end = (first_block(r, n->depth) + keep) * r->pool->block_size;
    for (int i = keep; i < n->n_blocks; i++)
        release(r, n->blocks[i]);
    r->stats.n_evicted_blocks += n->n_blocks - keep;
    r->stats.n_cached_tokens -= n->depth + n->n_tokens - end;
    n->n_blocks = keep;
    n->n_tokens = end - n->depth;
    if (n->state) {
        free(n->state);
        n->state = NULL;
        r->stats.n_states--;
        r->stats.n_states_dropped++;
    }
}

static int by_last_use(const void *a, const void *b) {
    uint64_t x = (*(kv_radix_node *const *)a)->last_use, y = (*(kv_radix_node *const *)b)->last_use;
    return x < y ? -1 : x > y;
}

static void remove_leaf(inf_radix *r, kv_radix_node *n) {
    kv_radix_node *p = n->parent;
    for (int i = 0; i < p->n_children; i++)
        if (p->children[i] == n) {
            p->children[i] = p->children[--p->n_children];
            break;
        }
    r->stats.n_evicted_nodes++;
    r->stats.n_evicted_blocks += n->n_blocks;
    node_free_tree(r, n);
}

/* Where an edge ends inside a block and a child's edge goes on in it, the
 * child's copy of that block holds the same prefix's rows (its sequence wrote
 * or copied every row before its end), so the node can read its rows from
 * there: its own copy, when the tree alone holds it, goes back to the pool.
 * Without this a running request that attached a path through the child
 * (and so reads the child's copy) pins the node's copy, which no request
 * reads. Until the pool has n_want free. */
static void share_child_blocks(inf_radix *r, kv_radix_node *n, int n_want) {
    for (int i = 0; i < n->n_children && r->pool->n_free < n_want; i++)
        share_child_blocks(r, n->children[i], n_want);
    if (n == r->root || !n->n_children || r->pool->n_free >= n_want) return;
    const int last = n->n_blocks - 1;
    const int32_t b = n->blocks[last];
    if (r->tree_refs[b] != 1 || r->pool->refcount[b] != 1) return;
    for (int i = 0; i < n->n_children; i++) {
        const kv_radix_node *c = n->children[i];
        if (first_block(r, c->depth) == first_block(r, n->depth + n->n_tokens - 1) &&
            c->blocks[0] != b) {
            hold(r, c->blocks[0]);
            n->blocks[last] = c->blocks[0];
            release(r, b);
            r->stats.n_evicted_blocks++;
            return;
        }
    }
}

int inf_radix_evict(inf_radix *r, int n_want) {
    int free0 = r->pool->n_free;
    kv_radix_node **leaves = NULL;
    while (r->pool->n_free < n_want) {
        if (!leaves) {
            leaves = malloc((size_t)(r->stats.n_nodes + 1) * sizeof *leaves);
            if (!leaves) break;
        }
        int k = 0;
        collect_leaves(r, r->root, leaves, &k, 0);
        if (k == 0) {
            /* every leaf is read by a running sequence: their tails, oldest first */
            collect_leaves(r, r->root, leaves, &k, 1);
            qsort(leaves, (size_t)k, sizeof *leaves, by_last_use);
            for (int i = 0; i < k && r->pool->n_free < n_want; i++)
                trim_leaf(r, leaves[i]);
            if (r->pool->n_free < n_want) share_child_blocks(r, r->root, n_want);
            break;
        }
        qsort(leaves, (size_t)k, sizeof *leaves, by_last_use);
        /* Evict oldest first; a parent left childless joins the next round. */
        for (int i = 0; i < k && r->pool->n_free < n_want; i++)
            remove_leaf(r, leaves[i]);
    }
    free(leaves);
    return r->pool->n_free - free0;
}

void inf_radix_clear(inf_radix *r) {
    inf_radix_evict(r, r->pool->n_blocks + 1);
}

/* ---- recurrent-state checkpoints ---------------------------------------- */

void inf_radix_set_states(inf_radix *r, size_t state_floats, int max_states) {
    r->state_floats = state_floats;
    r->max_states = max_states;
}

/* The node whose edge ends at depth n on the cached path tokens[0..n), made
 * so by a split where n falls inside an edge; NULL when the path is not
 * cached that far (or a split found no memory). */
static kv_radix_node *node_ending_at(inf_radix *r, const int32_t *tokens, int n) {
    int pos = 0;
    kv_radix_node *node = r->root;
    while (pos < n) {
        kv_radix_node *c = find_child(node, tokens[pos]);
        if (!c) return NULL;
        int m = common_len(c->tokens, c->n_tokens, tokens + pos, n - pos);
        if (pos + m == n) return m == c->n_tokens || split(r, c, m) == 0 ? c : NULL;
        if (m < c->n_tokens) return NULL;
        pos += m;
        node = c;
    }
    return NULL;
}

static void find_oldest_state(kv_radix_node *n, kv_radix_node **best) {
    if (n->state && (!*best || n->last_use < (*best)->last_use)) *best = n;
    for (int i = 0; i < n->n_children; i++)
        find_oldest_state(n->children[i], best);
}

static kv_radix_node *state_owner(kv_radix_node *n, const float *state) {
    if (n->state == state) return n;
    for (int i = 0; i < n->n_children; i++) {
        kv_radix_node *o = state_owner(n->children[i], state);
        if (o) return o;
    }
    return NULL;
}

int inf_radix_insert_state(inf_radix *r, const int32_t *tokens, int n, const int32_t *blocks,
                           const float *state, inf_err *err) {
    if (n <= 0) return 0;
    /* the least recently used checkpoint, chosen before this insert marks
       its path used */
    kv_radix_node *old = NULL;
    if (r->state_floats && r->stats.n_states >= r->max_states) find_oldest_state(r->root, &old);
    const float *victim = old ? old->state : NULL; /* a split below may move it to a child */
    if (inf_radix_insert(r, tokens, n, blocks, err)) return -1;
    if (!r->state_floats || r->max_states <= 0) return 0;
    kv_radix_node *at = node_ending_at(r, tokens, n);
    if (!at) return inf_fail(err, "radix cache: out of memory");
    at->last_use = r->clock;
    /* a state already there came from the same tokens: keep it */
    if (at->state) return 0;
    float *copy = NULL;
    if (victim && (old = state_owner(r->root, victim))) {
        copy = old->state; /* reused for the new checkpoint */
        old->state = NULL;
        r->stats.n_states--;
        r->stats.n_states_dropped++;
    }
    if (!copy && !(copy = malloc(r->state_floats * sizeof *copy)))
        return inf_fail(err, "radix cache: out of memory for a state checkpoint (%zu floats)",
                        r->state_floats);
    memcpy(copy, state, r->state_floats * sizeof *copy);
    at->state = copy;
    r->stats.n_states++;
    return 0;
}

int inf_radix_match_state(inf_radix *r, const int32_t *tokens, int n, int32_t *blocks_out,
                          const float **state) {
    count_lookup(r, n);
    *state = NULL;
    /* the deepest node end on the cached path that carries a state */
    int pos = 0, best = 0;
    const kv_radix_node *node = r->root;
    while (pos < n) {
        const kv_radix_node *c = find_child(node, tokens[pos]);
        if (!c || common_len(c->tokens, c->n_tokens, tokens + pos, n - pos) < c->n_tokens) break;
        pos += c->n_tokens;
        node = c;
        if (c->state) {
            best = pos;
            *state = c->state;
        }
    }
    return take(r, walk(r, tokens, best, blocks_out), blocks_out);
}

int inf_radix_attach_state(inf_radix *r, inf_kv_seq *s, const int32_t *tokens, int n,
                           float *state_out, inf_err *err) {
    if (s->pool != r->pool)
        return inf_fail(err, "radix cache: the sequence belongs to another pool");
    if (s->n_past || s->n_blocks)
        return inf_fail(err, "radix cache: attach to a sequence that holds %d positions",
                        s->n_past);
    if (n > s->n_ctx) n = s->n_ctx;
    const float *st = NULL;
    int got = state_out ? inf_radix_match_state(r, tokens, n, s->blocks, &st)
                        : inf_radix_match(r, tokens, n, s->blocks);
    if (got > 0 && st) memcpy(state_out, st, r->state_floats * sizeof *state_out);
    s->n_blocks = (got + r->pool->block_size - 1) / r->pool->block_size;
    s->n_past = got;
    return got;
}
