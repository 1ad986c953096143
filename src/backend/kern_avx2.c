/* AVX2 + FMA + F16C kernels: f32 dot, dequantization of every weight type
 * (the generic matmul path: dequantize 256 weights, dot with each token),
 * row ops and attention. Compiled with -mavx2 -mfma -mf16c; only called after
 * detection. Tails are handled with scalar code whose arithmetic matches per
 * element where the pool's slicing could matter (elementwise ops slice at
 * multiples of 64, so a tail is always the array's own tail). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/avx2_math.h"
#include "backend/delta.h"
#include "backend/kernels.h"
#include "util/half.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float a2_dot_f32(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ---- dequantization rows: the same floats as the reference (mul, then add; no FMA) ---- */

static void a2_dequant_f16(float *dst, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++)
        dst[i] = inf_f16_to_f32(h[i]);
}

static void a2_dequant_bf16(float *dst, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++)
        dst[i] = inf_bf16_to_f32(h[i]);
}

static void a2_dequant_q8_0(float *dst, const void *src, int64_t n) {
    const inf_block_q8_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        __m256 d = _mm256_set1_ps(inf_f16_to_f32(b->d));
        for (int j = 0; j < 32; j += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + j)));
            _mm256_storeu_ps(dst + i + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
}

static void a2_dequant_q4_0(float *dst, const void *src, int64_t n) {
    const inf_block_q4_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        __m256 d = _mm256_set1_ps(inf_f16_to_f32(b->d));
        for (int j = 0; j < 16; j += 8) {
            __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + j)));
            __m256i lo =
                _mm256_sub_epi32(_mm256_and_si256(q, _mm256_set1_epi32(15)), _mm256_set1_epi32(8));
            __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(q, 4), _mm256_set1_epi32(8));
            _mm256_storeu_ps(dst + i + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
            _mm256_storeu_ps(dst + i + 16 + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
        }
    }
}

/* 32 signed bytes q (weight order) to floats, in the reference's operations:
 * q * a (MUL), q * a + b (ADD) or q * a - b (SUB); a and b may change after
 * the first 16 weights (sub-blocks of 16). */
enum { MUL, ADD, SUB };
static inline __attribute__((always_inline)) void emit32(float *dst, __m256i q, float a0, float a1,
                                                         float b0, float b1, const int op) {
    const __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int i = 0; i < 4; i++) {
        const __m128i part = (i & 1) ? _mm_srli_si128(h[i / 2], 8) : h[i / 2];
        const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part));
        const __m256 a = _mm256_set1_ps(i < 2 ? a0 : a1), b = _mm256_set1_ps(i < 2 ? b0 : b1);
        __m256 y = _mm256_mul_ps(f, a);
        if (op == ADD) y = _mm256_add_ps(y, b);
        if (op == SUB) y = _mm256_sub_ps(y, b);
        _mm256_storeu_ps(dst + 8 * i, y);
    }
}

/* 16 bytes of nibbles: low nibbles as weights 0..15, high as 16..31 */
static inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* bit j of the 32-bit qh as 0x10 in byte j (Q5_0/Q5_1's fifth bits) */
static inline __m256i fifth_bits(const uint8_t qh[4]) {
    uint32_t u;
    memcpy(&u, qh, 4);
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi32((int)u),
                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                             2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

static void a2_dequant_q4_1(float *dst, const void *src, int64_t n) {
    const inf_block_q4_1 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        const float d = inf_f16_to_f32(b->d), m = inf_f16_to_f32(b->m);
        emit32(dst + i, nibbles32(b->qs), d, d, m, m, ADD);
    }
}

static void a2_dequant_q5_0(float *dst, const void *src, int64_t n) {
    const inf_block_q5_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        const float d = inf_f16_to_f32(b->d);
        __m256i q = _mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh));
        emit32(dst + i, _mm256_sub_epi8(q, _mm256_set1_epi8(16)), d, d, 0, 0, MUL);
    }
}

static void a2_dequant_q5_1(float *dst, const void *src, int64_t n) {
    const inf_block_q5_1 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        const float d = inf_f16_to_f32(b->d), m = inf_f16_to_f32(b->m);
        emit32(dst + i, _mm256_or_si256(nibbles32(b->qs), fifth_bits(b->qh)), d, d, m, m, ADD);
    }
}

