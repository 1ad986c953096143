/* Scalar reference (de)quantization, ggml block layouts byte for byte.
 *
 * Dequantization follows ggml's formulas exactly (same operations, same
 * order), so weights read from llama.cpp's files come out as llama.cpp
 * computes them. Q8_0 and Q4_0 quantization also follow ggml's reference
 * rounding; Q4_K and Q6_K quantization is our own per-sub-block search
 * (sound, but not bit-identical to llama.cpp's). */
#include "quant/quantize.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backend/cpu_features.h"
#include "quant/grids.h"
#include "util/err.h"
#include "util/half.h"

/* ---- float types ---- */

static void dequant_f32(float *y, const void *src, int64_t n) {
    memcpy(y, src, (size_t)n * 4);
}
static void quant_f32(void *dst, const float *x, int64_t n) {
    memcpy(dst, x, (size_t)n * 4);
}

static void dequant_f16(float *y, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    for (int64_t i = 0; i < n; i++)
        y[i] = inf_f16_to_f32(h[i]);
}
#if defined(__x86_64__)
/* Eight at a time by F16C, which rounds to nearest even as inf_f32_to_f16
 * does, subnormals and overflow included; a group with a NaN goes through
 * inf_f32_to_f16, whose NaN drops the payload. The f16 K/V cache stores every
 * token's rows through here: against the scalar loop, qwen3-0.6b pp512 went
 * 4-5 % faster (docs/PERFORMANCE.md). */
__attribute__((target("avx,f16c"))) static void quant_f16_f16c(uint16_t *h, const float *x,
                                                               int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; j++)
                h[i + j] = inf_f32_to_f16(x[i + j]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++)
        h[i] = inf_f32_to_f16(x[i]);
}
#endif

static void quant_f16(void *dst, const float *x, int64_t n) {
    uint16_t *h = dst; /* [n] */
#if defined(__x86_64__)
    if (inf_cpu_features_get()->f16c) { /* with the OS keeping YMM state */
        quant_f16_f16c(h, x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        h[i] = inf_f32_to_f16(x[i]);
}

static void dequant_bf16(float *y, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    for (int64_t i = 0; i < n; i++)
        y[i] = inf_bf16_to_f32(h[i]);
}
#if defined(__x86_64__)
/* Eight at a time by AVX2 integer ops, inf_f32_to_bf16's rounding to nearest
 * even; a group with a NaN goes through inf_f32_to_bf16. The bf16 K/V cache
 * stores every token's rows through here. */
__attribute__((target("avx2"))) static void quant_bf16_avx2(uint16_t *h, const float *x,
                                                            int64_t n) {
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int j = 0; j < 8; j++)
                h[i + j] = inf_f32_to_bf16(x[i + j]);
            continue;
        }
        __m256i u = _mm256_castps_si256(v);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
        /* no saturation: a sum past 32 bits would be a NaN's */
        __m256i p = _mm256_permutevar8x32_epi32(_mm256_packus_epi32(r, r), order);
        _mm_storeu_si128((__m128i *)(h + i), _mm256_castsi256_si128(p));
    }
    for (; i < n; i++)
        h[i] = inf_f32_to_bf16(x[i]);
}
#endif

static void quant_bf16(void *dst, const float *x, int64_t n) {
    uint16_t *h = dst; /* [n] */
#if defined(__x86_64__)
    if (inf_cpu_features_get()->avx2) {
        quant_bf16_avx2(h, x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        h[i] = inf_f32_to_bf16(x[i]);
}

/* ---- Q8_0: w = d * qs[j] ---- */

static void dequant_q8_0(float *y, const void *src, int64_t n) {
    const inf_block_q8_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n / INF_QK8_0; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int j = 0; j < INF_QK8_0; j++)
            y[i * INF_QK8_0 + j] = b[i].qs[j] * d;
    }
}

static void quant_q8_0_block(inf_block_q8_0 *b, const float *xb) {
    float amax = 0.0f;
    for (int j = 0; j < INF_QK8_0; j++)
        amax = fmaxf(amax, fabsf(xb[j]));
    const float d = amax / 127.0f;
    const float id = d ? 1.0f / d : 0.0f;
    b->d = inf_f32_to_f16(d);
    for (int j = 0; j < INF_QK8_0; j++)
        b->qs[j] = (int8_t)roundf(xb[j] * id);
}

#if defined(__x86_64__)
/* A block of 32 in four vectors, with quant_q8_0_block's bits: the same
 * max, scale and product, and roundf's halves away from zero as a
 * truncation of v + copysign(0.5 - 2^-25, v), exact for |v| < 2^23 (here
 * |v| <= 127). A block with a NaN, or a scale too small to invert, goes
 * through quant_q8_0_block. The q8_0
 * K/V cache stores every token's rows through here. */
__attribute__((target("avx2"))) static void quant_q8_0_avx2(inf_block_q8_0 *b, const float *x,
                                                            int64_t nb) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f - 0x1p-25f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + i * INF_QK8_0;
        __m256 v[4], m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int c = 0; c < 4; c++) {
            v[c] = _mm256_loadu_ps(xb + 8 * c);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[c], v[c], _CMP_UNORD_Q));
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[c]));
        }
        if (_mm256_movemask_ps(nan)) {
            quant_q8_0_block(&b[i], xb);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        const float d = _mm_cvtss_f32(m4) / 127.0f;
        const float id = d ? 1.0f / d : 0.0f;
        if (isinf(id)) { /* d subnormal: products past int8, whose conversion C leaves open */
            quant_q8_0_block(&b[i], xb);
            continue;
        }
        b[i].d = inf_f32_to_f16(d);
        __m256i q[4];
        for (int c = 0; c < 4; c++) {
            __m256 t = _mm256_mul_ps(v[c], _mm256_set1_ps(id));
            t = _mm256_add_ps(t, _mm256_or_ps(half, _mm256_and_ps(sign, t)));
            q[c] = _mm256_cvttps_epi32(t); /* truncation */
        }
        __m256i p =
            _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)b[i].qs, _mm256_permutevar8x32_epi32(p, order));
    }
}
#endif

