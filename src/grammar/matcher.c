/* The parse state of one output, the vocabulary's byte trie, and masks.
 *
 * A state is a set of stacks of element positions (llama.cpp's pushdown
 * form): the top of every stack is a character element to match next, the
 * positions under it are where each enclosing rule continues. An empty stack
 * means the root rule has ended: the output so far is a sentence. Beside the
 * stacks a state holds the lead bytes of a UTF-8 character not yet whole:
 * the stacks advance when it completes, and until then the state lives only
 * if some stack could still take a character that starts with those bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

#define WORK_LIMIT 20000000L /* stack expansions per call */
#define EXPAND_DEPTH 4096    /* rule references followed without consuming */
#define N_CACHE 32           /* masks kept per matcher */

typedef struct sset {
    int32_t *d; /* records [len][pos 0..len-1], top last */
    int n, cap; /* ints used, allocated */
    int n_stacks;
    uint32_t pval; /* partial UTF-8: bits so far */
    int8_t prem;   /* continuation bytes still to come (0: none pending) */
    int8_t plen;   /* the character's whole length */
} sset;

typedef struct mask_entry {
    sset key;
    uint32_t *bits;
    int n_allowed;
    uint64_t used; /* 0: empty entry */
} mask_entry;

struct inf_gram_vocab {
    int n_vocab;
    uint8_t *kind; /* [n_vocab] inf_gram_tok_kind */
    int max_len;   /* longest token in bytes */
    char *bytes;   /* every TEXT token's bytes, one after another */
    size_t *off;   /* [n_vocab] */
    uint16_t *len; /* [n_vocab] */
    int n_nodes;
    uint8_t *nbyte;                              /* [n_nodes] the byte on the edge into the node */
    int32_t *first_child, *next_sib, *first_tok; /* [n_nodes], -1: none */
    int32_t *tok_next;                           /* [n_vocab] tokens ending at one node */
    int32_t *eog;                                /* [n_eog] */
    int n_eog;
};

struct inf_gram_matcher {
    const inf_gram *g;
    const inf_gram_vocab *v;
    sset cur, a, b;
    sset *lvl; /* [v->max_len + 1] one state per trie depth */
    int32_t w[INF_GRAM_MAX_DEPTH + 2];
    long work;
    int broken; /* a bound was broken: err says which */
    char err[256];
    bool ended;     /* an EOG token was accepted */
    uint32_t *mask; /* [words] */
    int words;
    mask_entry cache[N_CACHE];
    uint64_t tick;
    long walks, cached;
};

/* ---- states ---- */

static int ss_reserve(inf_gram_matcher *m, sset *s, int more) {
    if (s->n + more <= s->cap) return 0;
    int cap = s->cap ? s->cap : 64;
    while (cap < s->n + more)
        cap *= 2;
    int32_t *d = realloc(s->d, (size_t)cap * sizeof *d);
    if (!d) {
        m->broken = 1;
        snprintf(m->err, sizeof m->err, "grammar: out of memory");
        return -1;
    }
    s->d = d;
    s->cap = cap;
    return 0;
}

static void ss_clear(sset *s) {
    s->n = 0;
    s->n_stacks = 0;
    s->pval = 0;
    s->prem = 0;
    s->plen = 0;
}

static int ss_copy(inf_gram_matcher *m, sset *dst, const sset *src) {
    if (ss_reserve(m, dst, src->n - dst->n)) return -1;
    memcpy(dst->d, src->d, (size_t)src->n * sizeof *dst->d);
    dst->n = src->n;
    dst->n_stacks = src->n_stacks;
    dst->pval = src->pval;
    dst->prem = src->prem;
    dst->plen = src->plen;
    return 0;
}

static int ss_equal(const sset *x, const sset *y) {
    return x->n == y->n && x->n_stacks == y->n_stacks && x->pval == y->pval && x->prem == y->prem &&
           x->plen == y->plen && !memcmp(x->d, y->d, (size_t)x->n * sizeof *x->d);
}

static int broke(inf_gram_matcher *m, const char *msg) {
    m->broken = 1;
    snprintf(m->err, sizeof m->err, "%s", msg);
    return -1;
}

