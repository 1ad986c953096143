/* Reference (de)quantization: hand-built blocks decoded to values worked out
 * from the format definitions (not from the code under test), round trips
 * with error bounds per type, float rounding, and sizes. */
#include <stdlib.h>

#include "harness.h"
#include "quant/quantize.h"
#include "util/half.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}
static float normal(void) {
    double u = uniform(), v = uniform();
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

/* Q8_0: d = 0.5 (f16 0x3800), qs[j] = j - 16  =>  w[j] = (j - 16) / 2 */
static void test_q8_0_block(void) {
    inf_block_q8_0 b;
    b.d = 0x3800;
    for (int j = 0; j < 32; j++)
        b.qs[j] = (int8_t)(j - 16);
    float y[32];
    inf_dequantize_row(INF_Q8_0, y, &b, 32);
    float want[32];
    for (int j = 0; j < 32; j++)
        want[j] = (j - 16) * 0.5f;
    CHECK_CLOSE(y, want, 32, 0.0);
}

/* Q4_0: d = 2 (0x4000); byte j: low nibble j, high nibble 15 - j.
 * w[j] = (j - 8) * 2, w[j + 16] = (15 - j - 8) * 2. */
static void test_q4_0_block(void) {
    inf_block_q4_0 b;
    b.d = 0x4000;
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y[32], want[32];
    inf_dequantize_row(INF_Q4_0, y, &b, 32);
    for (int j = 0; j < 16; j++) {
        want[j] = (float)((j - 8) * 2);
        want[j + 16] = (float)((7 - j) * 2);
    }
    CHECK_CLOSE(y, want, 32, 0.0);
}

/* Q4_K: d = 1 (0x3c00), dmin = 0.5 (0x3800), 6-bit sub-block scales
 * sc = {1,2,3,4,17,33,50,63} and mins m = {0,1,2,3,20,40,60,5}, packed by
 * hand per the format:
 *   bytes 0..3:  sc[0..3] | (sc[4..7] >> 4) << 6
 *   bytes 4..7:  m[0..3]  | (m[4..7] >> 4) << 6
 *   bytes 8..11: (sc[4..7] & 15) | (m[4..7] & 15) << 4
 * Quants: 4 chunks of 32 bytes; chunk c's low nibbles are sub-block 2c,
 * high nibbles sub-block 2c+1; element l of sub-block s has q = (l + s) % 16.
 * w = d * sc[s] * q - dmin * m[s]. */
static void test_q4_K_block(void) {
    static const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
    static const int m[8] = {0, 1, 2, 3, 20, 40, 60, 5};
    static const uint8_t packed[12] = {0x41, 0x82, 0xC3, 0xC4, 0x40, 0x81,
                                       0xC2, 0x03, 0x41, 0x81, 0xC2, 0x5F};
    inf_block_q4_K b;
    b.d = 0x3c00;
    b.dmin = 0x3800;
    memcpy(b.scales, packed, 12);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = (l + 2 * c) % 16, hi = (l + 2 * c + 1) % 16;
            b.qs[32 * c + l] = (uint8_t)(lo | (hi << 4));
        }
    float y[256], want[256];
    for (int s = 0; s < 8; s++)
        for (int l = 0; l < 32; l++)
            want[32 * s + l] = 1.0f * sc[s] * ((l + s) % 16) - 0.5f * m[s];
    inf_dequantize_row(INF_Q4_K, y, &b, 256);
    CHECK_CLOSE(y, want, 256, 0.0);
}

/* Q6_K: d = 0.25 (0x3400); 16 int8 scales sc[s] = ±(8s + 1) (negative for
 * odd s); weight w (0..255) has q6 = 7w % 64 and sub-block s = w / 16.
 * Layout: half h = w / 128, r = w % 128, quarter k = r / 32, l = r % 32;
 * the low 4 bits go to ql[64h + l + 32(k & 1)] (low nibble for k < 2, high
 * for k >= 2); the high 2 bits to qh[32h + l] at bit 2k.
 * value = d * sc[s] * (q6 - 32). */
