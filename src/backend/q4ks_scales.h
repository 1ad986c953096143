/* The Q4_KS and Q5_KS kinds' 6-bit scales and mins (kernels.h), unpacked for 16 rows
 * at once with SSE2 operations: shared by the x86 kernel files that read the
 * kinds (kern_avx512.c, kern_matmul_avx2.c, kern_amx.c); include it from nowhere else. */
#ifndef INF_BACKEND_Q4KS_SCALES_H
#define INF_BACKEND_Q4KS_SCALES_H

#include <immintrin.h>
#include <stdint.h>

/* Sub-block j's scales (*sc) and mins (*m) of 16 rows, byte r for row r, from
 * the 12 planes at P (byte i of row r at P + 16 i + r): ggml's packing of
 * Q4_K's scales[12], for j < 4 the low 6 bits of bytes j and j + 4, else the
 * nibbles of byte j + 4 with the top 2 bits of bytes j - 4 and j above them. */
static inline __attribute__((always_inline)) void q4ks_scale_min(const uint8_t *P, int j,
                                                                 __m128i *sc, __m128i *m) {
    const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(0xF), m30 = _mm_set1_epi8(0x30);
    const __m128i *pl = (const __m128i *)P;
    if (j < 4) {
        *sc = _mm_and_si128(_mm_loadu_si128(pl + j), m6);
        *m = _mm_and_si128(_mm_loadu_si128(pl + j + 4), m6);
    } else { /* within each byte: (b >> 2) & 0x30 moves its top 2 bits to bits 4..5 */
        const __m128i lo = _mm_loadu_si128(pl + j + 4);
        *sc = _mm_or_si128(_mm_and_si128(lo, m4),
                           _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(pl + j - 4), 2), m30));
        *m = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(lo, 4), m4),
                          _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128(pl + j), 2), m30));
    }
}

#endif
