/* Codebooks of the grid weight types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S,
 * IQ1_S and IQ1_M), as ggml defines them: entry i packs the magnitudes of 8
 * (IQ2_*, IQ1_*) or 4 (IQ3_*) consecutive weights, one byte each (unsigned;
 * IQ1's signed, -1, 0 or 1), the first weight in the lowest byte. */
#ifndef INF_QUANT_GRIDS_H
#define INF_QUANT_GRIDS_H

#include <stdint.h>

extern const uint64_t inf_iq2s_grid[1024];
extern const uint32_t inf_iq3xxs_grid[256];
extern const uint32_t inf_iq3s_grid[512];
extern const uint64_t inf_iq2xxs_grid[256];
extern const uint64_t inf_iq2xs_grid[512];
extern const uint64_t inf_iq1s_grid[2048];

/* The 8 sign bits of a 7-bit sign code (IQ2_XXS, IQ2_XS, IQ3_XXS): the eighth
 * makes the number of minus signs even. */
static inline unsigned inf_iq_even_signs(unsigned code) {
    return code | (unsigned)__builtin_parity(code) << 7;
}

#endif
