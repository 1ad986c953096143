/* Every op of the SIMD and pool backends, at every ISA level this CPU runs,
 * against the scalar reference backend on awkward shapes (odd sizes, T = 1,
 * panel tails, GQA ratios, 64-key tile edges, paged KV), with guard regions
 * around every output. The pool backend (3 threads, uneven slices) must equal
 * the single-threaded SIMD backend bit for bit.
 *
 * Tolerances (the fast paths round differently from the f32 reference):
 *   integer weight types: activations quantized to int8 per 32 (error <= amax/254
 *   per element) or to bf16 (AMX, BF16: 2^-9 relative), expanded weights to bf16:
 *     |y - ref| <= sum_i |w_i| (|x_i| 2^-7 + amax_b(i)/254) + 1e-5 sum_i |w_i x_i|
 *   F32/F16 weights (f32 FMA, other summation order): 1e-5 sum_i |w_i x_i| + 1e-6
 *   row ops and attention: 2e-5 relative (vector exp is within ~2 ulp). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"
#include "backend/kernels.h"
#include "backend/select.h"
#include "backend/simd.h"
#include "backend/trace.h"
#include "harness.h"
#include "kv/kv_type.h"
#include "quant/quantize.h"
#include "util/half.h"
#include "util/mem.h"

#define GUARD 37
static const uint32_t CANARY = 0x7fc0dead;

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}
static float frand(void) {
    return (float)(rnd() >> 8) / 16777216.0f * 2.0f - 1.0f;
}

/* n floats with GUARD canary floats on each side */
static float *galloc(size_t n) {
    float *p = malloc(sizeof(float) * (n + 2 * GUARD));
    for (size_t i = 0; i < n + 2 * GUARD; i++)
        memcpy(&p[i], &CANARY, 4);
    return p + GUARD;
}
static int guards_ok(const float *p, size_t n) {
    const float *b = p - GUARD;
    for (size_t i = 0; i < GUARD; i++)
        if (memcmp(&b[i], &CANARY, 4) || memcmp(&p[n + i], &CANARY, 4)) return 0;
    return 1;
}
static void gfree(float *p) {
    free(p - GUARD);
}

typedef struct bk {
    inf_backend *be;
    const char *label;
} bk;

/* ---- matmul ------------------------------------------------------------------------------- */

static void *make_weight_data(inf_dtype t, int64_t n_in, int64_t n_out, size_t *row_bytes) {
    *row_bytes = inf_dtype_row_bytes(t, n_in);
    size_t total = *row_bytes * (size_t)n_out;
    uint8_t *d = malloc(total + 1);
    for (size_t i = 0; i < total; i++)
        d[i] = (uint8_t)rnd();
    for (int64_t o = 0; o < n_out; o++) {
        uint8_t *row = d + (size_t)o * *row_bytes;
        switch (t) {
        case INF_F32:
            for (int64_t i = 0; i < n_in; i++)
                ((float *)row)[i] = frand();
            break;
        case INF_F16:
            for (int64_t i = 0; i < n_in; i++)
                ((uint16_t *)row)[i] = inf_f32_to_f16(frand());
            break;
        case INF_BF16:
            for (int64_t i = 0; i < n_in; i++)
                ((uint16_t *)row)[i] = inf_f32_to_bf16(frand());
            break;
        case INF_Q8_0:
            for (int64_t b = 0; b < n_in / 32; b++) {
                inf_block_q8_0 *blk = (inf_block_q8_0 *)row + b;
                blk->d = inf_f32_to_f16(0.001f + 0.01f * (float)(rnd() % 100) / 100);
                for (int j = 0; j < 32; j++)
                    if (blk->qs[j] == -128) blk->qs[j] = -127;
            }
            break;
        case INF_Q4_0:
            for (int64_t b = 0; b < n_in / 32; b++)
                ((inf_block_q4_0 *)row)[b].d =
                    inf_f32_to_f16(0.001f + 0.01f * (float)(rnd() % 100) / 100);
            break;
        case INF_Q4_K:
            for (int64_t b = 0; b < n_in / 256; b++) {
                ((inf_block_q4_K *)row)[b].d = inf_f32_to_f16(0.0005f * (float)(1 + rnd() % 8));
                ((inf_block_q4_K *)row)[b].dmin = inf_f32_to_f16(0.0003f * (float)(1 + rnd() % 8));
            }
            break;
        case INF_Q6_K:
            for (int64_t b = 0; b < n_in / 256; b++)
                ((inf_block_q6_K *)row)[b].d = inf_f32_to_f16(0.0002f * (float)(1 + rnd() % 8));
            break;
        default:
            if (inf_dtype_get(t)->quant) { /* the type's own quantizer on random weights */
                float *v = malloc(sizeof(float) * (size_t)n_in);
                for (int64_t i = 0; i < n_in; i++)
                    v[i] = 0.02f * frand() * (i % 11 == 0 ? 3.0f : 1.0f);
                inf_quantize_row(t, row, v, n_in);
                free(v);
            } else { /* grid types: random indices, signs and scales; a small f16 d first
                        (IQ1_M: in the top nibbles of its four scale words) */
                const inf_dtype_info *ti = inf_dtype_get(t);
                for (int64_t b = 0; b < n_in / ti->block; b++) {
                    uint8_t *blk = row + (size_t)b * ti->block_bytes;
                    const uint16_t dh = inf_f32_to_f16(0.0005f * (float)(1 + rnd() % 8));
                    if (t == INF_IQ1_M)
                        for (int j = 0; j < 4; j++) /* byte 2j+1 of the scales: nibble j of d */
                            blk[48 + 2 * j + 1] = (uint8_t)((blk[48 + 2 * j + 1] & 0x0F) |
                                                            ((dh >> (4 * j)) & 0xF) << 4);
                    else
                        memcpy(blk, &dh, 2);
                }
            }
            break;
        }
    }
    return d;
}

/* the error bound of the integer/bf16 paths for output (t, o) */
static double mm_bound(inf_dtype type, const float *wrow, const float *x, int64_t n) {
    double b = 0, mag = 0;
    for (int64_t i = 0; i < n; i++)
        mag += fabs((double)wrow[i] * x[i]);
    if (type == INF_F32 || type == INF_F16) return 1e-5 * mag + 1e-6;
    for (int64_t i = 0; i < n; i += 32) {
        double amax = 0;
        int m = n - i < 32 ? (int)(n - i) : 32;
        for (int j = 0; j < m; j++)
            amax = fmax(amax, fabs(x[i + j]));
        for (int j = 0; j < m; j++)
            b += fabs(wrow[i + j]) * (fabs(x[i + j]) / 128.0 + amax / 254.0);
    }
    return b + 1e-5 * mag + 1e-6;
}

