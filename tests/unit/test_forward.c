/* The forward pass on synthetic models: prefill equals token-by-token decode,
 * 64 greedy tokens with the cache equal recomputing the whole sequence,
 * several sequences in one batch equal running them one by one, and bad
 * batches or weights are refused with a message. (Logits against an
 * independent implementation: tests/oracle/check_logits.sh.) */
#include <math.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "harness.h"
#include "kv/kv_basic.h"
#include "model/model.h"
#include "synth_model.h"

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > mx || d != d) mx = d;
    }
    return mx;
}

/* Runs tokens[0..n) of one sequence at positions n_past.. through the model
 * with the cache c; logits for every row when all_rows, else the last. */
static int run_seq(inf_model *m, inf_kv_basic *c, const int32_t *tokens, int n, int all_rows,
                   float *logits, inf_err *err) {
    int32_t pos[256], seq[256];
    uint8_t want[256];
    for (int i = 0; i < n; i++)
        pos[i] = c->n_past + i, seq[i] = 0, want[i] = all_rows || i == n - 1;
    inf_kv_view views[16];
    inf_kv_basic_views(c, views);
    inf_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .seq = seq, .logits = want};
    if (inf_model_forward(m, &b, views, 1, logits, err)) return -1;
    c->n_past += n;
    return 0;
}

static void test_prefill_equals_decode(inf_model *m) {
    const int V = m->hp.n_vocab, n = 70; /* crosses the 64-key tile */
    int32_t tokens[70];
    for (int i = 0; i < n; i++)
        tokens[i] = (i * 37 + 11) % V;
    float *all = malloc(sizeof(float) * (size_t)n * V); /* [n][V] */
    float *one = malloc(sizeof(float) * (size_t)V);
    inf_kv_basic *c;
    inf_err err;
    CHECK(inf_kv_basic_create(&c, m->hp.n_layer, 128, m->hp.n_head_kv * m->hp.head_dim,
                              m->hp.head_dim, &err) == 0);
    CHECK(run_seq(m, c, tokens, n, 1, all, &err) == 0);
    inf_kv_basic_truncate(c, 0);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        CHECK(run_seq(m, c, tokens + i, 1, 0, one, &err) == 0);
        double d = max_abs_diff(one, all + (int64_t)i * V, V);
        worst = d > worst ? d : worst;
    }
    CHECK_MSG(worst <= 1e-5, "prefill vs decode: max abs diff %g", worst);
    printf("prefill of %d rows vs %d decode steps: max abs logit diff %g\n", n, n, worst);
    /* a prefill split in two chunks (the second continues after cached keys) */
    inf_kv_basic_truncate(c, 0);
    CHECK(run_seq(m, c, tokens, 30, 0, one, &err) == 0);
    CHECK(run_seq(m, c, tokens + 30, n - 30, 1, all, &err) == 0);
    CHECK(run_seq(m, c, tokens, 0, 0, one, &err) != 0); /* zero rows is refused */
    inf_kv_basic_truncate(c, 0);
    CHECK(run_seq(m, c, tokens, n, 0, one, &err) == 0);
    CHECK_CLOSE(one, all + (int64_t)(n - 31) * V, V, 1e-5);
    inf_kv_basic_free(c);
    free(all);
    free(one);
}

/* The acceptance check: 64 greedy tokens with prefill + cached decode equal
 * those from recomputing the whole sequence (fresh cache) at every step. */