static void quant_q8_0(void *dst, const float *x, int64_t n) {
    inf_block_q8_0 *b = dst; /* [n/32] */
#if defined(__x86_64__)
    if (inf_cpu_features_get()->avx2) {
        quant_q8_0_avx2(b, x, n / INF_QK8_0);
        return;
    }
#endif
    for (int64_t i = 0; i < n / INF_QK8_0; i++)
        quant_q8_0_block(&b[i], x + i * INF_QK8_0);
}

/* ---- Q4_0: w = d * (nibble - 8); byte j holds weights j (low) and j+16 (high) ---- */

static void dequant_q4_0(float *y, const void *src, int64_t n) {
    const inf_block_q4_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n / INF_QK4_0; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        float *yb = y + i * INF_QK4_0;
        for (int j = 0; j < INF_QK4_0 / 2; j++) {
            const int x0 = (b[i].qs[j] & 0x0F) - 8;
            const int x1 = (b[i].qs[j] >> 4) - 8;
            yb[j] = x0 * d;
            yb[j + INF_QK4_0 / 2] = x1 * d;
        }
    }
}

static void quant_q4_0(void *dst, const float *x, int64_t n) {
    inf_block_q4_0 *b = dst; /* [n/32] */
    for (int64_t i = 0; i < n / INF_QK4_0; i++) {
        const float *xb = x + i * INF_QK4_0;
        /* The weight of largest magnitude, with its sign, maps to nibble 0 (-8):
         * the asymmetric range [-8, 7] then covers the other side. */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < INF_QK4_0; j++) {
            if (fabsf(xb[j]) > amax) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        }
        const float d = max / -8.0f;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = inf_f32_to_f16(d);
        for (int j = 0; j < INF_QK4_0 / 2; j++) {
            int q0 = (int)(int8_t)(xb[j] * id + 8.5f);
            int q1 = (int)(int8_t)(xb[j + INF_QK4_0 / 2] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---- Q4_K ---- */

/* Sub-block j's 6-bit scale and min from the 12 packed bytes: sub-blocks 0..3
 * keep theirs in the low 6 bits of bytes j and j+4; 4..7 split theirs into a
 * low nibble in byte j+4 and two high bits on top of bytes j-4 and j. */
static void q4_K_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

static void dequant_q4_K(float *y, const void *src, int64_t n) {
    const inf_block_q4_K *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const uint8_t *q = b[i].qs;
        const float d = inf_f16_to_f32(b[i].d);
        const float min = inf_f16_to_f32(b[i].dmin);
        int is = 0;
        uint8_t sc, m;
        /* 64 weights per step: 32 low nibbles (sub-block is), then 32 high (is+1) */
        for (int j = 0; j < INF_QK_K; j += 64) {
            q4_K_scale_min(is + 0, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            q4_K_scale_min(is + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

static int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Nearest integer, ties to even, for |f| < 2^22 (larger or NaN inputs give
 * some int, which callers clamp): adding 1.5 * 2^23 leaves the rounded
 * integer in the low mantissa bits. */
static inline int nearest_int(float f) {
    float v = f + 12582912.0f;
    uint32_t u;
    memcpy(&u, &v, 4);
    return (int)(u & 0x007fffff) - 0x00400000;
}

/* Fits x[n] ≈ scale * q - off with q in 0..nmax and off >= 0 (the range
 * always includes 0, as the format's non-negative min requires). Tries grid
 * scales around (max - min) / nmax; for each rounding, refits scale and
 * offset by least squares and keeps the one of least squared error
 * (computed in closed form from the sums). */
static float fit_affine(int n, int nmax, const float *x, float *off) {
    float lo = 0.0f, hi = x[0], sx = 0.0f, sx2 = 0.0f;
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
        sx += x[i];
        sx2 += x[i] * x[i];
    }
    if (hi <= lo) {
        *off = -lo;
        return 0.0f;
    }
    float best_s = (hi - lo) / nmax, best_b = lo, best_err = INFINITY;
    for (int step = -8; step <= 8; step++) {
        const float iscale = (nmax + 0.1f * step) / (hi - lo);
        float sq = 0, sq2 = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            const int q = clampi(nearest_int((x[i] - lo) * iscale), 0, nmax);
            sq += (float)q;
            sq2 += (float)(q * q);
            sqx += (float)q * x[i];
        }
        const float det = n * sq2 - sq * sq;
        if (det <= 0) continue;
        float s = (n * sqx - sq * sx) / det;
        float b = (sq2 * sx - sq * sqx) / det;
        if (b > 0) { /* offset must be <= 0: refit the scale alone */
            b = 0;
            s = sqx / sq2;
        }
        if (s <= 0) continue;
        /* sum (s q + b - x)^2 expanded */
        const float err = s * s * sq2 + n * b * b + sx2 + 2 * s * b * sq - 2 * s * sqx - 2 * b * sx;
        if (err < best_err) {
            best_err = err;
            best_s = s;
            best_b = b;
        }
    }
    *off = -best_b;
    return best_s;
}

static void quant_q4_K(void *dst, const float *x, int64_t n) {
    inf_block_q4_K *b = dst; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float *xb = x + i * INF_QK_K;
        float scales[INF_QK_K / 32], mins[INF_QK_K / 32]; /* [8] */
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < INF_QK_K / 32; j++) {
            scales[j] = fit_affine(32, 15, xb + 32 * j, &mins[j]);
            max_scale = fmaxf(max_scale, scales[j]);
            max_min = fmaxf(max_min, mins[j]);
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        memset(b[i].scales, 0, sizeof b[i].scales);
        for (int j = 0; j < INF_QK_K / 32; j++) {
            const uint8_t ls = (uint8_t)clampi(nearest_int(inv_scale * scales[j]), 0, 63);
            const uint8_t lm = (uint8_t)clampi(nearest_int(inv_min * mins[j]), 0, 63);
            if (j < 4) {
                b[i].scales[j] = ls;
                b[i].scales[j + 4] = lm;
            } else {
                b[i].scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                b[i].scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
                b[i].scales[j - 0] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        b[i].d = inf_f32_to_f16(max_scale / 63.0f);
        b[i].dmin = inf_f32_to_f16(max_min / 63.0f);
        /* Requantize with the scales as stored, so rounding sees what the reader sees. */
        const float d = inf_f16_to_f32(b[i].d), dmin = inf_f16_to_f32(b[i].dmin);
        uint8_t L[INF_QK_K]; /* [256] 0..15 */
        for (int j = 0; j < INF_QK_K / 32; j++) {
            uint8_t sc, m;
            q4_K_scale_min(j, b[i].scales, &sc, &m);
            const float ds = d * sc, dm = dmin * m;
            for (int l = 0; l < 32; l++) {
                const float v = xb[32 * j + l];
                L[32 * j + l] = (uint8_t)(ds ? clampi(nearest_int((v + dm) / ds), 0, 15) : 0);
            }
        }
        uint8_t *q = b[i].qs;
        for (int j = 0; j < INF_QK_K; j += 64) {
            for (int l = 0; l < 32; l++)
                q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

/* ---- Q6_K ---- */

static void dequant_q6_K(float *y, const void *src, int64_t n) {
    const inf_block_q6_K *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        /* 128 weights per half: ql's low then high nibbles, qh's 2-bit fields */
        for (int h = 0; h < INF_QK_K; h += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* Fits x[n] ≈ scale * q with q in -nmax..nmax-1: the weight of largest
 * magnitude maps near -nmax; a few grid scales around it, each refit by
 * least squares, keep the least squared error (sum x^2 - s * sum qx, the
 * residual of the least-squares s). */
static float fit_symmetric(int n, int nmax, const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax == 0.0f) return 0.0f;
    float best_s = max / -nmax, best_gain = 0.0f;
    for (int step = -6; step <= 6; step++) {
        const float iscale = -(nmax + 0.1f * step) / max;
        float sqx = 0, sq2 = 0;
        for (int i = 0; i < n; i++) {
            const int q = clampi(nearest_int(x[i] * iscale), -nmax, nmax - 1);
            sqx += (float)q * x[i];
            sq2 += (float)(q * q);
        }
        if (sq2 <= 0) continue;
        /* error = sum x^2 - sqx^2 / sq2: maximize sqx^2 / sq2 */
        if (sqx * sqx > best_gain * sq2) {
            best_gain = sqx * sqx / sq2;
            best_s = sqx / sq2;
        }
    }
    return best_s;
}

static void quant_q6_K(void *dst, const float *x, int64_t n) {
    inf_block_q6_K *b = dst; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float *xb = x + i * INF_QK_K;
        float scales[INF_QK_K / 16]; /* [16] */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < INF_QK_K / 16; j++) {
            scales[j] = fit_symmetric(16, 32, xb + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max = scales[j];
            }
        }
        uint8_t L[INF_QK_K]; /* [256] 0..63 (q + 32) */
        memset(b[i].ql, 0, sizeof b[i].ql);
        memset(b[i].qh, 0, sizeof b[i].qh);
        if (amax == 0.0f) {
            memset(b[i].scales, 0, sizeof b[i].scales);
            b[i].d = 0;
            memset(L, 32, sizeof L);
        } else {
            /* the largest sub-block scale maps to -128, the end of int8's range */
            const float iscale = -128.0f / max;
            for (int j = 0; j < INF_QK_K / 16; j++)
                b[i].scales[j] = (int8_t)clampi(nearest_int(iscale * scales[j]), -128, 127);
            b[i].d = inf_f32_to_f16(1.0f / iscale);
            const float d = inf_f16_to_f32(b[i].d);
            for (int j = 0; j < INF_QK_K / 16; j++) {
                const float ds = d * b[i].scales[j];
                for (int l = 0; l < 16; l++) {
                    const float v = xb[16 * j + l];
                    const int q = ds ? clampi(nearest_int(v / ds), -32, 31) : 0;
                    L[16 * j + l] = (uint8_t)(q + 32);
                }
            }
        }
        uint8_t *ql = b[i].ql, *qh = b[i].qh;
        for (int h = 0; h < INF_QK_K; h += 128) {
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = L[h + l + 0], q2 = L[h + l + 32];
                const uint8_t q3 = L[h + l + 64], q4 = L[h + l + 96];
                ql[l + 0] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] =
                    (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

/* ---- Q4_1 / Q5_0 / Q5_1: 32-weight blocks, nibbles as Q4_0 (+ a fifth bit in qh) ---- */

/* bit 4 of weight j (0..31) of a Q5 block */
static inline int q5_high(const uint8_t qh[4], int j) {
    return (qh[j / 8] >> (j % 8)) & 1;
}

static void dequant_q4_1(float *y, const void *src, int64_t n) {
    const inf_block_q4_1 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = inf_f16_to_f32(b[i].d), m = inf_f16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static void dequant_q5_0(float *y, const void *src, int64_t n) {
    const inf_block_q5_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            const int x0 = ((b[i].qs[j] & 0xF) | q5_high(b[i].qh, j) << 4) - 16;
            const int x1 = ((b[i].qs[j] >> 4) | q5_high(b[i].qh, j + 16) << 4) - 16;
            y[j] = (float)x0 * d;
            y[j + 16] = (float)x1 * d;
        }
    }
}

static void dequant_q5_1(float *y, const void *src, int64_t n) {
    const inf_block_q5_1 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = inf_f16_to_f32(b[i].d), m = inf_f16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            const int x0 = (b[i].qs[j] & 0xF) | q5_high(b[i].qh, j) << 4;
            const int x1 = (b[i].qs[j] >> 4) | q5_high(b[i].qh, j + 16) << 4;
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        }
    }
}

/* 32 values q[j] in 0..15 (and bit 4 into qh when qh is not NULL), Q4_0's nibble order */
static void pack_nibbles(uint8_t qs[16], uint8_t *qh, const uint8_t q[32]) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((q[j] & 0xF) | (q[j + 16] & 0xF) << 4);
    if (qh) {
        memset(qh, 0, 4);
        for (int j = 0; j < 32; j++)
            qh[j / 8] |= (uint8_t)(((q[j] >> 4) & 1) << (j % 8));
    }
}

/* x[32] ≈ d * q + m with q in 0..nmax: ggml's reference (min and range),
 * rounding against the stored f16 d and m. */
static void quant_affine32(const float *x, int nmax, uint16_t *dh, uint16_t *mh, uint8_t q[32]) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 32; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    *dh = inf_f32_to_f16((hi - lo) / (float)nmax);
    *mh = inf_f32_to_f16(lo);
    const float d = inf_f16_to_f32(*dh), m = inf_f16_to_f32(*mh);
    for (int j = 0; j < 32; j++)
        q[j] = (uint8_t)(d > 0 ? clampi(nearest_int((x[j] - m) / d), 0, nmax) : 0);
}

static void quant_q4_1(void *dst, const float *x, int64_t n) {
    inf_block_q4_1 *b = dst; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++) {
        uint8_t q[32];
        quant_affine32(x + 32 * i, 15, &b[i].d, &b[i].m, q);
        pack_nibbles(b[i].qs, NULL, q);
    }
}

static void quant_q5_1(void *dst, const float *x, int64_t n) {
    inf_block_q5_1 *b = dst; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++) {
        uint8_t q[32];
        quant_affine32(x + 32 * i, 31, &b[i].d, &b[i].m, q);
        pack_nibbles(b[i].qs, b[i].qh, q);
    }
}

static void quant_q5_0(void *dst, const float *x, int64_t n) {
    inf_block_q5_0 *b = dst; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++) {
        const float *xb = x + 32 * i;
        /* as Q4_0: the weight of largest magnitude, with its sign, maps to -16 */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(xb[j]) > amax) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        b[i].d = inf_f32_to_f16(max / -16.0f);
        const float d = inf_f16_to_f32(b[i].d);
        uint8_t q[32];
        for (int j = 0; j < 32; j++)
            q[j] = (uint8_t)(d != 0 ? clampi(nearest_int(xb[j] / d) + 16, 0, 31) : 16);
        pack_nibbles(b[i].qs, b[i].qh, q);
    }
}

/* ---- Q2_K / Q3_K: 16 sub-blocks of 16, 2-bit fields in qs ---- */

/* the 2-bit field of weight k (0..255) in a K-quant's qs[64] */
static inline int k2_field(const uint8_t *qs, int k) {
    return (qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
}

static void set_k2_fields(uint8_t qs[64], const uint8_t L[256]) {
    memset(qs, 0, 64);
    for (int k = 0; k < 256; k++)
        qs[32 * (k / 128) + k % 32] |= (uint8_t)((L[k] & 3) << (2 * ((k % 128) / 32)));
}

static void dequant_q2_K(float *y, const void *src, int64_t n) {
    const inf_block_q2_K *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++, y += INF_QK_K) {
        const float d = inf_f16_to_f32(b[i].d), min = inf_f16_to_f32(b[i].dmin);
        for (int s = 0; s < 16; s++) {
            const float dl = d * (float)(b[i].scales[s] & 0xF),
                        ml = min * (float)(b[i].scales[s] >> 4);
            for (int l = 0; l < 16; l++)
                y[16 * s + l] = dl * (float)k2_field(b[i].qs, 16 * s + l) - ml;
        }
    }
}

static void quant_q2_K(void *dst, const float *x, int64_t n) {
    inf_block_q2_K *b = dst; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float *xb = x + i * INF_QK_K;
        float scales[16], mins[16], max_scale = 0.0f, max_min = 0.0f;
        for (int s = 0; s < 16; s++) {
            scales[s] = fit_affine(16, 3, xb + 16 * s, &mins[s]);
            max_scale = fmaxf(max_scale, scales[s]);
            max_min = fmaxf(max_min, mins[s]);
        }
        b[i].d = inf_f32_to_f16(max_scale / 15.0f);
        b[i].dmin = inf_f32_to_f16(max_min / 15.0f);
        const float d = inf_f16_to_f32(b[i].d), dmin = inf_f16_to_f32(b[i].dmin);
        uint8_t L[256];
        for (int s = 0; s < 16; s++) {
            const int ls = d > 0 ? clampi(nearest_int(scales[s] / d), 0, 15) : 0;
            const int lm = dmin > 0 ? clampi(nearest_int(mins[s] / dmin), 0, 15) : 0;
            b[i].scales[s] = (uint8_t)(ls | lm << 4);
            const float ds = d * (float)ls, dm = dmin * (float)lm;
            for (int l = 0; l < 16; l++)
                L[16 * s + l] =
                    (uint8_t)(ds > 0 ? clampi(nearest_int((xb[16 * s + l] + dm) / ds), 0, 3) : 0);
        }
        set_k2_fields(b[i].qs, L);
    }
}

/* Q3_K's 6-bit scale of sub-block s (0..15) */
static inline int q3_K_scale(const uint8_t *sc, int s) {
    const int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    const int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return lo | hi << 4;
}

static void dequant_q3_K(float *y, const void *src, int64_t n) {
    const inf_block_q3_K *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++, y += INF_QK_K) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 16; s++) {
            const float dl = d * (float)(q3_K_scale(b[i].scales, s) - 32);
            for (int l = 0; l < 16; l++) {
                const int k = 16 * s + l;
                const int q = k2_field(b[i].qs, k) - ((b[i].hmask[k % 32] >> (k / 32)) & 1 ? 0 : 4);
                y[k] = dl * (float)q;
            }
        }
    }
}

