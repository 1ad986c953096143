/* AVX-512 kernels (F/BW/VL/DQ + BF16 + VNNI): packed integer and BF16
 * matmuls by VPDPBUSD / VDPBF16PS, activation quantization, row ops and
 * flash attention. Compiled with -mavx512*; only called after detection. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "backend/avx512_math.h"
#include "backend/cpu_features.h"
#include "backend/kernels.h"
#include "backend/delta.h"
#include "backend/q4ks_scales.h"
#include "util/err.h"
#include "util/half.h"

/* ---- f32 dot and dequantization ---------------------------------------------------------- */

static float a5_dot_f32(const float *a, const float *b, int n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static void a5_dequant_f16(float *dst, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m256i v = _mm256_maskz_loadu_epi16(m, h + i);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(v));
    }
}

static void a5_dequant_bf16(float *dst, const void *src, int64_t n) {
    const uint16_t *h = src; /* [n] */
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + i));
        _mm512_mask_storeu_ps(dst + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
}

static void a5_dequant_q8_0(float *dst, const void *src, int64_t n) {
    const inf_block_q8_0 *b = src; /* [n/32] */
    for (int64_t i = 0; i < n; i += 32, b++) {
        __m512 d = _mm512_set1_ps(inf_f16_to_f32(b->d));
        __m128i lo = _mm_loadu_si128((const __m128i *)b->qs);
        __m128i hi = _mm_loadu_si128((const __m128i *)(b->qs + 16));
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo))));
        _mm512_storeu_ps(dst + i + 16,
                         _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))));
    }
}

static void a5_dequant_q4_0(float *dst, const void *src, int64_t n) {
    const inf_block_q4_0 *b = src; /* [n/32] */
    const __m512i eight = _mm512_set1_epi32(8);
    for (int64_t i = 0; i < n; i += 32, b++) {
        __m512 d = _mm512_set1_ps(inf_f16_to_f32(b->d));
        __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
        __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, _mm512_set1_epi32(15)), eight);
        __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(d, _mm512_cvtepi32_ps(lo)));
        _mm512_storeu_ps(dst + i + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(hi)));
    }
}

/* ---- activation quantization ---------------------------------------------------------- */

static void a5_quantize_x(inf_xq *xq, const float *x, int t0, int t1, int what) {
    int64_t n = xq->n;
    for (int t = t0; t < t1; t++) {
        const float *xr = x + (size_t)t * (size_t)n;
        if (what & INF_XQ_BF16) {
            uint16_t *bf = xq->bf + (size_t)t * (size_t)n;
            for (int64_t i = 0; i < n; i += 16) {
                __mmask16 m = tail_mask(n - i);
                __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, xr + i));
                _mm256_mask_storeu_epi16(bf + i, m, (__m256i)h);
            }
        }
        if (!(what & INF_XQ_INT8)) continue;
        int8_t *q = xq->q + (size_t)t * (size_t)n;
        float *d = xq->d + (size_t)t * (size_t)(n / 32);
        int32_t *s16 = xq->s16 + (size_t)t * (size_t)(n / 16);
        for (int64_t b = 0; b < n / 32; b++) {
            __m512 v0 = _mm512_loadu_ps(xr + 32 * b), v1 = _mm512_loadu_ps(xr + 32 * b + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
            float db = amax / 127.0f, id = db > 0 ? 1.0f / db : 0.0f;
            /* A NaN or infinity in the block (x - x is not 0; max_ps may drop a
               NaN from amax): quantize it to zeros with a NaN scale, so the
               matmul's result is NaN (caught where logits are sampled) and no
               integer sum sees cvtps' 0x80000000. */
            const __m512 zero = _mm512_setzero_ps();
            if (_mm512_cmp_ps_mask(_mm512_sub_ps(v0, v0), zero, _CMP_NEQ_UQ) |
                _mm512_cmp_ps_mask(_mm512_sub_ps(v1, v1), zero, _CMP_NEQ_UQ))
                v0 = v1 = zero, db = NAN;
            __m512 vid = _mm512_set1_ps(id);
            __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
            __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
            _mm_storeu_si128((__m128i *)(q + 32 * b), _mm512_cvtsepi32_epi8(q0));
            _mm_storeu_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtsepi32_epi8(q1));
            s16[2 * b] = _mm512_reduce_add_epi32(q0);
            s16[2 * b + 1] = _mm512_reduce_add_epi32(q1);
            d[b] = db;
            if (what & INF_XQ_TILES) {
                size_t i =
                    ((size_t)(t / 32) * (size_t)(n / 32) + (size_t)b) * 32 + (size_t)(t % 32);
                xq->dT[i] = db;
                xq->sT[i] = s16[2 * b] + s16[2 * b + 1];
                memcpy(xq->qT + 32 * i, q + 32 * b, 32);
            }
        }
    }
}

/* ---- packed matmul: one panel (16 outputs) for TB <= 4 tokens --------------------------- */

static inline __m512i bcast4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* Decode streams each weight once from DRAM. The hardware prefetchers alone
 * keep too few lines in flight, so every group asks for its bytes twice
 * ahead: into L1 PREFETCH_L1 ahead and into L2 PREFETCH_L2 ahead (measured
 * on Sapphire Rapids, 2 threads, qwen3-0.6b tg128: against one L1 prefetch
 * 2 KiB ahead, +5-11 % Q4_K_M, +13 % Q6_K, +5 % Q8_0, +9 % BF16; one
 * prefetch at any distance from 0.5 to 8 KiB was slower). */
#define PREFETCH_L1 1024
#define PREFETCH_L2 4096
/* always_inline: GCC 12 judges a function of nothing but prefetches "const"
 * and drops calls to it that it has not inlined (it did so on AVX2) */
static inline __attribute__((always_inline)) void prefetch_at(const uint8_t *p, size_t bytes,
                                                              int l1, int l2) {
    for (size_t l = 0; l < bytes; l += 64) {
        if (l1 >= 0) _mm_prefetch((const char *)p + l1 + l, _MM_HINT_T0); /* l1 < 0: none */
        _mm_prefetch((const char *)p + l2 + l, _MM_HINT_T1);
    }
}
static inline __attribute__((always_inline)) void prefetch_ahead(const uint8_t *p, size_t bytes) {
    prefetch_at(p, bytes, PREFETCH_L1, PREFETCH_L2);
}

/* How a matmul prefetches its panels: every line into L1 l1 bytes ahead (l1
 * < 0: not) and into L2 l2 bytes ahead; or, with pages, into L2 only the
 * first line of each 4 KiB page l2 bytes ahead (inf_prefetch_pages), for the
 * panels read in order. */
typedef struct prefetch_plan {
    int l1, l2;
    bool pages;
} prefetch_plan;

/* panels read in order: all but the super-groups, which read their scales
   before their sub-groups and prefetch each line */
static inline __attribute__((always_inline)) void prefetch_group(const uint8_t *p, size_t bytes,
                                                                 const prefetch_plan pf) {
    if (pf.pages)
        inf_prefetch_pages(p + pf.l2, bytes);
    else
        prefetch_at(p, bytes, pf.l1, pf.l2);
}

/* Decode rows' plan (a matmul of at most DECODE_FAR_T rows). On AMD Zen 4
 * only into L2, 16 KiB ahead: against 1 and 4 KiB, 2 and 16 KiB gave +14 %
 * Q4_0 and Q4_K_M, +15 % Q8_0, +22 % Q6_K, +1 % BF16 tg128 (4 and 32 KiB the
 * same); dropping the L1 prefetch then gave Q8_0 +14 %, Q4_0 +2-4 %, the rest
 * within 2 %. One request per page instead of per line then gave BF16 tg64
 * +42-52 % and the other kinds read in order (F16 had none) +2-31 %, 25
 * rounds won of 25, where the super-group kinds' matmuls lost 2-40 % with it
 * and keep theirs per line (docs/PERFORMANCE.md, issue 19). Prompt rows keep 1 and 4 KiB per line:
 * the far distances cost them 2-4 % pp512 there. Set once, when the table is filled. */
#define DECODE_FAR_T 4
static prefetch_plan decode_pf = {PREFETCH_L1, PREFETCH_L2, false};

/* A decode matmul reads x once per 16-row panel, and between two reads of
 * one group's x a whole panel of weights streams through L1. Past its size
 * that evicts x, and each group's x comes back from L2. So each group also
 * loads the x of the groups 1/m, 2/m, ... of a panel further on, m = panel
 * bytes / X_TOUCH_SPAN rounded up, which keeps every x line's reuse distance
 * near X_TOUCH_SPAN; the sums do not change. Measured on AMD Zen 4 (2
 * threads, 28 layers of decode matmuls, alternated in one process against no
 * touches, GB/s): Q8_0 at qwen3-0.6b's shapes o 49.1 -> 52.0, down 48.7 ->
 * 54.5; Q8_0 n_in 2048 49.4 -> 52.7, 4096 49.0 -> 53.8; Q4_K 4096 41.9 ->
 * 46.0; BF16 n_in 1024 (m = 2) +7 %, but at 4096 m = 4 lost 6 % and m = 8
 * 12 %, so BF16 stops at 2 (docs/PERFORMANCE.md, issue 19). */
