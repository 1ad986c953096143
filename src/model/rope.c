#include "model/rope.h"

#include <math.h>
#include <stdint.h>

void inf_rope_tables(float *cos_tab, float *sin_tab, int n_ctx, int head_dim, double theta) {
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        double inv_freq = pow(theta, -2.0 * i / head_dim);
        for (int p = 0; p < n_ctx; p++) {
            double a = p * inv_freq;
            cos_tab[(int64_t)p * half + i] = (float)cos(a);
            sin_tab[(int64_t)p * half + i] = (float)sin(a);
        }
    }
}