static void test_matmul(bk *bks, int nb, inf_dtype type, int64_t n_in, int64_t n_out, int T) {
    size_t rb;
    void *data = make_weight_data(type, n_in, n_out, &rb);
    inf_tensor t = {.name = "w",
                    .type = type,
                    .n_dims = 2,
                    .ne = {n_in, n_out, 1, 1},
                    .data = data,
                    .nbytes = rb * (size_t)n_out};
    float *x = malloc(sizeof(float) * (size_t)(T * n_in));
    for (int64_t i = 0; i < T * n_in; i++)
        x[i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f);
    float *ref = malloc(sizeof(float) * (size_t)(T * n_out));
    inf_weight w0 = {.t = &t, .n_in = n_in, .n_out = n_out, .row_bytes = rb};
    const inf_backend *sc = inf_backend_scalar();
    sc->matmul(sc, ref, x, &w0, T);
    float *wrows = malloc(sizeof(float) * (size_t)(n_in * n_out));
    for (int64_t o = 0; o < n_out; o++)
        inf_dequantize_row(type, wrows + o * n_in, (uint8_t *)data + o * rb, n_in);
    float *prev = NULL;
    for (int b = 0; b < nb; b++) {
        inf_backend *be = bks[b].be;
        inf_weight w = w0;
        CHECK(be->prepare_weight == NULL || be->prepare_weight(be, &w) == 0);
        float *y = galloc((size_t)(T * n_out));
        be->matmul(be, y, x, &w, T);
        CHECK_MSG(guards_ok(y, (size_t)(T * n_out)), "%s matmul %s %lldx%lld T=%d wrote outside y",
                  bks[b].label, inf_dtype_get(type)->name, (long long)n_out, (long long)n_in, T);
        int bad = -1;
        double worst = 0;
        for (int tt = 0; tt < T && bad < 0; tt++)
            for (int64_t o = 0; o < n_out; o++) {
                double bound = mm_bound(type, wrows + o * n_in, x + tt * n_in, n_in);
                double d = fabs((double)y[tt * n_out + o] - ref[tt * n_out + o]);
                if (!(d <= bound)) {
                    bad = (int)(tt * n_out + o);
                    worst = d;
                    break;
                }
            }
        CHECK_MSG(bad < 0, "%s matmul %s n_out=%lld n_in=%lld T=%d: [%d] %g vs ref %g (diff %g)",
                  bks[b].label, inf_dtype_get(type)->name, (long long)n_out, (long long)n_in, T,
                  bad, bad >= 0 ? y[bad] : 0.0, bad >= 0 ? ref[bad] : 0.0, worst);
        /* pool entries follow their simd twin in bks: bit-identical */
        if (prev && strstr(bks[b].label, "pool"))
            CHECK_MSG(!memcmp(prev, y, sizeof(float) * (size_t)(T * n_out)),
                      "%s matmul %s n_out=%lld T=%d differs from single-threaded", bks[b].label,
                      inf_dtype_get(type)->name, (long long)n_out, T);
        if (be->release_weight) be->release_weight(be, &w);
        if (prev) gfree(prev);
        prev = y;
    }
    gfree(prev);
    free(wrows);
    free(ref);
    free(x);
    free(data);
}

/* Integer weights: a row's result must not depend on the batch it came in
 * (AMX prefill and VNNI decode compute the same integers and scale them in
 * the same order), so a server's output does not depend on what else it
 * batched or what its prefix cache held. */
/* matmul_n (one pass over x for Q/K/V-like weights of types tw[3], which may
 * differ, as Q4_K_M's Q4_K q and k and Q6_K v do): decode rows equal separate
 * matmuls bit for bit; prompt rows stay within the bound and do not depend on the batch. */
static void test_matmul_n_of(bk *bks, int nb, const inf_dtype tw[3], int64_t n_in, int T,
                             int64_t grow) {
    const int64_t n_outs[3] = {35 * grow, 16 * grow, 64 * grow};
    const inf_dtype type = tw[2]; /* the prompt rows' weight */
    void *data[3];
    inf_tensor t[3];
    for (int i = 0; i < 3; i++) {
        size_t rb;
        data[i] = make_weight_data(tw[i], n_in, n_outs[i], &rb);
        t[i] = (inf_tensor){.name = "w",
                            .type = tw[i],
                            .n_dims = 2,
                            .ne = {n_in, n_outs[i], 1, 1},
                            .data = data[i],
                            .nbytes = rb * (size_t)n_outs[i]};
    }
    float *x = malloc(sizeof(float) * (size_t)(T * n_in));
    for (int64_t i = 0; i < T * n_in; i++)
        x[i] = frand();
    for (int b = 0; b < nb; b++) {
        inf_backend *be = bks[b].be;
        if (!be->matmul_n) continue;
        inf_weight w[3];
        float *ys[3], *sep[3];
        for (int i = 0; i < 3; i++) {
            w[i] = (inf_weight){.t = &t[i],
                                .n_in = n_in,
                                .n_out = n_outs[i],
                                .row_bytes = inf_dtype_row_bytes(tw[i], n_in)};
            CHECK(be->prepare_weight(be, &w[i]) == 0);
            ys[i] = galloc((size_t)T * n_outs[i]);
            sep[i] = malloc(sizeof(float) * (size_t)T * n_outs[i]);
            be->matmul(be, sep[i], x, &w[i], T);
        }
        be->matmul_n(be, ys, x, (const inf_weight *const[]){&w[0], &w[1], &w[2]}, 3, T, 0);
        /* prompt rows: the prefill kernels, within the integer/bf16 bound of
         * the scalar reference; row t the same bits whether alone or in the batch */
        float *pf = malloc(sizeof(float) * (size_t)T * n_outs[2]);
        float *one = malloc(sizeof(float) * (size_t)n_outs[2]);
        float *ref = malloc(sizeof(float) * (size_t)T * n_outs[2]);
        const inf_backend *sc = inf_backend_scalar();
        sc->matmul(sc, ref, x, &w[2], T);
        float *wrow = malloc(sizeof(float) * (size_t)n_in);
        be->matmul_n(be, (float *const[]){pf}, x, (const inf_weight *const[]){&w[2]}, 1, T, 1);
        be->matmul_n(be, (float *const[]){one}, x + (size_t)(T - 1) * n_in,
                     (const inf_weight *const[]){&w[2]}, 1, 1, 1);
        CHECK_MSG(!memcmp(one, pf + (size_t)(T - 1) * n_outs[2], sizeof(float) * n_outs[2]),
                  "%s matmul_n prefill %s T=%d: the last row alone differs", bks[b].label,
                  inf_dtype_get(type)->name, T);
        int bad = 0;
        for (int tt = 0; tt < T && !bad; tt++)
            for (int64_t o = 0; o < n_outs[2] && !bad; o++) {
                inf_dequantize_row(type, wrow, (const uint8_t *)data[2] + o * w[2].row_bytes, n_in);
                double d = fabs((double)pf[tt * n_outs[2] + o] - ref[tt * n_outs[2] + o]);
                bad = !(d <= mm_bound(type, wrow, x + tt * n_in, n_in));
            }
        CHECK_MSG(!bad, "%s matmul_n prefill %s T=%d: beyond the bound", bks[b].label,
                  inf_dtype_get(type)->name, T);
        free(pf), free(one), free(ref), free(wrow);
        /* the three in one prompt pass equal three passes bit for bit (one
           pass may hold weights on AMX tiles and ones that stay off them) */
        float *all[3];
        for (int i = 0; i < 3; i++)
            all[i] = malloc(sizeof(float) * (size_t)T * n_outs[i]);
        be->matmul_n(be, all, x, (const inf_weight *const[]){&w[0], &w[1], &w[2]}, 3, T, 1);
        for (int i = 0; i < 3; i++) {
            float *alone = malloc(sizeof(float) * (size_t)T * n_outs[i]);
            be->matmul_n(be, (float *const[]){alone}, x, (const inf_weight *const[]){&w[i]}, 1, T,
                         1);
            CHECK_MSG(!memcmp(alone, all[i], sizeof(float) * (size_t)T * n_outs[i]),
                      "%s matmul_n prefill %s (weight %d of a pass of three) T=%d: differs alone",
                      bks[b].label, inf_dtype_get(tw[i])->name, i, T);
            free(alone);
            free(all[i]);
        }
        for (int i = 0; i < 3; i++) {
            CHECK_MSG(guards_ok(ys[i], (size_t)T * n_outs[i]), "%s matmul_n: wrote outside",
                      bks[b].label);
            CHECK_MSG(!memcmp(ys[i], sep[i], sizeof(float) * (size_t)T * n_outs[i]),
                      "%s matmul_n %s n_in=%lld T=%d: weight %d differs from matmul", bks[b].label,
                      inf_dtype_get(tw[i])->name, (long long)n_in, T, i);
            gfree(ys[i]);
            free(sep[i]);
            be->release_weight(be, &w[i]);
        }
    }
    free(x);
    for (int i = 0; i < 3; i++)
        free(data[i]);
}

static void test_matmul_n(bk *bks, int nb, inf_dtype type, int64_t n_in, int T, int64_t grow) {
    test_matmul_n_of(bks, nb, (const inf_dtype[3]){type, type, type}, n_in, T, grow);
}

