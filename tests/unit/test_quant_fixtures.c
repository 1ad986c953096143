/* Every weight type against llama.cpp's own quantizer: the fixtures in
 * ../shared/fixtures/quant/ (one GGUF per type, written by ggml: `src` the f32
 * input, `q` ggml's quantization of it, `deq` ggml's dequantization of `q`).
 *
 *   reading:   q dequantized equals deq bit for bit, through the reference
 *              (quant/) and through every ISA level's dequantization row, whole
 *              rows and in the generic matmul path's 256-weight chunks;
 *   embedding: every backend's embed of q's rows equals deq bit for bit;
 *   matmul:    every backend's matmul with q (decode rows, T = 1, and prompt
 *              rows, T = 5, through matmul_n) against an f64 dot with deq,
 *              within the bound of test_backend_ops (f32 rounding; int8 or bf16
 *              activations on the packed paths);
 *   quantizer: where inferno has one, its squared error on src is at most
 *              1.3x ggml's (deq - src), and it is read back by the same reader.
 *
 * The shared fixtures are data from outside this repository: when the folder
 * is absent the test says so and checks only tests/fixtures/quant/, the
 * types that folder lacks (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M), written the same
 * way by tools/make-quant-fixtures.py. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"
#include "backend/kernels.h"
#include "backend/simd.h"
#include "harness.h"
#include "modelfile/gguf.h"
#include "quant/quantize.h"
#include "util/half.h"

#define FIXTURES "../shared/fixtures/quant"

static const struct {
    const char *file; /* quant-<file>.gguf */
    inf_dtype type;
} fixtures[] = {
    {"f16", INF_F16},         {"bf16", INF_BF16},     {"q4_0", INF_Q4_0},   {"q4_1", INF_Q4_1},
    {"q5_0", INF_Q5_0},       {"q5_1", INF_Q5_1},     {"q8_0", INF_Q8_0},   {"q2_K", INF_Q2_K},
    {"q3_K", INF_Q3_K},       {"q4_K", INF_Q4_K},     {"q5_K", INF_Q5_K},   {"q6_K", INF_Q6_K},
    {"iq4_nl", INF_IQ4_NL},   {"iq4_xs", INF_IQ4_XS}, {"mxfp4", INF_MXFP4}, {"iq3_s", INF_IQ3_S},
    {"iq3_xxs", INF_IQ3_XXS}, {"iq2_s", INF_IQ2_S},
};

/* the types the shared folder lacks, written the same way by tools/make-quant-fixtures.py */
#define OWN_FIXTURES "tests/fixtures/quant"
static const struct {
    const char *file;
    inf_dtype type;
} own_fixtures[] = {
    {"iq2_xxs", INF_IQ2_XXS},
    {"iq2_xs", INF_IQ2_XS},
    {"iq1_s", INF_IQ1_S},
    {"iq1_m", INF_IQ1_M},
};

static const gguf_tensor_info *find(const gguf_file *g, const char *name) {
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* index of the first float that differs bit-wise, or -1 */
static long first_diff(const float *a, const float *b, long n) {
    for (long i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4)) return i;
    return -1;
}

#define CHECK_BITS(got, want, n, ...)                                                              \
    do {                                                                                           \
        char what_[128];                                                                           \
        snprintf(what_, sizeof what_, __VA_ARGS__);                                                \
        long at_ = first_diff(got, want, n);                                                       \
        CHECK_MSG(at_ < 0, "%s: first differs at [%ld]: %.9g, ggml %.9g", what_, at_,              \
                  at_ >= 0 ? (got)[at_] : 0.0, at_ >= 0 ? (want)[at_] : 0.0);                      \
    } while (0)

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 16777216.0f * 2.0f - 1.0f;
}

typedef struct lvl {
    inf_isa isa;
    const inf_kernels *k;
    inf_backend *be;
    char label[32];
} lvl;