static void quant_q3_K(void *dst, const float *x, int64_t n) {
    inf_block_q3_K *b = dst; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float *xb = x + i * INF_QK_K;
        float scales[16], amax = 0.0f, max = 0.0f;
        for (int s = 0; s < 16; s++) {
            scales[s] = fit_symmetric(16, 4, xb + 16 * s);
            if (fabsf(scales[s]) > amax) {
                amax = fabsf(scales[s]);
                max = scales[s];
            }
        }
        memset(b[i].scales, 0, sizeof b[i].scales);
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        uint8_t L[256];
        b[i].d = amax > 0 ? inf_f32_to_f16(max / -32.0f) : 0;
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 16; s++) {
            const int l = d != 0 ? clampi(nearest_int(scales[s] / d), -32, 31) : 0;
            const int v = l + 32;
            if (s < 8)
                b[i].scales[s] |= (uint8_t)(v & 0xF);
            else
                b[i].scales[s - 8] |= (uint8_t)((v & 0xF) << 4);
            b[i].scales[8 + s % 4] |= (uint8_t)((v >> 4) << (2 * (s / 4)));
            const float ds = d * (float)l;
            for (int j = 0; j < 16; j++) {
                const int k = 16 * s + j;
                const int q = ds != 0 ? clampi(nearest_int(xb[k] / ds), -4, 3) : 0;
                L[k] = (uint8_t)(q + 4);
                if (L[k] & 4) b[i].hmask[k % 32] |= (uint8_t)(1 << (k / 32));
            }
        }
        set_k2_fields(b[i].qs, L);
    }
}

