/* The SIMD backend (one thread) and the pool backend (n threads): the same
 * kernels at one ISA level, with the pool's output bit-identical to one
 * thread's. Usually made through inf_backend_create (select.h). */
#ifndef INF_BACKEND_SIMD_H
#define INF_BACKEND_SIMD_H

#include <stdbool.h>

#include "backend/backend.h"
#include "backend/cpu_features.h"

/* How prefill attention runs. Flash attention is the product; the
 * materialized path (the whole [T][keys] score matrix, allocated per call)
 * exists only to measure what flash attention saves (inferno bench --attn). */
typedef enum inf_attn_impl { INF_ATTN_FLASH, INF_ATTN_MATERIALIZED } inf_attn_impl;

/* A backend running `isa` kernels (clamped to what the CPU has) on n_threads
 * (1: no pool); `pool` only names it ("pool-..." rather than "simd-...").
 * attn = INF_ATTN_MATERIALIZED takes effect where the kernels have that path
 * (AVX-512, AMX; see inf_backend_simd_attn), for head_dim 64 or 128, and
 * flash runs otherwise. NULL on allocation failure. Ops that cannot grow
 * their scratch report it through be->take_error (backend.h). Free with
 * inf_backend_simd_free. */
inf_backend *inf_backend_simd_create(inf_isa isa, int n_threads, bool pool, inf_attn_impl attn);
void inf_backend_simd_free(inf_backend *be);

/* Whether be was made by inf_backend_simd_create. */
bool inf_backend_is_simd(const inf_backend *be);
int inf_backend_simd_threads(const inf_backend *be);
inf_isa inf_backend_simd_isa(const inf_backend *be);
/* The prefill attention be runs: what was asked for, or flash where the
 * kernels have no materialized path. */
inf_attn_impl inf_backend_simd_attn(const inf_backend *be);

/* The name of the layout be packs weights in (its level, its kinds, and a
 * hash of what its packers write for a fixed weight of every type), which a
 * pack cache must have been written with; NULL when be packs nothing. */
const char *inf_backend_simd_pack_layout(const inf_backend *be);
/* Weights prepared from now on are packed in pc (read from it, or written
 * into it; pack_cache.h), or in anonymous memory when pc is NULL. pc must stay
 * open while weights are prepared with it. */
struct inf_pack_cache;
void inf_backend_simd_set_pack_cache(const inf_backend *be, struct inf_pack_cache *pc);

#endif