static void test_cached_equals_recompute(inf_model *m) {
    const int V = m->hp.n_vocab, n_prompt = 9, n_gen = 64;
    int32_t seq_a[128], seq_b[128];
    for (int i = 0; i < n_prompt; i++)
        seq_a[i] = seq_b[i] = (i * 53 + 5) % V;
    float *logits = malloc(sizeof(float) * (size_t)V);
    inf_kv_basic *c;
    inf_err err;
    CHECK(inf_kv_basic_create(&c, m->hp.n_layer, 128, m->hp.n_head_kv * m->hp.head_dim,
                              m->hp.head_dim, &err) == 0);

    CHECK(run_seq(m, c, seq_a, n_prompt, 0, logits, &err) == 0);
    for (int i = 0; i < n_gen; i++) {
        seq_a[n_prompt + i] = argmax(logits, V);
        CHECK(run_seq(m, c, seq_a + n_prompt + i, 1, 0, logits, &err) == 0);
    }
    for (int i = 0; i < n_gen; i++) {
        inf_kv_basic_truncate(c, 0);
        CHECK(run_seq(m, c, seq_b, n_prompt + i, 0, logits, &err) == 0);
        seq_b[n_prompt + i] = argmax(logits, V);
    }
    int first_diff = -1, distinct = 0;
    for (int i = 0; i < n_gen; i++) {
        if (first_diff < 0 && seq_a[n_prompt + i] != seq_b[n_prompt + i]) first_diff = i;
        if (i && seq_a[n_prompt + i] != seq_a[n_prompt + i - 1]) distinct++;
    }
    CHECK_MSG(first_diff < 0, "greedy tokens differ at step %d: cached %d, recomputed %d",
              first_diff, seq_a[n_prompt + first_diff], seq_b[n_prompt + first_diff]);
    CHECK_MSG(distinct > 4, "the greedy run is degenerate (%d changes)", distinct);
    printf("greedy: %d tokens, %d changes of token\n", n_gen, distinct);
    inf_kv_basic_free(c);
    free(logits);
}

/* Three sequences: one batched decode step (one row each) and a batch mixing
 * a prefill span with a decode row give what separate calls give. */
static void test_multi_sequence_batch(inf_model *m) {
    const int V = m->hp.n_vocab, L = m->hp.n_layer, kvd = m->hp.n_head_kv * m->hp.head_dim;
    inf_err err;
    inf_kv_basic *solo[3], *shared[3];
    int32_t prompts[3][20];
    int lens[3] = {5, 17, 11};
    float *ref = malloc(sizeof(float) * 3 * (size_t)V),
          *got = malloc(sizeof(float) * 3 * (size_t)V);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < lens[s]; i++)
            prompts[s][i] = (i * 31 + s * 101 + 7) % V;
        CHECK(inf_kv_basic_create(&solo[s], L, 64, kvd, m->hp.head_dim, &err) == 0);
        CHECK(inf_kv_basic_create(&shared[s], L, 64, kvd, m->hp.head_dim, &err) == 0);
        CHECK(run_seq(m, solo[s], prompts[s], lens[s], 0, got, &err) == 0);
        CHECK(run_seq(m, shared[s], prompts[s], lens[s], 0, got, &err) == 0);
    }
    /* separately: one decode step each */
    int32_t next[3] = {3, 4, 5};
    for (int s = 0; s < 3; s++)
        CHECK(run_seq(m, solo[s], &next[s], 1, 0, ref + (int64_t)s * V, &err) == 0);
    /* together: rows in the order 2, 0, 1 to show the row order is free */
    inf_kv_view views[3 * 16];
    for (int s = 0; s < 3; s++)
        inf_kv_basic_views(shared[s], views + s * L);
    int32_t tok[3] = {next[2], next[0], next[1]}, seq[3] = {2, 0, 1};
    int32_t pos[3] = {shared[2]->n_past, shared[0]->n_past, shared[1]->n_past};
    inf_batch b = {
        .n_rows = 3, .tokens = tok, .pos = pos, .seq = seq, .logits = (uint8_t[]){1, 1, 1}};
    CHECK(inf_model_forward(m, &b, views, 3, got, &err) == 0);
    CHECK_CLOSE(got + 0 * V, ref + 2 * V, V, 1e-6);
    CHECK_CLOSE(got + 1 * V, ref + 0 * V, V, 1e-6);
    CHECK_CLOSE(got + 2 * V, ref + 1 * V, V, 1e-6);
    for (int s = 0; s < 3; s++)
        shared[s]->n_past++;

    /* a 4-row prefill span of sequence 0 next to a decode row of sequence 1 */
    int32_t more[4] = {9, 8, 7, 6};
    CHECK(run_seq(m, solo[0], more, 4, 0, ref, &err) == 0);
    CHECK(run_seq(m, solo[1], &more[0], 1, 0, ref + V, &err) == 0);
    int32_t tok2[5] = {9, 8, 7, 6, 9}, seq2[5] = {0, 0, 0, 0, 1};
    int32_t pos2[5] = {shared[0]->n_past, shared[0]->n_past + 1, shared[0]->n_past + 2,
                       shared[0]->n_past + 3, shared[1]->n_past};
    inf_batch b2 = {.n_rows = 5,
                    .tokens = tok2,
                    .pos = pos2,
                    .seq = seq2,
                    .logits = (uint8_t[]){0, 0, 0, 1, 1}};
    CHECK(inf_model_forward(m, &b2, views, 3, got, &err) == 0);
    CHECK_CLOSE(got, ref, V, 1e-6);
    CHECK_CLOSE(got + V, ref + V, V, 1e-6);

    /* bad batches: one clear message each */
    int32_t bad_tok[1] = {V}, zero[1] = {0}, far[1] = {64}, seq9[1] = {9};
    inf_batch bb = {.n_rows = 1, .tokens = bad_tok, .pos = zero, .seq = zero};
    CHECK(inf_model_forward(m, &bb, views, 3, got, &err) == -1);
    CHECK(strstr(err.msg, "vocabulary") != NULL);
    bb = (inf_batch){.n_rows = 1, .tokens = zero, .pos = far, .seq = zero};
    CHECK(inf_model_forward(m, &bb, views, 3, got, &err) == -1);
    CHECK(strstr(err.msg, "context") != NULL);
    bb = (inf_batch){.n_rows = 1, .tokens = zero, .pos = zero, .seq = seq9};
    CHECK(inf_model_forward(m, &bb, views, 3, got, &err) == -1);
    bb = (inf_batch){.n_rows = m->max_rows + 1, .tokens = zero, .pos = zero, .seq = zero};
    CHECK(inf_model_forward(m, &bb, views, 3, got, &err) == -1);

    for (int s = 0; s < 3; s++)
        inf_kv_basic_free(solo[s]), inf_kv_basic_free(shared[s]);
    free(ref);
    free(got);
}