static void test_batch_invariance(bk *bks, int nb, inf_dtype type) {
    const int64_t n_in = 512, n_out = 48;
    const int T = 37;
    size_t rb;
    void *data = make_weight_data(type, n_in, n_out, &rb);
    inf_tensor t = {.name = "w",
                    .type = type,
                    .n_dims = 2,
                    .ne = {n_in, n_out, 1, 1},
                    .data = data,
                    .nbytes = rb * (size_t)n_out};
    float *x = malloc(sizeof(float) * (size_t)(T * n_in));
    for (int64_t i = 0; i < T * n_in; i++)
        x[i] = frand();
    float *yb = malloc(sizeof(float) * (size_t)(T * n_out)),
          *y1 = malloc(sizeof(float) * (size_t)n_out);
    for (int b = 0; b < nb; b++) {
        inf_backend *be = bks[b].be;
        inf_weight w = {.t = &t, .n_in = n_in, .n_out = n_out, .row_bytes = rb};
        be->prepare_weight(be, &w);
        be->matmul(be, yb, x, &w, T);
        int same = 1;
        for (int r = 0; r < T; r++) {
            be->matmul(be, y1, x + r * n_in, &w, 1);
            same &= !memcmp(y1, yb + r * n_out, sizeof(float) * (size_t)n_out);
        }
        /* decode rows: the same bits in any batch (AMX int8 tiles from 16 rows
         * compute the VNNI kernels' integers; other kinds stay on the dots) */
        CHECK_MSG(same, "%s matmul %s: rows of a %d-row batch differ from the same rows alone",
                  bks[b].label, inf_dtype_get(type)->name, T);
        be->release_weight(be, &w);
    }
    free(x), free(yb), free(y1), free(data);
}

/* ---- row ops ------------------------------------------------------------------------------ */

static void check_rel(const char *what, const char *label, const float *a, const float *ref,
                      size_t n, double rel, double abs_tol) {
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (!(fabs((double)a[i] - ref[i]) <= rel * fabs(ref[i]) + abs_tol)) bad = i;
    CHECK_MSG(bad == n, "%s %s: [%zu] %.9g vs ref %.9g", label, what, bad, bad < n ? a[bad] : 0.0,
              bad < n ? ref[bad] : 0.0);
}

/* Embedding rows of every type: the SIMD dequantizers against the scalar ones. */
static void test_embed(bk *bks, int nb, inf_dtype type, int64_t n, int64_t rows, int T) {
    size_t row_bytes;
    void *data = make_weight_data(type, n, rows, &row_bytes);
    inf_tensor table = {.name = "embd",
                        .type = type,
                        .n_dims = 2,
                        .ne = {n, rows, 1, 1},
                        .data = data,
                        .nbytes = row_bytes * (size_t)rows};
    int32_t ids[64];
    for (int t = 0; t < T; t++)
        ids[t] = (int32_t)(rnd() % (uint32_t)rows);
    float *ref = malloc(sizeof(float) * (size_t)T * n);
    const inf_backend *sc = inf_backend_scalar();
    sc->embed(sc, ref, &table, ids, T);
    char what[64];
    snprintf(what, sizeof what, "embed %s n=%lld T=%d", inf_dtype_get(type)->name, (long long)n, T);
    for (int b = 0; b < nb; b++) {
        float *y = galloc((size_t)T * n);
        bks[b].be->embed(bks[b].be, y, &table, ids, T);
        CHECK_MSG(guards_ok(y, (size_t)T * n), "%s %s: wrote outside out", bks[b].label, what);
        check_rel(what, bks[b].label, y, ref, (size_t)T * n, 1e-6, 0);
        gfree(y);
    }
    free(ref);
    free(data);
}

/* The MoE weighted sum: every backend gives the scalar reference's bits,
 * and a row's result does not depend on the rows beside it. */
static void test_moe_sum(bk *bks, int nb, int T, int k, int n) {
    const inf_backend *sc = inf_backend_scalar();
    size_t N = (size_t)T * n, X = (size_t)T * k * n;
    float *x = malloc(sizeof(float) * X), *w = malloc(sizeof(float) * (size_t)T * k),
          *y0 = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * N);
    for (size_t i = 0; i < X; i++)
        x[i] = frand() * 3;
    for (int i = 0; i < T * k; i++)
        w[i] = frand();
    for (size_t i = 0; i < N; i++)
        y0[i] = frand();
    memcpy(ref, y0, sizeof(float) * N);
    sc->moe_sum(sc, ref, x, w, T, k, n);
    char what[64];
    snprintf(what, sizeof what, "moe_sum T=%d k=%d n=%d", T, k, n);
    for (int b = 0; b < nb; b++) {
        inf_backend *be = bks[b].be;
        float *y = galloc(N);
        memcpy(y, y0, sizeof(float) * N);
        be->moe_sum(be, y, x, w, T, k, n);
        CHECK_MSG(guards_ok(y, N), "%s %s: wrote outside y", bks[b].label, what);
        check_rel(what, bks[b].label, y, ref, N, 0, 0);
        /* the last row alone */
        float *one = galloc((size_t)n);
        memcpy(one, y0 + (size_t)(T - 1) * n, sizeof(float) * (size_t)n);
        be->moe_sum(be, one, x + (size_t)(T - 1) * k * n, w + (size_t)(T - 1) * k, 1, k, n);
        CHECK_MSG(!memcmp(one, y + (size_t)(T - 1) * n, sizeof(float) * (size_t)n),
                  "%s %s: the last row differs when summed alone", bks[b].label, what);
        gfree(one);
        gfree(y);
    }
    free(x), free(w), free(y0), free(ref);
}

