/* inferno-kvbench: what the paged cache and the radix prefix cache buy.
 *
 *   inferno-kvbench [-m MODEL] [--prefix 1000] [--question 20] [--gen 100]
 *                   [--requests 8] [--kv-block 16] [-c 4096] [-b 512]
 *                   [-ctk f16] [-ctv f16]    (K/V cache types: f32, f16, bf16, q8_0)
 *
 * 1. Time to first token of a request whose prompt is a shared system
 *    prompt (--prefix tokens) plus its own question, cold (nothing cached)
 *    and warm (the system prompt's blocks taken from the radix tree, only
 *    the question prefilled).
 * 2. KV memory per concurrent request: --requests requests share the system
 *    prompt, prefill their questions and decode --gen tokens in lockstep
 *    (one batched forward per step); the pool's peak use divided by the
 *    requests, against a basic cache of -c positions per request.
 * Everything runs through the engine's scheduler, as `inferno serve` runs
 * it (scalar backend, paged cache, one slot per request). Token ids are
 * synthetic (timings do not depend on them). Prints Markdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/engine.h"
#include "util/timer.h"

/* Submits prompt[0..n) (copied) for max_tokens greedy tokens, end-of-text ignored. */
static inf_task *submit(inf_engine *e, const int32_t *prompt, int n, int max_tokens, inf_err *err) {
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) {
        inf_fail(err, "out of memory");
        return NULL;
    }
    memcpy(copy, prompt, (size_t)n * sizeof *copy);
    inf_gen_params p = inf_gen_defaults();
    p.sampling.temp = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return inf_engine_submit(e, copy, n, &p, err);
}

/* Runs one request to its end; its timings. */
static int run_one(inf_engine *e, const int32_t *prompt, int n, inf_timings *tm, inf_err *err) {
    inf_task *t = submit(e, prompt, n, 1, err);
    if (!t) return -1;
    int rc = inf_engine_wait(e, t, NULL, NULL, err);
    *tm = t->timings;
    inf_task_release(t);
    return rc;
}

static void fill(int32_t *t, int n, uint32_t seed, int n_vocab) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)n_vocab);
    }
}

static int die(const char *msg) {
    fprintf(stderr, "inferno-kvbench: %s\n", msg);
    return 1;
}

