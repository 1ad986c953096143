/* Flash-attention prefill on AMX tiles (every prefill item; decode items
 * keep the vector kernel, which reads K/V in place).
 *
 * Same algorithm as the AVX-512 kernel (64-key tiles, online softmax, the
 * causal limit per row), with both products on BF16 tiles and every operand
 * split into two bf16 parts (x = hi + lo, hi = bf16(x), lo = bf16(x - hi));
 * a product is hi*hi + hi*lo + lo*hi accumulated in f32, which keeps about 16
 * bits of each operand: results stay within the f32 kernels' tolerance at
 * three tile products per product.
 *
 * Everything is computed transposed, with the 16 query rows of a block as the
 * N dimension (the lanes of the C tiles):
 *   S^T[key][row] = sum_d K[key][d] q[row][d]   A = K rows as stored (bf16),
 *                                                B = q in pairs of dims
 *   O^T[d][row]  += sum_key V^T[d][key] p[row][key]   A = V transposed,
 *                                                       B = p^T in pairs of keys
 * so the online softmax and the rescaling of O are per lane (no reductions
 * across lanes), B operands are built once per item (q) or by interleaving two
 * vectors (p), and only V needs a transpose, once per tile for all the item's
 * query blocks. */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "backend/amx_tiles.h"
#include "backend/avx512_math.h"
#include "backend/kernels.h"

#define QB 16 /* query rows per block (C tile columns) */

/* all tiles 16 rows x 64 bytes: C 0-3, A 4-5, B 6-7 */

static void (*g_vector_attn)(const inf_attn_rows *, const inf_kv_view *, int, float, float *);

/* Floats of scratch for an item of R rows (the layout in amx_attn_rows; the
 * by_amx term of inf_attn_scratch_floats). */
static size_t amx_attn_floats(int R, int hd) {
    size_t nqb = ((size_t)R + QB - 1) / QB;
    return nqb * (2 * (size_t)hd * QB + 3 * QB) + 2 * (size_t)INF_KV_TILE * hd +
           2 * INF_KV_TILE * QB + (size_t)hd * QB + 64;
}

/* The three tile products of a split product into C tile c: A (4, 5) = hi, lo;
 * B (6, 7) = hi, lo. */
#define SPLIT_DP(c)                                                                                \
    do {                                                                                           \
        _tile_dpbf16ps(c, 4, 6);                                                                   \
        _tile_dpbf16ps(c, 4, 7);                                                                   \
        _tile_dpbf16ps(c, 5, 6);                                                                   \
    } while (0)

/* C tiles 0-3 += split products of the B pair in tiles 6-7 with four A pairs
 * at a, a + 1024, a + 2048, a + 3072 (each hi, then lo 512 further). */
static inline void split_dp4(const uint16_t *a) {
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a + 512, 64);
    SPLIT_DP(0);
    _tile_loadd(4, a + 1024, 64);
    _tile_loadd(5, a + 1536, 64);
    SPLIT_DP(1);
    _tile_loadd(4, a + 2048, 64);
    _tile_loadd(5, a + 2560, 64);
    SPLIT_DP(2);
    _tile_loadd(4, a + 3072, 64);
    _tile_loadd(5, a + 3584, 64);
    SPLIT_DP(3);
}

/* A K/V row of type t as hd floats: in place for f32, else converted into buf. */
static inline const float *kv_row(float *buf, inf_dtype t, const void *row, int hd) {
    if (t == INF_F32) return row;
    kv_row_to_f32(buf, t, row, hd);
    return buf;
}

