/* Small AVX2 + FMA + F16C helpers shared by the AVX2 kernel files
 * (kern_avx2.c, kern_attn_avx2.c: compiled with -mavx2 -mfma -mf16c; include
 * this header from nowhere else). */
#ifndef INF_BACKEND_AVX2_MATH_H
#define INF_BACKEND_AVX2_MATH_H

#include <immintrin.h>
#include <stdint.h>

#include "quant/dtype.h"

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

/* Elements i..i+7 of a K/V row of type t (kv_view.h; i a multiple of 8): the
 * reference's floats (q8_0: d * q, exact). */
static inline __attribute__((always_inline)) __m256 a2_kv_load8(inf_dtype t, const void *row,
                                                                int i) {
    const uint16_t *h = row;
    switch (t) {
    case INF_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i)));
    case INF_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i))), 16));
    case INF_Q8_0: {
        const inf_block_q8_0 *b = (const inf_block_q8_0 *)row + i / 32;
        __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + i % 32)));
        return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b->d)), _mm256_cvtepi32_ps(q));
    }
    default:
        return _mm256_loadu_ps((const float *)row + i);
    }
}

#endif
