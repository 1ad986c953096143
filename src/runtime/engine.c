#include "runtime/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/select.h"
#include "runtime/engine_pack.h"
#include "template/template.h"
#include "util/mem.h"
#include "util/timer.h"

/* ---- the scheduler's table over the model and its caches ---- */

static int ex_forward(void *ctx, const inf_exec_batch *b, float *logits, inf_err *err) {
    inf_engine *e = ctx;
    return inf_exec_forward_kv(e->model, e->kv, b, logits, err);
}

static int ex_seq_checkpoint_pos(void *ctx, int n_prompt) {
    return inf_kv_cache_checkpoint_pos(((inf_engine *)ctx)->kv, n_prompt);
}
static void ex_seq_checkpoint(void *ctx, int seq) {
    inf_kv_cache_checkpoint(((inf_engine *)ctx)->kv, seq);
}
static int ex_seq_match(void *ctx, int seq, const int32_t *prompt, int n) {
    return inf_kv_cache_match(((inf_engine *)ctx)->kv, seq, prompt, n);
}
static int ex_seq_begin(void *ctx, int seq, const int32_t *prompt, int n, int max_keep) {
    return inf_kv_cache_begin(((inf_engine *)ctx)->kv, seq, prompt, n, max_keep);
}
static int ex_seq_reserve(void *ctx, int seq, int n_new, inf_err *err) {
    return inf_kv_cache_reserve(((inf_engine *)ctx)->kv, seq, n_new, err);
}
static void ex_seq_publish(void *ctx, int seq) {
    inf_kv_cache_publish(((inf_engine *)ctx)->kv, seq);
}
static void ex_seq_end(void *ctx, int seq) {
    inf_kv_cache_end(((inf_engine *)ctx)->kv, seq);
}
static void ex_seq_reset(void *ctx, int seq) {
    inf_kv_cache_reset(((inf_engine *)ctx)->kv, seq);
}
static void ex_seq_truncate(void *ctx, int seq, int n) {
    inf_engine *e = ctx;
    inf_exec_truncate_kv(e->model, e->kv, seq, n);
}
static void ex_seq_mark(void *ctx, int seq) {
    inf_kv_cache_mark(((inf_engine *)ctx)->kv, seq);
}
static void ex_kv_stats(void *ctx, inf_kv_stats *st) {
    inf_kv_cache_stats(((inf_engine *)ctx)->kv, st);
}

static int ex_tokenize(void *ctx, const char *text, size_t n, bool parse_special, int32_t **ids,
                       int *n_ids, inf_err *err) {
    return inf_engine_tokenize(ctx, text, n, parse_special, ids, n_ids, err);
}

static int ex_piece(void *ctx, int32_t id, char *buf, int cap) {
    inf_engine *e = ctx;
    size_t len = 0;
    const char *p = inf_tok_token_bytes(e->tok, id, &len);
    if (!p) return 0;
    if (len > (size_t)cap) len = (size_t)cap;
    memcpy(buf, p, len);
    return (int)len;
}

static bool ex_is_eog(void *ctx, int32_t id) {
    return inf_tok_is_eog(((inf_engine *)ctx)->tok, id);
}

static bool ex_is_control(void *ctx, int32_t id) {
    int type = inf_tok_token_type(((inf_engine *)ctx)->tok, id);
    return type == INF_TOKEN_CONTROL || type == INF_TOKEN_UNUSED;
}

static int ex_render(void *ctx, const inf_chat_input *in, char **out, inf_err *err) {
    return inf_engine_render(ctx, in, out, err);
}

static void *ex_sampler_new(void *ctx, const inf_sampler_params *p) {
    inf_engine *e = ctx;
    inf_sampler *s = NULL;
    inf_err err;
    if (inf_sampler_create(&s, p, e->ex.n_vocab, e->ex.n_ctx, &err)) return NULL;
    return s;
}
static void ex_sampler_accept(void *s, int32_t id) {
    inf_sampler_accept(s, id);
}
static int32_t ex_sampler_sample(void *s, float *logits, int n_vocab) {
    return inf_sampler_sample(s, logits);
}
static void ex_sampler_free(void *s) {
    inf_sampler_free(s);
}
static int ex_sampler_dist(void *s, const float *logits, int n_vocab, int32_t *ids, double *probs) {
    return inf_sampler_dist(s, logits, ids, probs);
}
static double ex_sampler_uniform(void *s) {
    return inf_sampler_uniform(s);
}

