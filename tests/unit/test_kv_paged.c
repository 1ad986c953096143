/* The paged KV cache (block pool, block tables, copy-on-write) and the radix
 * prefix cache (insert, longest-prefix lookup, edge split, LRU eviction,
 * sharing between concurrent sequences). Every block row is stamped with the
 * token and position written there, so a test reading through a table sees
 * exactly which row it got; after every scenario every pool reference must
 * be accounted for by a sequence or the tree, and all must return to zero. */
#include <stdlib.h>

#include "harness.h"
#include "kv/kv_paged.h"
#include "kv/kv_radix.h"

#define BS 4
#define LAYERS 2
#define DIM 3

/* The value stamped at (layer, token, pos), K and V differ. */
static float stamp(int l, int32_t tok, int pos, int kv) {
    return (float)(l * 1000000 + tok * 1000 + pos) + (kv ? 0.5f : 0.0f);
}

/* "Runs the model": writes rows for tokens[from..to) of the sequence. */
static void write_rows(inf_kv_seq *s, const int32_t *tokens, int from, int to) {
    inf_kv_view v[LAYERS];
    inf_kv_seq_views(s, v);
    for (int l = 0; l < LAYERS; l++)
        for (int j = from; j < to; j++)
            for (int d = 0; d < DIM; d++) {
                inf_kv_k_row(&v[l], j)[d] = stamp(l, tokens[j], j, 0);
                inf_kv_v_row(&v[l], j)[d] = stamp(l, tokens[j], j, 1);
            }
    if (to > s->n_tokens) s->n_tokens = to;
}

/* Appends tokens[n_tokens..n) the way the engine does: reserve, then write. */
static int extend(inf_kv_seq *s, const int32_t *tokens, int n) {
    inf_err err;
    if (inf_kv_seq_reserve(s, n - s->n_tokens, &err)) return -1;
    write_rows(s, tokens, s->n_tokens, n);
    return 0;
}

/* Every row of the sequence holds what tokens[] says was written there. */
static bool rows_ok(const inf_kv_seq *s, const int32_t *tokens) {
    inf_kv_view v[LAYERS];
    inf_kv_seq_views(s, v);
    for (int l = 0; l < LAYERS; l++)
        for (int j = 0; j < s->n_tokens; j++)
            if (inf_kv_k_row(&v[l], j)[0] != stamp(l, tokens[j], j, 0) ||
                inf_kv_v_row(&v[l], j)[DIM - 1] != stamp(l, tokens[j], j, 1))
                return false;
    return true;
}

/* Pool references == sequence references + tree references, per block. */
static bool refs_balanced(const inf_kv_pool *p, inf_kv_seq *const *seqs, int n_seqs,
                          const kv_radix *r) {
    int32_t *counts = calloc((size_t)p->n_blocks, sizeof *counts);
    for (int i = 0; i < n_seqs; i++)
        for (int b = 0; b < seqs[i]->max_blocks && seqs[i]->table[b] >= 0; b++)
            counts[seqs[i]->table[b]]++;
    if (r) kv_radix_count_refs(r, counts);
    bool ok = true;
    int free_blocks = 0;
    for (int b = 0; b < p->n_blocks; b++) {
        if (counts[b] != p->refs[b]) ok = false;
        free_blocks += p->refs[b] == 0;
    }
    free(counts);
    return ok && free_blocks == p->n_free;
}

