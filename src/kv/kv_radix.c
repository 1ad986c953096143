#include "kv/kv_radix.h"

#include <stdlib.h>
#include <string.h>

typedef struct rnode {
    struct rnode *parent;
    struct rnode **kids; /* [n_kids] */
    int n_kids, cap_kids;
    int32_t *tok;        /* [n_tok] the edge label */
    int n_tok;
    int depth;           /* position of tok[0] */
    int32_t *blk;        /* [n_blk] blocks of logical blocks depth/bs .. (depth+n_tok-1)/bs */
    int n_blk;
    uint64_t used;       /* LRU clock */
} rnode;

struct kv_radix {
    inf_kv_pool *pool;
    rnode root;
    uint64_t clock;
    kv_radix_stats st;
};

kv_radix *kv_radix_create(inf_kv_pool *p) {
    kv_radix *r = calloc(1, sizeof *r);
    if (r) r->pool = p;
    return r;
}

static void node_free(kv_radix *r, rnode *n) {
    for (int i = 0; i < n->n_kids; i++) node_free(r, n->kids[i]);
    for (int i = 0; i < n->n_blk; i++) inf_kv_pool_unref(r->pool, n->blk[i]);
    free(n->kids);
    free(n->tok);
    free(n->blk);
    if (n != &r->root) free(n);
}

void kv_radix_free(kv_radix *r) {
    if (!r) return;
    node_free(r, &r->root);
    free(r);
}

static rnode *child_for(const rnode *n, int32_t t) {
    for (int i = 0; i < n->n_kids; i++)
        if (n->kids[i]->tok[0] == t) return n->kids[i];
    return NULL;
}

static int common(const int32_t *a, int na, const int32_t *b, int nb) {
    int k = 0, m = na < nb ? na : nb;
    while (k < m && a[k] == b[k]) k++;
    return k;
}

static int add_kid(rnode *n, rnode *kid) {
    if (n->n_kids == n->cap_kids) {
        int cap = n->cap_kids ? 2 * n->cap_kids : 4;
        rnode **k = realloc(n->kids, (size_t)cap * sizeof *k);
        if (!k) return -1;
        n->kids = k;
        n->cap_kids = cap;
    }
    n->kids[n->n_kids++] = kid;
    kid->parent = n;
    return 0;
}

int kv_radix_match(kv_radix *r, const int32_t *tokens, int n, int32_t *blocks) {
    int bs = r->pool->block_size, m = 0;
    uint64_t now = ++r->clock;
    rnode *node = &r->root;
    r->st.lookups++;
    while (m < n) {
        rnode *c = child_for(node, tokens[m]);
        if (!c) break;
        int k = common(c->tok, c->n_tok, tokens + m, n - m);
        int fb = c->depth / bs;
        for (int b = m / bs; b <= (m + k - 1) / bs; b++) blocks[b] = c->blk[b - fb];
        c->used = now;
        m += k;
        if (k < c->n_tok) break;
        node = c;
    }
    if (m > 0) r->st.hits++;
    r->st.tokens_matched += m;
    return m;
}

/* Splits c after its first k tokens (0 < k < n_tok): c keeps the head, a new
 * child takes the tail, c's children and the blocks past the cut (a block
 * cut in two is referenced by both). */
static int split(kv_radix *r, rnode *c, int k) {
    int bs = r->pool->block_size;
    rnode *d = calloc(1, sizeof *d);
    if (!d) return -1;
    int fb = c->depth / bs, cut = c->depth + k;
    int d_first = cut / bs, c_last = (cut - 1) / bs;
    d->n_tok = c->n_tok - k;
    d->depth = cut;
    d->n_blk = c->n_blk - (d_first - fb);
    d->tok = malloc((size_t)d->n_tok * sizeof *d->tok);
    d->blk = malloc((size_t)d->n_blk * sizeof *d->blk);
    rnode **kids = malloc(sizeof *kids * 4);
    if (!d->tok || !d->blk || !kids) {
        free(d->tok);
        free(d->blk);
        free(kids);
        free(d);
        return -1;
    }
    memcpy(d->tok, c->tok + k, (size_t)d->n_tok * sizeof *d->tok);
    memcpy(d->blk, c->blk + (d_first - fb), (size_t)d->n_blk * sizeof *d->blk);
    if (d_first == c_last) inf_kv_pool_ref(r->pool, d->blk[0]); /* the shared cut block */
    d->kids = c->kids;
    d->n_kids = c->n_kids;
    d->cap_kids = c->cap_kids;
    for (int i = 0; i < d->n_kids; i++) d->kids[i]->parent = d;
    d->used = c->used;
    c->kids = kids;
    c->cap_kids = 4;
    c->n_kids = 0;
    c->n_tok = k;
    c->n_blk = c_last - fb + 1;
    add_kid(c, d); /* capacity 4: cannot fail */
    return 0;
}

