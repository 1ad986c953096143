/* The SIMD backend and its threaded form (the pool backend).
 *
 * One implementation: every op is cut into work slices (panels of 16 output
 * rows, row ranges, attention work items) whose results do not depend on the
 * slicing; the "simd" backend runs all slices on the calling thread, the
 * "pool" backend hands them to a persistent thread pool. So pool output is
 * bit-identical to simd output by construction.
 *
 * matmul picks, per weight: the packed VNNI/BF16 kernels (weights repacked at
 * prepare_weight), AMX tiles (prompt rows; see mm_run), and the generic
 * path (dequantize 256 weights at a time, f32 dot) for everything else:
 * F32/F16 weights, tail rows past the last full panel, levels without packed
 * kernels.
 *
 * Scratch memory grows on the first use of a larger shape. When it cannot be
 * had, the op records the error (the first one is kept), skips its work and
 * returns; take_error hands the message to the forward pass. Scratch is only
 * ever grown on the calling thread, before a job goes to the pool, so a
 * failed growth leaves the pool's workers idle and every buffer either its
 * old size or marked empty (capacity 0), to be grown again on the next call. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/delta.h"
#include "backend/kernels.h"
#include "backend/pack_cache.h"
#include "backend/pool.h"
#include "backend/simd.h"
#include "util/mem.h"

#define AMX_MIN_T 16       /* decode rows from which int8 kinds run on AMX tiles (padded to 32) */
#define ELEM_PAR_MIN 32768 /* elementwise ops below this run on one thread */

typedef struct simd_ctx {
    const inf_kernels *k;
    inf_pool *pool; /* NULL: one thread */
    int nth;
    char name[32];

    /* workspace, grown on first use of a larger shape, never per token after */
    inf_xq xq;
    size_t xq_q_cap, xq_d_cap, xq_ds_cap, xq_s_cap, xq_bf_cap, xq_f_cap, xq_dT_cap, xq_sT_cap,
        xq_qT_cap;
    void **amx_scratch; /* [nth] */
    size_t amx_cap;
    float **thr_scratch;   /* [nth] attention + dequant scratch */
    size_t thr_cap;        /* floats */
    struct mm_span *spans; /* [nth] decode matmuls' slices (mm_task) */
    float *attn_part;      /* decode key blocks' partials [blocks][n_head][head_dim + 2] */
    size_t attn_part_cap;  /* bytes */
    inf_attn_impl attn;    /* prefill attention: flash, or materialized (measurement only) */
    inf_pack_cache *cache; /* where weights prepared now are packed, or NULL (the arena) */
    char layout[64];       /* the packing layout's name for pack caches; "" until asked */

    bool failed;   /* an op could not get its scratch since the last take_error */
    char err[200]; /* the first such failure */
} simd_ctx;

static simd_ctx *ctx_of(const inf_backend *be) {
    return (simd_ctx *)be->ctx;
}

/* fn over chunks 0..n_chunks-1, on the pool when there is one */
static void run(simd_ctx *c, inf_pool_fn fn, void *arg, int n_chunks) {
    if (c->pool)
        inf_pool_run(c->pool, fn, arg, n_chunks);
    else
        for (int k = 0; k < n_chunks; k++)
            fn(arg, k, n_chunks, 0);
}

/* chunks for n units of work: a few per thread, so a late thread's share is small */
static int n_chunks_for(const simd_ctx *c, int64_t units) {
    int64_t n = c->nth == 1 ? 1 : 4 * (int64_t)c->nth;
    return (int)(units < n ? (units > 0 ? units : 1) : n);
}

/* [lo, hi) of n items for slice ith of nth */
static void slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

/* Records that `bytes` of scratch (what: printf-style) could not be had, unless
 * an earlier failure is already recorded; returns -1. */
static int __attribute__((format(printf, 3, 4)))
scratch_oom(simd_ctx *c, size_t bytes, const char *what, ...) {
    if (c->failed) return -1;
    char desc[120];
    va_list ap;
    va_start(ap, what);
    vsnprintf(desc, sizeof desc, what, ap);
    va_end(ap);
    double mib = (double)bytes / (1024.0 * 1024.0);
    if (mib >= 0.1)
        snprintf(c->err, sizeof c->err, "out of memory: %s %s (%.1f MiB)", c->name, desc, mib);
    else
        snprintf(c->err, sizeof c->err, "out of memory: %s %s (%zu bytes)", c->name, desc, bytes);
    c->failed = true;
    return -1;
}

/* Grows *p to need bytes (contents not kept); -1 with the error recorded when
 * the memory cannot be had (*p is then NULL, *cap 0). */
static int grow(simd_ctx *c, void **p, size_t *cap, size_t need, int rows) {
    if (need <= *cap) return 0;
    inf_free(*p);
    *p = inf_alloc(need);
    *cap = *p ? need : 0;
    return *p ? 0 : scratch_oom(c, need, "matmul scratch for %d rows", rows);
}

static int ensure_thr_scratch(simd_ctx *c, size_t floats) {
    if (floats <= c->thr_cap) return 0;
    c->thr_cap = 0; /* until every thread's buffer has the new size */
    for (int i = 0; i < c->nth; i++) {
        inf_free(c->thr_scratch[i]);
        c->thr_scratch[i] = inf_alloc(floats * sizeof(float));
        if (!c->thr_scratch[i])
            return scratch_oom(c, floats * sizeof(float), "per-thread scratch (thread %d of %d)",
                               i + 1, c->nth);
    }
    c->thr_cap = floats;
    return 0;
}

static int simd_take_error(const inf_backend *be, inf_err *err) {
    simd_ctx *c = ctx_of(be);
    if (!c->failed) return 0;
    c->failed = false;
    return inf_fail(err, "%s", c->err);
}

/* ---- weights ------------------------------------------------------------------------------ */

typedef struct pack_job {
    const inf_kernels *k;
    inf_packed *p;
    const inf_weight *w;
} pack_job;

static void pack_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    pack_job *j = arg;
    int64_t lo, hi;
    slice(j->p->n_panels, ith, nth, &lo, &hi);
    if (lo < hi) j->k->pack_panels(j->p, j->w, lo, hi);
}

typedef struct hash_job {
    const uint8_t *data;
    size_t bytes;
    uint64_t *h; /* [pieces] */
    int64_t pieces;
} hash_job;

