#include "runtime/session.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"
#include "util/timer.h"

int inf_session_create(inf_session **out, inf_qwen3 *m, int n_ctx, const inf_sampler_params *sp,
                       inf_err *err) {
    return inf_session_create_kv(out, m, n_ctx, sp, NULL, err);
}

int inf_session_create_kv(inf_session **out, inf_qwen3 *m, int n_ctx, const inf_sampler_params *sp,
                          const inf_kv_opts *kv, inf_err *err) {
    *out = NULL;
    if (n_ctx <= 0 || n_ctx > m->n_ctx)
        return inf_fail(err, "context size %d: expected 1..%d", n_ctx, m->n_ctx);
    inf_session *s = calloc(1, sizeof *s);
    if (!s) return inf_fail(err, "out of memory");
    s->model = m;
    s->n_ctx = n_ctx;
    const inf_hparams *hp = &m->hp;
    if (inf_kv_cache_create(&s->kv, kv, hp->n_layer, n_ctx, hp->n_head_kv * hp->head_dim, err) ||
        inf_sampler_create(&s->sampler, sp, hp->n_vocab, n_ctx, err)) {
        inf_session_free(s);
        return -1;
    }
    s->tokens = calloc((size_t)n_ctx, sizeof *s->tokens);
    s->pos = calloc((size_t)m->max_rows, sizeof *s->pos);
    s->seq = calloc((size_t)m->max_rows, sizeof *s->seq);
    s->logits = inf_alloc((size_t)hp->n_vocab * sizeof(float));
    if (!s->tokens || !s->pos || !s->seq || !s->logits) {
        inf_session_free(s);
        return inf_fail(err, "out of memory");
    }
    *out = s;
    return 0;
}

void inf_session_free(inf_session *s) {
    if (!s) return;
    inf_kv_cache_free(s->kv);
    inf_sampler_free(s->sampler);
    free(s->tokens);
    free(s->pos);
    free(s->seq);
    inf_free(s->logits);
    free(s);
}

/* Runs tokens[0..n) at the end of the cache; logits of the last one. */
static int feed(inf_session *s, const int32_t *tokens, int n, inf_err *err) {
    if (inf_kv_cache_reserve(s->kv, n, err)) return -1;
    for (int i = 0; i < n; i++) s->pos[i] = s->kv->n_past + i, s->seq[i] = 0;
    inf_batch b = {.n_rows = n, .tokens = tokens, .pos = s->pos, .seq = s->seq, .logits = NULL};
    if (inf_qwen3_forward(s->model, &b, inf_kv_cache_views(s->kv), 1, s->logits, err)) return -1;
    memcpy(s->tokens + s->kv->n_past, tokens, (size_t)n * sizeof *tokens);
    inf_kv_cache_advance(s->kv, n);
    return 0;
}

int inf_session_prefill(inf_session *s, const int32_t *tokens, int n, inf_err *err) {
    if (n <= 0) return inf_fail(err, "empty prompt: nothing to run");
    if (n > s->n_ctx)
        return inf_fail(err, "the prompt is %d tokens, longer than the context size %d (use -c)", n,
                        s->n_ctx);
    int keep = 0;
    while (keep < s->kv->n_past && keep < n && s->tokens[keep] == tokens[keep]) keep++;
    if (keep == n) keep--; /* the last token is always run: its logits are needed */
    inf_kv_cache_truncate(s->kv, keep);
    s->n_prompt_reused = keep;
    for (int i = keep; i < n; i += s->model->max_rows) {
        int chunk = n - i < s->model->max_rows ? n - i : s->model->max_rows;
        if (feed(s, tokens + i, chunk, err)) return -1;
    }
    s->n_prompt_eval = n - keep;
    return 0;
}

int inf_session_decode(inf_session *s, int32_t token, inf_err *err) {
    return feed(s, &token, 1, err);
}

const char *inf_stop_reason_name(inf_stop_reason r) {
    switch (r) {
    case INF_STOP_EOG: return "stop";
    case INF_STOP_LENGTH: return "length";
    case INF_STOP_CALLER: return "caller";
    }
    return "?";
}

int inf_session_generate(inf_session *s, const int32_t *prompt, int n_prompt,
                         const inf_gen_opts *o, inf_stop_reason *reason, inf_err *err) {
    int n_vocab = s->model->hp.n_vocab;
    s->n_gen = 0;
    s->t_gen_s = 0;
    double t0 = inf_now_s();
    if (inf_session_prefill(s, prompt, n_prompt, err)) return -1;
    s->t_prompt_s = inf_now_s() - t0;

    inf_sampler_reset(s->sampler);
    for (int i = 0; i < n_prompt; i++) inf_sampler_accept(s->sampler, prompt[i]);

    t0 = inf_now_s();
    *reason = INF_STOP_LENGTH;
    for (;;) {
        if (o->n_predict >= 0 && s->n_gen >= o->n_predict) break;
        if (o->on_logits) o->on_logits(o->ud, s->logits, n_vocab);
        int32_t tok = inf_sampler_sample(s->sampler, s->logits);
        s->n_gen++;
        if (!o->ignore_eos && o->is_eog && o->is_eog(o->ud, tok)) {
            *reason = INF_STOP_EOG;
            break;
        }
        inf_sampler_accept(s->sampler, tok);
        if (o->on_token && o->on_token(o->ud, tok)) {
            *reason = INF_STOP_CALLER;
            break;
        }
        if (o->n_predict >= 0 && s->n_gen >= o->n_predict) break;
        if (s->kv->n_past >= s->n_ctx) break; /* no room to run it: "length" */
        if (inf_session_decode(s, tok, err)) return -1;
    }
    s->t_gen_s = inf_now_s() - t0;
    return 0;
}
