/* Load-time packing of weights into 16-row panels on AVX2 + F16C: the same
 * bytes as pack.c's scalar reference (layouts in kernels.h), which stays the
 * oracle (tests/unit/test_pack.c compares the two byte for byte) and the path
 * for the types this file has no decoder for.
 *
 * A panel is decoded one unit at a time (a K-quant super-block of 256
 * weights, or one block of 32) for each of its 16 rows into q[16][256] (the
 * kinds' unsigned values) and the per-group f16 scales, then each group is
 * written as its chunks: the 16 rows' 4-byte slices side by side, by 4x4 and
 * 8x8 transposes of 32-bit words. */
#include <immintrin.h>
#include <string.h>

#include "backend/kernels.h"

/* ---- f16 scales ------------------------------------------------------------------------------ */

/* out[i * stride] = f16(f32(d) * s[i]) for i < 8, as inf_f32_to_f16 rounds it
 * (to nearest even; the f32 product is exact, d having 11 significant bits
 * and |s| < 2^8), with its NaN: sign | 0x7e00. */
static inline void scale8(uint16_t *out, int stride, uint16_t d, __m256i s) {
    const __m256 df = _mm256_cvtph_ps(_mm_set1_epi16((short)d));
    __m128i h =
        _mm256_cvtps_ph(_mm256_mul_ps(df, _mm256_cvtepi32_ps(s)), _MM_FROUND_TO_NEAREST_INT);
    const __m128i mag = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
    const __m128i nan = _mm_cmpgt_epi16(mag, _mm_set1_epi16(0x7c00));
    const __m128i canon =
        _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16((short)0x8000)), _mm_set1_epi16(0x7e00));
    h = _mm_blendv_epi8(h, canon, nan);
    uint16_t t[8];
    _mm_storeu_si128((__m128i *)t, h);
    for (int i = 0; i < 8; i++)
        out[i * stride] = t[i];
}

/* ---- per type: one unit of a row ------------------------------------------------------------
 * q[U * group] in the kind's unsigned form, A[gi * INF_PANEL] (and B) for the
 * unit's U groups gi, and for the Q6_K kind ssc[16], the sub-block scales
 * (Q4_KS, Q5_KS: the file's 12 scale bytes), exactly as pack.c's fetch functions
 * give them. */

typedef void (*vfetch_fn)(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                          int8_t *ssc);

static inline __m256i load256(const void *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}
static inline void store256(void *p, __m256i v) {
    _mm256_storeu_si256((__m256i *)p, v);
}

static void v_q8_0(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                   int8_t *ssc) {
    const inf_block_q8_0 *b = (const inf_block_q8_0 *)row + u;
    store256(q, _mm256_xor_si256(load256(b->qs), _mm256_set1_epi8((char)0x80)));
    A[0] = b->d;
}

/* 16 bytes of nibbles as Q4_0 orders them: q[0..15] the low ones, q[16..31] the high */
static inline void nibbles16(uint8_t *q, const uint8_t *qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0xF);
    _mm_storeu_si128((__m128i *)q, _mm_and_si128(v, m));
    _mm_storeu_si128((__m128i *)(q + 16), _mm_and_si128(_mm_srli_epi16(v, 4), m));
}

static void v_q4_0(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                   int8_t *ssc) {
    const inf_block_q4_0 *b = (const inf_block_q4_0 *)row + u;
    nibbles16(q, b->qs);
    A[0] = b->d;
}

static void v_iq4_nl(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                     int8_t *ssc) {
    const inf_block_iq4_nl *b = (const inf_block_iq4_nl *)row + u;
    nibbles16(q, b->qs);
    A[0] = b->d;
}

static void v_mxfp4(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                    int8_t *ssc) {
    const inf_block_mxfp4 *b = (const inf_block_mxfp4 *)row + u;
    nibbles16(q, b->qs);
    A[0] = inf_mxfp4_scale_f16(b->e);
}