#define X_TOUCH_SPAN (16 << 10)
#define X_TOUCH_MIN (24 << 10) /* smaller panels leave x in L1 often enough */
#define X_TOUCH_MAX 16         /* positions at most */
#define X_TOUCH_MAX_BF16 2     /* BF16's: more lost more than they gained */
typedef struct x_touch {
    int m;                    /* positions, 0 (none) or 2..X_TOUCH_MAX */
    int64_t off[X_TOUCH_MAX]; /* off[j], j >= 1: group j/m of a panel on */
} x_touch;

static x_touch x_touch_for(const inf_packed *pk, int T) {
    x_touch xt = {0};
    const size_t panel = (size_t)pk->n_groups * pk->group_bytes;
    if (T > DECODE_FAR_T || panel <= X_TOUCH_MIN) return xt; /* prompt rows reread panels */
    size_t m = (panel + X_TOUCH_SPAN - 1) / X_TOUCH_SPAN,
           most = pk->kind == INF_PACK_BF16 || pk->kind == INF_PACK_F16 ? X_TOUCH_MAX_BF16
                                                                        : X_TOUCH_MAX;
    xt.m = (int)(m < most ? m : most);
    for (int j = 1; j < xt.m; j++)
        xt.off[j] = pk->n_groups * j / xt.m;
    return xt;
}

/* a load that only brings p's line into L1 (and keeps it recently used) */
static inline __attribute__((always_inline)) void touch(const void *p) {
    (void)*(const volatile char *)p;
}

/* for x_touch: the x of group h + off[j] of a panel of groups of k (32, or a
 * Q6_K super-group's 256): its int8 lines, and its s16 and d lines where a
 * new one starts (a line holds 256 / k and 512 / k groups of them) */
static inline __attribute__((always_inline)) void
touch_int(const x_touch *xt, int64_t g, int64_t n_groups, const int k, const int8_t *const *xqr,
          const int32_t *const *sr, const float *const *dr, const int TB) {
    for (int j = 1; j < xt->m; j++) {
        int64_t h = g + xt->off[j];
        if (h >= n_groups) h -= n_groups;
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            for (int b = 0; b < k; b += 64)
                touch(xqr[t] + k * h + b);
            if (h % (256 / k) == 0) touch(sr[t] + k / 16 * h);
            if (h % (512 / k) == 0) touch(dr[t] + k / 32 * h);
        }
    }
}

/* a + the sums of a 16-k sub-group's 4 chunks of unsigned values q (chunk i
 * lane r = q[r][4i..4i+3]) with the activations xg[0..15] */
static inline __attribute__((always_inline)) __m512i dot16(__m512i a, const __m512i q[4],
                                                           const int8_t *xg) {
    a = _mm512_dpbusd_epi32(a, q[0], bcast4(xg));
    a = _mm512_dpbusd_epi32(a, q[1], bcast4(xg + 4));
    a = _mm512_dpbusd_epi32(a, q[2], bcast4(xg + 8));
    return _mm512_dpbusd_epi32(a, q[3], bcast4(xg + 12));
}

/* the IQ4 kind's 16 values + 128 (IQ4_NL's 1..241) in every 128-bit lane, for VPSHUFB */
static inline __m512i iq4_table_u8(const int8_t values[16]) {
    const __m128i v = _mm_loadu_si128((const __m128i *)values);
    return _mm512_broadcast_i32x4(_mm_xor_si128(v, _mm_set1_epi8((char)0x80)));
}

/* acc[t] += d_w d_x (sum - 128 sum q): group g's sums of unsigned weights
 * stored as w + 128 (Q8_0, IQ4's values), scales d_w as f16 at dp */
static inline __attribute__((always_inline)) void
scale_offset128(__m512 *acc, const __m512i *ai, const uint8_t *dp, const int32_t *const *sr,
                const float *const *dr, int64_t g, const int TB) {
    __m512 A = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dp));
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        int32_t s = sr[t][2 * g] + sr[t][2 * g + 1];
        __m512i v = _mm512_sub_epi32(ai[t], _mm512_set1_epi32(128 * s));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), A), _mm512_set1_ps(dr[t][g]),
                                 acc[t]);
    }
}

/* ai[t] = the sums of 4-bit group g's unsigned values (4 nibble chunks at p)
 * with row t's x; the high nibbles in place (16 q) into their own sums,
 * divided by 16 at the end: exact, one op less per chunk than shifting them down */
static inline __attribute__((always_inline)) void
nibble_sums(__m512i *ai, const uint8_t *p, const int8_t *const *xqr, int64_t g, const int TB) {
    const __m512i m0f = _mm512_set1_epi8(0x0f);
    __m512i ah[4];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        ai[t] = ah[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512i w = _mm512_loadu_si512(p + 64 * c);
        __m512i lo = _mm512_and_si512(w, m0f);
        __m512i hi16 = _mm512_andnot_si512(m0f, w);
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            ai[t] = _mm512_dpbusd_epi32(ai[t], lo, bcast4(xqr[t] + 32 * g + 8 * c));
            ah[t] = _mm512_dpbusd_epi32(ah[t], hi16, bcast4(xqr[t] + 32 * g + 8 * c + 4));
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        ai[t] = _mm512_add_epi32(ai[t], _mm512_srai_epi32(ah[t], 4));
}

/* The same for 5-bit group g (the Q5_K kind's 4 nibble chunks and chunk of
 * fifth bits at p): the fifth bits moved to bit 4 of each byte, of the low
 * nibbles (bit c of the fifth-bit chunk) from H << 4 shifted down once per
 * chunk, of the high ones (bit 4 + c) from H itself */
static inline __attribute__((always_inline)) void
five_sums(__m512i *ai, const uint8_t *p, const int8_t *const *xqr, int64_t g, const int TB) {
    const __m512i m0f = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
    __m512i H = _mm512_loadu_si512(p + 256), L = _mm512_slli_epi16(H, 4);
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        ai[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512i w = _mm512_loadu_si512(p + 64 * c);
        __m512i lo = _mm512_or_si512(_mm512_and_si512(w, m0f), _mm512_and_si512(L, m10));
        __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(w, 4), m0f),
                                     _mm512_and_si512(H, m10));
        L = _mm512_srli_epi16(L, 1);
        H = _mm512_srli_epi16(H, 1);
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++) {
            ai[t] = _mm512_dpbusd_epi32(ai[t], lo, bcast4(xqr[t] + 32 * g + 8 * c));
            ai[t] = _mm512_dpbusd_epi32(ai[t], hi, bcast4(xqr[t] + 32 * g + 8 * c + 4));
        }
    }
}

/* acc[t] += d_x (A sum - B sum x): group g's sums of offset-form weights
 * (w = A q - B; the Q4_K and Q5_K kinds and their super-block forms) */
static inline __attribute__((always_inline)) void scale_ab(__m512 *acc, const __m512i *ai, __m512 A,
                                                           __m512 B, const int32_t *const *sr,
                                                           const float *const *dr, int64_t g,
                                                           const int TB) {
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        int32_t s = sr[t][2 * g] + sr[t][2 * g + 1];
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ai[t]), A),
                                 _mm512_set1_ps(dr[t][g]), acc[t]);
        acc[t] = _mm512_fnmadd_ps(B, _mm512_set1_ps(dr[t][g] * (float)s), acc[t]);
    }
}

/* KIND is a constant at every call (PANEL_INT_OF): each kind's loop is its
 * own, its registers allocated for it alone (a shared loop over a switch
 * spilled Q8_0's prompt sums as other kinds' constants came in) */
