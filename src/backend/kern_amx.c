/* AMX kernels: prefill GEMMs on BF16 tiles.
 *
 * y[t][o] for a block of 32 tokens x 32 outputs lives in four 16x16 f32 C
 * tiles; A tiles are 16 tokens x 32 bf16 activations, B tiles are 32 k x 16
 * outputs in VNNI pair order, which is exactly one packed BF16 group (see
 * kernels.h). Integer weights (every packed integer kind) are expanded per pair
 * of panels into a thread-private bf16 copy, once per 256 tokens, so their
 * per-block scales are folded into the weights and the whole k loop
 * accumulates in the tiles. Tolerance: activations and expanded weights are
 * rounded to bf16 (relative error 2^-9 each); sums are f32.
 *
 * The tile configuration lives in static const memory: gcc 12 may delete the
 * stores that fill an on-stack configuration before LDTILECFG. */
#include <immintrin.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/amx_tiles.h"
#include "backend/avx512_math.h"
#include "backend/kernels.h"
#include "backend/q4ks_scales.h"

/* tiles 0-3: C (16 x 16 f32), 4-5: A (16 tokens x 32 bf16), 6-7: B (16 k pairs x 16 outputs) */
const inf_tile_config inf_amx_cfg_16x64 __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static inline void load_cfg(void) {
    _tile_loadconfig(&inf_amx_cfg_16x64);
}

#define TOKEN_CHUNK 256

/* f[j] = k-vectors of 4 consecutive k (lane r = row r); writes 2 bf16 chunks. */
static inline void emit4(uint8_t *dst, const __m512 f[4]) {
    _mm512_store_si512(dst, pair_bf16(f[0], f[1]));
    _mm512_store_si512(dst + 64, pair_bf16(f[2], f[3]));
}

/* byte j of every 32-bit lane as 16 floats */
static inline __m512 byte_lane(__m512i v, int j) {
    __m512i b = _mm512_and_si512(_mm512_srli_epi32(v, 8 * j), _mm512_set1_epi32(0xff));
    return _mm512_cvtepi32_ps(b);
}

/* one chunk's low and high values (bytes of lo, hi) as A q - B: 4 bf16 chunks */
static inline void emit_nibbles(uint8_t *dst, __m512i lo, __m512i hi, __m512 A, __m512 B) {
    __m512 f[4];
    for (int j = 0; j < 4; j++)
        f[j] = _mm512_fmsub_ps(byte_lane(lo, j), A, B);
    emit4(dst, f);
    for (int j = 0; j < 4; j++)
        f[j] = _mm512_fmsub_ps(byte_lane(hi, j), A, B);
    emit4(dst + 128, f);
}

/* a 5-bit group (the Q5_K kind's 4 nibble chunks and chunk of fifth bits at
 * p) as A q - B: the fifth bits to bit 4, of the low nibbles from H << 4,
 * one shift down per chunk */
static inline void emit_five(uint8_t *dst, const uint8_t *p, __m512 A, __m512 B) {
    const __m512i m0f = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
    __m512i H = _mm512_loadu_si512(p + 256), L = _mm512_slli_epi16(H, 4);
    for (int c = 0; c < 4; c++) {
        __m512i w = _mm512_loadu_si512(p + 64 * c);
        __m512i lo = _mm512_or_si512(_mm512_and_si512(w, m0f), _mm512_and_si512(L, m10)),
                hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(w, 4), m0f),
                                     _mm512_and_si512(H, m10));
        L = _mm512_srli_epi16(L, 1);
        H = _mm512_srli_epi16(H, 1);
        emit_nibbles(dst + 256 * c, lo, hi, A, B);
    }
}