/* the error bound of test_backend_ops for one output */
static double mm_bound(bool exact_f32, const float *w, const float *x, int64_t n) {
    double b = 0, mag = 0;
    for (int64_t i = 0; i < n; i++)
        mag += fabs((double)w[i] * x[i]);
    if (exact_f32) return 1e-5 * mag + 1e-6;
    for (int64_t i = 0; i < n; i += 32) {
        double amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmax(amax, fabs(x[i + j]));
        for (int j = 0; j < 32; j++)
            b += fabs(w[i + j]) * (fabs(x[i + j]) / 128.0 + amax / 254.0);
    }
    return b + 1e-5 * mag + 1e-6;
}

/* The packed panels (kernels.h's layouts) read back by hand, row r of panel 0,
 * weights k0..k0+group-1 of group g, into w[]. */
static void unpack_group(const inf_packed *pk, int64_t g, int r, float *w, float *mag) {
    const uint8_t *gp = pk->data + (size_t)g * pk->group_bytes; /* panel 0 */
    uint16_t A, B = 0;
    switch (pk->kind) {
    case INF_PACK_Q8_0:
        memcpy(&A, gp + 512 + 2 * r, 2);
        for (int k = 0; k < 32; k++)
            mag[k] =
                fabsf(w[k] = inf_f16_to_f32(A) * (float)(gp[64 * (k / 4) + 4 * r + k % 4] - 128));
        break;
    case INF_PACK_Q4_0:
    case INF_PACK_Q4_K:
        memcpy(&A, gp + 256 + 2 * r, 2);
        if (pk->kind == INF_PACK_Q4_K) memcpy(&B, gp + 288 + 2 * r, 2);
        for (int k = 0; k < 32; k++) {
            const int c = k / 8, j = k % 8;
            const uint8_t byte = gp[64 * c + 4 * r + j % 4];
            const int q = j < 4 ? byte & 0xF : byte >> 4;
            w[k] = pk->kind == INF_PACK_Q4_0 ? inf_f16_to_f32(A) * (float)(q - 8)
                                             : (float)q * inf_f16_to_f32(A) - inf_f16_to_f32(B);
            /* an offset form rounds its two terms apart: the bound is on their sizes */
            mag[k] = fabsf((float)q * inf_f16_to_f32(A)) + fabsf(inf_f16_to_f32(B));
        }
        break;
    case INF_PACK_Q5_K:
        memcpy(&A, gp + 320 + 2 * r, 2);
        memcpy(&B, gp + 352 + 2 * r, 2);
        for (int k = 0; k < 32; k++) {
            const int c = k / 8, j = k % 8;
            const uint8_t byte = gp[64 * c + 4 * r + j % 4];
            const int bit = (gp[256 + 4 * r + j % 4] >> (j < 4 ? c : 4 + c)) & 1;
            const int q = (j < 4 ? byte & 0xF : byte >> 4) | bit << 4;
            w[k] = (float)q * inf_f16_to_f32(A) - inf_f16_to_f32(B);
            mag[k] = fabsf((float)q * inf_f16_to_f32(A)) + fabsf(inf_f16_to_f32(B));
        }
        break;
    case INF_PACK_IQ4:
        memcpy(&A, gp + 256 + 2 * r, 2);
        for (int k = 0; k < 32; k++) {
            const int c = k / 8, j = k % 8;
            const uint8_t byte = gp[64 * c + 4 * r + j % 4];
            const int v = pk->values[j < 4 ? byte & 0xF : byte >> 4];
            mag[k] = fabsf(w[k] = inf_f16_to_f32(A) * (float)v);
        }
        break;
    case INF_PACK_Q4_KS: /* a super-group of 8 sub-groups, w = (d sc) q - dmin m */
    case INF_PACK_Q5_KS: {
        const bool five = pk->kind == INF_PACK_Q5_KS;
        const int sub = five ? INF_Q5KS_SUB_BYTES : INF_Q4KS_SUB_BYTES,
                  sco = five ? INF_Q5KS_SC_OFF : INF_Q4KS_SC_OFF;
        memcpy(&A, gp + (five ? INF_Q5KS_D_OFF : INF_Q4KS_D_OFF) + 2 * r, 2);
        memcpy(&B, gp + (five ? INF_Q5KS_DMIN_OFF : INF_Q4KS_DMIN_OFF) + 2 * r, 2);
        for (int k = 0; k < 256; k++) {
            const int s = k / 32, c = k % 32 / 8, j = k % 8;
            const uint8_t *sp = gp + sub * s;
            const uint8_t byte = sp[64 * c + 4 * r + j % 4];
            const int bit = five ? (sp[256 + 4 * r + j % 4] >> (j < 4 ? c : 4 + c)) & 1 : 0;
            const int q = (j < 4 ? byte & 0xF : byte >> 4) | bit << 4;
            uint8_t sb[12]; /* the file's scale bytes, as ggml unpacks them */
            for (int i = 0; i < 12; i++)
                sb[i] = gp[sco + 16 * i + r];
            const int sc = s < 4 ? sb[s] & 63 : (sb[s + 4] & 0xF) | (sb[s - 4] >> 6) << 4;
            const int m = s < 4 ? sb[s + 4] & 63 : (sb[s + 4] >> 4) | (sb[s] >> 6) << 4;
            const float d1 = inf_f16_to_f32(A) * (float)sc, m1 = inf_f16_to_f32(B) * (float)m;
            w[k] = d1 * (float)q - m1;
            mag[k] = fabsf(d1 * (float)q) + fabsf(m1);
        }
        break;
    }
    case INF_PACK_Q6_K: /* a super-group of 16 sub-groups, w = d sc (q - 32) */
        memcpy(&A, gp + INF_Q6K_D_OFF + 2 * r, 2);
        for (int k = 0; k < 256; k++) {
            const uint8_t *sp = gp + INF_Q6K_SUB_BYTES * (k / 16);
            const int kk = k % 16, c = kk / 8, j = kk % 8;
            const uint8_t byte = sp[64 * c + 4 * r + j % 4];
            const int lo = j < 4 ? byte & 0xF : byte >> 4;
            const int hi = (sp[128 + 4 * r + kk % 4] >> (2 * (kk / 4))) & 3;
            const int8_t sc = (int8_t)gp[INF_Q6K_SC_OFF + 16 * (k / 16) + r];
            mag[k] = fabsf(w[k] = inf_f16_to_f32(A) * (float)sc * (float)((lo | hi << 4) - 32));
        }
        break;
    case INF_PACK_IQ4S: /* a super-group of 16 sub-groups, w = d sc values[q] */
        memcpy(&A, gp + INF_IQ4S_D_OFF + 2 * r, 2);
        for (int k = 0; k < 256; k++) {
            const uint8_t *sp = gp + INF_IQ4S_SUB_BYTES * (k / 16);
            const int kk = k % 16, c = kk / 8, j = kk % 8;
            const uint8_t byte = sp[64 * c + 4 * r + j % 4];
            const int8_t sc = (int8_t)gp[INF_IQ4S_SC_OFF + 16 * (k / 16) + r];
            const int v = pk->values[j < 4 ? byte & 0xF : byte >> 4];
            mag[k] = fabsf(w[k] = inf_f16_to_f32(A) * (float)sc * (float)v);
        }
        break;
    case INF_PACK_Q3_KS: /* a super-group of 16 sub-groups, w = (d (sc - 32)) (q - 4) */
        memcpy(&A, gp + INF_Q3KS_D_OFF + 2 * r, 2);
        for (int k = 0; k < 256; k++) {
            const uint8_t *sp = gp + INF_Q3KS_SUB_BYTES * (k / 16);
            const int kk = k % 16, i = kk / 4, j = kk % 4, s = k / 16;
            const int lo = (sp[4 * r + j] >> (2 * i)) & 3;
            const int hi = (sp[64 + 8 * i + (4 * r + j) / 8] >> ((4 * r + j) % 8)) & 1;
            const int lo4 = (gp[INF_Q3KS_SC_OFF + 16 * (s % 8) + r] >> (s < 8 ? 0 : 4)) & 0xF;
            const int hi2 = (gp[INF_Q3KS_SC_OFF + 16 * (8 + s % 4) + r] >> (2 * (s / 4))) & 3;
            const float dl = inf_f16_to_f32(A) * (float)((lo4 | hi2 << 4) - 32);
            mag[k] = fabsf(w[k] = dl * (float)((lo | hi << 2) - 4));
        }
        break;
    case INF_PACK_Q2_KS: /* a super-group of 16 sub-groups, w = (d sc) q - dmin m */
        memcpy(&A, gp + INF_Q2KS_D_OFF + 2 * r, 2);
        memcpy(&B, gp + INF_Q2KS_DMIN_OFF + 2 * r, 2);
        for (int k = 0; k < 256; k++) {
            const int kk = k % 16, i = kk / 4, j = kk % 4, s = k / 16;
            const int q = (gp[INF_Q2KS_SUB_BYTES * s + 4 * r + j] >> (2 * i)) & 3;
            const uint8_t sb = gp[INF_Q2KS_SC_OFF + 32 * (s / 2) + 2 * r + s % 2];
            const float dl = inf_f16_to_f32(A) * (float)(sb & 0xF),
                        ml = inf_f16_to_f32(B) * (float)(sb >> 4);
            w[k] = dl * (float)q - ml;
            mag[k] = fabsf(dl * (float)q) + fabsf(ml);
        }
        break;
    case INF_PACK_F16: /* k-major: row k c's 16 values side by side */
        for (int k = 0; k < 32; k++) {
            memcpy(&A, gp + 32 * k + 2 * r, 2);
            mag[k] = fabsf(w[k] = inf_f16_to_f32(A));
        }
        break;
    default:
        break;
    }
}

