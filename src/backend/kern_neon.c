/* NEON (aarch64 Advanced SIMD) kernels: f32 dot, dequantization of the
 * float, 32-block and k-quant types (the generic matmul path: every type the
 * AVX2 table dequantizes, with the reference's operations so the floats are
 * the same bit for bit), row ops and attention.
 * Built only on aarch64; tested under qemu-user (tests/oracle/check_neon.sh).
 * Elementwise tails go through the same vector code on a padded copy, so an
 * element's result never depends on where the pool cut the array. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "backend/delta.h"
#include "backend/kernels.h"
#include "util/half.h"

/* e^x, x clamped to [-87, 88.7] */
static inline float32x4_t exp4(float32x4_t x) {
    x = vmaxq_f32(x, vdupq_n_f32(-87.0f));
    x = vminq_f32(x, vdupq_n_f32(88.7f));
    float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

static float ne_dot_f32(const float *a, const float *b, int n) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = vdupq_n_f32(0), s2 = vdupq_n_f32(0), s3 = vdupq_n_f32(0);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4)
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static void ne_dequant_f16(float *dst, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h + i))));
    for (; i < n; i++)
        dst[i] = inf_f16_to_f32(h[i]);
}

static void ne_dequant_bf16(float *dst, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h + i), 16)));
    for (; i < n; i++)
        dst[i] = inf_bf16_to_f32(h[i]);
}

static void ne_dequant_q8_0(float *dst, const void *src, int64_t n) {
    const inf_block_q8_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        float d = inf_f16_to_f32(b->d);
        for (int j = 0; j < 32; j += 8) {
            int16x8_t q = vmovl_s8(vld1_s8(b->qs + j));
            vst1q_f32(dst + i + j, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q))), d));
            vst1q_f32(dst + i + j + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(q))), d));
        }
    }
}

/* 16 signed bytes q (weights in order) to floats in the reference's
 * operations: q * a (MUL), q * a + b (ADD) or q * a - b (SUB); never fused,
 * as the scalar reference is compiled. */
enum { MUL, ADD, SUB };
static inline __attribute__((always_inline)) void ne_emit16(float *dst, int8x16_t q, float a,
                                                            float b, const int op) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_s8(vget_high_s8(q));
    const int32x4_t p[4] = {vmovl_s16(vget_low_s16(lo)), vmovl_s16(vget_high_s16(lo)),
                            vmovl_s16(vget_low_s16(hi)), vmovl_s16(vget_high_s16(hi))};
    for (int i = 0; i < 4; i++) {
        float32x4_t y = vmulq_n_f32(vcvtq_f32_s32(p[i]), a);
        if (op == ADD) y = vaddq_f32(y, vdupq_n_f32(b));
        if (op == SUB) y = vsubq_f32(y, vdupq_n_f32(b));
        vst1q_f32(dst + 4 * i, y);
    }
}

static inline int8x16_t s8(uint8x16_t v) {
    return vreinterpretq_s8_u8(v);
}

static void ne_dequant_q4_0(float *dst, const void *src, int64_t n) {
    const inf_block_q4_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        float d = inf_f16_to_f32(b->d);
        uint8x16_t q = vld1q_u8(b->qs);
        ne_emit16(dst + i, vsubq_s8(s8(vandq_u8(q, vdupq_n_u8(15))), vdupq_n_s8(8)), d, 0, MUL);
        ne_emit16(dst + i + 16, vsubq_s8(s8(vshrq_n_u8(q, 4)), vdupq_n_s8(8)), d, 0, MUL);
    }
}

static void ne_dequant_q4_1(float *dst, const void *src, int64_t n) {
    const inf_block_q4_1 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        const float d = inf_f16_to_f32(b->d), m = inf_f16_to_f32(b->m);
        const uint8x16_t q = vld1q_u8(b->qs);
        ne_emit16(dst + i, s8(vandq_u8(q, vdupq_n_u8(15))), d, m, ADD);
        ne_emit16(dst + i + 16, s8(vshrq_n_u8(q, 4)), d, m, ADD);
    }
}

/* Bit j of the 32-bit qh as 0x10 in byte j - 16 * half (Q5_0/Q5_1's fifth
 * bits of weights 16 * half .. 16 * half + 15). */
