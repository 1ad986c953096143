/* The radix prefix cache over the paged pool: insert, longest-prefix lookup,
 * edge splits, LRU eviction under pressure, requests sharing a prefix while
 * interleaved, and refcounts back to zero when everything ends.
 *
 * A request's row for position j holds a value derived from the whole token
 * prefix 0..j (as real K/V rows depend on everything before them), so a
 * reused row is right only if it came from the same prefix. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kv_elem.h"
#include "kv/radix.h"

enum { NL = 2, KVD = 4, BS = 4 };

static uint32_t prefix_hash(const int32_t *t, int j) {
    uint32_t h = 2166136261u;
    for (int i = 0; i <= j; i++)
        h = (h ^ (uint32_t)t[i]) * 16777619u;
    return h;
}

static float val(uint32_t h, int l, int is_v, int d) {
    return (float)((h + (uint32_t)(l * 97 + is_v * 13 + d)) % 65521u);
}

static void write_rows(inf_kv_seq *s, const int32_t *t, int from, int to) {
    inf_kv_view v[NL];
    inf_kv_seq_views(s, v);
    for (int j = from; j < to; j++) {
        uint32_t h = prefix_hash(t, j);
        for (int l = 0; l < NL; l++)
            for (int d = 0; d < KVD; d++) {
                *kv_k_elem(&v[l], j, d) = val(h, l, 0, d);
                *kv_v_elem(&v[l], j, d) = val(h, l, 1, d);
            }
    }
}

static int first_bad_row(const inf_kv_seq *s, const int32_t *t, int n) {
    inf_kv_view v[NL];
    inf_kv_seq_views(s, v);
    for (int j = 0; j < n; j++) {
        uint32_t h = prefix_hash(t, j);
        for (int l = 0; l < NL; l++)
            for (int d = 0; d < KVD; d++)
                if (*kv_k_elem(&v[l], j, d) != val(h, l, 0, d) ||
                    *kv_v_elem(&v[l], j, d) != val(h, l, 1, d))
                    return j;
    }
    return -1;
}

/* A request's lifetime: attach the cached prefix (all but the last token),
 * "prefill" the rest, check every row. Returns the sequence (still running)
 * and the tokens reused in *reused, or NULL when the pool is exhausted. */
static inf_kv_seq *start(inf_radix *r, const int32_t *t, int n, int *reused, inf_err *e) {
    inf_kv_seq *s;
    if (inf_kv_seq_create(&s, r->pool, 256, e)) return NULL;
    *reused = inf_radix_attach(r, s, t, n - 1, e);
    if (*reused < 0 || inf_kv_seq_reserve(s, n - s->n_past, e)) {
        inf_kv_seq_free(s);
        return NULL;
    }
    write_rows(s, t, s->n_past, n);
    s->n_past = n;
    return s;
}

/* Decode: one more token at the end. */
static int step(inf_kv_seq *s, int32_t *t, int32_t tok, inf_err *e) {
    if (inf_kv_seq_reserve(s, 1, e)) return -1;
    t[s->n_past] = tok;
    write_rows(s, t, s->n_past, s->n_past + 1);
    s->n_past++;
    return 0;
}

/* Ends a request: donate its rows, let go of its blocks. */
static void finish(inf_radix *r, inf_kv_seq *s, const int32_t *t) {
    inf_err e;
    CHECK(inf_radix_insert_seq(r, s, t, &e) == 0);
    inf_kv_seq_free(s);
}

static int all_free(const inf_kv_pool *p) {
    for (int b = 0; b < p->n_blocks; b++)
        if (p->refcount[b]) return 0;
    inf_err e;
    return p->n_free == p->n_blocks && inf_kv_pool_audit(p, &e) == 0;
}

/* The end of a test: the pool consistent while the tree still holds blocks,
 * then every block back once the tree is gone. */
static void end_tree(inf_radix *r, inf_kv_pool *p) {
    inf_err e;
    CHECK(inf_kv_pool_audit(p, &e) == 0);
    inf_radix_free(r);
    CHECK(all_free(p));
    inf_kv_pool_free(p);
}

static void seqn(int32_t *t, int n, int base) {
    for (int i = 0; i < n; i++)
        t[i] = base + i;
}