static void v_iq4_xs(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                     int8_t *ssc) {
    const inf_block_iq4_xs *b = (const inf_block_iq4_xs *)row + u;
    int32_t ls[8];
    for (int s = 0; s < 8; s++) {
        nibbles16(q + 32 * s, b->qs + 16 * s);
        ls[s] =
            (((b->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((b->scales_h >> (2 * s)) & 3) << 4) -
            32;
    }
    scale8(A, INF_PANEL, b->d, _mm256_loadu_si256((const __m256i *)ls));
}

/* Q4_K's 6-bit scales and mins of the 8 sub-blocks (ggml's packing of scales[12]) */
static inline void k_scales(const uint8_t *s, int32_t *sc, int32_t *m) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (s[j + 8] & 0xF) | ((s[j] >> 6) << 4);
        m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
}

/* Q4_K's 256 values, sub-block s at q + 32 s */
static inline void q4k_values(uint8_t *q, const inf_block_q4_K *b) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int i = 0; i < 4; i++) { /* sub-blocks 2i (low nibbles) and 2i + 1 (high) */
        const __m256i v = load256(b->qs + 32 * i);
        store256(q + 64 * i, _mm256_and_si256(v, m4));
        store256(q + 64 * i + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
}

/* as the Q4_KS kind: d, dmin and the scale bytes as they are */
static void v_q4_K_sb(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                      int8_t *ssc) {
    const inf_block_q4_K *b = (const inf_block_q4_K *)row + u;
    q4k_values(q, b);
    memcpy(ssc, b->scales, 12);
    A[0] = b->d;
    B[0] = b->dmin;
}

static void v_q4_K(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                   int8_t *ssc) {
    const inf_block_q4_K *b = (const inf_block_q4_K *)row + u;
    q4k_values(q, b);
    int32_t sc[8], m[8];
    k_scales(b->scales, sc, m);
    scale8(A, INF_PANEL, b->d, _mm256_loadu_si256((const __m256i *)sc));
    scale8(B, INF_PANEL, b->dmin, _mm256_loadu_si256((const __m256i *)m));
}

/* as the Q5_KS kind: d, dmin and the scale bytes as they are */
static void v_q5_K_sb(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                      int8_t *ssc) {
    const inf_block_q5_K *b = (const inf_block_q5_K *)row + u;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1), qh = load256(b->qh);
    for (int sub = 0; sub < 8; sub++) { /* bit 4 of weight 32 sub + k: bit sub of qh[k] */
        const __m256i v = load256(b->qs + 32 * (sub / 2));
        const __m256i lo = _mm256_and_si256(sub & 1 ? _mm256_srli_epi16(v, 4) : v, m4);
        const __m256i hb =
            _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(sub)), one); /* 0 or 1 */
        store256(q + 32 * sub, _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4)));
    }
    memcpy(ssc, b->scales, 12);
    A[0] = b->d;
    B[0] = b->dmin;
}

static void v_q6_K(const uint8_t *row, int64_t u, uint8_t *q, uint16_t *A, uint16_t *B,
                   int8_t *ssc) {
    const inf_block_q6_K *b = (const inf_block_q6_K *)row + u;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    for (int half = 0; half < 2; half++) {
        /* weight 128 half + 32 quad + l: low 4 bits from ql[l] (quads 0, 2) or
           ql[l + 32] (1, 3), low or high nibble (quads 0, 1 or 2, 3); high 2
           bits from qh[l] bits 2 quad */
        const __m256i l0 = load256(b->ql + 64 * half), l1 = load256(b->ql + 64 * half + 32);
        const __m256i h = load256(b->qh + 32 * half);
        uint8_t *o = q + 128 * half;
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, m3), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4);
        const __m256i h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4);
        const __m256i h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4);
        store256(o, _mm256_or_si256(_mm256_and_si256(l0, m4), h0));
        store256(o + 32, _mm256_or_si256(_mm256_and_si256(l1, m4), h1));
        store256(o + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), h2));
        store256(o + 96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), h3));
    }
    memcpy(ssc, b->scales, 16);
    A[0] = b->d;
}

/* the vector decoders: a weight type, the kind it gives, groups per unit */
typedef struct vrow {
    inf_dtype type;
    inf_pack_kind kind;
    vfetch_fn fetch;
    int unit;
} vrow;