static inline __attribute__((always_inline)) void
panel_int(float *y, int64_t ldy, const inf_packed *pk, const uint8_t *panel, const inf_xq *xq,
          int t0, const int TB, const prefetch_plan pf, const x_touch *xt,
          const inf_pack_kind KIND) {
    const int64_t n = xq->n;
    const int8_t *xqr[4];
    const float *dr[4];
    const int32_t *sr[4];
    __m512 acc[4];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        xqr[t] = xq->q + (size_t)(t0 + t) * (size_t)n;
        dr[t] = xq->d + (size_t)(t0 + t) * (size_t)(n / 32);
        sr[t] = xq->s16 + (size_t)(t0 + t) * (size_t)(n / 16);
        acc[t] = _mm512_setzero_ps();
    }
    const __m512i m0f = _mm512_set1_epi8(0x0f);
    /* IQ4S: its values + 64 (unsigned for VPDPBUSD), in every 128-bit lane for VPSHUFB */
    const __m512i t4v = _mm512_broadcast_i32x4(
        _mm_add_epi8(_mm_loadu_si128((const __m128i *)pk->values), _mm_set1_epi8(64)));
    const __m512i t4n = iq4_table_u8(pk->values); /* IQ4 */
    const size_t gb = pk->group_bytes;
    for (int64_t g = 0; g < pk->n_groups; g++) {
        const uint8_t *gp = panel + (size_t)g * gb;
        const bool super = KIND == INF_PACK_Q6_K || KIND == INF_PACK_Q4_KS ||
                           KIND == INF_PACK_Q5_KS || KIND == INF_PACK_Q3_KS ||
                           KIND == INF_PACK_Q2_KS || KIND == INF_PACK_IQ4S;
        if (!super) prefetch_group(gp, gb, pf); /* super-groups: per sub-group, per line */
        if (xt->m && super)
            touch_int(xt, g, pk->n_groups, 256, xqr, sr, dr, TB);
        else if (xt->m)
            touch_int(xt, g, pk->n_groups, 32, xqr, sr, dr, TB);
        __m512i ai[4];
#pragma GCC unroll 4
        for (int t = 0; t < TB; t++)
            ai[t] = _mm512_setzero_si512();
        switch (KIND) {
        case INF_PACK_Q8_0: {
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m512i w = _mm512_loadu_si512(gp + 64 * c);
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    ai[t] = _mm512_dpbusd_epi32(ai[t], w, bcast4(xqr[t] + 32 * g + 4 * c));
            }
            scale_offset128(acc, ai, gp + 512, sr, dr, g, TB);
            break;
        }
        case INF_PACK_Q4_0:
        case INF_PACK_Q4_K: {
            nibble_sums(ai, gp, xqr, g, TB);
            __m512 A = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 256)));
            if (KIND == INF_PACK_Q4_0) {
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++) {
                    int32_t s = sr[t][2 * g] + sr[t][2 * g + 1];
                    __m512i v = _mm512_sub_epi32(ai[t], _mm512_set1_epi32(8 * s));
                    acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(v), A),
                                             _mm512_set1_ps(dr[t][g]), acc[t]);
                }
            } else {
                __m512 B = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 288)));
                scale_ab(acc, ai, A, B, sr, dr, g, TB);
            }
            break;
        }
        case INF_PACK_Q6_K: {
            /* a super-group: 16 sub-groups of 16 k, each with its own scale */
            const __m512 d = q6k_d(gp);
            for (int sg = 0; sg < 16; sg++) {
                prefetch_at(gp + INF_Q6K_PREFETCH_PART * sg, INF_Q6K_PREFETCH_PART, pf.l1, pf.l2);
                __m512i q[4];
                q6k_values(gp + INF_Q6K_SUB_BYTES * sg, q);
                const int64_t k16 = 16 * g + sg; /* the sub-group's index along k */
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++) {
                    ai[t] = dot16(_mm512_set1_epi32(-32 * sr[t][k16]), q, xqr[t] + 16 * k16);
                }
                const __m512 A = q6k_scale(gp, sg, d);
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(ai[t]), A),
                                             _mm512_set1_ps(dr[t][k16 / 2]), acc[t]);
            }
            break;
        }
        case INF_PACK_IQ4S: {
            /* a super-group: 16 sub-groups of 16 k, w = d sc values[q]; the
               table's values + 64 (unsigned for VPDPBUSD) looked up by VPSHUFB,
               and the two sub-groups of each x block of 32 summed with their
               scales in int32 (|sum| < 2^23, exact), converted once and scaled
               by d d_x, as Q3_KS's */
            const __m512 d =
                _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + INF_IQ4S_D_OFF)));
            for (int h = 0; h < 8; h++) {
                __m512i si[2][4];
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {
                    const int sg = 2 * h + u;
                    prefetch_at(gp + INF_IQ4S_PREFETCH_PART * sg, INF_IQ4S_PREFETCH_PART, pf.l1,
                                pf.l2);
                    __m512i q[4];
                    iq4s_values(gp + INF_IQ4S_SUB_BYTES * sg, t4v, q);
                    const __m512i s32 = _mm512_cvtepi8_epi32(
                        _mm_loadu_si128((const __m128i *)(gp + INF_IQ4S_SC_OFF + 16 * sg)));
                    const int64_t k16 = 16 * g + sg; /* the sub-group's index along k */
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        const __m512i a =
                            dot16(_mm512_set1_epi32(-64 * sr[t][k16]), q, xqr[t] + 16 * k16);
                        si[u][t] = _mm512_mullo_epi32(a, s32);
                    }
                }
                const int64_t k32 = 8 * g + h;
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    acc[t] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(si[0][t], si[1][t])),
                                        _mm512_mul_ps(d, _mm512_set1_ps(dr[t][k32])), acc[t]);
            }
            break;
        }
        case INF_PACK_Q3_KS: {
            /* a super-group: 16 sub-groups of 16 k, w = d (sc - 32) (q - 4); the
               16 scales unpacked at once, and the two sub-groups of each x block
               of 32 summed with their scales in int32 (|sum| < 2^21, exact),
               converted once and scaled by d d_x */
            const __m512 d = q3ks_d(gp);
            _Alignas(64) int8_t sc[256];
            q3ks_scales(gp, sc);
            for (int h = 0; h < 8; h++) {
                __m512i si[2][4];
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {
                    const int sg = 2 * h + u;
                    prefetch_at(gp + INF_Q3KS_PREFETCH_PART * sg, INF_Q3KS_PREFETCH_PART, pf.l1,
                                pf.l2);
                    __m512i q[4];
                    q3ks_values(gp + INF_Q3KS_SUB_BYTES * sg, q);
                    const __m512i s32 =
                        _mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(sc + 16 * sg)));
                    const int64_t k16 = 16 * g + sg; /* the sub-group's index along k */
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        const __m512i a =
                            dot16(_mm512_set1_epi32(-4 * sr[t][k16]), q, xqr[t] + 16 * k16);
                        si[u][t] = _mm512_mullo_epi32(a, s32);
                    }
                }
                const int64_t k32 = 8 * g + h;
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    acc[t] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(si[0][t], si[1][t])),
                                        _mm512_mul_ps(d, _mm512_set1_ps(dr[t][k32])), acc[t]);
            }
            break;
        }
        case INF_PACK_Q2_KS: {
            /* a super-group: 16 sub-groups of 16 k, w = (d sc) q - dmin m. Per x
               block of 32 the two sub-groups' sums (|sum| <= 6096) are paired
               in 16-bit halves and times their scales in one VPMADDWD, their
               mins times the sums of x the same way; both converted once */
            const __m512 d =
                _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + INF_Q2KS_D_OFF)));
            const __m512 dmin =
                _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + INF_Q2KS_DMIN_OFF)));
            const __m512i m15 = _mm512_set1_epi16(0x0f);
            for (int h = 0; h < 8; h++) {
                const __m512i sm = _mm512_cvtepu8_epi16(
                    _mm256_loadu_si256((const __m256i *)(gp + INF_Q2KS_SC_OFF + 32 * h)));
                const __m512i sc = _mm512_and_si512(sm, m15), mn = _mm512_srli_epi16(sm, 4);
                __m512i a[2][4];
#pragma GCC unroll 2
                for (int u = 0; u < 2; u++) {
                    const int sg = 2 * h + u;
                    prefetch_at(gp + INF_Q2KS_PREFETCH_PART * sg, INF_Q2KS_PREFETCH_PART, pf.l1,
                                pf.l2);
                    __m512i q[4];
                    bit_pairs(gp + INF_Q2KS_SUB_BYTES * sg, q);
#pragma GCC unroll 4
                    for (int t = 0; t < TB; t++) {
                        a[u][t] = dot16(_mm512_setzero_si512(), q, xqr[t] + 16 * (16 * g + sg));
                    }
                }
                const int64_t k32 = 8 * g + h;
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++) {
                    const __m512i pair = _mm512_mask_blend_epi16(0xAAAAAAAAu, a[0][t],
                                                                 _mm512_slli_epi32(a[1][t], 16));
                    const uint32_t s2 =
                        ((uint32_t)sr[t][2 * k32] & 0xFFFFu) | (uint32_t)sr[t][2 * k32 + 1] << 16;
                    const __m512i si = _mm512_madd_epi16(pair, sc),
                                  mi = _mm512_madd_epi16(mn, _mm512_set1_epi32((int)s2));
                    const __m512 v = _mm512_fmsub_ps(_mm512_cvtepi32_ps(si), d,
                                                     _mm512_mul_ps(_mm512_cvtepi32_ps(mi), dmin));
                    acc[t] = _mm512_fmadd_ps(v, _mm512_set1_ps(dr[t][k32]), acc[t]);
                }
            }
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
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(
                (const __m256i *)(gp + (five ? INF_Q5KS_D_OFF : INF_Q4KS_D_OFF))));
            const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(
                (const __m256i *)(gp + (five ? INF_Q5KS_DMIN_OFF : INF_Q4KS_DMIN_OFF))));