int kv_radix_insert(kv_radix *r, const int32_t *tokens, int n, const int32_t *blocks) {
    int bs = r->pool->block_size, m = 0;
    uint64_t now = ++r->clock;
    rnode *node = &r->root;
    while (m < n) {
        rnode *c = child_for(node, tokens[m]);
        if (!c) {
            rnode *leaf = calloc(1, sizeof *leaf);
            if (!leaf) return -1;
            leaf->depth = m;
            leaf->n_tok = n - m;
            leaf->n_blk = (n - 1) / bs - m / bs + 1;
            leaf->tok = malloc((size_t)leaf->n_tok * sizeof *leaf->tok);
            leaf->blk = malloc((size_t)leaf->n_blk * sizeof *leaf->blk);
            if (!leaf->tok || !leaf->blk || add_kid(node, leaf)) {
                free(leaf->tok);
                free(leaf->blk);
                free(leaf);
                return -1;
            }
            memcpy(leaf->tok, tokens + m, (size_t)leaf->n_tok * sizeof *leaf->tok);
            for (int i = 0; i < leaf->n_blk; i++) {
                leaf->blk[i] = blocks[m / bs + i];
                inf_kv_pool_ref(r->pool, leaf->blk[i]);
            }
            leaf->used = now;
            return 0;
        }
        int k = common(c->tok, c->n_tok, tokens + m, n - m);
        if (k < c->n_tok && split(r, c, k)) return -1;
        c->used = now;
        m += k;
        node = c;
    }
    return 0;
}

/* The least recently used leaf under n (not n itself when it is the root). */
static rnode *lru_leaf(rnode *n, rnode *best) {
    for (int i = 0; i < n->n_kids; i++) {
        rnode *c = n->kids[i];
        if (c->n_kids == 0) {
            if (!best || c->used < best->used) best = c;
        } else {
            best = lru_leaf(c, best);
        }
    }
    return best;
}

int kv_radix_evict(kv_radix *r, int n_free) {
    int evicted = 0;
    while (r->pool->n_free < n_free) {
        rnode *leaf = lru_leaf(&r->root, NULL);
        if (!leaf) break;
        rnode *p = leaf->parent;
        for (int i = 0; i < p->n_kids; i++)
            if (p->kids[i] == leaf) {
                p->kids[i] = p->kids[--p->n_kids];
                break;
            }
        node_free(r, leaf);
        evicted++;
    }
    r->st.evictions += evicted;
    return evicted;
}

static void walk_stats(const rnode *n, kv_radix_stats *s, int32_t *counts) {
    for (int i = 0; i < n->n_kids; i++) {
        const rnode *c = n->kids[i];
        s->nodes++;
        s->tokens += c->n_tok;
        s->block_refs += c->n_blk;
        if (counts)
            for (int b = 0; b < c->n_blk; b++) counts[c->blk[b]]++;
        walk_stats(c, s, counts);
    }
}

void kv_radix_get_stats(const kv_radix *r, kv_radix_stats *s) {
    *s = r->st;
    s->nodes = s->tokens = s->block_refs = 0;
    walk_stats(&r->root, s, NULL);
}

void kv_radix_count_refs(const kv_radix *r, int32_t *counts) {
    kv_radix_stats s = {0};
    walk_stats(&r->root, &s, counts);
}