static void test_q6_K_block(void) {
    inf_block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = 0x3400;
    int scale[16];
    for (int s = 0; s < 16; s++) {
        scale[s] = (s % 2 ? -1 : 1) * (8 * s + 1);
        b.scales[s] = (int8_t)scale[s];
    }
    float want[256], y[256];
    for (int w = 0; w < 256; w++) {
        int q6 = (7 * w) % 64;
        int h = w / 128, r = w % 128, k = r / 32, l = r % 32;
        uint8_t *ql = &b.ql[64 * h + l + 32 * (k & 1)];
        *ql |= (uint8_t)((q6 & 15) << (k >= 2 ? 4 : 0));
        b.qh[32 * h + l] |= (uint8_t)((q6 >> 4) << (2 * k));
        want[w] = 0.25f * scale[w / 16] * (q6 - 32);
    }
    inf_dequantize_row(INF_Q6_K, y, &b, 256);
    CHECK_CLOSE(y, want, 256, 0.0);
}

/* rows of a 16-bit float type t: every value the bits of the scalar
 * conversion conv, at every length up to 80 and offset up to 7, and nothing
 * written past the row */
static void check_half_rows(inf_dtype t, const char *name, uint16_t (*conv)(float),
                            const float *x) {
    uint16_t got[88];
    for (int off = 0; off < 8; off++)
        for (int n = 1; n + off <= 80; n++) {
            memset(got, 0xa5, sizeof got);
            CHECK_INT(inf_quantize_row(t, got, x + off, n), 0);
            int bad = -1;
            for (int i = 0; i < n && bad < 0; i++)
                if (got[i] != conv(x[off + i])) bad = i;
            CHECK_MSG(bad < 0 && got[n] == 0xa5a5, "%s row of %d at %d: [%d] %04x, expected %04x",
                      name, n, off, bad, bad >= 0 ? got[bad] : 0,
                      bad >= 0 ? conv(x[off + bad]) : 0);
        }
}

/* f16 rows (the f16 K/V cache's stores; F16C eight at a time where the CPU
 * has it): every value the bits of the scalar conversion, at every length
 * and offset, over normals, subnormals, halfway cases, overflow, infinities,
 * zeros and NaNs */
static void test_f16_rows(void) {
    enum { N = 1000 };
    float x[N];
    uint32_t r = 12345;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        uint32_t bits = r;
        switch (i % 8) {
        case 0: /* f16's range and just past it: exponents 2^-26 .. 2^17 */
            bits = (r & 0x807fffffu) | ((uint32_t)(101 + (r >> 8) % 43) << 23);
            break;
        case 1: /* halfway between two f16 values */
            bits = (r & 0x807fe000u) | 0x1000u | ((uint32_t)(113 + (r >> 9) % 30) << 23);
            break;
        case 2:
            bits = (r & 0x80000000u) | (i % 3 == 0 ? 0x7f800000u : 0u); /* inf, 0 */
            break;
        case 3:
            bits = (i % 16 == 3) ? 0x7fc00000u | (r & 0x803fffffu) : bits; /* NaN, any bits */
            break;
        }
        memcpy(&x[i], &bits, 4);
    }
    check_half_rows(INF_F16, "f16", inf_f32_to_f16, x);
    uint16_t all[N];
    CHECK_INT(inf_quantize_row(INF_F16, all, x, N), 0);
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (all[i] != inf_f32_to_f16(x[i])) bad = i;
    CHECK_MSG(bad < 0, "f16 row of %d: [%d] differs from the scalar conversion", N, bad);
}

/* bf16 rows (the bf16 K/V cache's stores; AVX2 eight at a time where the
 * CPU has it): the bits of inf_f32_to_bf16 at every length and offset, over
 * halfway cases both ways, infinities, zeros, subnormals and NaNs */
