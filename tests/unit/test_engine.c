/* The engine, as every program uses it (tiny generated model, pool backend,
 * one and two slots, basic and paged caches; the tiny MoE too): a prompt's logits are the
 * same bits cold, after a reused prefix and repeated; the prompt limits of
 * the context (refused with both numbers) and generation that stops with
 * "length" there; end-of-generation and ignore_eos; the same seed giving the
 * same tokens and a random seed reported; the BOS rule; embeddings the same
 * bits cold, warm and batched; and a request whose
 * scratch allocation fails gets an error while the next is served.
 * Needs the generated models (scripts/make-models.sh). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/engine.h"
#include "util/mem.h"

#define MODEL "models/tiny-f32.gguf"
#define MODEL_MOE "models/tiny-moe-q4_k_m.gguf" /* qwen3moe: experts grouped over the batch */
#define MAXT 256

typedef struct capture {
    float *rows; /* [cap][n_vocab] logits each token was sampled from */
    int n, cap, n_vocab;
} capture;

static void on_logits(void *ud, const float *logits, int n_vocab) {
    capture *c = ud;
    if (c->n < c->cap) memcpy(c->rows + (size_t)c->n++ * n_vocab, logits, n_vocab * sizeof(float));
}

/* Runs prompt[0..n) for max_tokens; the task (ended) and, when c is not
 * NULL, the logits of every sampled token. */
static inf_task *gen(inf_engine *e, const int32_t *prompt, int n, inf_gen_params p, capture *c) {
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    memcpy(copy, prompt, (size_t)n * sizeof *copy);
    if (c) p.on_logits = on_logits, p.ud = c;
    inf_err err;
    inf_task *t = inf_engine_submit(e, copy, n, &p, &err);
    if (!t) {
        fprintf(stderr, "submit: %s\n", err.msg);
        return NULL;
    }
    inf_engine_wait(e, t, NULL, NULL, &err);
    return t;
}

