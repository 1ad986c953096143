/* The parse state of one output, the vocabulary's byte trie, and masks.
 *
 * A state is a set of stacks of element positions (llama.cpp's pushdown
 * form): the top of every stack is a character element to match next, the
 * positions under it are where each enclosing rule continues. An empty stack
 * means the root rule has ended: the output so far is a sentence. Beside the
 * stacks a state holds the lead bytes of a UTF-8 character not yet whole:
 * the stacks advance when it completes, and until then the state lives only
 * if some stack could still take a character that starts with those bytes.
 * When every completion of those bytes is a valid character that every
 * stack takes, the bytes themselves no longer matter and the state forgets
 * them ("any"), so the thousands of CJK lead-byte pairs inside a JSON string
 * are one state, not one each.
 *
 * Speed: states are interned per matcher (a hash table of the states seen)
 * and the transition of a state on a byte is memoized in a table [state][256],
 * so walking the vocabulary's trie costs a table lookup per node once the
 * states around the output are known; the stacks are expanded once per
 * (state, byte), not once per trie node. The trie is laid out in depth-first
 * order (a node's subtree follows it, and a dead byte skips to the end of its
 * subtree), so a mask walk reads the trie front to back. Masks are cached by
 * interned state. The table is bounded (MAX_STATES states, MAX_STATE_INTS
 * stack positions): a call that finds it past FLUSH_STATES starts it afresh,
 * and a walk that fills it goes on with states it does not keep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_int.h"

#define WORK_LIMIT 20000000L      /* stack expansions per call */
#define EXPAND_DEPTH 4096         /* rule references followed without consuming */
#define N_CACHE 64                /* masks kept per matcher */
#define MAX_STATES 8192           /* interned states per matcher */
#define FLUSH_STATES 6144         /* past this, the next call starts the table afresh */
#define MAX_STATE_INTS (2L << 20) /* stack positions they hold: with the table, <= 17 MB */

/* Transitions and state ids. */
#define T_UNKNOWN (-2) /* not computed yet */
#define T_DEAD (-1)    /* the byte leaves the language */
#define NOT_KEPT (-3)  /* a state the full table could not keep */

typedef struct sset {
    int32_t *d; /* records [len][pos 0..len-1], top last */
    int n, cap; /* ints used, allocated */
    int n_stacks;
    uint32_t pval; /* partial UTF-8: bits so far (0 when pany) */
    int8_t prem;   /* continuation bytes still to come (0: none pending) */
    int8_t plen;   /* the character's whole length */
    uint8_t pany;  /* every completion is valid and taken by every stack */
} sset;

typedef struct mask_entry {
    int32_t state; /* interned id */
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
    /* The trie in depth-first order: node 0 is the root, node i's subtree is
     * [i, skip[i]). */
    int n_nodes;
    uint8_t *nbyte;  /* [n_nodes] the byte on the edge into the node */
    uint16_t *depth; /* [n_nodes] bytes from the root */
    int32_t *skip;   /* [n_nodes] the first node after the subtree */
    int32_t *tok_at; /* [n_nodes + 1] node i's tokens are toks[tok_at[i] .. tok_at[i + 1]) */
    int32_t *toks;   /* [n_vocab] token ids in trie order */
    int32_t *eog;    /* [n_eog] */
    int n_eog;
};

struct inf_gram_matcher {
    const inf_gram *g;
    const inf_gram_vocab *v;
    sset cur;       /* the state of the output so far */
    int32_t cur_id; /* its interned id, or NOT_KEPT */
    sset a, b;
    /* Walks: the state after d bytes is st[lid[d]], or lvl[d] when
     * lid[d] == NOT_KEPT (lvl[0] unused: cur). */
    sset *lvl;    /* [v->max_len + 1] */
    int32_t *lid; /* [v->max_len + 1] */
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
    /* Interned states and their transitions. */
    sset *st; /* [n_st] */
    int n_st, cap_st;
    long st_ints;   /* stack positions held by st */
    int32_t *trans; /* [cap_st][256] next state id, T_DEAD or T_UNKNOWN */
    int32_t *htab;  /* [2 * MAX_STATES] open addressing, -1: empty */
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
    s->pany = 0;
}