static inline uint8x16_t ne_fifth16(const uint8_t qh[4], int half) {
    const uint8x16_t v = vcombine_u8(vdup_n_u8(qh[2 * half]), vdup_n_u8(qh[2 * half + 1]));
    const uint8x16_t bit = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vandq_u8(vtstq_u8(v, bit), vdupq_n_u8(0x10));
}

static void ne_dequant_q5_0(float *dst, const void *src, int64_t n) {
    const inf_block_q5_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        const float d = inf_f16_to_f32(b->d);
        const uint8x16_t q = vld1q_u8(b->qs);
        const uint8x16_t lo = vorrq_u8(vandq_u8(q, vdupq_n_u8(15)), ne_fifth16(b->qh, 0));
        const uint8x16_t hi = vorrq_u8(vshrq_n_u8(q, 4), ne_fifth16(b->qh, 1));
        ne_emit16(dst + i, vsubq_s8(s8(lo), vdupq_n_s8(16)), d, 0, MUL);
        ne_emit16(dst + i + 16, vsubq_s8(s8(hi), vdupq_n_s8(16)), d, 0, MUL);
    }
}

static void ne_dequant_q5_1(float *dst, const void *src, int64_t n) {
    const inf_block_q5_1 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        const float d = inf_f16_to_f32(b->d), m = inf_f16_to_f32(b->m);
        const uint8x16_t q = vld1q_u8(b->qs);
        ne_emit16(dst + i, s8(vorrq_u8(vandq_u8(q, vdupq_n_u8(15)), ne_fifth16(b->qh, 0))), d, m,
                  ADD);
        ne_emit16(dst + i + 16, s8(vorrq_u8(vshrq_n_u8(q, 4), ne_fifth16(b->qh, 1))), d, m, ADD);
    }
}

/* v >> k per byte (k a run-time count) */
static inline uint8x16_t ne_shr(uint8x16_t v, int k) {
    return vshlq_u8(v, vdupq_n_s8((int8_t)-k));
}

static void ne_dequant_q2_K(float *dst, const void *src, int64_t n) {
    const inf_block_q2_K *b = src; /* [n/256] */
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d), dmin = inf_f16_to_f32(b->dmin);
        /* weight 128 h + 32 j + l is bits 2j of qs[32 h + l]; 16 weights per scale */
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = b->scales[8 * h + 2 * j + half];
                    const uint8x16_t v = vld1q_u8(b->qs + 32 * h + 16 * half);
                    ne_emit16(dst + i + 128 * h + 32 * j + 16 * half,
                              s8(vandq_u8(ne_shr(v, 2 * j), m3)), d * (float)(sc & 0xF),
                              dmin * (float)(sc >> 4), SUB);
                }
    }
}

static void ne_dequant_q3_K(float *dst, const void *src, int64_t n) {
    const inf_block_q3_K *b = src; /* [n/256] */
    const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d);
        int sc[16];
        for (int s = 0; s < 16; s++) {
            const int lo = s < 8 ? b->scales[s] & 0xF : b->scales[s - 8] >> 4;
            sc[s] = (lo | ((b->scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4) - 32;
        }
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 4; j++)
                for (int half = 0; half < 2; half++) {
                    const uint8x16_t v = vld1q_u8(b->qs + 32 * h + 16 * half);
                    const uint8x16_t low = vandq_u8(ne_shr(v, 2 * j), m3);
                    /* minus 4 where the high bit (hmask[l] bit 4h + j) is clear */
                    const uint8x16_t hb =
                        vandq_u8(ne_shr(vld1q_u8(b->hmask + 16 * half), 4 * h + j), one);
                    const int8x16_t q = vsubq_s8(s8(low), s8(vshlq_n_u8(veorq_u8(hb, one), 2)));
                    ne_emit16(dst + i + 128 * h + 32 * j + 16 * half, q,
                              d * (float)sc[8 * h + 2 * j + half], 0, MUL);
                }
    }
}

