/* Load-time repacking of weights into 16-row panels (layouts in kernels.h).
 * Scalar code, the reference: the levels' pack_panels (pack_avx2.c) give the
 * same bytes faster, and fall back to this for the types they lack. */
#include <string.h>

#include "backend/arena.h"
#include "backend/kernels.h"
#include "quant/grids.h"
#include "util/half.h"
#include "util/mem.h"

/* Q4_K's 6-bit scale and min of sub-block j (ggml's packing of scales[12]). */
static void q4k_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* ---- per weight type: which packed kind it runs as, and how one row's group g
 * reads: q[k] in the kind's unsigned form, the per-row scale A (and offset
 * scale B for Q4_K's kind) as f16 bits. Types whose values are small integers
 * times one scale per group share the kinds' kernels: Q5_0, IQ4_NL and IQ4_XS
 * run as Q8_0 (w = A (q - 128)), Q4_1 as Q4_K (w = A q - B), Q3_K as Q6_K
 * (w = d sc (q - 32)) where a level lacks Q3_KS, the grid types as IQ4S (IQ3_XXS and
 * IQ3_S as Q6_K where a level lacks it). Where A is a product of
 * two stored factors (Q4_K's sub-block scales as the Q4_K kind, IQ4_XS's) it is rounded to f16
 * once; the Q6_K, Q4_KS, Q5_KS, Q3_KS and Q2_KS kinds keep the factors apart (A = d, sc = the
 * sub-block scales; Q4_KS, Q5_KS, Q3_KS and Q2_KS: sc = the file's packed scale bytes, Q4_KS, Q5_KS
 * and Q2_KS: B = dmin). ---- */

typedef struct fetched {
    uint8_t q[256]; /* the group's values: 32, or 256 for the super-block kinds */
    uint16_t A, B;
    int8_t sc[16]; /* the Q6_K kind: per sub-group of 16; Q4_KS, Q5_KS, Q3_KS: the file's 12 scale
                      bytes; Q2_KS: its 16 */
} fetched;

typedef void (*fetch_fn)(const uint8_t *row, int64_t g, fetched *f);

static void fetch_q8_0(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q8_0 *b = (const inf_block_q8_0 *)row + g;
    for (int k = 0; k < 32; k += 4) { /* + 128 per byte: the sign bit flipped */
        uint32_t v;
        memcpy(&v, b->qs + k, 4);
        v ^= 0x80808080u;
        memcpy(f->q + k, &v, 4);
    }
    f->A = b->d;
}

static void fetch_q5_0(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q5_0 *b = (const inf_block_q5_0 *)row + g;
    for (int k = 0; k < 16; k++) {
        int lo = (b->qs[k] & 0xF) | ((b->qh[k / 8] >> (k % 8)) & 1) << 4;
        int hi = (b->qs[k] >> 4) | ((b->qh[(k + 16) / 8] >> (k % 8)) & 1) << 4;
        f->q[k] = (uint8_t)(lo - 16 + 128);
        f->q[k + 16] = (uint8_t)(hi - 16 + 128);
    }
    f->A = b->d;
}

/* IQ4_NL / IQ4_XS as their 4-bit indices into inf_iq4nl_values (the IQ4 kind) */
static void fetch_iq4_nl_idx(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq4_nl *b = (const inf_block_iq4_nl *)row + g;
    for (int k = 0; k < 16; k++) {
        f->q[k] = b->qs[k] & 0xF;
        f->q[k + 16] = b->qs[k] >> 4;
    }
    f->A = b->d;
}

static void fetch_iq4_xs_idx(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq4_xs *b = (const inf_block_iq4_xs *)row + g / 8;
    const int s = (int)(g % 8);
    const int ls = ((b->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((b->scales_h >> (2 * s)) & 3)
                                                                       << 4;
    const uint8_t *qs = b->qs + 16 * s;
    for (int k = 0; k < 16; k++) {
        f->q[k] = qs[k] & 0xF;
        f->q[k + 16] = qs[k] >> 4;
    }
    f->A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)(ls - 32));
}

/* the same as values + 128 (the Q8_0 kind, for levels without the IQ4 kind) */
static void fetch_iq4_nl(const uint8_t *row, int64_t g, fetched *f) {
    fetch_iq4_nl_idx(row, g, f);
    for (int k = 0; k < 32; k++)
        f->q[k] = (uint8_t)(inf_iq4nl_values[f->q[k]] + 128);
}

static void fetch_iq4_xs(const uint8_t *row, int64_t g, fetched *f) {
    fetch_iq4_xs_idx(row, g, f);
    for (int k = 0; k < 32; k++)
        f->q[k] = (uint8_t)(inf_iq4nl_values[f->q[k]] + 128);
}