static int ss_copy(inf_gram_matcher *m, sset *dst, const sset *src) {
    if (ss_reserve(m, dst, src->n - dst->n)) return -1;
    memcpy(dst->d, src->d, (size_t)src->n * sizeof *dst->d);
    dst->n = src->n;
    dst->n_stacks = src->n_stacks;
    dst->pval = src->pval;
    dst->prem = src->prem;
    dst->plen = src->plen;
    dst->pany = src->pany;
    return 0;
}

static int ss_equal(const sset *x, const sset *y) {
    return x->n == y->n && x->n_stacks == y->n_stacks && x->pval == y->pval && x->prem == y->prem &&
           x->plen == y->plen && x->pany == y->pany &&
           !memcmp(x->d, y->d, (size_t)x->n * sizeof *x->d);
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

/* Whether element e (a character) matches every code point in [lo, hi]. */
static int char_all(const inf_gram *g, const gram_elem *e, uint32_t lo, uint32_t hi) {
    const uint32_t *r = g->ranges + 2 * e->a;
    for (int i = 0; i < e->b; i++, r += 2) {
        if (r[0] > hi) break;
        if (r[1] < lo) continue;
        return e->neg ? 0 : r[0] <= lo && r[1] >= hi;
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
 * character that starts with those bytes. When every completion is a valid
 * character that every kept stack takes, out forgets the bytes (pany). */
static int keep_partial(inf_gram_matcher *m, const sset *in, sset *out) {
    const inf_gram *g = m->g;
    int shift = 6 * out->prem;
    uint32_t lo = out->pval << shift, hi = lo | ((1u << shift) - 1);
    int all = lo >= MIN_CP[out->plen] && hi <= 0x10FFFF && (hi < 0xD800 || lo > 0xDFFF);
    if (lo < MIN_CP[out->plen]) lo = MIN_CP[out->plen];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return 0;
    for (int i = 0; i < in->n; i += in->d[i] + 1) {
        int len = in->d[i];
        const gram_elem *top = len ? &g->el[in->d[i + len]] : NULL;
        if (!top || !char_may(g, top, lo, hi)) continue;
        if (all && !char_all(g, top, lo, hi)) all = 0;
        if (ss_reserve(m, out, len + 1)) return -1;
        memcpy(out->d + out->n, in->d + i, (size_t)(len + 1) * sizeof *out->d);
        out->n += len + 1;
        out->n_stacks++;
    }
    if (all) {
        out->pany = 1;
        out->pval = 0;
    }
    return 0;
}

/* A character every stack of in takes (in->pany): pops them all. */
static int accept_any(inf_gram_matcher *m, const sset *in, sset *out) {
    const inf_gram *g = m->g;
    for (int i = 0; i < in->n; i += in->d[i] + 1) {
        int len = in->d[i];
        int32_t top = in->d[i + len];
        memcpy(m->w, in->d + i + 1, (size_t)(len - 1) * sizeof *m->w);
        int l = len - 1;
        if (!gram_eos(g, top + 1)) m->w[l++] = top + 1;
        if (expand(m, out, l, 0)) return -1;
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
    if (in->pany) {
        if (in->prem == 1) return accept_any(m, in, out);
        if (ss_copy(m, out, in)) return -1;
        out->prem = (int8_t)(in->prem - 1);
        return 0;
    }
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
    free(v->depth);
    free(v->skip);
    free(v->tok_at);
    free(v->toks);
    free(v->eog);
    free(v);
}

int inf_gram_vocab_size(const inf_gram_vocab *v) {
    return v->n_vocab;
}

/* The trie built by linked children, before it is laid out depth first. */
typedef struct ltrie {
    uint8_t *nbyte;
    int32_t *first_child, *next_sib, *first_tok; /* [n], -1: none */
    int32_t *tok_next;                           /* [n_vocab] the next token at the same node */
    int n;
} ltrie;

static void ltrie_free(ltrie *t) {
    free(t->nbyte);
    free(t->first_child);
    free(t->next_sib);
    free(t->first_tok);
    free(t->tok_next);
}

/* Lays t out in depth-first order into v (nbyte, depth, skip, tok_at, toks). */
static int layout(inf_gram_vocab *v, const ltrie *t) {
    size_t n = (size_t)t->n;
    int md = v->max_len + 1;
    v->n_nodes = t->n;
    v->nbyte = malloc(n);
    v->depth = malloc(n * sizeof *v->depth);
    v->skip = malloc(n * sizeof *v->skip);
    v->tok_at = malloc((n + 1) * sizeof *v->tok_at);
    v->toks = malloc((size_t)v->n_vocab * sizeof *v->toks);
    int32_t *stack = malloc(2 * n * sizeof *stack);          /* (linked id, depth) to visit */
    int32_t *open = malloc(((size_t)md + 1) * sizeof *open); /* last node placed per depth */
    if (!v->nbyte || !v->depth || !v->skip || !v->tok_at || !v->toks || !stack || !open) {
        free(stack);
        free(open);
        return -1;
    }
    int sp = 0, top = -1, n_toks = 0; /* open[0..top]: nodes whose subtree is not closed */
    stack[sp++] = 0;
    stack[sp++] = 0;
    for (int32_t k = 0; sp; k++) {
        int d = stack[--sp];
        int32_t x = stack[--sp];
        for (; top >= d; top--) /* the subtrees at depth >= d end here */
            v->skip[open[top]] = k;
        open[++top] = k;
        v->nbyte[k] = t->nbyte[x];
        v->depth[k] = (uint16_t)d;
        v->tok_at[k] = n_toks;
        for (int32_t id = t->first_tok[x]; id >= 0; id = t->tok_next[id])
            v->toks[n_toks++] = id;
        for (int32_t c = t->first_child[x]; c >= 0; c = t->next_sib[c]) {
            stack[sp++] = c;
            stack[sp++] = d + 1;
        }
    }
    for (; top >= 0; top--)
        v->skip[open[top]] = t->n;
    v->tok_at[n] = n_toks;
    free(stack);
    free(open);
    return 0;
}

int inf_gram_vocab_create(inf_gram_vocab **out, int n_vocab,
                          int (*piece)(void *ud, int32_t id, char *buf, int cap),
                          inf_gram_tok_kind (*kind)(void *ud, int32_t id), void *ud, inf_err *err) {
    *out = NULL;
    ltrie t = {0};
    inf_gram_vocab *v = calloc(1, sizeof *v);
    if (!v || n_vocab < 1) goto oom;
    v->n_vocab = n_vocab;
    v->kind = calloc((size_t)n_vocab, 1);
    v->off = calloc((size_t)n_vocab, sizeof *v->off);
    v->len = calloc((size_t)n_vocab, sizeof *v->len);
    t.tok_next = malloc((size_t)n_vocab * sizeof *t.tok_next);
    v->eog = malloc((size_t)n_vocab * sizeof *v->eog);
    if (!v->kind || !v->off || !v->len || !t.tok_next || !v->eog) goto oom;
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
    t.nbyte = malloc(max_nodes);
    t.first_child = malloc(max_nodes * sizeof(int32_t));
    t.next_sib = malloc(max_nodes * sizeof(int32_t));
    t.first_tok = malloc(max_nodes * sizeof(int32_t));
    if (!t.nbyte || !t.first_child || !t.next_sib || !t.first_tok) goto oom;
    int32_t root_child[256];
    for (int i = 0; i < 256; i++)
        root_child[i] = -1;
    t.n = 1;
    t.nbyte[0] = 0;
    t.first_child[0] = t.next_sib[0] = t.first_tok[0] = -1;
    for (int32_t id = 0; id < n_vocab; id++) {
        if (v->kind[id] != INF_GRAM_TOK_TEXT) continue;
        const uint8_t *s = (const uint8_t *)v->bytes + v->off[id];
        int32_t node = 0;
        for (int i = 0; i < v->len[id]; i++) {
            int32_t c = node ? t.first_child[node] : root_child[s[i]];
            if (node)
                while (c >= 0 && t.nbyte[c] != s[i])
                    c = t.next_sib[c];
            if (c < 0) {
                c = t.n++;
                t.nbyte[c] = s[i];
                t.first_child[c] = t.first_tok[c] = -1;
                t.next_sib[c] = t.first_child[node];
                t.first_child[node] = c;
                if (!node) root_child[s[i]] = c;
            }
            node = c;
        }
        t.tok_next[id] = t.first_tok[node];
        t.first_tok[node] = id;
    }
    if (layout(v, &t)) goto oom;
    ltrie_free(&t);
    *out = v;
    return 0;
oom:
    ltrie_free(&t);
    inf_gram_vocab_free(v);
    return inf_fail(err, "grammar: out of memory (vocabulary trie of %d tokens)", n_vocab);
}

/* ---- interned states ---- */

static uint64_t ss_hash(const sset *s) {
    uint64_t h = 1469598103934665603ull;
    uint64_t head = (uint64_t)s->pval | (uint64_t)(uint8_t)s->prem << 32 |
                    (uint64_t)(uint8_t)s->plen << 40 | (uint64_t)s->pany << 48;
    h = (h ^ head) * 1099511628211ull;
    for (int i = 0; i < s->n; i++)
        h = (h ^ (uint32_t)s->d[i]) * 1099511628211ull;
    return h ^ h >> 29;
}

/* Forgets every interned state, transition and cached mask. */
static void flush(inf_gram_matcher *m) {
    m->n_st = 0;
    m->st_ints = 0;
    if (m->htab)
        for (int i = 0; i < 2 * MAX_STATES; i++)
            m->htab[i] = -1;
    for (int i = 0; i < N_CACHE; i++)
        m->cache[i].used = 0;
    m->cur_id = NOT_KEPT;
}

/* The id of state s (the table keeps a copy), or NOT_KEPT when the table
 * is full or memory is short: the table only saves work. */
static int32_t intern(inf_gram_matcher *m, const sset *s) {
    const size_t hmask = 2 * MAX_STATES - 1;
    if (!m->htab) {
        if (!(m->htab = malloc(2 * MAX_STATES * sizeof *m->htab))) return NOT_KEPT;
        for (int i = 0; i < 2 * MAX_STATES; i++)
            m->htab[i] = -1;
    }
    size_t h = (size_t)ss_hash(s) & hmask;
    for (; m->htab[h] >= 0; h = (h + 1) & hmask)
        if (ss_equal(&m->st[m->htab[h]], s)) return m->htab[h];
    if (m->n_st == MAX_STATES || m->st_ints + s->n > MAX_STATE_INTS) return NOT_KEPT;
    if (m->n_st == m->cap_st) {
        /* trans first: cap_st never counts rows trans does not have */
        int cap = m->cap_st ? 2 * m->cap_st : 64;
        int32_t *tr = realloc(m->trans, (size_t)cap * 256 * sizeof *tr);
        if (!tr) return NOT_KEPT;
        m->trans = tr;
        sset *st = realloc(m->st, (size_t)cap * sizeof *st);
        if (!st) return NOT_KEPT;
        memset(st + m->cap_st, 0, (size_t)(cap - m->cap_st) * sizeof *st);
        m->st = st;
        m->cap_st = cap;
    }
    int32_t id = m->n_st;
    sset *d = &m->st[id];
    if (ss_copy(m, d, s)) {
        m->broken = 0; /* out of memory for a copy the table only caches */
        return NOT_KEPT;
    }
    for (int b = 0; b < 256; b++)
        m->trans[(size_t)id * 256 + b] = T_UNKNOWN;
    m->htab[h] = id;
    m->n_st++;
    m->st_ints += s->n;
    return id;
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
    free(m->lid);
    free(m->mask);
    for (int i = 0; i < N_CACHE; i++)
        free(m->cache[i].bits);
    for (int i = 0; i < m->cap_st; i++)
        free(m->st[i].d);
    free(m->st);
    free(m->trans);
    free(m->htab);
    free(m);
}

int inf_gram_matcher_create(inf_gram_matcher **out, const inf_gram *g, const inf_gram_vocab *v,
                            inf_err *err) {
    *out = NULL;
    inf_gram_matcher *m = calloc(1, sizeof *m);
    if (!m) return inf_fail(err, "grammar: out of memory");
    m->g = g;
    m->v = v;
    m->cur_id = NOT_KEPT;
    m->words = (v->n_vocab + 31) / 32;
    m->lvl = calloc((size_t)v->max_len + 1, sizeof *m->lvl);
    m->lid = calloc((size_t)v->max_len + 1, sizeof *m->lid);
    m->mask = malloc((size_t)m->words * sizeof *m->mask);
    if (!m->lvl || !m->lid || !m->mask) {
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

/* Before a walk: a fresh table when it has grown past its mark, and the
 * current state interned as the walk's depth 0. */
static void prepare(inf_gram_matcher *m) {
    m->work = 0;
    if (m->n_st > FLUSH_STATES || m->st_ints > MAX_STATE_INTS / 4 * 3) flush(m);
    if (m->cur_id == NOT_KEPT) m->cur_id = intern(m, &m->cur);
    m->lid[0] = m->cur_id;
}

/* The state after d bytes of the walk. */
static const sset *walk_state(const inf_gram_matcher *m, int d) {
    int32_t id = m->lid[d];
    return id >= 0 ? &m->st[id] : d ? &m->lvl[d] : &m->cur;
}

/* Byte b after the walk's first d bytes: the state after d + 1 bytes (a
 * memoized transition where there is one). 1: alive, 0: b leaves the
 * language, -1: a bound was broken. */
static int step(inf_gram_matcher *m, int d, uint8_t b) {
    int32_t id = m->lid[d];
    if (id >= 0) {
        int32_t *t = &m->trans[(size_t)id * 256 + b];
        int32_t next = *t;
        if (next == T_UNKNOWN) {
            if (advance(m, &m->st[id], b, &m->lvl[d + 1])) return -1;
            next = m->lvl[d + 1].n_stacks ? intern(m, &m->lvl[d + 1]) : T_DEAD;
            /* intern may have moved the table */
            if (next != NOT_KEPT) m->trans[(size_t)id * 256 + b] = next;
        }
        m->lid[d + 1] = next;
        return next != T_DEAD;
    }
    if (advance(m, walk_state(m, d), b, &m->lvl[d + 1])) return -1;
    m->lid[d + 1] = NOT_KEPT;
    return m->lvl[d + 1].n_stacks > 0;
}

/* Walks token id's bytes from the current state: 1 (the state after them
 * at depth len), 0 (they leave the language), -1 (a bound was broken). */
static int walk_token(inf_gram_matcher *m, int32_t id) {
    const inf_gram_vocab *v = m->v;
    const uint8_t *s = (const uint8_t *)v->bytes + v->off[id];
    prepare(m);
    for (int d = 0; d < v->len[id]; d++) {
        int r = step(m, d, s[d]);
        if (r <= 0) return r;
    }
    return 1;
}

int inf_gram_matcher_allows(inf_gram_matcher *m, int32_t id) {
    const inf_gram_vocab *v = m->v;
    if (m->broken) return -1;
    if (m->ended || id < 0 || id >= v->n_vocab) return 0;
    if (v->kind[id] == INF_GRAM_TOK_EOG) return ss_can_end(&m->cur);
    if (v->kind[id] != INF_GRAM_TOK_TEXT) return 0;
    return walk_token(m, id);
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
    if (v->kind[id] != INF_GRAM_TOK_TEXT || walk_token(m, id) != 1) return -1;
    int d = v->len[id];
    int32_t next = m->lid[d];
    if (next >= 0) {
        if (ss_copy(m, &m->cur, &m->st[next])) return -1;
    } else {
        sset tmp = m->cur;
        m->cur = m->lvl[d];
        m->lvl[d] = tmp;
    }
    m->cur_id = next;
    return 0;
}

int inf_gram_matcher_accept_bytes(inf_gram_matcher *m, const char *s, size_t n) {
    if (m->broken || m->ended) return -1;
    const sset *st = &m->cur;
    m->work = 0;
    for (size_t i = 0; i < n; i++) {
        sset *next = (i & 1) ? &m->b : &m->a;
        if (advance(m, st, (uint8_t)s[i], next) || !next->n_stacks) return -1;
        st = next;
    }
    if (st != &m->cur) {
        sset *src = (sset *)st, tmp = m->cur;
        m->cur = *src;
        *src = tmp;
        m->cur_id = NOT_KEPT;
    }
    return 0;
}

const uint32_t *inf_gram_matcher_mask(inf_gram_matcher *m, int *n_allowed) {
    const inf_gram_vocab *v = m->v;
    *n_allowed = 0;
    if (m->broken) return NULL;
    memset(m->mask, 0, (size_t)m->words * sizeof *m->mask);
    if (m->ended) return m->mask;
    prepare(m);
    mask_entry *slot = &m->cache[0];
    for (int i = 0; i < N_CACHE && m->cur_id >= 0; i++) {
        mask_entry *e = &m->cache[i];
        if (e->used && e->state == m->cur_id) {
            e->used = ++m->tick;
            m->cached++;
            *n_allowed = e->n_allowed;
            return e->bits;
        }
        if (e->used < slot->used) slot = e;
    }
    /* Depth first over the trie: a node is alive when its byte continues
     * its parent's state; a dead node skips its subtree. */
    int count = 0;
    for (int32_t i = 1; i < v->n_nodes;) {
        int d = v->depth[i] - 1;
        int32_t from = m->lid[d], next;
        if (from >= 0 && (next = m->trans[(size_t)from * 256 + v->nbyte[i]]) != T_UNKNOWN) {
            m->lid[d + 1] = next; /* memoized: the common case */
        } else {
            int r = step(m, d, v->nbyte[i]);
            if (r < 0) return NULL;
            next = r ? m->lid[d + 1] : T_DEAD; /* alive: an id or NOT_KEPT */
        }
        if (next == T_DEAD) {
            i = v->skip[i];
            continue;
        }
        for (int32_t k = v->tok_at[i]; k < v->tok_at[i + 1]; k++) {
            int32_t t = v->toks[k];
            m->mask[t >> 5] |= 1u << (t & 31);
        }
        count += v->tok_at[i + 1] - v->tok_at[i];
        i++;
    }
    if (ss_can_end(&m->cur))
        for (int i = 0; i < v->n_eog; i++) {
            int32_t t = v->eog[i];
            m->mask[t >> 5] |= 1u << (t & 31);
            count++;
        }
    m->walks++;
    *n_allowed = count;
    /* Keep it for the next time this state comes (the cache is optional). */
    if (m->cur_id < 0) return m->mask;
    if (!slot->bits && !(slot->bits = malloc((size_t)m->words * sizeof *slot->bits)))
        return m->mask;
    memcpy(slot->bits, m->mask, (size_t)m->words * sizeof *slot->bits);
    slot->state = m->cur_id;
    slot->n_allowed = count;
    slot->used = ++m->tick;
    return slot->bits;
}
