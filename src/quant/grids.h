/* Codebooks of the grid weight types (IQ2_S, IQ3_XXS, IQ3_S), as ggml defines
 * them: entry i packs the magnitudes of 8 (IQ2_S) or 4 (IQ3_*) consecutive
 * weights, one unsigned byte each, the first weight in the lowest byte. */
#ifndef INF_QUANT_GRIDS_H
#define INF_QUANT_GRIDS_H

#include <stdint.h>

extern const uint64_t inf_iq2s_grid[1024];
extern const uint32_t inf_iq3xxs_grid[256];
extern const uint32_t inf_iq3s_grid[512];

#endif