/* ---- Q5_K: Q4_K's scales with a fifth bit per weight ---- */

static void dequant_q5_K(float *y, const void *src, int64_t n) {
    const inf_block_q5_K *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++, y += INF_QK_K) {
        const float d = inf_f16_to_f32(b[i].d), min = inf_f16_to_f32(b[i].dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            q4_K_scale_min(s, b[i].scales, &sc, &m);
            const float ds = d * sc, dm = min * m;
            const uint8_t *qs = b[i].qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++) {
                const int q = ((s & 1) ? qs[l] >> 4 : qs[l] & 0xF) | ((b[i].qh[l] >> s) & 1) << 4;
                y[32 * s + l] = ds * (float)q - dm;
            }
        }
    }
}

static void quant_q5_K(void *dst, const float *x, int64_t n) {
    inf_block_q5_K *b = dst; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float *xb = x + i * INF_QK_K;
        float scales[8], mins[8], max_scale = 0.0f, max_min = 0.0f;
        for (int s = 0; s < 8; s++) {
            scales[s] = fit_affine(32, 31, xb + 32 * s, &mins[s]);
            max_scale = fmaxf(max_scale, scales[s]);
            max_min = fmaxf(max_min, mins[s]);
        }
        const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
        memset(b[i].scales, 0, sizeof b[i].scales);
        for (int s = 0; s < 8; s++) {
            const uint8_t ls = (uint8_t)clampi(nearest_int(inv_scale * scales[s]), 0, 63);
            const uint8_t lm = (uint8_t)clampi(nearest_int(inv_min * mins[s]), 0, 63);
            if (s < 4) {
                b[i].scales[s] = ls;
                b[i].scales[s + 4] = lm;
            } else {
                b[i].scales[s + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
                b[i].scales[s - 4] |= (uint8_t)((ls >> 4) << 6);
                b[i].scales[s] |= (uint8_t)((lm >> 4) << 6);
            }
        }
        b[i].d = inf_f32_to_f16(max_scale / 63.0f);
        b[i].dmin = inf_f32_to_f16(max_min / 63.0f);
        const float d = inf_f16_to_f32(b[i].d), dmin = inf_f16_to_f32(b[i].dmin);
        memset(b[i].qs, 0, sizeof b[i].qs);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            q4_K_scale_min(s, b[i].scales, &sc, &m);
            const float ds = d * sc, dm = dmin * m;
            for (int l = 0; l < 32; l++) {
                const int q = ds ? clampi(nearest_int((xb[32 * s + l] + dm) / ds), 0, 31) : 0;
                b[i].qs[32 * (s / 2) + l] |= (uint8_t)((q & 0xF) << (4 * (s & 1)));
                b[i].qh[l] |= (uint8_t)((q >> 4) << s);
            }
        }
    }
}

