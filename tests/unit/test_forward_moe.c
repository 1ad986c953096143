/* qwen3moe's forward pass on the fast backend (the pool at the best ISA
 * level, two threads), where prompt rows and decode rows run on different
 * kernels: a row's result must not depend on how many rows share the call,
 * though the rows of a batch are regrouped by expert.
 *   - a 40-token prompt gives the same bits whole and in chunks (7, 16, 2);
 *   - a batched decode step of three sequences gives each the bits it gets
 *     alone, and so does a batch mixing a decode row with a prompt chunk;
 *   - each chosen expert's weights are read once per forward call (one call
 *     per row kind), and a decode step reads only the chosen experts (a
 *     counting backend over the scalar one);
 *   - bad expert tensors and counts are refused with their names; a
 *     weight's dropped pages read back unchanged.
 * Needs the generated models (scripts/make-models.sh). */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu_features.h"
#include "backend/simd.h"
#include "harness.h"
#include "kv/kv_basic.h"
#include "model/model.h"
#include "modelfile/model.h"

#define N_CTX 96

typedef struct seqs {
    inf_kv_basic *kv[3];
    inf_kv_view views[3 * 64]; /* [seq * n_layer + layer] */
    int n_layer;
} seqs;

static void seqs_open(seqs *s, const inf_model *m) {
    inf_err err;
    s->n_layer = m->hp.n_layer;
    INF_ASSERT(s->n_layer <= 64);
    for (int q = 0; q < 3; q++) {
        INF_ASSERT(inf_kv_basic_create(&s->kv[q], m->hp.n_layer, N_CTX,
                                       m->hp.n_head_kv * m->hp.head_dim, m->hp.head_dim,
                                       &err) == 0);
        inf_kv_basic_views(s->kv[q], &s->views[q * s->n_layer]);
    }
}

static void seqs_close(seqs *s) {
    for (int q = 0; q < 3; q++)
        inf_kv_basic_free(s->kv[q]);
}

/* One forward call; logits of every row. */
static int step(inf_model *m, seqs *s, int n, const int32_t *tok, const int32_t *pos,
                const int32_t *seq, float *logits) {
    uint8_t all[64];
    memset(all, 1, sizeof all);
    inf_batch b = {.n_rows = n, .tokens = tok, .pos = pos, .seq = seq, .logits = all};
    inf_err err;
    int rc = inf_model_forward(m, &b, s->views, 3, logits, &err);
    if (rc) fprintf(stderr, "forward: %s\n", err.msg);
    return rc;
}

/* Prefills seq q with prompt[0..n) in chunks of `chunk`; the last row's logits. */
static int prefill(inf_model *m, seqs *s, int q, const int32_t *prompt, int n, int chunk,
                   float *last, float *scratch) {
    const int V = m->hp.n_vocab;
    for (int i = 0; i < n; i += chunk) {
        int k = n - i < chunk ? n - i : chunk;
        int32_t pos[64], seq[64];
        for (int j = 0; j < k; j++)
            pos[j] = i + j, seq[j] = q;
        if (step(m, s, k, prompt + i, pos, seq, scratch)) return -1;
        if (i + k == n) memcpy(last, scratch + (size_t)(k - 1) * V, sizeof(float) * V);
    }
    return 0;
}