#pragma GCC unroll 8
            for (int sg = 0; sg < 8; sg++) {
                prefetch_at(gp + part * sg, part, pf.l1, pf.l2);
                __m128i sc, m;
                q4ks_scale_min(P, sg, &sc, &m);
                const __m512 A = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
                const __m512 B = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
                const int64_t k32 = 8 * g + sg; /* the sub-group's index along k */
                if (five)
                    five_sums(ai, gp + sub * sg, xqr, k32, TB);
                else
                    nibble_sums(ai, gp + sub * sg, xqr, k32, TB);
                scale_ab(acc, ai, A, B, sr, dr, k32, TB);
            }
            break;
        }
        case INF_PACK_Q5_K: {
            five_sums(ai, gp, xqr, g, TB);
            __m512 A = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 320)));
            __m512 B = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 352)));
            scale_ab(acc, ai, A, B, sr, dr, g, TB);
            break;
        }
        case INF_PACK_IQ4: {
            /* indices looked up (VPSHUFB) into the values + 128, unsigned for
               VPDPBUSD; the offset is removed as Q8_0's is */
            const __m512i tbl = t4n;
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m512i w = _mm512_loadu_si512(gp + 64 * c);
                __m512i lo = _mm512_shuffle_epi8(tbl, _mm512_and_si512(w, m0f));
                __m512i hi =
                    _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(w, 4), m0f));
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++) {
                    ai[t] = _mm512_dpbusd_epi32(ai[t], lo, bcast4(xqr[t] + 32 * g + 8 * c));
                    ai[t] = _mm512_dpbusd_epi32(ai[t], hi, bcast4(xqr[t] + 32 * g + 8 * c + 4));
                }
            }
            scale_offset128(acc, ai, gp + 256, sr, dr, g, TB);
            break;
        }
        default:
            break;
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        _mm512_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy, acc[t]);
}

static inline __attribute__((always_inline)) void
panel_bf16(float *y, int64_t ldy, const inf_packed *pk, const uint8_t *panel, const inf_xq *xq,
           int t0, const int TB, const prefetch_plan pf, const x_touch *xt) {
    const int64_t n = xq->n;
    const uint16_t *xr[4];
    __m512 acc[4], acc2[4];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        xr[t] = xq->bf + (size_t)(t0 + t) * (size_t)n;
        acc[t] = _mm512_setzero_ps();
        acc2[t] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < pk->n_groups; g++) {
        const uint8_t *gp = panel + (size_t)g * 1024;
        prefetch_group(gp, 1024, pf);
        for (int j = 1; j < xt->m; j++) { /* x_touch: a group's bf16 x is one line */
            int64_t h = g + xt->off[j];
            if (h >= pk->n_groups) h -= pk->n_groups;
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++)
                touch(xr[t] + 32 * h);
        }
#pragma GCC unroll 8
        for (int c = 0; c < 16; c += 2) {
            __m512bh w0 = (__m512bh)_mm512_loadu_si512(gp + 64 * c);
            __m512bh w1 = (__m512bh)_mm512_loadu_si512(gp + 64 * c + 64);
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                acc[t] = _mm512_dpbf16_ps(acc[t], w0, (__m512bh)bcast4(xr[t] + 32 * g + 2 * c));
                acc2[t] =
                    _mm512_dpbf16_ps(acc2[t], w1, (__m512bh)bcast4(xr[t] + 32 * g + 2 * c + 2));
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        _mm512_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy, _mm512_add_ps(acc[t], acc2[t]));
}

/* F16 panels: each k's 16 values widened to f32 (VCVTPH2PS) times the
 * activation as it is, in four accumulators per token (k mod 4: the FMA
 * latency), summed at the end in one order for every token count */
static inline __attribute__((always_inline)) void
panel_f16(float *y, int64_t ldy, const inf_packed *pk, const uint8_t *panel, const inf_xq *xq,
          int t0, const int TB, const prefetch_plan pf, const x_touch *xt) {
    const int64_t n = xq->n;
    const float *xr[4];
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++) {
        xr[t] = xq->x + (size_t)(t0 + t) * (size_t)n;
        for (int u = 0; u < 4; u++)
            acc[t][u] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < pk->n_groups; g++) {
        const uint8_t *gp = panel + (size_t)g * 1024;
        prefetch_group(gp, 1024, pf);
        for (int j = 1; j < xt->m; j++) { /* x_touch: a group's f32 x is two lines */
            int64_t h = g + xt->off[j];
            if (h >= pk->n_groups) h -= pk->n_groups;
#pragma GCC unroll 4
            for (int t = 0; t < TB; t++) {
                touch(xr[t] + 32 * h);
                touch(xr[t] + 32 * h + 16);
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < 32; c += 4) {
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                const __m512 w =
                    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 32 * (c + u))));
#pragma GCC unroll 4
                for (int t = 0; t < TB; t++)
                    acc[t][u] =
                        _mm512_fmadd_ps(w, _mm512_set1_ps(xr[t][32 * g + c + u]), acc[t][u]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < TB; t++)
        _mm512_storeu_ps(y + (size_t)(t0 + t) * (size_t)ldy,
                         _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]),
                                       _mm512_add_ps(acc[t][2], acc[t][3])));
}

/* panel_int for one kind, as a function of PANEL_ROWS's arguments */
#define PANEL_INT_OF(name, K)                                                                      \
    static inline __attribute__((always_inline)) void name(                                        \
        float *y, int64_t ldy, const inf_packed *pk, const uint8_t *panel, const inf_xq *xq,       \
        int t0, const int TB, const prefetch_plan pf, const x_touch *xt) {                         \
        panel_int(y, ldy, pk, panel, xq, t0, TB, pf, xt, K);                                       \
    }
PANEL_INT_OF(panel_q8_0, INF_PACK_Q8_0)
PANEL_INT_OF(panel_q4_0, INF_PACK_Q4_0)
PANEL_INT_OF(panel_q4_k, INF_PACK_Q4_K)
PANEL_INT_OF(panel_q5_k, INF_PACK_Q5_K)
PANEL_INT_OF(panel_iq4, INF_PACK_IQ4)
PANEL_INT_OF(panel_q6_k, INF_PACK_Q6_K)
PANEL_INT_OF(panel_q4_ks, INF_PACK_Q4_KS)
PANEL_INT_OF(panel_q5_ks, INF_PACK_Q5_KS)
PANEL_INT_OF(panel_q3_ks, INF_PACK_Q3_KS)
PANEL_INT_OF(panel_q2_ks, INF_PACK_Q2_KS)
PANEL_INT_OF(panel_iq4s, INF_PACK_IQ4S)
#undef PANEL_INT_OF

/* tokens t .. T-1 of one panel by fn: four at a time, then the rest at once */
#define PANEL_ROWS(fn)                                                                             \
    do {                                                                                           \
        for (; t + 4 <= T; t += 4)                                                                 \
            fn(yp, ldy, pk, panel, xq, t, 4, pf, &xt);                                             \
        if (T - t == 3) fn(yp, ldy, pk, panel, xq, t, 3, pf, &xt);                                 \
        if (T - t == 2) fn(yp, ldy, pk, panel, xq, t, 2, pf, &xt);                                 \
        if (T - t == 1) fn(yp, ldy, pk, panel, xq, t, 1, pf, &xt);                                 \
    } while (0)

/* panels p0 .. p1 - 1 for T rows, prefetched as pf says */
static inline __attribute__((always_inline)) void
matmul_panels(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T, int64_t p0,
              int64_t p1, const prefetch_plan pf) {
    size_t pbytes = (size_t)pk->n_groups * pk->group_bytes;
    const x_touch xt = x_touch_for(pk, T);
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *panel = pk->data + (size_t)p * pbytes;
        float *yp = y + 16 * p;
        int t = 0;
        if (pk->kind == INF_PACK_BF16)
            PANEL_ROWS(panel_bf16);
        else if (pk->kind == INF_PACK_F16)
            PANEL_ROWS(panel_f16);
        else
            switch (pk->kind) {
            case INF_PACK_Q8_0:
                PANEL_ROWS(panel_q8_0);
                break;
            case INF_PACK_Q4_0:
                PANEL_ROWS(panel_q4_0);
                break;
            case INF_PACK_Q4_K:
                PANEL_ROWS(panel_q4_k);
                break;
            case INF_PACK_Q5_K:
                PANEL_ROWS(panel_q5_k);
                break;
            case INF_PACK_IQ4:
                PANEL_ROWS(panel_iq4);
                break;
            case INF_PACK_Q6_K:
                PANEL_ROWS(panel_q6_k);
                break;
            case INF_PACK_Q4_KS:
                PANEL_ROWS(panel_q4_ks);
                break;
            case INF_PACK_Q5_KS:
                PANEL_ROWS(panel_q5_ks);
                break;
            case INF_PACK_Q3_KS:
                PANEL_ROWS(panel_q3_ks);
                break;
            case INF_PACK_Q2_KS:
                PANEL_ROWS(panel_q2_ks);
                break;
            case INF_PACK_IQ4S:
                PANEL_ROWS(panel_iq4s);
                break;
            default:
                break;
            }
    }
}