/* The drafter: -md opens the draft model. (A model with recurrent layers
 * speculates through the rewind logs its caches then keep.) */
static int open_spec(inf_engine *e, const inf_engine_opts *o, int n_seq, int n_ctx, int max_rows,
                     inf_err *err) {
    inf_spec_kind kind = o->spec_kind;
    if (o->draft_path && kind == INF_SPEC_NONE) kind = INF_SPEC_DRAFT;
    if (kind == INF_SPEC_DRAFT && !o->draft_path)
        return inf_fail(err, "--spec draft needs a draft model (-md FILE)");
    if (kind == INF_SPEC_NGRAM && o->draft_path)
        return inf_fail(err, "--spec ngram drafts without a model: -md %s is not used with it",
                        o->draft_path);
    e->ex.spec = o->spec;
    if (inf_spec_check(&e->ex.spec, err)) return -1;
    e->ex.spec_kind = kind;
    if (kind == INF_SPEC_NONE) return 0;
    if (kind == INF_SPEC_DRAFT) {
        if (inf_draft_open(&e->draft, o->draft_path, e->be, e->mf, n_seq, n_ctx, max_rows, &o->kv,
                           err))
            return -1;
        e->ex.draft = &e->draft->ex;
        e->ex.draft_name = o->draft_path;
    }
    return 0;
}

/* ---- open / close ---- */

/* llama.cpp's sampling defaults with the model file's recommendation over
 * them (as llama.cpp's common_init_from_params applies general.sampling.*
 * to what the user did not set); a value out of range names the key. */
static int model_sampling(inf_sampler_params *p, const inf_model_file *mf, inf_err *err) {
    const inf_sampling_rec *r = &mf->sampling;
    const bool gguf = mf->format == INF_FORMAT_GGUF;
    *p = inf_sampler_defaults();
    static const struct {
        unsigned bit;
        const char *gguf, *hf, *want;
    } keys[] = {
        {INF_REC_TEMP, "general.sampling.temp", "temperature", "a finite number"},
        {INF_REC_TOP_K, "general.sampling.top_k", "top_k", ">= 0 (0: off)"},
        {INF_REC_TOP_P, "general.sampling.top_p", "top_p", "in [0, 1]"},
        {INF_REC_MIN_P, "general.sampling.min_p", "min_p", "in [0, 1]"},
        {INF_REC_REPEAT_PENALTY, "general.sampling.penalty_repeat", "repetition_penalty",
         "> 0 (1: off)"},
    };
    const double v[5] = {r->temp, r->top_k, r->top_p, r->min_p, r->repeat_penalty};
    const bool ok[5] = {isfinite(r->temp), r->top_k >= 0, r->top_p >= 0 && r->top_p <= 1,
                        r->min_p >= 0 && r->min_p <= 1,
                        r->repeat_penalty > 0 && isfinite(r->repeat_penalty)};
    for (int i = 0; i < 5; i++)
        if ((r->set & keys[i].bit) && !ok[i])
            return inf_fail(err, "%s: %s%s is %g, expected %s", mf->path,
                            gguf ? "" : "generation_config.json: ",
                            gguf ? keys[i].gguf : keys[i].hf, v[i], keys[i].want);
    if (r->set & INF_REC_TEMP) p->temp = r->temp;
    if (r->set & INF_REC_TOP_K) p->top_k = r->top_k;
    if (r->set & INF_REC_TOP_P) p->top_p = r->top_p;
    if (r->set & INF_REC_MIN_P) p->min_p = r->min_p;
    if (r->set & INF_REC_REPEAT_PENALTY) p->repeat_penalty = r->repeat_penalty;
    return 0;
}

/* The context when -c is not given: the model's training length, or what
 * the memory left after the weights holds (e->note says so). A paged pool
 * is one budget for all slots and any one request may grow to the whole of
 * it (up to the training length): without --cache-mem it is n_seq training
 * contexts or what the memory holds, and kv->mem_bytes is set to it. */
