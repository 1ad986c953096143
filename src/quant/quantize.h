/* Scalar reference quantization and dequantization for every weight type.
 *
 * These are the oracles: simple loops, ggml's block layouts byte for byte
 * (see dtype.h). Fast kernels elsewhere are checked against them. */
#ifndef INF_QUANT_QUANTIZE_H
#define INF_QUANT_QUANTIZE_H

#include <stdint.h>

#include "quant/dtype.h"

/* dst[n] = the f32 values of one row of n weights of type t at src.
 * n must be a multiple of the type's block size. */
void inf_dequantize_row(inf_dtype t, float *dst, const void *src, int64_t n);

/* Quantizes n floats into one row of type t at dst (inf_dtype_row_bytes(t, n)
 * bytes). Returns 0, or -1 if n is not a multiple of the block size. */
int inf_quantize_row(inf_dtype t, void *dst, const float *src, int64_t n);

#endif