static void test_insert_lookup_split(void) {
    inf_kv_pool *p;
    inf_radix *r;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, BS, 32, &e) == 0);
    CHECK(inf_radix_create(&r, p, &e) == 0);

    int32_t a[16], b[16], c[16];
    seqn(a, 10, 100);            /* 100..109 */
    memcpy(b, a, 6 * sizeof *b); /* shares 6 tokens with a: splits inside block 1 */
    seqn(b + 6, 5, 500);
    memcpy(c, a, 8 * sizeof *c); /* shares 8: splits at a block boundary */
    seqn(c + 8, 3, 900);

    int got;
    inf_kv_seq *s = start(r, a, 10, &got, &e);
    CHECK(s && got == 0);
    finish(r, s, a);
    CHECK_INT(r->stats.n_nodes, 1);
    CHECK_INT(r->stats.n_cached_tokens, 10);
    CHECK_INT(r->stats.n_blocks_held, 3);
    CHECK_INT(inf_kv_pool_used(p), 3); /* the tree alone holds a's blocks */

    /* Exact, shorter and diverging lookups. */
    int32_t out[8];
    CHECK_INT(inf_radix_match(r, a, 10, out), 10);
    for (int i = 0; i < 3; i++)
        kv_block_unref(p, out[i]);
    CHECK_INT(inf_radix_match(r, a, 5, out), 5);
    for (int i = 0; i < 2; i++)
        kv_block_unref(p, out[i]);
    CHECK_INT(inf_radix_match(r, b, 11, out), 6);
    for (int i = 0; i < 2; i++)
        kv_block_unref(p, out[i]);
    int32_t none[2] = {7, 100};
    CHECK_INT(inf_radix_match(r, none, 2, out), 0);
    CHECK_INT(inf_radix_match(r, a, 0, out), 0);

    /* b reuses a's first 6 tokens, copies the shared half block, and its
     * donation splits a's edge after 6 tokens. */
    s = start(r, b, 11, &got, &e);
    CHECK(s && got == 6);
    CHECK_INT(first_bad_row(s, b, 11), -1);
    finish(r, s, b);
    CHECK_INT(r->stats.n_nodes, 3);
    CHECK_INT(r->stats.n_cached_tokens, 15);

    /* c splits a's lower edge at 8 (a block boundary). */
    s = start(r, c, 11, &got, &e);
    CHECK(s && got == 8);
    CHECK_INT(first_bad_row(s, c, 11), -1);
    finish(r, s, c);
    CHECK_INT(r->stats.n_nodes, 5);

    /* Every path gives back its own rows, whole or cut short. */
    const int32_t *all[3] = {a, b, c};
    int lens[3] = {10, 11, 11};
    for (int k = 0; k < 3; k++)
        for (int n = 1; n <= lens[k]; n++) {
            inf_kv_seq *q;
            CHECK(inf_kv_seq_create(&q, p, 64, &e) == 0);
            CHECK_INT(inf_radix_attach(r, q, all[k], n, &e), n);
            CHECK_MSG(first_bad_row(q, all[k], n) == -1, "path %d, %d tokens", k, n);
            inf_kv_seq_free(q);
        }

    /* Inserting what is cached changes nothing; so does a prefix of it. */
    int nodes = r->stats.n_nodes, used = inf_kv_pool_used(p);
    s = start(r, a, 10, &got, &e);
    CHECK(s && got == 9);
    finish(r, s, a);
    int32_t blocks[4];
    CHECK_INT(inf_radix_match(r, a, 7, blocks), 7);
    CHECK(inf_radix_insert(r, a, 7, blocks, &e) == 0);
    for (int i = 0; i < 2; i++)
        kv_block_unref(p, blocks[i]);
    CHECK_INT(r->stats.n_nodes, nodes);
    CHECK_INT(inf_kv_pool_used(p), used);

    CHECK(r->stats.n_hits > 0 && r->stats.tokens_reused > 0);
    end_tree(r, p);
}

/* Requests sharing a system prompt run interleaved: each donates while the
 * others keep decoding, and every row stays right. */
