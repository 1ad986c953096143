/* Kernel tables: the per-ISA building blocks the SIMD and pool backends are
 * made of.
 *
 * A table is filled with plain C kernels (kern_generic.c) and then overridden
 * by the best ISA's versions (kern_avx2.c, kern_avx512.c, kern_amx.c,
 * kern_neon.c). Every kernel works on a slice of its op (rows, panels, or
 * attention work items) so the pool can hand disjoint slices to threads; a
 * slice's result never depends on which thread runs it or on the other
 * slices, which is what makes the pool bit-identical to one thread.
 *
 * Packed weights. For the integer and BF16 types the SIMD levels with VNNI
 * (AVX-512) repack a weight once at load time into panels of 16 output rows.
 * Along k a panel is split into groups (32 weights; 256 for Q6_K); a group
 * holds its quants as 64-byte chunks, each chunk = 16 rows x 4 bytes (lane r
 * of a 512-bit register = row r), followed by the group's per-row scales.
 * One 64-byte chunk times a broadcast 4-byte slice of the activations is one
 * VPDPBUSD/VDPBF16PS; sixteen BF16 chunks are one AMX B tile.
 *   BF16: 16 chunks; chunk c, lane r = w[r][2c], w[r][2c+1]            1024 B
 *   Q8_0: 8 chunks; chunk c, lane r = w[r][4c..4c+3] + 128 (u8);
 *         then 16 f16 scales d                                         544 B
 *   Q4_0: 4 chunks; chunk c, lane r byte j: low nibble = q[r][8c+j],
 *         high nibble = q[r][8c+4+j] (q = 0..15, w = d (q - 8));
 *         then 16 f16 d                                                288 B
 *   Q4_K: Q4_0's nibble layout; then 16 f16 (d*sc) and 16 f16 (dmin*m)
 *         (w = (d*sc) q - dmin*m)                                      320 B
 *   Q6_K: a whole super-block, the file's scales as the file has them:
 *         16 sub-groups of 16 k, sub-group s at 192 s: 2 nibble chunks (as
 *         Q4_0, k 0..7 and 8..15), one chunk of high bit pairs (lane r
 *         byte j: bits 2i..2i+1 = high bits of k = 4i + j); then at 3072
 *         the int8 sub-block scales, 16 bytes (one per row) per sub-group;
 *         then at 3328 16 f16 d (w = (d*sc)(q - 32), d*sc exact in f32)
 *                                                                      3360 B
 *   Q5_K: Q4_K's 4 nibble chunks (the low 4 bits), one chunk of fifth bits
 *         (lane r byte j: bit c = bit 4 of q[r][8c+j], bit 4+c = bit 4 of
 *         q[r][8c+4+j]), then 16 f16 A and 16 f16 B (w = A q - B; Q5_0's
 *         and Q5_1's kind, Q5_K itself packs as Q5_KS)                 384 B
 *   IQ4:  Q4_0's layout of 4-bit indices into the type's 16 int8 values
 *         (inf_packed.values: IQ4_NL's and IQ4_XS's inf_iq4nl_values,
 *         MXFP4's doubled e2m1 values), then 16 f16 d (IQ4_XS: d * (ls -
 *         32); MXFP4: 2^(e - 128))                                      288 B
 *   Q4_KS: Q4_K at the file's size, a whole super-block: 8 sub-groups of
 *         32 k, sub-group s at 256 s in Q4_0's nibble layout; then at 2048
 *         the file's 12 scale bytes as 12 planes of 16 (byte j of row r at
 *         2048 + 16 j + r); then at 2240 16 f16 d, at 2272 16 f16 dmin
 *         (w = (d*sc) q - dmin*m, both products exact in f32)        2304 B
 *   Q5_KS: Q5_K at the file's size, the same way: 8 sub-groups of 32 k
 *         at 320 s in the Q5_K kind's layout (4 nibble chunks, a chunk of
 *         fifth bits); then at 2560 the 12 scale planes, at 2752 16 f16 d,
 *         at 2784 16 f16 dmin                                          2816 B
 *   Q3_KS: Q3_K at the file's size, a whole super-block: 16 sub-groups of
 *         16 k at 96 s, each 64 bytes of low bit pairs (lane r byte j: bits
 *         2i..2i+1 = the low 2 bits of q[r][4i+j]) and 4 64-bit words of
 *         third bits (word i at 64 + 8i: bit 4r+j = bit 2 of q[r][4i+j], q =
 *         0..7); then at 1536 the file's 12 scale bytes as 12 planes of 16,
 *         at 1728 16 f16 d (w = (d*(sc - 32)) (q - 4), exact in f32)   1760 B
 *   Q2_KS: Q2_K at the file's size, a whole super-block: 16 sub-groups of
 *         16 k at 64 s, each Q3_KS's 64 bytes of low bit pairs (q = 0..3);
 *         then at 1024 the file's 16 scale bytes (sc | m << 4) in pairs of
 *         sub-groups, byte 2 r + u of the 32 at 1024 + 32 h = scale 2 h + u
 *         of row r; at 1280 16 f16 d, at 1312 16 f16 dmin (w = (d*sc) q -
 *         dmin*m, both products exact in f32)                          1344 B
 *   IQ4S: a whole super-block of 4-bit indices into the weight's own 16
 *         int8 values (inf_packed.values): 16 sub-groups of 16 k at 128 s,
 *         each 2 nibble chunks (as Q4_0, k 0..7 and 8..15); then at 2048 the
 *         int8 sub-group scales as the Q6_K kind's, at 2304 16 f16 d (w =
 *         post d sc values[q], d sc exact in f32): the grid types (IQ1_S,
 *         IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), whose signed
 *         grid values take at most 16 values                          2336 B
 *   F16:  32 rows of k, row c at 32 c: lane r (2 bytes at 2 r) = w[r][c]
 *         as the file's f16, widened to f32 by the kernels (VCVTPH2PS)
 *         and multiplied by the activations as they are (inf_xq.x)    1024 B
 * Other weight types run as one of these kinds where their values are small
 * integers times one scale per group (pack.c's per-type rows: Q5_0 and Q5_1
 * as Q5_K; Q4_1 as Q4_K; IQ4_NL, IQ4_XS and MXFP4 as IQ4, MXFP4 only where
 * every block's power of two is an f16, else the weight stays unpacked;
 * IQ3_XXS and IQ3_S as Q6_K where IQ4S is missing, their signed grid
 * magnitudes as q - 32); the rest use the generic path.
 * A level packs only the kinds it has kernels for (inf_kernels.pack_kinds);
 * IQ4_NL, IQ4_XS and MXFP4 fall back to the Q8_0 kind where IQ4 is missing
 * (Q5_0 too, where Q5_K is), Q4_K to
 * the Q4_K kind where Q4_KS is (AMX, whose int8 tiles read the Q4_K kind),
 * Q3_K to the Q6_K kind (w = d sc (q - 32)) where Q3_KS is (AVX2, AMX).
 * Rows past the last full panel (n_out % 16) use the generic path on the
 * original (mmapped) rows. */