static void test_pool(void) {
    inf_kv_pool *p;
    inf_err err;
    CHECK_INT(inf_kv_pool_create(&p, LAYERS, DIM, 3, 8, &err), -1); /* not a power of two */
    CHECK_INT(inf_kv_pool_create(&p, LAYERS, DIM, BS, 5, &err), 0);
    int32_t got[5];
    for (int i = 0; i < 5; i++) got[i] = inf_kv_pool_alloc(p);
    CHECK_INT(got[0], 0);
    CHECK_INT(got[4], 4);
    CHECK_INT(inf_kv_pool_alloc(p), -1); /* exhausted */
    inf_kv_pool_ref(p, got[2]);
    inf_kv_pool_unref(p, got[2]);
    CHECK_INT(p->n_free, 0);
    inf_kv_pool_unref(p, got[2]);
    CHECK_INT(p->n_free, 1);
    CHECK_INT(inf_kv_pool_alloc(p), 2); /* O(1) reuse of the freed block */
    for (int i = 0; i < 5; i++) inf_kv_pool_unref(p, got[i]);
    CHECK_INT(p->n_free, 5);
    inf_kv_pool_free(p);
}

static void test_seq_and_cow(void) {
    inf_kv_pool *p;
    inf_err err;
    CHECK_INT(inf_kv_pool_create(&p, LAYERS, DIM, BS, 16, &err), 0);
    int32_t a_tok[20], b_tok[20];
    for (int i = 0; i < 20; i++) a_tok[i] = b_tok[i] = 10 + i;
    for (int i = 6; i < 20; i++) b_tok[i] = 50 + i; /* b shares a's first 6 tokens */

    inf_kv_seq a, b;
    inf_kv_seq_init(&a, p, 20, &err);
    inf_kv_seq_init(&b, p, 20, &err);
    /* Append one token at a time across block boundaries, then in a chunk. */
    for (int n = 1; n <= 9; n++) CHECK_INT(extend(&a, a_tok, n), 0);
    CHECK_INT(extend(&a, a_tok, 14), 0);
    CHECK(rows_ok(&a, a_tok));
    CHECK_INT(16 - p->n_free, 4); /* 14 positions = 4 blocks of 4 */

    /* b adopts a's first 6 positions by reference: blocks 0 and 1 (1 half full). */
    inf_kv_seq_adopt(&b, a.table, 6);
    CHECK_INT(b.table[0], a.table[0]);
    CHECK_INT(p->refs[a.table[1]], 2);
    int free_before = p->n_free;
    CHECK_INT(extend(&b, b_tok, 7), 0); /* writes position 6: copy-on-write of block 1 */
    CHECK(b.table[1] != a.table[1]);
    CHECK_INT(b.table[0], a.table[0]); /* the full block stays shared */
    CHECK_INT(p->n_free, free_before - 1);
    CHECK_INT(p->refs[a.table[1]], 1);
    CHECK(rows_ok(&b, b_tok));
    CHECK(rows_ok(&a, a_tok)); /* a is untouched by b's write */
    CHECK_INT(extend(&b, b_tok, 20), 0);
    CHECK(rows_ok(&b, b_tok));
    inf_kv_seq *seqs[2] = {&a, &b};
    CHECK(refs_balanced(p, seqs, 2, NULL));

    /* Truncate gives back whole blocks past the kept positions. */
    inf_kv_seq_truncate(&b, 5);
    CHECK_INT(b.n_tokens, 5);
    CHECK_INT(b.table[2], -1);
    CHECK(rows_ok(&b, b_tok));
    CHECK(refs_balanced(p, seqs, 2, NULL));
    /* The context bound and pool exhaustion are errors, not corruption. */
    CHECK_INT(inf_kv_seq_reserve(&b, 16, &err), -1);
    inf_kv_seq c;
    inf_kv_seq_init(&c, p, 64, &err);
    int32_t big[64];
    for (int i = 0; i < 64; i++) big[i] = i;
    CHECK_INT(inf_kv_seq_reserve(&c, 64, &err), -1);
    CHECK(strstr(err.msg, "exhausted") != NULL);
    CHECK_INT(extend(&c, big, 64), -1);
    CHECK_INT(c.n_tokens, 0);
    inf_kv_seq_free(&a);
    inf_kv_seq_free(&b);
    inf_kv_seq_free(&c);
    CHECK_INT(p->n_free, 16);
    inf_kv_pool_free(p);
}

