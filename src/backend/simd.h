/* The SIMD backend (one thread) and the pool backend (n threads): the same
 * kernels at one ISA level, with the pool's output bit-identical to one
 * thread's. Usually made through inf_backend_create (select.h). */
#ifndef INF_BACKEND_SIMD_H
#define INF_BACKEND_SIMD_H

#include <stdbool.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"

/* A backend running `isa` kernels (clamped to what the CPU has) on n_threads
 * (1: no pool); `pool` only names it ("pool-..." rather than "simd-..."). NULL
 * on allocation failure. Free with inf_backend_simd_free. */
inf_backend *inf_backend_simd_create(inf_isa isa, int n_threads, bool pool);
void inf_backend_simd_free(inf_backend *be);

/* Whether be was made by inf_backend_simd_create. */
bool inf_backend_is_simd(const inf_backend *be);
int inf_backend_simd_threads(const inf_backend *be);
inf_isa inf_backend_simd_isa(const inf_backend *be);

#endif