/* Q4_K/Q5_K's 6-bit scale and min of sub-block j */
static inline void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static void a2_dequant_q4_K(float *dst, const void *src, int64_t n) {
    const inf_block_q4_K *b = src; /* [n/256] */
    const __m256i m0f = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d), dmin = inf_f16_to_f32(b->dmin);
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
            int sc, m;
            k4_scale_min(b->scales, 2 * j, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            k4_scale_min(b->scales, 2 * j + 1, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            emit32(dst + i + 64 * j, _mm256_and_si256(v, m0f), d1, d1, m1, m1, SUB);
            emit32(dst + i + 64 * j + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f), d2, d2,
                   m2, m2, SUB);
        }
    }
}

static void a2_dequant_q5_K(float *dst, const void *src, int64_t n) {
    const inf_block_q5_K *b = src; /* [n/256] */
    const __m256i m0f = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d), dmin = inf_f16_to_f32(b->dmin);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)b->qh);
        for (int s = 0; s < 8; s++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * (s / 2)));
            const __m256i lo =
                (s & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f) : _mm256_and_si256(v, m0f);
            const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(s)), one);
            int sc, m;
            k4_scale_min(b->scales, s, &sc, &m);
            const float ds = d * (float)sc, dm = dmin * (float)m;
            emit32(dst + i + 32 * s, _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4)), ds, ds, dm, dm,
                   SUB);
        }
    }
}

static void a2_dequant_q6_K(float *dst, const void *src, int64_t n) {
    const inf_block_q6_K *b = src; /* [n/256] */
    const __m256i m0f = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3),
                  off = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h;
            const int8_t *sc = b->scales + 8 * h;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
            /* weights 32c + l: low nibbles of l0, l1, then high nibbles; qh bits 2c */
            const __m256i lo[4] = {_mm256_and_si256(l0, m0f), _mm256_and_si256(l1, m0f),
                                   _mm256_and_si256(_mm256_srli_epi16(l0, 4), m0f),
                                   _mm256_and_si256(_mm256_srli_epi16(l1, 4), m0f)};
            for (int c = 0; c < 4; c++) {
                const __m256i hi =
                    _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), m3);
                const __m256i q =
                    _mm256_sub_epi8(_mm256_or_si256(lo[c], _mm256_slli_epi16(hi, 4)), off);
                emit32(dst + i + 128 * h + 32 * c, q, d * (float)sc[2 * c],
                       d * (float)sc[2 * c + 1], 0, 0, MUL);
            }
        }
    }
}

static void a2_dequant_q2_K(float *dst, const void *src, int64_t n) {
    const inf_block_q2_K *b = src; /* [n/256] */
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d), dmin = inf_f16_to_f32(b->dmin);
        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
            for (int j = 0; j < 4; j++) {
                const uint8_t s0 = b->scales[8 * h + 2 * j], s1 = b->scales[8 * h + 2 * j + 1];
                const __m256i q =
                    _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * j)), m3);
                emit32(dst + i + 128 * h + 32 * j, q, d * (float)(s0 & 0xF), d * (float)(s1 & 0xF),
                       dmin * (float)(s0 >> 4), dmin * (float)(s1 >> 4), SUB);
            }
        }
    }
}

static void a2_dequant_q3_K(float *dst, const void *src, int64_t n) {
    const inf_block_q3_K *b = src; /* [n/256] */
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
        int sc[16];
        for (int s = 0; s < 16; s++) {
            const int lo = s < 8 ? b->scales[s] & 0xF : b->scales[s - 8] >> 4;
            sc[s] = (lo | ((b->scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4) - 32;
        }
        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
            for (int j = 0; j < 4; j++) {
                const __m128i sh = _mm_cvtsi32_si128(2 * j), hs = _mm_cvtsi32_si128(4 * h + j);
                const __m256i low = _mm256_and_si256(_mm256_srl_epi16(v, sh), m3);
                /* minus 4 where the high bit is clear */
                const __m256i hb = _mm256_and_si256(_mm256_srl_epi16(hm, hs), one);
                const __m256i q =
                    _mm256_sub_epi8(low, _mm256_slli_epi16(_mm256_xor_si256(hb, one), 2));
                const int s = 8 * h + 2 * j;
                emit32(dst + i + 128 * h + 32 * j, q, d * (float)sc[s], d * (float)sc[s + 1], 0, 0,
                       MUL);
            }
        }
    }
}

/* nibbles looked up in a 16-entry signed table (IQ4_NL, IQ4_XS, MXFP4) */
static inline __m256i lookup32(const uint8_t *qs, const int8_t *table) {
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table));
    return _mm256_shuffle_epi8(t, nibbles32(qs));
}