#ifndef INF_BACKEND_KERNELS_H
#define INF_BACKEND_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"
#include "quant/dtype.h"

#define INF_PANEL 16 /* output rows per packed panel */
/* the Q6_K kind's group: 16 sub-groups of 16 k, then their int8 scales, then d */
#define INF_Q6K_SUB_BYTES 192
#define INF_Q6K_SC_OFF 3072
#define INF_Q6K_D_OFF 3328
/* decode prefetches a Q6_K group in 16 parts of 210 bytes (3360 / 16), one per sub-group */
#define INF_Q6K_PREFETCH_PART 210
/* the Q4_KS kind's group: 8 sub-groups of 32 k, the 12 scale planes, d, dmin */
#define INF_Q4KS_SUB_BYTES 256
#define INF_Q4KS_SC_OFF 2048
#define INF_Q4KS_D_OFF 2240
#define INF_Q4KS_DMIN_OFF 2272
#define INF_Q4KS_PREFETCH_PART 288 /* 2304 / 8, one per sub-group */
/* the Q5_KS kind's group: the same with the Q5_K kind's 320-byte sub-groups */
#define INF_Q5KS_SUB_BYTES 320
#define INF_Q5KS_SC_OFF 2560
#define INF_Q5KS_D_OFF 2752
#define INF_Q5KS_DMIN_OFF 2784
#define INF_Q5KS_PREFETCH_PART 352 /* 2816 / 8 */
/* the Q3_KS kind's group: 16 sub-groups of 16 k, the 12 scale planes, d */
#define INF_Q3KS_SUB_BYTES 96
#define INF_Q3KS_SC_OFF 1536
#define INF_Q3KS_D_OFF 1728
#define INF_Q3KS_PREFETCH_PART 110 /* 1760 / 16 */
/* the Q2_KS kind's group: 16 sub-groups of 16 k, the scale pairs, d, dmin */
#define INF_Q2KS_SUB_BYTES 64
#define INF_Q2KS_SC_OFF 1024
#define INF_Q2KS_D_OFF 1280
#define INF_Q2KS_DMIN_OFF 1312
#define INF_Q2KS_PREFETCH_PART 84 /* 1344 / 16 */
/* the IQ4S kind's group: 16 sub-groups of 16 k, their int8 scales, d */
#define INF_IQ4S_SUB_BYTES 128
#define INF_IQ4S_SC_OFF 2048
#define INF_IQ4S_D_OFF 2304
#define INF_IQ4S_PREFETCH_PART 146 /* 2336 / 16 */
#define INF_CHUNK 256              /* k elements dequantized at a time on the generic path */
#define INF_KV_TILE 64             /* keys per flash-attention tile */
#define INF_ATTN_MAX_R                                                                             \
    128 /* query vectors per attention work item: each K/V tile is reused this often */

