/* Every weight type runs: a model stored as F16, BF16, Q8_0, Q4_0, Q4_K,
 * Q6_K (and a mix of them in one file) gives the logits of the F32 model
 * holding the same dequantized values. The difference is only float
 * summation order, so the tolerance is tight (1e-4); the distance to the
 * original unquantized weights is printed for information. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "kv/kv_basic.h"
#include "model/model.h"
#include "synth_model.h"

/* Greedy-free check: logits of a 20-token prefill's every row. */
static void run(const inf_model_file *mf, float *logits /* [20][V] */) {
    inf_model *m;
    inf_kv_basic *c;
    inf_err err;
    int rc = inf_model_create(&m, mf, inf_backend_scalar(), 32, 20, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK(inf_kv_basic_create(&c, mf->hp.n_layer, 32, mf->hp.n_head_kv * mf->hp.head_dim,
                              mf->hp.head_dim, &err) == 0);
    int32_t tok[20], pos[20], seq[20];
    uint8_t want[20];
    for (int i = 0; i < 20; i++)
        tok[i] = (i * 97 + 1) % mf->hp.n_vocab, pos[i] = i, seq[i] = 0, want[i] = 1;
    inf_kv_view views[8];
    inf_kv_basic_views(c, views);
    inf_batch b = {.n_rows = 20, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
    CHECK(inf_model_forward(m, &b, views, 1, logits, &err) == 0);
    inf_kv_basic_free(c);
    inf_model_free(m);
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > mx || d != d) mx = d;
    }
    return mx;
}

int main(void) {
    /* row lengths multiples of 256 so the K-quants fit */
    inf_hparams hp = {.n_layer = 2,
                      .n_embd = 256,
                      .n_head = 4,
                      .n_head_kv = 2,
                      .head_dim = 64,
                      .n_ff = 512,
                      .n_vocab = 320,
                      .n_ctx_train = 4096,
                      .rope_theta = 1e6f,
                      .rms_eps = 1e-6f,
                      .tied_output = true};
    const int64_t N = 20 * (int64_t)hp.n_vocab;
    float *f32 = malloc(sizeof(float) * N), *deq = malloc(sizeof(float) * N),
          *got = malloc(sizeof(float) * N);
    inf_dtype all_f32[3] = {INF_F32, INF_F32, INF_F32};
    inf_model_file *base = synth_model(hp, all_f32, 5);
    run(base, f32);
    synth_model_free(base);

    struct {
        const char *name;
        inf_dtype t[3]; /* embedding/head, attention, MLP */
        int untied;
    } cases[] = {
        {"F16", {INF_F16, INF_F16, INF_F16}, 0},
        {"BF16", {INF_BF16, INF_BF16, INF_BF16}, 0},
        {"Q8_0", {INF_Q8_0, INF_Q8_0, INF_Q8_0}, 0},
        {"Q4_0", {INF_Q4_0, INF_Q4_0, INF_Q4_0}, 0},
        {"Q4_K", {INF_Q4_K, INF_Q4_K, INF_Q4_K}, 0},
        {"Q6_K", {INF_Q6_K, INF_Q6_K, INF_Q6_K}, 0},
        {"Q4_1", {INF_Q4_1, INF_Q4_1, INF_Q4_1}, 0},
        {"Q5_0", {INF_Q5_0, INF_Q5_0, INF_Q5_0}, 0},
        {"Q5_1", {INF_Q5_1, INF_Q5_1, INF_Q5_1}, 0},
        {"Q2_K", {INF_Q2_K, INF_Q2_K, INF_Q2_K}, 0},
        {"Q3_K", {INF_Q3_K, INF_Q3_K, INF_Q3_K}, 0},
        {"Q5_K", {INF_Q5_K, INF_Q5_K, INF_Q5_K}, 0},
        {"IQ4_NL", {INF_IQ4_NL, INF_IQ4_NL, INF_IQ4_NL}, 0},
        {"IQ4_XS", {INF_IQ4_XS, INF_IQ4_XS, INF_IQ4_XS}, 0},
        {"MXFP4", {INF_MXFP4, INF_MXFP4, INF_MXFP4}, 0},
        {"mixed Q6_K/Q4_K/Q8_0", {INF_Q6_K, INF_Q4_K, INF_Q8_0}, 0},
        {"mixed Q5_K/Q3_K/IQ4_XS untied", {INF_Q5_K, INF_Q3_K, INF_IQ4_XS}, 1},
        {"mixed BF16/Q4_0/F16 untied", {INF_BF16, INF_Q4_0, INF_F16}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        inf_hparams h = hp;
        h.tied_output = !cases[i].untied;
        inf_model_file *q = synth_model(h, cases[i].t, 5); /* same seed: same weights */
        inf_model_file *d = synth_dequantized(q);
        run(q, got);
        run(d, deq);
        double dd = max_abs_diff(got, deq, N), df = max_abs_diff(got, f32, N);
        CHECK_MSG(dd < 1e-4, "%s: max abs diff to its dequantized F32 %g", cases[i].name, dd);
        printf("%-28s vs dequantized F32: %.3g   (vs original F32 weights: %.3g)\n", cases[i].name,
               dd, cases[i].untied ? NAN : df);
        synth_model_free(q);
        synth_model_free(d);
    }
    free(f32), free(deq), free(got);
    return th_report();
}