static void hash_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    hash_job *j = arg;
    int64_t lo, hi;
    slice(j->pieces, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        const size_t at = (size_t)i * INF_PACK_HASH_PIECE;
        const size_t n = j->bytes - at < INF_PACK_HASH_PIECE ? j->bytes - at : INF_PACK_HASH_PIECE;
        j->h[i] = inf_pack_hash_piece(j->data + at, n);
    }
}

/* p's panels' hash (pack_cache.h), on every thread (on this one without
 * memory for the pieces' hashes) */
static uint64_t panels_hash(simd_ctx *c, const inf_packed *p) {
    hash_job j = {.data = p->data, .bytes = inf_packed_bytes(p)};
    j.pieces = (int64_t)((j.bytes + INF_PACK_HASH_PIECE - 1) / INF_PACK_HASH_PIECE);
    j.h = malloc((size_t)j.pieces * sizeof *j.h);
    if (!j.h) return inf_pack_hash(j.data, j.bytes);
    run(c, hash_task, &j, n_chunks_for(c, j.pieces));
    const uint64_t h = inf_pack_hash_combine(j.h, (size_t)j.pieces);
    free(j.h);
    return h;
}

static void pack_on_pool(simd_ctx *c, inf_packed *p, const inf_weight *w) {
    pack_job j = {.k = c->k, .p = p, .w = w};
    run(c, pack_task, &j, n_chunks_for(c, p->n_panels));
}

/* w's panels from the pack cache (checked against their hash), or packed
 * into it: true; false when w goes to the arena instead (no packed form, not
 * in a file, not in the cache, or the cache cannot take it). */
static bool prepare_cached(simd_ctx *c, inf_weight *w) {
    inf_packed plan;
    if (!w->src_file || !inf_pack_plan(&plan, w, c->k->pack_kinds)) return false;
    inf_packed *p = inf_alloc(sizeof *p);
    if (!p) return false;
    *p = plan;
    uint64_t want;
    if (inf_pack_cache_find(c->cache, w, p, &want)) {
        if (panels_hash(c, p) == want) {
            inf_pack_cache_claim(c->cache, p);
            w->packed = p;
            return true;
        }
        inf_pack_cache_damaged(c->cache);
    } else if (inf_pack_cache_writing(c->cache) && inf_pack_cache_reserve(c->cache, w, p) == 0) {
        pack_on_pool(c, p, w);
        inf_pack_cache_commit(c->cache, panels_hash(c, p));
        w->packed = p;
        return true;
    }
    inf_free(p);
    return false;
}

static int simd_prepare_weight(const inf_backend *be, inf_weight *w) {
    simd_ctx *c = ctx_of(be);
    if (!c->k->has_packed || w->packed) return 0;
    if (c->cache && prepare_cached(c, w)) return 0;
    inf_packed *p;
    if (inf_pack_alloc(&p, w, c->k->pack_kinds)) return -1;
    if (p) pack_on_pool(c, p, w); /* panels on every thread: loading is bounded by this copy */
    w->packed = p;                /* NULL: the generic path */
    return 0;
}

static void simd_release_weight(const inf_backend *be, inf_weight *w) {
    (void)be;
    inf_packed_free(w->packed);
    w->packed = NULL;
}

/* ---- matmul ------------------------------------------------------------------------------- */

#define MM_MAX_W 4 /* weights in one matmul_n call */

/* One pass over x for nw weights: their units of work (panels, or pairs of
 * panels on AMX) are numbered one after the other and sliced together. */
typedef struct mm_job {
    simd_ctx *c;
    const float *x;
    int T, nw;
    float *y[MM_MAX_W];
    const inf_weight *w[MM_MAX_W];
    const inf_packed *pk[MM_MAX_W];
    int64_t units[MM_MAX_W], total;
    bool use_amx[MM_MAX_W]; /* weight i on AMX tiles (else the VNNI/BF16 dot kernels) */
    int any_amx, bf16_tiles;
    int quant_what;
    struct mm_span *spans; /* decode: one slice per thread, finished by whoever is free */
    int64_t step;          /* units a span_take takes */
} mm_job;

/* Decode rows read each weight once, and one contiguous slice per thread
 * streams best; but a thread that finishes its slice early (the two halves
 * of a matmul rarely take the same time on a shared host) would wait. So
 * slice k is units [lo, hi) in one word: its owner takes MM_STEP_BYTES at a
 * time from the front, and a thread done with its own takes them from the
 * back. Each span has a cache line of its own. */
typedef struct mm_span {
    _Alignas(64) _Atomic uint64_t lohi;
} mm_span;
#define MM_STEP_BYTES (64 << 10)

