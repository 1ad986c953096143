/* Decode attention on AVX2: every row of a decode item (the query heads of
 * one GQA group over one key block) in one walk over the keys.
 *
 * Per 64-key tile the K and V rows are read in place, in their stored types,
 * and each 8-float piece is loaded and converted once per pair of rows (once
 * per item for Qwen3-0.6B's groups of 2; kern_avx2.c's row kernel converted
 * and read them once per row):
 *   scores   rows in pairs, 4 keys at a time (one row alone: 8 keys): one
 *            accumulator per (row, key) over head_dim, so 8 FMA chains are in
 *            flight, then the keys' lanes are summed together by one hadd
 *            tree (no horizontal sum per key);
 *   softmax  per row, 8 keys per vector: the tile's max, e^(s - m) in lanes,
 *            the sum of p;
 *   P.V      rows in pairs over 32 dims (one row: 64 dims), the tile's keys in
 *            order: one converted V piece feeds both rows' accumulators.
 * Before a tile is worked on, one word of each of its K and V lines is
 * loaded: independent loads, so the core has the whole tile in flight at
 * once (software prefetches spread over the tile kept too few lines in
 * flight and measured slower, when a head's rows were a cache row apart;
 * they are now contiguous within a cache block, kv_view.h).
 *
 * A row's result depends only on its own query, its own limit and the keys:
 * a key's score is the same dot product and the same lane tree whether its
 * row is paired or alone and whichever keys share its group (reduce4 and
 * reduce8 add a key's lanes in one order); p.V adds the keys in key order per
 * element either way; keys at and past a row's limit are never added (a pair
 * whose rows see different key counts in a tile runs as two single rows).
 * So a row comes out the same with any other rows, on any thread. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/avx2_math.h"
#include "backend/kernels.h"

static void (*g_other_attn)(const inf_attn_rows *, const inf_kv_view *, int, float, float *);

/* lane j of the result = the sum of the 8 lanes of a[j], j < 4, in the tree
 * ((0+1)+(2+3)) + ((4+5)+(6+7)) */
static inline __m128 reduce4(const __m256 a[4]) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* the same for 8 vectors, each lane summed in reduce4's tree */
static inline __m256 reduce8(const __m256 a[8]) {
    const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20),
                         _mm256_permute2f128_ps(h0, h1, 0x31));
}

/* Reads one word of each 64-byte line of bytes at p, folded into *x: plain
 * loads that depend on nothing, so the core has all of a tile's lines in
 * flight at once. */
static inline void touch_row(uint64_t *x, const void *p, size_t bytes) {
    for (size_t c = 0; c < bytes; c += 64) {
        uint64_t w;
        memcpy(&w, (const char *)p + c, sizeof w);
        *x ^= w;
    }
}

/* Unscaled scores s0[j] (and s1[j] with RB = 2) of q0 (q1) against the keys
 * krow[0..nj), nj rounded up to the group (krow holds zero rows past the
 * tile's keys). */
static inline __attribute__((always_inline)) void scores(float *s0, float *s1, const float *q0,
                                                         const float *q1, const void *const *krow,
                                                         int nj, const int hd, const inf_dtype kt,
                                                         const int RB) {
    const int G = RB == 2 ? 4 : 8; /* keys per group: 8 accumulators */
    for (int jg = 0; jg < nj; jg += G) {
        __m256 a[8];
#pragma GCC unroll 8
        for (int x = 0; x < 8; x++)
            a[x] = _mm256_setzero_ps();
        for (int i = 0; i < hd; i += 8) {
            const __m256 qa = _mm256_loadu_ps(q0 + i);
            const __m256 qb = RB == 2 ? _mm256_loadu_ps(q1 + i) : qa;
#pragma GCC unroll 8
            for (int jj = 0; jj < G; jj++) {
                const __m256 kv = a2_kv_load8(kt, krow[jg + jj], i);
                a[jj] = _mm256_fmadd_ps(qa, kv, a[jj]);
                if (RB == 2) a[4 + jj] = _mm256_fmadd_ps(qb, kv, a[4 + jj]);
            }
        }
        if (RB == 2) {
            _mm_storeu_ps(s0 + jg, reduce4(a));
            _mm_storeu_ps(s1 + jg, reduce4(a + 4));
        } else {
            _mm256_storeu_ps(s0 + jg, reduce8(a));
        }
    }
}

