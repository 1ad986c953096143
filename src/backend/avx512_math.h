/* Small AVX-512 helpers shared by the AVX-512 and AMX kernel files (which are
 * compiled with -mavx512*; include this header from nowhere else). */
#ifndef INF_BACKEND_AVX512_MATH_H
#define INF_BACKEND_AVX512_MATH_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backend/kernels.h"
#include "quant/dtype.h"

/* e^x with ~2 ulp error; x <= -104 gives 0, large x gives +inf. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
    x = _mm512_min_ps(x, _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* The Q6_K kind's sub-group at sp (kernels.h): its 16 values per row as 4
 * chunks of 6-bit q, chunk i lane r = q[r][4i..4i+3]. */
static inline __attribute__((always_inline)) void q6k_values(const uint8_t *sp, __m512i q[4]) {
    const __m512i m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i n0 = _mm512_loadu_si512(sp), n1 = _mm512_loadu_si512(sp + 64);
    const __m512i h = _mm512_loadu_si512(sp + 128);
    q[0] =
        _mm512_or_si512(_mm512_and_si512(n0, m0f), _mm512_and_si512(_mm512_slli_epi16(h, 4), m30));
    q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n0, 4), m0f),
                           _mm512_and_si512(_mm512_slli_epi16(h, 2), m30));
    q[2] = _mm512_or_si512(_mm512_and_si512(n1, m0f), _mm512_and_si512(h, m30));
    q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(n1, 4), m0f),
                           _mm512_and_si512(_mm512_srli_epi16(h, 2), m30));
}

/* The IQ4S kind's sub-group at sp (kernels.h): its 16 values per row as 4
 * chunks of the u8 table entries tbl (in every 128-bit lane) its indices
 * select, chunk i lane r = q[r][4i..4i+3]. */
static inline __attribute__((always_inline)) void iq4s_values(const uint8_t *sp, __m512i tbl,
                                                              __m512i q[4]) {
    const __m512i m0f = _mm512_set1_epi8(0x0f);
    const __m512i n0 = _mm512_loadu_si512(sp), n1 = _mm512_loadu_si512(sp + 64);
    q[0] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(n0, m0f));
    q[1] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(n0, 4), m0f));
    q[2] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(n1, m0f));
    q[3] = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(n1, 4), m0f));
}

/* The Q6_K kind's super-group at gp: sub-group s's per-row scale d * sc (exact in f32),
 * d = the group's 16 d as floats */
static inline __attribute__((always_inline)) __m512 q6k_scale(const uint8_t *gp, int s, __m512 d) {
    const __m128i sc = _mm_loadu_si128((const __m128i *)(gp + INF_Q6K_SC_OFF + 16 * s));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
}

static inline __m512 q6k_d(const uint8_t *gp) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + INF_Q6K_D_OFF)));
}

/* The 64 bytes of low bit pairs at sp of a Q2_KS or Q3_KS sub-group
 * (kernels.h) as 4 chunks of 2-bit values, chunk i lane r = q[r][4i..4i+3]. */
static inline __attribute__((always_inline)) void bit_pairs(const uint8_t *sp, __m512i q[4]) {
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m512i lo = _mm512_loadu_si512(sp);
    q[0] = _mm512_and_si512(lo, m3);
#pragma GCC unroll 3
    for (int i = 1; i < 4; i++)
        q[i] = _mm512_and_si512(_mm512_srli_epi16(lo, 2 * i), m3);
}

/* The Q3_KS kind's sub-group at sp: its 16 values per row as 4 chunks of
 * 3-bit q (0..7), the low bit pairs plus 4 where the third bit, a byte mask
 * (one 64-bit word per chunk), is set. */
static inline __attribute__((always_inline)) void q3ks_values(const uint8_t *sp, __m512i q[4]) {
    const __m512i four = _mm512_set1_epi8(4);
    bit_pairs(sp, q);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        uint64_t hb;
        memcpy(&hb, sp + 64 + 8 * i, 8);
        q[i] = _mm512_mask_add_epi8(q[i], _cvtu64_mask64(hb), q[i], four);
    }
}