static bool span_take(mm_span *s, int64_t step, bool back, int64_t *a, int64_t *b) {
    uint64_t v = atomic_load_explicit(&s->lohi, memory_order_relaxed);
    for (;;) {
        uint32_t lo = (uint32_t)(v >> 32), hi = (uint32_t)v;
        if (lo >= hi) return false;
        uint32_t n = (int64_t)(hi - lo) < step ? hi - lo : (uint32_t)step;
        uint64_t nv = back ? (uint64_t)lo << 32 | (hi - n) : (uint64_t)(lo + n) << 32 | hi;
        /* relaxed: the pool's start and end of the job order the data */
        if (atomic_compare_exchange_weak_explicit(&s->lohi, &v, nv, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *a = back ? hi - n : lo;
            *b = back ? hi : lo + n;
            return true;
        }
    }
}

/* rows [r0, r1) of y from the original rows: dequantize 256 at a time, f32 dots */
static void generic_rows(const inf_kernels *k, float *y, const float *x, const inf_weight *w, int T,
                         int64_t r0, int64_t r1, float *buf) {
    const int64_t n_in = w->n_in, n_out = w->n_out;
    const inf_dtype type = w->t->type;
    for (int64_t o = r0; o < r1; o++) {
        const uint8_t *row = (const uint8_t *)w->t->data + (size_t)o * w->row_bytes;
        for (int t = 0; t < T; t++)
            y[(size_t)t * (size_t)n_out + (size_t)o] = 0;
        for (int64_t k0 = 0; k0 < n_in; k0 += INF_CHUNK) {
            int n = (int)(n_in - k0 < INF_CHUNK ? n_in - k0 : INF_CHUNK);
            const float *wv;
            if (type == INF_F32) {
                wv = (const float *)row + k0;
            } else {
                inf_kern_dequant(k, type, buf, row, k0, n);
                wv = buf;
            }
            for (int t = 0; t < T; t++)
                y[(size_t)t * (size_t)n_out + (size_t)o] +=
                    k->dot_f32(x + (size_t)t * (size_t)n_in + k0, wv, n);
        }
    }
}

static void mm_quant_task(void *arg, int ith, int nth, int tid) {
    mm_job *j = arg;
    int64_t lo, hi;
    slice(j->T, ith, nth, &lo, &hi);
    if (lo < hi) j->c->k->quantize_x(&j->c->xq, j->x, (int)lo, (int)hi, j->quant_what);
}

/* units [lo, hi) of the job's weights, numbered one after the other */
static void mm_units(const mm_job *j, int64_t lo, int64_t hi, int tid) {
    simd_ctx *c = j->c;
    const inf_kernels *k = c->k;
    for (int i = 0, start = 0; i < j->nw; start += (int)j->units[i], i++) {
        const inf_packed *pk = j->pk[i];
        int64_t a = lo > start ? lo - start : 0,
                b = hi - start < j->units[i] ? hi - start : j->units[i];
        if (!pk || a >= b) continue;
        if (j->use_amx[i]) /* whole pairs of panels per slice keep the tiles full */
            k->matmul_amx(j->y[i], j->w[i]->n_out, pk, &c->xq, j->T, 2 * a,
                          2 * b < pk->n_panels ? 2 * b : pk->n_panels, j->bf16_tiles,
                          c->amx_scratch[tid]);
        else
            k->matmul_packed(j->y[i], j->w[i]->n_out, pk, &c->xq, j->T, a, b);
        if (pk->post != 1.0f) { /* rows of panels [pa, pb): a power of two, exact */
            const int64_t pa = j->use_amx[i] ? 2 * a : a,
                          pb = j->use_amx[i] ? (2 * b < pk->n_panels ? 2 * b : pk->n_panels) : b;
            for (int t = 0; t < j->T; t++) {
                float *y = j->y[i] + (size_t)t * (size_t)j->w[i]->n_out;
                for (int64_t o = INF_PANEL * pa; o < INF_PANEL * pb; o++)
                    y[o] *= pk->post;
            }
        }
    }
}

static void mm_task(void *arg, int ith, int nth, int tid) {
    mm_job *j = arg;
    simd_ctx *c = j->c;
    const inf_kernels *k = c->k;
    int64_t lo, hi;
    if (j->spans) {
        while (span_take(&j->spans[ith], j->step, false, &lo, &hi))
            mm_units(j, lo, hi, tid);
        for (int v = 1; v < nth; v++)
            while (span_take(&j->spans[(ith + v) % nth], j->step, true, &lo, &hi))
                mm_units(j, lo, hi, tid);
    } else {
        slice(j->total, ith, nth, &lo, &hi);
        mm_units(j, lo, hi, tid);
    }
    for (int i = 0; i < j->nw; i++) { /* rows past the last full panel */
        int64_t done = j->pk[i] ? j->pk[i]->n_panels * INF_PANEL : 0, r0, r1;
        slice(j->w[i]->n_out - done, ith, nth, &r0, &r1);
        if (r0 < r1)
            generic_rows(k, j->y[i], j->x, j->w[i], j->T, done + r0, done + r1,
                         c->thr_scratch[tid]);
    }
}

/* The form of x a kind's kernels read: bf16 (BF16), the rows as they are
 * (F16), or int8 blocks (every integer kind, which may differ). */
static int x_form(inf_pack_kind kind) {
    return kind == INF_PACK_BF16 ? 1 : kind == INF_PACK_F16 ? 2 : 0;
}

/* y[i] = x . w[i]^T for nw weights that share x. Packed weights whose kinds
 * read the same form of x (x_form) share it; the outputs equal nw separate
 * calls bit for bit. Decode rows (prefill = 0) run on the VNNI/BF16 dot
 * kernels, or on AMX int8 tiles from AMX_MIN_T rows for the kinds where that
 * gives the same bits (per weight); prompt rows (prefill = 1) run on AMX bf16
 * tiles for the kinds of inf_amx_bf16_kind (integer panels expanded to bf16),
 * about 1.4x faster than int8 tiles, which must leave the tile after every
 * 32-weight block to apply its scale. */
static void mm_run(simd_ctx *c, float *const *ys, const float *x, const inf_weight *const *ws,
                   int nw, int T, int prefill) {
    INF_ASSERT(nw >= 1 && nw <= MM_MAX_W);
    mm_job j = {.c = c, .x = x, .T = T, .nw = nw};
    if (c->failed) return; /* the forward pass fails anyway: skip the work */
    if (ensure_thr_scratch(c, inf_attn_scratch_floats(INF_ATTN_MAX_R, 256) + INF_CHUNK)) return;
    const inf_packed *pk = c->k->has_packed ? ws[0]->packed : NULL;
    for (int i = 0; i < nw; i++) {
        j.y[i] = ys[i];
        j.w[i] = ws[i];
        j.pk[i] = c->k->has_packed ? ws[i]->packed : NULL;
        INF_ASSERT(ws[i]->n_in == ws[0]->n_in && (!j.pk[i]) == (!pk) &&
                   (!pk || x_form(j.pk[i]->kind) == x_form(pk->kind)));
        j.use_amx[i] = pk && c->k->matmul_amx && inf_amx_bf16_kind(j.pk[i]->kind) &&
                       (prefill || (T >= AMX_MIN_T && inf_amx_int8_kind(j.pk[i]->kind)));
        j.any_amx |= j.use_amx[i];
    }
    if (pk) {
        int64_t n = ws[0]->n_in;
        int T32 = (T + 31) & ~31;
        j.bf16_tiles = j.any_amx && prefill; /* prefill: the tile kinds' weights on AMX */
        /* the forms of x the weights read: bf16 for BF16 panels and bf16
           tiles, int8 blocks for the other integer kernels (and their tile
           layout for int8 tiles), none for F16 (x as it is); a prefill job
           may hold both a tile kind and one that stays off the tiles (Q2_KS) */
        for (int i = 0; i < nw; i++) {
            const inf_pack_kind kind = j.pk[i]->kind;
            if (kind == INF_PACK_BF16 || (j.use_amx[i] && j.bf16_tiles))
                j.quant_what |= INF_XQ_BF16;
            else if (kind != INF_PACK_F16)
                j.quant_what |= INF_XQ_INT8 | (j.use_amx[i] ? INF_XQ_TILES : 0);
        }
        const bool bf = j.quant_what & INF_XQ_BF16;
        if (grow(c, (void **)&c->xq.q, &c->xq_q_cap, (size_t)T32 * (size_t)n, T) ||
            grow(c, (void **)&c->xq.d, &c->xq_d_cap, sizeof(float) * (size_t)T32 * (size_t)(n / 32),
                 T) ||
            grow(c, (void **)&c->xq.ds, &c->xq_ds_cap,
                 sizeof(float) * (size_t)T32 * (size_t)(n / 32), T) ||
            grow(c, (void **)&c->xq.s16, &c->xq_s_cap,
                 sizeof(int32_t) * (size_t)T32 * (size_t)(n / 16), T) ||
            grow(c, (void **)&c->xq.bf, &c->xq_bf_cap, 2 * (size_t)T32 * (size_t)n, T) ||
            (c->k->bf16_as_f32 && bf &&
             grow(c, (void **)&c->xq.f, &c->xq_f_cap, sizeof(float) * (size_t)T * (size_t)n, T)) ||
            grow(c, (void **)&c->xq.dT, &c->xq_dT_cap,
                 sizeof(float) * (size_t)T32 * (size_t)(n / 32), T) ||
            grow(c, (void **)&c->xq.sT, &c->xq_sT_cap,
                 sizeof(int32_t) * (size_t)T32 * (size_t)(n / 32), T) ||
            grow(c, (void **)&c->xq.qT, &c->xq_qT_cap, (size_t)T32 * (size_t)n, T))
            return;
        c->xq.n = n;
        c->xq.x = x;
        if (j.any_amx) {
            size_t need = 0;
            for (int i = 0; i < nw; i++) {
                size_t b = j.use_amx[i] ? c->k->amx_scratch_bytes(j.pk[i]) : 0;
                need = b > need ? b : need;
            }
            if (need > c->amx_cap) {
                c->amx_cap = 0; /* until every thread's tile scratch has the new size */
                for (int i = 0; i < c->nth; i++) {
                    inf_free(c->amx_scratch[i]);
                    c->amx_scratch[i] = inf_alloc(need);
                    if (!c->amx_scratch[i]) {
                        scratch_oom(c, need, "AMX tile scratch for %d rows (thread %d of %d)", T,
                                    i + 1, c->nth);
                        return;
                    }
                }
                c->amx_cap = need;
            }
            memset(c->xq.bf + (size_t)T * (size_t)n, 0, 2 * (size_t)(T32 - T) * (size_t)n);
            memset(c->xq.q + (size_t)T * (size_t)n, 0, (size_t)(T32 - T) * (size_t)n);
            memset(c->xq.d + (size_t)T * (size_t)(n / 32), 0,
                   sizeof(float) * (size_t)(T32 - T) * (size_t)(n / 32));
            memset(c->xq.s16 + (size_t)T * (size_t)(n / 16), 0,
                   sizeof(int32_t) * (size_t)(T32 - T) * (size_t)(n / 16));
            /* the last token block's scales, whose rows past T stay 0 */
            size_t last = (size_t)(T32 - 32) * (size_t)(n / 32);
            memset(c->xq.dT + last, 0, sizeof(float) * 32 * (size_t)(n / 32));
            memset(c->xq.sT + last, 0, sizeof(int32_t) * 32 * (size_t)(n / 32));
            memset(c->xq.qT + 32 * last, 0, 32 * 32 * (size_t)(n / 32));
        }
        if (j.quant_what && T >= 8)
            run(c, mm_quant_task, &j, c->nth);
        else if (j.quant_what)
            mm_quant_task(&j, 0, 1, 0);
    }
    for (int i = 0; i < nw; i++) {
        j.units[i] = j.pk[i] ? (j.use_amx[i] ? (j.pk[i]->n_panels + 1) / 2 : j.pk[i]->n_panels) : 0;
        j.total += j.units[i];
    }
    int64_t work = j.total;
    for (int i = 0; i < nw; i++)
        if (!j.pk[i]) work += ws[i]->n_out / INF_PANEL;
    /* decode rows: one contiguous slice per thread streams best (measured:
       4 chunks per thread 0.5-2 % slower, 16 about 6 %), in spans that a
       thread done with its own finishes from the back (mm_span); a slice a
       late worker has not claimed is still taken by the caller */
    int n_chunks =
        prefill ? n_chunks_for(c, work) : (int)(work < c->nth ? (work > 0 ? work : 1) : c->nth);
    if (!prefill && n_chunks > 1 && pk) {
        size_t unit_bytes = (size_t)pk->n_groups * pk->group_bytes * (j.use_amx[0] ? 2 : 1);
        j.step = unit_bytes < MM_STEP_BYTES ? (int64_t)(MM_STEP_BYTES / unit_bytes) : 1;
        j.spans = c->spans;
        INF_ASSERT(j.total <= UINT32_MAX); /* a span holds two 32-bit unit indices */
        for (int i = 0; i < n_chunks; i++) {
            int64_t lo, hi;
            slice(j.total, i, n_chunks, &lo, &hi);
            atomic_store_explicit(&j.spans[i].lohi, (uint64_t)lo << 32 | (uint64_t)hi,
                                  memory_order_relaxed);
        }
    }
    run(c, mm_task, &j, n_chunks);
}

static void simd_matmul(const inf_backend *be, float *y, const float *x, const inf_weight *w,
                        int T) {
    mm_run(ctx_of(be), &y, x, &w, 1, T, 0);
}

static void simd_matmul_n(const inf_backend *be, float *const *ys, const float *x,
                          const inf_weight *const *ws, int nw, int T, int prefill) {
    simd_ctx *c = ctx_of(be);
    bool together = nw <= MM_MAX_W && c->k->has_packed && ws[0]->packed;
    const int form0 = together ? x_form(((const inf_packed *)ws[0]->packed)->kind) : 0;
    for (int i = 1; i < nw && together; i++) /* one form of x: see x_form */
        together = ws[i]->packed && ws[i]->n_in == ws[0]->n_in &&
                   x_form(((const inf_packed *)ws[i]->packed)->kind) == form0;
    if (together) {
        mm_run(c, ys, x, ws, nw, T, prefill);
        return;
    }
    for (int i = 0; i < nw; i++)
        mm_run(c, &ys[i], x, &ws[i], 1, T, prefill);
}

/* ---- row ops ------------------------------------------------------------------------------ */

typedef struct row_job {
    simd_ctx *c;
    float *out;
    const float *x, *w, *cos_tab, *sin_tab;
    const int32_t *pos;
    int rows, n, n_heads, head_dim, n_rot;
    float eps;
    int64_t len;
    const float *y2;
} row_job;

static void rms_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    row_job *j = arg;
    int64_t lo, hi;
    slice(j->rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++)
        j->c->k->rmsnorm_row(j->out + r * j->n, j->x + r * j->n, j->w, j->n, j->eps);
}

