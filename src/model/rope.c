#include "model/rope.h"

#include <math.h>
#include <stdint.h>

/* The dimension (of d) whose frequency makes n_rot turns over n_ctx positions. */
static double correction_dim(double n_rot, int d, double theta, int n_ctx) {
    return d * log(n_ctx / (n_rot * 2 * M_PI)) / (2 * log(theta));
}

void inf_rope_fill(float *cos_tab, float *sin_tab, int from, int to, int head_dim,
                   const inf_hparams *hp) {
    const int half = head_dim / 2;
    const double theta = hp->rope_theta, factor = hp->yarn_factor;
    const double scale = hp->rope_attn_factor > 0 ? hp->rope_attn_factor : 1.0;
    double low = 0, high = 0;
    if (factor > 0) {
        const double fast = hp->yarn_beta_fast > 0 ? hp->yarn_beta_fast : 32;
        const double slow = hp->yarn_beta_slow > 0 ? hp->yarn_beta_slow : 1;
        low = floor(correction_dim(fast, head_dim, theta, hp->yarn_orig_ctx));
        high = ceil(correction_dim(slow, head_dim, theta, hp->yarn_orig_ctx));
        low = low < 0 ? 0 : low;
        high = high > head_dim - 1 ? head_dim - 1 : high;
        if (low == high) high += 0.001;
    }
    for (int i = 0; i < half; i++) {
        double inv_freq = pow(theta, -2.0 * i / head_dim);
        if (factor > 0) {
            /* extrapolate (keep) the fast dims, interpolate the slow ones */
            double ramp = (i - low) / (high - low);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            const double keep = 1 - ramp;
            inv_freq = inv_freq / factor * (1 - keep) + inv_freq * keep;
        }
        for (int p = from; p < to; p++) {
            double a = p * inv_freq;
            cos_tab[(int64_t)p * half + i] = (float)(cos(a) * scale);
            sin_tab[(int64_t)p * half + i] = (float)(sin(a) * scale);
        }
    }
}
