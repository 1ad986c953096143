/* The real engine behind the server: the Qwen3 forward pass, the model's
 * tokenizer and chat template, and llama.cpp's sampler, packaged as a
 * srv_engine. Two KV caches: basic (one contiguous cache per slot; the
 * scheduler reuses a slot's own tokens) or paged (one block pool for all
 * slots and a radix prefix cache shared across requests). */
#ifndef INF_SERVER_ENGINE_INFERNO_H
#define INF_SERVER_ENGINE_INFERNO_H

#include <stdbool.h>

#include "server/engine.h"
#include "util/err.h"

typedef struct srv_engine_opts {
    const char *model_path;
    const char *backend; /* NULL: the default */
    int n_seq;           /* slots */
    int n_ctx;           /* positions per slot; 0: min(4096, the model's training context) */
    int n_threads;       /* 0: the backend's default */
    int max_rows;        /* rows per forward call (decode rows + a prefill chunk) */
    bool paged;          /* paged KV + radix prefix cache (else basic) */
    int block_size;      /* paged: positions per block (power of two; 0: the default) */
    size_t cache_bytes;  /* paged: pool size; 0: n_seq * n_ctx positions */
} srv_engine_opts;

/* Loads the model and fills e. 0, or -1 with a message naming what failed.
 * Close with srv_engine_close (a zeroed e is a no-op). */
int srv_engine_open(srv_engine *e, const srv_engine_opts *o, inf_err *err);
void srv_engine_close(srv_engine *e);

#endif
