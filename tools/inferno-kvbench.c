/* inferno-kvbench: what the paged cache and the radix prefix cache buy.
 *
 *   inferno-kvbench [-m MODEL] [--prefix 1000] [--question 20] [--gen 100]
 *                   [--requests 8] [--kv-block 16] [-c 4096] [-b 512]
 *
 * 1. Time to first token of a request whose prompt is a shared system
 *    prompt (--prefix tokens) plus its own question, cold (nothing cached)
 *    and warm (the system prompt's blocks taken from the radix tree, only
 *    the question prefilled).
 * 2. KV memory per concurrent request: --requests requests share the system
 *    prompt, prefill their questions and decode --gen tokens in lockstep
 *    (one batched forward per step); the pool's peak use divided by the
 *    requests, against a basic cache of -c positions per request.
 * Token ids are synthetic (timings do not depend on them); decode rows feed
 * fixed ids and only one row per step computes logits. Prints Markdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kv/radix.h"
#include "model/qwen3.h"
#include "modelfile/model.h"
#include "util/mem.h"
#include "util/timer.h"

static inf_qwen3 *m;
static float *logits; /* [max_rows][n_vocab] */

/* Prefills tokens[0..n) at the end of s in chunks; the last row's logits. */
static int prefill(inf_kv_seq *s, const int32_t *tokens, int n, inf_err *err) {
    int32_t *pos = malloc((size_t)m->max_rows * sizeof *pos);
    int32_t *seq = calloc((size_t)m->max_rows, sizeof *seq);
    inf_kv_view *views = calloc((size_t)m->hp.n_layer, sizeof *views);
    int rc = pos && seq && views ? 0 : inf_fail(err, "out of memory");
    for (int i = 0; i < n && !rc; i += m->max_rows) {
        int c = n - i < m->max_rows ? n - i : m->max_rows;
        rc = inf_kv_seq_reserve(s, c, err);
        for (int r = 0; r < c && !rc; r++)
            pos[r] = s->n_past + r;
        if (!rc) inf_kv_seq_views(s, views);
        inf_batch b = {.n_rows = c, .tokens = tokens + i, .pos = pos, .seq = seq};
        if (!rc) rc = inf_qwen3_forward(m, &b, views, 1, logits, err);
        if (!rc) s->n_past += c;
    }
    free(pos);
    free(seq);
    free(views);
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
        if (!strcmp(f, "-m"))
            path = v;
        else if (ip)
            *ip = atoi(v);
        else
            return die("unknown option");
        i++;
    }
    if (n_prefix < 1 || n_q < 1 || n_gen < 0 || n_req < 1 || n_req > 64 ||
        n_prefix + n_q + n_gen > n_ctx)
        return die("bad sizes: need prefix, question >= 1, requests 1..64, all within -c");

    inf_err err;
    inf_model_file *mf;
    inf_backend be = *inf_backend_scalar();
    inf_backend_complete(&be);
    if (inf_model_open(&mf, path, &err)) return die(err.msg);
    if (rows > n_ctx) rows = n_ctx;
    if (inf_qwen3_create(&m, mf, &be, n_ctx, rows, &err)) return die(err.msg);
    const inf_hparams *hp = &m->hp;
    int kv_dim = hp->n_head_kv * hp->head_dim;
    logits = inf_alloc((size_t)rows * (size_t)hp->n_vocab * sizeof(float));
    size_t block_bytes = inf_kv_block_bytes(hp->n_layer, kv_dim, bs);
    int per_req_blocks = (n_prefix + n_q + n_gen + bs - 1) / bs + 1;
    int n_blocks = per_req_blocks * (n_req + 2);
    inf_kv_pool *pool;
    inf_radix *r;
    if (inf_kv_pool_create(&pool, hp->n_layer, kv_dim, bs, n_blocks, &err) ||
        inf_radix_create(&r, pool, &err))
        return die(err.msg);

    int n_prompt = n_prefix + n_q;
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    fill(prompt, n_prefix, 1, hp->n_vocab);

    printf("model %s: %d layers, kv_dim %d, backend %s; block %d tokens (%.1f KiB)\n\n", path,
           hp->n_layer, kv_dim, be.name, bs, block_bytes / 1024.0);

    /* 1. TTFT cold vs warm. */
    fill(prompt + n_prefix, n_q, 100, hp->n_vocab);
    inf_kv_seq *s;
    if (inf_kv_seq_create(&s, pool, n_ctx, &err)) return die(err.msg);
    double t0 = inf_now_s();
    if (prefill(s, prompt, n_prompt, &err)) return die(err.msg);
    double cold = inf_now_s() - t0;
    if (inf_radix_insert_seq(r, s, prompt, &err)) return die(err.msg);
    inf_kv_seq_free(s);

    enum { WARM = 5 };
    double warm[WARM], warm_sum = 0;
    int reused = 0;
    for (int k = 0; k < WARM; k++) {
        fill(prompt + n_prefix, n_q, 200 + (uint32_t)k, hp->n_vocab);
        if (inf_kv_seq_create(&s, pool, n_ctx, &err)) return die(err.msg);
        t0 = inf_now_s();
        reused = inf_radix_attach(r, s, prompt, n_prompt - 1, &err);
        if (reused < 0 || prefill(s, prompt + reused, n_prompt - reused, &err)) return die(err.msg);
        warm[k] = inf_now_s() - t0;
        warm_sum += warm[k];
        inf_kv_seq_free(s);
    }
    double warm_avg = warm_sum / WARM;
    printf("| prompt | cold TTFT | warm TTFT (mean of %d) | tokens reused | speed-up |\n", WARM);
    printf("|---|---|---|---|---|\n");
    printf("| %d system + %d question | %.1f ms | %.2f ms | %d | %.0fx |\n\n", n_prefix, n_q,
           cold * 1e3, warm_avg * 1e3, reused, cold / warm_avg);

    /* 2. Memory per concurrent request. */
    inf_kv_seq *req[64];
    int32_t *qs = malloc((size_t)n_req * (size_t)n_prompt * sizeof *qs);
    pool->n_used_peak = inf_kv_pool_used(pool);
    int tree_blocks = inf_kv_pool_used(pool);
    for (int k = 0; k < n_req; k++) {
        int32_t *t = qs + (size_t)k * n_prompt;
        memcpy(t, prompt, (size_t)n_prefix * sizeof *t);
        fill(t + n_prefix, n_q, 300 + (uint32_t)k, hp->n_vocab);
        if (inf_kv_seq_create(&req[k], pool, n_ctx, &err)) return die(err.msg);
        int got = inf_radix_attach(r, req[k], t, n_prompt - 1, &err);
        if (got < 0 || prefill(req[k], t + got, n_prompt - got, &err)) return die(err.msg);
    }
    int L = hp->n_layer;
    inf_kv_view *views = calloc((size_t)n_req * (size_t)L, sizeof *views);
    int32_t tok[64], pos[64], seq[64];
    uint8_t want[64] = {1};
    t0 = inf_now_s();
    for (int step = 0; step < n_gen; step++) {
        for (int k = 0; k < n_req; k++) {
            tok[k] = (int32_t)((step * 31 + k * 7 + 11) % hp->n_vocab);
            pos[k] = req[k]->n_past;
            seq[k] = k;
            if (inf_kv_seq_reserve(req[k], 1, &err)) return die(err.msg);
            inf_kv_seq_views(req[k], views + (size_t)k * L);
        }
        inf_batch b = {.n_rows = n_req, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
        if (inf_qwen3_forward(m, &b, views, n_req, logits, &err)) return die(err.msg);
        for (int k = 0; k < n_req; k++)
            req[k]->n_past++;
    }
    double t_dec = inf_now_s() - t0;
    int peak = pool->n_used_peak;
    size_t paged_total = (size_t)peak * block_bytes;
    size_t basic_per = 2 * (size_t)L * (size_t)n_ctx * (size_t)kv_dim * sizeof(float);
    size_t basic_exact =
        2 * (size_t)L * (size_t)(n_prompt + n_gen) * (size_t)kv_dim * sizeof(float);
    printf("%d concurrent requests, each %d shared + %d own prompt tokens + %d generated "
           "(%d batched decode steps in %.1f s):\n\n",
           n_req, n_prefix, n_q, n_gen, n_gen, t_dec);
    printf("| cache | KV bytes for all requests | per request |\n|---|---|---|\n");
    printf("| basic, -c %d per request | %.1f MiB | %.2f MiB |\n", n_ctx,
           n_req * basic_per / 1048576.0, basic_per / 1048576.0);
    printf("| basic, sized to the request (%d positions) | %.1f MiB | %.2f MiB |\n",
           n_prompt + n_gen, n_req * basic_exact / 1048576.0, basic_exact / 1048576.0);
    printf("| paged + radix (peak %d blocks, %d of them cached in the tree) | %.1f MiB | %.2f MiB "
           "|\n\n",
           peak, tree_blocks, paged_total / 1048576.0, paged_total / 1048576.0 / n_req);

    /* Everything ends: no block may stay held but the tree's. */
    for (int k = 0; k < n_req; k++) {
        if (inf_radix_insert_seq(r, req[k], qs + (size_t)k * n_prompt, &err)) return die(err.msg);
        inf_kv_seq_free(req[k]);
    }
    int leaks = 0;
    for (int b = 0; b < pool->n_blocks; b++)
        leaks += pool->refcount[b] != r->tree_refs[b];
    inf_radix_clear(r);
    printf("after all requests: %d blocks held outside the tree (want 0); after clearing the "
           "tree %d of %d blocks free; prefix hits %lld, tokens reused %lld, copy-on-writes %lld\n",
           leaks, pool->n_free, pool->n_blocks, (long long)r->stats.n_hits,
           (long long)r->stats.tokens_reused, (long long)pool->n_cow);
    int bad = leaks || pool->n_free != pool->n_blocks || inf_kv_pool_audit(pool, &err);
    inf_radix_free(r);
    inf_kv_pool_free(pool);
    free(views);
    free(qs);
    free(prompt);
    inf_free(logits);
    inf_qwen3_free(m);
    inf_model_close(mf);
    return bad;
}
