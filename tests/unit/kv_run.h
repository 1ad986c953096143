/* One sequence (slot 0) of a model over the KV caches, fed synchronously:
 * what the scheduler does for a slot, step by step, for tests that compare
 * logits. */
#ifndef TEST_KV_RUN_H
#define TEST_KV_RUN_H

#include <stdlib.h>
#include <string.h>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/exec.h"
#include "util/mem.h"

typedef struct kv_run {
    inf_model *m; /* borrowed */
    inf_kv_cache *kv;
    float *logits; /* [n_vocab] of the last token fed */
    int reused;    /* prompt tokens the last prefill kept */
} kv_run;

static inline int kv_run_open(kv_run *r, inf_model *m, const inf_kv_opts *o, int n_ctx,
                              inf_err *err) {
    memset(r, 0, sizeof *r);
    r->m = m;
    const inf_hparams *hp = &m->hp;
    const inf_kv_layout lay = {.n_layer = hp->n_layer,
                               .kv_dim = hp->n_head_kv * hp->head_dim,
                               .head_dim = hp->head_dim,
                               .recurrent = hp->recurrent,
                               .state_floats = inf_model_state_floats(hp)};
    if (inf_kv_cache_create(&r->kv, o, &lay, 1, n_ctx, err)) return -1;
    r->logits = malloc((size_t)hp->n_vocab * sizeof(float));
    return r->logits ? 0 : -1;
}

static inline void kv_run_close(kv_run *r) {
    inf_kv_cache_free(r->kv);
    free(r->logits);
}

/* Feeds tokens[0..n) after what the sequence holds, in chunks of max_rows. */
static inline int kv_run_feed(kv_run *r, const int32_t *tokens, int n, inf_err *err) {
    for (int i = 0; i < n; i += r->m->max_rows) {
        int k = n - i < r->m->max_rows ? n - i : r->m->max_rows;
        int32_t pos[512], seq[512];
        INF_ASSERT(k <= 512);
        if (inf_kv_cache_reserve(r->kv, 0, k, err)) return -1;
        for (int j = 0; j < k; j++)
            pos[j] = r->kv->n_past[0] + j, seq[j] = 0;
        inf_batch b = {.n_rows = k, .tokens = tokens + i, .pos = pos, .seq = seq};
        if (inf_model_forward(r->m, &b, r->kv->views, 1, r->logits, err)) return -1;
        for (int j = 0; j < k; j++)
            inf_kv_cache_commit(r->kv, 0, pos[j], tokens[i + j]);
    }
    return 0;
}

/* Makes the sequence hold prompt[0..n) as the scheduler does: keep at most
 * inf_exec_max_reuse(n) cached tokens, prefill the rest. */
static inline int kv_run_prefill(kv_run *r, const int32_t *prompt, int n, inf_err *err) {
    r->reused = inf_kv_cache_begin(r->kv, 0, prompt, n, inf_exec_max_reuse(n));
    return kv_run_feed(r, prompt + r->reused, n - r->reused, err);
}

#endif