/* Adds the stack m->w[0..len) to out unless it is there already. */
static int emit(inf_gram_matcher *m, sset *out, int len) {
    for (int i = 0; i < out->n; i += out->d[i] + 1)
        if (out->d[i] == len && !memcmp(out->d + i + 1, m->w, (size_t)len * sizeof *m->w)) return 0;
    if (out->n_stacks == INF_GRAM_MAX_STACKS)
        return broke(m, "grammar: too ambiguous (more than 128 parses alive at once)");
    if (ss_reserve(m, out, len + 1)) return -1;
    out->d[out->n] = len;
    memcpy(out->d + out->n + 1, m->w, (size_t)len * sizeof *m->w);
    out->n += len + 1;
    out->n_stacks++;
    return 0;
}

/* Follows rule references at the top of m->w[0..len) until every stack
 * has a character element on top (or is empty), adding each to out. */
static int expand(inf_gram_matcher *m, sset *out, int len, int depth) {
    const inf_gram *g = m->g;
    if (++m->work > WORK_LIMIT)
        return broke(m, "grammar: too ambiguous (the parse took too many steps)");
    if (depth > EXPAND_DEPTH)
        return broke(m, "grammar: rules nest deeper than 4096 without consuming input");
    if (len == 0) return emit(m, out, 0);
    int32_t p = m->w[len - 1];
    const gram_elem *e = &g->el[p];
    if (e->type == G_CHAR) return emit(m, out, len);
    INF_ASSERT(e->type == G_REF);
    int len2 = len - 1;
    if (!gram_eos(g, p + 1)) m->w[len2++] = p + 1;
    if (len2 + 1 > INF_GRAM_MAX_DEPTH) return broke(m, "grammar: nests deeper than 1024 levels");
    int32_t a = g->rule_start[e->a];
    for (;;) {
        int rc;
        if (gram_eos(g, a)) {
            rc = expand(m, out, len2, depth + 1);
        } else {
            m->w[len2] = a;
            rc = expand(m, out, len2 + 1, depth + 1);
        }
        if (rc) return -1;
        while (!gram_eos(g, a))
            a++;
        if (g->el[a].type == G_END) break;
        a++;
    }
    m->w[len - 1] = p;
    return 0;
}

/* Whether element e (a character) may match some code point in [lo, hi]. */
static int char_may(const inf_gram *g, const gram_elem *e, uint32_t lo, uint32_t hi) {
    const uint32_t *r = g->ranges + 2 * e->a;
    for (int i = 0; i < e->b; i++, r += 2) {
        if (r[0] > hi) break;
        if (r[1] < lo) continue;
        /* overlaps [lo, hi] */
        if (!e->neg) return 1;
        /* negated: every point is out unless one range covers the whole
         * interval (ranges are disjoint and not adjacent) */
        return !(r[0] <= lo && r[1] >= hi);
    }
    return e->neg;
}

/* Code point c taken by every stack whose top matches it: in -> out. */
static int accept_cp(inf_gram_matcher *m, const sset *in, uint32_t c, sset *out) {
    const inf_gram *g = m->g;
    for (int i = 0; i < in->n; i += in->d[i] + 1) {
        int len = in->d[i];
        if (!len) continue;
        int32_t top = in->d[i + len];
        if (!char_may(g, &g->el[top], c, c)) continue;
        memcpy(m->w, in->d + i + 1, (size_t)(len - 1) * sizeof *m->w);
        int l = len - 1;
        if (!gram_eos(g, top + 1)) m->w[l++] = top + 1;
        if (expand(m, out, l, 0)) return -1;
    }
    return 0;
}

static const uint32_t MIN_CP[5] = {0, 0, 0x80, 0x800, 0x10000};

/* Keeps in's live stacks with a partial character pending (out's partial
 * fields set by the caller); the state dies unless some stack may take a
 * character that starts with those bytes. */
static int keep_partial(inf_gram_matcher *m, const sset *in, sset *out) {
    const inf_gram *g = m->g;
    int shift = 6 * out->prem;
    uint32_t lo = out->pval << shift, hi = lo | ((1u << shift) - 1);
    if (lo < MIN_CP[out->plen]) lo = MIN_CP[out->plen];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return 0;
    for (int i = 0; i < in->n; i += in->d[i] + 1) {
        int len = in->d[i];
        if (!len || !char_may(g, &g->el[in->d[i + len]], lo, hi)) continue;
        if (ss_reserve(m, out, len + 1)) return -1;
        memcpy(out->d + out->n, in->d + i, (size_t)(len + 1) * sizeof *out->d);
        out->n += len + 1;
        out->n_stacks++;
    }
    return 0;
}

