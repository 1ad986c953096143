/* Packed matmuls on AVX2 (+ FMA, F16C): the panels of kernels.h, read as
 * two 8-row halves (a 64-byte chunk is two 256-bit vectors: rows 0..7 and
 * 8..15), and the activation quantization they read.
 *
 * AVX2 has no VPDPBUSD; its integer product is VPMADDUBSW (u8 x s8, adjacent
 * pairs summed into saturating i16) followed by VPMADDWD against ones (pairs
 * of i16 into i32). The kinds are laid out so that no i16 ever saturates:
 *   - 4-bit kinds (Q4_0, Q4_K, Q4_KS): a pair is at most 2 * 15 * 127 = 3810, so the
 *     i16 sums of a whole 32-weight group (8 pairs per lane) stay exact below
 *     32767 and one VPMADDWD per group finishes them;
 *   - Q6_K's 6-bit values: a pair is at most 16002, two pairs are summed;
 *     Q5_K's and Q5_KS's 5-bit ones (4 nibble chunks and a chunk of fifth
 *     bits) likewise;
 *   - IQ4 (IQ4_NL/IQ4_XS/MXFP4 indices, looked up into their signed values) uses
 *     Q8_0's sign trick;
 *   - Q8_0 keeps q + 128 (up to 255): instead the sign is moved onto the
 *     activation (|w| times x with w's sign), so a pair is at most
 *     2 * 128 * 127 = 32512, and the sum is the signed w . x directly.
 * The integer sums of a group are therefore exactly those of the VNNI
 * kernels, and the float scaling is the same operations in the same order:
 * per row and group, (float)(sum - offset) * A, times the activation scale,
 * added into the row's accumulator. BF16 panels are widened to f32 (a shift
 * or a mask per vector) against the activations as they are (f32: AVX2 has
 * no bf16 dot product, so nothing is gained by rounding them), in two
 * accumulators per row (even and odd k), summed at the end.
 *
 * A token's arithmetic never depends on the other tokens of the call: tokens
 * run four at a time over one half (the unpacking of a weight vector shared
 * by four), two at a time over both halves (a broadcast activation shared by
 * 16 rows) or alone, and give the same bits every way, so prompt rows and
 * decode rows are one code path. Each kind is its own loop (KIND is a
 * constant in every call). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "backend/kernels.h"
#include "backend/q4ks_scales.h"
#include "util/half.h"

/* ---- activation quantization (what the scalar reference does, in vectors) ----------------- */

static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline int32_t hsum8_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static void a2_quantize_x(inf_xq *xq, const float *x, int t0, int t1, int what) {
    const int64_t n = xq->n;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * (size_t)n;
        if (what & INF_XQ_BF16)
            memcpy(xq->f + (size_t)t * (size_t)n, xr, sizeof(float) * (size_t)n);
        if (!(what & INF_XQ_INT8)) continue;
        int8_t *q = xq->q + (size_t)t * (size_t)n;
        float *d = xq->d + (size_t)t * (size_t)(n / 32);
        int32_t *s16 = xq->s16 + (size_t)t * (size_t)(n / 16);
        float *ds = xq->ds + (size_t)t * (size_t)(n / 32);
        for (int64_t b = 0; b < n / 32; b++) {
            __m256 v[4];
            for (int i = 0; i < 4; i++)
                v[i] = _mm256_loadu_ps(xr + 32 * b + 8 * i);
            __m256 m = _mm256_max_ps(
                _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
            float amax = hmax8(m);
            float db = amax / 127.0f, id = db > 0 ? 1.0f / db : 0.0f;
            /* a NaN or infinity in the block: zeros with a NaN scale, as the
               other levels do (the matmul's result is NaN, caught where logits
               are sampled; no integer sum sees cvtps' 0x80000000) */
            __m256 bad = _mm256_setzero_ps();
            for (int i = 0; i < 4; i++)
                bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(v[i], v[i]),
                                                      _mm256_setzero_ps(), _CMP_NEQ_UQ));
            if (_mm256_movemask_ps(bad)) {
                for (int i = 0; i < 4; i++)
                    v[i] = _mm256_setzero_ps();
                db = NAN;
            }
            const __m256 vid = _mm256_set1_ps(id);
            __m256i qi[4];
            for (int i = 0; i < 4; i++)
                qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));
            /* |q| <= 127: the saturating packs are exact; packs interleave the 128-bit lanes */
            const __m256i w16 = _mm256_packs_epi32(qi[0], qi[1]),
                          w16b = _mm256_packs_epi32(qi[2], qi[3]);
            __m256i b8 = _mm256_packs_epi16(w16, w16b);
            b8 = _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(q + 32 * b), b8);
            s16[2 * b] = hsum8_epi32(_mm256_add_epi32(qi[0], qi[1]));
            s16[2 * b + 1] = hsum8_epi32(_mm256_add_epi32(qi[2], qi[3]));
            d[b] = db;
            ds[b] = db * (float)(s16[2 * b] + s16[2 * b + 1]);
        }
    }
}

/* ---- packed matmul ------------------------------------------------------------------------ */

