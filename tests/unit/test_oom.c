/* Allocation failure on a request's path is an error, never an abort.
 *
 * With inf_alloc's fault-injection hook (util/mem.h) armed, the backends'
 * scratch memory cannot be had: on the scalar, simd and pool backends a
 * forward call must return -1 with an "out of memory: ..." message naming
 * what could not be had, and leave the model and the backend usable: once
 * disarmed, the same backend's logits are bit-identical to those of a fresh
 * model on a fresh backend. Three failures are forced:
 *   first use: the first forward call, which sizes every scratch buffer;
 *   growth: a prompt larger than any batch before it, where the level's
 *     scratch grows with the batch (packed kernels; none on avx2 or below);
 *   materialized attention, whose score matrices are allocated per call
 *     (where the kernels have that path: avx512, amx). */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"
#include "backend/simd.h"
#include "harness.h"
#include "kv/kv_basic.h"
#include "model/model.h"
#include "synth_model.h"
#include "util/mem.h"

#define N_CTX 128
#define N_PROMPT 48 /* crosses 32 rows: larger than the warm-up batch's padded size */
#define N_DEC 3

/* Runs tokens[0..n) of one sequence from position c->n_past; logits of the last row. */
static int run_rows(inf_model *m, inf_kv_basic *c, const int32_t *tokens, int n, float *logits,
                    inf_err *err) {
    int32_t pos[N_CTX], seq[N_CTX];
    for (int i = 0; i < n; i++)
        pos[i] = c->n_past + i, seq[i] = 0;
    inf_kv_view views[8];
    inf_kv_basic_views(c, views);
    inf_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .seq = seq};
    if (inf_model_forward(m, &b, views, 1, logits, err)) return -1;
    c->n_past += n;
    return 0;
}

/* A prompt then N_DEC decode steps from an empty cache: logits [1 + N_DEC][V]. */
static int run_sequence(inf_model *m, inf_kv_basic *c, const int32_t *prompt, float *logits,
                        inf_err *err) {
    const int V = m->hp.n_vocab;
    inf_kv_basic_truncate(c, 0);
    if (run_rows(m, c, prompt, N_PROMPT, logits, err)) return -1;
    for (int i = 0; i < N_DEC; i++) {
        int32_t t = prompt[(i * 5 + 3) % N_PROMPT];
        if (run_rows(m, c, &t, 1, logits + (size_t)(i + 1) * V, err)) return -1;
    }
    return 0;
}

/* The forward call must fail with a clear message, the armed failure used up. */
static void expect_oom(const char *label, const char *what, int rc, const inf_err *err,
                       const inf_backend *be, int left) {
    CHECK_MSG(rc == -1, "%s, %s: forward returned %d with an allocation failure armed", label, what,
              rc);
    CHECK_MSG(inf_alloc_fail_pending() == left, "%s, %s: %d armed failures left, expected %d",
              label, what, inf_alloc_fail_pending(), left);
    if (rc != -1) return;
    CHECK_MSG(!strncmp(err->msg, "out of memory: ", 15) &&
                  (strstr(err->msg, " MiB)") || strstr(err->msg, " bytes)")),
              "%s, %s: message '%s'", label, what, err->msg);
    inf_err again;
    CHECK_MSG(be->take_error(be, &again) == 0, "%s, %s: the error was not cleared", label, what);
    printf("%-12s %-14s -> %s\n", label, what, err->msg);
}

/* The three failures on backend be; ref comes from a fresh model on `fresh`
 * (which may be be itself for the stateless scalar backend), computed after
 * the first-use failure so that it cannot size be's scratch first. */