/* One byte: in -> out (out empty: the byte leaves the language). */
static int advance(inf_gram_matcher *m, const sset *in, uint8_t b, sset *out) {
    ss_clear(out);
    if (in->prem == 0) {
        if (b < 0x80) return accept_cp(m, in, b, out);
        int len = b >= 0xC2 && b <= 0xDF   ? 2
                  : b >= 0xE0 && b <= 0xEF ? 3
                  : b >= 0xF0 && b <= 0xF4 ? 4
                                           : 0;
        if (!len) return 0;
        out->pval = b & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        out->prem = (int8_t)(len - 1);
        out->plen = (int8_t)len;
        return keep_partial(m, in, out);
    }
    if ((b & 0xC0) != 0x80) return 0;
    uint32_t val = in->pval << 6 | (b & 0x3F);
    if (in->prem == 1) {
        if (val < MIN_CP[in->plen] || val > 0x10FFFF || (val >= 0xD800 && val <= 0xDFFF)) return 0;
        return accept_cp(m, in, val, out);
    }
    out->pval = val;
    out->prem = (int8_t)(in->prem - 1);
    out->plen = in->plen;
    return keep_partial(m, in, out);
}

static int ss_can_end(const sset *s) {
    if (s->prem) return 0;
    for (int i = 0; i < s->n; i += s->d[i] + 1)
        if (s->d[i] == 0) return 1;
    return 0;
}

/* ---- the vocabulary trie ---- */

void inf_gram_vocab_free(inf_gram_vocab *v) {
    if (!v) return;
    free(v->kind);
    free(v->bytes);
    free(v->off);
    free(v->len);
    free(v->nbyte);
    free(v->first_child);
    free(v->next_sib);
    free(v->first_tok);
    free(v->tok_next);
    free(v->eog);
    free(v);
}

int inf_gram_vocab_size(const inf_gram_vocab *v) {
    return v->n_vocab;
}

int inf_gram_vocab_create(inf_gram_vocab **out, int n_vocab,
                          int (*piece)(void *ud, int32_t id, char *buf, int cap),
                          inf_gram_tok_kind (*kind)(void *ud, int32_t id), void *ud, inf_err *err) {
    *out = NULL;
    inf_gram_vocab *v = calloc(1, sizeof *v);
    if (!v || n_vocab < 1) goto oom;
    v->n_vocab = n_vocab;
    v->kind = calloc((size_t)n_vocab, 1);
    v->off = calloc((size_t)n_vocab, sizeof *v->off);
    v->len = calloc((size_t)n_vocab, sizeof *v->len);
    v->tok_next = malloc((size_t)n_vocab * sizeof *v->tok_next);
    v->eog = malloc((size_t)n_vocab * sizeof *v->eog);
    if (!v->kind || !v->off || !v->len || !v->tok_next || !v->eog) goto oom;
    size_t cap_bytes = 1 << 20, n_bytes = 0;
    v->bytes = malloc(cap_bytes);
    if (!v->bytes) goto oom;
    char buf[256];
    for (int32_t id = 0; id < n_vocab; id++) {
        inf_gram_tok_kind k = kind(ud, id);
        int n = k == INF_GRAM_TOK_TEXT ? piece(ud, id, buf, sizeof buf) : 0;
        if (k == INF_GRAM_TOK_TEXT && n <= 0) k = INF_GRAM_TOK_NEVER;
        v->kind[id] = (uint8_t)k;
        if (k == INF_GRAM_TOK_EOG) v->eog[v->n_eog++] = id;
        if (k != INF_GRAM_TOK_TEXT) continue;
        if (n_bytes + (size_t)n > cap_bytes) {
            char *b2 = realloc(v->bytes, cap_bytes *= 2);
            if (!b2) goto oom;
            v->bytes = b2;
        }
        memcpy(v->bytes + n_bytes, buf, (size_t)n);
        v->off[id] = n_bytes;
        v->len[id] = (uint16_t)n;
        n_bytes += (size_t)n;
        if (n > v->max_len) v->max_len = n;
    }
    /* Nodes: at most one per token byte, plus the root. */
    size_t max_nodes = n_bytes + 1;
    v->nbyte = malloc(max_nodes);
    v->first_child = malloc(max_nodes * sizeof(int32_t));
    v->next_sib = malloc(max_nodes * sizeof(int32_t));
    v->first_tok = malloc(max_nodes * sizeof(int32_t));
    if (!v->nbyte || !v->first_child || !v->next_sib || !v->first_tok) goto oom;
    int32_t root_child[256];
    for (int i = 0; i < 256; i++)
        root_child[i] = -1;
    v->n_nodes = 1;
    v->nbyte[0] = 0;
    v->first_child[0] = v->next_sib[0] = v->first_tok[0] = -1;
    for (int32_t id = 0; id < n_vocab; id++) {
        if (v->kind[id] != INF_GRAM_TOK_TEXT) continue;
        const uint8_t *s = (const uint8_t *)v->bytes + v->off[id];
        int32_t node = 0;
        for (int i = 0; i < v->len[id]; i++) {
            int32_t c = node ? v->first_child[node] : root_child[s[i]];
            if (node)
                while (c >= 0 && v->nbyte[c] != s[i])
                    c = v->next_sib[c];
            if (c < 0) {
                c = v->n_nodes++;
                v->nbyte[c] = s[i];
                v->first_child[c] = v->first_tok[c] = -1;
                v->next_sib[c] = v->first_child[node];
                v->first_child[node] = c;
                if (!node) root_child[s[i]] = c;
            }
            node = c;
        }
        v->tok_next[id] = v->first_tok[node];
        v->first_tok[node] = id;
    }
    *out = v;
    return 0;
oom:
    inf_gram_vocab_free(v);
    return inf_fail(err, "grammar: out of memory (vocabulary trie of %d tokens)", n_vocab);
}