static void a2_dequant_iq4_nl(float *dst, const void *src, int64_t n) {
    const inf_block_iq4_nl *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        const float d = inf_f16_to_f32(b->d);
        emit32(dst + i, lookup32(b->qs, inf_iq4nl_values), d, d, 0, 0, MUL);
    }
}

static void a2_dequant_iq4_xs(float *dst, const void *src, int64_t n) {
    const inf_block_iq4_xs *b = src; /* [n/256] */
    for (int64_t i = 0; i < n; i += INF_QK_K, b++) {
        const float d = inf_f16_to_f32(b->d);
        for (int s = 0; s < 8; s++) {
            const int ls =
                ((b->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((b->scales_h >> (2 * s)) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            emit32(dst + i + 32 * s, lookup32(b->qs + 16 * s, inf_iq4nl_values), dl, dl, 0, 0, MUL);
        }
    }
}

static void a2_dequant_mxfp4(float *dst, const void *src, int64_t n) {
    const inf_block_mxfp4 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        /* 2^(e - 128), as the reference builds it (subnormal for e < 2) */
        const uint32_t bits = b->e < 2 ? 0x00200000u << b->e : (uint32_t)(b->e - 1) << 23;
        float d;
        memcpy(&d, &bits, 4);
        emit32(dst + i, lookup32(b->qs, inf_fp4_values), d, d, 0, 0, MUL);
    }
}

static void a2_rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    float inv = 1.0f / sqrtf(a2_dot_f32(x, x, n) / (float)n + eps);
    __m256 vi = _mm256_set1_ps(inv);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi),
                                                _mm256_loadu_ps(w + i)));
    for (; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

static void a2_rope_row(float *x, int n_heads, int head_dim, int n_rot, const float *c,
                        const float *s) {
    int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        int i = 0;
        for (; i + 8 <= half; i += 8) {
            __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + half + i);
            __m256 cc = _mm256_loadu_ps(c + i), sn = _mm256_loadu_ps(s + i);
            _mm256_storeu_ps(v + i, _mm256_fmsub_ps(a, cc, _mm256_mul_ps(b, sn)));
            _mm256_storeu_ps(v + half + i, _mm256_fmadd_ps(b, cc, _mm256_mul_ps(a, sn)));
        }
        for (; i < half; i++) {
            float a = v[i], b = v[i + half];
            v[i] = fmaf(a, c[i], -(b * s[i]));
            v[i + half] = fmaf(b, c[i], a * s[i]);
        }
    }
}

static void a2_swiglu(float *out, const float *gate, const float *up, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
        _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_mul_ps(g, u), _mm256_add_ps(one, e)));
    }
    if (i < n) { /* the tail through the same vector code */
        float g[8] = {0}, u[8] = {0}, o[8];
        memcpy(g, gate + i, sizeof(float) * (size_t)(n - i));
        memcpy(u, up + i, sizeof(float) * (size_t)(n - i));
        __m256 gv = _mm256_loadu_ps(g), uv = _mm256_loadu_ps(u);
        __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        _mm256_storeu_ps(o, _mm256_div_ps(_mm256_mul_ps(gv, uv), _mm256_add_ps(one, e)));
        memcpy(out + i, o, sizeof(float) * (size_t)(n - i));
    }
}

static inline __m256 silu8(__m256 g) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static void a2_silu(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) { /* the tail through the same vector code */
        float g[8] = {0}, o[8];
        memcpy(g, x + i, sizeof(float) * (size_t)(n - i));
        _mm256_storeu_ps(o, silu8(_mm256_loadu_ps(g)));
        memcpy(y + i, o, sizeof(float) * (size_t)(n - i));
    }
}

/* delta.h's step, 8 columns of the state at a time: the same operations in
 * the same order per element (mul, then add), so the reference's bits. */
static void a2_delta_step(float *S, float *o, float *u, const float *qn, const float *kn,
                          const float *v, float decay, float beta, int dk, int dv) {
    if (dv % 8) {
        inf_delta_step_ref(S, o, u, qn, kn, v, decay, beta, dk, dv);
        return;
    }
    const __m256 vd = _mm256_set1_ps(decay), vb = _mm256_set1_ps(beta);
    for (int j = 0; j < dv; j += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *sp = S + (size_t)i * dv + j;
            __m256 sv = _mm256_mul_ps(_mm256_loadu_ps(sp), vd);
            _mm256_storeu_ps(sp, sv);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(sv, _mm256_set1_ps(kn[i])));
        }
        _mm256_storeu_ps(u + j, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + j), acc), vb));
    }
    for (int j = 0; j < dv; j += 8) {
        const __m256 uj = _mm256_loadu_ps(u + j);
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *sp = S + (size_t)i * dv + j;
            __m256 sv =
                _mm256_add_ps(_mm256_loadu_ps(sp), _mm256_mul_ps(_mm256_set1_ps(kn[i]), uj));
            _mm256_storeu_ps(sp, sv);
            acc = _mm256_add_ps(acc, _mm256_mul_ps(sv, _mm256_set1_ps(qn[i])));
        }
        _mm256_storeu_ps(o + j, acc);
    }
}

