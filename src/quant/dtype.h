/* Tensor element types, numbered as GGUF/ggml numbers them.
 *
 * Weight types are a table with one row per type (quantize.c): name, block
 * size (weights per block), bytes per block, and the scalar reference
 * dequantizer and quantizer. Quantized block layouts are ggml's, byte for
 * byte, so GGUF data is used in place (mmap, no conversion). Adding a type is
 * a row here plus its reference functions; the fast kernels (backend/) add
 * their own rows per ISA and fall back to the reference where they have none. */
#ifndef INF_QUANT_DTYPE_H
#define INF_QUANT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum inf_dtype {
    INF_F32 = 0,
    INF_F16 = 1,
    INF_Q4_0 = 2,
    INF_Q4_1 = 3,
    INF_Q5_0 = 6,
    INF_Q5_1 = 7,
    INF_Q8_0 = 8,
    INF_Q2_K = 10,
    INF_Q3_K = 11,
    INF_Q4_K = 12,
    INF_Q5_K = 13,
    INF_Q6_K = 14,
    INF_IQ2_XXS = 16,
    INF_IQ2_XS = 17,
    INF_IQ3_XXS = 18,
    INF_IQ1_S = 19,
    INF_IQ4_NL = 20,
    INF_IQ3_S = 21,
    INF_IQ2_S = 22,
    INF_IQ4_XS = 23,
    INF_IQ1_M = 29,
    INF_BF16 = 30,
    INF_MXFP4 = 39,
} inf_dtype;

#define INF_DTYPE_COUNT 40 /* ids below this can have a table row */

#define INF_QK8_0 32
#define INF_QK4_0 32
#define INF_QK_K 256

/* Q8_0: 32 weights = d * qs[i] */
typedef struct {
    uint16_t d; /* f16 */
    int8_t qs[INF_QK8_0];
} inf_block_q8_0;

/* Q4_0: 32 weights = d * (nibble - 8); byte j holds weight j (low) and j+16 (high) */
typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[INF_QK4_0 / 2];
} inf_block_q4_0;

/* Q4_1: 32 weights = d * nibble + m; nibbles as Q4_0 */
typedef struct {
    uint16_t d, m; /* f16 */
    uint8_t qs[16];
} inf_block_q4_1;

/* Q5_0: 32 weights = d * (q - 16), q 5-bit: low 4 bits as Q4_0's nibbles,
 * bit 4 of weight j in bit j of qh (little-endian u32) */
typedef struct {
    uint16_t d; /* f16 */
    uint8_t qh[4];
    uint8_t qs[16];
} inf_block_q5_0;

/* Q5_1: 32 weights = d * q + m, q 5-bit as Q5_0 */
typedef struct {
    uint16_t d, m; /* f16 */
    uint8_t qh[4];
    uint8_t qs[16];
} inf_block_q5_1;

/* Q2_K: 256 weights in 16 sub-blocks of 16; w = d * sc * q - dmin * m with
 * scales[s] = sc | m << 4 and q 2-bit: weight k (h = k/128, l = k%32) in
 * qs[32h + l] at bits 2*((k%128)/32) */
typedef struct {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin; /* f16 */
} inf_block_q2_K;

/* Q3_K: 256 weights in 16 sub-blocks of 16; w = d * (sc - 32) * (q - 4), q
 * 3-bit: low 2 bits as Q2_K's, bit 2 of weight k in hmask[k%32] bit k/32;
 * 16 6-bit sc: low 4 bits in scales[s] (s < 8) or scales[s-8] >> 4, high 2
 * bits in scales[8 + s%4] at bits 2*(s/4) */
typedef struct {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d; /* f16 */
} inf_block_q3_K;

/* Q4_K: 256 weights in 8 sub-blocks of 32, 6-bit scales and mins packed in 12 bytes;
 * w = d * sc * q - dmin * m */
typedef struct {
    uint16_t d;    /* f16 super-block scale for the scales */
    uint16_t dmin; /* f16 super-block scale for the mins */
    uint8_t scales[12];
    uint8_t qs[INF_QK_K / 2];
} inf_block_q4_K;

/* Q5_K: Q4_K with a fifth bit: bit 4 of weight k in qh[k%32] bit k/32 */
typedef struct {
    uint16_t d, dmin; /* f16 */
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} inf_block_q5_K;

/* Q6_K: 256 weights in 16 sub-blocks of 16; w = d * scales[s] * (q - 32), q 6-bit */
typedef struct {
    uint8_t ql[INF_QK_K / 2];     /* lower 4 bits */
    uint8_t qh[INF_QK_K / 4];     /* upper 2 bits */
    int8_t scales[INF_QK_K / 16]; /* 8-bit sub-block scales */
    uint16_t d;                   /* f16 super-block scale */
} inf_block_q6_K;

/* IQ4_NL: 32 weights = d * inf_iq4nl_values[nibble]; nibbles as Q4_0 */
typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[16];
} inf_block_iq4_nl;

/* IQ4_XS: 256 weights in 8 sub-blocks of 32 = d * (ls - 32) * values[nibble];
 * 6-bit ls of sub-block s: low 4 bits in scales_l[s/2] (nibble s%2), high 2
 * in scales_h at bits 2s; sub-block s's nibbles are qs[16s..16s+15] as Q4_0 */
typedef struct {
    uint16_t d; /* f16 */
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
} inf_block_iq4_xs;

/* MXFP4: 32 weights = 2^(e - 128) * inf_fp4_values[nibble] (e2m1 values
 * doubled, hence the 128); nibbles as Q4_0 */
typedef struct {
    uint8_t e; /* E8M0 exponent */
    uint8_t qs[16];
} inf_block_mxfp4;

