/* Load-time repacking of weights into 16-row panels (layouts in kernels.h).
 * Scalar code, the reference: the levels' pack_panels (pack_avx2.c) give the
 * same bytes faster, and fall back to this for the types they lack. */
#include <string.h>

#include "backend/arena.h"
#include "backend/kernels.h"
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
 * (w = A (q - 32)). Where A is a product of two stored factors (K-quant
 * sub-block scales) it is rounded to f16 once, as for Q4_K and Q6_K. ---- */

typedef void (*fetch_fn)(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B);

static void fetch_q8_0(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q8_0 *b = (const inf_block_q8_0 *)row + g;
    for (int k = 0; k < 32; k += 4) { /* + 128 per byte: the sign bit flipped */
        uint32_t v;
        memcpy(&v, b->qs + k, 4);
        v ^= 0x80808080u;
        memcpy(q + k, &v, 4);
    }
    *A = b->d;
}

static void fetch_q5_0(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q5_0 *b = (const inf_block_q5_0 *)row + g;
    for (int k = 0; k < 16; k++) {
        int lo = (b->qs[k] & 0xF) | ((b->qh[k / 8] >> (k % 8)) & 1) << 4;
        int hi = (b->qs[k] >> 4) | ((b->qh[(k + 16) / 8] >> (k % 8)) & 1) << 4;
        q[k] = (uint8_t)(lo - 16 + 128);
        q[k + 16] = (uint8_t)(hi - 16 + 128);
    }
    *A = b->d;
}

/* IQ4_NL / IQ4_XS as their 4-bit indices into inf_iq4nl_values (the IQ4 kind) */
static void fetch_iq4_nl_idx(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_iq4_nl *b = (const inf_block_iq4_nl *)row + g;
    for (int k = 0; k < 16; k++) {
        q[k] = b->qs[k] & 0xF;
        q[k + 16] = b->qs[k] >> 4;
    }
    *A = b->d;
}

static void fetch_iq4_xs_idx(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_iq4_xs *b = (const inf_block_iq4_xs *)row + g / 8;
    const int s = (int)(g % 8);
    const int ls = ((b->scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | ((b->scales_h >> (2 * s)) & 3)
                                                                       << 4;
    const uint8_t *qs = b->qs + 16 * s;
    for (int k = 0; k < 16; k++) {
        q[k] = qs[k] & 0xF;
        q[k + 16] = qs[k] >> 4;
    }
    *A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)(ls - 32));
}

/* the same as values + 128 (the Q8_0 kind, for levels without the IQ4 kind) */
static void fetch_iq4_nl(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    fetch_iq4_nl_idx(row, g, q, A, B);
    for (int k = 0; k < 32; k++)
        q[k] = (uint8_t)(inf_iq4nl_values[q[k]] + 128);
}

static void fetch_iq4_xs(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    fetch_iq4_xs_idx(row, g, q, A, B);
    for (int k = 0; k < 32; k++)
        q[k] = (uint8_t)(inf_iq4nl_values[q[k]] + 128);
}

static void fetch_q4_0(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q4_0 *b = (const inf_block_q4_0 *)row + g;
    for (int k = 0; k < 16; k++) {
        q[k] = b->qs[k] & 0xF;
        q[k + 16] = b->qs[k] >> 4;
    }
    *A = b->d;
}

static void fetch_q4_1(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q4_1 *b = (const inf_block_q4_1 *)row + g;
    for (int k = 0; k < 16; k++) {
        q[k] = b->qs[k] & 0xF;
        q[k + 16] = b->qs[k] >> 4;
    }
    *A = b->d;
    *B = (uint16_t)(b->m ^ 0x8000); /* w = d q + m = A q - (-m): a sign flip, exact */
}

static void fetch_q4_K(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q4_K *b = (const inf_block_q4_K *)row + g / 8;
    int sub = (int)(g % 8), sc, m;
    q4k_scale_min(b->scales, sub, &sc, &m);
    const uint8_t *qs = b->qs + 32 * (sub / 2);
    for (int k = 0; k < 32; k++)
        q[k] = (sub & 1) ? qs[k] >> 4 : qs[k] & 0xF;
    *A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)sc);
    *B = inf_f32_to_f16(inf_f16_to_f32(b->dmin) * (float)m);
}

