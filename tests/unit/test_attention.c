/* Flash-attention prefill and fused decode attention against the materialized
 * reference: the full [T][n_keys] score matrix per head, causal mask, softmax,
 * times V, computed in double. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"
#include "backend/simd.h"
#include "harness.h"
#include "kv/kv_type.h"

static uint64_t rng_state;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}
static void fill(float *x, int64_t n, float amp) {
    for (int64_t i = 0; i < n; i++)
        x[i] = amp * frand();
}

/* out[T][n_head*head_dim]: queries at positions pos0..pos0+T-1 over keys
 * k/v [n_keys][n_head_kv*head_dim] (plain rows). */
static void materialized(float *out, const float *q, const float *k, const float *v, int pos0,
                         int T, int n_head, int n_head_kv, int head_dim) {
    int qw = n_head * head_dim, kvw = n_head_kv * head_dim, group = n_head / n_head_kv;
    int n_keys = pos0 + T;
    double *scores = malloc(sizeof(double) * (size_t)T * n_keys); /* [T][n_keys] */
    double scale = 1.0 / sqrt((double)head_dim);
    for (int h = 0; h < n_head; h++) {
        int kh = h / group;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < n_keys; j++) {
                double dot = 0;
                for (int d = 0; d < head_dim; d++)
                    dot += (double)q[i * qw + h * head_dim + d] * k[j * kvw + kh * head_dim + d];
                scores[i * n_keys + j] = j > pos0 + i ? -INFINITY : dot * scale; /* causal */
            }
        for (int i = 0; i < T; i++) {
            double *s = scores + i * n_keys, mx = -INFINITY, sum = 0;
            for (int j = 0; j < n_keys; j++)
                mx = s[j] > mx ? s[j] : mx;
            for (int j = 0; j < n_keys; j++)
                sum += s[j] = exp(s[j] - mx);
            for (int j = 0; j < n_keys; j++)
                s[j] /= sum;
            for (int d = 0; d < head_dim; d++) {
                double acc = 0;
                for (int j = 0; j < n_keys; j++)
                    acc += s[j] * v[j * kvw + kh * head_dim + d];
                out[i * qw + h * head_dim + d] = (float)acc;
            }
        }
    }
    free(scores);
}

#define GUARD 16
#define SENTINEL 12345.0f

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > mx || d != d) mx = d;
    }
    return mx;
}

/* Runs both ops of backend be on one shape and compares with the reference.
 * With block_size > 0 the cache is read through a shuffled block table. */
static void check_shape(const inf_backend *be, int n_head, int n_head_kv, int head_dim, int pos0,
                        int T, int block_size) {
    int qw = n_head * head_dim, kvw = n_head_kv * head_dim, n_keys = pos0 + T;
    float *q = malloc(sizeof(float) * (size_t)T * qw);       /* [T][qw] */
    float *k = malloc(sizeof(float) * (size_t)n_keys * kvw); /* [n_keys][kvw] */
    float *v = malloc(sizeof(float) * (size_t)n_keys * kvw);
    float *ref = malloc(sizeof(float) * (size_t)T * qw);
    float *got = malloc(sizeof(float) * ((size_t)T * qw + 2 * GUARD)); /* guards both sides */
    fill(q, (int64_t)T * qw, 2.0f);
    fill(k, (int64_t)n_keys * kvw, 2.0f);
    fill(v, (int64_t)n_keys * kvw, 1.0f);
    materialized(ref, q, k, v, pos0, T, n_head, n_head_kv, head_dim);

    /* The cache: a basic cache's blocks, or blocks of block_size rows in
     * reversed physical order (kv_view.h's layout). */
    int bs = block_size ? block_size : INF_KV_BASIC_BLOCK;
    int n_blocks = (n_keys + bs - 1) / bs, rows = n_blocks * bs;
    float *ck = calloc((size_t)rows * kvw, sizeof(float));
    float *cv = calloc((size_t)rows * kvw, sizeof(float));
    int32_t *table = block_size ? malloc(sizeof(int32_t) * n_blocks) : NULL;
    for (int b = 0; block_size && b < n_blocks; b++)
        table[b] = n_blocks - 1 - b;
    inf_kv_view view = {.k = ck,
                        .v = cv,
                        .row_stride = kvw,
                        .head_dim = head_dim,
                        .block_size = bs,
                        .block_table = table};
    for (int j = 0; j < n_keys; j++)
        inf_kv_store_row(&view, j, k + (int64_t)j * kvw, v + (int64_t)j * kvw);
    inf_attn_shape s = {n_head, n_head_kv, head_dim, 1.0f / sqrtf((float)head_dim)};

    float *out = got + GUARD;
    for (int i = 0; i < T * qw + 2 * GUARD; i++)
        got[i] = SENTINEL;
    be->attn_prefill(be, out, q, &view, pos0, T, &s);
    double d = max_abs_diff(out, ref, (int64_t)T * qw);
    int guards_ok = 1;
    for (int i = 0; i < GUARD; i++)
        guards_ok &= got[i] == SENTINEL && out[T * qw + i] == SENTINEL;
    CHECK_MSG(d < 1e-4, "%s prefill heads %d/%d dim %d pos0 %d T %d block %d: max abs diff %g",
              be->name, n_head, n_head_kv, head_dim, pos0, T, block_size, d);
    CHECK_MSG(guards_ok, "%s prefill wrote outside its output (T %d)", be->name, T);
    printf("%-8s prefill heads %2d/%d dim %3d pos0 %3d T %3d block %2d: max abs diff %.3g\n",
           be->name, n_head, n_head_kv, head_dim, pos0, T, block_size, d);

    /* Decode: the last query row alone over all keys. */
    for (int i = 0; i < qw + 2 * GUARD; i++)
        got[i] = SENTINEL;
    be->attn_decode(be, out, q + (int64_t)(T - 1) * qw, &view, n_keys, &s);
    d = max_abs_diff(out, ref + (int64_t)(T - 1) * qw, qw);
    guards_ok = 1;
    for (int i = 0; i < GUARD; i++)
        guards_ok &= got[i] == SENTINEL && out[qw + i] == SENTINEL;
    CHECK_MSG(d < 1e-4, "%s decode heads %d/%d dim %d keys %d: max abs diff %g", be->name, n_head,
              n_head_kv, head_dim, n_keys, d);
    CHECK_MSG(guards_ok, "%s decode wrote outside its output", be->name);

    free(q), free(k), free(v), free(ref), free(got), free(ck), free(cv), free(table);
}