static const vrow vrows[] = {
    {INF_Q8_0, INF_PACK_Q8_0, v_q8_0, 1},     {INF_Q4_0, INF_PACK_Q4_0, v_q4_0, 1},
    {INF_IQ4_NL, INF_PACK_IQ4, v_iq4_nl, 1},  {INF_IQ4_XS, INF_PACK_IQ4, v_iq4_xs, 8},
    {INF_Q4_K, INF_PACK_Q4_KS, v_q4_K_sb, 1}, {INF_Q4_K, INF_PACK_Q4_K, v_q4_K, 8},
    {INF_Q5_K, INF_PACK_Q5_KS, v_q5_K_sb, 1}, {INF_Q6_K, INF_PACK_Q6_K, v_q6_K, 1},
    {INF_MXFP4, INF_PACK_IQ4, v_mxfp4, 1},
};

/* the decoder of type into kind, or NULL */
static const vrow *vrow_for(inf_dtype type, inf_pack_kind kind) {
    for (size_t i = 0; i < sizeof vrows / sizeof vrows[0]; i++)
        if (vrows[i].type == type && vrows[i].kind == kind) return &vrows[i];
    return NULL;
}

/* ---- writing one group's chunks ------------------------------------------------------------ */

/* dst + 64 c + 16 j (c < n, j = row block of 4) = the 4x4 transpose of rows' words */
static inline void store_4x4(uint8_t *dst, int n, __m128i a, __m128i b, __m128i c, __m128i d) {
    const __m128i t0 = _mm_unpacklo_epi32(a, b), t1 = _mm_unpacklo_epi32(c, d);
    const __m128i t2 = _mm_unpackhi_epi32(a, b), t3 = _mm_unpackhi_epi32(c, d);
    _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi64(t0, t1));
    _mm_storeu_si128((__m128i *)(dst + 64), _mm_unpackhi_epi64(t0, t1));
    _mm_storeu_si128((__m128i *)(dst + 128), _mm_unpacklo_epi64(t2, t3));
    if (n > 3) _mm_storeu_si128((__m128i *)(dst + 192), _mm_unpackhi_epi64(t2, t3));
}