static void test_invariance(const char *path) {
    inf_model_file *mf;
    inf_err err;
    if (inf_model_open(&mf, path, &err)) {
        CHECK_MSG(0, "%s (run scripts/make-models.sh)", err.msg);
        return;
    }
    inf_backend *be = inf_backend_simd_create(inf_isa_best(), 2, true, INF_ATTN_FLASH);
    inf_model *m;
    CHECK_MSG(inf_model_create(&m, mf, be, N_CTX, 48, &err) == 0, "%s", err.msg);
    const int V = mf->hp.n_vocab;
    float *whole = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V);
    float *scratch = malloc(sizeof(float) * (size_t)48 * V), *solo = malloc(sizeof(float) * 3 * V);
    int32_t prompt[3][40];
    for (int q = 0; q < 3; q++)
        for (int i = 0; i < 40; i++)
            prompt[q][i] = (i * 7919 + 13 + 1000 * q) % V;

    /* whole vs chunked: the prompt bits do not depend on chunking */
    seqs s;
    seqs_open(&s, m);
    CHECK(prefill(m, &s, 0, prompt[0], 40, 40, whole, scratch) == 0);
    static const int chunks[] = {7, 16, 2};
    for (int c = 0; c < 3; c++) {
        seqs t;
        seqs_open(&t, m);
        CHECK(prefill(m, &t, 0, prompt[0], 40, chunks[c], got, scratch) == 0);
        CHECK_MSG(!memcmp(got, whole, sizeof(float) * V), "%s: prompt in chunks of %d differs",
                  path, chunks[c]);
        seqs_close(&t);
    }
    seqs_close(&s);

    /* batched decode: three sequences in one call vs each alone */
    seqs_open(&s, m);
    for (int q = 0; q < 3; q++)
        CHECK(prefill(m, &s, q, prompt[q], 30 + 3 * q, 16, got, scratch) == 0);
    int32_t tok[3] = {11, 2222, 33333}, pos[3] = {30, 33, 36}, seq[3] = {0, 1, 2};
    for (int q = 0; q < 3; q++)
        CHECK(step(m, &s, 1, &tok[q], &pos[q], &seq[q], solo + (size_t)q * V) == 0);
    CHECK(step(m, &s, 3, tok, pos, seq, scratch) == 0); /* rewrites the same cache rows */
    CHECK_MSG(!memcmp(scratch, solo, sizeof(float) * 3 * V), "%s: batched decode differs", path);

    /* a decode row of seq 1 beside a prompt chunk of seq 2 (4 rows) */
    int32_t mt[5] = {2222, 5, 6, 7, 8}, mp[5] = {33, 36, 37, 38, 39}, ms[5] = {1, 2, 2, 2, 2};
    CHECK(step(m, &s, 5, mt, mp, ms, scratch) == 0);
    CHECK_MSG(!memcmp(scratch, solo + (size_t)V, sizeof(float) * V),
              "%s: a decode row beside a prompt chunk differs", path);
    float *chunk_alone = malloc(sizeof(float) * 4 * V);
    CHECK(step(m, &s, 4, mt + 1, mp + 1, ms + 1, chunk_alone) == 0);
    CHECK_MSG(!memcmp(scratch + (size_t)V, chunk_alone, sizeof(float) * 4 * V),
              "%s: a prompt chunk beside a decode row differs", path);
    printf("%s on %s: chunked prompt, batched decode and mixed batches bit-identical\n", path,
           be->name);
    free(chunk_alone);
    seqs_close(&s);
    free(whole);
    free(got);
    free(scratch);
    free(solo);
    inf_model_free(m);
    inf_backend_simd_free(be);
    inf_model_close(mf);
}

/* A scalar backend that counts the matmul calls on each expert slice of
 * the expert tensors gate/up/down of every layer. */
static const inf_tensor *exps[64][3]; /* [layer][gate, up, down] */
static int calls[64][3][16];          /* [layer][tensor][expert] */

static void count(const inf_weight *w) {
    for (int l = 0; l < 64; l++)
        for (int j = 0; j < 3; j++) {
            const inf_tensor *t = exps[l][j];
            if (!t) continue;
            const char *base = t->data, *p = w->t->data;
            if (p >= base && p < base + t->nbytes)
                calls[l][j][(p - base) / (t->nbytes / (size_t)t->ne[2])]++;
        }
}
static void counting_matmul(const inf_backend *be, float *y, const float *x, const inf_weight *w,
                            int T) {
    count(w);
    inf_backend_scalar()->matmul(be, y, x, w, T);
}