/* The online-softmax step of one row over its nkr (>= 1) keys of a tile:
 * s[64] (unscaled scores) becomes p (0 from nkr on), the running max *m and
 * sum *l move on; returns the factor its accumulator is to be scaled by. */
static inline float softmax_step(float *s, int nkr, float scale, float *m, float *l) {
    const int nvec = (nkr + 7) / 8;
    const __m256 vscale = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 tm = ninf;
    for (int c = 0; c < nvec; c++) {
        const __m256 keep = _mm256_castsi256_ps(
            _mm256_cmpgt_epi32(_mm256_set1_epi32(nkr - 8 * c), lane)); /* key < nkr */
        const __m256 sv =
            _mm256_blendv_ps(ninf, _mm256_mul_ps(_mm256_loadu_ps(s + 8 * c), vscale), keep);
        _mm256_storeu_ps(s + 8 * c, sv);
        tm = _mm256_max_ps(tm, sv);
    }
    __m128 t4 = _mm_max_ps(_mm256_castps256_ps128(tm), _mm256_extractf128_ps(tm, 1));
    t4 = _mm_max_ps(t4, _mm_movehl_ps(t4, t4));
    t4 = _mm_max_ss(t4, _mm_movehdup_ps(t4));
    const float tmax = _mm_cvtss_f32(t4);
    float corr = 1.0f;
    if (tmax > *m) {
        corr = expf(*m - tmax);
        *l *= corr;
        *m = tmax;
    }
    const __m256 vm = _mm256_set1_ps(*m);
    __m256 ls = _mm256_setzero_ps();
    for (int c = 0; c < nvec; c++) {
        const __m256 sv = _mm256_loadu_ps(s + 8 * c);
        const __m256 p =
            _mm256_and_ps(_mm256_cmp_ps(sv, ninf, _CMP_NEQ_OQ), exp256(_mm256_sub_ps(sv, vm)));
        _mm256_storeu_ps(s + 8 * c, p);
        ls = _mm256_add_ps(ls, p);
    }
    __m128 l4 = _mm_add_ps(_mm256_castps256_ps128(ls), _mm256_extractf128_ps(ls, 1));
    l4 = _mm_add_ps(l4, _mm_movehl_ps(l4, l4));
    l4 = _mm_add_ss(l4, _mm_movehdup_ps(l4));
    *l += _mm_cvtss_f32(l4);
    return corr;
}

/* acc_r[d .. d + 8 NV) = acc_r c_r + sum_{j < nj} p_r[j] vrow[j][d..], keys in
 * order, for RB rows (acc0/p0/c0, acc1/p1/c1). */
static inline __attribute__((always_inline)) void
pv_chunk(float *acc0, float *acc1, const float *p0, const float *p1, float c0, float c1,
         const void *const *vrow, int nj, int d, const inf_dtype vt, const int RB, const int NV) {
    __m256 a0[8], a1[8];
    const __m256 vc0 = _mm256_set1_ps(c0), vc1 = _mm256_set1_ps(c1);
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
        a0[v] = _mm256_mul_ps(_mm256_loadu_ps(acc0 + d + 8 * v), vc0);
        if (RB == 2) a1[v] = _mm256_mul_ps(_mm256_loadu_ps(acc1 + d + 8 * v), vc1);
    }
    for (int j = 0; j < nj; j++) {
        const __m256 pa = _mm256_broadcast_ss(p0 + j);
        const __m256 pb = RB == 2 ? _mm256_broadcast_ss(p1 + j) : pa;
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            const __m256 vv = a2_kv_load8(vt, vrow[j], d + 8 * v);
            a0[v] = _mm256_fmadd_ps(pa, vv, a0[v]);
            if (RB == 2) a1[v] = _mm256_fmadd_ps(pb, vv, a1[v]);
        }
    }
