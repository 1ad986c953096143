/* Prefill attention on AVX2 with query rows in vector lanes (every prefill
 * item; decode items go to kern_attn_decode_avx2.c, which reads K/V in place).
 *
 * The algorithm of kern_avx512.c's attn_lanes (64-key tiles, online softmax,
 * the causal limit per row) on 16 rows at a time, held in the lanes of two
 * vectors. Per tile, K and V are converted into contiguous f32 scratch once
 * for all the item's row blocks (the stored types are read once, and the
 * tile is contiguous even where a cache block ends inside it). Then, per block, both
 * products are computed transposed, rows in lanes:
 *   S^T[j][row] = sum_d k[j][d] q^T[d][row]      one broadcast k[j][d] serves
 *                                                 16 rows; 6 keys x 2 vectors
 *   O^T[d][row] = O^T[d][row] corr[row]          one broadcast v[j][d] serves
 *                 + sum_j v[j][d] p[j][row]       16 rows; 6 dims x 2 vectors
 * so the online softmax (running max m and sum l per lane) and the rescaling
 * of O are vertical: no reductions across lanes, no per-row scalar loops. 12
 * accumulators keep both FMA pipes busy and a broadcast feeds 2 FMAs.
 *
 * A row's lanes only ever hold its own query, its own keys (p = 0 at and
 * past its limit) and its own running state, so its result never depends on
 * the other rows of its item nor on R. Every row sees key 0 (lim >= 1), so
 * its running max is finite after the first tile. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/avx2_math.h"
#include "backend/kernels.h"
#include "util/err.h"

#define LB 16 /* query rows per lane block: two vectors of 8 */

static void (*g_row_attn)(const inf_attn_rows *, const inf_kv_view *, int, float, float *);

/* Floats of scratch for an item of R rows (the layout in attn_lanes; the
 * by_lane term of inf_attn_scratch_floats covers it). */
static size_t lanes_floats(int R, int hd) {
    size_t rows = ((size_t)R + LB - 1) / LB * LB;
    return 2 * rows * (size_t)hd + 2 * (size_t)INF_KV_TILE * hd + (size_t)INF_KV_TILE * LB +
           3 * rows + 8;
}

/* dst[n] (32-byte aligned) = a K/V row of type t as floats (n a multiple of 8). */
static inline void kv_row_f32(float *dst, inf_dtype t, const void *row, int n) {
    switch (t) {
    case INF_F16:
        for (int i = 0; i < n; i += 8)
            _mm256_store_ps(dst + i, a2_kv_load8(INF_F16, row, i));
        return;
    case INF_BF16:
        for (int i = 0; i < n; i += 8)
            _mm256_store_ps(dst + i, a2_kv_load8(INF_BF16, row, i));
        return;
    case INF_Q8_0:
        for (int i = 0; i < n; i += 8)
            _mm256_store_ps(dst + i, a2_kv_load8(INF_Q8_0, row, i));
        return;
    default:
        for (int i = 0; i < n; i += 8)
            _mm256_store_ps(dst + i, a2_kv_load8(INF_F32, row, i));
    }
}

/* st[jj][16] = scores of the 16 rows of q^T qt [hd][16] with nj keys k [nj][hd]
 * (unscaled), summed over d in order. */
static inline __attribute__((always_inline)) void scores(float *st, const float *qt, const float *k,
                                                         const int hd, const int nj) {
    __m256 a0[6], a1[6];
#pragma GCC unroll 6
    for (int jj = 0; jj < nj; jj++)
        a0[jj] = a1[jj] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const __m256 qa = _mm256_load_ps(qt + LB * d), qb = _mm256_load_ps(qt + LB * d + 8);
#pragma GCC unroll 6
        for (int jj = 0; jj < nj; jj++) {
            const __m256 kb = _mm256_broadcast_ss(k + (size_t)jj * hd + d);
            a0[jj] = _mm256_fmadd_ps(qa, kb, a0[jj]);
            a1[jj] = _mm256_fmadd_ps(qb, kb, a1[jj]);
        }
    }