/* prompt rows' plan a constant, so their loops hold no branch on it (one
   cost Q8_0 prompts 4-6 %) */
static void a5_matmul_packed(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T,
                             int64_t p0, int64_t p1) {
    if (T > DECODE_FAR_T)
        matmul_panels(y, ldy, pk, xq, T, p0, p1, (prefetch_plan){PREFETCH_L1, PREFETCH_L2, false});
    else
        matmul_panels(y, ldy, pk, xq, T, p0, p1, decode_pf);
}

#undef PANEL_ROWS

/* ---- row ops ------------------------------------------------------------------------------ */

static void a5_rmsnorm_row(float *out, const float *x, const float *w, int n, float eps) {
    __m512 ss = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        ss = _mm512_fmadd_ps(v, v, ss);
    }
    float inv = 1.0f / sqrtf(_mm512_reduce_add_ps(ss) / (float)n + eps);
    __m512 vi = _mm512_set1_ps(inv);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vi);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i)));
    }
}

static void a5_rope_row(float *x, int n_heads, int head_dim, int n_rot, const float *c,
                        const float *s) {
    int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i += 16) {
            __mmask16 m = tail_mask(half - i);
            __m512 a = _mm512_maskz_loadu_ps(m, v + i), b = _mm512_maskz_loadu_ps(m, v + half + i);
            __m512 cc = _mm512_maskz_loadu_ps(m, c + i), sn = _mm512_maskz_loadu_ps(m, s + i);
            _mm512_mask_storeu_ps(v + i, m, _mm512_fmsub_ps(a, cc, _mm512_mul_ps(b, sn)));
            _mm512_mask_storeu_ps(v + half + i, m, _mm512_fmadd_ps(b, cc, _mm512_mul_ps(a, sn)));
        }
    }
}

static void a5_swiglu(float *out, const float *gate, const float *up, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        __m512 r = _mm512_div_ps(_mm512_mul_ps(g, u), _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(out + i, m, r);
    }
}

static void a5_silu(float *y, const float *x, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 g = _mm512_maskz_loadu_ps(m, x + i);
        __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(g, _mm512_add_ps(one, e)));
    }
}

static void a5_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

/* mul then add, as the reference: the same bits */
static void a5_moe_sum(float *y, const float *x, const float *w, int k, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < k; j++)
            acc =
                _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(w[j]),
                                                 _mm512_maskz_loadu_ps(m, x + (int64_t)j * n + i)));
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), acc));
    }
}

static void a5_softmax(float *x, int n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += 16)
        mx = _mm512_max_ps(
            mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - i), x + i));
    __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        __m512 e =
            _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm)));
        sum = _mm512_add_ps(sum, e);
        _mm512_mask_storeu_ps(x + i, m, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
    }
}

/* delta.h's step, 16 columns of the state at a time: the same operations in
 * the same order per element (mul, then add), so the reference's bits. */
static void a5_delta_step(float *S, float *o, float *u, const float *qn, const float *kn,
                          const float *v, float decay, float beta, int dk, int dv) {
    if (dv % 16) {
        inf_delta_step_ref(S, o, u, qn, kn, v, decay, beta, dk, dv);
        return;
    }
    const __m512 vd = _mm512_set1_ps(decay), vb = _mm512_set1_ps(beta);
    for (int j = 0; j < dv; j += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *sp = S + (size_t)i * dv + j;
            __m512 sv = _mm512_mul_ps(_mm512_loadu_ps(sp), vd);
            _mm512_storeu_ps(sp, sv);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(sv, _mm512_set1_ps(kn[i])));
        }
        _mm512_storeu_ps(u + j, _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + j), acc), vb));
    }
    for (int j = 0; j < dv; j += 16) {
        const __m512 uj = _mm512_loadu_ps(u + j);
        __m512 acc = _mm512_setzero_ps();
        for (int i = 0; i < dk; i++) {
            float *sp = S + (size_t)i * dv + j;
            __m512 sv =
                _mm512_add_ps(_mm512_loadu_ps(sp), _mm512_mul_ps(_mm512_set1_ps(kn[i]), uj));
            _mm512_storeu_ps(sp, sv);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(sv, _mm512_set1_ps(qn[i])));
        }
        _mm512_storeu_ps(o + j, acc);
    }
}

/* ---- attention -------------------------------------------------------------------------- */

/* Lane sums of 16 vectors, in two steps so that few vectors are live at once
 * (summing 16 at the end had kept 32 of them, spilled, for two rows, and ran
 * its shuffles back to back on the one port that has them: qwen3-0.6b f16
 * attention at depth 8192 read 26.5 GB/s with that and 29 with no sums at
 * all). Each halving of two vectors is a blend (either vector port), a
 * shuffle and an add.
 *
 * fold4: four vectors into one whose 128-bit block b holds four partial sums
 * of v[{0,2,1,3}[b]]. */
static inline __m512 fold4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    /* blocks 0,1: partials of the first vector, blocks 2,3: of the second */
    __m512 c01 =
        _mm512_add_ps(_mm512_mask_blend_ps(0xff00, a0, a1), _mm512_shuffle_f32x4(a0, a1, 0x4e));
    __m512 c23 =
        _mm512_add_ps(_mm512_mask_blend_ps(0xff00, a2, a3), _mm512_shuffle_f32x4(a2, a3, 0x4e));
    /* block 0: c01's blocks 0+1, 1: c23's 1+0, 2: c01's 2+3, 3: c23's 3+2 */
    const __m512i idx =
        _mm512_setr_epi32(4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27);
    return _mm512_add_ps(_mm512_mask_blend_ps(0xf0f0, c01, c23),
                         _mm512_permutex2var_ps(c01, idx, c23));
}

/* fold16: lane i = the sum of vector i, out of fold4's results d[g] of vectors 4g..4g+3. */
static inline __m512 fold16(const __m512 d[4]) {
    /* per block: lanes 0,1 partials of the first vector's key there, 2,3 of the second's */
    __m512 e01 = _mm512_add_ps(_mm512_mask_blend_ps(0xcccc, d[0], d[1]),
                               _mm512_shuffle_ps(d[0], d[1], 0x4e));
    __m512 e23 = _mm512_add_ps(_mm512_mask_blend_ps(0xcccc, d[2], d[3]),
                               _mm512_shuffle_ps(d[2], d[3], 0x4e));
    /* per block, lane l: the sum for d[{0,2,1,3}[l]] */
    __m512 f = _mm512_add_ps(_mm512_mask_blend_ps(0xaaaa, e01, e23),
                             _mm512_permute_ps(_mm512_mask_blend_ps(0xaaaa, e23, e01), 0xb1));
    /* lane 4b + l holds vector 4 * {0,2,1,3}[l] + {0,2,1,3}[b] */
    const __m512i idx = _mm512_setr_epi32(0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15);
    return _mm512_permutexvar_ps(idx, f);
}

/* acc[r] += sum_j p[r][j] v[j] for RB rows, j < nj (p rows ld floats apart): V rows loaded
 * once, shared by the rows;
 * pfb > 0: each row's pfb bytes are prefetched ahead (prefetch_ahead). */
