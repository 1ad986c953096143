/* One step of the gated delta rule (backend.h's gated_delta), shared by the
 * scalar reference and the generic kernel level, so both do one sequence of
 * float operations; the vector levels do the same operations in the same
 * order (mul, then add: no FMA), so every level gives the same bits. */
#ifndef INF_BACKEND_DELTA_H
#define INF_BACKEND_DELTA_H

#include <math.h>
#include <stddef.h>

#include "backend/backend.h"

/* dst = x / sqrt(sum x^2 + eps) * scale, the sum in index order */
static inline void inf_delta_l2norm(float *dst, const float *x, int n, float eps, float scale) {
    float ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    const float inv = scale / sqrtf(ss + eps);
    for (int i = 0; i < n; i++)
        dst[i] = x[i] * inv;
}

/* S [dk][dv] of one V head: S = decay S; u = beta (v - S^T kn); S += kn u^T;
 * o = S^T qn. u: [dv] scratch. */
static inline void inf_delta_step_ref(float *S, float *o, float *u, const float *qn,
                                      const float *kn, const float *v, float decay, float beta,
                                      int dk, int dv) {
    for (int j = 0; j < dv; j++)
        u[j] = 0;
    for (int i = 0; i < dk; i++)
        for (int j = 0; j < dv; j++) {
            S[(size_t)i * dv + j] *= decay;
            u[j] += S[(size_t)i * dv + j] * kn[i];
        }
    for (int j = 0; j < dv; j++)
        u[j] = (v[j] - u[j]) * beta;
    for (int j = 0; j < dv; j++)
        o[j] = 0;
    for (int i = 0; i < dk; i++)
        for (int j = 0; j < dv; j++) {
            S[(size_t)i * dv + j] += kn[i] * u[j];
            o[j] += S[(size_t)i * dv + j] * qn[i];
        }
}

typedef void (*inf_delta_step_fn)(float *S, float *o, float *u, const float *qn, const float *kn,
                                  const float *v, float decay, float beta, int dk, int dv);

/* Row t, V head h of gated_delta (backend.h): its K head's q and k
 * normalized, then step. */
static inline void inf_delta_row_head(inf_delta_step_fn step, float *out, const float *q,
                                      const float *k, const float *v, const float *g,
                                      const float *beta, float *state, int t, int h,
                                      const inf_delta_shape *s) {
    const int dk = s->d_k, dv = s->d_v, nk = s->n_k_heads, nvh = s->n_v_heads;
    float qn[INF_DELTA_MAX_DK], kn[INF_DELTA_MAX_DK], u[INF_DELTA_MAX_DK];
    const int hk = s->k_tiled ? h % nk : h / (nvh / nk);
    const size_t qk_at = ((size_t)t * nk + hk) * dk, v_at = ((size_t)t * nvh + h) * dv;
    inf_delta_l2norm(qn, q + qk_at, dk, s->eps, 1.0f / sqrtf((float)dk));
    inf_delta_l2norm(kn, k + qk_at, dk, s->eps, 1.0f);
    step(state + (size_t)h * dk * dv, out + v_at, u, qn, kn, v + v_at, expf(g[(size_t)t * nvh + h]),
         beta[(size_t)t * nvh + h], dk, dv);
}

#endif