static void test_bf16_rows(void) {
    enum { N = 1000 };
    float x[N];
    uint32_t r = 777;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        uint32_t bits = r;
        switch (i % 8) {
        case 1: /* halfway between two bf16 values, odd or even below */
            bits = (r & 0xffff0000u) | 0x8000u;
            break;
        case 2:
            bits = (r & 0x80000000u) | (i % 3 == 0 ? 0x7f800000u : 0u); /* inf, 0 */
            break;
        case 3:
            bits = (i % 16 == 3) ? 0x7f800001u | (r & 0x807fffffu) : bits; /* NaN, any bits */
            break;
        case 4: /* rounds up into the next binade, or to infinity */
            bits = (r & 0xff800000u) | 0x7fffffu;
            break;
        case 5: /* subnormal */
            bits &= 0x807fffffu;
            break;
        }
        memcpy(&x[i], &bits, 4);
    }
    check_half_rows(INF_BF16, "bf16", inf_f32_to_bf16, x);
}

/* ggml's reference Q8_0 block, written out here: the oracle for the rows below */
static void ref_q8_0_block(inf_block_q8_0 *b, const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    b->d = inf_f32_to_f16(d);
    for (int j = 0; j < 32; j++)
        b->qs[j] = (int8_t)roundf(x[j] * id);
}

/* q8_0 rows (the q8_0 K/V cache's stores; AVX2 a block at a time where the
 * CPU has it): ggml's reference bytes for blocks of random scales, products
 * exactly halfway between integers (rounded away from zero), zeros, signed
 * zeros, subnormals and one value of each block at the maximum; a block with a
 * NaN gets the reference's scale */
static void test_q8_0_rows(void) {
    enum { NB = 64 };
    float x[NB * 32 + 8];
    uint32_t r = 4242;
    for (int i = 0; i < NB * 32 + 8; i++) {
        r = r * 1664525u + 1013904223u;
        const int blk = i / 32;
        float v = ((float)(r >> 8) / 16777216.0f - 0.5f) * ldexpf(1.0f, blk % 24 - 12);
        switch (blk % 6) {
        case 1: /* amax 127 gives d = 1 and id = 1: every k + 0.5 is a tie */
            v = (float)((int)(r >> 9) % 254 - 127) + ((r & 1) ? 0.5f : 0.0f);
            if (i % 32 == 5) v = (r & 2) ? 127.0f : -127.0f;
            break;
        case 2:
            v = (i % 32 == 7) ? -0.0f : 0.0f; /* an all-zero block: d = 0 */
            break;
        case 3:
            v *= 0x1p-140f; /* subnormals */
            break;
        }
        x[i] = v;
    }
    x[4 * 32 + 9] = NAN;
    inf_block_q8_0 got[NB], want[NB];
    for (int off = 0; off < 8; off++) {
        CHECK_INT(inf_quantize_row(INF_Q8_0, got, x + off, NB * 32), 0);
        for (int b = 0; b < NB; b++)
            ref_q8_0_block(&want[b], x + off + 32 * b);
        int bad = -1;
        for (int b = 0; b < NB && bad < 0; b++) {
            const int has_nan =
                off <= 9 && 4 * 32 + 9 - off >= 32 * b && 4 * 32 + 9 - off < 32 * b + 32;
            if (got[b].d != want[b].d || (!has_nan && memcmp(got[b].qs, want[b].qs, 32))) bad = b;
        }
        CHECK_MSG(bad < 0, "q8_0 row at offset %d: block %d differs from the reference", off, bad);
    }
}