/* Q4_K/Q5_K's 6-bit scale and min of sub-block j */
static inline void ne_k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void ne_dequant_q5_K(float *dst, const void *src, int64_t n) {
    const inf_block_q5_K *b = src; /* [n/256] */
    const uint8x16_t m0f = vdupq_n_u8(0x0F), one = vdupq_n_u8(1);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d), dmin = inf_f16_to_f32(b->dmin);
        for (int s = 0; s < 8; s++) {
            int sc, m;
            ne_k4_scale_min(b->scales, s, &sc, &m);
            const float ds = d * (float)sc, dm = dmin * (float)m;
            for (int half = 0; half < 2; half++) {
                const uint8x16_t v = vld1q_u8(b->qs + 32 * (s / 2) + 16 * half);
                const uint8x16_t lo = (s & 1) ? vshrq_n_u8(v, 4) : vandq_u8(v, m0f);
                const uint8x16_t hb = vandq_u8(ne_shr(vld1q_u8(b->qh + 16 * half), s), one);
                ne_emit16(dst + i + 32 * s + 16 * half, s8(vorrq_u8(lo, vshlq_n_u8(hb, 4))), ds, dm,
                          SUB);
            }
        }
    }
}

/* A block's 32 nibbles looked up in a 16-entry signed table (IQ4_NL, IQ4_XS,
 * MXFP4), times a: low nibbles are weights 0..15, high ones 16..31. */
static inline void ne_lookup32(float *dst, const uint8_t *qs, const int8_t *table, float a) {
    const int8x16_t t = vld1q_s8(table);
    const uint8x16_t q = vld1q_u8(qs);
    ne_emit16(dst, vqtbl1q_s8(t, vandq_u8(q, vdupq_n_u8(15))), a, 0, MUL);
    ne_emit16(dst + 16, vqtbl1q_s8(t, vshrq_n_u8(q, 4)), a, 0, MUL);
}

static void ne_dequant_iq4_nl(float *dst, const void *src, int64_t n) {
    const inf_block_iq4_nl *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++)
        ne_lookup32(dst + i, b->qs, inf_iq4nl_values, inf_f16_to_f32(b->d));
}

static void ne_dequant_iq4_xs(float *dst, const void *src, int64_t n) {
    const inf_block_iq4_xs *b = src; /* [n/256] */
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d);
        for (int s = 0; s < 8; s++) {
            const int ls =
                ((b->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((b->scales_h >> (2 * s)) & 3) << 4;
            ne_lookup32(dst + i + 32 * s, b->qs + 16 * s, inf_iq4nl_values, d * (float)(ls - 32));
        }
    }
}

static void ne_dequant_mxfp4(float *dst, const void *src, int64_t n) {
    const inf_block_mxfp4 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        /* 2^(e - 128), as the reference builds it (subnormal for e < 2) */
        const uint32_t bits = b->e < 2 ? 0x00200000u << b->e : (uint32_t)(b->e - 1) << 23;
        float d;
        memcpy(&d, &bits, 4);
        ne_lookup32(dst + i, b->qs, inf_fp4_values, d);
    }
}

static void ne_rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    float inv = 1.0f / sqrtf(ne_dot_f32(x, x, n) / (float)n + eps);
    int i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), inv), vld1q_f32(w + i)));
    for (; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

static void ne_rope_row(float *x, int n_heads, int head_dim, int n_rot, const float *c,
                        const float *s) {
    int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        int i = 0;
        for (; i + 4 <= half; i += 4) {
            float32x4_t a = vld1q_f32(v + i), b = vld1q_f32(v + half + i);
            float32x4_t cc = vld1q_f32(c + i), sn = vld1q_f32(s + i);
            vst1q_f32(v + i, vfmaq_f32(vnegq_f32(vmulq_f32(b, sn)), a, cc));
            vst1q_f32(v + half + i, vfmaq_f32(vmulq_f32(a, sn), b, cc));
        }
        for (; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = fmaf(a, c[i], -(b * s[i]));
            v[i + half] = fmaf(b, c[i], a * s[i]);
        }
    }
}

static inline float32x4_t swiglu4(float32x4_t g, float32x4_t u) {
    float32x4_t e = exp4(vnegq_f32(g));
    return vdivq_f32(vmulq_f32(g, u), vaddq_f32(vdupq_n_f32(1.0f), e));
}