#pragma GCC unroll 6
    for (int jj = 0; jj < nj; jj++) {
        _mm256_store_ps(st + LB * jj, a0[jj]);
        _mm256_store_ps(st + LB * jj + 8, a1[jj]);
    }
}

/* O^T rows d..d+nd-1 (ot [nd][16]) = O^T corr + sum_{j < nk} v[j][d] p[j] in
 * key order, p = P^T st [nk][16], v = the tile's values from column d (row
 * stride hd). */
static inline __attribute__((always_inline)) void pv(float *ot, const float *st, const float *v,
                                                     int nk, const int hd, __m256 c0, __m256 c1,
                                                     const int nd) {
    __m256 a0[6], a1[6];
#pragma GCC unroll 6
    for (int dd = 0; dd < nd; dd++) {
        a0[dd] = _mm256_mul_ps(_mm256_load_ps(ot + LB * dd), c0);
        a1[dd] = _mm256_mul_ps(_mm256_load_ps(ot + LB * dd + 8), c1);
    }
    for (int j = 0; j < nk; j++) {
        const __m256 pa = _mm256_load_ps(st + LB * j), pb = _mm256_load_ps(st + LB * j + 8);
#pragma GCC unroll 6
        for (int dd = 0; dd < nd; dd++) {
            const __m256 vb = _mm256_broadcast_ss(v + (size_t)j * hd + dd);
            a0[dd] = _mm256_fmadd_ps(pa, vb, a0[dd]);
            a1[dd] = _mm256_fmadd_ps(pb, vb, a1[dd]);
        }
    }
#pragma GCC unroll 6
    for (int dd = 0; dd < nd; dd++) {
        _mm256_store_ps(ot + LB * dd, a0[dd]);
        _mm256_store_ps(ot + LB * dd + 8, a1[dd]);
    }
}

/* A prefill item, LB rows at a time (the layout of scratch below). Both
 * products walk an even count n (keys, or dims) in steps of 6, then 4, then
 * 2: 64 = 10 x 6 + 4, 128 = 20 x 6 + 2 x 4. */