static void test_float_rounding(void) {
    uint16_t h[6];
    float x[6] = {1.0f + 0x1p-11f,     /* halfway: ties to even -> 1.0 */
                  1.0f + 3 * 0x1p-11f, /* halfway: ties to even -> 1 + 2^-9 */
                  65520.0f,            /* rounds past the largest half -> inf */
                  -0x1p-25f,           /* below half of the smallest subnormal -> -0 */
                  0x1p-24f * 1.5f,     /* halfway between subnormals 1 and 2 -> 2 */
                  -2.5f};
    CHECK_INT(inf_quantize_row(INF_F16, h, x, 6), 0);
    CHECK_INT(h[0], 0x3c00);
    CHECK_INT(h[1], 0x3c02);
    CHECK_INT(h[2], 0x7c00);
    CHECK_INT(h[3], 0x8000);
    CHECK_INT(h[4], 0x0002);
    CHECK_INT(h[5], 0xc100);
    float b[4] = {1.0f + 0x1p-8f,            /* halfway: even -> 1.0 */
                  1.0f + 3 * 0x1p-8f,        /* halfway: even -> 1 + 2^-6 */
                  1.0f + 0x1p-8f + 0x1p-20f, /* just above halfway -> up */
                  -3.0f};
    CHECK_INT(inf_quantize_row(INF_BF16, h, b, 4), 0);
    CHECK_INT(h[0], 0x3f80);
    CHECK_INT(h[1], 0x3f82);
    CHECK_INT(h[2], 0x3f81);
    CHECK_INT(h[3], 0xc040);
    float back[4];
    inf_dequantize_row(INF_BF16, back, h, 4);
    CHECK(back[1] == 1.0f + 0x1p-6f && back[3] == -3.0f);
}

static void test_sizes(void) {
    CHECK_INT(inf_dtype_row_bytes(INF_F32, 10), 40);
    CHECK_INT(inf_dtype_row_bytes(INF_BF16, 10), 20);
    CHECK_INT(inf_dtype_row_bytes(INF_Q8_0, 1024), 32 * 34);
    CHECK_INT(inf_dtype_row_bytes(INF_Q4_0, 1024), 32 * 18);
    CHECK_INT(inf_dtype_row_bytes(INF_Q4_K, 1024), 4 * 144);
    CHECK_INT(inf_dtype_row_bytes(INF_Q6_K, 3072), 12 * 210);
    CHECK_INT(inf_dtype_row_bytes(INF_Q6_K, 300), 0);
    float x[64] = {0};
    unsigned char buf[1024];
    CHECK_INT(inf_quantize_row(INF_Q8_0, buf, x, 48), -1);
    CHECK_INT(inf_quantize_row(INF_Q4_K, buf, x, 64), -1);
    CHECK_INT(inf_quantize_row(INF_Q8_0, buf, x, 64), 0);
}

/* Quantize then dequantize n values; returns max abs error and rms error. */
static void round_trip(inf_dtype t, const float *x, float *y, int64_t n, double *max_err,
                       double *rms_err) {
    void *q = malloc(inf_dtype_row_bytes(t, n));
    CHECK_INT(inf_quantize_row(t, q, x, n), 0);
    inf_dequantize_row(t, y, q, n);
    double mx = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - y[i]);
        if (!(e <= mx)) mx = e; /* NaN sticks */
        s += e * e;
    }
    *max_err = mx;
    *rms_err = sqrt(s / n);
    free(q);
}