/* IQ2_XXS: 256 weights in 8 sub-blocks of 32 = d * (0.5 + ls) / 4 * grid[idx]
 * (8 magnitudes) * signs; per sub-block two u32 at qs + 4 s: the first holds
 * the 4 index bytes of its 4 groups of 8, the second four 7-bit sign codes
 * (the eighth sign makes the parity even) and ls in bits 28..31 */
typedef struct {
    uint16_t d; /* f16 */
    uint16_t qs[32];
} inf_block_iq2_xxs;

/* IQ2_XS: 256 weights in 32 groups of 8 = d * (0.5 + ls) / 4 * grid[idx] *
 * signs; qs[l] = a 9-bit index | a 7-bit sign code << 9 (parity as IQ2_XXS);
 * ls = nibble of scales[l / 4] per 16 weights (low nibble first) */
typedef struct {
    uint16_t d; /* f16 */
    uint16_t qs[32];
    uint8_t scales[8];
} inf_block_iq2_xs;

/* IQ1_S: 256 weights in 8 sub-blocks of 32 = d * (2 ls + 1) * (grid[idx] +
 * delta), grid values -1, 0, 1; idx 11-bit = qs[4 s + l] | (qh[s] >> 3 l & 7)
 * << 8; ls = qh[s] bits 12..14, delta = -1/8 where bit 15 is set, else 1/8 */
typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[32];
    uint16_t qh[8];
} inf_block_iq1_s;

/* IQ1_M: the same values with a 3-bit ls per 16 weights (scales as 4 u16,
 * ls of 16 weights j at bits 3 (j % 4) of u16 j / 4) and a delta per 8; idx
 * 11-bit = qs[4 s + l] | 3 bits of qh[2 s + l / 2] (low nibble for even l)
 * << 8, the nibble's bit 3 the delta's sign; d (f16) = the top nibbles of
 * the four scale u16 */
typedef struct {
    uint8_t qs[32];
    uint8_t qh[16];
    uint8_t scales[8];
} inf_block_iq1_m;

/* IQ2_S: 256 weights in 8 sub-blocks of 32, each 4 groups of 8 weights =
 * d * (0.5 + ls) / 4 * grid[idx] (8 magnitudes) * signs; idx 10-bit = qs[l]
 * | (qh[s] >> 2l & 3) << 8; ls = scales[s] nibble l/2 (two per sub-block);
 * sign bits: the 32 bytes after the 32 index bytes of qs */
typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t scales[8];
} inf_block_iq2_s;

/* IQ3_XXS: 256 weights in 8 sub-blocks of 32 = d * (0.5 + ls) / 2 * grid[idx]
 * (4 magnitudes) * signs; qs[0..63] the indices, then per sub-block a u32:
 * four 7-bit sign codes (the eighth sign makes the parity even) and ls in
 * bits 28..31 */
typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[96];
} inf_block_iq3_xxs;

/* IQ3_S: 256 weights in 8 sub-blocks of 32 = d * (1 + 2 ls) * grid[idx] (4
 * magnitudes) * signs; idx 9-bit = qs[i] | bit i%8 of qh[sub-block] << 8,
 * one sign bit per weight, ls a nibble per sub-block */
typedef struct {
    uint16_t d; /* f16 */
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t signs[32];
    uint8_t scales[4];
} inf_block_iq3_s;

/* IQ4_NL/IQ4_XS's 16 non-linear values and MXFP4's e2m1 values (doubled). */
extern const int8_t inf_iq4nl_values[16];
extern const int8_t inf_fp4_values[16];

_Static_assert(sizeof(inf_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(inf_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(inf_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(inf_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(inf_block_q2_K) == 84, "q2_K block");
_Static_assert(sizeof(inf_block_q3_K) == 110, "q3_K block");
_Static_assert(sizeof(inf_block_q5_K) == 176, "q5_K block");
_Static_assert(sizeof(inf_block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(inf_block_iq4_xs) == 136, "iq4_xs block");
_Static_assert(sizeof(inf_block_mxfp4) == 17, "mxfp4 block");
_Static_assert(sizeof(inf_block_iq2_s) == 82, "iq2_s block");
_Static_assert(sizeof(inf_block_iq2_xxs) == 66, "iq2_xxs block");
_Static_assert(sizeof(inf_block_iq2_xs) == 74, "iq2_xs block");
_Static_assert(sizeof(inf_block_iq1_s) == 50, "iq1_s block");
_Static_assert(sizeof(inf_block_iq1_m) == 56, "iq1_m block");
_Static_assert(sizeof(inf_block_iq3_xxs) == 98, "iq3_xxs block");
_Static_assert(sizeof(inf_block_iq3_s) == 110, "iq3_s block");
_Static_assert(sizeof(inf_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(inf_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(inf_block_q6_K) == 210, "q6_K block");

typedef struct inf_dtype_info {
    const char *name; /* "F32", "Q8_0", ... */
    int block;        /* weights per block (1 for float types) */
    size_t block_bytes;
    /* The scalar reference: y[n] = the values of n weights (whole blocks) at src. */
    void (*dequant)(float *y, const void *src, int64_t n);
    /* x[n] into whole blocks at dst; NULL where inferno has no quantizer (grid types). */
    void (*quant)(void *dst, const float *x, int64_t n);
} inf_dtype_info;

/* The table row of a type inferno reads, or NULL for any other id. */
const inf_dtype_info *inf_dtype_get(uint32_t type);

/* ggml's name for any type id (also unsupported ones, e.g. "IQ2_XS"), or "unknown". */
const char *inf_ggml_type_name(uint32_t type);

/* Bytes of one row of n weights; 0 if n is not a multiple of the block size
 * or the type is unsupported. */
size_t inf_dtype_row_bytes(uint32_t type, int64_t n);

#endif