/* Decode prefetches the panels into L2, as the AVX-512 kernel does and as
 * far ahead (inf_decode_l2_ahead). Q6_K, Q4_KS and Q5_KS panels are whole
 * super-groups: a sub-group's weights, then (2-3 KiB on) the scales of all of
 * them; the hardware prefetchers lose that stream, so each sub-group asks for
 * each line of its share of the group. Without it, one thread read Q6_K
 * panels from DRAM at 17 GB/s against 30-35 with it (AMD Zen 4 under
 * INFERNO_ISA=avx2; 16 KiB ahead read 35, 4 KiB 31-34). The other kinds ask
 * for each group's bytes (qwen3-0.6b tg64 under INFERNO_ISA=avx2, six pairs
 * alternating: Q8_0 74.6 -> 80.4 t/s, won 6; Q4_0 129.1 -> 130.5, won 5), on
 * AMD only the first line of each 4 KiB page (inf_prefetch_pages; against
 * each line, tg64: Q8_0 +3-6 %, won 3 of 3; Q4_0 +2-4 % and Q4_1 +6-10 %, 2
 * of 2; IQ4_NL level). The Q5_K kind keeps each line: it reads its
 * fifth bits before its nibbles, and Q5_0 fell 106 -> 52 t/s per page. BF16
 * and F16 panels, widened to f32 and slower to compute, took none (each line:
 * tg32 lost 5 of 6, 49.4 -> 47.2); on AMD they take one per page (BF16 +19-30
 * %, won 2 of 2; F16 +12 %, 3 of 3). */
static int super_ahead = 4096;
static bool decode_pages; /* AMD: one request per 4 KiB page (inf_prefetch_pages) */

static inline __m256i bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* w . x for 32 signed weights w and activations x (8 rows x 4 k), as i32
 * per row: |w| (aw) against x with w's sign, so no pair saturates */
static inline __m256i sdot(__m256i aw, __m256i w, __m256i x, __m256i ones) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w)), ones);
}

/* acc[t][h] += (float)ai[t][h] * A * (group g's activation scale), A the 8 f16
 * scales of half h0 + h at `scales` (inside panel_int: NH, TB, dr, g) */
#define SCALE_INTO(acc, ai, scales)                                                                \
    for (int h = 0; h < NH; h++) {                                                                 \
        const __m256 A_ =                                                                          \
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((scales) + 16 * (h0 + h))));         \
        for (int t = 0; t < TB; t++)                                                               \
            acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ai[t][h]), A_),           \
                                        _mm256_set1_ps(dr[t][g]), acc[t][h]);                      \
    }

/* ai[t][h] (h < NH: half h0 + h) = the i32 sums of 4-bit group g's unsigned
 * values (4 nibble chunks at p) with row t's x, summed in i16 over the whole
 * group, then widened */
static inline __attribute__((always_inline)) void nibble_sums(__m256i ai[4][2], const uint8_t *p,
                                                              const int8_t *const *xqr, int64_t g,
                                                              const int TB, const int NH, int h0) {
    const __m256i m0f = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i s[4][2];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        for (int h = 0; h < NH; h++)
            s[t][h] = _mm256_setzero_si256();
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) {
#pragma GCC unroll 2
        for (int h = 0; h < NH; h++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(p + 64 * c + 32 * (h0 + h)));
            const __m256i lo = _mm256_and_si256(w, m0f);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m0f);
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                const int8_t *xc = xqr[t] + 32 * g + 8 * c;
                s[t][h] = _mm256_add_epi16(s[t][h], _mm256_maddubs_epi16(lo, bcast4(xc)));
                s[t][h] = _mm256_add_epi16(s[t][h], _mm256_maddubs_epi16(hi, bcast4(xc + 4)));
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        for (int h = 0; h < NH; h++)
            ai[t][h] = _mm256_madd_epi16(s[t][h], ones);
}

/* The same for 5-bit group g (the Q5_K kind's 4 nibble chunks and chunk of
 * fifth bits at p): a pair is at most 2 * 31 * 127, so the two pairs of a
 * chunk's low and high weights are summed in i16, then widened */
static inline __attribute__((always_inline)) void five_sums(__m256i ai[4][2], const uint8_t *p,
                                                            const int8_t *const *xqr, int64_t g,
                                                            const int TB, const int NH, int h0) {
    const __m256i m0f = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10),
                  ones = _mm256_set1_epi16(1);
    __m256i L[2], H[2]; /* fifth bits: of the low nibbles at bit 4 + c, the high ones at 4 */
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        for (int h = 0; h < NH; h++)
            ai[t][h] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < NH; h++) {
        H[h] = _mm256_loadu_si256((const __m256i *)(p + 256 + 32 * (h0 + h)));
        L[h] = _mm256_slli_epi16(H[h], 4);
    }