static void test_round_trips(void) {
    enum { N = 256 * 64 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++)
        x[i] = normal() * 0.05f; /* std 0.05, like a weight matrix */
    double mx, rms;

    round_trip(INF_F32, x, y, N, &mx, &rms);
    CHECK_MSG(mx == 0, "f32 max err %g", mx);

    /* f16 / bf16: relative error at most half an ulp */
    int bad16 = 0, badbf = 0;
    round_trip(INF_F16, x, y, N, &mx, &rms);
    for (int i = 0; i < N; i++)
        if (fabsf(x[i]) > 1e-4f && fabsf(x[i] - y[i]) > fabsf(x[i]) * 0x1p-11f) bad16++;
    round_trip(INF_BF16, x, y, N, &mx, &rms);
    for (int i = 0; i < N; i++)
        if (fabsf(x[i] - y[i]) > fabsf(x[i]) * 0x1p-8f) badbf++;
    CHECK_INT(bad16, 0);
    CHECK_INT(badbf, 0);

    /* Q8_0 / Q4_0: per block, error within half a step (plus the f16 rounding
     * of the scale); Q4_0's top value can clamp, costing up to one step. */
    struct {
        inf_dtype t;
        double steps;
        double qmax;
    } blk[] = {{INF_Q8_0, 0.5, 127}, {INF_Q4_0, 1.0, 8}};
    for (int k = 0; k < 2; k++) {
        round_trip(blk[k].t, x, y, N, &mx, &rms);
        int bad = 0;
        for (int b = 0; b < N / 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(x[32 * b + j]));
            double step = amax / blk[k].qmax, tol = step * (blk[k].steps + blk[k].qmax * 0x1p-10);
            for (int j = 0; j < 32; j++)
                if (!(fabs((double)x[32 * b + j] - y[32 * b + j]) <= tol)) bad++;
        }
        CHECK_MSG(bad == 0, "%s: %d weights outside the per-block bound",
                  inf_dtype_get(blk[k].t)->name, bad);
    }
    round_trip(INF_Q8_0, x, y, N, &mx, &rms);
    CHECK_MSG(rms < 0.05 * 0.006, "q8_0 rms %g", rms);
    round_trip(INF_Q4_0, x, y, N, &mx, &rms);
    CHECK_MSG(rms < 0.05 * 0.12, "q4_0 rms %g", rms);

    /* K-quants: rms error relative to the data's std (0.05), and no weight
     * off by more than a generous fraction of the sub-block's range. */
    round_trip(INF_Q4_K, x, y, N, &mx, &rms);
    CHECK_MSG(rms < 0.05 * 0.10, "q4_K rms %g (%.3f of std)", rms, rms / 0.05);
    CHECK_MSG(mx < 0.05 * 0.6, "q4_K max %g", mx);
    double rms4k = rms;
    round_trip(INF_Q6_K, x, y, N, &mx, &rms);
    CHECK_MSG(rms < 0.05 * 0.03, "q6_K rms %g (%.3f of std)", rms, rms / 0.05);
    CHECK_MSG(mx < 0.05 * 0.15, "q6_K max %g", mx);
    CHECK(rms < rms4k / 3); /* 2 more bits: clearly better */

    /* shifted data (all positive): the format's range always includes 0
     * (min <= 0), so 16 levels span [0, ~1.4]: rms about 1.4/15/sqrt(12) */
    for (int i = 0; i < N; i++)
        x[i] = 1.0f + 0.1f * normal();
    round_trip(INF_Q4_K, x, y, N, &mx, &rms);
    CHECK_MSG(rms < 0.03, "q4_K shifted rms %g", rms);
    /* shifted negative: the min carries the offset, the step follows the spread */
    for (int i = 0; i < N; i++)
        x[i] = -1.0f + 0.1f * normal();
    round_trip(INF_Q4_K, x, y, N, &mx, &rms);
    CHECK_MSG(rms < 0.03, "q4_K negative shifted rms %g", rms);

    /* degenerate blocks: zeros and constants come back exactly (zeros) or
     * close (constants), never NaN */
    inf_dtype all[] = {INF_F16, INF_BF16, INF_Q8_0, INF_Q4_0, INF_Q4_K, INF_Q6_K};
    for (int k = 0; k < 6; k++) {
        memset(x, 0, 512 * sizeof *x);
        round_trip(all[k], x, y, 512, &mx, &rms);
        CHECK_MSG(mx == 0, "%s zeros: max err %g", inf_dtype_get(all[k])->name, mx);
        for (int i = 0; i < 512; i++)
            x[i] = -0.75f;
        round_trip(all[k], x, y, 512, &mx, &rms);
        CHECK_MSG(mx < 0.01, "%s constant: max err %g", inf_dtype_get(all[k])->name, mx);
        /* one outlier among small weights */
        for (int i = 0; i < 512; i++)
            x[i] = 0.01f * normal();
        x[100] = 40.0f;
        round_trip(all[k], x, y, 512, &mx, &rms);
        CHECK_MSG(fabsf(y[100] - 40.0f) < 40.0f * 0.1f, "%s outlier came back as %g",
                  inf_dtype_get(all[k])->name, y[100]);
    }
    free(x);
    free(y);
}

int main(void) {
    test_q8_0_block();
    test_q4_0_block();
    test_q4_K_block();
    test_q6_K_block();
    test_float_rounding();
    test_f16_rows();
    test_bf16_rows();
    test_q8_0_rows();
    test_sizes();
    test_round_trips();
    return th_report();
}