/* ---- the matcher ---- */

void inf_gram_matcher_free(inf_gram_matcher *m) {
    if (!m) return;
    free(m->cur.d);
    free(m->a.d);
    free(m->b.d);
    if (m->lvl)
        for (int i = 0; i <= m->v->max_len; i++)
            free(m->lvl[i].d);
    free(m->lvl);
    free(m->mask);
    for (int i = 0; i < N_CACHE; i++) {
        free(m->cache[i].key.d);
        free(m->cache[i].bits);
    }
    free(m);
}

int inf_gram_matcher_create(inf_gram_matcher **out, const inf_gram *g, const inf_gram_vocab *v,
                            inf_err *err) {
    *out = NULL;
    inf_gram_matcher *m = calloc(1, sizeof *m);
    if (!m) return inf_fail(err, "grammar: out of memory");
    m->g = g;
    m->v = v;
    m->words = (v->n_vocab + 31) / 32;
    m->lvl = calloc((size_t)v->max_len + 1, sizeof *m->lvl);
    m->mask = malloc((size_t)m->words * sizeof *m->mask);
    if (!m->lvl || !m->mask) {
        inf_gram_matcher_free(m);
        return inf_fail(err, "grammar: out of memory");
    }
    /* The start: the root rule's alternatives, expanded. */
    int32_t a = g->rule_start[g->root];
    int rc = 0;
    for (;;) {
        if (gram_eos(g, a)) {
            rc = expand(m, &m->cur, 0, 0);
        } else {
            m->w[0] = a;
            rc = expand(m, &m->cur, 1, 0);
        }
        if (rc) break;
        while (!gram_eos(g, a))
            a++;
        if (g->el[a].type == G_END) break;
        a++;
    }
    if (rc) {
        inf_fail(err, "%s", m->err);
        inf_gram_matcher_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

const char *inf_gram_matcher_error(const inf_gram_matcher *m) {
    return m->broken ? m->err : "grammar: the token does not continue the grammar";
}

bool inf_gram_matcher_can_end(const inf_gram_matcher *m) {
    return !m->ended && ss_can_end(&m->cur);
}

bool inf_gram_matcher_done(const inf_gram_matcher *m) {
    return m->ended || (m->cur.prem == 0 && m->cur.n_stacks == 1 && m->cur.d[0] == 0);
}

void inf_gram_matcher_counts(const inf_gram_matcher *m, long *walks, long *cached) {
    *walks = m->walks;
    *cached = m->cached;
}

/* Walks bytes from the current state; returns the final state (one of a/b),
 * NULL when they leave the language or on a broken bound (m->broken). */
static const sset *walk(inf_gram_matcher *m, const uint8_t *s, size_t n) {
    const sset *st = &m->cur;
    m->work = 0;
    for (size_t i = 0; i < n; i++) {
        sset *next = (i & 1) ? &m->b : &m->a;
        if (advance(m, st, s[i], next)) return NULL;
        if (!next->n_stacks) return NULL;
        st = next;
    }
    return st;
}

static int commit(inf_gram_matcher *m, const sset *st) {
    if (st == &m->cur) return 0;
    sset *src = (sset *)st, tmp = m->cur;
    m->cur = *src;
    *src = tmp;
    return 0;
}

int inf_gram_matcher_allows(inf_gram_matcher *m, int32_t id) {
    const inf_gram_vocab *v = m->v;
    if (m->broken) return -1;
    if (m->ended || id < 0 || id >= v->n_vocab) return 0;
    if (v->kind[id] == INF_GRAM_TOK_EOG) return ss_can_end(&m->cur);
    if (v->kind[id] != INF_GRAM_TOK_TEXT) return 0;
    const sset *st = walk(m, (const uint8_t *)v->bytes + v->off[id], v->len[id]);
    if (!st) return m->broken ? -1 : 0;
    return 1;
}

int inf_gram_matcher_accept(inf_gram_matcher *m, int32_t id) {
    const inf_gram_vocab *v = m->v;
    if (m->broken) return -1;
    if (m->ended || id < 0 || id >= v->n_vocab) return -1;
    if (v->kind[id] == INF_GRAM_TOK_EOG) {
        if (!ss_can_end(&m->cur)) return -1;
        m->ended = true;
        return 0;
    }
    if (v->kind[id] != INF_GRAM_TOK_TEXT) return -1;
    const sset *st = walk(m, (const uint8_t *)v->bytes + v->off[id], v->len[id]);
    if (!st) return -1;
    return commit(m, st);
}

int inf_gram_matcher_accept_bytes(inf_gram_matcher *m, const char *s, size_t n) {
    if (m->broken || m->ended) return -1;
    const sset *st = walk(m, (const uint8_t *)s, n);
    if (!st) return -1;
    return commit(m, st);
}

/* Marks every token under trie node `node` whose bytes keep state in alive. */
static int dfs(inf_gram_matcher *m, const sset *in, int32_t node, int depth, int *count) {
    const inf_gram_vocab *v = m->v;
    sset *next = &m->lvl[depth + 1];
    for (int32_t c = v->first_child[node]; c >= 0; c = v->next_sib[c]) {
        if (advance(m, in, v->nbyte[c], next)) return -1;
        if (!next->n_stacks) continue;
        for (int32_t t = v->first_tok[c]; t >= 0; t = v->tok_next[t]) {
            m->mask[t >> 5] |= 1u << (t & 31);
            (*count)++;
        }
        if (v->first_child[c] >= 0 && dfs(m, next, c, depth + 1, count)) return -1;
    }
    return 0;
}

const uint32_t *inf_gram_matcher_mask(inf_gram_matcher *m, int *n_allowed) {
    *n_allowed = 0;
    if (m->broken) return NULL;
    memset(m->mask, 0, (size_t)m->words * sizeof *m->mask);
    if (m->ended) return m->mask;
    mask_entry *slot = &m->cache[0];
    for (int i = 0; i < N_CACHE; i++) {
        mask_entry *e = &m->cache[i];
        if (e->used && ss_equal(&e->key, &m->cur)) {
            e->used = ++m->tick;
            m->cached++;
            *n_allowed = e->n_allowed;
            return e->bits;
        }
        if (e->used < slot->used) slot = e;
    }
    m->work = 0;
    int count = 0;
    if (dfs(m, &m->cur, 0, -1, &count)) return NULL;
    if (ss_can_end(&m->cur))
        for (int i = 0; i < m->v->n_eog; i++) {
            int32_t t = m->v->eog[i];
            m->mask[t >> 5] |= 1u << (t & 31);
            count++;
        }
    m->walks++;
    *n_allowed = count;
    /* Keep it for the next time this state comes. */
    if (!slot->bits && !(slot->bits = malloc((size_t)m->words * sizeof *slot->bits)))
        return m->mask;
    if (ss_copy(m, &slot->key, &m->cur)) {
        m->broken = 0; /* the cache is optional */
        slot->used = 0;
        return m->mask;
    }
    memcpy(slot->bits, m->mask, (size_t)m->words * sizeof *slot->bits);
    slot->n_allowed = count;
    slot->used = ++m->tick;
    return slot->bits;
}