/* 8 rows r[i] of 8 words: word c of row i to dst + 64 c + 4 i (an 8x8 transpose) */
static inline void store_8x8(uint8_t *dst, const __m256i *r) {
    __m256i t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    /* s[0..3]: rows 0-3, words (0|4), (1|5), (2|6), (3|7); s[4..7]: rows 4-7 */
    for (int h = 0; h < 2; h++) {
        s[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        s[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        s[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        s[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int c = 0; c < 4; c++) {
        store256(dst + 64 * c, _mm256_permute2x128_si256(s[c], s[4 + c], 0x20));
        store256(dst + 64 * (c + 4), _mm256_permute2x128_si256(s[c], s[4 + c], 0x31));
    }
}

/* a row's 32 values (< 16 after the mask) as Q4_0's nibble words: word c =
   bytes 8c..8c+3 in the low nibbles, 8c+4..8c+7 in the high ones */
static inline __m128i nibble_words(__m256i v) {
    v = _mm256_and_si256(v, _mm256_set1_epi8(0xF));
    const __m256i x = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_srli_epi64(v, 32), 4));
    return _mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}

/* Q5_K's fifth-bit word of a row: byte j, bit c = bit 4 of q[8c+j], bit 4+c = of q[8c+4+j] */
static inline uint32_t fifth_bits(__m256i v) {
    __m256i t = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(1));
    t = _mm256_sllv_epi32(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    __m128i x = _mm_or_si128(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    x = _mm_or_si128(x, _mm_unpackhi_epi64(x, x));
    x = _mm_or_si128(x, _mm_srli_epi64(x, 32));
    return (uint32_t)_mm_cvtsi128_si32(x);
}

/* One panel's group from q[r] (row r's values of this group) and A, B (16 each). */
static void emit_group(uint8_t *dst, inf_pack_kind kind, const uint8_t *const q[INF_PANEL],
                       const uint16_t *A, const uint16_t *B, const int8_t (*sc)[16]) {
    size_t qbytes;
    if (kind == INF_PACK_Q8_0) {
        __m256i r[8];
        for (int h = 0; h < 2; h++) {
            for (int i = 0; i < 8; i++)
                r[i] = load256(q[8 * h + i]);
            store_8x8(dst + 32 * h, r);
        }
        qbytes = 512;
    } else if (kind == INF_PACK_Q6_K) {
        /* 16 sub-groups of 16 values: 2 nibble words, then the high bit pairs
           (byte j, bits 2i..2i+1 = bits 4..5 of q[4i+j]); then the scales, d */
        for (int sg = 0; sg < 16; sg++) {
            __m128i w[INF_PANEL];
            for (int r = 0; r < INF_PANEL; r++) {
                const __m128i v = _mm_loadu_si128((const __m128i *)(q[r] + 16 * sg));
                const __m128i nib = nibble_words(_mm256_castsi128_si256(v));
                __m128i t = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(3));
                t = _mm_sllv_epi32(t, _mm_setr_epi32(0, 2, 4, 6));
                t = _mm_or_si128(t, _mm_unpackhi_epi64(t, t));
                t = _mm_or_si128(t, _mm_srli_epi64(t, 32));
                /* words: nibbles of k 0..7, of k 8..15, high pairs */
                w[r] = _mm_unpacklo_epi64(nib, t);
            }
            uint8_t *sd = dst + INF_Q6K_SUB_BYTES * sg;
            for (int j = 0; j < 4; j++)
                store_4x4(sd + 16 * j, 3, w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
            for (int r = 0; r < INF_PANEL; r++)
                dst[INF_Q6K_SC_OFF + 16 * sg + r] = (uint8_t)sc[r][sg];
        }
        memcpy(dst + INF_Q6K_D_OFF, A, INF_PANEL * sizeof(uint16_t));
        return;
    } else if (kind == INF_PACK_Q4_KS || kind == INF_PACK_Q5_KS) {
        /* 8 sub-groups of 32 values as Q4_0's nibble words (and Q5_KS's fifth
           bits); then the scale bytes as planes of 16 rows, d, dmin */
        const bool five = kind == INF_PACK_Q5_KS;
        const size_t sub = five ? INF_Q5KS_SUB_BYTES : INF_Q4KS_SUB_BYTES,
                     sco = five ? INF_Q5KS_SC_OFF : INF_Q4KS_SC_OFF;
        for (int s = 0; s < 8; s++) {
            __m128i w[INF_PANEL];
            uint32_t h[INF_PANEL];
            for (int r = 0; r < INF_PANEL; r++) {
                const __m256i v = load256(q[r] + 32 * s);
                w[r] = nibble_words(v);
                if (five) h[r] = fifth_bits(v);
            }
            for (int j = 0; j < 4; j++)
                store_4x4(dst + sub * s + 16 * j, 4, w[4 * j], w[4 * j + 1], w[4 * j + 2],
                          w[4 * j + 3]);
            if (five) memcpy(dst + sub * s + 256, h, sizeof h);
        }
        for (int r = 0; r < INF_PANEL; r++)
            for (int j = 0; j < 12; j++)
                dst[sco + 16 * j + r] = (uint8_t)sc[r][j];
        memcpy(dst + (five ? INF_Q5KS_D_OFF : INF_Q4KS_D_OFF), A, INF_PANEL * sizeof(uint16_t));
        memcpy(dst + (five ? INF_Q5KS_DMIN_OFF : INF_Q4KS_DMIN_OFF), B,
               INF_PANEL * sizeof(uint16_t));
        return;
    } else { /* Q4_0, Q4_K, IQ4 */
        __m128i w[INF_PANEL];
        for (int r = 0; r < INF_PANEL; r++)
            w[r] = nibble_words(load256(q[r]));
        for (int j = 0; j < 4; j++)
            store_4x4(dst + 16 * j, 4, w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
        qbytes = 256;
    }
    memcpy(dst + qbytes, A, INF_PANEL * sizeof(uint16_t));
    if (kind == INF_PACK_Q4_K)
        memcpy(dst + qbytes + INF_PANEL * sizeof(uint16_t), B, INF_PANEL * sizeof(uint16_t));
}

/* BF16 group g of a panel: chunk c, lane r = word c of row r's 64 bytes */
static void bf16_group(uint8_t *dst, const uint8_t *base, size_t row_bytes, int64_t g) {
    __m256i r[8];
    for (int rb = 0; rb < 2; rb++)
        for (int cb = 0; cb < 2; cb++) {
            for (int i = 0; i < 8; i++)
                r[i] = load256(base + (size_t)(8 * rb + i) * row_bytes + 64 * (size_t)g + 32 * cb);
            store_8x8(dst + 64 * 8 * cb + 32 * rb, r);
        }
}

/* F16 group g of a panel: row k c at 32 c, lane r = value c of row r's 64
 * bytes; two 16 x 16 transposes of 16-bit values (rows 0..7 into the low
 * 128 bits of each output, rows 8..15 into the high) */
static void f16_group(uint8_t *dst, const uint8_t *base, size_t row_bytes, int64_t g) {
    for (int kb = 0; kb < 2; kb++) {
        __m256i a[16], b[16], c[16];
        for (int r = 0; r < 16; r++)
            a[r] = load256(base + (size_t)r * row_bytes + 64 * (size_t)g + 32 * kb);
        for (int i = 0; i < 8; i++) { /* row pairs: k 0..3 | 8..11, and 4..7 | 12..15 */
            b[2 * i] = _mm256_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
            b[2 * i + 1] = _mm256_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
        }
        for (int j = 0; j < 4; j++) /* row quads j, k pairs m: c[4 j + m] holds k 2m, 2m+1 */
            for (int h = 0; h < 2; h++) {
                c[4 * j + 2 * h] = _mm256_unpacklo_epi32(b[4 * j + h], b[4 * j + 2 + h]);
                c[4 * j + 2 * h + 1] = _mm256_unpackhi_epi32(b[4 * j + h], b[4 * j + 2 + h]);
            }
        for (int m = 0; m < 4; m++)
            for (int odd = 0; odd < 2; odd++) {
                const __m256i r07 = odd ? _mm256_unpackhi_epi64(c[m], c[4 + m])
                                        : _mm256_unpacklo_epi64(c[m], c[4 + m]),
                              r815 = odd ? _mm256_unpackhi_epi64(c[8 + m], c[12 + m])
                                         : _mm256_unpacklo_epi64(c[8 + m], c[12 + m]);
                const int k = 16 * kb + 2 * m + odd;
                _mm256_storeu_si256((__m256i *)(dst + 32 * k),
                                    _mm256_permute2x128_si256(r07, r815, 0x20));
                _mm256_storeu_si256((__m256i *)(dst + 32 * (k + 8)),
                                    _mm256_permute2x128_si256(r07, r815, 0x31));
            }
    }
}

static void a2_pack_panels(inf_packed *p, const inf_weight *w, int64_t pi0, int64_t pi1) {
    const vrow *vr = vrow_for(w->t->type, p->kind);
    if (p->kind != INF_PACK_BF16 && p->kind != INF_PACK_F16 && !vr) {
        inf_pack_panels(p, w, pi0, pi1); /* no decoder here: the scalar reference */
        return;
    }
    const size_t gb = p->group_bytes;
    for (int64_t pi = pi0; pi < pi1; pi++) {
        const uint8_t *base = (const uint8_t *)w->t->data + (size_t)(INF_PANEL * pi) * w->row_bytes;
        uint8_t *out = p->data + (size_t)pi * (size_t)p->n_groups * gb;
        if (p->kind == INF_PACK_BF16 || p->kind == INF_PACK_F16) {
            for (int64_t g = 0; g < p->n_groups; g++)
                (p->kind == INF_PACK_BF16 ? bf16_group : f16_group)(out + (size_t)g * gb, base,
                                                                    w->row_bytes, g);
            continue;
        }
        const int U = vr->unit, group = p->group;
        _Alignas(32) uint8_t q[INF_PANEL][256];
        uint16_t A[16][INF_PANEL], B[16][INF_PANEL]; /* [group of the unit][row] */
        int8_t sc[INF_PANEL][16];
        const uint8_t *qp[INF_PANEL];
        for (int64_t u = 0; u < p->n_groups / U; u++) {
            for (int r = 0; r < INF_PANEL; r++)
                vr->fetch(base + (size_t)r * w->row_bytes, u, q[r], &A[0][r], &B[0][r], sc[r]);
            for (int gi = 0; gi < U; gi++) {
                for (int r = 0; r < INF_PANEL; r++)
                    qp[r] = q[r] + group * gi;
                emit_group(out + (size_t)(u * U + gi) * gb, p->kind, qp, A[gi], B[gi],
                           (const int8_t(*)[16])sc);
            }
        }
    }
}

void inf_kernels_fill_avx2_pack(inf_kernels *k) {
    k->pack_panels = a2_pack_panels;
}