static void amx_attn_rows(const inf_attn_rows *it, const inf_kv_view *kv, int hd, float scale,
                          float *scratch) {
    if (!it->prefill || hd % 64 != 0 || hd > 256 ||
        amx_attn_floats(it->R, hd) > inf_attn_scratch_floats(it->R, hd)) {
        g_vector_attn(it, kv, hd, scale, scratch);
        return;
    }
    const int R = it->R, nqb = (R + QB - 1) / QB, nks = hd / 32, ndb = hd / 16;
    /* scratch: bf16 operands first (each tile 1 KiB), then f32 */
    uint16_t *qp = (uint16_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    /* qp: [nqb][nks][hi, lo][16 pairs][16 rows][2]           B tiles of q */
    uint16_t *ka = qp + (size_t)nqb * nks * 2 * 512; /* [nks][4 key groups][hi, lo][16][32] */
    uint16_t *va = ka + (size_t)nks * 4 * 2 * 512;   /* [2 key steps][ndb][hi, lo][16][32] */
    uint16_t *pp = va + (size_t)2 * ndb * 2 * 512;   /* [2 key steps][hi, lo][16][32] */
    float *ot = (float *)(pp + 2 * 2 * 512);         /* [nqb][hd][16] O^T */
    float *st = ot + (size_t)nqb * hd * QB;          /* [64][16] S^T, then p^T */
    float *pv = st + INF_KV_TILE * QB;               /* [hd][16] this tile's P.V */
    float *ml = pv + (size_t)hd * QB;                /* [nqb][m, l, lim][16] */

    /* q in pairs of dims, split; O^T = 0; m = -inf, l = 0; padding rows see key 0 only */
    for (int b = 0; b < nqb; b++) {
        float *mb = ml + (size_t)b * 3 * QB;
        int32_t *lim = (int32_t *)(mb + 2 * QB);
        for (int n = 0; n < QB; n++) {
            int r = b * QB + n;
            mb[n] = -INFINITY;
            mb[QB + n] = 0;
            lim[n] = r < R ? it->lim[r] : 1;
            for (int ks = 0; ks < nks; ks++) {
                uint16_t *hi = qp + ((size_t)(b * nks + ks) * 2) * 512, *lo = hi + 512;
                if (r >= R) {
                    for (int k = 0; k < 16; k++) {
                        memset(hi + 32 * k + 2 * n, 0, 4);
                        memset(lo + 32 * k + 2 * n, 0, 4);
                    }
                    continue;
                }
                const float *q = it->q[r] + 32 * ks;
                __m512 x0 = _mm512_loadu_ps(q), x1 = _mm512_loadu_ps(q + 16);
                /* pair k = dims (2k, 2k+1): even dims from x0/x1 interleaved in order */
                uint16_t h[32], l[32];
                _mm256_storeu_si256((__m256i *)h, (__m256i)_mm512_cvtneps_pbh(x0));
                _mm256_storeu_si256((__m256i *)(h + 16), (__m256i)_mm512_cvtneps_pbh(x1));
                _mm256_storeu_si256((__m256i *)l, (__m256i)_mm512_cvtneps_pbh(bf16_rest(x0)));
                _mm256_storeu_si256((__m256i *)(l + 16),
                                    (__m256i)_mm512_cvtneps_pbh(bf16_rest(x1)));
                for (int k = 0; k < 16; k++) {
                    memcpy(hi + 32 * k + 2 * n, h + 2 * k, 4);
                    memcpy(lo + 32 * k + 2 * n, l + 2 * k, 4);
                }
            }
        }
    }
    memset(ot, 0, sizeof(float) * (size_t)nqb * hd * QB);

    /* K/V rows not stored as f32 are read as floats through these (hd <= 256) */
    const inf_dtype kt = kv->k_type, vt = kv->v_type;
    const size_t kbytes = inf_kv_type_bytes(kt, hd), vbytes = inf_kv_type_bytes(vt, hd);
    float kbuf[2][256] __attribute__((aligned(64))), vbuf[2][256] __attribute__((aligned(64)));
    _tile_loadconfig(&inf_amx_cfg_16x64);
    const __m512 vscale = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    const __m512i rowidx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(16)); /* 32-bit units per row */
    for (int t0 = 0; t0 < it->max_lim; t0 += INF_KV_TILE) {
        const int nk = it->max_lim - t0 < INF_KV_TILE ? it->max_lim - t0 : INF_KV_TILE;
        /* K rows as A tiles (split); V transposed by pairs of keys as A tiles */
        for (int j = 0; j < INF_KV_TILE; j += 2) {
            const float *k0 =
                j < nk ? kv_row(kbuf[0], kt, inf_kv_k_at(kv, t0 + j, it->kv_head), hd) : NULL;
            const float *k1 =
                j + 1 < nk ? kv_row(kbuf[1], kt, inf_kv_k_at(kv, t0 + j + 1, it->kv_head), hd)
                           : NULL;
            const float *v0 =
                j < nk ? kv_row(vbuf[0], vt, inf_kv_v_at(kv, t0 + j, it->kv_head), hd) : NULL;
            const float *v1 =
                j + 1 < nk ? kv_row(vbuf[1], vt, inf_kv_v_at(kv, t0 + j + 1, it->kv_head), hd)
                           : NULL;
            /* the next tile's rows (a cache block may end inside the tile: kv_view.h) */
            for (int jj = j; jj < j + 2 && t0 + INF_KV_TILE + jj < it->max_lim; jj++) {
                const char *kn = inf_kv_k_at(kv, t0 + INF_KV_TILE + jj, it->kv_head);
                const char *vn = inf_kv_v_at(kv, t0 + INF_KV_TILE + jj, it->kv_head);
                for (size_t c = 0; c < kbytes; c += 64)
                    _mm_prefetch(kn + c, _MM_HINT_T0);
                for (size_t c = 0; c < vbytes; c += 64)
                    _mm_prefetch(vn + c, _MM_HINT_T0);
            }
            for (int jj = 0; jj < 2; jj++) {
                const float *kr = jj ? k1 : k0;
                int key = j + jj;
                for (int ks = 0; ks < nks; ks++) {
                    uint16_t *hi = ka + ((size_t)(ks * 4 + key / 16) * 2) * 512 + 32 * (key % 16);
                    uint16_t *lo = hi + 512;
                    __m512 x0 = kr ? _mm512_loadu_ps(kr + 32 * ks) : _mm512_setzero_ps();
                    __m512 x1 = kr ? _mm512_loadu_ps(kr + 32 * ks + 16) : _mm512_setzero_ps();
                    _mm256_store_si256((__m256i *)hi, (__m256i)_mm512_cvtneps_pbh(x0));
                    _mm256_store_si256((__m256i *)(hi + 16), (__m256i)_mm512_cvtneps_pbh(x1));
                    _mm256_store_si256((__m256i *)lo, (__m256i)_mm512_cvtneps_pbh(bf16_rest(x0)));
                    _mm256_store_si256((__m256i *)(lo + 16),
                                       (__m256i)_mm512_cvtneps_pbh(bf16_rest(x1)));
                }
            }
            /* keys j, j+1 -> column pair j % 32 of rows d of tile (j / 32, d / 16) */
            for (int db = 0; db < ndb; db++) {
                __m512 a = v0 ? _mm512_loadu_ps(v0 + 16 * db) : _mm512_setzero_ps();
                __m512 b = v1 ? _mm512_loadu_ps(v1 + 16 * db) : _mm512_setzero_ps();
                uint16_t *hi = va + ((size_t)((j / 32) * ndb + db) * 2) * 512 + (j % 32);
                _mm512_i32scatter_epi32(hi, rowidx, pair_bf16(a, b), 4);
                _mm512_i32scatter_epi32(hi + 512, rowidx, pair_bf16(bf16_rest(a), bf16_rest(b)), 4);
            }
        }
        for (int b = 0; b < nqb; b++) {
            float *mb = ml + (size_t)b * 3 * QB;
            const int32_t *lim = (const int32_t *)(mb + 2 * QB);
            int lo_lim = lim[0], hi_lim = lim[0];
            for (int n = 1; n < QB; n++) {
                lo_lim = lim[n] < lo_lim ? lim[n] : lo_lim;
                hi_lim = lim[n] > hi_lim ? lim[n] : hi_lim;
            }
            if (hi_lim <= t0) continue; /* no row of the block sees this tile */
            /* S^T: 4 C tiles of 16 keys x 16 rows */
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int ks = 0; ks < nks; ks++) {
                const uint16_t *qb = qp + ((size_t)(b * nks + ks) * 2) * 512;
                _tile_loadd(6, qb, 64);
                _tile_loadd(7, qb + 512, 64);
                split_dp4(ka + ((size_t)ks * 4 * 2) * 512);
            }
            _tile_stored(0, st, 64);
            _tile_stored(1, st + 256, 64);
            _tile_stored(2, st + 512, 64);
            _tile_stored(3, st + 768, 64);

            /* online softmax per lane (row), keys j < nk */
            const bool full = lo_lim >= t0 + nk;
            const __m512i vlim = _mm512_loadu_si512(lim);
            __m512 m = _mm512_load_ps(mb), tm = ninf;
            for (int j = 0; j < nk; j++) {
                __m512 s = _mm512_mul_ps(_mm512_load_ps(st + 16 * j), vscale);
                if (!full)
                    s = _mm512_mask_blend_ps(
                        _mm512_cmpgt_epi32_mask(vlim, _mm512_set1_epi32(t0 + j)), ninf, s);
                _mm512_store_ps(st + 16 * j, s);
                tm = _mm512_max_ps(tm, s);
            }
            __mmask16 up = _mm512_cmp_ps_mask(tm, m, _CMP_GT_OQ);
            __m512 nm = _mm512_mask_blend_ps(up, m, tm);
            __m512 corr =
                _mm512_mask_blend_ps(up, _mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(m, nm)));
            __m512 l = _mm512_mul_ps(_mm512_load_ps(mb + QB), corr);
            for (int j = 0; j < INF_KV_TILE; j++) {
                __m512 p = _mm512_setzero_ps();
                if (j < nk) {
                    __m512 s = _mm512_load_ps(st + 16 * j);
                    p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s, ninf, _CMP_NEQ_OQ),
                                            exp512(_mm512_sub_ps(s, nm)));
                    l = _mm512_add_ps(l, p);
                }
                _mm512_store_ps(st + 16 * j, p);
            }
            _mm512_store_ps(mb, nm);
            _mm512_store_ps(mb + QB, l);
            /* p^T in pairs of keys (B tiles, split): row k of step s = keys 32s + 2k, +1 */
            for (int s = 0; s < 2; s++)
                for (int k = 0; k < 16; k++) {
                    __m512 a = _mm512_load_ps(st + 16 * (32 * s + 2 * k));
                    __m512 c = _mm512_load_ps(st + 16 * (32 * s + 2 * k + 1));
                    _mm512_store_si512(pp + (size_t)s * 1024 + 32 * k, pair_bf16(a, c));
                    _mm512_store_si512(pp + (size_t)s * 1024 + 512 + 32 * k,
                                       pair_bf16(bf16_rest(a), bf16_rest(c)));
                }
            /* P.V^T for this tile, 4 blocks of 16 dims at a time */
            for (int d0 = 0; d0 < ndb; d0 += 4) {
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                for (int s = 0; s < 2; s++) {
                    if (32 * s >= nk) break;
                    _tile_loadd(6, pp + (size_t)s * 1024, 64);
                    _tile_loadd(7, pp + (size_t)s * 1024 + 512, 64);
                    split_dp4(va + ((size_t)(s * ndb + d0) * 2) * 512);
                }
                _tile_stored(0, pv + (size_t)d0 * 256, 64);
                _tile_stored(1, pv + (size_t)(d0 + 1) * 256, 64);
                _tile_stored(2, pv + (size_t)(d0 + 2) * 256, 64);
                _tile_stored(3, pv + (size_t)(d0 + 3) * 256, 64);
            }
            /* O^T = O^T corr + P.V^T, per lane */
            float *o = ot + (size_t)b * hd * QB;
            for (int d = 0; d < hd; d++)
                _mm512_store_ps(o + 16 * d, _mm512_fmadd_ps(_mm512_load_ps(o + 16 * d), corr,
                                                            _mm512_load_ps(pv + 16 * d)));
        }
    }
    _tile_release();

    for (int b = 0; b < nqb; b++) {
        const float *o = ot + (size_t)b * hd * QB, *l = ml + (size_t)b * 3 * QB + QB;
        for (int n = 0; n < QB && b * QB + n < R; n++) {
            float inv = 1.0f / l[n], *out = it->out[b * QB + n];
            for (int d = 0; d < hd; d++)
                out[d] = o[16 * d + n] * inv;
        }
    }
}

void inf_kernels_fill_amx_attn(inf_kernels *k) {
    g_vector_attn = k->attn_rows;
    k->attn_rows = amx_attn_rows;
}
