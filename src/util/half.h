/* IEEE half and bfloat16 conversions (scalar, exact, round-to-nearest-even). */
#ifndef INF_UTIL_HALF_H
#define INF_UTIL_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float inf_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t inf_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float inf_bf16_to_f32(uint16_t h) {
    return inf_bits_to_f32((uint32_t)h << 16);
}

static inline uint16_t inf_f32_to_bf16(float f) {
    uint32_t u = inf_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float inf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0) {
        if (man == 0) return inf_bits_to_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    if (exp == 31) return inf_bits_to_f32(sign | 0x7f800000u | (man << 13));
    return inf_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t inf_f32_to_f16(float f) {
    uint32_t u = inf_f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (a < 0x38800000u) {                                   /* subnormal or zero */
        float af = inf_bits_to_f32(a);
        uint32_t m = (uint32_t)nearbyintf(af * 16777216.0f) /* default rounding: to nearest even */;
        return (uint16_t)(sign | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

#endif