static void fetch_q5_K(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q5_K *b = (const inf_block_q5_K *)row + g / 8;
    int sub = (int)(g % 8), sc, m;
    q4k_scale_min(b->scales, sub, &sc, &m);
    const uint8_t *qs = b->qs + 32 * (sub / 2);
    for (int k = 0; k < 32; k++) { /* bit 4 of weight 32 sub + k: bit sub of qh[k] */
        const int lo = (sub & 1) ? qs[k] >> 4 : qs[k] & 0xF;
        q[k] = (uint8_t)(lo | ((b->qh[k] >> sub) & 1) << 4);
    }
    *A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)sc);
    *B = inf_f32_to_f16(inf_f16_to_f32(b->dmin) * (float)m);
}

static void fetch_q5_1(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q5_1 *b = (const inf_block_q5_1 *)row + g;
    for (int k = 0; k < 16; k++) {
        q[k] = (uint8_t)((b->qs[k] & 0xF) | ((b->qh[k / 8] >> (k % 8)) & 1) << 4);
        q[k + 16] = (uint8_t)((b->qs[k] >> 4) | ((b->qh[(k + 16) / 8] >> (k % 8)) & 1) << 4);
    }
    *A = b->d;
    *B = (uint16_t)(b->m ^ 0x8000); /* w = d q + m = A q - (-m): a sign flip, exact */
}

/* Q5_0 as the Q5_K kind: w = d q - 16 d (16 d is exact in f16) */
static void fetch_q5_0_k(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    fetch_q5_0(row, g, q, A, B);
    for (int k = 0; k < 32; k++)
        q[k] = (uint8_t)(q[k] - 128 + 16);
    *B = inf_f32_to_f16(16.0f * inf_f16_to_f32(*A));
}

static void fetch_q6_K(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q6_K *b = (const inf_block_q6_K *)row + g / 16;
    int s = (int)(g % 16);
    for (int i = 0; i < 16; i++) {
        int k = 16 * s + i, half = k / 128, kk = k % 128, quad = kk / 32, l = kk % 32;
        const uint8_t *ql = b->ql + 64 * half, *qh = b->qh + 32 * half;
        int lo = (quad & 1) ? ql[l + 32] : ql[l];
        lo = (quad & 2) ? lo >> 4 : lo & 0xF;
        q[i] = (uint8_t)(lo | (((qh[l] >> (2 * quad)) & 3) << 4));
    }
    *A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)b->scales[s]);
}

static void fetch_q3_K(const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A, uint16_t *B) {
    const inf_block_q3_K *b = (const inf_block_q3_K *)row + g / 16;
    const int s = (int)(g % 16);
    const int lo4 = s < 8 ? b->scales[s] & 0xF : b->scales[s - 8] >> 4;
    const int sc = lo4 | ((b->scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
    for (int i = 0; i < 16; i++) {
        const int k = 16 * s + i;
        const int low2 = (b->qs[32 * (k / 128) + k % 32] >> (2 * ((k % 128) / 32))) & 3;
        const int v = low2 - ((b->hmask[k % 32] >> (k / 32)) & 1 ? 0 : 4); /* -4..3 */
        q[i] = (uint8_t)(v + 32);
    }
    *A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)(sc - 32));
}

/* per type: its kind and fetch, and a second kind for levels that lack the first */
typedef struct pack_row {
    inf_pack_kind kind;
    fetch_fn fetch; /* NULL for BF16 (copied as is) */
    inf_pack_kind alt;
    fetch_fn alt_fetch;
} pack_row;