/* kernels.h: k 32 kg .. 32 kg + 31 of one packed panel as 1024 bytes of bf16 */
void inf_amx_expand_group(uint8_t *dst, const inf_packed *pk, const uint8_t *panel, int64_t kg) {
    const __m512i m0f = _mm512_set1_epi8(0x0f);
    __m512 f[4];
    switch (pk->kind) {
    case INF_PACK_Q8_0: {
        const uint8_t *gp = panel + (size_t)kg * pk->group_bytes;
        __m512 A = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 512)));
        __m512 off = _mm512_set1_ps(128.0f);
        for (int c = 0; c < 8; c++) {
            __m512i w = _mm512_loadu_si512(gp + 64 * c);
            for (int j = 0; j < 4; j++)
                f[j] = _mm512_mul_ps(_mm512_sub_ps(byte_lane(w, j), off), A);
            emit4(dst + 128 * c, f);
        }
        break;
    }
    case INF_PACK_Q4_0:
    case INF_PACK_Q4_K: {
        const uint8_t *gp = panel + (size_t)kg * pk->group_bytes;
        __m512 A = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 256)));
        __m512 B = pk->kind == INF_PACK_Q4_K
                       ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 288)))
                       : _mm512_mul_ps(A, _mm512_set1_ps(8.0f));
        for (int c = 0; c < 4; c++) {
            __m512i w = _mm512_loadu_si512(gp + 64 * c);
            __m512i lo = _mm512_and_si512(w, m0f),
                    hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m0f);
            emit_nibbles(dst + 256 * c, lo, hi, A, B);
        }
        break;
    }
    case INF_PACK_Q6_K: { /* sub-groups 2 (kg % 8) and the next of super-group kg / 8 */
        const uint8_t *gp = panel + (size_t)(kg / 8) * pk->group_bytes;
        const __m512 d = q6k_d(gp);
        for (int half = 0; half < 2; half++) {
            const int sg = 2 * (int)(kg % 8) + half;
            const __m512 A = q6k_scale(gp, sg, d), B = _mm512_mul_ps(A, _mm512_set1_ps(32.0f));
            __m512i q[4];
            q6k_values(gp + INF_Q6K_SUB_BYTES * sg, q);
            for (int i = 0; i < 4; i++) {
                for (int j = 0; j < 4; j++)
                    f[j] = _mm512_fmsub_ps(byte_lane(q[i], j), A, B);
                emit4(dst + 512 * half + 128 * i, f);
            }
        }
        break;
    }
    case INF_PACK_Q5_K: {
        const uint8_t *gp = panel + (size_t)kg * pk->group_bytes;
        emit_five(dst, gp, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 320))),
                  _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 352))));
        break;
    }
    case INF_PACK_Q5_KS: { /* sub-group kg % 8 of super-group kg / 8 */
        const uint8_t *gp = panel + (size_t)(kg / 8) * pk->group_bytes;
        __m128i sc, m;
        q4ks_scale_min(gp + INF_Q5KS_SC_OFF, (int)(kg % 8), &sc, &m);
        const __m512 A = _mm512_mul_ps(
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + INF_Q5KS_D_OFF))),
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
        const __m512 B = _mm512_mul_ps(
            _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + INF_Q5KS_DMIN_OFF))),
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
        emit_five(dst, gp + INF_Q5KS_SUB_BYTES * (kg % 8), A, B);
        break;
    }
    case INF_PACK_IQ4: {
        const uint8_t *gp = panel + (size_t)kg * pk->group_bytes;
        __m512 A = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + 256)));
        /* the 16 values as floats, looked up by index with VPERMPS */
        const __m512 tbl =
            _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)pk->values)));
        const __m512i mff = _mm512_set1_epi32(0xff);
        for (int c = 0; c < 4; c++) {
            __m512i w = _mm512_loadu_si512(gp + 64 * c);
            __m512i lo = _mm512_and_si512(w, m0f),
                    hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m0f);
            for (int j = 0; j < 4; j++)
                f[j] = _mm512_mul_ps(
                    _mm512_permutexvar_ps(_mm512_and_si512(_mm512_srli_epi32(lo, 8 * j), mff), tbl),
                    A);
            emit4(dst + 256 * c, f);
            for (int j = 0; j < 4; j++)
                f[j] = _mm512_mul_ps(
                    _mm512_permutexvar_ps(_mm512_and_si512(_mm512_srli_epi32(hi, 8 * j), mff), tbl),
                    A);
            emit4(dst + 256 * c + 128, f);
        }
        break;
    }
    default:
        break;
    }
}

static size_t amx_scratch_bytes(const inf_packed *pk) {
    int64_t n_in = pk->n_groups * pk->group;
    size_t bf16 = 2 * (size_t)(n_in / 32) * 1024 + 64 * 16 * 4 * 4 + 128;
    size_t int8 = 12288 + 2 * (size_t)pk->n_groups * 512 + 128;
    return bf16 > int8 ? bf16 : int8;
}

static void amx_matmul_int8(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T,
                            int64_t p0, int64_t p1, void *scratch);