/* How far ahead decode matmuls prefetch their weight panels into L2 (AVX-512
 * and AVX2): 16 KiB on AMD, 4 KiB elsewhere (docs/PERFORMANCE.md, issue 19). */
static inline int inf_decode_l2_ahead(void) {
    return inf_cpu_features_get()->amd ? 16384 : 4096;
}

/* Decode's prefetch into L2 for weight panels read in order, on AMD (AVX-512
 * and AVX2): the first line of each 4 KiB page that starts in [p, p + bytes),
 * one request per page instead of one per line. The hardware's stream
 * prefetcher stops at each 4 KiB page (in huge pages too), and one request
 * starts it on the next, where a request per line competes with the loads
 * for the same queues (docs/PERFORMANCE.md, issue 19). always_inline: see
 * prefetch_at in kern_avx512.c. */
static inline __attribute__((always_inline)) void inf_prefetch_pages(const uint8_t *p,
                                                                     size_t bytes) {
    const uintptr_t a = (uintptr_t)p, e = a + bytes;
    for (uintptr_t q = (a + 4095) & ~(uintptr_t)4095; q < e; q += 4096)
        __builtin_prefetch((const void *)q, 0, 2); /* locality 2: into L2 (PREFETCHT1) */
}

typedef enum inf_pack_kind {
    INF_PACK_BF16 = 1,
    INF_PACK_Q8_0,
    INF_PACK_Q4_0,
    INF_PACK_Q4_K,
    INF_PACK_Q6_K,
    INF_PACK_Q5_K,
    INF_PACK_IQ4,
    INF_PACK_Q4_KS,
    INF_PACK_Q5_KS,
    INF_PACK_Q3_KS,
    INF_PACK_F16,
    INF_PACK_Q2_KS,
    INF_PACK_IQ4S,
} inf_pack_kind;

#define INF_PACK_KIND_BIT(k) (1u << (k))
/* the kinds every packed level has */
#define INF_PACK_KINDS_BASE                                                                        \
    (INF_PACK_KIND_BIT(INF_PACK_BF16) | INF_PACK_KIND_BIT(INF_PACK_Q8_0) |                         \
     INF_PACK_KIND_BIT(INF_PACK_Q4_0) | INF_PACK_KIND_BIT(INF_PACK_Q4_K) |                         \
     INF_PACK_KIND_BIT(INF_PACK_Q6_K))
#define INF_PACK_KINDS_ALL                                                                         \
    (INF_PACK_KINDS_BASE | INF_PACK_KIND_BIT(INF_PACK_Q5_K) | INF_PACK_KIND_BIT(INF_PACK_IQ4) |    \
     INF_PACK_KIND_BIT(INF_PACK_Q4_KS) | INF_PACK_KIND_BIT(INF_PACK_Q5_KS) |                       \
     INF_PACK_KIND_BIT(INF_PACK_Q3_KS) | INF_PACK_KIND_BIT(INF_PACK_F16) |                         \
     INF_PACK_KIND_BIT(INF_PACK_Q2_KS) | INF_PACK_KIND_BIT(INF_PACK_IQ4S))