static void a2_add(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

/* mul then add, as the reference: the same bits */
static void a2_moe_sum(float *y, const float *x, const float *w, int k, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int j = 0; j < k; j++)
            acc = _mm256_add_ps(
                acc, _mm256_mul_ps(_mm256_set1_ps(w[j]), _mm256_loadu_ps(x + (int64_t)j * n + i)));
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), acc));
    }
    for (; i < n; i++) {
        float acc = 0;
        for (int j = 0; j < k; j++)
            acc += w[j] * x[(int64_t)j * n + i];
        y[i] += acc;
    }
}

static void a2_softmax(float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    __m256 vm = _mm256_set1_ps(m), sum = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        sum = _mm256_add_ps(sum, e);
        _mm256_storeu_ps(x + i, e);
    }
    float s = hsum8(sum);
    for (; i < n; i++)
        s += x[i] = expf(x[i] - m);
    float inv = 1.0f / s;
    for (i = 0; i < n; i++)
        x[i] *= inv;
}

/* ---- K/V rows in the cache's types (kv_view.h), read in place ---- */

static inline float a2_kv_elem(inf_dtype t, const void *row, int i) {
    const uint16_t *h = row;
    switch (t) {
    case INF_F16:
        return inf_f16_to_f32(h[i]);
    case INF_BF16:
        return inf_bf16_to_f32(h[i]);
    case INF_Q8_0: {
        const inf_block_q8_0 *b = (const inf_block_q8_0 *)row + i / 32;
        return inf_f16_to_f32(b->d) * (float)b->qs[i % 32];
    }
    default:
        return ((const float *)row)[i];
    }
}

/* q . row[0..n) with a2_dot_f32's order (the same bits for an f32 row). */
static inline __attribute__((always_inline)) float a2_dot_kv_t(const float *q, const void *row,
                                                               int n, const inf_dtype t) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), a2_kv_load8(t, row, i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), a2_kv_load8(t, row, i + 8), s1);
    }
    for (; i + 8 <= n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), a2_kv_load8(t, row, i), s0);
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++)
        s += q[i] * a2_kv_elem(t, row, i);
    return s;
}

static float a2_dot_kv(const float *q, const void *row, int n, inf_dtype t) {
    switch (t) {
    case INF_F16:
        return a2_dot_kv_t(q, row, n, INF_F16);
    case INF_BF16:
        return a2_dot_kv_t(q, row, n, INF_BF16);
    case INF_Q8_0:
        return a2_dot_kv_t(q, row, n, INF_Q8_0);
    default:
        return a2_dot_kv_t(q, row, n, INF_F32);
    }
}