static void amx_matmul(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T,
                       int64_t p0, int64_t p1, bool bf16_tiles, void *scratch) {
    if (!bf16_tiles && inf_amx_int8_kind(pk->kind)) {
        amx_matmul_int8(y, ldy, pk, xq, T, p0, p1, scratch);
        return;
    }
    const int64_t n = xq->n, nkg = n / 32;
    const size_t pbytes = (size_t)pk->n_groups * pk->group_bytes;
    uint8_t *sp = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    uint8_t *bexp[2] = {sp, sp + (size_t)nkg * 1024};
    float *cbuf = (float *)(sp + 2 * (size_t)nkg * 1024); /* [4][16][16] */
    load_cfg();
    for (int tc = 0; tc < T; tc += TOKEN_CHUNK) {
        int tn = T - tc < TOKEN_CHUNK ? T - tc : TOKEN_CHUNK;
        for (int64_t p = p0; p < p1; p += 2) {
            int np = p1 - p >= 2 ? 2 : 1;
            const uint8_t *bsrc[2];
            for (int i = 0; i < np; i++) {
                const uint8_t *panel = pk->data + (size_t)(p + i) * pbytes;
                if (pk->kind == INF_PACK_BF16) {
                    bsrc[i] = panel;
                } else {
                    for (int64_t kg = 0; kg < nkg; kg++)
                        inf_amx_expand_group(bexp[i] + (size_t)kg * 1024, pk, panel, kg);
                    bsrc[i] = bexp[i];
                }
            }
            for (int tb = tc; tb < tc + tn; tb += 32) {
                const uint16_t *a0 = xq->bf + (size_t)tb * (size_t)n;
                const uint16_t *a1 = a0 + 16 * (size_t)n;
                const size_t astride = (size_t)n * 2;
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                if (np == 2) {
                    for (int64_t kg = 0; kg < nkg; kg++) {
                        if (tb == tc &&
                            kg + 2 < nkg) /* B streams from DRAM on the first token block */
                            for (int l = 0; l < 1024; l += 64) {
                                _mm_prefetch((const char *)bsrc[0] + (size_t)(kg + 2) * 1024 + l,
                                             _MM_HINT_T0);
                                _mm_prefetch((const char *)bsrc[1] + (size_t)(kg + 2) * 1024 + l,
                                             _MM_HINT_T0);
                            }
                        _tile_loadd(4, a0 + 32 * kg, astride);
                        _tile_loadd(5, a1 + 32 * kg, astride);
                        _tile_loadd(6, bsrc[0] + (size_t)kg * 1024, 64);
                        _tile_loadd(7, bsrc[1] + (size_t)kg * 1024, 64);
                        _tile_dpbf16ps(0, 4, 6);
                        _tile_dpbf16ps(1, 4, 7);
                        _tile_dpbf16ps(2, 5, 6);
                        _tile_dpbf16ps(3, 5, 7);
                    }
                } else {
                    for (int64_t kg = 0; kg < nkg; kg++) {
                        _tile_loadd(4, a0 + 32 * kg, astride);
                        _tile_loadd(5, a1 + 32 * kg, astride);
                        _tile_loadd(6, bsrc[0] + (size_t)kg * 1024, 64);
                        _tile_dpbf16ps(0, 4, 6);
                        _tile_dpbf16ps(2, 5, 6);
                    }
                }
                _tile_stored(0, cbuf, 64);
                _tile_stored(1, cbuf + 256, 64);
                _tile_stored(2, cbuf + 512, 64);
                _tile_stored(3, cbuf + 768, 64);
                int rows = tc + tn - tb < 32 ? tc + tn - tb : 32;
                for (int t = 0; t < rows; t++) {
                    const float *c = cbuf + (t < 16 ? 0 : 512) + (size_t)(t % 16) * 16;
                    float *yr = y + (size_t)(tb + t) * (size_t)ldy + 16 * p;
                    _mm512_storeu_ps(yr, _mm512_load_ps(c));
                    if (np == 2) _mm512_storeu_ps(yr + 16, _mm512_load_ps(c + 256));
                }
            }
        }
    }
    _tile_release();
}

/* int8: tiles 0-3 C (16 x 16 i32), 4-5 A (16 tokens x 32 int8 activations: one
 * group), 6-7 B (8 k-quads x 16 outputs: one group, see unpack_group) */
static const inf_tile_config g_cfg_int8 __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 32, 32, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 8, 8},
};

/* One packed group as 8 rows of 64 bytes (k-quads in order) for a B tile.
 * Q8_0 and Q4_0 become signed bytes (w, and q - 8) so the tiles give
 * sum x*w with no offset correction; Q4_K keeps its unsigned nibbles (its
 * minimum is applied apart, as in the VNNI kernel). Nibble groups: quad 2c is
 * chunk c's low nibbles, quad 2c+1 its high nibbles (see kernels.h). */
