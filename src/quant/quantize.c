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
static void quant_f16(void *dst, const float *x, int64_t n) {
    uint16_t *h = dst; /* [n] */
    for (int64_t i = 0; i < n; i++)
        h[i] = inf_f32_to_f16(x[i]);
}

static void dequant_bf16(float *y, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    for (int64_t i = 0; i < n; i++)
        y[i] = inf_bf16_to_f32(h[i]);
}
static void quant_bf16(void *dst, const float *x, int64_t n) {
    uint16_t *h = dst; /* [n] */
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

static void quant_q8_0(void *dst, const float *x, int64_t n) {
    inf_block_q8_0 *b = dst; /* [n/32] */
    for (int64_t i = 0; i < n / INF_QK8_0; i++) {
        const float *xb = x + i * INF_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < INF_QK8_0; j++)
            amax = fmaxf(amax, fabsf(xb[j]));
        const float d = amax / 127.0f;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = inf_f32_to_f16(d);
        for (int j = 0; j < INF_QK8_0; j++)
            b[i].qs[j] = (int8_t)roundf(xb[j] * id);
    }
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

/* ---- the table ---- */

typedef struct {
    void (*dequant)(float *y, const void *src, int64_t n);
    void (*quant)(void *dst, const float *x, int64_t n);
} quant_ops;

static const quant_ops ops[] = {
    [INF_F32] = {dequant_f32, quant_f32},    [INF_F16] = {dequant_f16, quant_f16},
    [INF_BF16] = {dequant_bf16, quant_bf16}, [INF_Q8_0] = {dequant_q8_0, quant_q8_0},
    [INF_Q4_0] = {dequant_q4_0, quant_q4_0}, [INF_Q4_K] = {dequant_q4_K, quant_q4_K},
    [INF_Q6_K] = {dequant_q6_K, quant_q6_K},
};

static const quant_ops *ops_for(inf_dtype t) {
    if ((unsigned)t >= sizeof ops / sizeof ops[0] || !ops[t].dequant) return NULL;
    return &ops[t];
}

void inf_dequantize_row(inf_dtype t, float *dst, const void *src, int64_t n) {
    const quant_ops *o = ops_for(t);
    INF_ASSERT(o && inf_dtype_row_bytes(t, n) > 0);
    o->dequant(dst, src, n);
}

int inf_quantize_row(inf_dtype t, void *dst, const float *src, int64_t n) {
    const quant_ops *o = ops_for(t);
    if (!o || inf_dtype_row_bytes(t, n) == 0) return -1;
    o->quant(dst, src, n);
    return 0;
}