static void test_interleaved_sharing(void) {
    inf_kv_pool *p;
    inf_radix *r;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, BS, 64, &e) == 0);
    CHECK(inf_radix_create(&r, p, &e) == 0);
    enum { NREQ = 5, SYS = 13 };
    int32_t t[NREQ][128];
    inf_kv_seq *s[NREQ] = {0};
    int len[NREQ];
    for (int k = 0; k < NREQ; k++) {
        seqn(t[k], SYS, 1);                      /* shared system prompt */
        seqn(t[k] + SYS, 3 + k, 1000 * (k + 1)); /* each request's own question */
        len[k] = SYS + 3 + k;
    }
    int reused_total = 0;
    for (int round = 0; round < 12; round++) {
        for (int k = 0; k < NREQ; k++) {
            if (round == k) { /* request k arrives */
                int got;
                s[k] = start(r, t[k], len[k], &got, &e);
                CHECK_MSG(s[k] != NULL, "request %d: %s", k, e.msg);
                if (k > 0) CHECK_MSG(got >= SYS, "request %d reused %d", k, got);
                reused_total += got;
                /* Donate right away (the server does this after prefill). */
                CHECK(inf_radix_insert_seq(r, s[k], t[k], &e) == 0);
            } else if (s[k] && round > k) {
                CHECK(step(s[k], t[k], 7000 + round * 10 + k, &e) == 0);
            }
            if (s[k] && round == k + 6) { /* request k ends */
                CHECK_MSG(first_bad_row(s[k], t[k], s[k]->n_past) == -1, "request %d", k);
                finish(r, s[k], t[k]);
                s[k] = NULL;
            }
        }
        for (int k = 0; k < NREQ; k++)
            if (s[k]) CHECK_MSG(first_bad_row(s[k], t[k], s[k]->n_past) == -1, "req %d", k);
    }
    CHECK(reused_total >= (NREQ - 1) * SYS);
    CHECK_INT(r->stats.tokens_reused, reused_total);
    CHECK(p->n_cow > 0); /* the system prompt ends inside a block */
    for (int k = 0; k < NREQ; k++)
        CHECK(s[k] == NULL);
    /* Only the tree holds blocks now, each exactly once per node reference. */
    for (int b = 0; b < p->n_blocks; b++)
        CHECK(p->refcount[b] == r->tree_refs[b]);
    inf_radix_clear(r);
    CHECK_INT(r->stats.n_nodes, 0);
    end_tree(r, p);
}

/* A small pool fills with cached entries: new requests evict the least
 * recently used ones, never the blocks of a running request; when nothing
 * can be evicted the request gets a clear error. */
