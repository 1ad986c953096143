/* Making a backend by name: what `-t N`, `--backend`, `--isa`, `--trace` and
 * bench's `--attn` select. */
#ifndef INF_BACKEND_SELECT_H
#define INF_BACKEND_SELECT_H

#include <stdbool.h>

#include "backend/backend.h"
#include "util/err.h"

typedef struct inf_backend_opts {
    const char *name; /* "scalar", "simd" or "pool"; NULL means "pool" */
    int n_threads;    /* pool threads; <= 0 means the physical cores we may run on */
    const char *isa;  /* "amx", "avx512", "avx2", "neon", "scalar"; NULL: INFERNO_ISA or the best */
    bool trace;       /* wrap in the tracing backend */
    const char *attn; /* prefill attention: "flash" (NULL) or "materialized", which only
                         measures what flash saves (inferno bench --attn; simd/pool at
                         avx512 or amx) */
} inf_backend_opts;

/* Creates the backend o describes. A level above what the CPU has is lowered
 * to the best one available. On a bad name, or materialized attention where
 * the backend has none, returns -1 with a message. Free with
 * inf_backend_free. */
int inf_backend_create(inf_backend **out, const inf_backend_opts *o, inf_err *err);
void inf_backend_free(inf_backend *be);

/* A one-line description, e.g. "pool-amx x2" or "simd-avx512 x1 materialized-attn"
 * (written into buf). */
const char *inf_backend_describe(const inf_backend *be, char *buf, int cap);

/* Pack caches (pack_cache.h) for any backend, through a tracing wrapper:
 * the layout be packs weights in, NULL when it packs none (scalar); and
 * where the weights prepared from now on are packed (pc NULL: in memory). */
struct inf_pack_cache;
const char *inf_backend_pack_layout(const inf_backend *be);
void inf_backend_set_pack_cache(const inf_backend *be, struct inf_pack_cache *pc);

#endif