/* ---- IQ4_NL / IQ4_XS: 16 non-linear levels ---- */

const int8_t inf_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

static void dequant_iq4_nl(float *y, const void *src, int64_t n) {
    const inf_block_iq4_nl *b = src; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)inf_iq4nl_values[b[i].qs[j] & 0xF];
            y[j + 16] = d * (float)inf_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

static void dequant_iq4_xs(float *y, const void *src, int64_t n) {
    const inf_block_iq4_xs *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++, y += 32) {
            const int ls = ((b[i].scales_l[s / 2] >> (4 * (s % 2))) & 0xF) |
                           ((b[i].scales_h >> (2 * s)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            const uint8_t *qs = b[i].qs + 16 * s;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)inf_iq4nl_values[qs[j] & 0xF];
                y[j + 16] = dl * (float)inf_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* index of the level nearest v (levels ascending) */
static int nearest_level(const int8_t *levels, int nl, float v) {
    if (!(v > (float)levels[0])) return 0; /* at or below the first (or NaN) */
    /* levels ascend: k = the first level >= v, then the nearer of it and the one below (the
       lower on a tie) */
    int lo = 1, hi = nl;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if ((float)levels[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == nl) return nl - 1;
    return fabsf(v - levels[lo - 1]) <= fabsf(v - levels[lo]) ? lo - 1 : lo;
}

/* x[32] ≈ s * values[q[j]]: candidate scales around max / values[0], each
 * refit by least squares; returns the s of least squared error (0 for an all-zero block). */
static float fit_iq4(const float *x, uint8_t q[32]) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    memset(q, 8, 32); /* level 1 of 16: the value nearest 0 */
    if (amax == 0.0f) return 0.0f;
    float best_s = max / inf_iq4nl_values[0], best_gain = -1.0f;
    for (int step = -10; step <= 10; step++) {
        const float id = ((float)inf_iq4nl_values[0] + 0.1f * step) / max;
        float sqx = 0, sq2 = 0;
        for (int j = 0; j < 32; j++) {
            const int l = nearest_level(inf_iq4nl_values, 16, x[j] * id);
            const float v = inf_iq4nl_values[l];
            sqx += v * x[j];
            sq2 += v * v;
        }
        if (sq2 > 0 && sqx * sqx > best_gain * sq2) {
            best_gain = sqx * sqx / sq2;
            best_s = sqx / sq2;
        }
    }
    return best_s;
}

static void quant_iq4_nl(void *dst, const float *x, int64_t n) {
    inf_block_iq4_nl *b = dst; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++) {
        const float *xb = x + 32 * i;
        uint8_t q[32];
        b[i].d = inf_f32_to_f16(fit_iq4(xb, q));
        const float d = inf_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++)
            q[j] = (uint8_t)(d != 0 ? nearest_level(inf_iq4nl_values, 16, xb[j] / d) : 8);
        pack_nibbles(b[i].qs, NULL, q);
    }
}