#pragma GCC unroll 1
    for (int c = 0; c < 4; c++) {
#pragma GCC unroll 2
        for (int h = 0; h < NH; h++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(p + 64 * c + 32 * (h0 + h)));
            const __m256i lo =
                _mm256_or_si256(_mm256_and_si256(w, m0f), _mm256_and_si256(L[h], m10));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w, 4), m0f),
                                               _mm256_and_si256(H[h], m10));
            L[h] = _mm256_srli_epi16(L[h], 1);
            H[h] = _mm256_srli_epi16(H[h], 1);
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                const int8_t *xc = xqr[t] + 32 * g + 8 * c;
                const __m256i q = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xc)),
                                                   _mm256_maddubs_epi16(hi, bcast4(xc + 4)));
                ai[t][h] = _mm256_add_epi32(ai[t][h], _mm256_madd_epi16(q, ones));
            }
        }
    }
}

/* acc[t][h] += d_x (A[h] sum - B[h] sum x): group g's sums of offset-form
 * weights (w = A q - B; the Q4_K and Q5_K kinds and their super-block forms) */
static inline __attribute__((always_inline)) void
scale_ab(__m256 acc[4][2], __m256i ai[4][2], const __m256 *A, const __m256 *B,
         const float *const *dr, const float *const *dsr, int64_t g, const int TB, const int NH) {
#pragma GCC unroll 2
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ai[t][h]), A[h]),
                                        _mm256_set1_ps(dr[t][g]), acc[t][h]);
            acc[t][h] = _mm256_fnmadd_ps(B[h], _mm256_set1_ps(dsr[t][g]), acc[t][h]);
        }
}

/* Outputs h0*8 .. h0*8 + 8*NH - 1 of one panel of kind KIND (a constant, so
 * each kind is its own loop) for tokens t0 .. t0+TB-1: TB = 4 with NH = 1
 * (half h0: prompt blocks, the unpacking of a weight vector shared by four
 * tokens) or TB <= 2 with NH = 2 (both halves in one pass: decode). */
static inline __attribute__((always_inline)) void
panel_int(float *y, int64_t ldy, const inf_packed *pk, const uint8_t *panel, const inf_xq *xq,
          int t0, const int TB, const int NH, int h0, const int KIND) {
    const int64_t n = xq->n;
    const int8_t *xqr[4];
    const float *dr[4], *dsr[4];
    const int32_t *sr[4];
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        xqr[t] = xq->q + (size_t)(t0 + t) * (size_t)n;
        dr[t] = xq->d + (size_t)(t0 + t) * (size_t)(n / 32);
        dsr[t] = xq->ds + (size_t)(t0 + t) * (size_t)(n / 32);
        sr[t] = xq->s16 + (size_t)(t0 + t) * (size_t)(n / 16);
        for (int h = 0; h < NH; h++)
            acc[t][h] = _mm256_setzero_ps();
    }
    const __m256i m0f = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const size_t gb = pk->group_bytes;
    for (int64_t g = 0; g < pk->n_groups; g++) {
        const uint8_t *gp = panel + (size_t)g * gb;
        if (NH == 2 && (KIND == INF_PACK_Q8_0 || KIND == INF_PACK_Q4_0 || KIND == INF_PACK_Q4_K ||
                        KIND == INF_PACK_Q5_K || KIND == INF_PACK_IQ4)) { /* decode: the group */
            if (decode_pages && KIND != INF_PACK_Q5_K)
                inf_prefetch_pages(gp + super_ahead, gb);
            else
                for (size_t l = 0; l < gb; l += 64)
                    _mm_prefetch((const char *)gp + super_ahead + l, _MM_HINT_T1);
        }
        __m256i ai[4][2];
        switch (KIND) {
        case INF_PACK_Q8_0: {
            const __m256i flip = _mm256_set1_epi8((char)0x80);
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
                for (int h = 0; h < NH; h++)
                    ai[t][h] = _mm256_setzero_si256();
#pragma GCC unroll 2
            for (int c = 0; c < 8; c++) {
#pragma GCC unroll 2
                for (int h = 0; h < NH; h++) {
                    const __m256i w = _mm256_xor_si256(
                        _mm256_loadu_si256((const __m256i *)(gp + 64 * c + 32 * (h0 + h))), flip);
                    const __m256i aw = _mm256_abs_epi8(w);
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        ai[t][h] = _mm256_add_epi32(
                            ai[t][h], sdot(aw, w, bcast4(xqr[t] + 32 * g + 4 * c), ones));
                    }
                }
            }
            SCALE_INTO(acc, ai, gp + 512);
            break;
        }
        case INF_PACK_Q4_0:
        case INF_PACK_Q4_K: {
            nibble_sums(ai, gp, xqr, g, TB, NH, h0);
            __m256 A[2], B[2];
#pragma GCC unroll 2
            for (int h = 0; h < NH; h++) {
                A[h] =
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gp + 256 + 16 * (h0 + h))));
                if (KIND == INF_PACK_Q4_0) {
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        int32_t sx = sr[t][2 * g] + sr[t][2 * g + 1];
                        __m256i v = _mm256_sub_epi32(ai[t][h], _mm256_set1_epi32(8 * sx));
                        acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), A[h]),
                                                    _mm256_set1_ps(dr[t][g]), acc[t][h]);
                    }
                } else {
                    B[h] = _mm256_cvtph_ps(
                        _mm_loadu_si128((const __m128i *)(gp + 288 + 16 * (h0 + h))));
                }
            }
            if (KIND == INF_PACK_Q4_K) scale_ab(acc, ai, A, B, dr, dsr, g, TB, NH);
            break;
        }
        case INF_PACK_Q4_KS:
        case INF_PACK_Q5_KS: {
            /* a super-group: 8 sub-groups of 32 k as the Q4_K or Q5_K kind's,
               their A = d*sc and B = dmin*m formed from the file's scale bytes */
            const bool five = KIND == INF_PACK_Q5_KS;
            const size_t sub = five ? INF_Q5KS_SUB_BYTES : INF_Q4KS_SUB_BYTES,
                         part = five ? INF_Q5KS_PREFETCH_PART : INF_Q4KS_PREFETCH_PART;
            const uint8_t *P = gp + (five ? INF_Q5KS_SC_OFF : INF_Q4KS_SC_OFF);
            __m256 d[2], dmin[2];
            for (int h = 0; h < NH; h++) {
                d[h] = _mm256_cvtph_ps(_mm_loadu_si128(
                    (const __m128i *)(gp + (five ? INF_Q5KS_D_OFF : INF_Q4KS_D_OFF) +
                                      16 * (h0 + h))));
                dmin[h] = _mm256_cvtph_ps(_mm_loadu_si128(
                    (const __m128i *)(gp + (five ? INF_Q5KS_DMIN_OFF : INF_Q4KS_DMIN_OFF) +
                                      16 * (h0 + h))));
            }
#pragma GCC unroll 1
            for (int sg = 0; sg < 8; sg++) {
                if (NH == 2) /* one pass over the panel (decode): its share of the super-group */
                    for (size_t l = 0; l < part; l += 64)
                        _mm_prefetch((const char *)gp + super_ahead + part * sg + l, _MM_HINT_T1);
                const int64_t k32 = 8 * g + sg; /* the sub-group's index along k */
                if (five)
                    five_sums(ai, gp + sub * sg, xqr, k32, TB, NH, h0);
                else
                    nibble_sums(ai, gp + sub * sg, xqr, k32, TB, NH, h0);
                __m128i sc, m;
                q4ks_scale_min(P, sg, &sc, &m);
                __m256 A[2], B[2];
#pragma GCC unroll 2
                for (int h = 0; h < NH; h++) {
                    const __m128i sch = h0 + h ? _mm_srli_si128(sc, 8) : sc,
                                  mh = h0 + h ? _mm_srli_si128(m, 8) : m;
                    A[h] = _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sch)));
                    B[h] = _mm256_mul_ps(dmin[h], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mh)));
                }
                scale_ab(acc, ai, A, B, dr, dsr, k32, TB, NH);
            }
            break;
        }
        case INF_PACK_Q5_K: {
            five_sums(ai, gp, xqr, g, TB, NH, h0);
            __m256 A[2], B[2];
#pragma GCC unroll 2
            for (int h = 0; h < NH; h++) {
                A[h] =
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gp + 320 + 16 * (h0 + h))));
                B[h] =
                    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gp + 352 + 16 * (h0 + h))));
            }
            scale_ab(acc, ai, A, B, dr, dsr, g, TB, NH);
            break;
        }
        case INF_PACK_IQ4: {
            /* indices looked up (VPSHUFB) into the signed values, then Q8_0's sign trick */
            const __m256i tbl =
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pk->values));
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
                for (int h = 0; h < NH; h++)
                    ai[t][h] = _mm256_setzero_si256();
