/* Tensor element types, numbered as GGUF/ggml numbers them.
 *
 * Weight types are a table: block size (weights per block) and bytes per block.
 * Quantized block layouts are ggml's, byte for byte, so GGUF data is used in
 * place (mmap, no conversion). */
#ifndef INF_QUANT_DTYPE_H
#define INF_QUANT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum inf_dtype {
    INF_F32 = 0,
    INF_F16 = 1,
    INF_Q4_0 = 2,
    INF_Q8_0 = 8,
    INF_Q4_K = 12,
    INF_Q6_K = 14,
    INF_BF16 = 30,
} inf_dtype;

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

/* Q4_K: 256 weights in 8 sub-blocks of 32, 6-bit scales and mins packed in 12 bytes;
 * w = d * sc * q - dmin * m */
typedef struct {
    uint16_t d;    /* f16 super-block scale for the scales */
    uint16_t dmin; /* f16 super-block scale for the mins */
    uint8_t scales[12];
    uint8_t qs[INF_QK_K / 2];
} inf_block_q4_K;

/* Q6_K: 256 weights in 16 sub-blocks of 16; w = d * scales[s] * (q - 32), q 6-bit */
typedef struct {
    uint8_t ql[INF_QK_K / 2];     /* lower 4 bits */
    uint8_t qh[INF_QK_K / 4];     /* upper 2 bits */
    int8_t scales[INF_QK_K / 16]; /* 8-bit sub-block scales */
    uint16_t d;                   /* f16 super-block scale */
} inf_block_q6_K;

_Static_assert(sizeof(inf_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(inf_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(inf_block_q4_K) == 144, "q4_K block");
_Static_assert(sizeof(inf_block_q6_K) == 210, "q6_K block");

typedef struct inf_dtype_info {
    const char *name; /* "F32", "Q8_0", ... */
    int block;        /* weights per block (1 for float types) */
    size_t block_bytes;
} inf_dtype_info;

/* The info for a type inferno supports, or NULL for any other id. */
const inf_dtype_info *inf_dtype_get(uint32_t type);

/* ggml's name for any type id (also unsupported ones, e.g. "IQ2_XS"), or "unknown". */
const char *inf_ggml_type_name(uint32_t type);

/* Bytes of one row of n weights; 0 if n is not a multiple of the block size
 * or the type is unsupported. */
size_t inf_dtype_row_bytes(uint32_t type, int64_t n);

#endif