/* acc[0..n) += p * row[0..n) */
static inline __attribute__((always_inline)) void a2_axpy_kv_t(float *acc, float p, const void *row,
                                                               int n, const inf_dtype t) {
    __m256 vp = _mm256_set1_ps(p);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i,
                         _mm256_fmadd_ps(vp, a2_kv_load8(t, row, i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++)
        acc[i] += p * a2_kv_elem(t, row, i);
}

static void a2_axpy_kv(float *acc, float p, const void *row, int n, inf_dtype t) {
    switch (t) {
    case INF_F16:
        a2_axpy_kv_t(acc, p, row, n, INF_F16);
        return;
    case INF_BF16:
        a2_axpy_kv_t(acc, p, row, n, INF_BF16);
        return;
    case INF_Q8_0:
        a2_axpy_kv_t(acc, p, row, n, INF_Q8_0);
        return;
    default:
        a2_axpy_kv_t(acc, p, row, n, INF_F32);
    }
}

/* keys ahead of the one being scored whose rows are prefetched */
#define A2_PREFETCH 8

/* Online softmax over 64-key tiles, one query row at a time, vector dots and
 * axpys over the rows in their stored types. */
static void a2_attn_rows(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                         float *scratch) {
    float *s = scratch;
    float *acc = s + INF_KV_TILE;
    const inf_dtype kt = kv->k_type, vt = kv->v_type;
    const size_t kbytes = inf_kv_type_bytes(kt, hd), vbytes = inf_kv_type_bytes(vt, hd);
    for (int r = 0; r < it->R; r++) {
        const float *q = it->q[r];
        float m = -INFINITY, l = 0;
        memset(acc, 0, sizeof(float) * (size_t)hd);
        for (int t0 = it->k0; t0 < it->lim[r]; t0 += INF_KV_TILE) {
            int t1 = t0 + INF_KV_TILE < it->lim[r] ? t0 + INF_KV_TILE : it->lim[r];
            float tmax = -INFINITY;
            for (int j = t0; j < t1; j++) {
                /* the first row streams the item's keys and values from memory:
                 * ask for them ahead (a cache block may end before j + A2_PREFETCH) */
                if (r == 0 && j + A2_PREFETCH < it->lim[r]) {
                    const char *kn = inf_kv_k_at(kv, j + A2_PREFETCH, it->kv_head);
                    const char *vn = inf_kv_v_at(kv, j + A2_PREFETCH, it->kv_head);
                    for (size_t c = 0; c < kbytes; c += 64)
                        _mm_prefetch(kn + c, _MM_HINT_T0);
                    for (size_t c = 0; c < vbytes; c += 64)
                        _mm_prefetch(vn + c, _MM_HINT_T0);
                }
                s[j - t0] = a2_dot_kv(q, inf_kv_k_at(kv, j, it->kv_head), hd, kt) * scale;
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
                a2_axpy_kv(acc, p, inf_kv_v_at(kv, j, it->kv_head), hd, vt);
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

/* four 32-byte loads in flight per iteration, xor-folded; on AMD with the
 * decode kernels' one prefetch per 4 KiB page, so that the roof is read the
 * way the weights are (without it the BF16 and Q8_0 decode read faster than
 * this "roof", 108-113 %) */
static uint64_t a2_read_stream(const void *p, size_t n) {
    const __m256i *v = p; /* [n/32] */
    const bool pages = inf_cpu_features_get()->amd;
    const size_t ahead = (size_t)inf_decode_l2_ahead();
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < n / 32; i += 4) {
        if (pages) inf_prefetch_pages((const uint8_t *)(v + i) + ahead, 128);
        a = _mm256_xor_si256(a, _mm256_load_si256(v + i));
        b = _mm256_xor_si256(b, _mm256_load_si256(v + i + 1));
        c = _mm256_xor_si256(c, _mm256_load_si256(v + i + 2));
        d = _mm256_xor_si256(d, _mm256_load_si256(v + i + 3));
    }
    a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    __m128i x = _mm_xor_si128(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    return (uint64_t)_mm_cvtsi128_si64(x) ^ (uint64_t)_mm_extract_epi64(x, 1);
}

void inf_kernels_fill_avx2(inf_kernels *k) {
    k->dot_f32 = a2_dot_f32;
    k->types[INF_F16].dequant = a2_dequant_f16;
    k->types[INF_BF16].dequant = a2_dequant_bf16;
    k->types[INF_Q8_0].dequant = a2_dequant_q8_0;
    k->types[INF_Q4_0].dequant = a2_dequant_q4_0;
    k->types[INF_Q4_1].dequant = a2_dequant_q4_1;
    k->types[INF_Q5_0].dequant = a2_dequant_q5_0;
    k->types[INF_Q5_1].dequant = a2_dequant_q5_1;
    k->types[INF_Q2_K].dequant = a2_dequant_q2_K;
    k->types[INF_Q3_K].dequant = a2_dequant_q3_K;
    k->types[INF_Q4_K].dequant = a2_dequant_q4_K;
    k->types[INF_Q5_K].dequant = a2_dequant_q5_K;
    k->types[INF_Q6_K].dequant = a2_dequant_q6_K;
    k->types[INF_IQ4_NL].dequant = a2_dequant_iq4_nl;
    k->types[INF_IQ4_XS].dequant = a2_dequant_iq4_xs;
    k->types[INF_MXFP4].dequant = a2_dequant_mxfp4;
    k->rmsnorm_row = a2_rmsnorm_row;
    k->rope_row = a2_rope_row;
    k->swiglu = a2_swiglu;
    k->silu = a2_silu;
    k->add = a2_add;
    k->moe_sum = a2_moe_sum;
    k->softmax = a2_softmax;
    k->delta_step = a2_delta_step;
    k->attn_rows = a2_attn_rows;
    k->read_stream = a2_read_stream;
    inf_kernels_fill_avx2_matmul(k);
    inf_kernels_fill_avx2_attn(k);
    inf_kernels_fill_avx2_pack(k);
    inf_kernels_fill_avx2_decode_attn(k);
}