static inline void unpack_group(uint8_t *dst, inf_pack_kind kind, const uint8_t *gp) {
    if (kind == INF_PACK_Q8_0) {
        const __m512i x80 = _mm512_set1_epi8((char)0x80);
        for (int c = 0; c < 8; c++)
            _mm512_store_si512(dst + 64 * c,
                               _mm512_xor_si512(_mm512_loadu_si512(gp + 64 * c), x80));
        return;
    }
    const __m512i m0f = _mm512_set1_epi8(0x0f);
    const __m512i off = _mm512_set1_epi8(kind == INF_PACK_Q4_0 ? 8 : 0);
    for (int c = 0; c < 4; c++) {
        __m512i w = _mm512_loadu_si512(gp + 64 * c);
        __m512i lo = _mm512_and_si512(w, m0f), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m0f);
        _mm512_store_si512(dst + 128 * c, _mm512_sub_epi8(lo, off));
        _mm512_store_si512(dst + 128 * c + 64, _mm512_sub_epi8(hi, off));
    }
}

/* The integer sums of one group for 32 tokens x (16 or 32) outputs into cb:
 * [tokens 0-15 | panel 0], [0-15 | 1], [16-31 | 0], [16-31 | 1], 16 x 16 each. */
static inline void group_tiles(int32_t *cb, const int8_t *a, const uint8_t *b0, const uint8_t *b1,
                               int np, bool sgn) {
    _tile_zero(0);
    _tile_zero(2);
    _tile_loadd(4, a, 32);
    _tile_loadd(5, a + 512, 32);
    _tile_loadd(6, b0, 64);
    if (sgn) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(2, 5, 6);
    } else {
        _tile_dpbsud(0, 4, 6);
        _tile_dpbsud(2, 5, 6);
    }
    if (np == 2) {
        _tile_zero(1);
        _tile_zero(3);
        _tile_loadd(7, b1, 64);
        if (sgn) {
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(3, 5, 7);
        } else {
            _tile_dpbsud(1, 4, 7);
            _tile_dpbsud(3, 5, 7);
        }
        _tile_stored(1, cb + 256, 64);
        _tile_stored(3, cb + 768, 64);
    }
    _tile_stored(0, cb, 64);
    _tile_stored(2, cb + 512, 64);
}

/* acc[t][16i + r] += scaled sums of one group, in the VNNI kernel's operations and order. */
static inline __attribute__((always_inline)) void group_scale(float *acc, const int32_t *cb,
                                                              const float *dv, const int32_t *sv,
                                                              const __m512 A[2], const __m512 B[2],
                                                              int np, bool q4k) {
    for (int t = 0; t < 32; t++) {
        const int32_t *c = cb + (t < 16 ? 0 : 512) + (size_t)(t % 16) * 16;
        const __m512 vdx = _mm512_set1_ps(dv[t]);
        float *a = acc + (size_t)t * 32;
        if (q4k) {
            const __m512 vdxs = _mm512_set1_ps(dv[t] * (float)sv[t]);
            for (int i = 0; i < np; i++) {
                __m512 av = _mm512_load_ps(a + 16 * i);
                __m512 ci = _mm512_cvtepi32_ps(_mm512_load_si512(c + 256 * i));
                av = _mm512_fmadd_ps(_mm512_mul_ps(ci, A[i]), vdx, av);
                _mm512_store_ps(a + 16 * i, _mm512_fnmadd_ps(B[i], vdxs, av));
            }
        } else {
            for (int i = 0; i < np; i++) {
                __m512 ci = _mm512_cvtepi32_ps(_mm512_load_si512(c + 256 * i));
                _mm512_store_ps(a + 16 * i, _mm512_fmadd_ps(_mm512_mul_ps(ci, A[i]), vdx,
                                                            _mm512_load_ps(a + 16 * i)));
            }
        }
    }
}

/* Integer weights (Q8_0, Q4_0, Q4_K) on AMX-INT8 tiles: per group of 32 k the
 * tile sums are the exact integers the VNNI kernel computes (sum x*w; for
 * Q4_K sum x*q), and the float scaling repeats its operations in its order,
 * so prefill on tiles and decode on VNNI give bit-identical rows (results do
 * not depend on how rows are batched). The tiles of group g+1 are issued
 * before the scaling of group g, into the other half of a double buffer, so
 * the tile unit and the vector units work at the same time. */
