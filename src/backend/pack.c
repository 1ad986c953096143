/* Load-time repacking of weights into 16-row panels (layouts in kernels.h).
 * Scalar code: it runs once per weight, never per token. */
#include <string.h>
#include <sys/mman.h>

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

/* One row's group g: q[k] in the packed kernels' unsigned form, and the
 * per-row scale A (and offset scale B for Q4_K) as f16 bits. */
static void fetch_group(inf_pack_kind kind, const uint8_t *row, int64_t g, uint8_t *q, uint16_t *A,
                        uint16_t *B) {
    switch (kind) {
    case INF_PACK_Q8_0: {
        const inf_block_q8_0 *b = (const inf_block_q8_0 *)row + g;
        for (int k = 0; k < 32; k++)
            q[k] = (uint8_t)(b->qs[k] + 128);
        *A = b->d;
        break;
    }
    case INF_PACK_Q4_0: {
        const inf_block_q4_0 *b = (const inf_block_q4_0 *)row + g;
        for (int k = 0; k < 16; k++) {
            q[k] = b->qs[k] & 0xF;
            q[k + 16] = b->qs[k] >> 4;
        }
        *A = b->d;
        break;
    }
    case INF_PACK_Q4_K: {
        const inf_block_q4_K *b = (const inf_block_q4_K *)row + g / 8;
        int sub = (int)(g % 8), sc, m;
        q4k_scale_min(b->scales, sub, &sc, &m);
        const uint8_t *qs = b->qs + 32 * (sub / 2);
        for (int k = 0; k < 32; k++)
            q[k] = (sub & 1) ? qs[k] >> 4 : qs[k] & 0xF;
        *A = inf_f32_to_f16(inf_f16_to_f32(b->d) * (float)sc);
        *B = inf_f32_to_f16(inf_f16_to_f32(b->dmin) * (float)m);
        break;
    }
    case INF_PACK_Q6_K: {
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
        break;
    }
    default:
        break;
    }
}

/* Packed weights live in 2 MiB huge pages where the kernel allows (THP
 * "madvise" mode): decode streams them, and the hardware prefetchers stop at
 * every 4 KiB page boundary otherwise (measured here: 6 -> 10 GB/s on one core). */
#define HUGE_PAGE (2u << 20)

static void *pack_alloc(size_t n, size_t *mapped) {
    size_t len = (n + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE);
#endif
    *mapped = len;
    return p;
}

int inf_pack_weight(inf_packed **out, const inf_weight *w) {
    *out = NULL;
    inf_pack_kind kind;
    int group = 32;
    size_t gbytes;
    switch (w->t->type) {
    case INF_BF16:
        kind = INF_PACK_BF16;
        gbytes = 1024;
        break;
    case INF_Q8_0:
        kind = INF_PACK_Q8_0;
        gbytes = 544;
        break;
    case INF_Q4_0:
        kind = INF_PACK_Q4_0;
        gbytes = 288;
        break;
    case INF_Q4_K:
        kind = INF_PACK_Q4_K;
        gbytes = 320;
        break;
    case INF_Q6_K:
        kind = INF_PACK_Q6_K;
        gbytes = 224;
        group = 16;
        break;
    default:
        return 0;
    }
    if (w->n_in % group || w->n_out < INF_PANEL) return 0;
    inf_packed *p = inf_alloc(sizeof *p);
    if (!p) return -1;
    p->kind = kind;
    p->group = group;
    p->n_panels = w->n_out / INF_PANEL;
    p->n_groups = w->n_in / group;
    p->group_bytes = gbytes;
    p->data = pack_alloc((size_t)p->n_panels * (size_t)p->n_groups * gbytes, &p->mapped);
    if (!p->data) {
        inf_free(p);
        return -1;
    }
    const uint8_t *base = w->t->data;
    for (int64_t pi = 0; pi < p->n_panels; pi++) {
        for (int64_t g = 0; g < p->n_groups; g++) {
            uint8_t *dst = p->data + ((size_t)pi * (size_t)p->n_groups + (size_t)g) * gbytes;
            if (kind == INF_PACK_BF16) {
                for (int r = 0; r < INF_PANEL; r++) {
                    const uint16_t *row =
                        (const uint16_t *)(base + (size_t)(16 * pi + r) * w->row_bytes);
                    for (int c = 0; c < 16; c++)
                        memcpy(dst + 64 * c + 4 * r, row + 32 * g + 2 * c, 4);
                }
                continue;
            }
            uint8_t q[INF_PANEL][32];
            uint16_t A[INF_PANEL], B[INF_PANEL];
            for (int r = 0; r < INF_PANEL; r++)
                fetch_group(kind, base + (size_t)(16 * pi + r) * w->row_bytes, g, q[r], &A[r],
                            &B[r]);
            size_t qbytes;
            if (kind == INF_PACK_Q8_0) {
                for (int c = 0; c < 8; c++)
                    for (int r = 0; r < 16; r++)
                        for (int j = 0; j < 4; j++)
                            dst[64 * c + 4 * r + j] = q[r][4 * c + j];
                qbytes = 512;
            } else {
                int nchunks = group / 8;
                for (int c = 0; c < nchunks; c++)
                    for (int r = 0; r < 16; r++)
                        for (int j = 0; j < 4; j++)
                            dst[64 * c + 4 * r + j] = (uint8_t)((q[r][8 * c + j] & 0xF) |
                                                                (q[r][8 * c + 4 + j] & 0xF) << 4);
                qbytes = 64 * (size_t)nchunks;
                if (kind == INF_PACK_Q6_K) {
                    for (int r = 0; r < 16; r++)
                        for (int j = 0; j < 4; j++) {
                            int h = 0;
                            for (int i = 0; i < 4; i++)
                                h |= ((q[r][4 * i + j] >> 4) & 3) << (2 * i);
                            dst[128 + 4 * r + j] = (uint8_t)h;
                        }
                    qbytes = 192;
                }
            }
            memcpy(dst + qbytes, A, sizeof A);
            if (kind == INF_PACK_Q4_K) memcpy(dst + qbytes + sizeof A, B, sizeof B);
        }
    }
    *out = p;
    return 0;
}

void inf_packed_free(inf_packed *p) {
    if (!p) return;
    if (p->data) munmap(p->data, p->mapped);
    inf_free(p);
}