static inf_gen_params greedy(int max_tokens) {
    inf_gen_params p = inf_gen_defaults();
    p.sampling.temp = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

static capture cap_new(int rows, int n_vocab) {
    return (capture){
        .rows = malloc((size_t)rows * n_vocab * sizeof(float)), .cap = rows, .n_vocab = n_vocab};
}

/* Cold, warm (a longer prompt after a shorter one), repeated: bit-identical,
 * with K and V stored as type. */
static void test_reuse_typed(const char *model, inf_kv_kind kind, int n_seq, inf_dtype type) {
    inf_engine *e;
    inf_err err;
    inf_engine_opts o = {.model_path = model,
                         .n_seq = n_seq,
                         .n_ctx = 128,
                         .n_batch = 16,
                         .kv = {.kind = kind, .block_size = 8, .type_k = type, .type_v = type}};
    CHECK_MSG(inf_engine_open(&e, &o, &err) == 0, "%s", err.msg);
    int V = e->ex.n_vocab;
    int32_t prompt[60];
    for (int i = 0; i < 60; i++)
        prompt[i] = (i * 37 + 11) % 1000 + 10;
    capture cold = cap_new(4, V), warm = cap_new(4, V), again = cap_new(4, V);

    inf_task *t = gen(e, prompt, 60, greedy(4), &cold); /* cold: nothing cached */
    CHECK(t && t->status == INF_TASK_OK && t->timings.cache_n == 0 && t->n_gen == 4);
    inf_task_release(t);
    inf_engine_close(e);

    CHECK(inf_engine_open(&e, &o, &err) == 0);
    t = gen(e, prompt, 35, greedy(2), NULL); /* a shorter prompt first */
    inf_task_release(t);
    t = gen(e, prompt, 60, greedy(4), &warm); /* then the whole: its 35 reused */
    CHECK_MSG(t && t->timings.cache_n == 35, "cache_n %d", t ? t->timings.cache_n : -1);
    CHECK_INT(t ? t->timings.prompt_n : -1, 25);
    inf_task_release(t);
    t = gen(e, prompt, 60, greedy(4), &again); /* the same again: all but two rows reused */
    CHECK_MSG(t && t->timings.cache_n == 58, "cache_n %d", t ? t->timings.cache_n : -1);
    inf_task_release(t);
    CHECK_INT(warm.n, 4);
    CHECK_INT(again.n, 4);
    CHECK_CLOSE(warm.rows, cold.rows, (size_t)4 * V, 0);
    CHECK_CLOSE(again.rows, cold.rows, (size_t)4 * V, 0);
    if (kind == INF_KV_PAGED) {
        inf_kv_stats st;
        inf_kv_cache_stats(e->kv, &st);
        CHECK_INT(st.ref_errors, 0);
        CHECK(st.prefix_hits >= 2);
    }
    inf_engine_close(e);
    free(cold.rows);
    free(warm.rows);
    free(again.rows);
}

static void test_reuse(const char *model, inf_kv_kind kind, int n_seq) {
    test_reuse_typed(model, kind, n_seq, INF_F32);
}

/* Without -c: the model's training length (the tiny model's 4096; its f16
 * K/V fit any machine that runs the tests), and with a paged pool smaller
 * than that, the pool: one request may use all of it. */
static void test_default_context(void) {
    inf_engine *e;
    inf_err err;
    inf_engine_opts o = {.model_path = MODEL, .kv = {.type_k = INF_F16, .type_v = INF_F16}};
    CHECK_MSG(inf_engine_open(&e, &o, &err) == 0, "%s", err.msg);
    CHECK_INT(e->ex.n_ctx, 4096);
    CHECK_MSG(e->note[0] == 0, "%s", e->note);
    CHECK_INT(inf_kv_cache_token_bytes(e->kv), 4 * 2 * 128 * 2);
    inf_engine_close(e);
    /* 64 KiB of f16 blocks of 4 positions (8 KiB each): 8 blocks, 32 positions */
    o.kv = (inf_kv_opts){.kind = INF_KV_PAGED,
                         .block_size = 4,
                         .mem_bytes = 64 << 10,
                         .type_k = INF_F16,
                         .type_v = INF_F16};
    CHECK_MSG(inf_engine_open(&e, &o, &err) == 0, "%s", err.msg);
    CHECK_INT(e->ex.n_ctx, 32);
    CHECK_INT(inf_kv_cache_total_bytes(e->kv), 64 << 10);
    inf_engine_close(e);
}

static void test_limits_and_sampling(void) {
    inf_engine *e;
    inf_err err;
    inf_engine_opts o = {.model_path = MODEL, .n_ctx = 64, .n_batch = 16};
    CHECK(inf_engine_open(&e, &o, &err) == 0);
    int32_t prompt[80];
    for (int i = 0; i < 80; i++)
        prompt[i] = (i * 17 + 3) % 2000 + 5;

    /* A prompt that leaves no room is refused, naming both numbers. */
    int32_t *copy = malloc(64 * sizeof *copy);
    memcpy(copy, prompt, 64 * sizeof *copy);
    inf_gen_params p = greedy(4);
    CHECK(inf_engine_submit(e, copy, 64, &p, &err) == NULL);
    CHECK_MSG(strstr(err.msg, "64") && strstr(err.msg, "context"), "%s", err.msg);

    /* Until the context ends: 50 + 14 fed = 64 positions, the 15th has no room. */
    inf_task *t = gen(e, prompt, 50, greedy(-1), NULL);
    CHECK(t && t->finish == INF_FINISH_LENGTH);
    CHECK_INT(t ? t->n_gen : -1, 15);
    inf_task_release(t);

    /* End of generation: with the tokenizer's own EOG tokens, a greedy run
     * stops at the first one it samples (or runs to the length). */
    p = greedy(12);
    p.ignore_eos = false;
    t = gen(e, prompt, 20, p, NULL);
    CHECK(t && (t->finish == INF_FINISH_STOP || t->n_gen == 12));
    inf_task_release(t);

    /* An EOG token biased far above the rest: it ends the reply at once,
     * and under ignore_eos it is banned (as llama.cpp does), never emitted
     * as text: the run goes to its length, though the logits the observer
     * sees (the model's, biased) still rank it first. */
    const int32_t eog = inf_tok_eos(e->tok) >= 0 ? inf_tok_eos(e->tok) : inf_tok_eot(e->tok);
    CHECK(eog >= 0 && inf_tok_is_eog(e->tok, eog));
    const inf_logit_bias push = {eog, 1000.0f};
    p = greedy(6);
    p.logit_bias = &push;
    p.n_logit_bias = 1;
    p.ignore_eos = false;
    t = gen(e, prompt, 20, p, NULL);
    CHECK(t && t->finish == INF_FINISH_STOP && t->n_gen == 1);
    inf_task_release(t);
    p.ignore_eos = true;
    capture banned = cap_new(6, e->ex.n_vocab);
    t = gen(e, prompt, 20, p, &banned);
    CHECK(t && t->finish == INF_FINISH_LENGTH && t->n_gen == 6 && banned.n == 6);
    char piece[64];
    int np = e->ex.piece(e->ex.ctx, eog, piece, sizeof piece - 1);
    piece[np > 0 ? np : 0] = 0;
    CHECK_MSG(np > 0 && t && t->text.data && !strstr(t->text.data, piece),
              "ignore_eos emitted \"%s\" as text", piece);
    for (int i = 0; i < banned.n; i++)
        CHECK(banned.rows[(size_t)i * e->ex.n_vocab + eog] > 500.0f);
    free(banned.rows);
    inf_task_release(t);

    /* Seeded sampling repeats itself; a random seed is drawn and reported. */
    inf_gen_params s = inf_gen_defaults();
    s.sampling.temp = 1.5f;
    s.sampling.top_k = 0;
    s.sampling.seed = 99;
    s.max_tokens = 20;
    s.ignore_eos = true;
    char *texts[2];
    for (int k = 0; k < 2; k++) {
        t = gen(e, prompt, 8, s, NULL);
        CHECK(t && t->seed == 99 && t->n_gen == 20);
        texts[k] = strdup(t && t->text.data ? t->text.data : "");
        inf_task_release(t);
    }
    CHECK_STR(texts[0], texts[1]);
    free(texts[0]);
    free(texts[1]);
    s.sampling.seed = INF_SEED_RANDOM;
    t = gen(e, prompt, 8, s, NULL);
    CHECK(t && t->seed != INF_SEED_RANDOM);
    inf_task_release(t);

    /* The BOS rule: Qwen3 asks for none, so text tokenizes as is. */
    int32_t *ids;
    int n;
    CHECK(inf_engine_tokenize(e, "hello", 5, true, &ids, &n, &err) == 0);
    CHECK(n >= 1 && (!inf_tok_add_bos(e->tok) || ids[0] == inf_tok_bos(e->tok)));
    free(ids);
    inf_engine_close(e);
}

/* Out of memory on a request's path: the forward pass cannot get its
 * scratch, the request ends unavailable with a message, and the next one is
 * served with the same tokens as a fresh engine's. */
static void test_oom(void) {
    inf_engine *e;
    inf_err err;
    inf_engine_opts o = {
        .model_path = MODEL, .n_ctx = 128, .n_batch = 32, .kv = {.kind = INF_KV_PAGED}};
    CHECK(inf_engine_open(&e, &o, &err) == 0);
    int32_t prompt[40];
    for (int i = 0; i < 40; i++)
        prompt[i] = (i * 29 + 17) % 3000 + 3;
    inf_task *fresh = gen(e, prompt, 40, greedy(6), NULL);
    char *want = strdup(fresh && fresh->text.data ? fresh->text.data : "");
    inf_task_release(fresh);
    inf_engine_close(e);

    CHECK(inf_engine_open(&e, &o, &err) == 0);
    inf_alloc_fail_next(1, 1); /* the scratch of the first forward call */
    inf_task *t = gen(e, prompt, 40, greedy(6), NULL);
    CHECK_INT(inf_alloc_fail_pending(), 0);
    CHECK(t && t->done && t->status == INF_TASK_UNAVAILABLE);
    CHECK_MSG(t && strstr(t->err, "out of memory"), "%s", t ? t->err : "(no task)");
    if (t) fprintf(stderr, "test_oom: the failed request: %s\n", t->err);
    inf_task_release(t);
    inf_alloc_fail_next(0, 0);
    t = gen(e, prompt, 40, greedy(6), NULL); /* the engine goes on serving */
    CHECK(t && t->status == INF_TASK_OK && t->n_gen == 6);
    CHECK_STR(t && t->text.data ? t->text.data : "", want);
    inf_task_release(t);
    inf_kv_stats st;
    inf_kv_cache_stats(e->kv, &st);
    CHECK_INT(st.ref_errors, 0);
    inf_engine_close(e);
    free(want);
}

/* An embedding task (the last prompt row's final-normed hidden state) gives
 * the same bits cold, after a reused prefix, chunked, and beside a
 * generation in the same batches. */
static void test_embed(const char *model) {
    inf_engine *e;
    inf_err err;
    inf_engine_opts o = {.model_path = model,
                         .n_seq = 2,
                         .n_ctx = 128,
                         .n_batch = 16,
                         .kv = {.kind = INF_KV_PAGED, .type_k = INF_F32, .type_v = INF_F32}};
    CHECK_MSG(inf_engine_open(&e, &o, &err) == 0, "%s", err.msg);
    const int E = e->ex.n_embd;
    CHECK_INT(E, e->mf->hp.n_embd);
    int32_t prompt[60];
    for (int i = 0; i < 60; i++)
        prompt[i] = (i * 31 + 7) % 3000 + 11;
    inf_gen_params p = inf_gen_defaults();
    p.embed = true;
    float *v[4] = {0};
    for (int k = 0; k < 4; k++) {
        if (k == 1) inf_task_release(gen(e, prompt, 35, p, NULL)); /* a cached prefix */
        inf_task *g = NULL; /* then beside a generation, submitted first, not waited for */
        if (k == 2) {
            int32_t *copy = malloc(40 * sizeof *copy);
            memcpy(copy, prompt + 3, 40 * sizeof *copy);
            inf_gen_params gp = greedy(8);
            g = inf_engine_submit(e, copy, 40, &gp, &err);
            CHECK(g != NULL);
        }
        inf_task *t = gen(e, prompt, 60, p, NULL);
        if (g) {
            CHECK(inf_engine_wait(e, g, NULL, NULL, &err) == 0);
            CHECK_INT(g->n_gen, 8);
        }
        CHECK_MSG(t && t->status == INF_TASK_OK && t->n_gen == 0 && t->n_embd == E, "embed %d: %s",
                  k, t ? t->err : "not submitted");
        if (t && t->embd) {
            v[k] = malloc((size_t)E * sizeof *v[k]);
            memcpy(v[k], t->embd, (size_t)E * sizeof *v[k]);
        }
        if (k == 1)
            CHECK_MSG(t && t->timings.cache_n > 0, "reused %d", t ? t->timings.cache_n : -1);
        inf_task_release(t);
        inf_task_release(g);
    }
    double ss = 0;
    for (int i = 0; v[0] && i < E; i++)
        ss += (double)v[0][i] * v[0][i];
    CHECK_MSG(ss > 1e-3, "a hidden state, not zeros (%g)", ss);
    for (int k = 1; k < 4; k++)
        CHECK_MSG(v[0] && v[k] && !memcmp(v[0], v[k], (size_t)E * sizeof(float)),
                  "%s: embedding %d differs from the cold one", model, k);
    for (int k = 0; k < 4; k++)
        free(v[k]);
    inf_engine_close(e);
}

int main(void) {
    test_embed(MODEL);
    test_embed(MODEL_MOE);
    test_reuse(MODEL, INF_KV_BASIC, 1);
    test_reuse(MODEL, INF_KV_PAGED, 1);
    test_reuse(MODEL, INF_KV_PAGED, 2);
    test_reuse(MODEL_MOE, INF_KV_BASIC, 1);
    test_reuse(MODEL_MOE, INF_KV_PAGED, 2);
    test_default_context();
    const inf_dtype kv_types[] = {INF_F16, INF_BF16, INF_Q8_0};
    for (int i = 0; i < 3; i++) {
        test_reuse_typed(MODEL, INF_KV_BASIC, 1, kv_types[i]);
        test_reuse_typed(MODEL, INF_KV_PAGED, 2, kv_types[i]);
    }
    test_reuse_typed(MODEL_MOE, INF_KV_PAGED, 2, INF_F16);
    test_limits_and_sampling();
    test_oom();
    return th_report();
}