/* The Q3_KS kind's super-group at gp: its 16 sub-groups' scales sc - 32 as int8,
 * sub-group s row r at out[16 s + r], unpacked from the 12 scale planes as ggml
 * unpacks the file's bytes (sub-group s: low 4 bits from plane s % 8, its low
 * nibble for s < 8, else its high one; high 2 bits from plane 8 + s % 4, bits
 * 2 (s / 4)), 4 sub-groups per 512-bit register */
static inline __attribute__((always_inline)) void q3ks_scales(const uint8_t *gp, int8_t *out) {
    const uint8_t *P = gp + INF_Q3KS_SC_OFF;
    const __m512i m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30),
                  m32 = _mm512_set1_epi8(32);
    const __m512i z0 = _mm512_loadu_si512(P), z1 = _mm512_loadu_si512(P + 64),
                  hi = _mm512_loadu_si512(P + 128);
    const __m512i lo4[4] = {_mm512_and_si512(z0, m0f), _mm512_and_si512(z1, m0f),
                            _mm512_and_si512(_mm512_srli_epi16(z0, 4), m0f),
                            _mm512_and_si512(_mm512_srli_epi16(z1, 4), m0f)};
    const __m512i hi2[4] = {_mm512_and_si512(_mm512_slli_epi16(hi, 4), m30),
                            _mm512_and_si512(_mm512_slli_epi16(hi, 2), m30),
                            _mm512_and_si512(hi, m30),
                            _mm512_and_si512(_mm512_srli_epi16(hi, 2), m30)};
    for (int c = 0; c < 4; c++)
        _mm512_store_si512(out + 64 * c, _mm512_sub_epi8(_mm512_or_si512(lo4[c], hi2[c]), m32));
}

static inline __m512 q3ks_d(const uint8_t *gp) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + INF_Q3KS_D_OFF)));
}

/* lanes < left (none when left <= 0, all when left >= 16) */
static inline __mmask16 tail_mask(int64_t left) {
    if (left <= 0) return 0;
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* lane r of the result = (bf16(lo[r]), bf16(hi[r])), rounded to nearest even */
static inline __m512i pair_bf16(__m512 lo, __m512 hi) {
    static const uint16_t order[32] __attribute__((aligned(64))) = {
        0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i idx = _mm512_load_si512(order);
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* x - bf16(x): what rounding to bf16 left out (the low part of a bf16 split) */
static inline __m512 bf16_rest(__m512 x) {
    __m512i h = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x));
    return _mm512_sub_ps(x, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
}

/* Elements i..i+15 of a K/V row of type t (kv_view.h; i a multiple of 16):
 * the reference's floats (q8_0: d * q, exact). */
static inline __attribute__((always_inline)) __m512 kv_load16(inf_dtype t, const void *row, int i) {
    const uint16_t *h = row;
    switch (t) {
    case INF_F16:
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i)));
    case INF_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i))), 16));
    case INF_Q8_0: {
        const inf_block_q8_0 *b = (const inf_block_q8_0 *)row + i / 32;
        __m128i q = _mm_loadu_si128((const __m128i *)(b->qs + i % 32));
        return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b->d)),
                             _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
    }
    default:
        return _mm512_loadu_ps((const float *)row + i);
    }
}

/* dst[n] (64-byte aligned) = a K/V row of type t as floats (n a multiple of 16). */
static inline void kv_row_to_f32(float *dst, inf_dtype t, const void *row, int n) {
    switch (t) {
    case INF_F16:
        for (int i = 0; i < n; i += 16)
            _mm512_store_ps(dst + i, kv_load16(INF_F16, row, i));
        return;
    case INF_BF16:
        for (int i = 0; i < n; i += 16)
            _mm512_store_ps(dst + i, kv_load16(INF_BF16, row, i));
        return;
    case INF_Q8_0:
        for (int i = 0; i < n; i += 16)
            _mm512_store_ps(dst + i, kv_load16(INF_Q8_0, row, i));
        return;
    default:
        for (int i = 0; i < n; i += 16)
            _mm512_store_ps(dst + i, kv_load16(INF_F32, row, i));
    }
}

#endif