static void test_expert_reads(void) {
    inf_model_file *mf;
    inf_err err;
    if (inf_model_open(&mf, "models/tiny-moe-f32.gguf", &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    const int L = mf->hp.n_layer, X = mf->hp.n_expert, K = mf->hp.n_expert_used;
    INF_ASSERT(L <= 64 && X <= 16);
    static const char *const names[3] = {"gate", "up", "down"};
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 3; j++) {
            char nm[64];
            snprintf(nm, sizeof nm, "blk.%d.ffn_%s_exps.weight", l, names[j]);
            exps[l][j] = inf_model_find(mf, nm);
        }
    inf_backend be = *inf_backend_scalar();
    be.matmul = counting_matmul;
    be.matmul_n = NULL;
    inf_model *m;
    CHECK_MSG(inf_model_create(&m, mf, &be, N_CTX, 48, &err) == 0, "%s", err.msg);
    seqs s;
    seqs_open(&s, m);
    float *logits = malloc(sizeof(float) * (size_t)48 * mf->hp.n_vocab);
    int32_t tok[24], pos[24], seq[24];
    for (int i = 0; i < 24; i++)
        tok[i] = (i * 7919 + 13) % mf->hp.n_vocab, pos[i] = i, seq[i] = 0;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: a 24-row prompt; pass 1: one decode row */
        memset(calls, 0, sizeof calls);
        if (pass == 0)
            CHECK(step(m, &s, 24, tok, pos, seq, logits) == 0);
        else
            CHECK(step(m, &s, 1, (int32_t[]){5}, (int32_t[]){24}, (int32_t[]){0}, logits) == 0);
        int most = 0, touched = 0;
        for (int l = 0; l < L; l++)
            for (int e = 0; e < X; e++) {
                for (int j = 0; j < 3; j++)
                    most = calls[l][j][e] > most ? calls[l][j][e] : most;
                touched += calls[l][0][e] > 0;
                CHECK(calls[l][0][e] == calls[l][1][e] && calls[l][0][e] == calls[l][2][e]);
            }
        CHECK_MSG(most == 1, "an expert's weights were read %d times in one call", most);
        if (pass == 1)
            CHECK_MSG(touched == L * K, "a decode row read %d experts, expected %d", touched,
                      L * K);
        else
            printf("a 24-row prompt read %d of %d experts, each once\n", touched, L * X);
    }
    free(logits);
    seqs_close(&s);
    inf_model_free(m);
    inf_model_close(mf);
}

/* The file's tensors and keys, broken one at a time. */
static void test_bad_experts(void) {
    const char *path = "models/tiny-moe-f32.gguf";
    inf_model_file *mf;
    inf_err err;
    if (inf_modelfile_open(&mf, path, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    CHECK_MSG(inf_model_bind_file(mf, &err) == 0, "%s", err.msg);
    CHECK_INT(mf->hp.n_expert, 8);
    CHECK_INT(mf->hp.n_expert_used, 2);
    CHECK_INT(mf->hp.n_ff_exp, 256);
    CHECK(mf->hp.norm_topk_prob);
    inf_tensor *t = (inf_tensor *)inf_model_find(mf, "blk.2.ffn_up_exps.weight");
    CHECK(t != NULL);
    if (t) {
        const inf_tensor saved = *t;
        t->ne[2] = 7; /* an expert short */
        CHECK(inf_model_bind_file(mf, &err) == -1);
        CHECK_MSG(strstr(err.msg, "blk.2.ffn_up_exps.weight") && strstr(err.msg, "expected"), "%s",
                  err.msg);
        *t = saved;
        char *name = t->name;
        t->name = (char *)"blk.2.ffn_up_exps.renamed";
        CHECK(inf_model_bind_file(mf, &err) == -1);
        CHECK_MSG(strstr(err.msg, "blk.2.ffn_up_exps.weight is missing"), "%s", err.msg);
        t->name = name;
        CHECK_MSG(inf_model_bind_file(mf, &err) == 0, "%s", err.msg);

        /* a packed weight's pages leave the resident set; read again, they
           come back from the file unchanged */
        void *copy = malloc(t->nbytes);
        memcpy(copy, t->data, t->nbytes);
        inf_model_drop_pages(mf, t);
        CHECK_MSG(!memcmp(copy, t->data, t->nbytes), "%s: dropped pages read back differ", t->name);
        free(copy);
    }
    inf_model_close(mf);
}

int main(void) {
    test_invariance("models/tiny-moe-f32.gguf");
    test_invariance("models/tiny-moe-q4_k_m.gguf");
    test_invariance("models/tiny-moe-f32-hf-fused");
    test_expert_reads();
    test_bad_experts();
    return th_report();
}