/* the kinds the AMX level packs: its int8 tiles read Q4_K, not Q4_KS, and it
 * has no bf16 expansion of Q3_KS (F16 and Q2_KS it packs but never puts on
 * tiles: inf_amx_bf16_kind) */
#define INF_PACK_KINDS_AMX                                                                         \
    (INF_PACK_KINDS_ALL & ~INF_PACK_KIND_BIT(INF_PACK_Q4_KS) & ~INF_PACK_KIND_BIT(INF_PACK_Q3_KS))
/* the AVX2 level's: no Q3_KS kernel (one measured slower than the Q6_K kind) */
#define INF_PACK_KINDS_AVX2 (INF_PACK_KINDS_ALL & ~INF_PACK_KIND_BIT(INF_PACK_Q3_KS))

typedef struct inf_packed {
    inf_pack_kind kind;
    int group;          /* k elements per group: 32, or 256 for the super-block kinds */
    int64_t n_panels;   /* full 16-row panels */
    int64_t n_groups;   /* n_in / group */
    size_t group_bytes; /* bytes of one panel's group */
    float post;         /* the weights are the panels' values times this, a power of two (1;
                           IQ3_XXS 1/2, IQ1 and IQ2 1/8): matmuls scale their packed rows' sums by it,
                           exactly */
    int8_t values[16];  /* IQ4 and IQ4S: the value of each 4-bit index */
    uint8_t *data;      /* [n_panels][n_groups][group_bytes], 4 KiB aligned, in the packed-weight
                           arena (huge pages where the OS allows) */
    struct inf_arena_chunk *chunk; /* the arena chunk data was cut from (backend/arena.h) */
} inf_packed;

/* MXFP4's scale 2^(e - 128) as the packed kinds' f16 d: exact for e in
 * 104..143 (2^-24 .. 2^15, subnormal below 2^-14), 0 outside (pack.c leaves a
 * weight with a nonzero block outside unpacked; a block of zeros is 0 at any scale) */
static inline bool inf_mxfp4_scale_fits(uint8_t e) {
    return e >= 104 && e <= 143;
}
static inline uint16_t inf_mxfp4_scale_f16(uint8_t e) {
    const int k = e - 128;
    return !inf_mxfp4_scale_fits(e) ? 0
           : k >= -14               ? (uint16_t)((k + 15) << 10)
                                    : (uint16_t)(1u << (k + 24));
}

/* Builds the packed form of w into *out: NULL when its type has none or n_in
 * does not split into whole groups (the generic path runs it). Returns -1
 * when the memory for it cannot be had (a weight silently left unpacked
 * would give other bits). Caller frees with inf_packed_free. */
int inf_pack_weight(inf_packed **out, const inf_weight *w); /* any kind (INF_PACK_KINDS_ALL) */
/* The same in two steps, so the panels can be packed by several threads:
 * inf_pack_alloc sets up *out (NULL as above, or when the weight's kind is
 * not in `kinds`, a mask of INF_PACK_KIND_BIT; -1 without memory), then
 * inf_pack_panels fills panels pi0..pi1-1 (any split gives the same bytes). */
int inf_pack_alloc(inf_packed **out, const inf_weight *w, unsigned kinds);
/* The shape inf_pack_alloc would give w (data and chunk NULL): true, or
 * false when w has no packed form under `kinds`. */
bool inf_pack_plan(inf_packed *p, const inf_weight *w, unsigned kinds);
/* Bytes of p's panels. */
size_t inf_packed_bytes(const inf_packed *p);
void inf_pack_panels(inf_packed *p, const inf_weight *w, int64_t pi0, int64_t pi1);
void inf_packed_free(inf_packed *p);

/* Activations quantized once per matmul for the integer kernels: per row t,
 * q = round(x / d) with d = max|x| / 127 per block of 32, plus the sums of q
 * per 16 (the offset corrections of the unsigned weight forms). */
