/* Prefill attention on AVX2 (every prefill item; decode items keep the row
 * kernel of kern_avx2.c, which reads K/V in place). For now every item runs
 * the row kernel: the lanes kernel is being written. */
#include "backend/kernels.h"

void inf_kernels_fill_avx2_attn(inf_kernels *k) {
    (void)k;
}