static void test_bad_weights(void) {
    inf_hparams hp = synth_tiny_hparams();
    inf_dtype types[3] = {INF_F32, INF_F32, INF_F32};
    inf_model_file *mf = synth_model(hp, types, 7);
    inf_model *m;
    inf_err err;
    inf_tensor *wk = (inf_tensor *)inf_model_find(mf, "blk.1.attn_k.weight");
    const inf_tensor *wq = inf_model_find(mf, "blk.1.attn_q.weight");
    const inf_tensor saved = *wk;
    wk->ne[1] = wq->ne[1]; /* wrong shape */
    CHECK(inf_model_create(&m, mf, inf_backend_scalar(), 64, 8, &err) == -1);
    CHECK_MSG(strstr(err.msg, "layer 1") && strstr(err.msg, "attn_k"), "%s", err.msg);
    *wk = saved;
    char *name = wk->name;
    wk->name = (char *)"blk.1.attn_k.renamed";
    CHECK(inf_model_create(&m, mf, inf_backend_scalar(), 64, 8, &err) == -1);
    CHECK_MSG(strstr(err.msg, "attn_k.weight is missing") != NULL, "%s", err.msg);
    wk->name = name;
    mf->hp.n_head_kv = 3;
    CHECK(inf_model_create(&m, mf, inf_backend_scalar(), 64, 8, &err) == -1);
    mf->hp = hp;
    CHECK(inf_model_create(&m, mf, inf_backend_scalar(), 0, 8, &err) == -1);
    CHECK(inf_model_create(&m, mf, inf_backend_scalar(), 64, 8, &err) == 0);
    inf_model_free(m);
    inf_model_free(NULL);
    synth_model_free(mf);
}

int main(void) {
    inf_hparams hp = synth_tiny_hparams();
    inf_dtype types[3] = {INF_F32, INF_F32, INF_F32};
    inf_model_file *mf = synth_model(hp, types, 1234);
    inf_model *m;
    inf_err err;
    int rc = inf_model_create(&m, mf, inf_backend_scalar(), 128, 128, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc == 0) {
        test_prefill_equals_decode(m);
        test_cached_equals_recompute(m);
        test_multi_sequence_batch(m);
        inf_model_free(m);
    }
    synth_model_free(mf);

    /* an untied head with Q = n_embd (no Qwen3 oddity) runs too */
    hp.tied_output = false;
    hp.head_dim = 16;
    mf = synth_model(hp, types, 99);
    rc = inf_model_create(&m, mf, inf_backend_scalar(), 128, 128, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc == 0) {
        test_cached_equals_recompute(m);
        inf_model_free(m);
    }
    synth_model_free(mf);
    test_bad_weights();
    return th_report();
}