/* A request's life against the tree: look up, adopt, extend, donate, release. */
static int serve(kv_radix *r, inf_kv_pool *p, const int32_t *tok, int n, int *reused) {
    inf_kv_seq s;
    inf_err err;
    inf_kv_seq_init(&s, p, 256, &err);
    int32_t blocks[64];
    int m = kv_radix_match(r, tok, n, blocks);
    if (m >= n) m = n - 1;
    inf_kv_seq_adopt(&s, blocks, m);
    *reused = m;
    int rc = 0;
    if (!rows_ok(&s, tok)) rc = -2; /* the cached rows must be exactly this prefix's */
    if (inf_kv_seq_reserve(&s, n - s.n_tokens, &err)) {
        kv_radix_evict(r, inf_kv_blocks_for(n, BS) + 1);
        if (inf_kv_seq_reserve(&s, n - s.n_tokens, &err)) rc = -1;
    }
    if (rc == 0) {
        write_rows(&s, tok, s.n_tokens, n);
        if (!rows_ok(&s, tok)) rc = -3;
        kv_radix_insert(r, tok, n, s.table);
    }
    inf_kv_seq_free(&s);
    return rc;
}

static void test_radix(void) {
    inf_kv_pool *p;
    inf_err err;
    CHECK_INT(inf_kv_pool_create(&p, LAYERS, DIM, BS, 64, &err), 0);
    kv_radix *r = kv_radix_create(p);
    int32_t sys[10], a[16], b[16], c[16];
    for (int i = 0; i < 10; i++) sys[i] = 100 + i;
    for (int i = 0; i < 16; i++) {
        a[i] = b[i] = c[i] = i < 10 ? sys[i] : 0;
        if (i >= 10) a[i] = 200 + i, b[i] = 300 + i, c[i] = 400 + i;
    }
    int reused;
    CHECK_INT(serve(r, p, a, 16, &reused), 0);
    CHECK_INT(reused, 0);
    kv_radix_stats st;
    kv_radix_get_stats(r, &st);
    CHECK_INT(st.nodes, 1);
    CHECK_INT(st.tokens, 16);

    /* b shares the 10-token system prompt: the edge splits at 10 (mid-block). */
    CHECK_INT(serve(r, p, b, 16, &reused), 0);
    CHECK_INT(reused, 10);
    kv_radix_get_stats(r, &st);
    CHECK_INT(st.nodes, 3);
    CHECK_INT(st.tokens, 22);
    /* Lookups: full hit, partial hit inside an edge, miss. */
    int32_t blocks[16];
    CHECK_INT(kv_radix_match(r, a, 16, blocks), 16);
    CHECK_INT(kv_radix_match(r, c, 16, blocks), 10);
    int32_t miss[3] = {7, 8, 9};
    CHECK_INT(kv_radix_match(r, miss, 3, blocks), 0);
    int32_t shorter[12];
    memcpy(shorter, b, sizeof shorter);
    CHECK_INT(kv_radix_match(r, shorter, 12, blocks), 12);
    inf_kv_seq *none[1] = {NULL};
    CHECK(refs_balanced(p, none, 0, r));

    /* Repeating a request reuses all but its last token. */
    CHECK_INT(serve(r, p, a, 16, &reused), 0);
    CHECK_INT(reused, 15);

    /* Two sequences running at once on one shared prefix, each extending it. */
    inf_kv_seq s1, s2;
    inf_kv_seq_init(&s1, p, 64, &err);
    inf_kv_seq_init(&s2, p, 64, &err);
    int m1 = kv_radix_match(r, c, 16, blocks);
    inf_kv_seq_adopt(&s1, blocks, m1);
    int m2 = kv_radix_match(r, c, 16, blocks);
    inf_kv_seq_adopt(&s2, blocks, m2);
    int32_t c2[16];
    memcpy(c2, c, sizeof c2);
    c2[12] = 999;
    CHECK_INT(extend(&s1, c, 16), 0);
    CHECK_INT(extend(&s2, c2, 16), 0);
    CHECK(rows_ok(&s1, c));
    CHECK(rows_ok(&s2, c2));
    inf_kv_seq *two[2] = {&s1, &s2};
    CHECK(refs_balanced(p, two, 2, r));

    /* Eviction under pressure never takes blocks a running sequence holds. */
    kv_radix_evict(r, p->n_blocks);
    kv_radix_get_stats(r, &st);
    CHECK_INT(st.nodes, 0);
    CHECK(rows_ok(&s1, c));
    CHECK(rows_ok(&s2, c2));
    CHECK(refs_balanced(p, two, 2, r));
    inf_kv_seq_free(&s1);
    inf_kv_seq_free(&s2);
    CHECK_INT(p->n_free, p->n_blocks); /* every reference back to zero */
    kv_radix_free(r);
    inf_kv_pool_free(p);
}