static const pack_row pack_rows[INF_DTYPE_COUNT] = {
    [INF_BF16] = {INF_PACK_BF16, NULL},
    [INF_Q8_0] = {INF_PACK_Q8_0, fetch_q8_0},
    [INF_Q5_0] = {INF_PACK_Q5_K, fetch_q5_0_k, INF_PACK_Q8_0, fetch_q5_0},
    [INF_IQ4_NL] = {INF_PACK_IQ4, fetch_iq4_nl_idx, INF_PACK_Q8_0, fetch_iq4_nl},
    [INF_IQ4_XS] = {INF_PACK_IQ4, fetch_iq4_xs_idx, INF_PACK_Q8_0, fetch_iq4_xs},
    [INF_Q4_0] = {INF_PACK_Q4_0, fetch_q4_0},
    [INF_Q4_1] = {INF_PACK_Q4_K, fetch_q4_1},
    [INF_Q4_K] = {INF_PACK_Q4_K, fetch_q4_K},
    [INF_Q6_K] = {INF_PACK_Q6_K, fetch_q6_K},
    [INF_Q3_K] = {INF_PACK_Q6_K, fetch_q3_K},
    [INF_Q5_K] = {INF_PACK_Q5_K, fetch_q5_K},
    [INF_Q5_1] = {INF_PACK_Q5_K, fetch_q5_1},
};

/* the kind and fetch this type packs as under `allowed`; kind 0: none */
static inf_pack_kind pack_choice(inf_dtype type, unsigned allowed, fetch_fn *fetch) {
    if ((unsigned)type >= INF_DTYPE_COUNT) return 0;
    const pack_row *r = &pack_rows[type];
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
    [INF_PACK_BF16] = {32, 1024}, [INF_PACK_Q8_0] = {32, 544}, [INF_PACK_Q4_0] = {32, 288},
    [INF_PACK_Q4_K] = {32, 320},  [INF_PACK_Q6_K] = {16, 224}, [INF_PACK_Q5_K] = {32, 384},
    [INF_PACK_IQ4] = {32, 288},
};

bool inf_pack_plan(inf_packed *p, const inf_weight *w, unsigned allowed) {
    *p = (inf_packed){0};
    fetch_fn fetch = NULL;
    const inf_pack_kind kind = pack_choice(w->t->type, allowed, &fetch);
    if (!kind) return false;
    const int group = kinds[kind].group;
    if (w->n_in % group || w->n_out < INF_PANEL) return false;
    p->kind = kind;
    p->group = group;
    p->n_panels = w->n_out / INF_PANEL;
    p->n_groups = w->n_in / group;
    p->group_bytes = kinds[kind].bytes;
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
    uint8_t q[INF_PANEL][32];
    uint16_t A[INF_PANEL], B[INF_PANEL];
    for (int r = 0; r < INF_PANEL; r++)
        fetch(base + (size_t)r * w->row_bytes, g, q[r], &A[r], &B[r]);
    size_t qbytes;
    if (p->kind == INF_PACK_Q8_0) {
        for (int c = 0; c < 8; c++)
            for (int r = 0; r < 16; r++)
                store32(dst + 64 * c + 4 * r, load32(q[r] + 4 * c));
        qbytes = 512;
    } else {
        const int nchunks = p->group / 8;
        for (int c = 0; c < nchunks; c++)
            for (int r = 0; r < 16; r++) {
                const uint32_t lo = load32(q[r] + 8 * c), hi = load32(q[r] + 8 * c + 4);
                store32(dst + 64 * c + 4 * r, (lo & 0x0F0F0F0Fu) | (hi & 0x0F0F0F0Fu) << 4);
            }
        qbytes = 64 * (size_t)nchunks;
        if (p->kind == INF_PACK_Q5_K) {
            for (int r = 0; r < 16; r++) {
                uint32_t h = 0;
                for (int c = 0; c < 4; c++) {
                    h |= ((load32(q[r] + 8 * c) >> 4) & 0x01010101u) << c;
                    h |= ((load32(q[r] + 8 * c + 4) >> 4) & 0x01010101u) << (4 + c);
                }
                store32(dst + 256 + 4 * r, h);
            }
            qbytes = 320;
        }
        if (p->kind == INF_PACK_Q6_K) {
            /* byte j of lane r: bits 2i..2i+1 = the high bits of k = 4i + j */
            for (int r = 0; r < 16; r++) {
                uint32_t h = 0;
                for (int i = 0; i < 4; i++)
                    h |= ((load32(q[r] + 4 * i) >> 4) & 0x03030303u) << (2 * i);
                store32(dst + 128 + 4 * r, h);
            }
            qbytes = 192;
        }
    }
    memcpy(dst + qbytes, A, sizeof A);
    if (p->kind == INF_PACK_Q4_K || p->kind == INF_PACK_Q5_K)
        memcpy(dst + qbytes + sizeof A, B, sizeof B);
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