static void test_eviction(void) {
    inf_kv_pool *p;
    inf_radix *r;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, BS, 12, &e) == 0);
    CHECK(inf_radix_create(&r, p, &e) == 0);
    int32_t t[8][16];
    for (int k = 0; k < 8; k++)
        seqn(t[k], 8, 100 * (k + 1)); /* 2 blocks each */
    int got;
    for (int k = 0; k < 6; k++)
        finish(r, start(r, t[k], 8, &got, &e), t[k]);
    CHECK_INT(p->n_free, 0);
    /* Touch entry 0 so that entry 1 is now the oldest. */
    int32_t out[4];
    CHECK_INT(inf_radix_match(r, t[0], 8, out), 8);
    for (int i = 0; i < 2; i++)
        kv_block_unref(p, out[i]);

    inf_kv_seq *run = start(r, t[6], 8, &got, &e);
    CHECK_MSG(run != NULL, "%s", e.msg);
    CHECK_INT(r->stats.n_evicted_nodes, 1);
    inf_kv_seq *q;
    CHECK(inf_kv_seq_create(&q, p, 64, &e) == 0);
    CHECK_INT(inf_radix_attach(r, q, t[1], 8, &e), 0); /* evicted */
    inf_kv_seq_free(q);
    CHECK(inf_kv_seq_create(&q, p, 64, &e) == 0);
    CHECK_INT(inf_radix_attach(r, q, t[0], 8, &e), 8); /* kept: recently used */
    CHECK_INT(first_bad_row(q, t[0], 8), -1);

    /* q now holds entry 0 like a running request: pressure evicts the
     * others but not entry 0. */
    inf_kv_seq *big = start(r, t[7], 8, &got, &e);
    CHECK(big != NULL);
    for (int i = 0; i < 8 && big; i++)
        if (step(big, t[7], 5000 + i, &e)) break;
    CHECK_INT(big->n_past, 16);
    CHECK_INT(first_bad_row(q, t[0], 8), -1);
    CHECK_INT(first_bad_row(run, t[6], 8), -1);
    /* Entries 2 and 3 (the oldest) made room; 0, 4, 5 stay. */
    CHECK_INT(r->stats.n_evicted_nodes, 3);
    CHECK_INT(r->stats.n_nodes, 3);
    CHECK_INT(p->n_free, 0);
    /* A request larger than all that can be evicted: 4 and 5 go, entry 0
     * (held by q) stays, and the request is refused. */
    int32_t huge[40];
    seqn(huge, 40, 20000);
    inf_kv_seq *h = start(r, huge, 40, &got, &e);
    CHECK(h == NULL && strstr(e.msg, "exhausted"));
    CHECK_INT(first_bad_row(q, t[0], 8), -1);
    CHECK_INT(first_bad_row(run, t[6], 8), -1);
    CHECK_INT(first_bad_row(big, t[7], 16), -1);
    CHECK_INT(r->stats.n_evicted_nodes, 5);
    CHECK_INT(r->stats.n_nodes, 1);
    CHECK_INT(p->n_free, 4);

    inf_kv_seq_free(q);
    finish(r, run, t[6]);
    finish(r, big, t[7]);
    end_tree(r, p);
}

/* A request that attached a prefix ending inside a cached leaf's first block
 * reads that one block until its first write copies it. The copy needs a
 * block; when the pool is full, the leaf's other blocks (the tree's alone)
 * must make room, though the leaf as a whole cannot go. */
static void test_pinned_leaf_tail(void) {
    inf_kv_pool *p;
    inf_radix *r;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, BS, 6, &e) == 0);
    CHECK(inf_radix_create(&r, p, &e) == 0);
    int32_t a[16], b[8], c[16];
    seqn(a, 16, 100); /* 4 blocks, cached */
    int got;
    finish(r, start(r, a, 16, &got, &e), a);
    CHECK_INT(r->stats.n_blocks_held, 4);
    CHECK_INT(p->n_free, 2);
    /* b shares a's first 3 tokens: it attaches 2 (all but its last) in a's block 0 */
    memcpy(b, a, 3 * sizeof *b);
    inf_kv_seq *sb;
    CHECK(inf_kv_seq_create(&sb, p, 64, &e) == 0);
    CHECK_INT(inf_radix_attach(r, sb, b, 2, &e), 2);
    /* another request takes the 2 free blocks */
    seqn(c, 8, 900);
    inf_kv_seq *sc = start(r, c, 8, &got, &e);
    CHECK_MSG(sc != NULL, "%s", e.msg);
    CHECK_INT(p->n_free, 0);
    /* b's prefill copies a's block 0: the room comes from a's blocks 1..3 */
    CHECK_MSG(inf_kv_seq_reserve(sb, 1, &e) == 0, "%s", e.msg);
    write_rows(sb, b, 2, 3);
    sb->n_past = 3;
    CHECK_INT(first_bad_row(sb, b, 3), -1);
    CHECK_INT(first_bad_row(sc, c, 8), -1);
    CHECK_INT(r->stats.n_evicted_blocks, 3);
    CHECK_INT(r->stats.n_blocks_held, 1);
    CHECK_INT(r->stats.n_cached_tokens, BS);
    CHECK_INT(p->n_free, 2);
    /* the tree still serves a's first block, and only that */
    inf_kv_seq *q;
    CHECK(inf_kv_seq_create(&q, p, 64, &e) == 0);
    CHECK_INT(inf_radix_attach(r, q, a, 15, &e), BS);
    CHECK_INT(first_bad_row(q, a, BS), -1);
    inf_kv_seq_free(q);
    inf_kv_seq_free(sb);
    inf_kv_seq_free(sc);
    end_tree(r, p);
}