#pragma GCC unroll 1
            for (int c = 0; c < 4; c++) {
#pragma GCC unroll 2
                for (int h = 0; h < NH; h++) {
                    const __m256i w =
                        _mm256_loadu_si256((const __m256i *)(gp + 64 * c + 32 * (h0 + h)));
                    const __m256i lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w, m0f));
                    const __m256i hi =
                        _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(w, 4), m0f));
                    const __m256i alo = _mm256_abs_epi8(lo), ahi = _mm256_abs_epi8(hi);
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        const int8_t *xc = xqr[t] + 32 * g + 8 * c;
                        ai[t][h] = _mm256_add_epi32(
                            ai[t][h], _mm256_add_epi32(sdot(alo, lo, bcast4(xc), ones),
                                                       sdot(ahi, hi, bcast4(xc + 4), ones)));
                    }
                }
            }
            SCALE_INTO(acc, ai, gp + 256);
            break;
        }
        case INF_PACK_Q2_KS: {
            /* a super-group: 16 sub-groups of 16 k, w = (d sc) q - dmin m, summed
               as the AVX-512 kernel sums them (the same bits): per x block of 32
               the two sub-groups' sums paired in 16-bit halves times their scales
               (VPMADDWD), their mins times the sums of x the same way */
            const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi16(0x0f);
            __m256 d[2], dmin[2];
            for (int h = 0; h < NH; h++) {
                d[h] = _mm256_cvtph_ps(
                    _mm_loadu_si128((const __m128i *)(gp + INF_Q2KS_D_OFF + 16 * (h0 + h))));
                dmin[h] = _mm256_cvtph_ps(
                    _mm_loadu_si128((const __m128i *)(gp + INF_Q2KS_DMIN_OFF + 16 * (h0 + h))));
            }
#pragma GCC unroll 1
            for (int hb = 0; hb < 8; hb++) {
                __m256i a[2][4][2];
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {
                    const int sg = 2 * hb + u;
                    const uint8_t *sp = gp + INF_Q2KS_SUB_BYTES * sg;
                    if (NH == 2) /* one pass over the panel (decode): its share of the group */
                        for (int l = 0; l < INF_Q2KS_PREFETCH_PART; l += 64)
                            _mm_prefetch((const char *)gp + super_ahead +
                                             INF_Q2KS_PREFETCH_PART * sg + l,
                                         _MM_HINT_T1);
                    const int64_t k16 = 16 * g + sg; /* the sub-group's index along k */
#pragma GCC unroll 2
                    for (int h = 0; h < NH; h++) {
                        const __m256i lo =
                            _mm256_loadu_si256((const __m256i *)(sp + 32 * (h0 + h)));
                        const __m256i q0 = _mm256_and_si256(lo, m3),
                                      q1 = _mm256_and_si256(_mm256_srli_epi16(lo, 2), m3),
                                      q2 = _mm256_and_si256(_mm256_srli_epi16(lo, 4), m3),
                                      q3 = _mm256_and_si256(_mm256_srli_epi16(lo, 6), m3);
#pragma GCC unroll 4
                        for (int t = 0; t < TB; t++) {
                            const int8_t *xg = xqr[t] + 16 * k16;
                            const __m256i p = _mm256_add_epi16(
                                _mm256_add_epi16(_mm256_maddubs_epi16(q0, bcast4(xg)),
                                                 _mm256_maddubs_epi16(q1, bcast4(xg + 4))),
                                _mm256_add_epi16(_mm256_maddubs_epi16(q2, bcast4(xg + 8)),
                                                 _mm256_maddubs_epi16(q3, bcast4(xg + 12))));
                            a[u][t][h] = _mm256_madd_epi16(p, ones);
                        }
                    }
                }
                const int64_t k32 = 8 * g + hb;
#pragma GCC unroll 2
                for (int h = 0; h < NH; h++) {
                    const __m256i sm = _mm256_cvtepu8_epi16(_mm_loadu_si128(
                        (const __m128i *)(gp + INF_Q2KS_SC_OFF + 32 * hb + 16 * (h0 + h))));
                    const __m256i sc = _mm256_and_si256(sm, m15), mn = _mm256_srli_epi16(sm, 4);
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        const __m256i pair =
                            _mm256_blend_epi16(a[0][t][h], _mm256_slli_epi32(a[1][t][h], 16), 0xAA);
                        const uint32_t s2 = ((uint32_t)sr[t][2 * k32] & 0xFFFFu) |
                                            (uint32_t)sr[t][2 * k32 + 1] << 16;
                        const __m256i si = _mm256_madd_epi16(pair, sc),
                                      mi = _mm256_madd_epi16(mn, _mm256_set1_epi32((int)s2));
                        const __m256 v =
                            _mm256_fmsub_ps(_mm256_cvtepi32_ps(si), d[h],
                                            _mm256_mul_ps(_mm256_cvtepi32_ps(mi), dmin[h]));
                        acc[t][h] = _mm256_fmadd_ps(v, _mm256_set1_ps(dr[t][k32]), acc[t][h]);
                    }
                }
            }
            break;
        }
        case INF_PACK_Q6_K:
        case INF_PACK_IQ4S: {
            /* a super-group: 16 sub-groups of 16 k, each with its own scale d *
               sc; unsigned values q - 32 (Q6_K) or the IQ4S table's values + 64
               (at most 107: VPMADDUBSW's pairs stay within int16, two of them not) */
            const int t4 = KIND == INF_PACK_IQ4S, off = t4 ? 64 : 32;
            const int part = t4 ? INF_IQ4S_PREFETCH_PART : INF_Q6K_PREFETCH_PART;
            const size_t sub = t4 ? INF_IQ4S_SUB_BYTES : INF_Q6K_SUB_BYTES,
                         sco = t4 ? INF_IQ4S_SC_OFF : INF_Q6K_SC_OFF;
            const __m256i m30 = _mm256_set1_epi8(0x30);
            const __m256i tbl = _mm256_broadcastsi128_si256(
                _mm_add_epi8(_mm_loadu_si128((const __m128i *)pk->values), _mm_set1_epi8(64)));
            __m256 d[2];
            for (int h = 0; h < NH; h++)
                d[h] = _mm256_cvtph_ps(_mm_loadu_si128(
                    (const __m128i *)(gp + (t4 ? INF_IQ4S_D_OFF : INF_Q6K_D_OFF) + 16 * (h0 + h))));
#pragma GCC unroll 1
            for (int sg = 0; sg < 16; sg++) {
                const uint8_t *sp = gp + sub * sg;
                if (NH == 2) /* one pass over the panel (decode): its share of the super-group */
                    for (int l = 0; l < part; l += 64)
                        _mm_prefetch((const char *)gp + super_ahead + part * sg + l, _MM_HINT_T1);
                const int64_t k16 = 16 * g + sg; /* the sub-group's index along k */
#pragma GCC unroll 2
                for (int h = 0; h < NH; h++) {
                    const __m256i n0 = _mm256_loadu_si256((const __m256i *)(sp + 32 * (h0 + h)));
                    const __m256i n1 =
                        _mm256_loadu_si256((const __m256i *)(sp + 64 + 32 * (h0 + h)));
                    __m256i q0, q1, q2, q3;
                    if (t4) {
                        q0 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(n0, m0f));
                        q1 = _mm256_shuffle_epi8(tbl,
                                                 _mm256_and_si256(_mm256_srli_epi16(n0, 4), m0f));
                        q2 = _mm256_shuffle_epi8(tbl, _mm256_and_si256(n1, m0f));
                        q3 = _mm256_shuffle_epi8(tbl,
                                                 _mm256_and_si256(_mm256_srli_epi16(n1, 4), m0f));
                    } else {
                        const __m256i hb =
                            _mm256_loadu_si256((const __m256i *)(sp + 128 + 32 * (h0 + h)));
                        q0 = _mm256_or_si256(_mm256_and_si256(n0, m0f),
                                             _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
                        q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n0, 4), m0f),
                                             _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
                        q2 = _mm256_or_si256(_mm256_and_si256(n1, m0f), _mm256_and_si256(hb, m30));
                        q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(n1, 4), m0f),
                                             _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
                    }
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        const int8_t *xg = xqr[t] + 16 * k16;
                        const __m256i p0 = _mm256_maddubs_epi16(q0, bcast4(xg)),
                                      p1 = _mm256_maddubs_epi16(q1, bcast4(xg + 4)),
                                      p2 = _mm256_maddubs_epi16(q2, bcast4(xg + 8)),
                                      p3 = _mm256_maddubs_epi16(q3, bcast4(xg + 12));
                        if (t4) /* a pair up to 27178: widened one by one */
                            ai[t][h] =
                                _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p0, ones),
                                                                  _mm256_madd_epi16(p1, ones)),
                                                 _mm256_add_epi32(_mm256_madd_epi16(p2, ones),
                                                                  _mm256_madd_epi16(p3, ones)));
                        else /* two pairs of 6-bit values fit int16 (at most 32004) */
                            ai[t][h] =
                                _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones),
                                                 _mm256_madd_epi16(_mm256_add_epi16(p2, p3), ones));
                    }
                    const __m128i sc =
                        _mm_loadl_epi64((const __m128i *)(gp + sco + 16 * sg + 8 * (h0 + h)));
                    const __m256 A =
                        _mm256_mul_ps(d[h], _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        __m256i v = _mm256_sub_epi32(ai[t][h], _mm256_set1_epi32(off * sr[t][k16]));
                        acc[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(v), A),
                                                    _mm256_set1_ps(dr[t][k16 / 2]), acc[t][h]);
                    }
                }
            }
            break;
        }
        default:
            break;
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        for (int h = 0; h < NH; h++)
            _mm256_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy + 8 * (h0 + h), acc[t][h]);
}