/* Packing (load-time scalar code, so it runs on any CPU even where the packed
 * kernels cannot) under kinds (a mask of INF_PACK_KIND_BIT): each type's
 * panels hold its values, exactly where the packed scales are the stored
 * ones (and Q6_K's and Q3_K's d * sc in either kind, the Q4_KS and Q5_KS kinds' d * sc and
 * dmin * m are formed as ggml forms them), within one f16 rounding where a
 * scale is a product of two stored factors rounded to f16 (Q4_K's as the
 * Q4_K kind, IQ4_XS's). */
static void check_pack(inf_dtype type, const inf_tensor *t, const float *want, unsigned kinds) {
    inf_weight w = {.t = t,
                    .n_in = t->ne[0],
                    .n_out = t->ne[1],
                    .row_bytes = inf_dtype_row_bytes(type, t->ne[0])};
    inf_packed *pk = NULL;
    CHECK(inf_pack_alloc(&pk, &w, kinds) == 0);
    if (pk) inf_pack_panels(pk, &w, 0, pk->n_panels);
    if (!pk || pk->kind == INF_PACK_BF16) {
        inf_packed_free(pk);
        return;
    }
    const bool exact = type == INF_Q8_0 || type == INF_Q4_0 || type == INF_Q4_1 ||
                       type == INF_MXFP4 || type == INF_Q5_0 || type == INF_Q5_1 ||
                       type == INF_IQ4_NL || type == INF_Q6_K || type == INF_Q3_K ||
                       type == INF_IQ3_XXS || type == INF_IQ3_S || pk->kind == INF_PACK_IQ4S ||
                       pk->kind == INF_PACK_Q4_KS || pk->kind == INF_PACK_Q5_KS ||
                       pk->kind == INF_PACK_F16 || pk->kind == INF_PACK_Q2_KS;
    const int64_t n = t->ne[0];
    float *got = malloc(sizeof(float) * (size_t)(INF_PANEL * n)),
          *mag = malloc(sizeof(float) * (size_t)(INF_PANEL * n));
    int64_t bad = -1;
    for (int r = 0; r < INF_PANEL; r++)
        for (int64_t g = 0; g < pk->n_groups; g++)
            unpack_group(pk, g, r, got + r * n + g * pk->group, mag + r * n + g * pk->group);
    for (int64_t i = 0; i < INF_PANEL * n; i++) { /* the weights from the panels' values */
        got[i] *= pk->post;
        mag[i] *= pk->post;
    }
    for (int64_t i = 0; i < INF_PANEL * n && bad < 0; i++) {
        /* equal as numbers: an offset form (Q5_0 as d q - 16 d) gives +0 where
           the reference's d (q - 16) is -0, the same in every product */
        const bool ok =
            exact ? got[i] == want[i] : fabsf(got[i] - want[i]) <= mag[i] * (1.0f / 1024) + 1e-30f;
        if (!ok) bad = i;
    }
    CHECK_MSG(bad < 0, "%s packed panels (kinds %#x): weight [%lld] differs from ggml's",
              inf_dtype_get(type)->name, kinds, (long long)bad);
#if defined(__x86_64__)
    /* the AMX expansion of the panels into bf16 B tiles (AVX-512 BF16, no tile
       instructions), for the kinds the AMX level packs: each weight within a
       bf16 rounding of the packed value */
    const inf_cpu_features *f = inf_cpu_features_get();
    if (f->avx512f && f->avx512bw && f->avx512vl && f->avx512bf16 &&
        (INF_PACK_KINDS_AMX & INF_PACK_KIND_BIT(pk->kind)) && inf_amx_bf16_kind(pk->kind)) {
        _Alignas(64) uint16_t tile[512];
        bad = -1;
        for (int64_t kg = 0; kg < n / 32 && bad < 0; kg++) {
            inf_amx_expand_group((uint8_t *)tile, pk, pk->data, kg);
            for (int r = 0; r < INF_PANEL; r++)
                for (int k = 0; k < 32; k++) {
                    const int64_t i = r * n + 32 * kg + k;
                    const float v = inf_bf16_to_f32(tile[32 * (k / 2) + 2 * r + k % 2]) * pk->post;
                    if (fabsf(v - got[i]) > (fabsf(got[i]) + mag[i]) * (1.0f / 256) + 1e-30f)
                        bad = i;
                }
        }
        CHECK_MSG(bad < 0, "%s AMX bf16 expansion: weight [%lld] differs from the panels'",
                  inf_dtype_get(type)->name, (long long)bad);
    }
#endif
    free(got);
    free(mag);
    inf_packed_free(pk);
}