#define INF_XQ_INT8 1
#define INF_XQ_BF16 2
#define INF_XQ_TILES 4 /* with INT8: also dT, sT and qT, the layout the AMX kernel reads */
typedef struct inf_xq {
    int64_t n;      /* row length (multiple of 32) */
    int8_t *q;      /* [T][n] */
    float *d;       /* [T][n/32] */
    int32_t *s16;   /* [T][n/16] */
    float *ds;      /* [T][n/32] d times the sum of q per 32 (read by AVX2's offset terms) */
    uint16_t *bf;   /* [T rounded up to 32][n] bf16 copy (BF16 and AMX kernels) */
    float *f;       /* [T][n] the rows as they are, for levels with bf16_as_f32 (AVX2: BF16
                       panels widened to f32 against exact activations) */
    const float *x; /* [T][n] the caller's rows themselves (the F16 kind reads them) */
    /* d and the sums of q per 32, by blocks of 32 rows: element (t, b) at
     * [t / 32][b][t % 32], so a token block's scales for one k block are contiguous */
    float *dT;   /* [T rounded up to 32 / 32][n/32][32] */
    int32_t *sT; /* same layout */
    int8_t *qT;  /* q in the same order, 32 bytes per element: one group of 32
                    tokens is 1 KiB, two contiguous A tiles */
} inf_xq;

/* One attention work item: R query vectors that read the same KV head.
 * Query r sees keys 0..lim[r]-1 (lim[r] >= 1). Prefill items and decode items
 * go to different bodies (tiles or lanes; keys read in place), chosen by
 * `prefill` alone: a row's result never depends on the other rows of its item,
 * so a prompt row comes out the same whether its span was the whole prompt or
 * the part after a reused prefix. */
typedef struct inf_attn_rows {
    int R;
    int prefill;                    /* from attn_prefill (rather than attn_decode) */
    const float *q[INF_ATTN_MAX_R]; /* [R] -> head_dim floats */
    float *out[INF_ATTN_MAX_R];     /* [R] -> head_dim floats */
    int lim[INF_ATTN_MAX_R];
    int kv_head; /* the KV head the rows read */
    int max_lim; /* max of lim */
    /* Decode key blocks: the item reads keys k0..lim[r]-1 only (k0 a multiple
     * of INF_KV_TILE; 0 otherwise) and, with part != NULL, leaves its
     * unnormalized partial instead of out[r]: part + r*(head_dim+2) holds
     * the accumulator [head_dim], then the running max m and sum l. */
    int k0;
    float *part;
} inf_attn_rows;

/* The unit of a decode step's key blocks. A step over more keys is split
 * into at most INF_ATTN_DECODE_MAX_BLOCKS blocks of a whole number of units
 * (by KV head and by block), and the blocks' partials are merged in block
 * order, so its bits depend on the number of keys only, never on the
 * threads. */
#define INF_ATTN_DECODE_BLOCK 256
#define INF_ATTN_DECODE_MAX_BLOCKS 8

/* Keys per key block of a decode step over n_keys keys. */
static inline int inf_attn_decode_block_keys(int n_keys) {
    const int units = (n_keys + INF_ATTN_DECODE_BLOCK - 1) / INF_ATTN_DECODE_BLOCK;
    const int per = (units + INF_ATTN_DECODE_MAX_BLOCKS - 1) / INF_ATTN_DECODE_MAX_BLOCKS;
    return (per > 0 ? per : 1) * INF_ATTN_DECODE_BLOCK;
}

/* Floats of attention scratch one thread needs for an item of R rows. */
static inline size_t inf_attn_scratch_floats(int R, int head_dim) {
    size_t rows = (size_t)R, rows32 = ((size_t)R + 31) & ~(size_t)31;
    /* K and V tiles + per row: accumulator, a decode block's scores, max and sum; + alignment */
    size_t by_row =
        2 * (size_t)head_dim * INF_KV_TILE + rows * (head_dim + INF_ATTN_DECODE_BLOCK + 2) + 64;
    /* the same with rows in lanes (blocks of 32; AVX2's blocks of 16 fit in
     * it): q^T and accumulators per row, one block's scores, max/sum per row,
     * limits; + alignment */
    size_t by_lane = 2 * (size_t)head_dim * INF_KV_TILE + 2 * rows32 * (size_t)head_dim +
                     32 * INF_KV_TILE + 3 * rows32 + 128;
    /* AMX: per block of 16 rows q pairs and O^T; K, V^T, S^T, p pairs, P.V; + alignment */
    size_t rows16 = ((size_t)R + 15) & ~(size_t)15;
    size_t by_amx = rows16 * (2 * (size_t)head_dim + 3) + 2 * (size_t)INF_KV_TILE * head_dim +
                    2 * INF_KV_TILE * 16 + 16 * (size_t)head_dim + 64;
    size_t most = by_row > by_lane ? by_row : by_lane;
    return most > by_amx ? most : by_amx;
}

