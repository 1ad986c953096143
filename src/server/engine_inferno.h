/* The real engine behind the server: the Qwen3 forward pass over one basic
 * KV cache per slot or a paged pool with a radix prefix cache, the model's tokenizer and chat template, and
 * llama.cpp's sampler, packaged as a srv_engine. */
#ifndef INF_SERVER_ENGINE_INFERNO_H
#define INF_SERVER_ENGINE_INFERNO_H

#include "kv/kv_cache.h"
#include "server/engine.h"
#include "util/err.h"

typedef struct srv_engine_opts {
    const char *model_path;
    const char *backend; /* NULL: the default */
    int n_seq;           /* slots */
    int n_ctx;           /* positions per slot; 0: min(4096, the model's training context) */
    int n_threads;       /* 0: the backend's default */
    int max_rows;        /* rows per forward call (decode rows + a prefill chunk) */
    /* KV cache: basic (one contiguous cache per slot) or paged (one pool of
     * blocks for all slots plus the radix prefix cache shared across
     * requests). For paged, mem_bytes 0 sizes the pool to every slot's full
     * context plus as much again for cached prefixes. */
    inf_kv_opts kv;
} srv_engine_opts;

/* Loads the model and fills e. 0, or -1 with a message naming what failed.
 * Close with srv_engine_close (a zeroed e is a no-op). */
int srv_engine_open(srv_engine *e, const srv_engine_opts *o, inf_err *err);
void srv_engine_close(srv_engine *e);

#endif