static void test_backend(const char *label, const inf_model_file *mf, const inf_backend *be,
                         const inf_backend *fresh, const int32_t *prompt) {
    const int V = mf->hp.n_vocab;
    const size_t n_logits = (size_t)(1 + N_DEC) * V;
    float *got = malloc(sizeof(float) * n_logits), *ref = malloc(sizeof(float) * n_logits);
    inf_model *m = NULL, *mref = NULL;
    inf_kv_basic *c = NULL;
    inf_err err;
    if (inf_model_create(&m, mf, be, N_CTX, N_PROMPT, &err) ||
        inf_kv_basic_create(&c, mf->hp.n_layer, N_CTX, mf->hp.n_head_kv * mf->hp.head_dim,
                            mf->hp.head_dim, &err)) {
        CHECK_MSG(0, "%s: %s", label, err.msg);
        goto done;
    }

    /* first use: any allocation during the call fails (only scratch is allocated there);
     * twice, as a failed call leaves the scratch to be had on the next one */
    inf_alloc_fail_next(2, 1);
    expect_oom(label, "first use", run_rows(m, c, prompt, 1, got, &err), &err, be, 1);
    expect_oom(label, "first use", run_rows(m, c, prompt, 1, got, &err), &err, be, 0);
    inf_alloc_fail_next(0, 0);
    if (inf_model_create(&mref, mf, fresh, N_CTX, N_PROMPT, &err) ||
        run_sequence(mref, c, prompt, ref, &err)) {
        CHECK_MSG(0, "%s: reference: %s", label, err.msg);
        goto done;
    }
    CHECK_MSG(run_sequence(m, c, prompt, got, &err) == 0, "%s: %s", label, err.msg);
    CHECK_MSG(!memcmp(got, ref, sizeof(float) * n_logits),
              "%s: logits after a failed first call differ from a fresh model's", label);

    /* growth: warm up on one row, then a prompt of N_PROMPT rows with any allocation failing */
    inf_model_free(m);
    m = NULL;
    if (inf_model_create(&m, mf, be, N_CTX, N_PROMPT, &err)) {
        CHECK_MSG(0, "%s: %s", label, err.msg);
        goto done;
    }
    inf_kv_basic_truncate(c, 0);
    CHECK(run_rows(m, c, prompt, 1, got, &err) == 0);
    inf_kv_basic_truncate(c, 0);
    inf_alloc_fail_next(1, 1);
    int rc = run_rows(m, c, prompt, N_PROMPT, got, &err);
    if (rc == 0 && inf_alloc_fail_pending() == 1) {
        /* this level's scratch does not depend on the batch: nothing to fail */
        CHECK(1);
        printf("%-12s %-14s -> no scratch grows with the batch at this level\n", label, "growth");
    } else {
        expect_oom(label, "growth", rc, &err, be, 0);
    }
    inf_alloc_fail_next(0, 0);
    CHECK_MSG(run_sequence(m, c, prompt, got, &err) == 0, "%s: %s", label, err.msg);
    CHECK_MSG(!memcmp(got, ref, sizeof(float) * n_logits),
              "%s: logits after a failed growth differ from a fresh model's", label);

done:
    inf_kv_basic_free(c);
    inf_model_free(m);
    inf_model_free(mref);
    free(got);
    free(ref);
}

/* materialized attention allocates its score matrices on every prefill */
static void test_materialized(const inf_model_file *mf, int nth, const int32_t *prompt) {
    inf_isa isa = inf_isa_best();
    inf_backend *be = inf_backend_simd_create(isa, nth, nth > 1, INF_ATTN_MATERIALIZED);
    inf_backend *fresh = inf_backend_simd_create(isa, nth, nth > 1, INF_ATTN_MATERIALIZED);
    if (inf_backend_simd_attn(be) != INF_ATTN_MATERIALIZED) {
        printf("%-12s %-14s -> the %s kernels have no materialized attention\n", be->name,
               "materialized", inf_isa_name(isa));
        CHECK(1);
        inf_backend_simd_free(be);
        inf_backend_simd_free(fresh);
        return;
    }
    const int V = mf->hp.n_vocab;
    const size_t n_logits = (size_t)(1 + N_DEC) * V;
    float *ref = malloc(sizeof(float) * n_logits), *got = malloc(sizeof(float) * n_logits);
    inf_model *m = NULL, *mref = NULL;
    inf_kv_basic *c = NULL;
    inf_err err;
    CHECK(inf_model_create(&mref, mf, fresh, N_CTX, N_PROMPT, &err) == 0);
    CHECK(inf_model_create(&m, mf, be, N_CTX, N_PROMPT, &err) == 0);
    CHECK(inf_kv_basic_create(&c, mf->hp.n_layer, N_CTX, mf->hp.n_head_kv * mf->hp.head_dim,
                              mf->hp.head_dim, &err) == 0);
    CHECK(run_sequence(mref, c, prompt, ref, &err) == 0);
    CHECK(run_sequence(m, c, prompt, got, &err) == 0); /* warm: every other scratch is sized */
    inf_kv_basic_truncate(c, 0);
    inf_alloc_fail_next(1, 1);
    expect_oom(be->name, "materialized", run_rows(m, c, prompt, N_PROMPT, got, &err), &err, be, 0);
    CHECK_MSG(strstr(err.msg, "materialized") != NULL, "%s", err.msg);
    inf_alloc_fail_next(0, 0);
    CHECK(run_sequence(m, c, prompt, got, &err) == 0);
    CHECK_MSG(!memcmp(got, ref, sizeof(float) * n_logits),
              "%s: materialized logits after a failure differ from a fresh model's", be->name);
    inf_kv_basic_free(c);
    inf_model_free(m);
    inf_model_free(mref);
    inf_backend_simd_free(be);
    inf_backend_simd_free(fresh);
    free(ref);
    free(got);
}