/* BF16 and F16 panels (F16 a constant): each pair of k widened to f32 (BF16:
 * a shift or a mask of the 32-bit lane pair; F16: F16C on the k-major rows)
 * against the activations as they are, in two accumulators per row (even
 * and odd k), summed at the end */
static inline __attribute__((always_inline)) void
panel_wide(float *y, int64_t ldy, const inf_packed *pk, const uint8_t *panel, const inf_xq *xq,
           int t0, const int TB, const int NH, int h0, const int F16) {
    const int64_t n = xq->n;
    const float *xr[4];
    __m256 acc[4][2], acc2[4][2];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        xr[t] = (F16 ? xq->x : xq->f) + (size_t)(t0 + t) * (size_t)n;
        for (int h = 0; h < NH; h++)
            acc[t][h] = acc2[t][h] = _mm256_setzero_ps();
    }
    const __m256i hi16 = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int64_t g = 0; g < pk->n_groups; g++) {
        const uint8_t *gp = panel + (size_t)g * 1024;
        if (decode_pages && NH == 2) inf_prefetch_pages(gp + super_ahead, 1024);
#pragma GCC unroll 2
        for (int c = 0; c < 16; c++) { /* k 2c and 2c + 1, 64 bytes */
            __m256 we[2], wo[2];
#pragma GCC unroll 2
            for (int h = 0; h < NH; h++) {
                if (F16) { /* rows k 2c and 2c + 1 of 32 bytes, 16 per half */
                    const uint8_t *p = gp + 64 * c + 16 * (h0 + h);
                    we[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
                    wo[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 32)));
                } else { /* lane r = (w[r][2c], w[r][2c+1]) as bf16: the even one shifted up,
                            the odd one masked */
                    const __m256i v =
                        _mm256_loadu_si256((const __m256i *)(gp + 64 * c + 32 * (h0 + h)));
                    we[h] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
                    wo[h] = _mm256_castsi256_ps(_mm256_and_si256(v, hi16));
                }
            }
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                const __m256 xe = _mm256_broadcast_ss(xr[t] + 32 * g + 2 * c);
                const __m256 xo = _mm256_broadcast_ss(xr[t] + 32 * g + 2 * c + 1);
#pragma GCC unroll 2
                for (int h = 0; h < NH; h++) {
                    acc[t][h] = _mm256_fmadd_ps(we[h], xe, acc[t][h]);
                    acc2[t][h] = _mm256_fmadd_ps(wo[h], xo, acc2[t][h]);
                }
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        for (int h = 0; h < NH; h++)
            _mm256_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy + 8 * (h0 + h),
                             _mm256_add_ps(acc[t][h], acc2[t][h]));
}