static void test_row_ops(bk *bks, int nb, int rows, int n) {
    const inf_backend *sc = inf_backend_scalar();
    size_t N = (size_t)rows * n;
    float *x = malloc(sizeof(float) * N), *x2 = malloc(sizeof(float) * N),
          *w = malloc(sizeof(float) * n);
    for (size_t i = 0; i < N; i++)
        x[i] = frand() * 3, x2[i] = frand() * 3;
    for (int i = 0; i < n; i++)
        w[i] = frand();
    float *ref = malloc(sizeof(float) * N);
    float *prev[5] = {0};
    uint64_t seed = rng; /* every backend sees the same rope input */
    for (int b = 0; b < nb; b++) {
        rng = seed;
        inf_backend *be = bks[b].be;
        float *outs[5];
        /* rmsnorm */
        sc->rmsnorm(sc, ref, x, w, rows, n, 1e-6f);
        float *y = galloc(N);
        be->rmsnorm(be, y, x, w, rows, n, 1e-6f);
        CHECK(guards_ok(y, N));
        check_rel("rmsnorm", bks[b].label, y, ref, N, 2e-5, 1e-6);
        outs[0] = y;
        /* swiglu */
        sc->swiglu(sc, ref, x, x2, (int64_t)N);
        y = galloc(N);
        be->swiglu(be, y, x, x2, (int64_t)N);
        CHECK(guards_ok(y, N));
        check_rel("swiglu", bks[b].label, y, ref, N, 2e-5, 1e-6);
        outs[1] = y;
        /* add */
        memcpy(ref, x, sizeof(float) * N);
        sc->add(sc, ref, x2, (int64_t)N);
        y = galloc(N);
        memcpy(y, x, sizeof(float) * N);
        be->add(be, y, x2, (int64_t)N);
        CHECK(guards_ok(y, N));
        check_rel("add", bks[b].label, y, ref, N, 0, 0);
        outs[2] = y;
        /* softmax over one row of N */
        memcpy(ref, x, sizeof(float) * N);
        sc->softmax(sc, ref, (int)N);
        y = galloc(N);
        memcpy(y, x, sizeof(float) * N);
        be->softmax(be, y, (int)N);
        CHECK(guards_ok(y, N));
        check_rel("softmax", bks[b].label, y, ref, N, 2e-5, 1e-9);
        outs[3] = y;
        /* rope: rows = T, n = n_heads * head_dim with head_dim = 2 * (n / 4) ... use heads of n/2
         */
        int head_dim = (n / 2) & ~1, n_heads = 2;
        /* every third shape partial (Qwen3.5: the first quarter of a head) */
        int n_rot = n % 3 == 0 && head_dim >= 8 ? (head_dim / 4) & ~1 : head_dim;
        if (head_dim >= 2) {
            int half = n_rot / 2, n_ctx = rows + 7;
            float *ct = malloc(sizeof(float) * (size_t)n_ctx * half),
                  *st = malloc(sizeof(float) * (size_t)n_ctx * half);
            for (int p = 0; p < n_ctx; p++)
                for (int i = 0; i < half; i++) {
                    double f = p * pow(10000.0, -2.0 * i / n_rot);
                    ct[p * half + i] = (float)cos(f);
                    st[p * half + i] = (float)sin(f);
                }
            int32_t *pos = malloc(sizeof(int32_t) * (size_t)rows);
            for (int t = 0; t < rows; t++)
                pos[t] = (t * 5 + 3) % n_ctx;
            size_t M = (size_t)rows * n_heads * head_dim;
            float *xr = malloc(sizeof(float) * M);
            for (size_t i = 0; i < M; i++)
                xr[i] = frand();
            float *rr = malloc(sizeof(float) * M);
            memcpy(rr, xr, sizeof(float) * M);
            sc->rope(sc, rr, pos, rows, n_heads, head_dim, n_rot, ct, st);
            int kept = 1; /* the reference leaves the dims past n_rot as they were */
            for (size_t i = 0; i < M; i++)
                if ((int)(i % (size_t)head_dim) >= n_rot && rr[i] != xr[i]) kept = 0;
            CHECK_MSG(kept, "rope n_rot %d of %d changed an unrotated element", n_rot, head_dim);
            y = galloc(M);
            memcpy(y, xr, sizeof(float) * M);
            be->rope(be, y, pos, rows, n_heads, head_dim, n_rot, ct, st);
            CHECK(guards_ok(y, M));
            check_rel("rope", bks[b].label, y, rr, M, 1e-6, 1e-6);
            outs[4] = y;
            free(ct), free(st), free(pos), free(xr), free(rr);
        } else {
            outs[4] = galloc(1);
        }
        if (prev[0] && strstr(bks[b].label, "pool")) {
            CHECK_MSG(!memcmp(prev[0], outs[0], sizeof(float) * N), "%s rmsnorm not bit-identical",
                      bks[b].label);
            CHECK_MSG(!memcmp(prev[1], outs[1], sizeof(float) * N), "%s swiglu not bit-identical",
                      bks[b].label);
            CHECK_MSG(!memcmp(prev[2], outs[2], sizeof(float) * N), "%s add not bit-identical",
                      bks[b].label);
            CHECK_MSG(!memcmp(prev[3], outs[3], sizeof(float) * N), "%s softmax not bit-identical",
                      bks[b].label);
            if (head_dim >= 2)
                CHECK_MSG(!memcmp(prev[4], outs[4], sizeof(float) * (size_t)rows * 2 * head_dim),
                          "%s rope not bit-identical", bks[b].label);
        }
        for (int i = 0; i < 5; i++) {
            if (prev[i]) gfree(prev[i]);
            prev[i] = outs[i];
        }
    }
    for (int i = 0; i < 5; i++)
        gfree(prev[i]);
    free(x), free(x2), free(w), free(ref);
}

/* ---- attention ---------------------------------------------------------------------------- */

/* K and V stored as kt/vt (kv_view.h): every backend against the scalar
 * reference reading the same stored rows. */
static void test_attention_typed(bk *bks, int nb, int n_head, int n_head_kv, int hd, int pos0,
                                 int T, int paged, inf_dtype kt, inf_dtype vt) {
    const inf_backend *sc = inf_backend_scalar();
    int n_keys = pos0 + T, kvw = n_head_kv * hd, qw = n_head * hd;
    int block = 16, n_blocks = (n_keys + block - 1) / block + 1;
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    for (int i = 0; i < n_blocks; i++)
        table[i] = (i * 7 + 3) % n_blocks; /* a permutation (n_blocks odd or not) */
    /* make it a true permutation */
    for (int i = 0; i < n_blocks; i++)
        table[i] = n_blocks - 1 - i;
    int rows_alloc = n_blocks * block; /* whole blocks, paged or not (kv_view.h) */
    /* rows with a gap after them (at the end of each block's heads); q8_0 rows are whole blocks */
    int stride = kt == INF_Q8_0 || vt == INF_Q8_0 ? kvw + 32 : kvw + 3;
    float *K = malloc(sizeof(float) * (size_t)rows_alloc * stride),
          *V = malloc(sizeof(float) * (size_t)rows_alloc * stride);
    for (size_t i = 0; i < (size_t)rows_alloc * stride; i++)
        K[i] = frand(), V[i] = frand();
    size_t krb = inf_kv_type_bytes(kt, stride), vrb = inf_kv_type_bytes(vt, stride);
    uint8_t *Kt = malloc(krb * (size_t)rows_alloc), *Vt = malloc(vrb * (size_t)rows_alloc);
    for (int r = 0; r < rows_alloc; r++) {
        inf_dtype_get(kt)->quant(Kt + (size_t)r * krb, K + (size_t)r * stride, stride);
        inf_dtype_get(vt)->quant(Vt + (size_t)r * vrb, V + (size_t)r * stride, stride);
    }
    inf_kv_view kv = {.k = Kt,
                      .v = Vt,
                      .k_type = kt,
                      .v_type = vt,
                      .row_stride = stride,
                      .head_dim = hd,
                      .block_size = block,
                      .block_table = paged ? table : NULL};
    inf_attn_shape s = {
        .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd)};
    float *q = malloc(sizeof(float) * (size_t)T * qw);
    for (size_t i = 0; i < (size_t)T * qw; i++)
        q[i] = frand() * 2;
    float *ref = malloc(sizeof(float) * (size_t)T * qw);
    sc->attn_prefill(sc, ref, q, &kv, pos0, T, &s);
    float *refd = malloc(sizeof(float) * (size_t)qw);
    const float *qlast = q + (size_t)(T - 1) * qw;
    sc->attn_decode(sc, refd, qlast, &kv, n_keys, &s);
    float *prev = NULL, *prevd = NULL;
    char what[96];
    snprintf(what, sizeof what, "attn h=%d/%d hd=%d pos0=%d T=%d%s K %s V %s", n_head, n_head_kv,
             hd, pos0, T, paged ? " paged" : "", inf_kv_type_name(kt), inf_kv_type_name(vt));
    for (int b = 0; b < nb; b++) {
        inf_backend *be = bks[b].be;
        float *y = galloc((size_t)T * qw);
        be->attn_prefill(be, y, q, &kv, pos0, T, &s);
        CHECK_MSG(guards_ok(y, (size_t)T * qw), "%s %s: wrote outside out", bks[b].label, what);
        check_rel(what, bks[b].label, y, ref, (size_t)T * qw, 2e-4, 2e-5);
        /* the tail of the span run alone (a prompt after a reused prefix)
         * gives the same bits: a row's prefill result ignores its item's rows */
        int off = T / 2;
        if (T - off >= 2) {
            float *yt = galloc((size_t)(T - off) * qw);
            be->attn_prefill(be, yt, q + (size_t)off * qw, &kv, pos0 + off, T - off, &s);
            CHECK_MSG(!memcmp(yt, y + (size_t)off * qw, sizeof(float) * (size_t)(T - off) * qw),
                      "%s %s: rows %d.. differ when run as their own span", bks[b].label, what,
                      off);
            gfree(yt);
        }
        float *yd = galloc((size_t)qw);
        be->attn_decode(be, yd, qlast, &kv, n_keys, &s);
        CHECK(guards_ok(yd, (size_t)qw));
        check_rel("decode", bks[b].label, yd, refd, (size_t)qw, 2e-4, 2e-5);
        if (prev && strstr(bks[b].label, "pool")) {
            CHECK_MSG(!memcmp(prev, y, sizeof(float) * (size_t)T * qw), "%s %s not bit-identical",
                      bks[b].label, what);
            CHECK_MSG(!memcmp(prevd, yd, sizeof(float) * (size_t)qw),
                      "%s %s decode not bit-identical", bks[b].label, what);
        }
        if (prev) gfree(prev), gfree(prevd);
        prev = y;
        prevd = yd;
    }
    gfree(prev), gfree(prevd);
    /* the materialized path kept for measurements (inferno bench --attn materialized) */
    const inf_kernels *k5 = inf_kernels_get(inf_isa_clamp(INF_ISA_AVX512));
    if (k5->attn_materialized && (hd == 64 || hd == 128) && kt == INF_F32 && vt == INF_F32) {
        size_t ld = ((size_t)n_keys + 15) & ~(size_t)15;
        float *S = malloc(sizeof(float) * (size_t)T * ld), *y = galloc((size_t)T * qw);
        for (int h = 0; h < n_head; h++)
            k5->attn_materialized(y, q, &kv, pos0, T, h, &s, S);
        CHECK(guards_ok(y, (size_t)T * qw));
        check_rel(what, "materialized", y, ref, (size_t)T * qw, 2e-4, 2e-5);
        gfree(y);
        free(S);
    }
    free(table), free(K), free(V), free(Kt), free(Vt), free(q), free(ref), free(refd);
}