static void quant_iq4_xs(void *dst, const float *x, int64_t n) {
    inf_block_iq4_xs *b = dst; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float *xb = x + i * INF_QK_K;
        float scales[8], amax = 0.0f, max = 0.0f;
        uint8_t q[32];
        for (int s = 0; s < 8; s++) {
            scales[s] = fit_iq4(xb + 32 * s, q);
            if (fabsf(scales[s]) > amax) {
                amax = fabsf(scales[s]);
                max = scales[s];
            }
        }
        b[i].d = amax > 0 ? inf_f32_to_f16(max / -32.0f) : 0;
        const float d = inf_f16_to_f32(b[i].d);
        b[i].scales_h = 0;
        memset(b[i].scales_l, 0, sizeof b[i].scales_l);
        for (int s = 0; s < 8; s++) {
            const int l = d != 0 ? clampi(nearest_int(scales[s] / d), -32, 31) : 0;
            const int ls = l + 32;
            b[i].scales_l[s / 2] |= (uint8_t)((ls & 0xF) << (4 * (s % 2)));
            b[i].scales_h |= (uint16_t)((ls >> 4) << (2 * s));
            const float dl = d * (float)l;
            for (int j = 0; j < 32; j++)
                q[j] = (uint8_t)(dl != 0 ? nearest_level(inf_iq4nl_values, 16, xb[32 * s + j] / dl)
                                         : 8);
            pack_nibbles(b[i].qs + 16 * s, NULL, q);
        }
    }
}

/* ---- MXFP4: a power-of-two scale, e2m1 values ---- */

const int8_t inf_fp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(e - 128) as ggml computes it (e < 2: the subnormals 2^-128, 2^-127) */
static inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void dequant_mxfp4(float *y, const void *src, int64_t n) {
    const inf_block_mxfp4 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        const float d = e8m0_half(b[i].e);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)inf_fp4_values[b[i].qs[j] & 0xF] * d;
            y[j + 16] = (float)inf_fp4_values[b[i].qs[j] >> 4] * d;
        }
    }
}