/* ---- prompt rows of IQ4 (a sign-trick kind) -------------------------------------------------- */

/* Groups of a panel expanded at a time, into |w| and w (signed bytes) in
 * Q8_0's chunk order: the lookups and the absolute values are done once per
 * panel instead of once per pair of tokens. (Expanding Q8_0 panels the same
 * way, their flip and absolute values, measured no faster.) */
#define SG 8
#define SIGNED_EXPAND_MIN_T 8 /* fewer tokens read the panel directly */

static inline __attribute__((always_inline)) void
expand_signed(uint8_t *aw, int8_t *ws, const uint8_t *gp, const int8_t values[16]) {
    /* IQ4 chunk c: low nibbles are Q8_0 chunk 2c, high nibbles chunk 2c + 1 */
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)values));
    const __m256i m0f = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; c++)
        for (int h = 0; h < 2; h++) {
            const __m256i w = _mm256_loadu_si256((const __m256i *)(gp + 64 * c + 32 * h));
            const __m256i lo = _mm256_shuffle_epi8(tbl, _mm256_and_si256(w, m0f));
            const __m256i hi =
                _mm256_shuffle_epi8(tbl, _mm256_and_si256(_mm256_srli_epi16(w, 4), m0f));
            const size_t o_lo = 64 * (2 * c) + 32 * h, o_hi = 64 * (2 * c + 1) + 32 * h;
            _mm256_storeu_si256((__m256i *)(ws + o_lo), lo);
            _mm256_storeu_si256((__m256i *)(aw + o_lo), _mm256_abs_epi8(lo));
            _mm256_storeu_si256((__m256i *)(ws + o_hi), hi);
            _mm256_storeu_si256((__m256i *)(aw + o_hi), _mm256_abs_epi8(hi));
        }
}