static void simd_rmsnorm(const inf_backend *be, float *out, const float *x, const float *w,
                         int rows, int n, float eps) {
    simd_ctx *c = ctx_of(be);
    row_job j = {.c = c, .out = out, .x = x, .w = w, .rows = rows, .n = n, .eps = eps};
    if ((int64_t)rows * n >= ELEM_PAR_MIN && rows > 1)
        run(c, rms_task, &j, n_chunks_for(c, rows));
    else
        rms_task(&j, 0, 1, 0);
}

static void rope_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    row_job *j = arg;
    int64_t lo, hi, half = j->n_rot / 2;
    slice(j->rows, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++)
        j->c->k->rope_row(j->out + t * (int64_t)j->n_heads * j->head_dim, j->n_heads, j->head_dim,
                          j->n_rot, j->cos_tab + (int64_t)j->pos[t] * half,
                          j->sin_tab + (int64_t)j->pos[t] * half);
}

static void simd_rope(const inf_backend *be, float *x, const int32_t *pos, int T, int n_heads,
                      int head_dim, int n_rot, const float *cos_tab, const float *sin_tab) {
    simd_ctx *c = ctx_of(be);
    row_job j = {.c = c,
                 .out = x,
                 .pos = pos,
                 .rows = T,
                 .n_heads = n_heads,
                 .head_dim = head_dim,
                 .n_rot = n_rot,
                 .cos_tab = cos_tab,
                 .sin_tab = sin_tab};
    if ((int64_t)T * n_heads * head_dim >= ELEM_PAR_MIN && T > 1)
        run(c, rope_task, &j, n_chunks_for(c, T));
    else
        rope_task(&j, 0, 1, 0);
}