/* A node whose edge ends inside a block keeps a copy of that block while its
 * child goes on in another copy (two requests that parted there). When a
 * running request reads the child's copy, the node's copy, which no request
 * reads, must give way: the node reads its rows from the child's copy. */
static void test_shared_straddling_block(void) {
    inf_kv_pool *p;
    inf_radix *r;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, BS, 8, &e) == 0);
    CHECK(inf_radix_create(&r, p, &e) == 0);
    int32_t a[8], b[16], d[16];
    seqn(a, 6, 100);
    memcpy(b, a, 2 * sizeof *b); /* b parts from a inside block 0 */
    seqn(b + 2, 8, 700);
    int got;
    finish(r, start(r, a, 6, &got, &e), a);
    finish(r, start(r, b, 6, &got, &e), b);
    CHECK_INT(r->stats.n_blocks_held, 4); /* a's 2 blocks, b's 2 */
    seqn(d, 16, 900);
    inf_kv_seq *sd = start(r, d, 16, &got, &e); /* the other 4 */
    CHECK_MSG(sd != NULL, "%s", e.msg);
    CHECK_INT(p->n_free, 0);
    /* c = b's 6 cached tokens and 4 more: it reads b's 2 blocks, then needs 2 (a copy of b's
       block 1 and block 2): a's tail gives one, a's copy of block 0 the other */
    inf_kv_seq *sc = start(r, b, 10, &got, &e);
    CHECK_MSG(sc != NULL, "%s", e.msg);
    CHECK_INT(got, 6);
    CHECK_INT(first_bad_row(sc, b, 10), -1);
    CHECK_INT(first_bad_row(sd, d, 16), -1);
    CHECK_INT(p->n_free, 0);
    /* a's first 2 tokens are still cached, read from b's block 0 */
    inf_kv_seq_free(sd);
    inf_kv_seq *q;
    CHECK(inf_kv_seq_create(&q, p, 64, &e) == 0);
    CHECK_INT(inf_radix_attach(r, q, a, 5, &e), 2);
    CHECK_INT(first_bad_row(q, a, 2), -1);
    inf_kv_seq_free(q);
    inf_kv_seq_free(sc);
    end_tree(r, p);
}

/* Many requests with random shared prefixes through a small pool: no
 * error but exhaustion, rows always right, nothing leaked at the end. */
static void test_random_load(void) {
    inf_kv_pool *p;
    inf_radix *r;
    inf_err e;
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, BS, 40, &e) == 0);
    CHECK(inf_radix_create(&r, p, &e) == 0);
    uint32_t rng = 12345;