static int context_default(inf_engine *e, inf_kv_opts *kv, int n_seq) {
    const inf_hparams *hp = &e->mf->hp;
    const int trained = hp->n_ctx_train > 0 ? hp->n_ctx_train : 4096;
    const int kv_dim = hp->n_head_kv * hp->head_dim;
    const int n_kv_layer = inf_model_kv_layers(hp);
    const size_t tok = (size_t)n_kv_layer * (inf_kv_type_bytes(kv->type_k, kv_dim) +
                                             inf_kv_type_bytes(kv->type_v, kv_dim));
    const int bs = kv->block_size ? kv->block_size : INF_KV_BLOCK_SIZE_DEFAULT;
    /* positions all slots may hold at once */
    double want = (double)n_seq * trained, fit = want;
    size_t avail = inf_mem_available(), weights = 0;
    for (int i = 0; i < e->mf->n_tensors; i++)
        weights += e->mf->tensors[i].nbytes;
    if (avail) {
        /* the weights stay resident; a tenth of the rest is left to everything else */
        double left = avail > weights ? (double)(avail - weights) * 0.9 : 0;
        fit = left / (double)tok;
    }
    if (kv->kind == INF_KV_PAGED) {
        if (kv->mem_bytes) {
            long pos = (long)inf_kv_pool_blocks_for_bytes_typed(kv->mem_bytes, n_kv_layer, kv_dim,
                                                                bs, kv->type_k, kv->type_v) *
                       bs;
            /* below two positions the pool's own message says what is wrong */
            return pos >= 2 && pos < trained ? (int)pos : trained;
        }
        double pos = want < fit ? want : fit;
        pos = (double)((long)pos / bs * bs);
        if (pos < 2 * bs) pos = 2 * bs;
        kv->mem_bytes = (size_t)pos * tok;
        if (pos < want)
            snprintf(
                e->note, sizeof e->note,
                "the K/V pool holds %.0f positions (%.1f GiB, %s/%s K/V): what fits the memory "
                "left after the weights; one request may use all of it up to the model's %d "
                "(--cache-mem and -c set them)",
                pos, (double)kv->mem_bytes / (1 << 30), inf_kv_type_name(kv->type_k),
                inf_kv_type_name(kv->type_v), trained);
        return pos < trained ? (int)pos : trained;
    }
    if (fit >= want) return trained;
    long per = (long)(fit / n_seq) / 256 * 256;
    if (per < 256) per = 256 < trained ? 256 : trained;
    snprintf(e->note, sizeof e->note,
             "context %ld positions (the model was trained for %d): what fits the %.1f GiB of "
             "memory left after the weights with %s/%s K/V; -c sets it",
             per, trained, fit * (double)tok / (1 << 30), inf_kv_type_name(kv->type_k),
             inf_kv_type_name(kv->type_v));
    return (int)per;
}