/* elementwise slices start at multiples of 64 so every element meets the same vector code */
static void elem_slice(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t blocks = (n + 63) / 64;
    slice(blocks, ith, nth, lo, hi);
    *lo *= 64;
    *hi = *hi * 64 < n ? *hi * 64 : n;
}

static void swiglu_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    row_job *j = arg;
    int64_t lo, hi;
    elem_slice(j->len, ith, nth, &lo, &hi);
    if (lo < hi) j->c->k->swiglu(j->out + lo, j->x + lo, j->y2 + lo, hi - lo);
}

static void simd_swiglu(const inf_backend *be, float *out, const float *gate, const float *up,
                        int64_t n) {
    simd_ctx *c = ctx_of(be);
    row_job j = {.c = c, .out = out, .x = gate, .y2 = up, .len = n};
    if (n >= ELEM_PAR_MIN)
        run(c, swiglu_task, &j, n_chunks_for(c, n / 4096));
    else
        swiglu_task(&j, 0, 1, 0);
}

static void add_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    row_job *j = arg;
    int64_t lo, hi;
    elem_slice(j->len, ith, nth, &lo, &hi);
    if (lo < hi) j->c->k->add(j->out + lo, j->x + lo, hi - lo);
}

static void simd_add(const inf_backend *be, float *y, const float *x, int64_t n) {
    simd_ctx *c = ctx_of(be);
    row_job j = {.c = c, .out = y, .x = x, .len = n};
    if (n >= ELEM_PAR_MIN)
        run(c, add_task, &j, n_chunks_for(c, n / 4096));
    else
        add_task(&j, 0, 1, 0);
}

typedef struct moe_sum_job {
    simd_ctx *c;
    float *y;
    const float *x, *w;
    int T, k;
    int64_t n;
} moe_sum_job;

static void moe_sum_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    moe_sum_job *j = arg;
    int r0 = (int)((int64_t)j->T * ith / nth), r1 = (int)((int64_t)j->T * (ith + 1) / nth);
    for (int r = r0; r < r1; r++)
        j->c->k->moe_sum(j->y + (int64_t)r * j->n, j->x + (int64_t)r * j->k * j->n,
                         j->w + (int64_t)r * j->k, j->k, j->n);
}

/* Split by rows (a row is summed whole by one thread). */
static void simd_moe_sum(const inf_backend *be, float *y, const float *x, const float *w, int T,
                         int k, int64_t n) {
    simd_ctx *c = ctx_of(be);
    moe_sum_job j = {.c = c, .y = y, .x = x, .w = w, .T = T, .k = k, .n = n};
    if ((int64_t)T * k * n >= ELEM_PAR_MIN && T > 1)
        run(c, moe_sum_task, &j, n_chunks_for(c, T));
    else
        moe_sum_task(&j, 0, 1, 0);
}

typedef struct conv_job {
    simd_ctx *c;
    float *out, *state;
    const float *x, *w;
    int T, C, K;
} conv_job;

enum { CONV_CHANNELS = 64 }; /* channels a task takes at a time (a multiple of 16) */

/* Channels [64 lo, 64 hi) of ssm_conv: the taps transposed per chunk so the
 * channel loop runs over contiguous rows, each sum in the scalar reference's
 * order (tap 0 first, mul then add), then SiLU with the level's kernel; then
 * the chunk's part of the state. */
static void conv_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    const conv_job *j = arg;
    const int C = j->C, K = j->K, H = K - 1;
    int64_t lo, hi;
    slice((C + CONV_CHANNELS - 1) / CONV_CHANNELS, ith, nth, &lo, &hi);
    float wt[8][CONV_CHANNELS];
    for (int64_t ch = lo; ch < hi; ch++) {
        const int c0 = (int)ch * CONV_CHANNELS, n = C - c0 < CONV_CHANNELS ? C - c0 : CONV_CHANNELS;
        for (int i = 0; i < K; i++)
            for (int c = 0; c < n; c++)
                wt[i][c] = j->w[(size_t)(c0 + c) * K + i];
        for (int t = 0; t < j->T; t++) {
            float acc[CONV_CHANNELS] = {0};
            for (int i = 0; i < K; i++) {
                const int r = t - H + i; /* < 0: history row H + r */
                const float *restrict src =
                    (r < 0 ? j->state + (size_t)(H + r) * C : j->x + (size_t)r * C) + c0;
                const float *restrict wi = wt[i];
                if (n == CONV_CHANNELS) /* a fixed trip count the compiler vectorizes */
                    for (int c = 0; c < CONV_CHANNELS; c++)
                        acc[c] += wi[c] * src[c];
                else
                    for (int c = 0; c < n; c++)
                        acc[c] += wi[c] * src[c];
            }
            j->c->k->silu(j->out + (size_t)t * C + c0, acc, n);
        }
        /* the last H rows of history followed by x, this chunk's channels */
        for (int r = 0; r < H; r++) {
            const int src = j->T - H + r;
            float *dst = j->state + (size_t)r * C + c0;
            if (src >= 0)
                memcpy(dst, j->x + (size_t)src * C + c0, sizeof(float) * (size_t)n);
            else
                memmove(dst, j->state + (size_t)(r + j->T) * C + c0, sizeof(float) * (size_t)n);
        }
    }
}