#pragma GCC unroll 8
    for (int v = 0; v < NV; v++) {
        _mm256_storeu_ps(acc0 + d + 8 * v, a0[v]);
        if (RB == 2) _mm256_storeu_ps(acc1 + d + 8 * v, a1[v]);
    }
}

/* P.V over the whole head for RB rows: chunks of 8 accumulators, then single vectors */
static inline __attribute__((always_inline)) void
pv_rows(float *acc0, float *acc1, const float *p0, const float *p1, float c0, float c1,
        const void *const *vrow, int nj, const int hd, const inf_dtype vt, const int RB) {
    const int W = RB == 2 ? 32 : 64; /* dims per chunk */
    int d = 0;
    for (; d + W <= hd; d += W)
        pv_chunk(acc0, acc1, p0, p1, c0, c1, vrow, nj, d, vt, RB, W / 8);
    for (; d < hd; d += 8)
        pv_chunk(acc0, acc1, p0, p1, c0, c1, vrow, nj, d, vt, RB, 1);
}

/* The walk, for K type kt and V type vt. Scratch: per row 64 scores and hd
 * accumulators, a zero row, 64 K and 64 V row addresses (inside
 * inf_attn_scratch_floats's by_row term). */
static inline __attribute__((always_inline)) void
attn_decode(const inf_attn_rows *it, const inf_kv_view *kv, const int hd, float scale,
            float *scratch, const inf_dtype kt, const inf_dtype vt) {
    const int R = it->R;
    float *st = (float *)(((uintptr_t)scratch + 31) & ~(uintptr_t)31); /* [R][64] */
    float *acc = st + (size_t)R * INF_KV_TILE;                         /* [R][hd] */
    float *zero = acc + (size_t)R * hd;             /* [hd]: a zero row of any type (all bits 0) */
    const void **krow = (const void **)(zero + hd); /* [64] */
    const void **vrow = krow + INF_KV_TILE;         /* [64] */
    float ml[2 * INF_ATTN_MAX_R];                   /* running max, sum per row */
    memset(acc, 0, sizeof(float) * (size_t)R * hd);
    memset(zero, 0, sizeof(float) * (size_t)hd);
    for (int r = 0; r < R; r++) {
        ml[2 * r] = -INFINITY;
        ml[2 * r + 1] = 0;
    }
    const size_t kbytes = inf_kv_type_bytes(kt, hd), vbytes = inf_kv_type_bytes(vt, hd);
    uint64_t touched = 0;
    for (int t0 = it->k0; t0 < it->max_lim; t0 += INF_KV_TILE) {
        const int nk = it->max_lim - t0 < INF_KV_TILE ? it->max_lim - t0 : INF_KV_TILE;
        const int nk8 = (nk + 7) & ~7;
        /* The tile's rows, touched before they are used: the whole tile in
         * flight at once (measured: PERFORMANCE.md, sessions 8 and 11). */
        for (int j = 0; j < nk; j++) {
            krow[j] = inf_kv_k_at(kv, t0 + j, it->kv_head);
            vrow[j] = inf_kv_v_at(kv, t0 + j, it->kv_head);
            touch_row(&touched, krow[j], kbytes);
            touch_row(&touched, vrow[j], vbytes);
        }
        for (int j = nk; j < nk8; j++)
            krow[j] = vrow[j] = zero;
        for (int r = 0; r < R;) {
            const int nkr = it->lim[r] - t0 < nk ? it->lim[r] - t0 : nk;
            const int nkr1 = r + 1 < R ? (it->lim[r + 1] - t0 < nk ? it->lim[r + 1] - t0 : nk) : 0;
            if (nkr <= 0) { /* this row's keys ended before the tile */
                r++;
                continue;
            }
            float *s0 = st + (size_t)r * INF_KV_TILE, *a0 = acc + (size_t)r * hd;
            if (r + 1 < R && nkr1 == nkr) {
                float *s1 = s0 + INF_KV_TILE, *a1 = a0 + hd;
                scores(s0, s1, it->q[r], it->q[r + 1], krow, (nkr + 3) & ~3, hd, kt, 2);
                const float c0 = softmax_step(s0, nkr, scale, &ml[2 * r], &ml[2 * r + 1]);
                const float c1 = softmax_step(s1, nkr, scale, &ml[2 * r + 2], &ml[2 * r + 3]);
                pv_rows(a0, a1, s0, s1, c0, c1, vrow, nkr, hd, vt, 2);
                r += 2;
            } else {
                scores(s0, NULL, it->q[r], NULL, krow, (nkr + 7) & ~7, hd, kt, 1);
                const float c0 = softmax_step(s0, nkr, scale, &ml[2 * r], &ml[2 * r + 1]);
                pv_rows(a0, NULL, s0, NULL, c0, c0, vrow, nkr, hd, vt, 1);
                r++;
            }
        }
    }
    __asm__ __volatile__("" ::"r"(touched)); /* the touching loads are not dead code */
    for (int r = 0; r < R; r++) {
        const float *a = acc + (size_t)r * hd;
        if (it->part) {
            float *pr = it->part + (size_t)r * (hd + 2);
            memcpy(pr, a, sizeof(float) * (size_t)hd);
            pr[hd] = ml[2 * r];
            pr[hd + 1] = ml[2 * r + 1];
            continue;
        }
        const __m256 inv = _mm256_set1_ps(1.0f / ml[2 * r + 1]);
        for (int i = 0; i < hd; i += 8)
            _mm256_storeu_ps(it->out[r] + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), inv));
    }
}