static void test_attention(bk *bks, int nb, int n_head, int n_head_kv, int hd, int pos0, int T,
                           int paged) {
    test_attention_typed(bks, nb, n_head, n_head_kv, hd, pos0, T, paged, INF_F32, INF_F32);
}

/* first float where a[n] and b[n] differ in bits, or n */
static size_t first_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof(float))) return i;
    return n;
}

/* One attention work item (kernels.h) straight into each level's attn_rows,
 * against the generic table's: R rows with their own limits (causal: two heads
 * per position from pos0 on; or random in 1..n_keys), K/V stored as kt/vt,
 * the second KV head of a view (paged or not) over n_keys rows. Prefill items
 * must give each row the bits it gets alone (R = 1) or with its rows reversed
 * and must stay inside inf_attn_scratch_floats(R, hd) and their outputs. */
/* K/V rows of types kt/vt, kvw wide, n_rows of them with random values (K in
 * [-2, 2), V in [-1, 1)), as a view in blocks of `block` rows (paged when a
 * table is given); *Kt and *Vt hold the rows (caller frees). */
static inf_kv_view random_kv(inf_dtype kt, inf_dtype vt, int kvw, int hd, int n_rows, int block,
                             const int32_t *table, uint8_t **Kt, uint8_t **Vt) {
    float *row = malloc(sizeof(float) * (size_t)kvw);
    size_t krb = inf_kv_type_bytes(kt, kvw), vrb = inf_kv_type_bytes(vt, kvw);
    *Kt = malloc(krb * (size_t)n_rows);
    *Vt = malloc(vrb * (size_t)n_rows);
    for (int r = 0; r < n_rows; r++) {
        for (int i = 0; i < kvw; i++)
            row[i] = frand() * 2;
        inf_dtype_get(kt)->quant(*Kt + (size_t)r * krb, row, kvw);
        for (int i = 0; i < kvw; i++)
            row[i] = frand();
        inf_dtype_get(vt)->quant(*Vt + (size_t)r * vrb, row, kvw);
    }
    free(row);
    return (inf_kv_view){.k = *Kt,
                         .v = *Vt,
                         .k_type = kt,
                         .v_type = vt,
                         .row_stride = kvw,
                         .head_dim = hd,
                         .block_size = block,
                         .block_table = table};
}

static void test_attn_item(int R, int hd, int prefill, int causal, int pos0, int paged,
                           inf_dtype kt, inf_dtype vt) {
    const int n_kv = 2, kvw = n_kv * hd, block = 16, n_keys = 300;
    const int n_blocks = (n_keys + block - 1) / block;
    int32_t table[32];
    for (int i = 0; i < n_blocks; i++)
        table[i] = (i * 5 + 2) % n_blocks; /* n_blocks = 19: a permutation */
    uint8_t *Kt, *Vt;
    inf_kv_view kv =
        random_kv(kt, vt, kvw, hd, n_blocks * block, block, paged ? table : NULL, &Kt, &Vt);
    float *q = malloc(sizeof(float) * (size_t)R * hd); /* [R][hd] */
    for (int i = 0; i < R * hd; i++)
        q[i] = frand() * 2;
    inf_attn_rows it = {.R = R, .prefill = prefill, .kv_head = 1};
    for (int r = 0; r < R; r++) {
        it.lim[r] = causal ? pos0 + r / 2 + 1 : 1 + (int)(rnd() % n_keys);
        if (it.lim[r] > it.max_lim) it.max_lim = it.lim[r];
        it.q[r] = q + (size_t)r * hd;
    }
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t n_out = (size_t)R * hd, n_scr = inf_attn_scratch_floats(R, hd);
    float *ref = malloc(sizeof(float) * n_out), *scr = galloc(n_scr);
    for (int r = 0; r < R; r++)
        it.out[r] = ref + (size_t)r * hd;
    inf_kernels_get(INF_ISA_SCALAR)->attn_rows(&it, &kv, hd, scale, scr);
    char what[128];
    snprintf(what, sizeof what, "attn item R=%d hd=%d %s %s pos0=%d%s K %s V %s", R, hd,
             prefill ? "prefill" : "decode", causal ? "causal" : "random lims", pos0,
             paged ? " paged" : "", inf_kv_type_name(kt), inf_kv_type_name(vt));

    const inf_isa levels[] = {INF_ISA_AVX2, INF_ISA_AVX512, INF_ISA_AMX, INF_ISA_NEON};
    for (unsigned li = 0; li < sizeof levels / sizeof *levels; li++) {
        if (inf_isa_clamp(levels[li]) != levels[li]) continue;
        const inf_kernels *k = inf_kernels_get(levels[li]);
        const char *label = inf_isa_name(levels[li]);
        float *y = galloc(n_out), *y1 = galloc(hd), *yr = galloc(n_out);
        for (int r = 0; r < R; r++)
            it.out[r] = y + (size_t)r * hd;
        k->attn_rows(&it, &kv, hd, scale, scr);
        CHECK_MSG(guards_ok(y, n_out), "%s %s: wrote outside its outputs", label, what);
        CHECK_MSG(guards_ok(scr, n_scr), "%s %s: wrote past inf_attn_scratch_floats", label, what);
        check_rel(what, label, y, ref, n_out, 2e-4, 2e-5);
        if (prefill) {
            /* each row alone, and the rows in reverse order: the same bits */
            size_t bad = n_out;
            for (int r = 0; r < R && bad == n_out; r++) {
                inf_attn_rows one = {.R = 1, .prefill = 1, .kv_head = 1, .max_lim = it.lim[r]};
                one.q[0] = it.q[r];
                one.lim[0] = it.lim[r];
                one.out[0] = y1;
                k->attn_rows(&one, &kv, hd, scale, scr);
                size_t i = first_diff(y1, y + (size_t)r * hd, (size_t)hd);
                if (i < (size_t)hd) bad = (size_t)r * hd + i;
            }
            CHECK_MSG(bad == n_out, "%s %s: row %zu alone differs at [%zu]: %.9g vs %.9g", label,
                      what, bad / hd, bad % hd, bad < n_out ? y1[bad % hd] : 0.0,
                      bad < n_out ? y[bad] : 0.0);
            inf_attn_rows rev = it;
            for (int r = 0; r < R; r++) {
                rev.q[r] = it.q[R - 1 - r];
                rev.lim[r] = it.lim[R - 1 - r];
                rev.out[r] = yr + (size_t)(R - 1 - r) * hd;
            }
            k->attn_rows(&rev, &kv, hd, scale, scr);
            bad = first_diff(yr, y, n_out);
            CHECK_MSG(bad == n_out, "%s %s: rows reversed differ at row %zu [%zu]: %.9g vs %.9g",
                      label, what, bad / hd, bad % hd, bad < n_out ? yr[bad] : 0.0,
                      bad < n_out ? y[bad] : 0.0);
            CHECK(guards_ok(y1, (size_t)hd) && guards_ok(yr, n_out));
        }
        gfree(y), gfree(y1), gfree(yr);
    }
    gfree(scr);
    free(Kt), free(Vt), free(q), free(ref);
}