/* dst[n] = the values of n weights (whole blocks) at blocks. */
typedef void (*inf_dequant_fn)(float *dst, const void *blocks, int64_t n);

/* A weight type's row of an ISA's table. The generic table fills every row
 * with the type's scalar reference (quant/); an ISA overrides the rows it
 * has vector code for, and must give the same floats bit for bit (the
 * fixture tests read every type on every level). */
typedef struct inf_type_kernels {
    inf_dequant_fn dequant;
} inf_type_kernels;

typedef struct inf_kernels {
    inf_isa isa;

    /* sum a[i]*b[i], i < n */
    float (*dot_f32)(const float *a, const float *b, int n);
    /* per weight type, indexed by inf_dtype */
    inf_type_kernels types[INF_DTYPE_COUNT];

    /* Packed path; NULL where the level has none. */
    int has_packed;
    unsigned pack_kinds; /* the kinds matmul_packed reads (INF_PACK_KIND_BIT mask) */
    /* INF_XQ_BF16 asks quantize_x for xq->f instead of xq->bf (no bf16 dot product) */
    int bf16_as_f32;
    /* Rows t0..t1-1 of x[T][n] into xq: the integer form (what & INF_XQ_INT8)
     * and/or the bf16 copy (what & INF_XQ_BF16). */
    void (*quantize_x)(inf_xq *xq, const float *x, int t0, int t1, int what);
    /* y[t][16p + r] for panels p0..p1-1, all T rows (VNNI / BF16 dot). ldy = row stride of y. */
    void (*matmul_packed)(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T,
                          int64_t p0, int64_t p1);
    /* Same result shape on AMX tiles (prefill); NULL without AMX. scratch: thread-private. */
    void (*matmul_amx)(float *y, int64_t ldy, const inf_packed *pk, const inf_xq *xq, int T,
                       int64_t p0, int64_t p1, bool bf16_tiles, void *scratch);
    size_t (*amx_scratch_bytes)(const inf_packed *pk);
    /* inf_pack_panels with the level's vector code where it has some: the
     * same bytes (the scalar reference is the generic table's, and the
     * fallback for the types a level has no decoder for). */
    void (*pack_panels)(inf_packed *p, const inf_weight *w, int64_t pi0, int64_t pi1);

    /* Row kernels. */
    void (*rmsnorm_row)(float *out, const float *x, const float *w, int n, float eps);
    void (*rope_row)(float *x, int n_heads, int head_dim, int n_rot, const float *cos_row,
                     const float *sin_row);
    void (*swiglu)(float *out, const float *gate, const float *up, int64_t n);
    /* y[i] = x[i] / (1 + exp(-x[i])), in place allowed */
    void (*silu)(float *y, const float *x, int64_t n);
    void (*add)(float *y, const float *x, int64_t n);
    /* One row of inf_backend.moe_sum: y[i] += sum_j w[j] * x[j*n + i]. */
    void (*moe_sum)(float *y, const float *x, const float *w, int k, int64_t n);
    void (*softmax)(float *x, int n);
    /* One row and V head of inf_backend.gated_delta, q and k normalized
     * (delta.h's inf_delta_step_ref, whose operations every level does in
     * its order: the same bits). */
    void (*delta_step)(float *S, float *o, float *u, const float *qn, const float *kn,
                       const float *v, float decay, float beta, int dk, int dv);
    /* Reads p[0..n) once, front to back, with the level's widest loads, and
     * returns the xor of its 64-bit words (so no load can be left out): the
     * streaming read of inferno bench --membw (backend/membw.h). p 32-byte
     * aligned, n a multiple of 128. */
    uint64_t (*read_stream)(const void *p, size_t n);
    /* One attention work item (online softmax over 64-key tiles). */
    void (*attn_rows)(const inf_attn_rows *it, const inf_kv_view *kv, int head_dim, float scale,
                      float *scratch);
    /* Materialized causal attention of query head h (no online softmax): the
     * whole [T][pos0+T] score matrix S is written, softmaxed row by row, then
     * multiplied by V. Only for measuring what flash attention saves
     * (inferno bench --attn materialized); NULL where the level has none. */
    void (*attn_materialized)(float *out, const float *q, const inf_kv_view *kv, int pos0, int T,
                              int h, const inf_attn_shape *s, float *S);
} inf_kernels;