#define RND() (rng = rng * 1103515245u + 12345u, (rng >> 16) & 0x7fff)
    enum { LIVE = 4 };
    inf_kv_seq *s[LIVE] = {0};
    int32_t t[LIVE][128];
    int target[LIVE] = {0}, bad = 0, served = 0, refused = 0;
    for (int it = 0; it < 400; it++) {
        int k = (int)(RND() % LIVE);
        if (!s[k]) {
            /* Prompts from a tiny alphabet over a few stems share prefixes. */
            int n = 2 + (int)(RND() % 30);
            int stem = (int)(RND() % 3);
            for (int i = 0; i < n; i++)
                t[k][i] = i < 10 ? stem * 10 + i : (int)(RND() % 3);
            int got;
            s[k] = start(r, t[k], n, &got, &e);
            if (!s[k]) {
                refused++;
                bad += !strstr(e.msg, "exhausted");
                continue;
            }
            target[k] = n + (int)(RND() % 20);
        } else if (s[k]->n_past < target[k]) {
            if (step(s[k], t[k], (int32_t)(RND() % 3), &e)) {
                bad += !strstr(e.msg, "exhausted");
                inf_kv_seq_free(s[k]); /* a refused request ends */
                s[k] = NULL;
                refused++;
            }
        } else {
            bad += first_bad_row(s[k], t[k], s[k]->n_past) != -1;
            finish(r, s[k], t[k]);
            s[k] = NULL;
            served++;
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (s[k]) {
            bad += first_bad_row(s[k], t[k], s[k]->n_past) != -1;
            finish(r, s[k], t[k]);
        }
    CHECK_INT(bad, 0);
    CHECK(served > 20);
    CHECK(r->stats.n_hits > 10);
    for (int b = 0; b < p->n_blocks; b++)
        CHECK(p->refcount[b] == r->tree_refs[b]);
    end_tree(r, p);
    (void)refused;
}

/* Recurrent-state checkpoints: a prefix is reusable only up to the deepest
 * checkpoint on its path; a checkpoint inside an edge splits it and moves
 * with the edge's end; the oldest goes when max_states are held; eviction
 * takes a node's checkpoint with it. */
static void test_state_checkpoints(void) {
    inf_kv_pool *p;
    inf_radix *r;
    inf_err e;
    enum { SF = 3 };
    CHECK(inf_kv_pool_create(&p, NL, KVD, KVD / 2, BS, 32, &e) == 0);
    CHECK(inf_radix_create(&r, p, &e) == 0);
    inf_radix_set_states(r, SF, 2);
    int32_t a[20], b[20];
    seqn(a, 20, 1);
    memcpy(b, a, 9 * sizeof *a);
    seqn(b + 9, 11, 500); /* shares a's first 9 */
    int got;
    inf_kv_seq *s = start(r, a, 20, &got, &e);
    const float st20[SF] = {20, 21, 22}, st9[SF] = {9, 10, 11}, st14[SF] = {14, 15, 16};
    CHECK(inf_radix_insert_state(r, a, 20, s->blocks, st20, &e) == 0);
    CHECK_INT(r->stats.n_states, 1);
    /* a checkpoint inside the edge at 9: a split, the one at 20 stays at 20 */
    CHECK(inf_radix_insert_state(r, a, 9, s->blocks, st9, &e) == 0);
    CHECK_INT(r->stats.n_states, 2);
    CHECK_INT(r->stats.n_nodes, 2);
    inf_kv_seq_free(s);
    int32_t out[8];
    const float *got_st;
    /* all of a: its end; a longer prompt: still a's end; b: the shared 9 */
    CHECK_INT(inf_radix_match_state(r, a, 20, out, &got_st), 20);
    CHECK(got_st && !memcmp(got_st, st20, sizeof st20));
    for (int i = 0; i < 5; i++)
        kv_block_unref(p, out[i]);
    CHECK_INT(inf_radix_match_state(r, a, 15, out, &got_st), 9);
    CHECK(got_st && !memcmp(got_st, st9, sizeof st9));
    for (int i = 0; i < 3; i++)
        kv_block_unref(p, out[i]);
    inf_kv_seq *q;
    CHECK(inf_kv_seq_create(&q, p, 64, &e) == 0);
    float back[SF] = {0};
    CHECK_INT(inf_radix_attach_state(r, q, b, 19, back, &e), 9);
    CHECK(!memcmp(back, st9, sizeof st9));
    CHECK_INT(first_bad_row(q, a, 9), -1);
    inf_kv_seq_free(q);
    /* no checkpoint at or before 8 */
    CHECK_INT(inf_radix_match_state(r, a, 8, out, &got_st), 0);
    CHECK(got_st == NULL);
    /* a third checkpoint takes the place of the least recently used (20:
     * the lookups above touched the path only up to 9 last) */
    CHECK(inf_radix_insert_state(r, a, 14, out, st14, &e) == 0);
    CHECK_INT(r->stats.n_states, 2);
    CHECK_INT(r->stats.n_states_dropped, 1);
    CHECK_INT(inf_radix_match_state(r, a, 20, out, &got_st), 14);
    CHECK(got_st && !memcmp(got_st, st14, sizeof st14));
    for (int i = 0; i < 4; i++)
        kv_block_unref(p, out[i]);
    /* eviction takes the checkpoints with their nodes */
    inf_radix_clear(r);
    CHECK_INT(r->stats.n_states, 0);
    CHECK_INT(r->stats.n_nodes, 0);
    end_tree(r, p);
}

int main(void) {
    test_state_checkpoints();
    test_insert_lookup_split();
    test_interleaved_sharing();
    test_eviction();
    test_pinned_leaf_tail();
    test_shared_straddling_block();
    test_random_load();
    return th_report();
}