static void fetch_q4_0(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q4_0 *b = (const inf_block_q4_0 *)row + g;
    for (int k = 0; k < 16; k++) {
        f->q[k] = b->qs[k] & 0xF;
        f->q[k + 16] = b->qs[k] >> 4;
    }
    f->A = b->d;
}

static void fetch_q4_1(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q4_1 *b = (const inf_block_q4_1 *)row + g;
    for (int k = 0; k < 16; k++) {
        f->q[k] = b->qs[k] & 0xF;
        f->q[k + 16] = b->qs[k] >> 4;
    }
    f->A = b->d;
    f->B = (uint16_t)(b->m ^ 0x8000); /* w = d q + m = A q - (-m): a sign flip, exact */
}

static void fetch_q4_K(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q4_K *b = (const inf_block_q4_K *)row + g / 8;
    int sub = (int)(g % 8), sc, m;
    q4k_scale_min(b->scales, sub, &sc, &m);
    const uint8_t *qs = b->qs + 32 * (sub / 2);
    for (int k = 0; k < 32; k++)
        f->q[k] = (sub & 1) ? qs[k] >> 4 : qs[k] & 0xF;
    f->A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)sc);
    f->B = inf_f32_to_f16(inf_f16_to_f32(b->dmin) * (float)m);
}

/* Q4_K as the Q4_KS kind, a whole super-block g: A = d, B = dmin, the scale bytes as they are */
static void fetch_q4_K_sb(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q4_K *b = (const inf_block_q4_K *)row + g;
    /* sub-block s = k / 32: nibble s % 2 of qs[32 (s / 2) + k % 32] */
    for (int k = 0; k < 256; k++) {
        const uint8_t byte = b->qs[32 * (k / 64) + k % 32];
        f->q[k] = (k / 32) % 2 ? byte >> 4 : byte & 0xF;
    }
    memcpy(f->sc, b->scales, 12);
    f->A = b->d;
    f->B = b->dmin;
}

/* Q5_K as the Q5_KS kind, the same way */
static void fetch_q5_K_sb(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q5_K *b = (const inf_block_q5_K *)row + g;
    for (int k = 0; k < 256; k++) { /* bit 4 of weight 32 sub + l: bit sub of qh[l] */
        const int sub = k / 32, l = k % 32;
        const uint8_t byte = b->qs[32 * (sub / 2) + l];
        const int lo = sub % 2 ? byte >> 4 : byte & 0xF;
        f->q[k] = (uint8_t)(lo | ((b->qh[l] >> sub) & 1) << 4);
    }
    memcpy(f->sc, b->scales, 12);
    f->A = b->d;
    f->B = b->dmin;
}

static void fetch_q5_1(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q5_1 *b = (const inf_block_q5_1 *)row + g;
    for (int k = 0; k < 16; k++) {
        f->q[k] = (uint8_t)((b->qs[k] & 0xF) | ((b->qh[k / 8] >> (k % 8)) & 1) << 4);
        f->q[k + 16] = (uint8_t)((b->qs[k] >> 4) | ((b->qh[(k + 16) / 8] >> (k % 8)) & 1) << 4);
    }
    f->A = b->d;
    f->B = (uint16_t)(b->m ^ 0x8000); /* w = d q + m = A q - (-m): a sign flip, exact */
}

/* Q5_0 as the Q5_K kind: w = d q - 16 d (16 d is exact in f16) */
static void fetch_q5_0_k(const uint8_t *row, int64_t g, fetched *f) {
    fetch_q5_0(row, g, f);
    for (int k = 0; k < 32; k++)
        f->q[k] = (uint8_t)(f->q[k] - 128 + 16);
    f->B = inf_f32_to_f16(16.0f * inf_f16_to_f32(f->A));
}

/* Q6_K and Q3_K, a whole super-block g: A = d, sc = the 16 sub-block scales */
static void fetch_q6_K(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q6_K *b = (const inf_block_q6_K *)row + g;
    for (int k = 0; k < 256; k++) {
        int half = k / 128, kk = k % 128, quad = kk / 32, l = kk % 32;
        const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
        int lo = (quad & 1) ? ql[l + 32] : ql[l];
        lo = (quad & 2) ? lo >> 4 : lo & 0xF;
        f->q[k] = (uint8_t)(lo | (((qh[l] >> (2 * quad)) & 3) << 4));
    }
    memcpy(f->sc, b->scales, 16);
    f->A = b->d;
}

/* Q3_K as the Q3_KS kind, a whole super-block g: q = the 3-bit value + 4 (0..7), A = d,
 * the scale bytes as they are */