int inf_engine_open(inf_engine **out, const inf_engine_opts *o, inf_err *err) {
    *out = NULL;
    double t0 = inf_now_s();
    inf_engine *e = calloc(1, sizeof *e);
    if (!e) return inf_fail(err, "out of memory");
    int n_seq = o->n_seq > 0 ? o->n_seq : 1;
    e->n_batch = o->n_batch > 0 ? o->n_batch : 512;
    if (inf_model_open(&e->mf, o->model_path, err)) goto fail;
    if (inf_tok_create(&e->tok, &e->mf->vocab, err)) {
        inf_fail_ctx(err, "%s: tokenizer", o->model_path);
        goto fail;
    }
    if (inf_backend_create(&e->be, &o->backend, err)) goto fail;
    inf_backend_describe(e->be, e->backend_name, sizeof e->backend_name);
    const inf_hparams *hp = &e->mf->hp;
    inf_kv_opts kv = o->kv;
    int n_ctx = o->n_ctx;
    if (n_ctx == 0) n_ctx = context_default(e, &kv, n_seq);
    if (n_ctx < 2) {
        inf_fail(err, "context size %d: expected at least 2", n_ctx);
        goto fail;
    }
    /* Past its training length a model has no positions it was taught (and
     * the RoPE tables and caches would be sized for nothing): refuse it. */
    if (hp->n_ctx_train > 0 && n_ctx > hp->n_ctx_train) {
        inf_fail(err, "context size %d: %s was trained for %d positions (-c at most %d)", n_ctx,
                 o->model_path, hp->n_ctx_train, hp->n_ctx_train);
        goto fail;
    }
    if ((kv.type_k == INF_Q8_0 || kv.type_v == INF_Q8_0) && hp->head_dim % INF_QK8_0) {
        inf_fail(err, "K/V cache type q8_0: head_dim %d of %s is not a multiple of 32 (use f16)",
                 hp->head_dim, o->model_path);
        goto fail;
    }
    int max_rows = n_seq + (e->n_batch < n_ctx ? e->n_batch : n_ctx);
    inf_pack_cache *pc;
    if (engine_pack_open(&pc, e->mf, e->be, o->pack, o->pack_dir, e->pack_note, sizeof e->pack_note,
                         err))
        goto fail;
    inf_backend_set_pack_cache(e->be, pc);
    const int mrc = inf_model_create(&e->model, e->mf, e->be, n_ctx, max_rows, err);
    inf_backend_set_pack_cache(e->be, NULL);
    engine_pack_close(pc, o->pack, mrc == 0, e->pack_note, sizeof e->pack_note);
    if (mrc) goto fail;
    const bool spec = o->spec_kind != INF_SPEC_NONE || o->draft_path;
    const inf_kv_layout lay = inf_exec_kv_layout(hp, spec);
    if (inf_kv_cache_create(&e->kv, &kv, &lay, n_seq, n_ctx, err)) goto fail;
    snprintf(e->name, sizeof e->name, "%s", e->mf->name ? e->mf->name : o->model_path);
    inf_sampler_params sampling;
    if (model_sampling(&sampling, e->mf, err)) goto fail;
    e->ex = (inf_exec){
        .ctx = e,
        .n_seq = n_seq,
        .n_ctx = n_ctx,
        .n_vocab = hp->n_vocab,
        .max_rows = max_rows,
        .n_embd = hp->n_embd,
        .no_head = hp->no_head,
        .embd_eos = inf_tok_add_eos(e->tok),
        .pooling = e->mf->pooling,
        .sampling = sampling,
        .rec_set = e->mf->sampling.set,
        .model_name = e->name,
        .model_path = o->model_path,
        .chat_template = e->mf->vocab.chat_template,
        .backend_name = e->backend_name,
        .model_file = e->mf,
        .forward = ex_forward,
        .seq_match = ex_seq_match,
        .seq_begin = ex_seq_begin,
        .seq_reserve = ex_seq_reserve,
        .seq_publish = ex_seq_publish,
        .seq_checkpoint_pos = e->kv->n_rec_layer ? ex_seq_checkpoint_pos : NULL,
        .seq_checkpoint = ex_seq_checkpoint,
        .seq_end = ex_seq_end,
        .seq_reset = ex_seq_reset,
        .seq_truncate = !e->kv->n_rec_layer || e->kv->log_rows ? ex_seq_truncate : NULL,
        .seq_mark = e->kv->n_rec_layer ? ex_seq_mark : NULL,
        .kv_stats = o->kv.kind == INF_KV_PAGED ? ex_kv_stats : NULL,
        .tokenize = ex_tokenize,
        .piece = ex_piece,
        .is_eog = ex_is_eog,
        .is_control = ex_is_control,
        .render = ex_render,
        .sampler_new = ex_sampler_new,
        .sampler_accept = ex_sampler_accept,
        .sampler_sample = ex_sampler_sample,
        .sampler_free = ex_sampler_free,
        .sampler_dist = ex_sampler_dist,
        .sampler_uniform = ex_sampler_uniform,
    };
    if (open_spec(e, o, n_seq, n_ctx, max_rows, err)) goto fail;
    if (inf_sched_create(&e->sched, &e->ex, e->n_batch, err)) goto fail;
    e->t_load_s = inf_now_s() - t0;
    *out = e;
    return 0;
fail:
    inf_engine_close(e);
    return -1;
}