static void simd_ssm_conv(const inf_backend *be, float *out, const float *x, float *state,
                          const float *w, int T, int C, int K) {
    simd_ctx *c = ctx_of(be);
    if (K > 8) { /* no model has such a kernel: the reference */
        inf_backend_scalar()->ssm_conv(inf_backend_scalar(), out, x, state, w, T, C, K);
        return;
    }
    conv_job j = {.c = c, .out = out, .state = state, .x = x, .w = w, .T = T, .C = C, .K = K};
    const int chunks = (C + CONV_CHANNELS - 1) / CONV_CHANNELS;
    const int64_t work = (int64_t)T * C * K;
    if (chunks > 1 && work >= 16384)
        run(c, conv_task, &j, chunks < c->nth ? chunks : c->nth);
    else
        conv_task(&j, 0, 1, 0);
}

typedef struct delta_job {
    simd_ctx *c;
    float *out, *state;
    const float *q, *k, *v, *g, *beta;
    int T;
    const inf_delta_shape *s;
} delta_job;

/* V heads [lo, hi) of the job, every row in order (a head's rows depend on
 * each other; heads do not) */
static void delta_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    const delta_job *j = arg;
    int64_t lo, hi;
    slice(j->s->n_v_heads, ith, nth, &lo, &hi);
    for (int t = 0; t < j->T; t++)
        for (int h = (int)lo; h < (int)hi; h++)
            inf_delta_row_head(j->c->k->delta_step, j->out, j->q, j->k, j->v, j->g, j->beta,
                               j->state, t, h, j->s);
}

/* Split by V heads. */
static void simd_gated_delta(const inf_backend *be, float *out, const float *q, const float *k,
                             const float *v, const float *g, const float *beta, float *state, int T,
                             const inf_delta_shape *s) {
    INF_ASSERT(s->d_k <= INF_DELTA_MAX_DK && s->d_v <= INF_DELTA_MAX_DK &&
               s->n_v_heads % s->n_k_heads == 0);
    simd_ctx *c = ctx_of(be);
    delta_job j = {.c = c,
                   .out = out,
                   .state = state,
                   .q = q,
                   .k = k,
                   .v = v,
                   .g = g,
                   .beta = beta,
                   .T = T,
                   .s = s};
    if (s->n_v_heads > 1)
        run(c, delta_task, &j, s->n_v_heads < c->nth ? s->n_v_heads : c->nth);
    else
        delta_task(&j, 0, 1, 0);
}

static void simd_softmax(const inf_backend *be, float *x, int n) {
    ctx_of(be)->k->softmax(x, n);
}

typedef struct embed_job {
    simd_ctx *c;
    float *out;
    const inf_tensor *table;
    const int32_t *ids;
    int T;
    size_t row_bytes;
} embed_job;

static void embed_task(void *arg, int ith, int nth, int tid) {
    (void)tid;
    embed_job *j = arg;
    int64_t lo, hi, n = j->table->ne[0];
    slice(j->T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        INF_ASSERT(j->ids[t] >= 0 && j->ids[t] < j->table->ne[1]);
        const unsigned char *row =
            (const unsigned char *)j->table->data + (size_t)j->ids[t] * j->row_bytes;
        inf_kern_dequant(j->c->k, j->table->type, j->out + t * n, row, 0, (int)n);
    }
}

static void simd_embed(const inf_backend *be, float *out, const inf_tensor *table,
                       const int32_t *ids, int T) {
    simd_ctx *c = ctx_of(be);
    embed_job j = {.c = c,
                   .out = out,
                   .table = table,
                   .ids = ids,
                   .T = T,
                   .row_bytes = inf_dtype_row_bytes(table->type, table->ne[0])};
    if (T >= 8)
        run(c, embed_task, &j, n_chunks_for(c, T));
    else
        embed_task(&j, 0, 1, 0);
}

/* ---- attention ------------------------------------------------------------------------------ */

typedef struct attn_job {
    simd_ctx *c;
    float *out;
    const float *q;
    const inf_kv_view *kv;
    const inf_attn_shape *s;
    int pos0, T;       /* prefill: rows pos0..pos0+T-1; decode: T = 1, pos0 = n_keys - 1 */
    int hpi, n_hchunk; /* heads per item, head chunks per KV head */
    int qb, n_qblock;  /* query rows per item, query blocks */
    int kblock;        /* decode: keys per key block (inf_attn_decode_block_keys) */
    int n_kblock;      /* decode: key blocks (1: not split) */
    float *part;       /* n_kblock > 1: the blocks' partials [n_kblock][n_head][head_dim + 2] */
    int n_items;
    int prefill;
} attn_job;

/* one work item: (query block, KV head, head chunk, key block) */
static void attn_item(attn_job *j, int i, int tid) {
    const inf_attn_shape *s = j->s;
    const int group = s->n_head / s->n_head_kv, qw = s->n_head * s->head_dim;
    float *scratch = j->c->thr_scratch[tid];
    /* key block outermost: the KV heads of one block are consecutive */
    const int per_kb = j->n_items / j->n_kblock;
    const int kb = i / per_kb;
    i %= per_kb;
    {
        /* items run from the latest query block down: the longest ones start first */
        int qbk = j->n_qblock - 1 - i / (s->n_head_kv * j->n_hchunk);
        int rest = i % (s->n_head_kv * j->n_hchunk);
        int g = rest / j->n_hchunk, hc = rest % j->n_hchunk;
        inf_attn_rows it;
        it.R = 0;
        it.prefill = j->prefill;
        it.kv_head = g;
        it.max_lim = 0;
        int h0 = g * group + hc * j->hpi,
            h1 = h0 + j->hpi < (g + 1) * group ? h0 + j->hpi : (g + 1) * group;
        int t1 = (qbk + 1) * j->qb < j->T ? (qbk + 1) * j->qb : j->T;
        /* key block kb of a decode row: keys k0..k1-1, partial into its slot */
        const int k0 = kb * j->kblock;
        const int k1 = j->n_kblock > 1 ? k0 + j->kblock : INT_MAX;
        it.k0 = k0;
        it.part = j->n_kblock > 1
                      ? j->part + ((size_t)kb * s->n_head + h0) * (size_t)(s->head_dim + 2)
                      : NULL;
        for (int t = qbk * j->qb; t < t1; t++)
            for (int h = h0; h < h1; h++) {
                it.q[it.R] = j->q + (size_t)t * qw + (size_t)h * s->head_dim;
                it.out[it.R] = j->out + (size_t)t * qw + (size_t)h * s->head_dim;
                it.lim[it.R] = j->pos0 + t + 1 < k1 ? j->pos0 + t + 1 : k1;
                if (it.lim[it.R] > it.max_lim) it.max_lim = it.lim[it.R];
                it.R++;
            }
        j->c->k->attn_rows(&it, j->kv, s->head_dim, s->scale, scratch);
    }
}