static inline __attribute__((always_inline)) void
pv_rows(float *acc, const float *st, int ld, int r0, const int RB, const void *const *vrow, int nj,
        const int hd, const inf_dtype VT, size_t pfb) {
    const int nv = hd / 16;
    __m512 av[2][16];
#pragma GCC unroll 2
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            av[r][i] = _mm512_load_ps(acc + (size_t)(r0 + r) * hd + 16 * i);
    for (int j = 0; j < nj; j++) {
        const void *v = vrow[j];
        if (pfb) prefetch_ahead(v, pfb);
        __m512 p0 = _mm512_set1_ps(st[(size_t)r0 * ld + j]);
        __m512 p1 = RB > 1 ? _mm512_set1_ps(st[(size_t)(r0 + 1) * ld + j]) : p0;
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++) {
            __m512 vv = kv_load16(VT, v, 16 * i);
            av[0][i] = _mm512_fmadd_ps(p0, vv, av[0][i]);
            if (RB > 1) av[1][i] = _mm512_fmadd_ps(p1, vv, av[1][i]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            _mm512_store_ps(acc + (size_t)(r0 + r) * hd + 16 * i, av[r][i]);
}

/* Scores of RB rows (1 or 2) against the tile's keys read in place (few
 * rows: a transposed copy would cost more than it saves). Each key vector is
 * loaded, and converted, once for the RB rows, 4 keys at a time; the dot
 * products' lanes are summed by fold4 per 4 keys and fold16 per 16. A score is the same
 * chain of FMAs over the head's vectors in order whatever RB is, so a row's
 * bits do not depend on its neighbour. s is [RB][ld] (ld a multiple of 16 and
 * at least nk); the lanes past nk of its last vector are left 0; pfb > 0: each
 * key row's pfb bytes are prefetched ahead. */
static inline __attribute__((always_inline)) void
scores_rows(float *s, int ld, const float *const *q, const int RB, const void *const *krow, int nk,
            const int hd, const inf_dtype KT, size_t pfb) {
    const int nv = hd / 16;
    __m512 qv[2][16];
#pragma GCC unroll 2
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            qv[r][i] = _mm512_loadu_ps(q[r] + 16 * i);
    for (int kb = 0; kb < nk; kb += 16) {
        __m512 d[2][4]; /* per row, fold4 of keys kb + j4 .. kb + j4 + 3 */
#pragma GCC unroll 4
        for (int j4 = 0; j4 < 16; j4 += 4) {
            __m512 acc[2][4];
            const void *kp[4];
#pragma GCC unroll 4
            for (int jj = 0; jj < 4; jj++) {
                /* a key past nk repeats the last one; its score is dropped below */
                int j = kb + j4 + jj < nk ? kb + j4 + jj : nk - 1;
                kp[jj] = krow[j];
#pragma GCC unroll 2
                for (int r = 0; r < RB; r++)
                    acc[r][jj] = _mm512_setzero_ps();
            }
            if (kb + j4 < nk) {
                if (pfb)
#pragma GCC unroll 4
                    for (int jj = 0; jj < 4; jj++)
                        prefetch_ahead(kp[jj], pfb);
#pragma GCC unroll 16
                for (int i = 0; i < nv; i++)
#pragma GCC unroll 4
                    for (int jj = 0; jj < 4; jj++) {
                        const __m512 k = kv_load16(KT, kp[jj], 16 * i);
#pragma GCC unroll 2
                        for (int r = 0; r < RB; r++)
                            acc[r][jj] = _mm512_fmadd_ps(qv[r][i], k, acc[r][jj]);
                    }
            }
#pragma GCC unroll 4
            for (int jj = 0; jj < 4; jj++)
#pragma GCC unroll 2
                for (int r = 0; r < RB; r++)
                    if (kb + j4 + jj >= nk) acc[r][jj] = _mm512_setzero_ps();
#pragma GCC unroll 2
            for (int r = 0; r < RB; r++)
                d[r][j4 / 4] = fold4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
        }
#pragma GCC unroll 2
        for (int r = 0; r < RB; r++)
            _mm512_store_ps(s + (size_t)r * ld + kb, fold16(d[r]));
    }
}

/* A decode work item (few rows), over tiles of keys: scores of each row
 * against the tile's keys, the online-softmax update per row, and P.V for 2
 * rows at a time. A row inactive in a tile (all its keys before it) gets
 * p = 0 there, so its sums are unchanged; each row's arithmetic is fixed by
 * its own keys. KT/VT: the K/V types the body reads in place (converting as
 * it loads); a stored type other than these is first converted to f32 rows
 * in scratch (KT/VT = F32), which gives the same bits, as the conversion is
 * exact. Reading in place keeps f32 copies of the tile out of L1 (they cost
 * more than half of a step at depth).
 *
 * Read in place, a tile is INF_ATTN_DECODE_BLOCK (256) keys: for a
 * 128-wide f16 head the item reads a 64 KiB run of K, then one of V, where
 * 64-key tiles had switched between the two streams every 16 KiB (a plain
 * read of that pattern measured 25 GB/s against 27 for the long runs, 2
 * threads). Converted rows go through scratch 64 keys at a time. */
static inline __attribute__((always_inline)) void
attn_body(const inf_attn_rows *it, const inf_kv_view *kv, const int hd, float scale, float *scratch,
          const inf_dtype KT, const inf_dtype VT) {
    const int R = it->R, nv = hd / 16;
    const inf_dtype kt = kv->k_type, vt = kv->v_type;
    const bool in_place = kt == KT && vt == VT;
    const int TS = in_place ? INF_ATTN_DECODE_BLOCK : INF_KV_TILE; /* keys per tile */
    /* [R][TS] scores, then probabilities (64-byte aligned: the scratch need not be) */
    float *st = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *ml = st + (size_t)R * TS; /* [R][2] running max, sum */
    float *acc = ml + 2 * (size_t)R; /* [R][hd] */
    acc = (float *)(((uintptr_t)acc + 63) & ~(uintptr_t)63);
    /* rows not stored as f32: this tile's K and V as floats (the room
     * inf_attn_scratch_floats keeps for two 64-key tiles) */
    float *kc = acc + (size_t)R * hd, *vc = kc + (size_t)INF_KV_TILE * hd;
    for (int r = 0; r < R; r++) {
        ml[2 * r] = -INFINITY;
        ml[2 * r + 1] = 0;
        memset(acc + (size_t)r * hd, 0, sizeof(float) * (size_t)hd);
    }
    const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    const void *krow[INF_ATTN_DECODE_BLOCK], *vrow[INF_ATTN_DECODE_BLOCK];
    /* rows read in place are prefetched ahead in their stream by the first
       row's pass, as the weight kernels do: a KV head's rows of a cache block
       are contiguous (kv_view.h). qwen3-0.6b Q8_0 tg at depth 8192: 16.2 tok/s,
       against 13.4 with the next tile's rows asked for all at once (a burst that
       stalled on the fill buffers) and 14.3 with no prefetch (PERFORMANCE.md,
       session 12). */
    const size_t kbytes = kt == KT ? inf_kv_type_bytes(kt, hd) : 0,
                 vbytes = vt == VT ? inf_kv_type_bytes(vt, hd) : 0;
    for (int t0 = it->k0; t0 < it->max_lim; t0 += TS) {
        const int nk = it->max_lim - t0 < TS ? it->max_lim - t0 : TS;
        int r = 0;
        if (in_place) {
            /* one address per run of the tile inside a cache block, then a
               stride (the per-key address arithmetic had cost 14 % of the
               kernel's cycles) */
            for (int j = 0; j < nk;) {
                const int bs = kv->block_size, run0 = bs - ((t0 + j) & (bs - 1));
                const int run = run0 < nk - j ? run0 : nk - j;
                const uint8_t *ks = inf_kv_k_at(kv, t0 + j, it->kv_head);
                const uint8_t *vs = inf_kv_v_at(kv, t0 + j, it->kv_head);
                for (int e = 0; e < run; e++, j++) {
                    krow[j] = ks + (size_t)e * kbytes;
                    vrow[j] = vs + (size_t)e * vbytes;
                }
            }
        } else {
            for (int j = 0; j < nk; j++) {
                const void *ks = inf_kv_k_at(kv, t0 + j, it->kv_head);
                const void *vs = inf_kv_v_at(kv, t0 + j, it->kv_head);
                if (kt != KT) kv_row_to_f32(kc + (size_t)j * hd, kt, ks, hd);
                if (vt != VT) kv_row_to_f32(vc + (size_t)j * hd, vt, vs, hd);
                krow[j] = kt == KT ? ks : kc + (size_t)j * hd;
                vrow[j] = vt == VT ? vs : vc + (size_t)j * hd;
            }
        }
        /* two rows at a time where the head size leaves room for both in registers */
        if (hd <= 128)
            for (; r + 2 <= R; r += 2)
                if (it->lim[r] > t0 || it->lim[r + 1] > t0)
                    scores_rows(st + (size_t)r * TS, TS, it->q + r, 2, krow, nk, hd, KT,
                                r == 0 ? kbytes : 0);
        for (; r < R; r++)
            if (it->lim[r] > t0)
                scores_rows(st + (size_t)r * TS, TS, it->q + r, 1, krow, nk, hd, KT,
                            r == 0 ? kbytes : 0);
        /* online softmax update; st becomes p (0 outside the row's keys) */
        for (r = 0; r < R; r++) {
            float *s = st + (size_t)r * TS;
            const int nkr = it->lim[r] - t0 < nk ? it->lim[r] - t0 : nk;
            if (nkr <= 0) {
                memset(s, 0, sizeof(float) * (size_t)nk);
                continue;
            }
            /* scaled scores, -inf past the row's keys, and their max */
            __m512 vmax = ninf;
            for (int c = 0; c < nk; c += 16) {
                __m512 sv = _mm512_mask_blend_ps(tail_mask(nkr - c), ninf,
                                                 _mm512_mul_ps(_mm512_load_ps(s + c), vscale));
                _mm512_store_ps(s + c, sv);
                vmax = _mm512_max_ps(vmax, sv);
            }
            const float tmax = _mm512_reduce_max_ps(vmax);
            float m = ml[2 * r], l = ml[2 * r + 1];
            if (tmax > m) {
                __m512 corr = exp512(_mm512_set1_ps(m - tmax));
                float *a = acc + (size_t)r * hd;
#pragma GCC unroll 16
                for (int i = 0; i < nv; i++)
                    _mm512_store_ps(a + 16 * i, _mm512_mul_ps(_mm512_load_ps(a + 16 * i), corr));
                l *= _mm512_cvtss_f32(corr);
                m = tmax;
            }
            __m512 vm = _mm512_set1_ps(m), lsum = _mm512_setzero_ps();
            for (int c = 0; c < nk; c += 16) {
                __m512 pc = _mm512_maskz_mov_ps(tail_mask(nkr - c),
                                                exp512(_mm512_sub_ps(_mm512_load_ps(s + c), vm)));
                lsum = _mm512_add_ps(lsum, pc);
                _mm512_store_ps(s + c, pc);
            }
            ml[2 * r] = m;
            ml[2 * r + 1] = l + _mm512_reduce_add_ps(lsum);
        }
        for (r = 0; r + 2 <= R; r += 2)
            pv_rows(acc, st, TS, r, 2, vrow, nk, hd, VT, r == 0 ? vbytes : 0);
        for (; r < R; r++)
            pv_rows(acc, st, TS, r, 1, vrow, nk, hd, VT, r == 0 ? vbytes : 0);
    }
    for (int r = 0; r < R; r++) {
        if (it->part) {
            float *pr = it->part + (size_t)r * (hd + 2);
            memcpy(pr, acc + (size_t)r * hd, sizeof(float) * (size_t)hd);
            pr[hd] = ml[2 * r];
            pr[hd + 1] = ml[2 * r + 1];
            continue;
        }
        __m512 inv = _mm512_set1_ps(1.0f / ml[2 * r + 1]);
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            _mm512_storeu_ps(it->out[r] + 16 * i,
                             _mm512_mul_ps(_mm512_load_ps(acc + (size_t)r * hd + 16 * i), inv));
    }
}

/* A prefill work item, 32 rows at a time held in the lanes of two
 * vectors. Per 64-key tile, K and V are copied into contiguous f32 scratch
 * (converted once for all the item's rows). Scores come out as
 * S[j][row] = sum_d q^T[d][row] k[j][d]: one broadcast of k[j][d] serves 32
 * rows, and with rows in lanes the online softmax is vertical (running max
 * and sum per lane, no reductions across lanes). P.V then adds p[j][row] v[j] into each row's
 * accumulator. Keys at or past a row's limit get p = 0; every row sees key 0 (lim >= 1), so its
 * running max is finite from the first tile on. */
static inline __attribute__((always_inline)) void attn_lanes(const inf_attn_rows *it,
                                                             const inf_kv_view *kv, const int hd,
                                                             float scale, float *scratch) {
    const int R = it->R, nb = (R + 31) / 32, nv = hd / 16;
    float *qt = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63); /* [nb][hd][32] */
    float *acc = qt + (size_t)nb * 32 * hd;                            /* [nb * 32][hd] */
    float *kc = acc + (size_t)nb * 32 * hd;                            /* [64][hd] keys */
    float *vc = kc + (size_t)INF_KV_TILE * hd;                         /* [64][hd] values */
    float *st = vc + (size_t)INF_KV_TILE * hd;                         /* [64][32] s, then p */
    float *ml = st + 32 * INF_KV_TILE;                                 /* [nb][2][32] m, l */
    int32_t *limv = (int32_t *)(ml + 64 * (size_t)nb);                 /* [nb * 32] */
    for (int b = 0; b < nb; b++)
        for (int r = 0; r < 32; r++) {
            int rr = 32 * b + r;
            float *col = qt + (size_t)b * hd * 32 + r;
            for (int d = 0; d < hd; d++)
                col[(size_t)d * 32] = rr < R ? it->q[rr][d] : 0.0f;
            limv[rr] = rr < R ? it->lim[rr] : 1;
            ml[64 * b + r] = -INFINITY;
            ml[64 * b + 32 + r] = 0;
        }
    memset(acc, 0, sizeof(float) * (size_t)nb * 32 * hd);
    const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    for (int t0 = 0; t0 < it->max_lim; t0 += INF_KV_TILE) {
        const int nk = it->max_lim - t0 < INF_KV_TILE ? it->max_lim - t0 : INF_KV_TILE;
        for (int j = 0; j < INF_KV_TILE; j++) {
            float *kd = kc + (size_t)j * hd, *vd = vc + (size_t)j * hd;
            if (j < nk) {
                kv_row_to_f32(kd, kv->k_type, inf_kv_k_at(kv, t0 + j, it->kv_head), hd);
                kv_row_to_f32(vd, kv->v_type, inf_kv_v_at(kv, t0 + j, it->kv_head), hd);
            } else if (j < ((nk + 7) & ~7)) {
                memset(kd, 0, sizeof(float) * (size_t)hd); /* keys the 8-wide loop reads */
            }
        }
        for (int b = 0; b < nb; b++) {
            const int32_t *lb = limv + 32 * b;
            int lo = lb[0], hi = lb[0];
            for (int r = 1; r < 32; r++) {
                lo = lb[r] < lo ? lb[r] : lo;
                hi = lb[r] > hi ? lb[r] : hi;
            }
            if (hi <= t0) continue; /* no row of the block sees this tile */
            const float *q0 = qt + (size_t)b * hd * 32;
            /* scores, 8 keys x 32 rows at a time */
            for (int j0 = 0; j0 < nk; j0 += 8) {
                __m512 a[8][2];
#pragma GCC unroll 8
                for (int jj = 0; jj < 8; jj++)
                    a[jj][0] = a[jj][1] = _mm512_setzero_ps();
                const float *k0 = kc + (size_t)j0 * hd;
                for (int d = 0; d < hd; d++) {
                    __m512 qa = _mm512_load_ps(q0 + (size_t)d * 32);
                    __m512 qb = _mm512_load_ps(q0 + (size_t)d * 32 + 16);
#pragma GCC unroll 8
                    for (int jj = 0; jj < 8; jj++) {
                        __m512 kb = _mm512_set1_ps(k0[(size_t)jj * hd + d]);
                        a[jj][0] = _mm512_fmadd_ps(qa, kb, a[jj][0]);
                        a[jj][1] = _mm512_fmadd_ps(qb, kb, a[jj][1]);
                    }
                }
#pragma GCC unroll 8
                for (int jj = 0; jj < 8; jj++) {
                    _mm512_store_ps(st + (size_t)(j0 + jj) * 32, a[jj][0]);
                    _mm512_store_ps(st + (size_t)(j0 + jj) * 32 + 16, a[jj][1]);
                }
            }
            /* online softmax, per lane */
            const bool full = lo >= t0 + nk;
            __m512i l0 = _mm512_loadu_si512(lb), l1 = _mm512_loadu_si512(lb + 16);
            __m512 m0 = _mm512_load_ps(ml + 64 * b), m1 = _mm512_load_ps(ml + 64 * b + 16);
            __m512 s0, s1, tm0 = ninf, tm1 = ninf;
            for (int j = 0; j < nk; j++) {
                s0 = _mm512_mul_ps(_mm512_load_ps(st + (size_t)j * 32), vscale);
                s1 = _mm512_mul_ps(_mm512_load_ps(st + (size_t)j * 32 + 16), vscale);
                if (!full) {
                    __m512i kj = _mm512_set1_epi32(t0 + j);
                    s0 = _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(l0, kj), ninf, s0);
                    s1 = _mm512_mask_blend_ps(_mm512_cmpgt_epi32_mask(l1, kj), ninf, s1);
                }
                _mm512_store_ps(st + (size_t)j * 32, s0);
                _mm512_store_ps(st + (size_t)j * 32 + 16, s1);
                tm0 = _mm512_max_ps(tm0, s0);
                tm1 = _mm512_max_ps(tm1, s1);
            }
            __mmask16 up0 = _mm512_cmp_ps_mask(tm0, m0, _CMP_GT_OQ);
            __mmask16 up1 = _mm512_cmp_ps_mask(tm1, m1, _CMP_GT_OQ);
            __m512 n0 = _mm512_mask_blend_ps(up0, m0, tm0), n1 = _mm512_mask_blend_ps(up1, m1, tm1);
            /* corr = e^(m - m'), exactly 1 where the max did not move */
            __m512 c0 =
                _mm512_mask_blend_ps(up0, _mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(m0, n0)));
            __m512 c1 =
                _mm512_mask_blend_ps(up1, _mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(m1, n1)));
            __m512 ls0 = _mm512_mul_ps(_mm512_load_ps(ml + 64 * b + 32), c0);
            __m512 ls1 = _mm512_mul_ps(_mm512_load_ps(ml + 64 * b + 48), c1);
            for (int j = 0; j < nk; j++) {
                __m512 sj0 = _mm512_load_ps(st + (size_t)j * 32);
                __m512 sj1 = _mm512_load_ps(st + (size_t)j * 32 + 16);
                __m512 p0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(sj0, ninf, _CMP_NEQ_OQ),
                                                exp512(_mm512_sub_ps(sj0, n0)));
                __m512 p1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(sj1, ninf, _CMP_NEQ_OQ),
                                                exp512(_mm512_sub_ps(sj1, n1)));
                _mm512_store_ps(st + (size_t)j * 32, p0);
                _mm512_store_ps(st + (size_t)j * 32 + 16, p1);
                ls0 = _mm512_add_ps(ls0, p0);
                ls1 = _mm512_add_ps(ls1, p1);
            }
            _mm512_store_ps(ml + 64 * b, n0);
            _mm512_store_ps(ml + 64 * b + 16, n1);
            _mm512_store_ps(ml + 64 * b + 32, ls0);
            _mm512_store_ps(ml + 64 * b + 48, ls1);
            float corr[32] __attribute__((aligned(64)));
            _mm512_store_ps(corr, c0);
            _mm512_store_ps(corr + 16, c1);
            const int rows = R - 32 * b < 32 ? R - 32 * b : 32;
            if (up0 | up1)
                for (int r = 0; r < rows; r++) {
                    if (corr[r] == 1.0f) continue;
                    float *a = acc + (size_t)(32 * b + r) * hd;
                    __m512 cr = _mm512_set1_ps(corr[r]);
#pragma GCC unroll 16
                    for (int i = 0; i < nv; i++)
                        _mm512_store_ps(a + 16 * i, _mm512_mul_ps(_mm512_load_ps(a + 16 * i), cr));
                }
            /* P.V, 2 rows at a time */
            for (int r = 0; r < rows; r += 2) {
                const bool two = r + 1 < rows;
                float *a0 = acc + (size_t)(32 * b + r) * hd, *a1 = a0 + hd;
                __m512 av0[16], av1[16];
#pragma GCC unroll 16
                for (int i = 0; i < nv; i++) {
                    av0[i] = _mm512_load_ps(a0 + 16 * i);
                    av1[i] = two ? _mm512_load_ps(a1 + 16 * i) : _mm512_setzero_ps();
                }
                for (int j = 0; j < nk; j++) {
                    const float *v = vc + (size_t)j * hd;
                    __m512 p0 = _mm512_set1_ps(st[(size_t)j * 32 + r]);
                    __m512 p1 = _mm512_set1_ps(st[(size_t)j * 32 + r + 1]);
#pragma GCC unroll 16
                    for (int i = 0; i < nv; i++) {
                        __m512 vv = _mm512_load_ps(v + 16 * i);
                        av0[i] = _mm512_fmadd_ps(p0, vv, av0[i]);
                        av1[i] = _mm512_fmadd_ps(p1, vv, av1[i]);
                    }
                }
#pragma GCC unroll 16
                for (int i = 0; i < nv; i++) {
                    _mm512_store_ps(a0 + 16 * i, av0[i]);
                    if (two) _mm512_store_ps(a1 + 16 * i, av1[i]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) {
        int b = r / 32;
        __m512 inv = _mm512_set1_ps(1.0f / ml[64 * b + 32 + r % 32]);
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            _mm512_storeu_ps(it->out[r] + 16 * i,
                             _mm512_mul_ps(_mm512_load_ps(acc + (size_t)r * hd + 16 * i), inv));
    }
}

/* A decode item of the common head sizes with K and V of one type reads
 * them in place; other items convert what is not f32 (the same bits). */
static inline __attribute__((always_inline)) void decode_body(const inf_attn_rows *it,
                                                              const inf_kv_view *kv, const int hd,
                                                              float scale, float *scratch) {
    const inf_dtype t =
        kv->k_type == kv->v_type && (hd == 64 || hd == 128 || hd == 256) ? kv->k_type : INF_F32;
    if (t == INF_F16)
        attn_body(it, kv, hd, scale, scratch, INF_F16, INF_F16);
    else if (t == INF_BF16)
        attn_body(it, kv, hd, scale, scratch, INF_BF16, INF_BF16);
    else if (t == INF_Q8_0)
        attn_body(it, kv, hd, scale, scratch, INF_Q8_0, INF_Q8_0);
    else
        attn_body(it, kv, hd, scale, scratch, INF_F32, INF_F32);
}

/* head_dim is a compile-time constant in each body so q and the accumulators stay in registers */
static void a5_attn_rows(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                         float *scratch) {
#define BODY(HD)                                                                                   \
    case HD:                                                                                       \
        if (it->prefill)                                                                           \
            attn_lanes(it, kv, HD, scale, scratch);                                                \
        else                                                                                       \
            decode_body(it, kv, HD, scale, scratch);                                               \
        return;
    switch (hd) {
        BODY(64)
        BODY(128)
        BODY(256)
        BODY(16)
        BODY(32)
        BODY(96)
    }
#undef BODY
    inf_kernels g;
    inf_kernels_fill_generic(&g);
    g.attn_rows(it, kv, hd, scale, scratch);
}

/* Materialized attention (see kernels.h): the scores with the same 16-key
 * dot products as the decode path, one exact softmax per row over all its
 * keys, then P.V row by row. */
static inline __attribute__((always_inline)) void
materialized_body(float *out, const float *q, const inf_kv_view *kv, int pos0, int T, int h,
                  const inf_attn_shape *s, float *S, const int hd) {
    const int group = s->n_head / s->n_head_kv, kv_head = h / group, nv = hd / 16;
    const size_t qw = (size_t)s->n_head * hd, ldS = (size_t)(pos0 + T + 15) & ~(size_t)15;
    const float *krow[16];
    for (int t = 0; t < T; t++) {
        const float *qr = q + (size_t)t * qw + (size_t)h * hd;
        float *Sr = S + (size_t)t * ldS;
        const int lim = pos0 + t + 1;
        for (int j0 = 0; j0 < lim; j0 += 16) {
            int nk = lim - j0 < 16 ? lim - j0 : 16;
            for (int j = 0; j < nk; j++)
                krow[j] = inf_kv_k_at(kv, j0 + j, kv_head);
            float tmp[16] __attribute__((aligned(64)));
            scores_rows(tmp, 16, &qr, 1, (const void *const *)krow, nk, hd, INF_F32, 0);
            _mm512_storeu_ps(Sr + j0, _mm512_mul_ps(_mm512_load_ps(tmp), _mm512_set1_ps(s->scale)));
        }
        a5_softmax(Sr, lim);
    }
    for (int t = 0; t < T; t++) {
        const float *Sr = S + (size_t)t * ldS;
        __m512 a[16];
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            a[i] = _mm512_setzero_ps();
        for (int j = 0; j < pos0 + t + 1; j++) {
            const float *v = inf_kv_v_at(kv, j, kv_head);
            __m512 p = _mm512_set1_ps(Sr[j]);
#pragma GCC unroll 16
            for (int i = 0; i < nv; i++)
                a[i] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16 * i), a[i]);
        }
        float *o = out + (size_t)t * qw + (size_t)h * hd;
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            _mm512_storeu_ps(o + 16 * i, a[i]);
    }
}