static void fetch_q3_K_sb(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q3_K *b = (const inf_block_q3_K *)row + g;
    for (int k = 0; k < 256; k++) {
        const int low2 = (b->qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
        f->q[k] = (uint8_t)(low2 | ((b->hmask[k % 32] >> (k / 32)) & 1) << 2);
    }
    memcpy(f->sc, b->scales, 12);
    f->A = b->d;
}

/* Q2_K as the Q2_KS kind, a whole super-block g: q = the 2-bit value, A = d,
 * B = dmin, the scale bytes as they are */
static void fetch_q2_K_sb(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_q2_K *b = (const inf_block_q2_K *)row + g;
    for (int k = 0; k < 256; k++)
        f->q[k] = (uint8_t)((b->qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3);
    memcpy(f->sc, b->scales, 16);
    f->A = b->d;
    f->B = b->dmin;
}

/* Q3_K as the Q6_K kind: the values q - 4 + 32, the 16 sub-block scales unpacked (sc - 32) */
static void fetch_q3_K(const uint8_t *row, int64_t g, fetched *f) {
    fetch_q3_K_sb(row, g, f);
    uint8_t s[12];
    memcpy(s, f->sc, 12);
    for (int j = 0; j < 16; j++) {
        const int lo4 = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        f->sc[j] = (int8_t)((lo4 | ((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32);
    }
    for (int k = 0; k < 256; k++)
        f->q[k] = (uint8_t)(f->q[k] + 28);
}

/* The grid types IQ3_XXS, IQ3_S and IQ2_S (IQ2_XXS and IQ2_XS as IQ2_S; IQ1_S
 * and IQ1_M below), a whole super-block g: each weight is d * f * grid * sign with one factor f per
 * 16 or 32 (IQ3_XXS: (0.5 + ls) / 2 = (2 ls + 1) / 4; IQ3_S: 1 + 2 ls; IQ2_S: (0.5 + ls) / 4 = (2
 * ls + 1) / 8) and a grid magnitude (IQ3_XXS: 4 .. 62, all even; IQ3_S: 1 .. 15; IQ2_S: 8, 25, 43).
 * So A = d, sc = 2 ls + 1 and the values are sign * grid (IQ3_XXS: halved), the panels holding the
 * weights times 2 (IQ3_XXS) or 8 (IQ2_S), which inf_packed.post takes back: every product is exact
 * in f32, and so is a power of two times a matmul's sums (d / 2 or d / 8 would be no f16 where d is
 * a small subnormal). The fetches give the signed values; the IQ4S kind packs their indices into
 * the type's 16 values, the Q6_K kind (IQ3 only: |value| <= 31) the values + 32. */
static const int8_t iq3_xxs_values[16] = {2,  6,  10,  14,  18,  22,  26,  31,
                                          -2, -6, -10, -14, -18, -22, -26, -31};
static const int8_t iq3_s_values[16] = {1,  3,  5,  7,  9,  11,  13,  15,
                                        -1, -3, -5, -7, -9, -11, -13, -15};
static const int8_t iq2_s_values[16] = {8, 25, 43, 0, 0, 0, 0, 0, -8, -25, -43, 0, 0, 0, 0, 0};
static const int8_t iq1_values[16] = {1, 7, 9, 0, 0, 0, 0, 0, -1, -7, -9, 0, 0, 0, 0, 0};

static void put_signed_grid(uint8_t *q, uint64_t grid, unsigned signs, int n, int shift) {
    for (int j = 0; j < n; j++) {
        const int v = (int)((grid >> (8 * j)) & 0xFF) >> shift;
        q[j] = (uint8_t)(int8_t)((signs >> j) & 1 ? -v : v);
    }
}

static void iq3_xxs_signed(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq3_xxs *b = (const inf_block_iq3_xxs *)row + g;
    for (int s = 0; s < 8; s++) {
        uint32_t aux;
        memcpy(&aux, b->qs + 64 + 4 * s, 4);
        f->sc[2 * s] = f->sc[2 * s + 1] = (int8_t)(2 * (aux >> 28) + 1);
        for (int l = 0; l < 4; l++) {
            const unsigned sg = inf_iq_even_signs((aux >> (7 * l)) & 127);
            uint8_t *q = f->q + 32 * s + 8 * l;
            put_signed_grid(q, inf_iq3xxs_grid[b->qs[8 * s + 2 * l]], sg, 4, 1);
            put_signed_grid(q + 4, inf_iq3xxs_grid[b->qs[8 * s + 2 * l + 1]], sg >> 4, 4, 1);
        }
    }
    f->A = b->d;
}

static void iq3_s_signed(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq3_s *b = (const inf_block_iq3_s *)row + g;
    for (int s = 0; s < 8; s++) {
        const int ls = (b->scales[s / 2] >> (4 * (s % 2))) & 0xF;
        f->sc[2 * s] = f->sc[2 * s + 1] = (int8_t)(2 * ls + 1);
        for (int l = 0; l < 4; l++) {
            const int i0 = b->qs[8 * s + 2 * l] | ((b->qh[s] >> (2 * l)) & 1) << 8,
                      i1 = b->qs[8 * s + 2 * l + 1] | ((b->qh[s] >> (2 * l + 1)) & 1) << 8;
            const unsigned sg = b->signs[4 * s + l];
            put_signed_grid(f->q + 32 * s + 8 * l, inf_iq3s_grid[i0], sg, 4, 0);
            put_signed_grid(f->q + 32 * s + 8 * l + 4, inf_iq3s_grid[i1], sg >> 4, 4, 0);
        }
    }
    f->A = b->d;
}

static void iq2_s_signed(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq2_s *b = (const inf_block_iq2_s *)row + g;
    for (int s = 0; s < 8; s++) {
        f->sc[2 * s] = (int8_t)(2 * (b->scales[s] & 0xF) + 1);
        f->sc[2 * s + 1] = (int8_t)(2 * (b->scales[s] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            const int i = b->qs[4 * s + l] | ((b->qh[s] >> (2 * l)) & 3) << 8;
            put_signed_grid(f->q + 32 * s + 8 * l, inf_iq2s_grid[i], b->qs[32 + 4 * s + l], 8, 0);
        }
    }
    f->A = b->d;
}

static void iq2_xxs_signed(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq2_xxs *b = (const inf_block_iq2_xxs *)row + g;
    for (int s = 0; s < 8; s++) {
        uint32_t aux[2];
        memcpy(aux, b->qs + 4 * s, 8);
        f->sc[2 * s] = f->sc[2 * s + 1] = (int8_t)(2 * (aux[1] >> 28) + 1);
        for (int l = 0; l < 4; l++)
            put_signed_grid(f->q + 32 * s + 8 * l, inf_iq2xxs_grid[(aux[0] >> (8 * l)) & 0xFF],
                            inf_iq_even_signs((aux[1] >> (7 * l)) & 127), 8, 0);
    }
    f->A = b->d;
}

static void iq2_xs_signed(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq2_xs *b = (const inf_block_iq2_xs *)row + g;
    for (int s = 0; s < 8; s++) {
        f->sc[2 * s] = (int8_t)(2 * (b->scales[s] & 0xF) + 1);
        f->sc[2 * s + 1] = (int8_t)(2 * (b->scales[s] >> 4) + 1);
        for (int l = 0; l < 4; l++) {
            const uint16_t q = b->qs[4 * s + l];
            put_signed_grid(f->q + 32 * s + 8 * l, inf_iq2xs_grid[q & 511],
                            inf_iq_even_signs(q >> 9), 8, 0);
        }
    }
    f->A = b->d;
}

/* IQ1_S and IQ1_M: d * (2 ls + 1) * (grid + delta), grid -1, 0, 1 and delta
 * +-1/8 per 8 weights, as 8 grid + 8 delta (-9, -7, -1, 1, 7, 9) with post = 1/8 */
static void put_iq1_grid(uint8_t *q, uint64_t grid, bool minus) {
    for (int j = 0; j < 8; j++)
        q[j] = (uint8_t)(int8_t)(8 * (int8_t)(uint8_t)(grid >> (8 * j)) + (minus ? -1 : 1));
}

static void iq1_s_signed(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq1_s *b = (const inf_block_iq1_s *)row + g;
    for (int s = 0; s < 8; s++) {
        const unsigned qh = b->qh[s];
        f->sc[2 * s] = f->sc[2 * s + 1] = (int8_t)(2 * ((qh >> 12) & 7) + 1);
        for (int l = 0; l < 4; l++)
            put_iq1_grid(f->q + 32 * s + 8 * l,
                         inf_iq1s_grid[b->qs[4 * s + l] | ((qh >> (3 * l)) & 7) << 8], qh & 0x8000);
    }
    f->A = b->d;
}

static void iq1_m_signed(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_iq1_m *b = (const inf_block_iq1_m *)row + g;
    uint16_t sc[4];
    memcpy(sc, b->scales, 8);
    for (int s = 0; s < 8; s++) {
        f->sc[2 * s] = (int8_t)(2 * ((sc[s / 2] >> (6 * (s % 2))) & 7) + 1);
        f->sc[2 * s + 1] = (int8_t)(2 * ((sc[s / 2] >> (6 * (s % 2) + 3)) & 7) + 1);
        for (int l = 0; l < 4; l++) {
            const unsigned h = (b->qh[2 * s + l / 2] >> (4 * (l % 2))) & 0xF;
            put_iq1_grid(f->q + 32 * s + 8 * l, inf_iq1s_grid[b->qs[4 * s + l] | (h & 7) << 8],
                         h & 8);
        }
    }
    f->A = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) |
                      (sc[3] & 0xF000));
}

/* the IQ4S kind: the signed values as indices into values[16] (each value there once) */
static void signed_to_index(fetched *f, const int8_t values[16]) {
    uint8_t index[256] = {0};
    for (int j = 15; j >= 0; j--) /* a padding value repeated: its first index */
        index[(uint8_t)values[j]] = (uint8_t)j;
    for (int k = 0; k < 256; k++)
        f->q[k] = index[f->q[k]];
}

/* the Q6_K kind's q = value + 32 */
static void fetch_iq3_xxs_q6(const uint8_t *row, int64_t g, fetched *f) {
    iq3_xxs_signed(row, g, f);
    for (int k = 0; k < 256; k++)
        f->q[k] = (uint8_t)(f->q[k] + 32);
}

static void fetch_iq3_s_q6(const uint8_t *row, int64_t g, fetched *f) {
    iq3_s_signed(row, g, f);
    for (int k = 0; k < 256; k++)
        f->q[k] = (uint8_t)(f->q[k] + 32);
}

/* MXFP4 as the IQ4 kind: its 4-bit indices into the doubled e2m1 values
 * (inf_fp4_values), A = 2^(e - 128) as f16 (inf_mxfp4_scale_f16) */
static void fetch_mxfp4_idx(const uint8_t *row, int64_t g, fetched *f) {
    const inf_block_mxfp4 *b = (const inf_block_mxfp4 *)row + g;
    for (int j = 0; j < 16; j++) {
        f->q[j] = b->qs[j] & 0xF;
        f->q[j + 16] = b->qs[j] >> 4;
    }
    f->A = inf_mxfp4_scale_f16(b->e);
}

/* the same as values + 128 (the Q8_0 kind, for levels without the IQ4 kind) */
static void fetch_mxfp4(const uint8_t *row, int64_t g, fetched *f) {
    fetch_mxfp4_idx(row, g, f);
    for (int k = 0; k < 32; k++)
        f->q[k] = (uint8_t)(inf_fp4_values[f->q[k]] + 128);
}

/* whether the kinds hold every block of an MXFP4 weight exactly */
static bool mxfp4_fits(const inf_weight *w) {
    for (int64_t o = 0; o < w->n_out; o++) {
        const inf_block_mxfp4 *b =
            (const inf_block_mxfp4 *)((const uint8_t *)w->t->data + (size_t)o * w->row_bytes);
        for (int64_t i = 0; i < w->n_in / 32; i++) {
            if (inf_mxfp4_scale_fits(b[i].e)) continue;
            for (int j = 0; j < 16; j++)
                if (b[i].qs[j] & 0x77) return false; /* a nonzero value */
        }
    }
    return true;
}

/* per type: its kind and fetch, and a second kind for levels that lack the
 * first; fits, where set, says whether the kinds hold this weight exactly */
typedef struct pack_row {
    inf_pack_kind kind;
    fetch_fn fetch; /* NULL for BF16 and F16 (their bits copied as they are) */
    inf_pack_kind alt;
    fetch_fn alt_fetch;
    bool (*fits)(const inf_weight *w);
    float post; /* the factor between the panels and the weights (inf_packed.post); 0: 1 */
    const int8_t *values; /* the IQ4 and IQ4S kinds' 16 values */
} pack_row;

static const pack_row pack_rows[INF_DTYPE_COUNT] = {
    [INF_BF16] = {INF_PACK_BF16, NULL},
    [INF_F16] = {INF_PACK_F16, NULL},
    [INF_Q8_0] = {INF_PACK_Q8_0, fetch_q8_0},
    [INF_Q5_0] = {INF_PACK_Q5_K, fetch_q5_0_k, INF_PACK_Q8_0, fetch_q5_0},
    [INF_IQ4_NL] = {INF_PACK_IQ4, fetch_iq4_nl_idx, INF_PACK_Q8_0, fetch_iq4_nl,
                    .values = inf_iq4nl_values},
    [INF_IQ4_XS] = {INF_PACK_IQ4, fetch_iq4_xs_idx, INF_PACK_Q8_0, fetch_iq4_xs,
                    .values = inf_iq4nl_values},
    [INF_Q4_0] = {INF_PACK_Q4_0, fetch_q4_0},
    [INF_Q4_1] = {INF_PACK_Q4_K, fetch_q4_1},
    [INF_Q4_K] = {INF_PACK_Q4_KS, fetch_q4_K_sb, INF_PACK_Q4_K, fetch_q4_K},
    [INF_Q6_K] = {INF_PACK_Q6_K, fetch_q6_K},
    [INF_Q3_K] = {INF_PACK_Q3_KS, fetch_q3_K_sb, INF_PACK_Q6_K, fetch_q3_K},
    [INF_Q2_K] = {INF_PACK_Q2_KS, fetch_q2_K_sb},
    [INF_Q5_K] = {INF_PACK_Q5_KS, fetch_q5_K_sb},
    [INF_Q5_1] = {INF_PACK_Q5_K, fetch_q5_1},
    [INF_MXFP4] = {INF_PACK_IQ4, fetch_mxfp4_idx, INF_PACK_Q8_0, fetch_mxfp4, .fits = mxfp4_fits,
                   .values = inf_fp4_values},
    [INF_IQ3_XXS] = {INF_PACK_IQ4S, iq3_xxs_signed, INF_PACK_Q6_K, fetch_iq3_xxs_q6, .post = 0.5f,
                     .values = iq3_xxs_values},
    [INF_IQ3_S] = {INF_PACK_IQ4S, iq3_s_signed, INF_PACK_Q6_K, fetch_iq3_s_q6,
                   .values = iq3_s_values},
    [INF_IQ2_S] = {INF_PACK_IQ4S, iq2_s_signed, .post = 0.125f, .values = iq2_s_values},
    [INF_IQ2_XXS] = {INF_PACK_IQ4S, iq2_xxs_signed, .post = 0.125f, .values = iq2_s_values},
    [INF_IQ2_XS] = {INF_PACK_IQ4S, iq2_xs_signed, .post = 0.125f, .values = iq2_s_values},
    [INF_IQ1_S] = {INF_PACK_IQ4S, iq1_s_signed, .post = 0.125f, .values = iq1_values},
    [INF_IQ1_M] = {INF_PACK_IQ4S, iq1_m_signed, .post = 0.125f, .values = iq1_values},
};

/* the kind and fetch w packs as under `allowed`; kind 0: none */
static inf_pack_kind pack_choice(const inf_weight *w, unsigned allowed, fetch_fn *fetch) {
    const inf_dtype type = w->t->type;
    if ((unsigned)type >= INF_DTYPE_COUNT) return 0;
    const pack_row *r = &pack_rows[type];
    if (r->fits && (r->kind || r->alt) && !r->fits(w)) return 0;
    if (r->kind && (allowed & INF_PACK_KIND_BIT(r->kind))) {
        *fetch = r->fetch;
        return r->kind;
    }
    if (r->alt && (allowed & INF_PACK_KIND_BIT(r->alt))) {
        *fetch = r->alt_fetch;
        return r->alt;
    }
    return 0;
}

/* per kind: k elements per group and bytes of one panel's group (layouts in kernels.h) */
static const struct {
    int group;
    size_t bytes;
} kinds[] = {
    [INF_PACK_BF16] = {32, 1024},   [INF_PACK_Q8_0] = {32, 544},    [INF_PACK_Q4_0] = {32, 288},
    [INF_PACK_Q4_K] = {32, 320},    [INF_PACK_Q6_K] = {256, 3360},  [INF_PACK_Q5_K] = {32, 384},
    [INF_PACK_IQ4] = {32, 288},     [INF_PACK_Q4_KS] = {256, 2304}, [INF_PACK_Q5_KS] = {256, 2816},
    [INF_PACK_Q3_KS] = {256, 1760}, [INF_PACK_F16] = {32, 1024},    [INF_PACK_Q2_KS] = {256, 1344},
    [INF_PACK_IQ4S] = {256, 2336},
};

bool inf_pack_plan(inf_packed *p, const inf_weight *w, unsigned allowed) {
    *p = (inf_packed){0};
    fetch_fn fetch = NULL;
    const inf_pack_kind kind = pack_choice(w, allowed, &fetch);
    if (!kind) return false;
    const int group = kinds[kind].group;
    if (w->n_in % group || w->n_out < INF_PANEL) return false;
    p->kind = kind;
    p->group = group;
    p->n_panels = w->n_out / INF_PANEL;
    p->n_groups = w->n_in / group;
    p->group_bytes = kinds[kind].bytes;
    const pack_row *r = &pack_rows[w->t->type];
    p->post = r->post ? r->post : 1.0f;
    if (kind == INF_PACK_IQ4 || kind == INF_PACK_IQ4S)
        memcpy(p->values, r->values, sizeof p->values);
    return true;
}

size_t inf_packed_bytes(const inf_packed *p) {
    return (size_t)p->n_panels * (size_t)p->n_groups * p->group_bytes;
}

int inf_pack_alloc(inf_packed **out, const inf_weight *w, unsigned allowed) {
    *out = NULL;
    inf_packed plan;
    if (!inf_pack_plan(&plan, w, allowed)) return 0;
    inf_packed *p = inf_alloc(sizeof *p);
    if (!p) return -1;
    *p = plan;
    /* in the arena: huge pages for every copy, however small (arena.h) */
    p->data = inf_arena_alloc(inf_packed_bytes(p), &p->chunk);
    if (!p->data) {
        inf_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

static inline uint32_t load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline void store32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}

/* Chunks c < n at dst + 64 c of 16 rows' values q[r] + k0: lane r byte j =
 * q[8c+j] in the low nibble, q[8c+4+j] in the high one (Q4_0's order). */
static void put_nibbles(uint8_t *dst, const fetched *f, int k0, int n) {
    for (int c = 0; c < n; c++)
        for (int r = 0; r < INF_PANEL; r++) {
            const uint8_t *q = f[r].q + k0 + 8 * c;
            const uint32_t lo = load32(q), hi = load32(q + 4);
            store32(dst + 64 * c + 4 * r, (lo & 0x0F0F0F0Fu) | (hi & 0x0F0F0F0Fu) << 4);
        }
}

/* The chunk at dst of 16 rows' fifth bits of values q[r] + k0 (the Q5_K
 * kind's): lane r byte j, bit c = bit 4 of q[8c+j], bit 4+c = of q[8c+4+j]. */
static void put_fifth_bits(uint8_t *dst, const fetched *f, int k0) {
    for (int r = 0; r < INF_PANEL; r++) {
        uint32_t h = 0;
        for (int c = 0; c < 4; c++) {
            h |= ((load32(f[r].q + k0 + 8 * c) >> 4) & 0x01010101u) << c;
            h |= ((load32(f[r].q + k0 + 8 * c + 4) >> 4) & 0x01010101u) << (4 + c);
        }
        store32(dst + 4 * r, h);
    }
}

/* The 64 bytes at dst of 16 rows' low bit pairs of values q[r] + k0 .. + 15
 * (the Q3_KS and Q2_KS kinds'): lane r byte j, bits 2i..2i+1 = q[4i+j] & 3. */
static void put_bit_pairs(uint8_t *dst, const fetched *f, int k0) {
    for (int r = 0; r < INF_PANEL; r++) {
        uint32_t lo = 0;
        for (int i = 0; i < 4; i++)
            lo |= (load32(f[r].q + k0 + 4 * i) & 0x03030303u) << (2 * i);
        store32(dst + 4 * r, lo);
    }
}

/* One panel's group g: 16 rows' 4-byte slices laid side by side per chunk
 * (kernels.h), 32-bit words at a time. */
static void pack_group(const inf_packed *p, const inf_weight *w, fetch_fn fetch, int64_t pi,
                       int64_t g, uint8_t *dst) {
    const uint8_t *base = (const uint8_t *)w->t->data + (size_t)(16 * pi) * w->row_bytes;
    if (p->kind == INF_PACK_BF16) {
        for (int r = 0; r < INF_PANEL; r++) {
            const uint8_t *row = base + (size_t)r * w->row_bytes + 64 * (size_t)g;
            for (int c = 0; c < 16; c++)
                store32(dst + 64 * c + 4 * r, load32(row + 4 * c));
        }
        return;
    }
    if (p->kind == INF_PACK_F16) { /* k-major: the 16 rows' value of one k side by side */
        for (int r = 0; r < INF_PANEL; r++) {
            const uint8_t *row = base + (size_t)r * w->row_bytes + 64 * (size_t)g;
            for (int c = 0; c < 32; c++)
                memcpy(dst + 32 * c + 2 * r, row + 2 * c, 2);
        }
        return;
    }
    fetched f[INF_PANEL];
    for (int r = 0; r < INF_PANEL; r++)
        fetch(base + (size_t)r * w->row_bytes, g, &f[r]);
    size_t qbytes = 256;
    switch (p->kind) {
    case INF_PACK_Q8_0:
        for (int c = 0; c < 8; c++)
            for (int r = 0; r < 16; r++)
                store32(dst + 64 * c + 4 * r, load32(f[r].q + 4 * c));
        qbytes = 512;
        break;
    case INF_PACK_Q6_K:
        for (int s = 0; s < 16; s++) {
            uint8_t *sd = dst + INF_Q6K_SUB_BYTES * s;
            put_nibbles(sd, f, 16 * s, 2);
            /* byte j of lane r: bits 2i..2i+1 = the high bits of k = 4i + j */
            for (int r = 0; r < 16; r++) {
                uint32_t h = 0;
                for (int i = 0; i < 4; i++)
                    h |= ((load32(f[r].q + 16 * s + 4 * i) >> 4) & 0x03030303u) << (2 * i);
                store32(sd + 128 + 4 * r, h);
                dst[INF_Q6K_SC_OFF + 16 * s + r] = (uint8_t)f[r].sc[s];
            }
        }
        for (int r = 0; r < INF_PANEL; r++)
            memcpy(dst + INF_Q6K_D_OFF + 2 * r, &f[r].A, 2);
        return;
    case INF_PACK_IQ4S: /* 16 sub-groups of 2 nibble chunks; scales, d */
        for (int r = 0; r < INF_PANEL; r++)
            signed_to_index(&f[r], p->values);
        for (int s = 0; s < 16; s++) {
            put_nibbles(dst + INF_IQ4S_SUB_BYTES * s, f, 16 * s, 2);
            for (int r = 0; r < INF_PANEL; r++)
                dst[INF_IQ4S_SC_OFF + 16 * s + r] = (uint8_t)f[r].sc[s];
        }
        for (int r = 0; r < INF_PANEL; r++)
            memcpy(dst + INF_IQ4S_D_OFF + 2 * r, &f[r].A, 2);
        return;
    case INF_PACK_Q2_KS: /* 16 sub-groups of bit pairs; scale pairs, d, dmin */
        for (int s = 0; s < 16; s++)
            put_bit_pairs(dst + INF_Q2KS_SUB_BYTES * s, f, 16 * s);
        for (int r = 0; r < INF_PANEL; r++) {
            for (int s = 0; s < 16; s++)
                dst[INF_Q2KS_SC_OFF + 32 * (s / 2) + 2 * r + s % 2] = (uint8_t)f[r].sc[s];
            memcpy(dst + INF_Q2KS_D_OFF + 2 * r, &f[r].A, 2);
            memcpy(dst + INF_Q2KS_DMIN_OFF + 2 * r, &f[r].B, 2);
        }
        return;
    case INF_PACK_Q3_KS: /* 16 sub-groups of low bit pairs and third-bit words; scale planes, d */
        for (int s = 0; s < 16; s++) {
            uint8_t *sd = dst + INF_Q3KS_SUB_BYTES * s;
            put_bit_pairs(sd, f, 16 * s);
            uint64_t hb[4] = {0};
            for (int r = 0; r < INF_PANEL; r++)
                for (int i = 0; i < 4; i++) {
                    const uint32_t q = load32(f[r].q + 16 * s + 4 * i);
                    for (int j = 0; j < 4; j++)
                        hb[i] |= (uint64_t)((q >> (8 * j + 2)) & 1) << (4 * r + j);
                }
            memcpy(sd + 64, hb, sizeof hb); /* little-endian words, as the kernels load them */
        }
        for (int r = 0; r < INF_PANEL; r++) {
            for (int j = 0; j < 12; j++)
                dst[INF_Q3KS_SC_OFF + 16 * j + r] = (uint8_t)f[r].sc[j];
            memcpy(dst + INF_Q3KS_D_OFF + 2 * r, &f[r].A, 2);
        }
        return;
    case INF_PACK_Q4_KS:
    case INF_PACK_Q5_KS: { /* 8 sub-groups as the Q4_K or Q5_K kind's; scale planes, d, dmin */
        const bool five = p->kind == INF_PACK_Q5_KS;
        const size_t sub = five ? INF_Q5KS_SUB_BYTES : INF_Q4KS_SUB_BYTES,
                     sc = five ? INF_Q5KS_SC_OFF : INF_Q4KS_SC_OFF,
                     d = five ? INF_Q5KS_D_OFF : INF_Q4KS_D_OFF,
                     dmin = five ? INF_Q5KS_DMIN_OFF : INF_Q4KS_DMIN_OFF;
        for (int s = 0; s < 8; s++) {
            put_nibbles(dst + sub * s, f, 32 * s, 4);
            if (five) put_fifth_bits(dst + sub * s + 256, f, 32 * s);
        }
        for (int r = 0; r < INF_PANEL; r++) {
            for (int j = 0; j < 12; j++)
                dst[sc + 16 * j + r] = (uint8_t)f[r].sc[j];
            memcpy(dst + d + 2 * r, &f[r].A, 2);
            memcpy(dst + dmin + 2 * r, &f[r].B, 2);
        }
        return;
    }
    case INF_PACK_Q5_K:
        put_nibbles(dst, f, 0, 4);
        put_fifth_bits(dst + 256, f, 0);
        qbytes = 320;
        break;
    default: /* Q4_0, Q4_K, IQ4 */
        put_nibbles(dst, f, 0, 4);
        break;
    }
    for (int r = 0; r < INF_PANEL; r++) {
        memcpy(dst + qbytes + 2 * r, &f[r].A, 2);
        if (p->kind == INF_PACK_Q4_K || p->kind == INF_PACK_Q5_K)
            memcpy(dst + qbytes + 32 + 2 * r, &f[r].B, 2);
    }
}

void inf_pack_panels(inf_packed *p, const inf_weight *w, int64_t pi0, int64_t pi1) {
    const pack_row *row = &pack_rows[w->t->type];
    const fetch_fn fetch = p->kind == row->kind ? row->fetch : row->alt_fetch;
    for (int64_t pi = pi0; pi < pi1; pi++)
        for (int64_t g = 0; g < p->n_groups; g++)
            pack_group(p, w, fetch, pi, g,
                       p->data + ((size_t)pi * (size_t)p->n_groups + (size_t)g) * p->group_bytes);
}

int inf_pack_weight(inf_packed **out, const inf_weight *w) {
    if (inf_pack_alloc(out, w, INF_PACK_KINDS_ALL)) return -1;
    if (*out) inf_pack_panels(*out, w, 0, (*out)->n_panels);
    return 0;
}

void inf_packed_free(inf_packed *p) {
    if (!p) return;
    inf_arena_release(p->chunk);
    inf_free(p);
}