/* n elements of a K or V row of type t (kv_view.h) as floats: the row itself
 * for f32, else its exact values (the scalar reference dequant) in buf[n]. */
static inline const float *inf_kv_row_f32(inf_dtype t, const void *row, float *buf, int n) {
    if (t == INF_F32) return row;
    inf_dtype_get(t)->dequant(buf, row, n);
    return buf;
}

/* dst[n] = elements k0..k0+n-1 of one raw row of type t (k0 and n whole blocks). */
static inline void inf_kern_dequant(const inf_kernels *k, inf_dtype t, float *dst, const void *row,
                                    int64_t k0, int n) {
    const inf_dtype_info *ti = inf_dtype_get(t);
    k->types[t].dequant(dst, (const uint8_t *)row + (size_t)(k0 / ti->block) * ti->block_bytes, n);
}

/* The kernel table for an ISA level (must be one the CPU runs: inf_isa_clamp). */
const inf_kernels *inf_kernels_get(inf_isa isa);

/* Per-ISA fillers (each overrides what it implements). */
void inf_kernels_fill_generic(inf_kernels *k);
void inf_kernels_fill_avx2(inf_kernels *k);
void inf_kernels_fill_avx512(inf_kernels *k);
void inf_kernels_fill_amx(inf_kernels *k);
/* Prefill attention on AMX tiles (kern_attn_amx.c); the table's attn_rows
 * stays in use for decode items. */
void inf_kernels_fill_amx_attn(inf_kernels *k);
/* Prefill attention with query rows in AVX2 lanes (kern_attn_avx2.c). */
void inf_kernels_fill_avx2_attn(inf_kernels *k);
/* Decode attention on AVX2, all rows of an item (a GQA group) in one walk
 * over K/V (kern_attn_decode_avx2.c); kern_avx2.c's row kernel stays for
 * head sizes that are not a multiple of 8. */
void inf_kernels_fill_avx2_decode_attn(inf_kernels *k);
/* Packed matmuls and activation quantization on AVX2 (kern_matmul_avx2.c). */
void inf_kernels_fill_avx2_matmul(inf_kernels *k);
/* Load-time packing on AVX2 + F16C (pack_avx2.c). */
void inf_kernels_fill_avx2_pack(inf_kernels *k);
void inf_kernels_fill_neon(inf_kernels *k);

/* Whether this kind runs on AMX int8 tiles with the VNNI kernels' exact
 * integers and scaling order (Q8_0, Q4_0, Q4_K), so a row's result does not
 * depend on which of the two computes it. Prefill rows use bf16 tiles for
 * every kind instead (faster; see simd.c). */
bool inf_amx_int8_kind(inf_pack_kind kind);

/* Whether prompt rows of this kind run on AMX bf16 tiles (the panels expanded
 * by inf_amx_expand_group): every kind the AMX level packs but F16 (bf16
 * would round its weights), Q2_KS and IQ4S (no expansion yet), which stay on the
 * AVX-512 kernels. */
static inline bool inf_amx_bf16_kind(inf_pack_kind kind) {
    return kind != INF_PACK_F16 && kind != INF_PACK_Q2_KS && kind != INF_PACK_IQ4S;
}

/* One packed panel's integer weights of k 32 kg .. 32 kg + 31 as an AMX B
 * tile (1024 bytes of bf16, the BF16 kind's group layout): what prefill on
 * bf16 tiles multiplies. It uses AVX-512 BF16 instructions and no tile ones,
 * so tests check it on CPUs without AMX; x86-64 builds only. */
void inf_amx_expand_group(uint8_t *dst, const inf_packed *pk, const uint8_t *panel, int64_t kg);

/* AMX self-check: loads the tile configuration, reads it back (STTILECFG) and
 * runs one small BF16 tile product. Returns 0 when both are right. */
int inf_amx_selftest(void);

#endif