static void ne_swiglu(float *out, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, swiglu4(vld1q_f32(gate + i), vld1q_f32(up + i)));
    if (i < n) {
        float g[4] = {0}, u[4] = {0}, o[4];
        memcpy(g, gate + i, sizeof(float) * (size_t)(n - i));
        memcpy(u, up + i, sizeof(float) * (size_t)(n - i));
        vst1q_f32(o, swiglu4(vld1q_f32(g), vld1q_f32(u)));
        memcpy(out + i, o, sizeof(float) * (size_t)(n - i));
    }
}

static void ne_silu(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t g = vld1q_f32(x + i);
        vst1q_f32(y + i, vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), exp4(vnegq_f32(g)))));
    }
    if (i < n) { /* the tail through the same vector code */
        float g[4] = {0}, o[4];
        memcpy(g, x + i, sizeof(float) * (size_t)(n - i));
        float32x4_t gv = vld1q_f32(g);
        vst1q_f32(o, vdivq_f32(gv, vaddq_f32(vdupq_n_f32(1.0f), exp4(vnegq_f32(gv)))));
        memcpy(y + i, o, sizeof(float) * (size_t)(n - i));
    }
}

/* delta.h's step, 4 columns of the state at a time: the same operations in
 * the same order per element (mul, then add; vmulq/vaddq, never vfmaq), so
 * the reference's bits. */
static void ne_delta_step(float *S, float *o, float *u, const float *qn, const float *kn,
                          const float *v, float decay, float beta, int dk, int dv) {
    if (dv % 4) {
        inf_delta_step_ref(S, o, u, qn, kn, v, decay, beta, dk, dv);
        return;
    }
    const float32x4_t vd = vdupq_n_f32(decay), vb = vdupq_n_f32(beta);
    for (int j = 0; j < dv; j += 4) {
        float32x4_t acc = vdupq_n_f32(0.0f);
        for (int i = 0; i < dk; i++) {
            float *sp = S + (size_t)i * dv + j;
            float32x4_t sv = vmulq_f32(vld1q_f32(sp), vd);
            vst1q_f32(sp, sv);
            acc = vaddq_f32(acc, vmulq_f32(sv, vdupq_n_f32(kn[i])));
        }
        vst1q_f32(u + j, vmulq_f32(vsubq_f32(vld1q_f32(v + j), acc), vb));
    }
    for (int j = 0; j < dv; j += 4) {
        const float32x4_t uj = vld1q_f32(u + j);
        float32x4_t acc = vdupq_n_f32(0.0f);
        for (int i = 0; i < dk; i++) {
            float *sp = S + (size_t)i * dv + j;
            float32x4_t sv = vaddq_f32(vld1q_f32(sp), vmulq_f32(vdupq_n_f32(kn[i]), uj));
            vst1q_f32(sp, sv);
            acc = vaddq_f32(acc, vmulq_f32(sv, vdupq_n_f32(qn[i])));
        }
        vst1q_f32(o + j, acc);
    }
}

static void ne_add(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

/* mul then add (vmulq, vaddq; not vfmaq), as the reference: the same bits */
static void ne_moe_sum(float *y, const float *x, const float *w, int k, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t acc = vdupq_n_f32(0);
        for (int j = 0; j < k; j++)
            acc = vaddq_f32(acc, vmulq_f32(vdupq_n_f32(w[j]), vld1q_f32(x + (int64_t)j * n + i)));
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), acc));
    }
    for (; i < n; i++) {
        float acc = 0;
        for (int j = 0; j < k; j++)
            acc += w[j] * x[(int64_t)j * n + i];
        y[i] += acc;
    }
}

static void ne_softmax(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    float32x4_t vm = vdupq_n_f32(m), sum = vdupq_n_f32(0);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t e = exp4(vsubq_f32(vld1q_f32(x + i), vm));
        sum = vaddq_f32(sum, e);
        vst1q_f32(x + i, e);
    }
    float s = vaddvq_f32(sum);
    for (; i < n; i++)
        s += x[i] = expf(x[i] - m);
    float inv = 1.0f / s;
    for (i = 0; i < n; i++)
        x[i] *= inv;
}

/* A K/V row of type t (kv_view.h) as n floats: in place for f32, else
 * converted into buf by this level's dequant (the reference's floats). */