static void quant_mxfp4(void *dst, const float *x, int64_t n) {
    /* the positive half of the levels, ascending: nibble = index, | 8 for negative */
    static const int8_t pos[8] = {0, 1, 2, 3, 4, 6, 8, 12};
    inf_block_mxfp4 *b = dst; /* [n/32] */
    for (int64_t i = 0; i < n / 32; i++) {
        const float *xb = x + 32 * i;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        /* the largest level (12 * 2^(e-128)) lands in (0.75, 1.5] x amax */
        const int e = amax > 0 ? clampi((int)floorf(log2f(amax)) - 2 + 127, 0, 254) : 0;
        b[i].e = (uint8_t)e;
        const float d = e8m0_half((uint8_t)e);
        uint8_t q[32];
        for (int j = 0; j < 32; j++) {
            const int l = amax > 0 ? nearest_level(pos, 8, fabsf(xb[j]) / d) : 0;
            q[j] = (uint8_t)(l | (xb[j] < 0 && l ? 8 : 0));
        }
        pack_nibbles(b[i].qs, NULL, q);
    }
}

/* ---- grid types: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (read only) ---- */

/* byte j of a grid entry */
static inline float grid_byte(uint64_t entry, int j) {
    return (float)(uint8_t)(entry >> (8 * j));
}

