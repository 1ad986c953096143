/* AVX2 + FMA + F16C kernels: f32 dot, dequantization of every weight type
 * (the generic matmul path: dequantize 256 weights, dot with each token),
 * row ops and attention. Compiled with -mavx2 -mfma -mf16c; only called after
 * detection. Tails are handled with scalar code whose arithmetic matches per
 * element where the pool's slicing could matter (elementwise ops slice at
 * multiples of 64, so a tail is always the array's own tail). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/kernels.h"
#include "util/half.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x, x clamped to [-87, 88.7] (callers zero what must be exactly 0). */
static inline __m256 exp256(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.7f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
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
            __m256i lo = _mm256_sub_epi32(_mm256_and_si256(q, _mm256_set1_epi32(15)),
                                          _mm256_set1_epi32(8));
            __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(q, 4), _mm256_set1_epi32(8));
            _mm256_storeu_ps(dst + i + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
            _mm256_storeu_ps(dst + i + 16 + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
        }
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

static void a2_rope_row(float *x, int n_heads, int head_dim, const float *c, const float *s) {
    int half = head_dim / 2;
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

static void a2_add(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
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

/* Online softmax over 64-key tiles, one query row at a time, vector dots and axpys. */
static void a2_attn_rows(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                         float *scratch) {
    float *s = scratch;
    float *acc = s + INF_KV_TILE;
    for (int r = 0; r < it->R; r++) {
        const float *q = it->q[r];
        float m = -INFINITY, l = 0;
        memset(acc, 0, sizeof(float) * (size_t)hd);
        for (int t0 = 0; t0 < it->lim[r]; t0 += INF_KV_TILE) {
            int t1 = t0 + INF_KV_TILE < it->lim[r] ? t0 + INF_KV_TILE : it->lim[r];
            float tmax = -INFINITY;
            for (int j = t0; j < t1; j++) {
                s[j - t0] = a2_dot_f32(q, inf_kv_k_row(kv, j) + it->kv_off, hd) * scale;
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
                const float *v = inf_kv_v_row(kv, j) + it->kv_off;
                __m256 vp = _mm256_set1_ps(p);
                int i = 0;
                for (; i + 8 <= hd; i += 8)
                    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(v + i),
                                                              _mm256_loadu_ps(acc + i)));
                for (; i < hd; i++)
                    acc[i] += p * v[i];
            }
        }
        float inv = 1.0f / l;
        for (int i = 0; i < hd; i++)
            it->out[r][i] = acc[i] * inv;
    }
}

void inf_kernels_fill_avx2(inf_kernels *k) {
    k->dot_f32 = a2_dot_f32;
    k->types[INF_F16].dequant = a2_dequant_f16;
    k->types[INF_BF16].dequant = a2_dequant_bf16;
    k->types[INF_Q8_0].dequant = a2_dequant_q8_0;
    k->types[INF_Q4_0].dequant = a2_dequant_q4_0;
    k->rmsnorm_row = a2_rmsnorm_row;
    k->rope_row = a2_rope_row;
    k->swiglu = a2_swiglu;
    k->add = a2_add;
    k->softmax = a2_softmax;
    k->attn_rows = a2_attn_rows;
}