/* A decode work item as simd.c builds one: R query heads of one KV head over
 * key block kb (keys kb*INF_ATTN_DECODE_BLOCK up to the end of the block or
 * n_keys), leaving partials (part: accumulator, max, sum per row), or with
 * kb < 0 the whole span into out. Every level against the generic table's
 * (the normalized output acc / l and the log-sum-exp m + log l), and each
 * row must give the same bits alone and with the rows reversed (a row's
 * result never depends on the other heads of its group). */
static void test_attn_decode_item(int R, int hd, int n_keys, int kb, int paged, inf_dtype kt,
                                  inf_dtype vt) {
    const int n_kv = 2, kvw = n_kv * hd, block = 16;
    const int n_blocks = (n_keys + block - 1) / block;
    int32_t *table = malloc(sizeof(int32_t) * (size_t)n_blocks);
    for (int i = 0; i < n_blocks; i++)
        table[i] = n_blocks - 1 - i;
    uint8_t *Kt, *Vt;
    inf_kv_view kv =
        random_kv(kt, vt, kvw, hd, n_blocks * block, block, paged ? table : NULL, &Kt, &Vt);
    float *q = malloc(sizeof(float) * (size_t)R * hd); /* [R][hd] */
    for (int i = 0; i < R * hd; i++)
        q[i] = frand() * 2;
    const int k0 = kb < 0 ? 0 : kb * INF_ATTN_DECODE_BLOCK;
    const int k1 = kb < 0 ? n_keys : k0 + INF_ATTN_DECODE_BLOCK;
    const int lim = n_keys < k1 ? n_keys : k1;
    CHECK(lim > k0);
    const size_t stride = (size_t)hd + 2, n_res = kb < 0 ? (size_t)R * hd : (size_t)R * stride;
    inf_attn_rows it = {.R = R, .kv_head = 1, .max_lim = lim, .k0 = k0};
    for (int r = 0; r < R; r++) {
        it.q[r] = q + (size_t)r * hd;
        it.lim[r] = lim;
    }
    /* results in res[n_res]: outputs [R][hd] or partials [R][hd + 2] */
#define SET_RES(item, res, order)                                                                  \
    do {                                                                                           \
        (item).part = kb < 0 ? NULL : (res);                                                       \
        for (int r_ = 0; r_ < (item).R; r_++)                                                      \
            (item).out[r_] = (res) + (size_t)(order)[r_] * hd;                                     \
    } while (0)
    int fwd[INF_ATTN_MAX_R], back[INF_ATTN_MAX_R];
    for (int r = 0; r < R; r++)
        fwd[r] = r, back[r] = R - 1 - r;
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t n_scr = inf_attn_scratch_floats(R, hd);
    float *ref = galloc(n_res), *scr = galloc(n_scr);
    SET_RES(it, ref, fwd);
    inf_kernels_get(INF_ISA_SCALAR)->attn_rows(&it, &kv, hd, scale, scr);
    char what[128];
    snprintf(what, sizeof what, "decode item R=%d hd=%d keys %d block %d%s K %s V %s", R, hd,
             n_keys, kb, paged ? " paged" : "", inf_kv_type_name(kt), inf_kv_type_name(vt));
    /* the partials normalized: acc / l, and m + log l */
    float *refn = malloc(sizeof(float) * (size_t)R * hd), *gotn = malloc(sizeof(float) * R * hd);
    const inf_isa levels[] = {INF_ISA_AVX2, INF_ISA_AVX512, INF_ISA_AMX, INF_ISA_NEON};
    for (unsigned li = 0; li < sizeof levels / sizeof *levels; li++) {
        if (inf_isa_clamp(levels[li]) != levels[li]) continue;
        const inf_kernels *k = inf_kernels_get(levels[li]);
        const char *label = inf_isa_name(levels[li]);
        float *y = galloc(n_res), *y1 = galloc(n_res), *yr = galloc(n_res);
        SET_RES(it, y, fwd);
        k->attn_rows(&it, &kv, hd, scale, scr);
        CHECK_MSG(guards_ok(y, n_res), "%s %s: wrote outside its outputs", label, what);
        CHECK_MSG(guards_ok(scr, n_scr), "%s %s: wrote past inf_attn_scratch_floats", label, what);
        if (kb < 0) {
            check_rel(what, label, y, ref, n_res, 2e-4, 2e-5);
        } else {
            double worst = 0;
            for (int r = 0; r < R; r++) {
                const float *pr = ref + r * stride, *pg = y + r * stride;
                for (int d = 0; d < hd; d++) {
                    refn[r * hd + d] = pr[d] / pr[hd + 1];
                    gotn[r * hd + d] = pg[d] / pg[hd + 1];
                }
                const double e = fabs((pr[hd] + log(pr[hd + 1])) - (pg[hd] + log(pg[hd + 1])));
                worst = e > worst ? e : worst;
            }
            check_rel(what, label, gotn, refn, (size_t)R * hd, 2e-4, 2e-5);
            CHECK_MSG(worst < 1e-4, "%s %s: log-sum-exp off by %g", label, what, worst);
        }
        /* each row alone, and the rows reversed: the same bits */
        size_t bad = n_res;
        const size_t per = kb < 0 ? (size_t)hd : stride;
        for (int r = 0; r < R && bad == n_res; r++) {
            inf_attn_rows one = it;
            one.R = 1;
            one.q[0] = it.q[r];
            int z = 0;
            SET_RES(one, y1, &z);
            k->attn_rows(&one, &kv, hd, scale, scr);
            size_t i = first_diff(y1, y + r * per, per);
            if (i < per) bad = r * per + i;
        }
        CHECK_MSG(bad == n_res, "%s %s: row %zu alone differs at [%zu]", label, what, bad / per,
                  bad % per);
        inf_attn_rows rev = it;
        for (int r = 0; r < R; r++)
            rev.q[r] = it.q[R - 1 - r];
        SET_RES(rev, yr, back);
        if (kb >= 0) { /* partials go by row position: reverse them back */
            k->attn_rows(&rev, &kv, hd, scale, scr);
            float *tmp = malloc(sizeof(float) * n_res);
            for (int r = 0; r < R; r++)
                memcpy(tmp + r * stride, yr + (size_t)(R - 1 - r) * stride, sizeof(float) * stride);
            memcpy(yr, tmp, sizeof(float) * n_res);
            free(tmp);
        } else {
            k->attn_rows(&rev, &kv, hd, scale, scr);
        }
        bad = first_diff(yr, y, n_res);
        CHECK_MSG(bad == n_res, "%s %s: rows reversed differ at row %zu [%zu]", label, what,
                  bad / per, bad % per);
        CHECK(guards_ok(y1, n_res) && guards_ok(yr, n_res));
        gfree(y), gfree(y1), gfree(yr);
    }
#undef SET_RES
    gfree(ref), gfree(scr);
    free(refn), free(gotn), free(table), free(Kt), free(Vt), free(q);
}

/* ---- the pool itself --------------------------------------------------------------------------
 */

