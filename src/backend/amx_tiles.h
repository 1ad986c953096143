/* The AMX tile configuration shared by the AMX kernel files (compiled with
 * -mamx-*; include this header from nowhere else). */
#ifndef INF_BACKEND_AMX_TILES_H
#define INF_BACKEND_AMX_TILES_H

#include <stdint.h>

/* The 64-byte operand of LDTILECFG (palette 1). */
typedef struct inf_tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} inf_tile_config;

/* Tiles 0-7 all 16 rows x 64 bytes (kern_amx.c). It lives in static const
 * memory: gcc 12 may delete the stores that fill an on-stack configuration
 * before LDTILECFG. */
extern const inf_tile_config inf_amx_cfg_16x64;

#endif