/* one body per (K type, V type) pair; head_dim folded for the model shapes */
#define BODY(KT, VT)                                                                               \
    static void decode_##KT##_##VT(const inf_attn_rows *it, const inf_kv_view *kv, int hd,         \
                                   float scale, float *scratch) {                                  \
        switch (hd) {                                                                              \
        case 64:                                                                                   \
            attn_decode(it, kv, 64, scale, scratch, INF_##KT, INF_##VT);                           \
            return;                                                                                \
        case 128:                                                                                  \
            attn_decode(it, kv, 128, scale, scratch, INF_##KT, INF_##VT);                          \
            return;                                                                                \
        default:                                                                                   \
            attn_decode(it, kv, hd, scale, scratch, INF_##KT, INF_##VT);                           \
        }                                                                                          \
    }
#define ROW(KT) BODY(KT, F32) BODY(KT, F16) BODY(KT, BF16) BODY(KT, Q8_0)
ROW(F32)
ROW(F16)
ROW(BF16)
ROW(Q8_0)
#undef ROW
#undef BODY

typedef void (*decode_fn)(const inf_attn_rows *, const inf_kv_view *, int, float, float *);

/* index of a K/V type in the table below, or -1 */
static int type_index(inf_dtype t) {
    switch (t) {
    case INF_F32:
        return 0;
    case INF_F16:
        return 1;
    case INF_BF16:
        return 2;
    case INF_Q8_0:
        return 3;
    default:
        return -1;
    }
}

#define ROW(KT)                                                                                    \
    { decode_##KT##_F32, decode_##KT##_F16, decode_##KT##_BF16, decode_##KT##_Q8_0 }
static const decode_fn g_decode[4][4] = {ROW(F32), ROW(F16), ROW(BF16), ROW(Q8_0)};
#undef ROW

/* Floats of scratch attn_decode uses for R rows. */
static size_t decode_floats(int R, int hd) {
    const size_t ptrs = 2 * INF_KV_TILE * sizeof(void *) / sizeof(float);
    return (size_t)R * (INF_KV_TILE + (size_t)hd) + (size_t)hd + ptrs + 8;
}

static void a2_attn_decode(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                           float *scratch) {
    const int ki = type_index(kv->k_type), vi = type_index(kv->v_type);
    if (it->prefill || hd % 8 != 0 || ki < 0 || vi < 0 ||
        decode_floats(it->R, hd) > inf_attn_scratch_floats(it->R, hd)) {
        g_other_attn(it, kv, hd, scale, scratch);
        return;
    }
    g_decode[ki][vi](it, kv, hd, scale, scratch);
}

void inf_kernels_fill_avx2_decode_attn(inf_kernels *k) {
    g_other_attn = k->attn_rows;
    k->attn_rows = a2_attn_decode;
}
