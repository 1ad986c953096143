/* The forward pass over the paged cache gives the logits of the basic
 * cache, bit for bit: whole sessions (prefill in chunks that cross blocks,
 * then greedy decode), a request whose prefix comes from the radix cache
 * (shared blocks, copy-on-write of the partly filled last one) against a
 * cold run, and decode rows of two sequences sharing a prefix in one
 * batched forward call, as the server's scheduler runs them. */
#include <stdlib.h>

#include "harness.h"
#include "kv/radix.h"
#include "kv_run.h"
#include "synth_model.h"

static inf_model *m;   /* 48 rows per call */
static inf_model *m16; /* 16 rows per call: prefills run in chunks */
static inf_hparams hp;

/* Runs tokens at the end of paged sequence s (one forward call); the last
 * row's logits land in logits. */
static int feed_seq(inf_kv_seq *s, const int32_t *tokens, int n, float *logits, inf_err *err) {
    int32_t pos[64], seq[64];
    inf_kv_view views[8];
    INF_ASSERT(n <= 64 && hp.n_layer <= 8);
    if (inf_kv_seq_reserve(s, n, err)) return -1;
    for (int i = 0; i < n; i++)
        pos[i] = s->n_past + i, seq[i] = 0;
    inf_kv_seq_views(s, views);
    inf_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .seq = seq};
    if (inf_model_forward(m, &b, views, 1, logits, err)) return -1;
    s->n_past += n;
    return 0;
}

static int32_t argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* with K and V stored as type */
static void test_sessions(inf_dtype type) {
    int32_t prompt[45];
    for (int i = 0; i < 45; i++)
        prompt[i] = (i * 31 + 7) % hp.n_vocab;
    int sizes[3] = {1, 4, 16};
    inf_err err;
    kv_run basic;
    inf_kv_opts bo = {.kind = INF_KV_BASIC, .type_k = type, .type_v = type};
    CHECK_MSG(kv_run_open(&basic, m16, &bo, 64, &err) == 0, "%s", err.msg);
    CHECK(kv_run_prefill(&basic, prompt, 45, &err) == 0);
    for (int k = 0; k < 3; k++) {
        inf_kv_opts o = {
            .kind = INF_KV_PAGED, .block_size = sizes[k], .type_k = type, .type_v = type};
        kv_run paged, ref;
        CHECK(kv_run_open(&paged, m16, &o, 64, &err) == 0);
        CHECK(kv_run_prefill(&paged, prompt, 45, &err) == 0);
        CHECK_CLOSE(paged.logits, basic.logits, hp.n_vocab, 0);
        /* Both decode greedily in lockstep from the same logits. */
        CHECK(kv_run_open(&ref, m16, &bo, 64, &err) == 0);
        CHECK(kv_run_prefill(&ref, prompt, 45, &err) == 0);
        for (int step = 0; step < 12; step++) {
            int32_t t = argmax(ref.logits, hp.n_vocab);
            CHECK(kv_run_feed(&ref, &t, 1, &err) == 0);
            CHECK(kv_run_feed(&paged, &t, 1, &err) == 0);
            CHECK_CLOSE(paged.logits, ref.logits, hp.n_vocab, 0);
        }
        CHECK_INT(paged.kv->n_past[0], 57);
        CHECK_INT(paged.kv->seqs[0]->n_past, 57);
        /* Reusing a prefix that ends inside a block: a paged sequence takes
         * it from the prefix cache once its tokens were donated. */
        inf_kv_cache_end(paged.kv, 0);
        CHECK(kv_run_prefill(&paged, prompt, 30, &err) == 0);
        CHECK(kv_run_prefill(&ref, prompt, 30, &err) == 0);
        CHECK_INT(paged.reused, 28);
        CHECK_INT(ref.reused, 28);
        CHECK_CLOSE(paged.logits, ref.logits, hp.n_vocab, 0);
        CHECK(inf_kv_cache_bytes(paged.kv, 0) <
              inf_kv_cache_bytes(ref.kv, 0)); /* 30 of 64 positions' blocks */
        kv_run_close(&ref);
        kv_run_close(&paged);
    }
    kv_run_close(&basic);
}