static inline __attribute__((always_inline)) void attn_lanes(const inf_attn_rows *it,
                                                             const inf_kv_view *kv, const int hd,
                                                             float scale, float *scratch) {
    const int R = it->R, nb = (R + LB - 1) / LB;
    float *qt = (float *)(((uintptr_t)scratch + 31) & ~(uintptr_t)31); /* [nb][hd][16] q^T */
    float *ot = qt + (size_t)nb * hd * LB;                             /* [nb][hd][16] O^T */
    float *kc = ot + (size_t)nb * hd * LB;                 /* [64][hd] the tile's keys as floats */
    float *vc = kc + (size_t)INF_KV_TILE * hd;             /* [64][hd] values */
    float *st = vc + (size_t)INF_KV_TILE * hd;             /* [64][16] S^T, then P^T */
    float *ml = st + INF_KV_TILE * LB;                     /* [nb][m, l][16] */
    int32_t *limv = (int32_t *)(ml + 2 * (size_t)nb * LB); /* [nb][16] */
    /* padding rows: q = 0, key 0 only */
    for (int b = 0; b < nb; b++)
        for (int n = 0; n < LB; n++) {
            const int r = LB * b + n;
            float *col = qt + (size_t)b * hd * LB + n;
            for (int d = 0; d < hd; d++)
                col[(size_t)LB * d] = r < R ? it->q[r][d] : 0.0f;
            limv[r] = r < R ? it->lim[r] : 1;
            ml[2 * LB * b + n] = -INFINITY;
            ml[2 * LB * b + LB + n] = 0;
        }
    memset(ot, 0, sizeof(float) * (size_t)nb * hd * LB);

    const inf_dtype kt = kv->k_type, vt = kv->v_type;
    const size_t kbytes = inf_kv_type_bytes(kt, hd), vbytes = inf_kv_type_bytes(vt, hd);
    const __m256 vscale = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY),
                 one = _mm256_set1_ps(1.0f);
    for (int t0 = 0; t0 < it->max_lim; t0 += INF_KV_TILE) {
        const int nk = it->max_lim - t0 < INF_KV_TILE ? it->max_lim - t0 : INF_KV_TILE;
        for (int j = 0; j < nk; j++) {
            /* the next tile's rows, while this one is worked on */
            if (t0 + INF_KV_TILE + j < it->max_lim) {
                const char *kn = inf_kv_k_at(kv, t0 + INF_KV_TILE + j, it->kv_head);
                const char *vn = inf_kv_v_at(kv, t0 + INF_KV_TILE + j, it->kv_head);
                for (size_t c = 0; c < kbytes; c += 64)
                    _mm_prefetch(kn + c, _MM_HINT_T1);
                for (size_t c = 0; c < vbytes; c += 64)
                    _mm_prefetch(vn + c, _MM_HINT_T1);
            }
            kv_row_f32(kc + (size_t)j * hd, kt, inf_kv_k_at(kv, t0 + j, it->kv_head), hd);
            kv_row_f32(vc + (size_t)j * hd, vt, inf_kv_v_at(kv, t0 + j, it->kv_head), hd);
        }
        if (nk % 2) memset(kc + (size_t)nk * hd, 0, sizeof(float) * (size_t)hd); /* 2-key step */

        for (int b = 0; b < nb; b++) {
            const int32_t *lb = limv + LB * b;
            int lo = lb[0], hi = lb[0];
            for (int n = 1; n < LB; n++) {
                lo = lb[n] < lo ? lb[n] : lo;
                hi = lb[n] > hi ? lb[n] : hi;
            }
            if (hi <= t0) continue; /* no row of the block sees this tile */
            /* the tile's keys some row of the block sees; an odd count reads one more */
            const int nkb = hi - t0 < nk ? hi - t0 : nk, nke = (nkb + 1) & ~1;
            const float *q0 = qt + (size_t)b * hd * LB;
            int j = 0;
            for (; nke - j >= 6 && nke - j != 8; j += 6)
                scores(st + LB * j, q0, kc + (size_t)j * hd, hd, 6);
            for (; nke - j >= 4; j += 4)
                scores(st + LB * j, q0, kc + (size_t)j * hd, hd, 4);
            if (j < nke) scores(st + LB * j, q0, kc + (size_t)j * hd, hd, 2);

            /* online softmax, per lane; st becomes p (0 at and past a row's limit) */
            const bool full = lo >= t0 + nkb;
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)lb),
                          l1 = _mm256_loadu_si256((const __m256i *)(lb + 8));
            float *mb = ml + 2 * LB * b;
            const __m256 m0 = _mm256_load_ps(mb), m1 = _mm256_load_ps(mb + 8);
            __m256 tm0 = ninf, tm1 = ninf;
            for (j = 0; j < nkb; j++) {
                __m256 s0 = _mm256_mul_ps(_mm256_load_ps(st + LB * j), vscale);
                __m256 s1 = _mm256_mul_ps(_mm256_load_ps(st + LB * j + 8), vscale);
                if (!full) {
                    const __m256i kj = _mm256_set1_epi32(t0 + j);
                    s0 =
                        _mm256_blendv_ps(ninf, s0, _mm256_castsi256_ps(_mm256_cmpgt_epi32(l0, kj)));
                    s1 =
                        _mm256_blendv_ps(ninf, s1, _mm256_castsi256_ps(_mm256_cmpgt_epi32(l1, kj)));
                }
                _mm256_store_ps(st + LB * j, s0);
                _mm256_store_ps(st + LB * j + 8, s1);
                tm0 = _mm256_max_ps(tm0, s0);
                tm1 = _mm256_max_ps(tm1, s1);
            }
            const __m256 up0 = _mm256_cmp_ps(tm0, m0, _CMP_GT_OQ),
                         up1 = _mm256_cmp_ps(tm1, m1, _CMP_GT_OQ);
            const __m256 n0 = _mm256_blendv_ps(m0, tm0, up0), n1 = _mm256_blendv_ps(m1, tm1, up1);
            /* corr = e^(m - m'), exactly 1 where the max did not move */
            const __m256 c0 = _mm256_blendv_ps(one, exp256(_mm256_sub_ps(m0, n0)), up0);
            const __m256 c1 = _mm256_blendv_ps(one, exp256(_mm256_sub_ps(m1, n1)), up1);
            __m256 ls0 = _mm256_mul_ps(_mm256_load_ps(mb + LB), c0);
            __m256 ls1 = _mm256_mul_ps(_mm256_load_ps(mb + LB + 8), c1);
            for (j = 0; j < nkb; j++) {
                const __m256 s0 = _mm256_load_ps(st + LB * j), s1 = _mm256_load_ps(st + LB * j + 8);
                const __m256 p0 = _mm256_and_ps(_mm256_cmp_ps(s0, ninf, _CMP_NEQ_OQ),
                                                exp256(_mm256_sub_ps(s0, n0)));
                const __m256 p1 = _mm256_and_ps(_mm256_cmp_ps(s1, ninf, _CMP_NEQ_OQ),
                                                exp256(_mm256_sub_ps(s1, n1)));
                _mm256_store_ps(st + LB * j, p0);
                _mm256_store_ps(st + LB * j + 8, p1);
                ls0 = _mm256_add_ps(ls0, p0);
                ls1 = _mm256_add_ps(ls1, p1);
            }
            _mm256_store_ps(mb, n0);
            _mm256_store_ps(mb + 8, n1);
            _mm256_store_ps(mb + LB, ls0);
            _mm256_store_ps(mb + LB + 8, ls1);

            float *o = ot + (size_t)b * hd * LB;
            int d = 0;
            for (; hd - d >= 6 && hd - d != 8; d += 6)
                pv(o + LB * d, st, vc + d, nkb, hd, c0, c1, 6);
            for (; hd - d >= 4; d += 4)
                pv(o + LB * d, st, vc + d, nkb, hd, c0, c1, 4);
            if (d < hd) pv(o + LB * d, st, vc + d, nkb, hd, c0, c1, 2);
        }
    }

    for (int r = 0; r < R; r++) {
        const int b = r / LB, n = r % LB;
        const float inv = 1.0f / ml[2 * LB * b + LB + n];
        const float *o = ot + (size_t)b * hd * LB + n;
        for (int d = 0; d < hd; d++)
            it->out[r][d] = o[(size_t)LB * d] * inv;
    }
}

/* head_dim a compile-time constant for the model shapes (offsets into the tiles fold) */
static void a2_attn_lanes(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                          float *scratch) {
    if (!it->prefill || hd % 8 != 0 ||
        lanes_floats(it->R, hd) > inf_attn_scratch_floats(it->R, hd)) {
        g_row_attn(it, kv, hd, scale, scratch);
        return;
    }
    INF_ASSERT(it->k0 == 0 && !it->part); /* key blocks split decode steps only */
    switch (hd) {
    case 64:
        attn_lanes(it, kv, 64, scale, scratch);
        return;
    case 128:
        attn_lanes(it, kv, 128, scale, scratch);
        return;
    case 256:
        attn_lanes(it, kv, 256, scale, scratch);
        return;
    default:
        attn_lanes(it, kv, hd, scale, scratch);
    }
}

void inf_kernels_fill_avx2_attn(inf_kernels *k) {
    g_row_attn = k->attn_rows;
    k->attn_rows = a2_attn_lanes;
}