void inf_engine_close(inf_engine *e) {
    if (!e) return;
    inf_sched_free(e->sched); /* first: its thread uses everything below */
    inf_draft_close(e->draft);
    inf_kv_cache_free(e->kv);
    inf_model_free(e->model);
    inf_backend_free(e->be);
    inf_tok_free(e->tok);
    inf_model_close(e->mf);
    free(e);
}

/* ---- prompts ---- */

int inf_engine_tokenize(const inf_engine *e, const char *text, size_t n, bool parse_special,
                        int32_t **ids, int *n_ids, inf_err *err) {
    *ids = NULL;
    *n_ids = 0;
    int32_t *raw = NULL;
    int n_raw = 0;
    if (inf_tok_encode(e->tok, text, n, parse_special, &raw, &n_raw, err)) return -1;
    int32_t bos = inf_tok_bos(e->tok);
    if (!inf_tok_add_bos(e->tok) || bos < 0 || (n_raw > 0 && raw[0] == bos)) {
        *ids = raw;
        *n_ids = n_raw;
        return 0;
    }
    int32_t *with = malloc(((size_t)n_raw + 1) * sizeof *with);
    if (!with) {
        free(raw);
        return inf_fail(err, "out of memory");
    }
    with[0] = bos;
    if (n_raw) memcpy(with + 1, raw, (size_t)n_raw * sizeof *raw);
    free(raw);
    *ids = with;
    *n_ids = n_raw + 1;
    return 0;
}

int inf_engine_render(const inf_engine *e, const inf_chat_input *in, char **out, inf_err *err) {
    *out = NULL;
    const char *src = e->mf->vocab.chat_template;
    if (!src) return inf_fail(err, "this model has no chat template");
    json_t *kw = in->kwargs ? json_deep_copy(in->kwargs) : json_object();
    if (!kw) return inf_fail(err, "out of memory");
    int32_t ids[2] = {inf_tok_bos(e->tok), inf_tok_eos(e->tok)};
    const char *names[2] = {"bos_token", "eos_token"};
    for (int i = 0; i < 2; i++) {
        const char *t = ids[i] >= 0 ? inf_tok_token_text(e->tok, ids[i]) : NULL;
        if (t && !json_object_get(kw, names[i])) json_object_set_new(kw, names[i], json_string(t));
    }
    int rc = inf_chat_render(out, src, in->messages, in->tools, true, kw, err);
    json_decref(kw);
    if (rc) return inf_fail_ctx(err, "chat template");
    return 0;
}

int inf_engine_chat_prompt(const inf_engine *e, const inf_chat_input *in, int32_t **ids, int *n_ids,
                           bool *in_think, char **text_out, inf_err *err) {
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    if (inf_engine_render(e, in, &text, err)) return -1;
    size_t len = strlen(text);
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    if (in_think) *in_think = len >= 7 && !memcmp(text + len - 7, "<think>", 7);
    int rc = inf_engine_tokenize(e, text, strlen(text), true, ids, n_ids, err);
    if (text_out && !rc)
        *text_out = text;
    else
        free(text);
    return rc;
}

/* ---- generation ---- */

inf_task *inf_engine_submit(inf_engine *e, int32_t *prompt, int n, const inf_gen_params *p,
                            inf_err *err) {
    inf_task *t = inf_task_new(prompt, n, p);
    if (!t) {
        inf_fail(err, "out of memory");
        return NULL;
    }
    if (inf_sched_submit(e->sched, t, err)) {
        inf_task_release(t);
        return NULL;
    }
    return t;
}

int inf_engine_wait(inf_engine *e, inf_task *t, void (*on_text)(void *ud, const char *s, size_t n),
                    void *ud, inf_err *err) {
    inf_task_cursor c = {0};
    for (;;) {
        inf_task_update u;
        inf_task_wait(t, &c, -1, &u);
        if (u.text && on_text) on_text(ud, u.text, u.n_text);
        free(u.text);
        if (u.done) break;
    }
    if (t->status != INF_TASK_OK) return inf_fail(err, "%s", t->err);
    return 0;
}