static void check_type(const char *dir, const char *file, inf_dtype type, lvl *lv, int nl) {
    char path[512];
    snprintf(path, sizeof path, "%s/quant-%s.gguf", dir, file);
    gguf_file *g = NULL;
    inf_err err = {0};
    int rc = gguf_open(&g, path, &err);
    CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
    if (rc) return;
    const gguf_tensor_info *src = find(g, "src"), *q = find(g, "q"), *deq = find(g, "deq");
    CHECK_MSG(src && q && deq, "%s: tensors src, q, deq", path);
    if (!src || !q || !deq) goto done;
    CHECK_MSG(q->type == (uint32_t)type, "%s: q has type %s", path, inf_ggml_type_name(q->type));
    const int64_t n = q->ne[0], rows = q->ne[1];
    const char *name = inf_dtype_get(type)->name;
    const size_t rb = inf_dtype_row_bytes(type, n);
    const float *want = deq->data; /* [rows][n] */
    const float *in = src->data;   /* [rows][n] */
    float *got = malloc(sizeof(float) * (size_t)(n * rows));

    /* reading: the reference, then each level's row, whole and in 256-weight chunks */
    for (int64_t r = 0; r < rows; r++)
        inf_dequantize_row(type, got + r * n, (const uint8_t *)q->data + (size_t)r * rb, n);
    CHECK_BITS(got, want, (long)(n * rows), "%s reference dequantization", name);
    for (int l = 0; l < nl; l++) {
        memset(got, 0, sizeof(float) * (size_t)(n * rows));
        for (int64_t r = 0; r < rows; r++) {
            const uint8_t *row = (const uint8_t *)q->data + (size_t)r * rb;
            if (r % 2)
                inf_kern_dequant(lv[l].k, type, got + r * n, row, 0, (int)n);
            else
                for (int64_t k0 = 0; k0 < n; k0 += INF_CHUNK)
                    inf_kern_dequant(lv[l].k, type, got + r * n + k0, row, k0, INF_CHUNK);
        }
        CHECK_BITS(got, want, (long)(n * rows), "%s dequantization at %s", name, lv[l].label);
    }

    inf_tensor t = {.name = "q",
                    .type = type,
                    .n_dims = 2,
                    .ne = {n, rows, 1, 1},
                    .data = q->data,
                    .nbytes = rb * (size_t)rows};

    check_pack(type, &t, want, INF_PACK_KINDS_ALL);
    check_pack(type, &t, want, INF_PACK_KINDS_BASE); /* Q4_K as the Q4_K kind, IQ4 as Q8_0 */

    /* embedding rows */
    int32_t ids[5] = {0, (int32_t)rows - 1, 3, 17, 3};
    float *emb = malloc(sizeof(float) * (size_t)n * 5),
          *emb_want = malloc(sizeof(float) * (size_t)n * 5);
    for (int i = 0; i < 5; i++)
        memcpy(emb_want + i * n, want + (size_t)ids[i] * (size_t)n, sizeof(float) * (size_t)n);
    for (int l = 0; l <= nl; l++) {
        const inf_backend *be = l < nl ? lv[l].be : inf_backend_scalar();
        memset(emb, 0, sizeof(float) * (size_t)n * 5);
        be->embed(be, emb, &t, ids, 5);
        CHECK_BITS(emb, emb_want, (long)(n * 5), "%s embed at %s", name,
                   l < nl ? lv[l].label : "scalar backend");
    }
    free(emb);
    free(emb_want);

    /* matmul: decode rows (T = 1) and prompt rows (T = 5, matmul_n prefill) */
    enum { T = 5 };
    float *x = malloc(sizeof(float) * (size_t)(T * n));
    for (int64_t i = 0; i < T * n; i++)
        x[i] = frand() * (i % 7 == 0 ? 4.0f : 1.0f);
    double *ref = malloc(sizeof(double) * (size_t)(T * rows));
    for (int tt = 0; tt < T; tt++)
        for (int64_t o = 0; o < rows; o++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++)
                s += (double)want[o * n + i] * x[tt * n + i];
            ref[tt * rows + o] = s;
        }
    float *y = malloc(sizeof(float) * (size_t)(T * rows));
    for (int l = 0; l <= nl; l++) {
        const inf_backend *be = l < nl ? lv[l].be : inf_backend_scalar();
        const char *label = l < nl ? lv[l].label : "scalar backend";
        inf_weight w = {.t = &t, .n_in = n, .n_out = rows, .row_bytes = rb};
        CHECK(be->prepare_weight == NULL || be->prepare_weight(be, &w) == 0);
        /* the dequantize-then-f32 paths must be as close as f32 sums can be */
        const bool exact = !w.packed && !(l < nl && lv[l].isa == INF_ISA_AMX);
        for (int pass = 0; pass < 2; pass++) {
            const int nt = pass ? T : 1;
            if (pass && be->matmul_n) {
                const inf_weight *ws[1] = {&w};
                float *ys[1] = {y};
                be->matmul_n(be, ys, x, ws, 1, nt, 1);
            } else {
                be->matmul(be, y, x, &w, nt);
            }
            int64_t bad = -1;
            double diff = 0;
            for (int64_t i = 0; i < nt * rows && bad < 0; i++) {
                const int64_t o = i % rows, tt = i / rows;
                diff = fabs((double)y[i] - ref[i]);
                if (!(diff <= mm_bound(exact, want + o * n, x + tt * n, n))) bad = i;
            }
            CHECK_MSG(bad < 0, "%s matmul at %s, T=%d: [%lld] %g vs %g on deq (diff %g)", name,
                      label, nt, (long long)bad, bad >= 0 ? y[bad] : 0.0, bad >= 0 ? ref[bad] : 0.0,
                      diff);
        }
        if (be->release_weight) be->release_weight(be, &w);
    }
    free(y);
    free(ref);
    free(x);

    /* quantizer: error on src against ggml's, and its blocks read back */
    if (inf_dtype_get(type)->quant) {
        uint8_t *mine = malloc(rb * (size_t)rows);
        double e_mine = 0, e_ggml = 0;
        for (int64_t r = 0; r < rows; r++) {
            CHECK(inf_quantize_row(type, mine + (size_t)r * rb, in + r * n, n) == 0);
            inf_dequantize_row(type, got + r * n, mine + (size_t)r * rb, n);
        }
        for (int64_t i = 0; i < n * rows; i++) {
            e_mine += ((double)got[i] - in[i]) * ((double)got[i] - in[i]);
            e_ggml += ((double)want[i] - in[i]) * ((double)want[i] - in[i]);
        }
        CHECK_MSG(e_mine <= 1.3 * e_ggml + 1e-12,
                  "%s quantizer: squared error %.4g, ggml's %.4g (ratio %.3f)", name, e_mine,
                  e_ggml, e_mine / e_ggml);
        printf("  %-8s quantizer error / ggml's: %.3f\n", name, e_ggml > 0 ? e_mine / e_ggml : 0);
        free(mine);
    }
    free(got);