/* Groups g0 .. g0+ng-1 of tokens t0 .. t0+TB-1 (both halves) from the
 * expanded bytes, continuing the accumulators in y (first = 0: from zero).
 * The integer sums are the direct kernel's and the float steps are the same
 * in the same order (y holds the running sums between blocks), so the bits
 * are those of panel_int. */
static inline __attribute__((always_inline)) void
signed_block(float *y, int64_t ldy, const uint8_t *panel, size_t gb, const uint8_t *aw,
             const int8_t *ws, const inf_xq *xq, int t0, const int TB, int64_t g0, int ng,
             int first, size_t scale_off) {
    const int64_t n = xq->n;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[2][2];
    const int8_t *xqr[2];
    const float *dr[2];
#pragma GCC unroll 2
    for (int t = 0; t < TB; t++) {
        xqr[t] = xq->q + (size_t)(t0 + t) * (size_t)n;
        dr[t] = xq->d + (size_t)(t0 + t) * (size_t)(n / 32);
        for (int h = 0; h < 2; h++)
            acc[t][h] = first ? _mm256_setzero_ps()
                              : _mm256_loadu_ps(y + (size_t)(t0 + t) * (size_t)ldy + 8 * h);
    }
    for (int gi = 0; gi < ng; gi++) {
        const int64_t g = g0 + gi;
        const uint8_t *a = aw + 512 * gi;
        const int8_t *w = ws + 512 * gi;
        __m256i ai[2][2];
#pragma GCC unroll 2
        for (int t = 0; t < TB; t++)
            ai[t][0] = ai[t][1] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int c = 0; c < 8; c++) {
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256i va = _mm256_loadu_si256((const __m256i *)(a + 64 * c + 32 * h));
                const __m256i vw = _mm256_loadu_si256((const __m256i *)(w + 64 * c + 32 * h));
#pragma GCC unroll 2
                for (int t = 0; t < TB; t++)
                    ai[t][h] = _mm256_add_epi32(
                        ai[t][h], sdot(va, vw, bcast4(xqr[t] + 32 * g + 4 * c), ones));
            }
        }
        const int NH = 2, h0 = 0;
        SCALE_INTO(acc, ai, panel + (size_t)g * gb + scale_off);
    }
#pragma GCC unroll 2
    for (int t = 0; t < TB; t++)
        for (int h = 0; h < 2; h++)
            _mm256_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy + 8 * h, acc[t][h]);
}