static void test_lru_pressure(void) {
    /* 12 blocks; requests of 8 tokens (2 blocks) with distinct prefixes: the
     * tree fills the pool, and new requests evict the least recently used. */
    inf_kv_pool *p;
    inf_err err;
    CHECK_INT(inf_kv_pool_create(&p, LAYERS, DIM, BS, 12, &err), 0);
    kv_radix *r = kv_radix_create(p);
    int32_t req[20][8];
    int reused;
    for (int q = 0; q < 20; q++) {
        for (int i = 0; i < 8; i++) req[q][i] = q * 100 + i;
        CHECK_INT(serve(r, p, req[q], 8, &reused), 0);
        /* Touch request 0 often: it must survive as most recently used. */
        if (q >= 1) {
            CHECK_INT(serve(r, p, req[0], 8, &reused), 0);
            CHECK_INT(reused, 7);
        }
    }
    int32_t blocks[4];
    CHECK_INT(kv_radix_match(r, req[0], 8, blocks), 8);
    CHECK_INT(kv_radix_match(r, req[1], 8, blocks), 0); /* long evicted */
    kv_radix_stats st;
    kv_radix_get_stats(r, &st);
    CHECK(st.evictions > 0);
    inf_kv_seq *none[1] = {NULL};
    CHECK(refs_balanced(p, none, 0, r));
    kv_radix_free(r);
    CHECK_INT(p->n_free, 12);
    inf_kv_pool_free(p);
}

/* Random requests over a few shared prefixes: the rows read through every
 * adopted table are always the right ones, and the books always balance. */
static void test_random(void) {
    inf_kv_pool *p;
    inf_err err;
    CHECK_INT(inf_kv_pool_create(&p, LAYERS, DIM, BS, 40, &err), 0);
    kv_radix *r = kv_radix_create(p);
    unsigned seed = 12345;
    int bad = 0, total_reused = 0;
    for (int q = 0; q < 400; q++) {
        int32_t tok[40];
        seed = seed * 1103515245u + 12345u;
        int prefix = (int)(seed >> 16) % 4, n = 5 + (int)(seed >> 8) % 30;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            tok[i] = i < 3 + prefix * 4 ? prefix * 10 + (i % 3) : (int32_t)((seed >> 16) % 3);
        }
        int reused;
        int rc = serve(r, p, tok, n, &reused);
        if (rc != 0 && rc != -1) bad++;
        total_reused += reused;
        inf_kv_seq *none[1] = {NULL};
        if (!refs_balanced(p, none, 0, r)) bad++;
    }
    CHECK_INT(bad, 0);
    CHECK(total_reused > 0);
    kv_radix_free(r);
    CHECK_INT(p->n_free, 40);
    inf_kv_pool_free(p);
}

int main(void) {
    test_pool();
    test_seq_and_cow();
    test_radix();
    test_lru_pressure();
    test_random();
    return th_report();
}