done:
    gguf_close(g);
}

int main(void) {
    const char *dir = getenv("INFERNO_QUANT_FIXTURES");
    if (!dir) dir = FIXTURES;
    char probe[512];
    snprintf(probe, sizeof probe, "%s/README.md", dir);
    FILE *f = fopen(probe, "r");
    if (f)
        fclose(f);
    else
        printf("no weight-type fixtures at %s (llama.cpp-written GGUFs; see the shared folder "
               "beside the repository): the repository's own only\n",
               dir);

    const inf_isa levels[] = {INF_ISA_SCALAR, INF_ISA_NEON, INF_ISA_AVX2, INF_ISA_AVX512,
                              INF_ISA_AMX};
    lvl lv[8];
    int nl = 0;
    for (unsigned i = 0; i < sizeof levels / sizeof *levels; i++) {
        if (inf_isa_clamp(levels[i]) != levels[i]) continue;
        lv[nl].isa = levels[i];
        lv[nl].k = inf_kernels_get(levels[i]);
        lv[nl].be = inf_backend_simd_create(levels[i], 1, false, INF_ATTN_FLASH);
        snprintf(lv[nl].label, sizeof lv[nl].label, "simd-%s", inf_isa_name(levels[i]));
        nl++;
    }
    for (unsigned i = 0; f && i < sizeof fixtures / sizeof *fixtures; i++)
        check_type(dir, fixtures[i].file, fixtures[i].type, lv, nl);
    for (unsigned i = 0; i < sizeof own_fixtures / sizeof *own_fixtures; i++)
        check_type(OWN_FIXTURES, own_fixtures[i].file, own_fixtures[i].type, lv, nl);
    for (int l = 0; l < nl; l++)
        inf_backend_simd_free(lv[l].be);
    printf("%d passed, %d failed\n", th_passed, th_failed);
    return th_failed ? 1 : 0;
}