static void dequant_iq2_s(float *y, const void *src, int64_t n) {
    const inf_block_iq2_s *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        const uint8_t *idx = b[i].qs, *signs = b[i].qs + 32;
        for (int s = 0; s < 8; s++) {
            const float db[2] = {d * (0.5f + (float)(b[i].scales[s] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(b[i].scales[s] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g =
                    inf_iq2s_grid[idx[4 * s + l] | ((b[i].qh[s] >> (2 * l)) & 3) << 8];
                const uint8_t sg = signs[4 * s + l];
                for (int j = 0; j < 8; j++)
                    y[j] = db[l / 2] * grid_byte(g, j) * ((sg >> j) & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

static void dequant_iq3_xxs(float *y, const void *src, int64_t n) {
    const inf_block_iq3_xxs *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++) {
            const uint8_t *idx = b[i].qs + 8 * s;
            uint32_t aux;
            memcpy(&aux, b[i].qs + 64 + 4 * s, 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned sg = inf_iq_even_signs((aux >> (7 * l)) & 127);
                const uint32_t g1 = inf_iq3xxs_grid[idx[2 * l]],
                               g2 = inf_iq3xxs_grid[idx[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid_byte(g1, j) * ((sg >> j) & 1 ? -1.0f : 1.0f);
                    y[j + 4] = db * grid_byte(g2, j) * ((sg >> (j + 4)) & 1 ? -1.0f : 1.0f);
                }
            }
        }
    }
}

static void dequant_iq3_s(float *y, const void *src, int64_t n) {
    const inf_block_iq3_s *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++) {
            const float db = d * (float)(1 + 2 * ((b[i].scales[s / 2] >> (4 * (s % 2))) & 0xF));
            const uint8_t *idx = b[i].qs + 8 * s, *signs = b[i].signs + 4 * s;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint32_t g1 = inf_iq3s_grid[idx[2 * l] | ((b[i].qh[s] >> (2 * l)) & 1) << 8];
                const uint32_t g2 =
                    inf_iq3s_grid[idx[2 * l + 1] | ((b[i].qh[s] >> (2 * l + 1)) & 1) << 8];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * grid_byte(g1, j) * ((signs[l] >> j) & 1 ? -1.0f : 1.0f);
                    y[j + 4] = db * grid_byte(g2, j) * ((signs[l] >> (j + 4)) & 1 ? -1.0f : 1.0f);
                }
            }
        }
    }
}

static void dequant_iq2_xxs(float *y, const void *src, int64_t n) {
    const inf_block_iq2_xxs *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++) {
            uint32_t aux[2];
            memcpy(aux, b[i].qs + 4 * s, 8);
            const float db = d * (0.5f + (float)(aux[1] >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = inf_iq2xxs_grid[(aux[0] >> (8 * l)) & 0xFF];
                const unsigned sg = inf_iq_even_signs((aux[1] >> (7 * l)) & 127);
                for (int j = 0; j < 8; j++)
                    y[j] = db * grid_byte(g, j) * ((sg >> j) & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

static void dequant_iq2_xs(float *y, const void *src, int64_t n) {
    const inf_block_iq2_xs *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++) {
            const float db[2] = {d * (0.5f + (float)(b[i].scales[s] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(b[i].scales[s] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                const uint16_t q = b[i].qs[4 * s + l];
                const uint64_t g = inf_iq2xs_grid[q & 511];
                const unsigned sg = inf_iq_even_signs(q >> 9);
                for (int j = 0; j < 8; j++)
                    y[j] = db[l / 2] * grid_byte(g, j) * ((sg >> j) & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

/* byte j of an IQ1 grid entry: -1, 0 or 1 */
static inline float grid_int8(uint64_t entry, int j) {
    return (float)(int8_t)(uint8_t)(entry >> (8 * j));
}

static void dequant_iq1_s(float *y, const void *src, int64_t n) {
    const inf_block_iq1_s *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        const float d = inf_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++) {
            const unsigned qh = b[i].qh[s];
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -0.125f : 0.125f;
            for (int l = 0; l < 4; l++, y += 8) {
                const uint64_t g = inf_iq1s_grid[b[i].qs[4 * s + l] | ((qh >> (3 * l)) & 7) << 8];
                for (int j = 0; j < 8; j++)
                    y[j] = dl * (grid_int8(g, j) + delta);
            }
        }
    }
}

static void dequant_iq1_m(float *y, const void *src, int64_t n) {
    const inf_block_iq1_m *b = src; /* [n/256] */
    for (int64_t i = 0; i < n / INF_QK_K; i++) {
        uint16_t sc[4];
        memcpy(sc, b[i].scales, 8);
        const uint16_t dbits = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                          ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
        const float d = inf_f16_to_f32(dbits);
        for (int s = 0; s < 8; s++) {
            const float dl[2] = {d * (float)(2 * ((sc[s / 2] >> (6 * (s % 2))) & 7) + 1),
                                 d * (float)(2 * ((sc[s / 2] >> (6 * (s % 2) + 3)) & 7) + 1)};
            for (int l = 0; l < 4; l++, y += 8) {
                const unsigned h = (b[i].qh[2 * s + l / 2] >> (4 * (l % 2))) & 0xF;
                const uint64_t g = inf_iq1s_grid[b[i].qs[4 * s + l] | (h & 7) << 8];
                const float delta = h & 8 ? -0.125f : 0.125f;
                for (int j = 0; j < 8; j++)
                    y[j] = dl[l / 2] * (grid_int8(g, j) + delta);
            }
        }
    }
}

/* ---- the table: one row per type ---- */

static const inf_dtype_info infos[INF_DTYPE_COUNT] = {
    [INF_F32] = {"F32", 1, 4, dequant_f32, quant_f32},
    [INF_F16] = {"F16", 1, 2, dequant_f16, quant_f16},
    [INF_BF16] = {"BF16", 1, 2, dequant_bf16, quant_bf16},
    [INF_Q4_0] = {"Q4_0", 32, sizeof(inf_block_q4_0), dequant_q4_0, quant_q4_0},
    [INF_Q4_1] = {"Q4_1", 32, sizeof(inf_block_q4_1), dequant_q4_1, quant_q4_1},
    [INF_Q5_0] = {"Q5_0", 32, sizeof(inf_block_q5_0), dequant_q5_0, quant_q5_0},
    [INF_Q5_1] = {"Q5_1", 32, sizeof(inf_block_q5_1), dequant_q5_1, quant_q5_1},
    [INF_Q8_0] = {"Q8_0", 32, sizeof(inf_block_q8_0), dequant_q8_0, quant_q8_0},
    [INF_Q2_K] = {"Q2_K", INF_QK_K, sizeof(inf_block_q2_K), dequant_q2_K, quant_q2_K},
    [INF_Q3_K] = {"Q3_K", INF_QK_K, sizeof(inf_block_q3_K), dequant_q3_K, quant_q3_K},
    [INF_Q4_K] = {"Q4_K", INF_QK_K, sizeof(inf_block_q4_K), dequant_q4_K, quant_q4_K},
    [INF_Q5_K] = {"Q5_K", INF_QK_K, sizeof(inf_block_q5_K), dequant_q5_K, quant_q5_K},
    [INF_Q6_K] = {"Q6_K", INF_QK_K, sizeof(inf_block_q6_K), dequant_q6_K, quant_q6_K},
    [INF_IQ4_NL] = {"IQ4_NL", 32, sizeof(inf_block_iq4_nl), dequant_iq4_nl, quant_iq4_nl},
    [INF_IQ4_XS] = {"IQ4_XS", INF_QK_K, sizeof(inf_block_iq4_xs), dequant_iq4_xs, quant_iq4_xs},
    [INF_MXFP4] = {"MXFP4", 32, sizeof(inf_block_mxfp4), dequant_mxfp4, quant_mxfp4},
    [INF_IQ2_S] = {"IQ2_S", INF_QK_K, sizeof(inf_block_iq2_s), dequant_iq2_s, NULL},
    [INF_IQ3_XXS] = {"IQ3_XXS", INF_QK_K, sizeof(inf_block_iq3_xxs), dequant_iq3_xxs, NULL},
    [INF_IQ3_S] = {"IQ3_S", INF_QK_K, sizeof(inf_block_iq3_s), dequant_iq3_s, NULL},
    [INF_IQ2_XXS] = {"IQ2_XXS", INF_QK_K, sizeof(inf_block_iq2_xxs), dequant_iq2_xxs, NULL},
    [INF_IQ2_XS] = {"IQ2_XS", INF_QK_K, sizeof(inf_block_iq2_xs), dequant_iq2_xs, NULL},
    [INF_IQ1_S] = {"IQ1_S", INF_QK_K, sizeof(inf_block_iq1_s), dequant_iq1_s, NULL},
    [INF_IQ1_M] = {"IQ1_M", INF_QK_K, sizeof(inf_block_iq1_m), dequant_iq1_m, NULL},
};

const inf_dtype_info *inf_dtype_get(uint32_t type) {
    if (type >= INF_DTYPE_COUNT || !infos[type].name) return NULL;
    return &infos[type];
}

void inf_dequantize_row(inf_dtype t, float *dst, const void *src, int64_t n) {
    const inf_dtype_info *ti = inf_dtype_get(t);
    INF_ASSERT(ti && inf_dtype_row_bytes(t, n) > 0);
    ti->dequant(dst, src, n);
}

int inf_quantize_row(inf_dtype t, void *dst, const float *src, int64_t n) {
    const inf_dtype_info *ti = inf_dtype_get(t);
    if (!ti || !ti->quant || inf_dtype_row_bytes(t, n) == 0) return -1;
    ti->quant(dst, src, n);
    return 0;
}