static void attn_task(void *arg, int i, int n_items, int tid) {
    (void)n_items;
    attn_job *j = arg;
    attn_item(j, i, tid);
}

/* o[d] = o[d] * a + p[d] * b, d < n: in 16s where it can (the compiler's
 * cheap vectorizer takes loops of a fixed count), then one by one */
static void scale_add(float *o, float a, const float *p, float b, int n) {
    int d = 0;
    for (; d + 16 <= n; d += 16)
        for (int e = 0; e < 16; e++)
            o[d + e] = o[d + e] * a + p[d + e] * b;
    for (; d < n; d++)
        o[d] = o[d] * a + p[d] * b;
}

/* A decode row's output from its key blocks' partials, merged in block
 * order: the same bits however the blocks were spread over threads. Each
 * block's weight is e^(m_block - m) for the largest block max m, one exp per
 * block (a running merge had taken two, and 3 % of a step at depth 8192). */
static void attn_merge(const attn_job *j) {
    const inf_attn_shape *s = j->s;
    const int hd = s->head_dim;
    const size_t stride = (size_t)hd + 2, bstride = (size_t)s->n_head * stride;
    for (int h = 0; h < s->n_head; h++) {
        float *o = j->out + (size_t)h * hd;
        const float *p0 = j->part + (size_t)h * stride;
        float m = p0[hd];
        for (int kb = 1; kb < j->n_kblock; kb++)
            m = p0[kb * bstride + hd] > m ? p0[kb * bstride + hd] : m;
        memset(o, 0, sizeof(float) * (size_t)hd);
        float l = 0;
        for (int kb = 0; kb < j->n_kblock; kb++) {
            const float *p = p0 + kb * bstride;
            float w = expf(p[hd] - m);
            scale_add(o, 1.0f, p, w, hd);
            l += p[hd + 1] * w;
        }
        const float inv = 1.0f / l;
        scale_add(o, inv, o, 0.0f, hd);
    }
}

static void attn_run(simd_ctx *c, float *out, const float *q, const inf_kv_view *kv, int pos0,
                     int T, const inf_attn_shape *s, int prefill) {
    attn_job j = {
        .c = c, .out = out, .q = q, .kv = kv, .s = s, .pos0 = pos0, .T = T, .prefill = prefill};
    int group = s->n_head / s->n_head_kv;
    j.hpi = group < INF_ATTN_MAX_R ? group : INF_ATTN_MAX_R;
    j.n_hchunk = (group + j.hpi - 1) / j.hpi;
    j.qb = INF_ATTN_MAX_R / j.hpi > 1 ? INF_ATTN_MAX_R / j.hpi : 1;
    j.n_qblock = (T + j.qb - 1) / j.qb;
    /* a decode step over many keys: by KV head and by key block. At most 8
       blocks: merging 32 blocks' partials of a 8192-key step had cost 3 % of
       a step (each read back from the thread that wrote it) */
    j.kblock = inf_attn_decode_block_keys(pos0 + 1);
    j.n_kblock = !prefill && T == 1 ? (pos0 + 1 + j.kblock - 1) / j.kblock : 1;
    j.n_items = j.n_qblock * s->n_head_kv * j.n_hchunk * j.n_kblock;
    if (c->failed) return;
    if (ensure_thr_scratch(c, inf_attn_scratch_floats(INF_ATTN_MAX_R, s->head_dim) + INF_CHUNK))
        return;
    if (j.n_kblock > 1) {
        size_t need = (size_t)j.n_kblock * s->n_head * (s->head_dim + 2) * sizeof(float);
        if (need > c->attn_part_cap) {
            inf_free(c->attn_part);
            c->attn_part = inf_alloc(need);
            c->attn_part_cap = c->attn_part ? need : 0;
            if (!c->attn_part) {
                scratch_oom(c, need, "decode attention partials for %d keys", pos0 + 1);
                return;
            }
        }
        j.part = c->attn_part;
    }
    run(c, attn_task, &j, j.n_items);
    if (j.n_kblock > 1) attn_merge(&j);
}

/* INF_ATTN_MATERIALIZED (inferno bench --attn materialized): the materialized
 * path, by query heads, for measuring what flash attention saves. Its score
 * matrices are allocated per call (T x keys floats per thread), as that path
 * is about memory. */
typedef struct mat_job {
    simd_ctx *c;
    float *out;
    const float *q;
    const inf_kv_view *kv;
    const inf_attn_shape *s;
    int pos0, T;
    float **S; /* [nth] */
} mat_job;

static void mat_task(void *arg, int h, int n_heads, int tid) {
    (void)n_heads;
    mat_job *j = arg;
    j->c->k->attn_materialized(j->out, j->q, j->kv, j->pos0, j->T, h, j->s, j->S[tid]);
}

static void simd_attn_prefill(const inf_backend *be, float *out, const float *q,
                              const inf_kv_view *kv, int pos0, int T, const inf_attn_shape *s) {
    simd_ctx *c = ctx_of(be);
    /* the materialized path (measurement only) reads f32 caches */
    if (c->attn != INF_ATTN_MATERIALIZED || (s->head_dim != 64 && s->head_dim != 128) ||
        kv->k_type != INF_F32 || kv->v_type != INF_F32) {
        attn_run(c, out, q, kv, pos0, T, s, 1);
        return;
    }
    if (c->failed) return;
    size_t ld = ((size_t)pos0 + (size_t)T + 15) & ~(size_t)15;
    size_t bytes = (size_t)T * ld * sizeof(float);
    float **S = calloc((size_t)c->nth, sizeof *S);
    mat_job j = {.c = c, .out = out, .q = q, .kv = kv, .s = s, .pos0 = pos0, .T = T, .S = S};
    bool ok = S != NULL;
    for (int i = 0; ok && i < c->nth; i++)
        ok = (S[i] = inf_alloc(bytes)) != NULL;
    if (ok)
        run(c, mat_task, &j, s->n_head);
    else
        scratch_oom(c, bytes, "materialized attention scores for %d rows x %zu keys, per thread", T,
                    ld);
    for (int i = 0; S && i < c->nth; i++)
        inf_free(S[i]);
    free(S);
}