/* K and V stored as kt/vt: the ops read the stored values, so they match the
 * reference computed over those values (each row converted and read back). */
static void check_typed(const inf_backend *be, int n_head, int n_head_kv, int head_dim, int pos0,
                        int T, int block_size, inf_dtype kt, inf_dtype vt) {
    int qw = n_head * head_dim, kvw = n_head_kv * head_dim, n_keys = pos0 + T;
    float *q = malloc(sizeof(float) * (size_t)T * qw);
    float *k = malloc(sizeof(float) * (size_t)n_keys * kvw); /* [n_keys][kvw] stored values */
    float *v = malloc(sizeof(float) * (size_t)n_keys * kvw);
    float *ref = malloc(sizeof(float) * (size_t)T * qw),
          *out = malloc(sizeof(float) * (size_t)T * qw);
    fill(q, (int64_t)T * qw, 2.0f);
    fill(k, (int64_t)n_keys * kvw, 2.0f);
    fill(v, (int64_t)n_keys * kvw, 1.0f);
    int bs = block_size ? block_size : INF_KV_BASIC_BLOCK;
    int n_blocks = (n_keys + bs - 1) / bs, rows = n_blocks * bs;
    void *ck = calloc((size_t)rows, inf_kv_type_bytes(kt, kvw));
    void *cv = calloc((size_t)rows, inf_kv_type_bytes(vt, kvw));
    int32_t *table = block_size ? malloc(sizeof(int32_t) * n_blocks) : NULL;
    for (int b = 0; block_size && b < n_blocks; b++)
        table[b] = n_blocks - 1 - b;
    inf_kv_view view = {.k = ck,
                        .v = cv,
                        .k_type = kt,
                        .v_type = vt,
                        .row_stride = kvw,
                        .head_dim = head_dim,
                        .block_size = bs,
                        .block_table = table};
    double max_err = 0; /* how far the stored values are from the f32 ones */
    for (int j = 0; j < n_keys; j++) {
        float *kj = k + (int64_t)j * kvw, *vj = v + (int64_t)j * kvw, back[2048];
        inf_kv_store_row(&view, j, kj, vj);
        for (int h = 0; h < n_head_kv; h++) { /* each head read back where the view says */
            inf_dtype_get(kt)->dequant(back + h * head_dim, inf_kv_k_at(&view, j, h), head_dim);
            inf_dtype_get(vt)->dequant(back + kvw + h * head_dim, inf_kv_v_at(&view, j, h),
                                       head_dim);
        }
        max_err = fmax(max_err, max_abs_diff(back, kj, kvw));
        max_err = fmax(max_err, max_abs_diff(back + kvw, vj, kvw));
        memcpy(kj, back, sizeof(float) * kvw);
        memcpy(vj, back + kvw, sizeof(float) * kvw);
    }
    /* a lossy type changed the values (so the check below could tell) */
    CHECK_MSG((kt == INF_F32 && vt == INF_F32) == (max_err == 0),
              "K %s V %s: stored values differ from f32 by %g", inf_kv_type_name(kt),
              inf_kv_type_name(vt), max_err);
    materialized(ref, q, k, v, pos0, T, n_head, n_head_kv, head_dim);
    inf_attn_shape s = {n_head, n_head_kv, head_dim, 1.0f / sqrtf((float)head_dim)};
    be->attn_prefill(be, out, q, &view, pos0, T, &s);
    double d = max_abs_diff(out, ref, (int64_t)T * qw);
    CHECK_MSG(d < 1e-4, "%s prefill K %s V %s heads %d/%d dim %d T %d: max abs diff %g", be->name,
              inf_kv_type_name(kt), inf_kv_type_name(vt), n_head, n_head_kv, head_dim, T, d);
    be->attn_decode(be, out, q + (int64_t)(T - 1) * qw, &view, n_keys, &s);
    double dd = max_abs_diff(out, ref + (int64_t)(T - 1) * qw, qw);
    CHECK_MSG(dd < 1e-4, "%s decode K %s V %s: max abs diff %g", be->name, inf_kv_type_name(kt),
              inf_kv_type_name(vt), dd);
    printf("%-8s K %-4s V %-4s heads %2d/%d dim %3d pos0 %3d T %3d: diff %.3g (storage %.3g)\n",
           be->name, inf_kv_type_name(kt), inf_kv_type_name(vt), n_head, n_head_kv, head_dim, pos0,
           T, d > dd ? d : dd, max_err);
    free(q), free(k), free(v), free(ref), free(out), free(ck), free(cv), free(table);
}