int main(void) {
    inf_isa best = inf_isa_best();
    printf("cpu: best level %s\n", inf_isa_name(best));
    if (best == INF_ISA_AMX)
        CHECK_MSG(inf_amx_selftest() == 0, "AMX tile config read-back / tile product");

    const inf_isa levels[] = {INF_ISA_SCALAR, INF_ISA_AVX2, INF_ISA_AVX512, INF_ISA_AMX,
                              INF_ISA_NEON};
    bk bks[16];
    int nb = 0;
    for (unsigned i = 0; i < sizeof levels / sizeof *levels; i++) {
        inf_isa isa = levels[i];
        if (inf_isa_clamp(isa) != isa) continue;
        static char labels[16][32];
        snprintf(labels[nb], 32, "simd-%s", inf_isa_name(isa));
        bks[nb].be = inf_backend_simd_create(isa, 1, false, INF_ATTN_FLASH);
        bks[nb].label = labels[nb];
        nb++;
        snprintf(labels[nb], 32, "pool3-%s", inf_isa_name(isa));
        bks[nb].be = inf_backend_simd_create(isa, 3, true, INF_ATTN_FLASH);
        bks[nb].label = labels[nb];
        nb++;
    }
    /* the tracing wrapper must forward exactly */
    static char trl[] = "traced-pool3";
    bks[nb].be = inf_trace_wrap(bks[nb - 1].be);
    bks[nb].label = trl;
    nb++;

    const inf_dtype types[] = {INF_F32, INF_F16, INF_BF16, INF_Q8_0, INF_Q4_0, INF_Q4_K, INF_Q6_K};
    /* the other types share those paths (dequantization rows, or another type's
     * packed kind): fewer shapes each */
    const inf_dtype others[] = {INF_Q4_1,    INF_Q5_0,   INF_Q5_1,    INF_Q2_K,
                                INF_Q3_K,    INF_Q5_K,   INF_IQ4_NL,  INF_IQ4_XS,
                                INF_MXFP4,   INF_IQ2_S,  INF_IQ3_XXS, INF_IQ3_S,
                                INF_IQ2_XXS, INF_IQ2_XS, INF_IQ1_S,   INF_IQ1_M};
    for (unsigned ti = 0; ti < sizeof others / sizeof *others; ti++) {
        const inf_dtype t = others[ti];
        const int64_t n_in = inf_dtype_get(t)->block == 256 ? 512 : 160;
        test_embed(bks, nb, t, n_in, 7, 3);
        test_matmul_n(bks, nb, t, n_in, 21, 1);
        const int64_t n_outs[] = {1, 17, 35};
        const int Ts[] = {1, 5, 33};
        for (unsigned b = 0; b < 3; b++)
            for (unsigned c = 0; c < 3; c++)
                test_matmul(bks, nb, t, n_in, n_outs[b], Ts[c]);
    }
    /* Q3_K's and Q2_K's own super-block kinds (Q3_KS, Q2_KS) along panels
       past 24 KiB (x_touch) */
    for (int T = 1; T <= 4; T += 3) {
        test_matmul(bks, nb, INF_Q3_K, 4096, 35, T);
        test_matmul(bks, nb, INF_Q2_K, 4096, 35, T);
    }
    for (unsigned ti = 0; ti < sizeof types / sizeof *types; ti++) {
        int blk = inf_dtype_get(types[ti])->block;
        test_embed(bks, nb, types[ti], blk == 256 ? 512 : 96, 7, 3);
        test_embed(bks, nb, types[ti], blk == 256 ? 768 : 1024, 11, 40);
        for (int T = 1; T <= 40; T += 19)
            test_matmul_n(bks, nb, types[ti], blk == 256 ? 512 : 256, T, 1);
    }
    /* weights of different integer kinds in one pass (Q4_K_M's q, k and v;
     * three kinds), decode rows, 4 and prompt rows, and along many panels */
    const inf_dtype mixes[][3] = {{INF_Q4_K, INF_Q4_K, INF_Q6_K},
                                  {INF_Q8_0, INF_Q5_K, INF_Q4_0},
                                  {INF_Q2_K, INF_Q3_K, INF_Q4_K}}; /* Q2_KS off AMX tiles */
    for (unsigned m = 0; m < sizeof mixes / sizeof *mixes; m++) {
        const int Ts[] = {1, 4, 21};
        for (unsigned i = 0; i < sizeof Ts / sizeof *Ts; i++)
            test_matmul_n_of(bks, nb, mixes[m], 512, Ts[i], 1);
        test_matmul_n_of(bks, nb, mixes[m], 512, 1, 40);
    }
    for (unsigned ti = 0; ti < sizeof types / sizeof *types; ti++) {
        inf_dtype t = types[ti];
        int blk = inf_dtype_get(t)->block;
        int64_t n_ins[3] = {blk == 1 ? 37 : blk, blk == 256 ? 512 : (blk == 1 ? 96 : 160), 1024};
        const int64_t n_outs[] = {1, 16, 17, 35, 64};
        const int Ts[] = {1, 3, 5, 33};
        for (int a = 0; a < 3; a++)
            for (unsigned b = 0; b < sizeof n_outs / sizeof *n_outs; b++)
                for (unsigned c = 0; c < sizeof Ts / sizeof *Ts; c++) {
                    if (n_ins[a] == 1024 && (n_outs[b] != 35 || Ts[c] == 3)) continue;
                    test_matmul(bks, nb, t, n_ins[a], n_outs[b], Ts[c]);
                }
        test_matmul(bks, nb, t, blk == 1 ? 64 : 256, 50, 70); /* > 64 tokens, AMX with a tail */
        /* decode rows along panels past 24 KiB, whose groups also load x
           further on (kern_avx512.c's x_touch); Q8_0's 16384 past the most
           positions, Q6_K's touching super-groups */
        for (int T = 1; T <= 4; T += 3) {
            test_matmul(bks, nb, t, 4096, 35, T);
            if (t == INF_Q8_0 || t == INF_Q6_K) test_matmul(bks, nb, t, 16384, 17, T);
        }
    }
    /* decode rows over many panels: each thread's slice taken in several steps
     * and, with 3 threads on fewer cores, partly finished from the back by
     * another thread (simd.c's mm_span), across the weights of a matmul_n too;
     * every row written, with the single-threaded bits */
    for (int rep = 0; rep < 4; rep++) {
        test_matmul(bks, nb, INF_Q4_0, 256, 16 * 200 + 5, 1);
        test_matmul(bks, nb, INF_BF16, 256, 16 * 150, 2);
        test_matmul_n(bks, nb, INF_Q4_0, 256, 1, 40);
        test_matmul_n(bks, nb, INF_Q6_K, 256, 1, 40);
    }

    test_batch_invariance(bks, nb, INF_Q8_0);
    test_batch_invariance(bks, nb, INF_Q4_0);
    test_batch_invariance(bks, nb, INF_Q4_K);
    test_batch_invariance(bks, nb, INF_BF16);
    test_batch_invariance(bks, nb, INF_F16);
    test_batch_invariance(bks, nb, INF_Q6_K);
    /* the types that run as another's packed kind, and the dequantizing ones */
    const inf_dtype more[] = {INF_Q4_1, INF_Q5_0,   INF_Q5_1,   INF_Q2_K,  INF_Q3_K,
                              INF_Q5_K, INF_IQ4_NL, INF_IQ4_XS, INF_MXFP4, INF_IQ3_S};
    for (unsigned i = 0; i < sizeof more / sizeof *more; i++)
        test_batch_invariance(bks, nb, more[i]);

    const int row_shapes[][2] = {{1, 1}, {1, 17}, {3, 128}, {7, 33}, {300, 131}, {1, 70001}};
    for (unsigned i = 0; i < sizeof row_shapes / sizeof *row_shapes; i++)
        test_row_ops(bks, nb, row_shapes[i][0], row_shapes[i][1]);
    /* decode (one row), a prompt chunk, odd widths for the vector tails */
    static const int moe_shapes[][3] = {{1, 8, 2048}, {37, 8, 256}, {5, 3, 19}, {64, 2, 1000}};
    for (size_t i = 0; i < sizeof moe_shapes / sizeof moe_shapes[0]; i++)
        test_moe_sum(bks, nb, moe_shapes[i][0], moe_shapes[i][1], moe_shapes[i][2]);

    /* GQA ratios 1, 2, 3, 4; head_dim 16, 24 (not a multiple of 16), 64, 128 */
    test_attention(bks, nb, 2, 2, 16, 0, 1, 0);
    test_attention(bks, nb, 4, 2, 64, 0, 5, 0);
    test_attention(bks, nb, 6, 2, 24, 3, 9, 1);
    test_attention(bks, nb, 8, 2, 128, 0, 70, 0);
    test_attention(bks, nb, 16, 8, 128, 0, 130, 1);
    test_attention(bks, nb, 4, 1, 32, 61, 4, 0);
    test_attention(bks, nb, 2, 1, 128, 127, 2, 1);
    test_attention(bks, nb, 4, 4, 16, 200, 1, 0);
    /* decode steps split into key blocks (3 and a ragged one; 5 with a paged
     * view): merged in block order, bit-identical on 1 and 3 threads */
    test_attention(bks, nb, 16, 8, 128, 699, 1, 0);
    test_attention(bks, nb, 4, 1, 64, 1100, 2, 1);
    test_attention_typed(bks, nb, 16, 8, 128, 511, 1, 1, INF_F16, INF_F16);
    test_attention_typed(bks, nb, 16, 8, 128, 600, 1, 0, INF_Q8_0, INF_BF16);
    /* every K/V type on every level, K and V of different types too */
    const inf_dtype kv_types[] = {INF_F16, INF_BF16, INF_Q8_0};
    for (int i = 0; i < 3; i++) {
        inf_dtype t = kv_types[i];
        test_attention_typed(bks, nb, 16, 8, 128, 0, 70, 0, t, t);
        test_attention_typed(bks, nb, 16, 8, 128, 0, 130, 1, t, t);
        test_attention_typed(bks, nb, 2, 1, 128, 127, 2, 1, t, t);
        test_attention_typed(bks, nb, 4, 2, 64, 3, 9, 0, t, t);
        test_attention_typed(bks, nb, 4, 2, 32, 61, 4, 1, t, t);
        if (t != INF_Q8_0) test_attention_typed(bks, nb, 6, 2, 24, 3, 9, 1, t, t);
    }
    test_attention_typed(bks, nb, 16, 8, 128, 5, 60, 1, INF_Q8_0, INF_F16);
    test_attention_typed(bks, nb, 16, 8, 128, 5, 60, 0, INF_F32, INF_BF16);
    test_attention_typed(bks, nb, 8, 2, 64, 0, 33, 1, INF_BF16, INF_Q8_0);
    /* work items straight into the kernels: ragged R (lane blocks of 8, 16,
     * 32 and their tails), per-row limits causal and random, every K/V type */
    const inf_dtype item_types[] = {INF_F32, INF_F16, INF_BF16, INF_Q8_0};
    const int item_R[] = {1, 7, 8, 9, 33, 128}, item_hd[] = {64, 128, 256};
    for (int ti = 0; ti < 4; ti++)
        for (int hi = 0; hi < 3; hi++)
            for (int ri = 0; ri < 6; ri++) {
                const int R = item_R[ri], hd = item_hd[hi];
                inf_dtype t = item_types[ti];
                test_attn_item(R, hd, 1, 1, R == 1 ? 0 : 100 + R, ri % 2, t, t);
                test_attn_item(R, hd, 1, 0, 0, (ri + 1) % 2, t, item_types[(ti + hi + 1) % 4]);
            }
    /* decode items (kern_attn_decode_avx2.c on AVX2): the group sizes 1, 2, 3
     * (a pair and a single row), 8; odd key counts; the first, a middle and a
     * ragged last key block's partials; every K/V type, mixed too */
    const int dec_R[] = {1, 2, 3, 8};
    for (int ti = 0; ti < 4; ti++)
        for (int ri = 0; ri < 4; ri++) {
            const inf_dtype t = item_types[ti], t2 = item_types[(ti + ri + 1) % 4];
            const int R = dec_R[ri];
            test_attn_decode_item(R, 128, 1, -1, ri % 2, t, t);
            test_attn_decode_item(R, 128, 67, -1, (ri + 1) % 2, t, t2);
            test_attn_decode_item(R, 128, 701, 0, ri % 2, t, t);
            test_attn_decode_item(R, 128, 701, 1, (ri + 1) % 2, t2, t);
            test_attn_decode_item(R, 128, 701, 2, ri % 2, t, t); /* keys 512..700 */
            test_attn_decode_item(R, 64, 257, 1, ri % 2, t, t);  /* one key in the block */
            if (t != INF_Q8_0 && t2 != INF_Q8_0) test_attn_decode_item(R, 24, 99, -1, 1, t, t2);
        }
    test_attn_decode_item(16, 256, 300, 1, 0, INF_F16, INF_Q8_0);
    test_attn_item(2, 128, 0, 0, 0, 1, INF_F16, INF_F16);
    test_attn_item(8, 64, 0, 0, 0, 0, INF_Q8_0, INF_BF16);
    test_attn_item(5, 16, 1, 0, 0, 0, INF_F32, INF_F32);  /* head_dim 16, 24: the 6/4/2 steps */
    test_attn_item(19, 24, 1, 1, 3, 1, INF_F16, INF_F32); /* over dims and the scratch edge */

    /* select.c: names and errors */
    inf_backend *be;
    inf_err err;
    inf_backend_opts o = {.name = "pool", .n_threads = 2, .isa = "avx2", .trace = true};
    CHECK(inf_backend_create(&be, &o, &err) == 0);
    char desc[64];
    CHECK_MSG(strstr(inf_backend_describe(be, desc, sizeof desc), "traced") != NULL, "%s", desc);
    inf_backend_free(be);
    inf_backend_opts bad = {.name = "gpu"};
    CHECK(inf_backend_create(&be, &bad, &err) == -1);
    CHECK(strstr(err.msg, "gpu") != NULL);
    inf_backend_opts badisa = {.name = "simd", .isa = "sse9"};
    CHECK(inf_backend_create(&be, &badisa, &err) == -1);
    inf_backend_opts sc = {.name = "scalar"};
    CHECK(inf_backend_create(&be, &sc, &err) == 0 && be == inf_backend_scalar());
    inf_backend_free(be);
    /* --attn: flash by default, materialized only where the kernels have it */
    inf_backend_opts badattn = {.name = "pool", .attn = "dense"};
    CHECK(inf_backend_create(&be, &badattn, &err) == -1);
    CHECK_MSG(strstr(err.msg, "--attn") && strstr(err.msg, "dense"), "%s", err.msg);
    inf_backend_opts scmat = {.name = "scalar", .attn = "materialized"};
    CHECK(inf_backend_create(&be, &scmat, &err) == -1);
    CHECK_MSG(strstr(err.msg, "scalar"), "%s", err.msg);
    inf_backend_opts flash = {.name = "simd", .attn = "flash"};
    CHECK(inf_backend_create(&be, &flash, &err) == 0 &&
          inf_backend_simd_attn(be) == INF_ATTN_FLASH);
    inf_backend_free(be);
    inf_backend_opts mat = {.name = "simd", .attn = "materialized"};
    bool has_mat = inf_kernels_get(inf_isa_default())->attn_materialized != NULL;
    int rc = inf_backend_create(&be, &mat, &err);
    CHECK_MSG(rc == (has_mat ? 0 : -1), "--attn materialized at %s: rc %d (%s)",
              inf_isa_name(inf_isa_default()), rc, rc ? err.msg : "");
    if (rc == 0) {
        CHECK(inf_backend_simd_attn(be) == INF_ATTN_MATERIALIZED);
        inf_backend_free(be);
    }

    /* read_stream (bench --membw): every level folds the same words; a word
     * changed anywhere, the last 128 bytes included, changes the result */
    {
        enum { N = 4096 + 128 };
        static _Alignas(64) uint64_t buf[N / 8];
        for (int i = 0; i < N / 8; i++)
            buf[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        uint64_t want = 0;
        for (int i = 0; i < N / 8; i++)
            want ^= buf[i];
        for (unsigned i = 0; i < sizeof levels / sizeof *levels; i++) {
            if (inf_isa_clamp(levels[i]) != levels[i]) continue;
            const inf_kernels *k = inf_kernels_get(levels[i]);
            uint64_t got = k->read_stream(buf, N);
            CHECK_MSG(got == want, "read_stream at %s: %016llx, expected %016llx",
                      inf_isa_name(levels[i]), (unsigned long long)got, (unsigned long long)want);
            buf[N / 8 - 1] ^= 1;
            CHECK_MSG(k->read_stream(buf, N) == (want ^ 1), "read_stream at %s skips the tail",
                      inf_isa_name(levels[i]));
            buf[N / 8 - 1] ^= 1;
        }
    }

    inf_trace_free(bks[nb - 1].be);
    for (int i = 0; i < nb - 1; i++)
        inf_backend_simd_free(bks[i].be);
    return th_report();
}