static void simd_attn_decode(const inf_backend *be, float *out, const float *q,
                             const inf_kv_view *kv, int n_keys, const inf_attn_shape *s) {
    attn_run(ctx_of(be), out, q, kv, n_keys - 1, 1, s, 0);
}

/* ---- construction --------------------------------------------------------------------------- */

inf_backend *inf_backend_simd_create(inf_isa isa, int n_threads, bool pool, inf_attn_impl attn) {
    inf_backend *be = calloc(1, sizeof *be);
    simd_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) goto fail;
    c->k = inf_kernels_get(isa);
    c->nth = n_threads < 1 ? 1 : n_threads;
    c->attn = attn == INF_ATTN_MATERIALIZED && c->k->attn_materialized ? INF_ATTN_MATERIALIZED
                                                                       : INF_ATTN_FLASH;
    if (c->nth > 1) {
        c->pool = inf_pool_create(c->nth);
        if (!c->pool) goto fail;
        c->nth = inf_pool_size(c->pool);
    }
    c->amx_scratch = calloc((size_t)c->nth, sizeof *c->amx_scratch);
    c->thr_scratch = calloc((size_t)c->nth, sizeof *c->thr_scratch);
    c->spans = inf_alloc((size_t)c->nth * sizeof *c->spans);
    if (!c->amx_scratch || !c->thr_scratch || !c->spans) goto fail;
    snprintf(c->name, sizeof c->name, "%s-%s", pool || c->pool ? "pool" : "simd",
             inf_isa_name(c->k->isa));
    be->name = c->name;
    be->ctx = c;
    be->prepare_weight = simd_prepare_weight;
    be->release_weight = simd_release_weight;
    be->embed = simd_embed;
    be->matmul = simd_matmul;
    be->matmul_n = simd_matmul_n;
    be->rmsnorm = simd_rmsnorm;
    be->rope = simd_rope;
    be->attn_prefill = simd_attn_prefill;
    be->attn_decode = simd_attn_decode;
    be->swiglu = simd_swiglu;
    be->add = simd_add;
    be->moe_sum = simd_moe_sum;
    be->gated_delta = simd_gated_delta;
    be->ssm_conv = simd_ssm_conv;
    be->softmax = simd_softmax;
    be->take_error = simd_take_error;
    inf_backend_complete(be);
    return be;
fail:
    if (c) {
        inf_pool_free(c->pool);
        free(c->amx_scratch);
        free(c->thr_scratch);
        inf_free(c->spans);
        free(c);
    }
    free(be);
    return NULL;
}

void inf_backend_simd_free(inf_backend *be) {
    if (!be) return;
    simd_ctx *c = be->ctx;
    inf_pool_free(c->pool);
    for (int i = 0; i < c->nth; i++) {
        inf_free(c->amx_scratch[i]);
        inf_free(c->thr_scratch[i]);
    }
    free(c->amx_scratch);
    free(c->thr_scratch);
    inf_free(c->spans);
    inf_free(c->attn_part);
    inf_free(c->xq.q);
    inf_free(c->xq.d);
    inf_free(c->xq.s16);
    inf_free(c->xq.ds);
    inf_free(c->xq.bf);
    inf_free(c->xq.f);
    inf_free(c->xq.dT);
    inf_free(c->xq.sT);
    inf_free(c->xq.qT);
    free(c);
    free(be);
}

/* A fixed pseudo-random weight of type t, 16 x 256, packed as this level
 * packs it, hashed: a change to any packer changes the layout's name. */
static uint64_t layout_probe(const simd_ctx *c, inf_dtype t) {
    const size_t rb = inf_dtype_row_bytes(t, 256);
    if (!inf_dtype_get(t) || rb == 0) return 0;
    uint8_t *src = malloc(rb * INF_PANEL);
    if (!src) return 1;
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)t;
    for (size_t i = 0; i < rb * INF_PANEL; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        src[i] = (uint8_t)(x >> 24);
    }
    const inf_tensor ten = {
        .name = "probe", .type = t, .n_dims = 2, .ne = {256, INF_PANEL, 1, 1}, .data = src};
    const inf_weight w = {.t = &ten, .n_in = 256, .n_out = INF_PANEL, .row_bytes = rb};
    uint64_t h = 0;
    inf_packed *p = NULL;
    if (inf_pack_alloc(&p, &w, c->k->pack_kinds) == 0 && p) {
        c->k->pack_panels(p, &w, 0, p->n_panels);
        h = inf_pack_hash_piece(p->data, inf_packed_bytes(p)) ^ (uint64_t)p->kind;
    }
    inf_packed_free(p);
    free(src);
    return h;
}

const char *inf_backend_simd_pack_layout(const inf_backend *be) {
    simd_ctx *c = ctx_of(be);
    if (!c->k->has_packed) return NULL;
    if (!c->layout[0]) {
        uint64_t h[INF_DTYPE_COUNT];
        for (int t = 0; t < INF_DTYPE_COUNT; t++)
            h[t] = layout_probe(c, (inf_dtype)t);
        snprintf(c->layout, sizeof c->layout, "%s-%x-%016llx", inf_isa_name(c->k->isa),
                 c->k->pack_kinds, (unsigned long long)inf_pack_hash_combine(h, INF_DTYPE_COUNT));
    }
    return c->layout;
}

void inf_backend_simd_set_pack_cache(const inf_backend *be, inf_pack_cache *pc) {
    ctx_of(be)->cache = pc;
}

bool inf_backend_is_simd(const inf_backend *be) {
    return be && be->matmul == simd_matmul;
}

int inf_backend_simd_threads(const inf_backend *be) {
    return ctx_of(be)->nth;
}
inf_isa inf_backend_simd_isa(const inf_backend *be) {
    return ctx_of(be)->k->isa;
}
inf_attn_impl inf_backend_simd_attn(const inf_backend *be) {
    return ctx_of(be)->attn;
}