static void amx_matmul_int8(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T,
                            int64_t p0, int64_t p1, void *scratch) {
    const int64_t n = xq->n, ng = pk->n_groups;
    const size_t pbytes = (size_t)ng * pk->group_bytes, gb = pk->group_bytes;
    uint8_t *sp = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    int32_t *cbuf = (int32_t *)sp;     /* [2][4][16][16] */
    float *acc = (float *)(sp + 8192); /* [32 tokens][32 outputs] */
    uint8_t *bexp = sp + 12288;        /* [2][ng][512] B tiles */
    const bool q4k = pk->kind == INF_PACK_Q4_K, sgn = !q4k;
    const size_t qb = pk->kind == INF_PACK_Q8_0 ? 512 : 256; /* offset of the scales */
    _tile_loadconfig(&g_cfg_int8);
    for (int64_t p = p0; p < p1; p += 2) {
        const int np = p1 - p >= 2 ? 2 : 1;
        const uint8_t *panel[2] = {pk->data + (size_t)p * pbytes,
                                   pk->data + (size_t)(p + np - 1) * pbytes};
        for (int i = 0; i < np; i++)
            for (int64_t g = 0; g < ng; g++)
                unpack_group(bexp + ((size_t)i * ng + g) * 512, pk->kind,
                             panel[i] + (size_t)g * gb);
        const uint8_t *b0 = bexp, *b1 = bexp + (size_t)ng * 512;
        for (int tb = 0; tb < T; tb += 32) {
            memset(acc, 0, 32 * 32 * sizeof(float));
            const int8_t *a0 = xq->qT + (size_t)tb * (size_t)n; /* [ng][32][32] */
            const float *dT = xq->dT + (size_t)(tb / 32) * (size_t)ng * 32;
            const int32_t *sT = xq->sT + (size_t)(tb / 32) * (size_t)ng * 32;
            group_tiles(cbuf, a0, b0, b1, np, sgn);
            for (int64_t g = 0; g < ng; g++) {
                if (g + 1 < ng)
                    group_tiles(cbuf + 1024 * ((g + 1) & 1), a0 + 1024 * (g + 1),
                                b0 + (size_t)(g + 1) * 512, b1 + (size_t)(g + 1) * 512, np, sgn);
                __m512 A[2], B[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
                for (int i = 0; i < np; i++) {
                    const uint8_t *gp = panel[i] + (size_t)g * gb;
                    A[i] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + qb)));
                    if (q4k)
                        B[i] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gp + qb + 32)));
                }
                const int32_t *cb = cbuf + 1024 * (g & 1);
                /* constant np and kind: the scaling loop unrolls without branches */
                if (np == 2 && !q4k)
                    group_scale(acc, cb, dT + 32 * g, sT + 32 * g, A, B, 2, false);
                else if (np == 2)
                    group_scale(acc, cb, dT + 32 * g, sT + 32 * g, A, B, 2, true);
                else
                    group_scale(acc, cb, dT + 32 * g, sT + 32 * g, A, B, 1, q4k);
            }
            int rows = T - tb < 32 ? T - tb : 32;
            for (int t = 0; t < rows; t++)
                for (int i = 0; i < np; i++)
                    _mm512_storeu_ps(y + (size_t)(tb + t) * (size_t)ldy + 16 * (p + i),
                                     _mm512_load_ps(acc + (size_t)t * 32 + 16 * i));
        }
    }
    _tile_release();
}

int inf_amx_selftest(void) {
    const inf_cpu_features *f = inf_cpu_features_get();
    if (!f->amx_permitted) return -1;
    inf_tile_config back __attribute__((aligned(64)));
    memset(&back, 0xff, sizeof back);
    load_cfg();
    _tile_storeconfig(&back);
    int ok = back.palette == 1 && back.colsb[0] == 64 && back.rows[7] == 16 && back.colsb[7] == 64;
    /* one tile product: A = all 1.0, B = all 2.0 -> C = 32 * 2 = 64 */
    uint16_t a[16 * 32] __attribute__((aligned(64))), b[16 * 32] __attribute__((aligned(64)));
    float c[256] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 32; i++)
        a[i] = 0x3f80, b[i] = 0x4000;
    _tile_zero(0);
    _tile_loadd(4, a, 64);
    _tile_loadd(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_stored(0, c, 64);
    _tile_release();
    for (int i = 0; i < 256; i++)
        ok &= c[i] == 64.0f;
    return ok ? 0 : -1;
}

bool inf_amx_int8_kind(inf_pack_kind kind) {
    return kind == INF_PACK_Q8_0 || kind == INF_PACK_Q4_0 || kind == INF_PACK_Q4_K;
}

void inf_kernels_fill_amx(inf_kernels *k) {
    if (inf_amx_selftest() != 0) return;
    k->matmul_amx = amx_matmul;
    k->amx_scratch_bytes = amx_scratch_bytes;
    k->pack_kinds = INF_PACK_KINDS_AMX;
    inf_kernels_fill_amx_attn(k);
}