static void test_hook(void) {
    inf_alloc_fail_next(2, 1000);
    CHECK_INT(inf_alloc_fail_pending(), 2);
    void *small = inf_alloc(999); /* below the threshold: succeeds, not counted */
    CHECK(small != NULL);
    CHECK_INT(inf_alloc_fail_pending(), 2);
    CHECK(inf_alloc(1000) == NULL);
    CHECK(inf_alloc(1 << 20) == NULL);
    CHECK_INT(inf_alloc_fail_pending(), 0);
    void *after = inf_alloc(1000); /* used up: allocations succeed again */
    CHECK(after != NULL);
    inf_alloc_fail_next(5, 1);
    inf_alloc_fail_next(0, 0); /* disarmed */
    CHECK_INT(inf_alloc_fail_pending(), 0);
    void *again = inf_alloc(1);
    CHECK(again != NULL);
    inf_free(small);
    inf_free(after);
    inf_free(again);
}

/* creating the model: a failing allocation is an error, whichever it is */
static void test_create(const inf_model_file *mf, const inf_backend *be) {
    const size_t sizes[] = {1, 10000}; /* the first allocation; the first activation buffer */
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        inf_model *m = NULL;
        inf_err err = {{0}};
        inf_alloc_fail_next(1, sizes[i]);
        int rc = inf_model_create(&m, mf, be, N_CTX, N_PROMPT, &err);
        int pending = inf_alloc_fail_pending();
        inf_alloc_fail_next(0, 0);
        CHECK_MSG(rc == -1 && pending == 0 && !m && strstr(err.msg, "out of memory"),
                  "%s: create with an allocation of >= %zu bytes failing: rc %d, '%s'", be->name,
                  sizes[i], rc, err.msg);
        printf("%-12s %-14s -> %s\n", be->name, "create", err.msg);
        inf_model_free(m);
    }
}

int main(void) {
    test_hook();

    /* the tiny shape with head_dim 64 (materialized attention takes 64 or 128) */
    inf_hparams hp = synth_tiny_hparams();
    hp.head_dim = 64;
    const inf_dtype types[3] = {INF_Q8_0, INF_Q8_0, INF_Q4_0};
    inf_model_file *mf = synth_model(hp, types, 7);
    int32_t prompt[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        prompt[i] = (i * 7919 + 13) % hp.n_vocab;
    /* scalar first: its scratch is per thread, and this thread has not sized it yet */
    test_backend("scalar", mf, inf_backend_scalar(), inf_backend_scalar(), prompt);
    inf_isa isa = inf_isa_best();
    for (int nth = 1; nth <= 2; nth++) {
        inf_backend *be = inf_backend_simd_create(isa, nth, nth > 1, INF_ATTN_FLASH);
        inf_backend *fresh = inf_backend_simd_create(isa, nth, nth > 1, INF_ATTN_FLASH);
        char label[40];
        snprintf(label, sizeof label, "%s x%d", be->name, nth);
        test_create(mf, be);
        test_backend(label, mf, be, fresh, prompt);
        inf_backend_simd_free(be);
        inf_backend_simd_free(fresh);
    }
    test_materialized(mf, 1, prompt);
    test_materialized(mf, 2, prompt);

    synth_model_free(mf);
    return th_report();
}