/* Request A caches its prompt; request B shares its first 27 tokens (not a
 * block boundary), takes them from the radix tree and prefills only the
 * rest: its logits equal a cold run of B's whole prompt. A keeps decoding
 * after B attached, through the block they share. */
static void test_prefix_reuse(void) {
    inf_err err;
    inf_kv_pool *pool;
    inf_radix *r;
    CHECK(inf_kv_pool_create(&pool, hp.n_layer, hp.n_head_kv * hp.head_dim, hp.head_dim, 8, 40,
                             &err) == 0);
    CHECK(inf_radix_create(&r, pool, &err) == 0);
    int32_t pa[40], pb[40];
    for (int i = 0; i < 40; i++)
        pa[i] = (i * 13 + 5) % hp.n_vocab;
    memcpy(pb, pa, sizeof pb);
    for (int i = 27; i < 40; i++)
        pb[i] = (i * 7 + 100) % hp.n_vocab;

    float *la = malloc((size_t)hp.n_vocab * sizeof(float));
    float *lb = malloc((size_t)hp.n_vocab * sizeof(float));
    float *ref = malloc((size_t)hp.n_vocab * sizeof(float));
    inf_kv_seq *a, *b, *cold;
    CHECK(inf_kv_seq_create(&a, pool, 64, &err) == 0);
    CHECK(feed_seq(a, pa, 16, la, &err) == 0);
    CHECK(feed_seq(a, pa + 16, 14, la, &err) == 0); /* 30 tokens: ends inside block 3 */
    CHECK(inf_radix_insert_seq(r, a, pa, &err) == 0);

    CHECK(inf_kv_seq_create(&b, pool, 64, &err) == 0);
    CHECK_INT(inf_radix_attach(r, b, pb, 39, &err), 27);
    int used = inf_kv_pool_used(pool);
    CHECK(feed_seq(b, pb + 27, 13, lb, &err) == 0);
    CHECK_INT(inf_kv_pool_used(pool), used + 2); /* a copy of block 3, and block 4 */
    CHECK(pool->n_cow >= 1);

    CHECK(inf_kv_seq_create(&cold, pool, 64, &err) == 0);
    CHECK(feed_seq(cold, pb, 40, ref, &err) == 0);
    CHECK_CLOSE(lb, ref, hp.n_vocab, 0);
    inf_kv_seq_free(cold);

    /* A continues: its rows 27..29 must not have been touched by B. */
    int32_t next[8];
    inf_kv_seq *a_ref;
    CHECK(inf_kv_seq_create(&a_ref, pool, 64, &err) == 0);
    CHECK(feed_seq(a_ref, pa, 30, ref, &err) == 0);
    for (int step = 0; step < 8; step++) {
        next[step] = argmax(la, hp.n_vocab);
        CHECK(feed_seq(a, &next[step], 1, la, &err) == 0);
        CHECK(feed_seq(a_ref, &next[step], 1, ref, &err) == 0);
        CHECK_CLOSE(la, ref, hp.n_vocab, 0);
    }
    inf_kv_seq_free(a_ref);
    inf_kv_seq_free(a);
    inf_kv_seq_free(b);
    CHECK(r->stats.tokens_reused == 27 && r->stats.n_hits == 1);
    inf_radix_free(r);
    CHECK_INT(pool->n_free, pool->n_blocks);
    CHECK(inf_kv_pool_audit(pool, &err) == 0);
    inf_kv_pool_free(pool);
    free(la);
    free(lb);
    free(ref);
}

/* One batched forward call with a decode row for each of two sequences that
 * share a cached prefix: each row's logits equal its sequence run alone. */