static void check_backend(const inf_backend *be) {
    /* The shapes: Qwen3-0.6B head geometry, tile boundaries (1, 17, 100). */
    check_shape(be, 16, 8, 128, 0, 1, 0);
    check_shape(be, 16, 8, 128, 0, 17, 0);
    check_shape(be, 16, 8, 128, 0, 100, 0);
    /* Awkward ones: exactly one tile, one past it, MHA and MQA, odd head_dim,
     * a prefill continuing after cached keys, a paged view. */
    check_shape(be, 4, 2, 64, 0, 64, 0);
    check_shape(be, 4, 2, 64, 0, 65, 0);
    check_shape(be, 3, 3, 10, 0, 129, 0);
    check_shape(be, 8, 1, 32, 0, 33, 0);
    check_shape(be, 6, 3, 2, 0, 7, 0);
    check_shape(be, 4, 2, 64, 70, 40, 0);
    check_shape(be, 16, 8, 128, 63, 2, 0);
    check_shape(be, 4, 2, 64, 30, 50, 16);
    check_shape(be, 2, 1, 16, 0, 1, 4);
    /* work items of 1, 7, 8, 9, 33 rows (MHA: one head per item), lanes' tails */
    check_shape(be, 2, 2, 128, 0, 7, 0);
    check_shape(be, 2, 2, 128, 5, 8, 0);
    check_shape(be, 2, 2, 64, 0, 9, 16);
    check_shape(be, 2, 2, 256, 40, 33, 0);
    check_shape(be, 1, 1, 256, 200, 1, 0);
    /* decode over several key blocks (INF_ATTN_DECODE_BLOCK): a last block of
       one key, a partial one, through a paged view */
    check_shape(be, 16, 8, 128, 256, 1, 0);
    check_shape(be, 16, 8, 128, 520, 3, 16);
    check_shape(be, 4, 2, 64, 700, 2, 0);
}

/* Every K/V type pair, the stored rows contiguous (K = V type) or paged. */
static void check_types(const inf_backend *be) {
    const inf_dtype types[] = {INF_F32, INF_F16, INF_BF16, INF_Q8_0};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            check_typed(be, 16, 8, 128, 30, 70, i == j ? 16 : 0, types[i], types[j]);
    check_typed(be, 4, 2, 32, 0, 65, 4, INF_Q8_0, INF_Q8_0);
}

int main(void) {
    rng_state = 42;
    check_backend(inf_backend_scalar());
    /* An empty backend completed with the scalar reference runs the same code. */
    inf_backend empty = {.name = "complete"};
    inf_backend_complete(&empty);
    CHECK(empty.attn_prefill != NULL && empty.attn_decode != NULL && empty.matmul != NULL &&
          empty.embed != NULL && empty.rmsnorm != NULL && empty.rope != NULL &&
          empty.swiglu != NULL && empty.add != NULL && empty.softmax != NULL &&
          empty.prepare_weight != NULL && empty.release_weight != NULL);
    check_shape(&empty, 16, 8, 128, 0, 100, 0);
    check_types(inf_backend_scalar());
    /* every SIMD level this CPU runs, on one thread and on the pool, against
     * the same reference in double (AVX2: the lanes kernel for prompts) */
    const inf_isa levels[] = {INF_ISA_AVX2, INF_ISA_AVX512, INF_ISA_AMX, INF_ISA_NEON};
    for (unsigned i = 0; i < sizeof levels / sizeof *levels; i++) {
        if (inf_isa_clamp(levels[i]) != levels[i]) continue;
        for (int pool = 0; pool < 2; pool++) {
            inf_backend *be =
                inf_backend_simd_create(levels[i], pool ? 3 : 1, pool, INF_ATTN_FLASH);
            check_backend(be);
            check_types(be);
            inf_backend_simd_free(be);
        }
    }
    return th_report();
}
