/* Element d of an f32 view's K or V row j, across heads (kv_view.h's
 * head-major blocks): for tests that fill and check whole rows. */
#ifndef INF_TEST_KV_ELEM_H
#define INF_TEST_KV_ELEM_H

#include "kv/kv_view.h"

static inline float *kv_k_elem(const inf_kv_view *kv, int j, int d) {
    return (float *)inf_kv_k_at(kv, j, d / kv->head_dim) + d % kv->head_dim;
}
static inline float *kv_v_elem(const inf_kv_view *kv, int j, int d) {
    return (float *)inf_kv_v_at(kv, j, d / kv->head_dim) + d % kv->head_dim;
}

#endif