static void test_batched_decode(void) {
    inf_err err;
    inf_kv_pool *pool;
    inf_radix *r;
    int L = hp.n_layer;
    CHECK(inf_kv_pool_create(&pool, L, hp.n_head_kv * hp.head_dim, hp.head_dim, 4, 64, &err) == 0);
    CHECK(inf_radix_create(&r, pool, &err) == 0);
    int32_t sys[21], t0[30], t1[30];
    for (int i = 0; i < 21; i++)
        sys[i] = (i * 11 + 1) % hp.n_vocab;
    float *lg = malloc(2 * (size_t)hp.n_vocab * sizeof(float));
    float *ref = malloc((size_t)hp.n_vocab * sizeof(float));
    inf_kv_seq *s[2], *alone[2];
    CHECK(inf_kv_seq_create(&s[0], pool, 64, &err) == 0);
    CHECK(feed_seq(s[0], sys, 21, lg, &err) == 0);
    CHECK(inf_radix_insert_seq(r, s[0], sys, &err) == 0);
    inf_kv_seq_free(s[0]);
    int32_t *t[2] = {t0, t1};
    for (int k = 0; k < 2; k++) {
        memcpy(t[k], sys, sizeof sys);
        t[k][21] = 50 + k;
        t[k][22] = 60 + k;
        CHECK(inf_kv_seq_create(&s[k], pool, 64, &err) == 0);
        CHECK_INT(inf_radix_attach(r, s[k], t[k], 22, &err), 21);
        CHECK(feed_seq(s[k], t[k] + 21, 2, lg, &err) == 0);
        CHECK(inf_kv_seq_create(&alone[k], pool, 64, &err) == 0);
        CHECK(feed_seq(alone[k], t[k], 23, ref, &err) == 0);
    }
    inf_kv_view views[2 * 8];
    for (int step = 0; step < 6; step++) {
        int32_t tok[2], pos[2], seq[2] = {0, 1};
        for (int k = 0; k < 2; k++) {
            tok[k] = (step * 37 + k * 5 + 3) % hp.n_vocab;
            pos[k] = s[k]->n_past;
            CHECK(inf_kv_seq_reserve(s[k], 1, &err) == 0);
            inf_kv_seq_views(s[k], views + k * L);
        }
        uint8_t want[2] = {1, 1};
        inf_batch b = {.n_rows = 2, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
        CHECK(inf_model_forward(m, &b, views, 2, lg, &err) == 0);
        for (int k = 0; k < 2; k++) {
            s[k]->n_past++;
            CHECK(feed_seq(alone[k], &tok[k], 1, ref, &err) == 0);
            CHECK_CLOSE(lg + (size_t)k * hp.n_vocab, ref, hp.n_vocab, 1e-5);
        }
    }
    for (int k = 0; k < 2; k++) {
        inf_kv_seq_free(s[k]);
        inf_kv_seq_free(alone[k]);
    }
    inf_radix_free(r);
    CHECK_INT(pool->n_free, pool->n_blocks);
    inf_kv_pool_free(pool);
    free(lg);
    free(ref);
}

int main(void) {
    hp = synth_tiny_hparams();
    inf_dtype types[3] = {INF_F32, INF_F32, INF_F32};
    inf_model_file *mf = synth_model(hp, types, 99);
    inf_err err;
    CHECK(inf_model_create(&m, mf, inf_backend_scalar(), 64, 48, &err) == 0);
    CHECK(inf_model_create(&m16, mf, inf_backend_scalar(), 64, 16, &err) == 0);
    test_sessions(INF_F32);
    test_sessions(INF_F16);
    test_sessions(INF_BF16);
    test_sessions(INF_Q8_0);
    test_prefix_reuse();
    test_batched_decode();
    inf_model_free(m);
    inf_model_free(m16);
    synth_model_free(mf);
    return th_report();
}