static void a5_attn_materialized(float *out, const float *q, const inf_kv_view *kv, int pos0, int T,
                                 int h, const inf_attn_shape *s, float *S) {
    switch (s->head_dim) {
    case 64:
        materialized_body(out, q, kv, pos0, T, h, s, S, 64);
        return;
    case 128:
        materialized_body(out, q, kv, pos0, T, h, s, S, 128);
        return;
    }
    INF_ASSERT(!"materialized attention: head_dim 64 or 128 only");
}

void inf_kernels_fill_avx512(inf_kernels *k) {
    const bool amd = inf_cpu_features_get()->amd;
    decode_pf = (prefetch_plan){amd ? -1 : PREFETCH_L1, inf_decode_l2_ahead(), amd};
    k->dot_f32 = a5_dot_f32;
    k->types[INF_F16].dequant = a5_dequant_f16;
    k->types[INF_BF16].dequant = a5_dequant_bf16;
    k->types[INF_Q8_0].dequant = a5_dequant_q8_0;
    k->types[INF_Q4_0].dequant = a5_dequant_q4_0;
    k->has_packed = 1;
    k->bf16_as_f32 = 0; /* vdpbf16ps against bf16 activations */
    k->pack_kinds = INF_PACK_KINDS_ALL;
    k->quantize_x = a5_quantize_x;
    k->matmul_packed = a5_matmul_packed;
    k->rmsnorm_row = a5_rmsnorm_row;
    k->rope_row = a5_rope_row;
    k->swiglu = a5_swiglu;
    k->silu = a5_silu;
    k->add = a5_add;
    k->moe_sum = a5_moe_sum;
    k->softmax = a5_softmax;
    k->delta_step = a5_delta_step;
    k->attn_rows = a5_attn_rows;
    k->attn_materialized = a5_attn_materialized;
}