/* Tokens t_begin .. T-1 of one IQ4 panel, SG groups at a time. */
static inline __attribute__((always_inline)) void
panel_signed(float *yp, int64_t ldy, const inf_packed *pk, const uint8_t *panel, const inf_xq *xq,
             int t_begin, int T) {
    _Alignas(32) uint8_t aw[SG * 512];
    _Alignas(32) int8_t ws[SG * 512];
    const size_t gb = pk->group_bytes, scale_off = 256; /* IQ4: 16 f16 d after 4 chunks */
    for (int64_t g0 = 0; g0 < pk->n_groups; g0 += SG) {
        const int ng = (int)(pk->n_groups - g0 < SG ? pk->n_groups - g0 : SG);
        for (int gi = 0; gi < ng; gi++)
            expand_signed(aw + 512 * gi, ws + 512 * gi, panel + (size_t)(g0 + gi) * gb, pk->values);
        int t = t_begin;
        for (; t + 2 <= T; t += 2)
            signed_block(yp, ldy, panel, gb, aw, ws, xq, t, 2, g0, ng, g0 == 0, scale_off);
        if (t < T) signed_block(yp, ldy, panel, gb, aw, ws, xq, t, 1, g0, ng, g0 == 0, scale_off);
    }
}

#undef SG

/* One panel for all T tokens: blocks of four over one half at a time, then
 * the rest two at a time (or one) over both halves; each token's bits are
 * the same in every block shape. */
static inline __attribute__((always_inline)) void panel_all(float *yp, int64_t ldy,
                                                            const inf_packed *pk,
                                                            const uint8_t *panel, const inf_xq *xq,
                                                            int t, int T, const int KIND) {
    if (KIND == INF_PACK_BF16 || KIND == INF_PACK_F16) { /* f32 FMAs: four tokens a half
                                                             measured no faster (BF16) */
        const int f16 = KIND == INF_PACK_F16;
        for (; t + 2 <= T; t += 2)
            panel_wide(yp, ldy, pk, panel, xq, t, 2, 2, 0, f16);
        if (t < T) panel_wide(yp, ldy, pk, panel, xq, t, 1, 2, 0, f16);
        return;
    }
    /* Q8_0 and IQ4 pay a sign per token and weight vector (the sign trick),
       so a broadcast shared by 16 rows is worth more to them than unpacking
       shared by four tokens; IQ4's prompts expand its lookups once instead
       (Q8_0's flip and absolute values are cheap enough: no gain measured) */
    const int signed_kind = KIND == INF_PACK_Q8_0 || KIND == INF_PACK_IQ4;
    if (KIND == INF_PACK_IQ4 && T - t >= SIGNED_EXPAND_MIN_T) {
        panel_signed(yp, ldy, pk, panel, xq, t, T);
        return;
    }
    for (; !signed_kind && t + 4 <= T; t += 4) {
        panel_int(yp, ldy, pk, panel, xq, t, 4, 1, 0, KIND);
        panel_int(yp, ldy, pk, panel, xq, t, 4, 1, 1, KIND);
    }
    for (; t + 2 <= T; t += 2)
        panel_int(yp, ldy, pk, panel, xq, t, 2, 2, 0, KIND);
    if (t < T) panel_int(yp, ldy, pk, panel, xq, t, 1, 2, 0, KIND);
}

#undef SCALE_INTO

#define PANELS_OF(KIND)                                                                            \
    for (int64_t p = p0; p < p1; p++)                                                              \
        panel_all(y + 16 * p, ldy, pk, pk->data + (size_t)p * pbytes, xq, 0, T, KIND);

static void a2_matmul_packed(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T,
                             int64_t p0, int64_t p1) {
    const size_t pbytes = (size_t)pk->n_groups * pk->group_bytes;
    switch (pk->kind) {
    case INF_PACK_BF16:
        PANELS_OF(INF_PACK_BF16);
        break;
    case INF_PACK_Q8_0:
        PANELS_OF(INF_PACK_Q8_0);
        break;
    case INF_PACK_Q4_0:
        PANELS_OF(INF_PACK_Q4_0);
        break;
    case INF_PACK_Q4_K:
        PANELS_OF(INF_PACK_Q4_K);
        break;
    case INF_PACK_Q6_K:
        PANELS_OF(INF_PACK_Q6_K);
        break;
    case INF_PACK_Q5_K:
        PANELS_OF(INF_PACK_Q5_K);
        break;
    case INF_PACK_IQ4:
        PANELS_OF(INF_PACK_IQ4);
        break;
    case INF_PACK_Q4_KS:
        PANELS_OF(INF_PACK_Q4_KS);
        break;
    case INF_PACK_Q5_KS:
        PANELS_OF(INF_PACK_Q5_KS);
        break;
    case INF_PACK_F16:
        PANELS_OF(INF_PACK_F16);
        break;
    case INF_PACK_Q2_KS:
        PANELS_OF(INF_PACK_Q2_KS);
        break;
    case INF_PACK_IQ4S:
        PANELS_OF(INF_PACK_IQ4S);
        break;
    case INF_PACK_Q3_KS: /* not in INF_PACK_KINDS_AVX2: never packed for this level */
        break;
    }
}

#undef PANELS_OF

void inf_kernels_fill_avx2_matmul(inf_kernels *k) {
    super_ahead = inf_decode_l2_ahead();
    decode_pages = inf_cpu_features_get()->amd;
    k->has_packed = 1;
    k->bf16_as_f32 = 1;
    k->pack_kinds = INF_PACK_KINDS_AVX2;
    k->quantize_x = a2_quantize_x;
    k->matmul_packed = a2_matmul_packed;
}