static const float *ne_kv_row(inf_dtype t, const void *row, float *buf, int n) {
    switch (t) {
    case INF_F16:
        ne_dequant_f16(buf, row, n);
        return buf;
    case INF_BF16:
        ne_dequant_bf16(buf, row, n);
        return buf;
    case INF_Q8_0:
        ne_dequant_q8_0(buf, row, n);
        return buf;
    default:
        return row;
    }
}

/* Online softmax over 64-key tiles, one query row at a time, K/V rows read in
 * their stored types. */
static void ne_attn_rows(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                         float *scratch) {
    float *s = scratch;
    float *acc = s + INF_KV_TILE;
    float *buf = acc + hd; /* [hd] a K or V row as floats */
    for (int r = 0; r < it->R; r++) {
        const float *q = it->q[r];
        float m = -INFINITY, l = 0;
        memset(acc, 0, sizeof(float) * (size_t)hd);
        for (int t0 = it->k0; t0 < it->lim[r]; t0 += INF_KV_TILE) {
            int t1 = t0 + INF_KV_TILE < it->lim[r] ? t0 + INF_KV_TILE : it->lim[r];
            float tmax = -INFINITY;
            for (int j = t0; j < t1; j++) {
                const float *k = ne_kv_row(kv->k_type, inf_kv_k_at(kv, j, it->kv_head), buf, hd);
                s[j - t0] = ne_dot_f32(q, k, hd) * scale;
                if (s[j - t0] > tmax) tmax = s[j - t0];
            }
            if (tmax > m) {
                float corr = expf(m - tmax);
                for (int i = 0; i < hd; i++)
                    acc[i] *= corr;
                l *= corr;
                m = tmax;
            }
            for (int j = t0; j < t1; j++) {
                float p = expf(s[j - t0] - m);
                l += p;
                const float *v = ne_kv_row(kv->v_type, inf_kv_v_at(kv, j, it->kv_head), buf, hd);
                int i = 0;
                for (; i + 4 <= hd; i += 4)
                    vst1q_f32(acc + i, vfmaq_n_f32(vld1q_f32(acc + i), vld1q_f32(v + i), p));
                for (; i < hd; i++)
                    acc[i] += p * v[i];
            }
        }
        if (it->part) {
            float *pr = it->part + (size_t)r * (hd + 2);
            memcpy(pr, acc, sizeof(float) * (size_t)hd);
            pr[hd] = m;
            pr[hd + 1] = l;
            continue;
        }
        float inv = 1.0f / l;
        for (int i = 0; i < hd; i++)
            it->out[r][i] = acc[i] * inv;
    }
}

void inf_kernels_fill_neon(inf_kernels *k) {
    k->dot_f32 = ne_dot_f32;
    k->types[INF_F16].dequant = ne_dequant_f16;
    k->types[INF_BF16].dequant = ne_dequant_bf16;
    k->types[INF_Q8_0].dequant = ne_dequant_q8_0;
    k->types[INF_Q4_0].dequant = ne_dequant_q4_0;
    k->types[INF_Q4_1].dequant = ne_dequant_q4_1;
    k->types[INF_Q5_0].dequant = ne_dequant_q5_0;
    k->types[INF_Q5_1].dequant = ne_dequant_q5_1;
    k->types[INF_Q2_K].dequant = ne_dequant_q2_K;
    k->types[INF_Q3_K].dequant = ne_dequant_q3_K;
    k->types[INF_Q5_K].dequant = ne_dequant_q5_K;
    k->types[INF_IQ4_NL].dequant = ne_dequant_iq4_nl;
    k->types[INF_IQ4_XS].dequant = ne_dequant_iq4_xs;
    k->types[INF_MXFP4].dequant = ne_dequant_mxfp4;
    k->rmsnorm_row = ne_rmsnorm_row;
    k->rope_row = ne_rope_row;
    k->swiglu = ne_swiglu;
    k->silu = ne_silu;
    k->add = ne_add;
    k->moe_sum = ne_moe_sum;
    k->softmax = ne_softmax;
    k->delta_step = ne_delta_step;
    k->attn_rows = ne_attn_rows;
}