int main(int argc, char **argv) {
    const char *path = "models/tiny-f32.gguf";
    int n_prefix = 1000, n_q = 20, n_gen = 100, n_req = 8, bs = 16, n_ctx = 4096, rows = 512;
    inf_dtype type_k = INF_F16, type_v = INF_F16;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *ip = !strcmp(f, "--prefix")     ? &n_prefix
                  : !strcmp(f, "--question") ? &n_q
                  : !strcmp(f, "--gen")      ? &n_gen
                  : !strcmp(f, "--requests") ? &n_req
                  : !strcmp(f, "--kv-block") ? &bs
                  : !strcmp(f, "-c")         ? &n_ctx
                  : !strcmp(f, "-b")         ? &rows
                                             : NULL;
        if (!v)
            return die("every option takes a value (see the header of tools/inferno-kvbench.c)");
        inf_err perr;
        if (!strcmp(f, "-m"))
            path = v;
        else if (!strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k") || !strcmp(f, "-ctv") ||
                 !strcmp(f, "--cache-type-v")) {
            bool k = !strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k");
            if (inf_kv_parse_type(k ? &type_k : &type_v, v, f, &perr)) return die(perr.msg);
        } else if (ip)
            *ip = atoi(v);
        else
            return die("unknown option");
        i++;
    }
    if (n_prefix < 1 || n_q < 1 || n_gen < 0 || n_req < 1 || n_req > 64 ||
        n_prefix + n_q + n_gen > n_ctx)
        return die("bad sizes: need prefix, question >= 1, requests 1..64, all within -c");

    inf_err err;
    if (rows > n_ctx) rows = n_ctx;
    inf_engine_opts eo = {
        .model_path = path,
        .backend = {.name = "scalar"},
        .n_seq = n_req,
        .n_ctx = n_ctx,
        .n_batch = rows,
        .kv = {.kind = INF_KV_PAGED, .block_size = bs, .type_k = type_k, .type_v = type_v}};
    /* A pool for every request's own blocks plus the shared prefix's. */
    int per_req_blocks = (n_prefix + n_q + n_gen + bs - 1) / bs + 1;
    inf_engine *e;
    {
        inf_model_file *mf;
        if (inf_model_open(&mf, path, &err)) return die(err.msg);
        int kv_dim = mf->hp.n_head_kv * mf->hp.head_dim;
        eo.kv.mem_bytes = inf_kv_block_bytes_typed(mf->hp.n_layer, kv_dim, bs, type_k, type_v) *
                          (size_t)per_req_blocks * (n_req + 2);
        inf_model_close(mf);
    }
    if (inf_engine_open(&e, &eo, &err)) return die(err.msg);
    const inf_hparams *hp = &e->mf->hp;
    int kv_dim = hp->n_head_kv * hp->head_dim, L = hp->n_layer;
    inf_kv_pool *pool = e->kv->pool;
    inf_radix *r = e->kv->radix;
    size_t block_bytes = inf_kv_block_bytes_typed(L, kv_dim, bs, type_k, type_v);
    size_t tok_bytes = inf_kv_cache_token_bytes(e->kv);

    int n_prompt = n_prefix + n_q;
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    fill(prompt, n_prefix, 1, hp->n_vocab);

    printf("model %s: %d layers, kv_dim %d, backend %s; K %s, V %s; block %d tokens (%.1f KiB)\n\n",
           path, L, kv_dim, e->backend_name, inf_kv_type_name(type_k), inf_kv_type_name(type_v), bs,
           block_bytes / 1024.0);

    /* 1. TTFT cold vs warm. */
    fill(prompt + n_prefix, n_q, 100, hp->n_vocab);
    inf_timings tm;
    if (run_one(e, prompt, n_prompt, &tm, &err)) return die(err.msg);
    double cold = tm.prompt_ms * 1e-3;
    enum { WARM = 5 };
    double warm_sum = 0;
    int reused = 0;
    for (int k = 0; k < WARM; k++) {
        fill(prompt + n_prefix, n_q, 200 + (uint32_t)k, hp->n_vocab);
        if (run_one(e, prompt, n_prompt, &tm, &err)) return die(err.msg);
        warm_sum += tm.prompt_ms * 1e-3;
        reused = tm.cache_n;
    }
    double warm_avg = warm_sum / WARM;
    printf("| prompt | cold TTFT | warm TTFT (mean of %d) | tokens reused | speed-up |\n", WARM);
    printf("|---|---|---|---|---|\n");
    printf("| %d system + %d question | %.1f ms | %.2f ms | %d | %.0fx |\n\n", n_prefix, n_q,
           cold * 1e3, warm_avg * 1e3, reused, cold / warm_avg);

    /* 2. Memory per concurrent request: all at once, batched by the scheduler. */
    inf_task *req[64];
    int32_t *qs = malloc((size_t)n_req * (size_t)n_prompt * sizeof *qs);
    pool->n_used_peak = inf_kv_pool_used(pool);
    int tree_blocks = inf_kv_pool_used(pool);
    double t0 = inf_now_s();
    for (int k = 0; k < n_req; k++) {
        int32_t *t = qs + (size_t)k * n_prompt;
        memcpy(t, prompt, (size_t)n_prefix * sizeof *t);
        fill(t + n_prefix, n_q, 300 + (uint32_t)k, hp->n_vocab);
        if (!(req[k] = submit(e, t, n_prompt, n_gen + 1, &err))) return die(err.msg);
    }
    for (int k = 0; k < n_req; k++) {
        if (inf_engine_wait(e, req[k], NULL, NULL, &err)) return die(err.msg);
        inf_task_release(req[k]);
    }
    double t_dec = inf_now_s() - t0;
    int peak = pool->n_used_peak;
    size_t paged_total = (size_t)peak * block_bytes;
    size_t basic_per = (size_t)n_ctx * tok_bytes;
    size_t basic_exact = (size_t)(n_prompt + n_gen) * tok_bytes;
    printf("%d concurrent requests, each %d shared + %d own prompt tokens + %d generated "
           "(prefill and %d batched decode steps in %.1f s):\n\n",
           n_req, n_prefix, n_q, n_gen, n_gen, t_dec);
    printf("| cache | KV bytes for all requests | per request |\n|---|---|---|\n");
    printf("| basic, -c %d per request | %.1f MiB | %.2f MiB |\n", n_ctx,
           n_req * basic_per / 1048576.0, basic_per / 1048576.0);
    printf("| basic, sized to the request (%d positions) | %.1f MiB | %.2f MiB |\n",
           n_prompt + n_gen, n_req * basic_exact / 1048576.0, basic_exact / 1048576.0);
    printf("| paged + radix (peak %d blocks, %d of them cached in the tree) | %.1f MiB | %.2f MiB "
           "|\n\n",
           peak, tree_blocks, paged_total / 1048576.0, paged_total / 1048576.0 / n_req);

    /* Everything ended: no block may stay held but the tree's. */
    inf_kv_stats st;
    inf_kv_cache_stats(e->kv, &st);
    int leaks = (int)st.ref_errors;
    for (int b = 0; b < pool->n_blocks; b++)
        leaks += pool->refcount[b] != r->tree_refs[b];
    inf_radix_clear(r);
    printf("after all requests: %d blocks held outside the tree (want 0); after clearing the "
           "tree %d of %d blocks free; prefix hits %lld, tokens reused %lld, copy-on-writes %lld\n",
           leaks, pool->n_free, pool->n_blocks, (long long)r->stats.n_hits,
           (long long)r->stats.tokens_reused, (long long)pool->n_cow);
    int bad = leaks || pool->n_free != pool->n_blocks || inf_kv_pool_audit(pool, &err);
    free(qs);
    free(prompt);
    inf_engine_close(e);
    return bad;
}
