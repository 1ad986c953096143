/* Byte-pair merging of one pre-token.
 *
 * The word starts as one symbol per byte (the byte's single-byte token). All
 * adjacent pairs that have a merge go into a min-heap keyed by (rank,
 * position); the lowest rank merges first, the leftmost on ties, which is
 * the order Hugging Face's BPE uses. A merged symbol pushes its new pairs
 * with its neighbours; heap entries made stale by earlier merges are skipped
 * when popped. O(n log n) in the word length, so a 1 MB run of letters is no
 * worse than many short words. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

int tok_ids_push(tok_ids *a, const int32_t *ids, size_t n) {
    if (a->n + n > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        while (cap < a->n + n)
            cap *= 2;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    memcpy(a->v + a->n, ids, n * sizeof *ids);
    a->n += n;
    return 0;
}

typedef struct bpe_sym {
    int32_t id;         /* token id; -1 once merged into its left neighbour */
    int32_t prev, next; /* neighbours' positions, -1 at the ends */
} bpe_sym;

typedef struct bpe_cand {
    int32_t rank, pos;   /* heap order: rank, then position */
    int32_t left, right; /* the ids the pair had when pushed */
} bpe_cand;

static bool cand_less(const bpe_cand *a, const bpe_cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(bpe_cand *h, int *n, bpe_cand c) {
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, int *n) {
    bpe_cand top = h[0], last = h[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
        if (!cand_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static void push_pair(const inf_tokenizer *t, const bpe_sym *s, int32_t pos, bpe_cand *h, int *nh) {
    if (pos < 0 || s[pos].next < 0) return;
    int32_t nx = s[pos].next;
    const tok_pair *p = tok_pair_find(t, s[pos].id, s[nx].id);
    if (p) heap_push(h, nh, (bpe_cand){p->rank, pos, s[pos].id, s[nx].id});
}

int tok_bpe_word(const inf_tokenizer *t, const unsigned char *w, size_t n, tok_ids *out) {
    if (n == 0) return 0;
    if (n == 1) return tok_ids_push(out, &t->byte_id[w[0]], 1);
    if (n > INT32_MAX / 4) return -1;
    /* Each merge pushes at most two pairs: the heap never exceeds 3n. */
    enum { SMALL = 64 };
    bpe_sym sym_small[SMALL];
    bpe_cand heap_small[3 * SMALL];
    int32_t ids_small[SMALL];
    bpe_sym *s = sym_small;
    bpe_cand *h = heap_small;
    int32_t *ids = ids_small;
    if (n > SMALL) {
        s = malloc(n * sizeof *s);
        h = malloc(3 * n * sizeof *h);
        ids = malloc(n * sizeof *ids);
        if (!s || !h || !ids) {
            free(s);
            free(h);
            free(ids);
            return -1;
        }
    }
    int32_t len = (int32_t)n;
    for (int32_t i = 0; i < len; i++)
        s[i] = (bpe_sym){t->byte_id[w[i]], i - 1, i + 1 < len ? i + 1 : -1};
    int nh = 0;
    for (int32_t i = 0; i + 1 < len; i++)
        push_pair(t, s, i, h, &nh);
    while (nh > 0) {
        bpe_cand c = heap_pop(h, &nh);
        int32_t nx = s[c.pos].next;
        if (s[c.pos].id != c.left || nx < 0 || s[nx].id != c.right) continue; /* stale */
        const tok_pair *p = tok_pair_find(t, c.left, c.right);
        s[c.pos].id = p->merged;
        s[c.pos].next = s[nx].next;
        if (s[nx].next >= 0) s[s[nx].next].prev = c.pos;
        s[nx].id = -1;
        push_pair(t, s, s[c.pos].prev, h, &nh);
        push_pair(t, s, c.pos, h, &nh);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = s[i].next)
        ids[k++] = s[i].id;
    int rc = tok_ids_push(out, ids, k);
    if (n > SMALL) {
        free(s);
        free(h);
        free(ids);
    }
    return rc;
}
