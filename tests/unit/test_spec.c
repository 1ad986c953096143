/* Speculative decoding through the engine, against plain decoding on the
 * same model:
 * - greedy output with --spec ngram and with a draft model (-md) is the same
 *   tokens with the same logprobs, bit for bit, over many prompts, on a dense
 *   and a MoE model and the Qwen3.5 hybrids (dense, MoE; drafted by hybrids),
 *   basic and paged caches, two slots at once; with drafts refused often (a
 *   Q4_0 draft) and taken often (Q8_0, n-gram loops); n-gram drafts on the
 *   hybrids under a grammar (their random text never repeats itself);
 * - sampled output at a seed is the same tokens too when drafts are compared
 *   (n-gram, greedy drafts, a grammar);
 * - a draft model that samples (rejection sampling): the first two tokens'
 *   joint frequencies over many seeds fit the model's own distribution
 *   (chi-square), and do not fit the draft's (the test can tell);
 * - the limits: max_tokens, the context's end, a stop string ending a reply
 *   inside a verified step, and the cache a speculative request leaves behind
 *   (the next request's logprobs over it are plain decoding's);
 * - refusals: a draft that is not there, a drafter without a draft, bad knobs.
 * Needs the generated models (scripts/make-models.sh). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "grammar/grammar.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

#define DENSE "models/tiny-bf16.gguf"
#define MOE "models/tiny-moe-f32.gguf"
#define HYBRID "models/tiny-qwen35-f32.gguf"
#define HYBRID_MOE "models/tiny-qwen35-moe-f32.gguf"
#define MAXT 96
/* Seeds of the rejection-sampling test and prompts of the greedy ones;
 * under ASan a run of their code paths, without the statistics. */
#if defined(__SANITIZE_ADDRESS__)
#define SAMPLES 200
#define PROMPTS 4
#else
#define SAMPLES 2000
#define PROMPTS 12
#endif

typedef struct out {
    int32_t ids[MAXT];
    float lp[MAXT];
    int n;
    int draft_n, draft_acc;
    char text[4096];
    int finish;
} out;

static inf_engine *open_engine(const char *model, inf_spec_kind kind, const char *draft, int n_max,
                               float p_min, int n_seq, inf_kv_kind kv, int n_ctx) {
    inf_engine *e = NULL;
    inf_err err;
    inf_engine_opts o = {.model_path = model,
                         .n_seq = n_seq,
                         .n_ctx = n_ctx,
                         .n_batch = 32,
                         .kv = {.kind = kv,
                                .block_size = 16,
                                .mem_bytes = kv == INF_KV_PAGED ? 64u << 20 : 0,
                                .type_k = INF_F16,
                                .type_v = INF_F16},
                         .spec_kind = kind,
                         .draft_path = draft,
                         .spec = {.n_max = n_max, .n_min = 0, .p_min = p_min}};
    if (inf_engine_open(&e, &o, &err)) {
        fprintf(stderr, "open %s: %s\n", model, err.msg);
        return NULL;
    }
    return e;
}

static void on_text(void *ud, const char *s, size_t n) {
    out *o = ud;
    size_t have = strlen(o->text);
    if (have + n < sizeof o->text) memcpy(o->text + have, s, n), o->text[have + n] = 0;
}

static inf_task *submit(inf_engine *e, const int32_t *prompt, int n, inf_gen_params p) {
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    memcpy(copy, prompt, (size_t)n * sizeof *copy);
    p.logprobs = true;
    p.top_logprobs = 2;
    inf_err err;
    inf_task *t = inf_engine_submit(e, copy, n, &p, &err);
    if (!t) fprintf(stderr, "submit: %s\n", err.msg);
    return t;
}

static void collect(inf_engine *e, inf_task *t, out *o) {
    memset(o, 0, sizeof *o);
    inf_err err;
    if (inf_engine_wait(e, t, on_text, o, &err)) fprintf(stderr, "wait: %s\n", err.msg);
    o->n = t->n_lp < MAXT ? t->n_lp : MAXT;
    for (int i = 0; i < o->n; i++) {
        o->ids[i] = t->lp[i].id;
        o->lp[i] = t->lp[i].logprob;
    }
    o->draft_n = t->timings.draft_n;
    o->draft_acc = t->timings.draft_accepted;
    o->finish = t->finish;
    inf_task_release(t);
}

static void gen(inf_engine *e, const int32_t *prompt, int n, inf_gen_params p, out *o) {
    inf_task *t = submit(e, prompt, n, p);
    if (t)
        collect(e, t, o);
    else
        memset(o, 0, sizeof *o);
}

static inf_gen_params greedy(int max_tokens) {
    inf_gen_params p = inf_gen_defaults();
    p.sampling.temp = 0;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

/* Prompt i: some repetitive (n-gram drafts find loops), some not. */
static int make_prompt(int i, int32_t *buf) {
    int n = 3 + (i * 7) % 29;
    for (int j = 0; j < n; j++)
        buf[j] = i % 3 == 0 ? 100 + (j % (2 + i % 4)) * 17 : (j * 131 + i * 977) % 5000 + 10;
    return n;
}

static bool same(const out *a, const out *b) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->ids[i] != b->ids[i] || memcmp(&a->lp[i], &b->lp[i], sizeof(float))) return false;
    return true;
}

/* Greedy: the same tokens and logprobs as plain decoding, prompt by prompt,
 * one slot and then two slots at once. */
static void test_greedy(const char *model, inf_spec_kind kind, const char *draft, int n_max,
                        inf_kv_kind kv, bool expect_refusals) {
    inf_engine *plain = open_engine(model, INF_SPEC_NONE, NULL, 0, 0, 2, kv, 256);
    inf_engine *spec = open_engine(model, kind, draft, n_max, 0.0f, 2, kv, 256);
    CHECK(plain && spec);
    if (!plain || !spec) return;
    int drafted = 0, taken = 0, ok = 0;
    const int n_prompts = PROMPTS;
    for (int i = 0; i < n_prompts; i += 2) {
        int32_t p0[40], p1[40];
        int n0 = make_prompt(i, p0), n1 = make_prompt(i + 1, p1);
        out a0, a1, b0, b1;
        gen(plain, p0, n0, greedy(40), &a0);
        gen(plain, p1, n1, greedy(33), &a1);
        /* both at once on the speculating engine: batched verification */
        inf_task *t0 = submit(spec, p0, n0, greedy(40)), *t1 = submit(spec, p1, n1, greedy(33));
        CHECK(t0 && t1);
        if (!t0 || !t1) break;
        collect(spec, t0, &b0);
        collect(spec, t1, &b1);
        ok += same(&a0, &b0) && a0.n == 40;
        ok += same(&a1, &b1) && a1.n == 33;
        CHECK_MSG(same(&a0, &b0), "%s %s prompt %d: speculative output differs", model,
                  inf_spec_kind_name(kind), i);
        CHECK_MSG(same(&a1, &b1), "%s %s prompt %d: speculative output differs", model,
                  inf_spec_kind_name(kind), i + 1);
        drafted += b0.draft_n + b1.draft_n;
        taken += b0.draft_acc + b1.draft_acc;
    }
    CHECK_INT(ok, n_prompts);
    CHECK_MSG(drafted > 0 && taken > 0, "%s %s: %d drafted, %d taken", model,
              inf_spec_kind_name(kind), drafted, taken);
    if (expect_refusals)
        CHECK_MSG(taken < drafted, "%s %s: every draft taken (%d): refusals not exercised", model,
                  inf_spec_kind_name(kind), drafted);
    fprintf(stderr, "  %s %s%s%s %s: %d drafted, %d taken\n", model, inf_spec_kind_name(kind),
            draft ? " " : "", draft ? draft : "", inf_kv_kind_name(kv), drafted, taken);
    inf_engine_close(plain);
    inf_engine_close(spec);
}

/* Greedy under grammar gbnf, max tokens: plainly into *a, speculating into *b. */
static void gen_grammar(inf_engine *plain, inf_engine *spec, const int32_t *prompt, int n, int max,
                        const char *gbnf, out *a, out *b) {
    for (int m = 0; m < 2; m++) {
        inf_gen_params g = greedy(max);
        inf_err err;
        CHECK(inf_gram_compile(&g.grammar, gbnf, strlen(gbnf), "root", &err) == 0);
        gen(m ? spec : plain, prompt, n, g, m ? b : a);
    }
}

/* Sampling at a seed, drafts compared (n-gram; a greedy draft model under a
 * grammar falls back to comparing too): the same tokens as plain sampling. */
static void test_seeded(void) {
    inf_engine *plain = open_engine(DENSE, INF_SPEC_NONE, NULL, 0, 0, 1, INF_KV_BASIC, 256);
    inf_engine *ngram = open_engine(DENSE, INF_SPEC_NGRAM, NULL, 8, 0, 1, INF_KV_BASIC, 256);
    CHECK(plain && ngram);
    if (!plain || !ngram) return;
    int ok = 0, drafted = 0;
    for (int i = 0; i < 6; i++) {
        int32_t p[40];
        int n = make_prompt(i * 3, p);
        inf_gen_params g = inf_gen_defaults();
        g.sampling.temp = 0.7f;
        g.sampling.top_k = 3;
        g.sampling.repeat_penalty = 1.1f; /* the penalty window sees the drafts taken */
        g.sampling.seed = 1234 + i;
        g.max_tokens = 40;
        g.ignore_eos = true;
        out a, b;
        gen(plain, p, n, g, &a);
        gen(ngram, p, n, g, &b);
        ok += same(&a, &b);
        drafted += b.draft_n;
    }
    CHECK_INT(ok, 6);
    CHECK(drafted > 0);
    /* under a grammar: the constraint walks the verified rows as it walks
       plain decoding's */
    int gram_ok = 0;
    for (int i = 0; i < 3; i++) {
        int32_t p[40];
        int n = make_prompt(i * 5 + 1, p);
        out a, b;
        gen_grammar(plain, ngram, p, n, 24, "root ::= [a-z ]+", &a, &b);
        gram_ok += same(&a, &b) && a.n == 24 &&
                   strspn(a.text, "abcdefghijklmnopqrstuvwxyz ") == strlen(a.text);
    }
    CHECK_INT(gram_ok, 3);
    inf_engine_close(plain);
    inf_engine_close(ngram);
}

/* N-gram drafts on a model whose greedy text never repeats itself (the
 * random hybrids): under a grammar of a few short words the text does, so
 * drafts are found, and some refused. Greedy output against plain decoding. */
static void test_ngram_grammar(const char *model, inf_kv_kind kv) {
    inf_engine *plain = open_engine(model, INF_SPEC_NONE, NULL, 0, 0, 1, kv, 256);
    inf_engine *ngram = open_engine(model, INF_SPEC_NGRAM, NULL, 8, 0, 1, kv, 256);
    CHECK(plain && ngram);
    if (!plain || !ngram) return;
    int ok = 0, drafted = 0, taken = 0;
    for (int i = 0; i < PROMPTS / 2; i++) {
        int32_t p[40];
        int n = make_prompt(i * 5 + 2, p);
        out a, b;
        gen_grammar(plain, ngram, p, n, 48, "root ::= (\"ab \" | \"cd \" | \"ab cd \" | \"x\")+",
                    &a, &b);
        ok += same(&a, &b) && a.n > 0; /* the grammar may end it early */
        CHECK_MSG(same(&a, &b), "%s ngram, grammar, prompt %d: speculative output differs", model,
                  i);
        drafted += b.draft_n;
        taken += b.draft_acc;
    }
    CHECK_INT(ok, PROMPTS / 2);
    CHECK_MSG(drafted > 0 && taken > 0 && taken < drafted,
              "%s ngram, grammar: %d drafted, %d taken", model, drafted, taken);
    fprintf(stderr, "  %s ngram, grammar, %s: %d drafted, %d taken\n", model, inf_kv_kind_name(kv),
            drafted, taken);
    inf_engine_close(plain);
    inf_engine_close(ngram);
}

/* The joint distribution of the first two sampled tokens (temperature 1,
 * top-k 4) with a sampling Q4_0 draft for the BF16 model, over many seeds,
 * against the model's own: p(t1) from the prompt's logits, p(t2 | t1) from
 * the prompt + t1's. */
static double chi2(const double *expect, const int *count, int cells, int n, int *df) {
    double stat = 0, e_rest = 0;
    int c_rest = 0;
    *df = -1;
    for (int i = 0; i < cells; i++) {
        double e = expect[i] * n;
        if (e < 5) { /* pooled */
            e_rest += e;
            c_rest += count[i];
            continue;
        }
        stat += (count[i] - e) * (count[i] - e) / e;
        (*df)++;
    }
    if (e_rest > 0) {
        stat += (c_rest - e_rest) * (c_rest - e_rest) / (e_rest > 1e-9 ? e_rest : 1e-9);
        (*df)++;
    }
    return stat;
}

typedef struct capture {
    float *rows;
    int n, cap, n_vocab;
} capture;
static void on_logits(void *ud, const float *logits, int n_vocab) {
    capture *c = ud;
    if (c->n < c->cap) memcpy(c->rows + (size_t)c->n++ * n_vocab, logits, n_vocab * sizeof(float));
}

/* The distribution a sampler with params sp draws from over logits. */
static int dist(const inf_sampler_params *sp, const float *logits, int V, int32_t *ids,
                double *probs) {
    inf_sampler *s;
    inf_err err;
    if (inf_sampler_create(&s, sp, V, 256, &err)) return 0;
    int n = inf_sampler_dist(s, logits, ids, probs);
    inf_sampler_free(s);
    return n;
}

/* The distribution sp draws the token after prompt[0..n) from, on e; rows
 * holds one logits row. Returns how many candidates it keeps. */
static int next_dist(inf_engine *e, const int32_t *prompt, int n, float *rows,
                     const inf_sampler_params *sp, int32_t *ids, double *probs) {
    capture c = {.rows = rows, .cap = 1, .n_vocab = e->ex.n_vocab};
    inf_gen_params g = greedy(1);
    g.on_logits = on_logits, g.ud = &c;
    out o;
    gen(e, prompt, n, g, &o);
    return c.n == 1 ? dist(sp, rows, e->ex.n_vocab, ids, probs) : 0;
}

static void test_rejection_sampling(void) {
    inf_engine *plain = open_engine(DENSE, INF_SPEC_NONE, NULL, 0, 0, 1, INF_KV_BASIC, 128);
    inf_engine *spec =
        open_engine(DENSE, INF_SPEC_DRAFT, "models/tiny-q4_0.gguf", 4, 0, 1, INF_KV_BASIC, 128);
    inf_engine *dr =
        open_engine("models/tiny-q4_0.gguf", INF_SPEC_NONE, NULL, 0, 0, 1, INF_KV_BASIC, 128);
    CHECK(plain && spec && dr);
    if (!plain || !spec || !dr) return;
    const int V = plain->ex.n_vocab, K = 4;
    inf_sampler_params sp = inf_sampler_defaults();
    sp.temp = 1.0f, sp.top_k = K, sp.top_p = 1.0f, sp.min_p = 0.0f, sp.seed = 1;
    int32_t prompt[12];
    for (int j = 0; j < 12; j++)
        prompt[j] = 300 + j * 41;
    float *rows = malloc((size_t)V * sizeof(float));
    /* p(t1) from the model; p(t2 | t1 = ids1[a]) from the model, q from the draft */
    int32_t ids1[K], ids2[K][K], idsq2[K][K];
    double p1[K], p2[K][K], q2[K][K];
    int n1 = next_dist(plain, prompt, 12, rows, &sp, ids1, p1);
    CHECK(n1 == K);
    int32_t ext[13];
    memcpy(ext, prompt, sizeof prompt);
    for (int a = 0; a < n1; a++) {
        ext[12] = ids1[a];
        CHECK(next_dist(plain, ext, 13, rows, &sp, ids2[a], p2[a]) == K);
        CHECK(next_dist(dr, ext, 13, rows, &sp, idsq2[a], q2[a]) == K);
    }
    /* the cells (t1, t2) of the model's distribution; the control: t1 from
       the model, t2 from the draft's q, as if every draft were taken */
    double expect[K * K], control[K * K];
    int count[K * K];
    memset(count, 0, sizeof count);
    for (int a = 0; a < K; a++)
        for (int b = 0; b < K; b++) {
            expect[a * K + b] = p1[a] * p2[a][b];
            double qb = 0;
            for (int j = 0; j < K; j++)
                if (idsq2[a][j] == ids2[a][b]) qb = q2[a][j];
            control[a * K + b] = p1[a] * qb;
        }
    const int N = SAMPLES;
    int outside = 0, drafted = 0, taken = 0;
    for (int s = 0; s < N; s++) {
        inf_gen_params g = inf_gen_defaults();
        g.sampling = sp;
        g.sampling.seed = 1000 + (uint64_t)s;
        g.max_tokens = 3; /* token 2 is the verdict on a draft */
        g.ignore_eos = true;
        out o;
        gen(spec, prompt, 12, g, &o);
        drafted += o.draft_n;
        taken += o.draft_acc;
        int a = -1, b = -1;
        for (int j = 0; j < K && o.n >= 2; j++)
            if (ids1[j] == o.ids[0]) a = j;
        for (int j = 0; a >= 0 && j < K; j++)
            if (ids2[a][j] == o.ids[1]) b = j;
        if (a < 0 || b < 0)
            outside++;
        else
            count[a * K + b]++;
    }
    CHECK_INT(outside, 0);
    int df, df_c;
    double stat = chi2(expect, count, K * K, N - outside, &df);
    double stat_c = chi2(control, count, K * K, N - outside, &df_c);
    /* the 0.1 % critical values of chi-square for df 1..15 */
    static const double crit[16] = {0,     10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32,
                                    26.12, 27.88, 29.59, 31.26, 32.91, 34.53, 36.12, 37.70};
    CHECK(df >= 1 && df <= 15);
    if (df >= 1 && df <= 15 && N >= 2000) {
        CHECK_MSG(stat < crit[df], "chi-square %.2f over %d dof against the model's distribution",
                  stat, df);
        CHECK_MSG(stat_c > crit[df_c > 0 && df_c <= 15 ? df_c : 15],
                  "chi-square %.2f against the draft's: the test cannot tell them apart", stat_c);
    }
    CHECK_MSG(taken > 0 && taken < drafted, "%d of %d drafts taken: both verdicts exercised", taken,
              drafted);
    fprintf(stderr,
            "  rejection sampling: chi-square %.2f (%d dof) vs the model, %.2f vs the draft; "
            "%d of %d drafts taken\n",
            stat, df, stat_c, taken, drafted);
    free(rows);
    inf_engine_close(plain);
    inf_engine_close(spec);
    inf_engine_close(dr);
}

/* max_tokens, the context's end, a stop string inside a verified step, and
 * the cache left behind. */
static void test_limits(const char *model, const char *draft, inf_kv_kind kv) {
    inf_engine *plain = open_engine(model, INF_SPEC_NONE, NULL, 0, 0, 1, kv, 64);
    inf_engine *spec = open_engine(model, INF_SPEC_DRAFT, draft, 6, 0, 1, kv, 64);
    CHECK(plain && spec);
    if (!plain || !spec) return;
    int32_t p[30];
    int n = make_prompt(7, p);
    for (int max = 1; max <= 9; max += 4) {
        out a, b;
        gen(plain, p, n, greedy(max), &a);
        gen(spec, p, n, greedy(max), &b);
        CHECK(same(&a, &b) && b.n == max);
    }
    /* the context ends (64 positions): "length" at the same token */
    out a, b;
    gen(plain, p, n, greedy(-1), &a);
    gen(spec, p, n, greedy(-1), &b);
    CHECK_MSG(same(&a, &b) && a.n == 64 - n + 1 && b.finish == INF_FINISH_LENGTH,
              "%s %s: %d and %d tokens, prompt %d, finish %d", model, inf_kv_kind_name(kv), a.n,
              b.n, n, b.finish);
    /* a stop string from the middle of the plain text */
    size_t len = strlen(a.text);
    if (len > 20) {
        char stop[8];
        memcpy(stop, a.text + len / 2, 4);
        stop[4] = 0;
        inf_gen_params g = greedy(-1);
        g.stop[0] = stop;
        g.n_stop = 1;
        out sa, sb;
        gen(plain, p, n, g, &sa);
        gen(spec, p, n, g, &sb);
        CHECK(same(&sa, &sb) && !strcmp(sa.text, sb.text) && sb.finish == INF_FINISH_STOP);
        /* the next request extends the stopped one's sequence: what the cache
           kept (reused by the speculating engine) gives plain decoding's bits */
        int32_t q[64];
        memcpy(q, p, (size_t)n * sizeof *q);
        int m = n;
        for (int i = 0; i < sb.n && m < 40; i++)
            q[m++] = sb.ids[i];
        q[m++] = 77;
        out ca, cb;
        gen(plain, q, m, greedy(8), &ca);
        gen(spec, q, m, greedy(8), &cb);
        CHECK_MSG(same(&ca, &cb) && ca.n == 8, "%s %s: the next request differs", model,
                  inf_kv_kind_name(kv));
    }
    inf_engine_close(plain);
    inf_engine_close(spec);
}

static void test_refusals(void) {
    inf_engine *e = NULL;
    inf_err err;
    inf_engine_opts o = {
        .model_path = DENSE, .n_seq = 1, .n_ctx = 64, .draft_path = "models/no-such-draft.gguf"};
    CHECK(inf_engine_open(&e, &o, &err) == -1 && strstr(err.msg, "no-such-draft"));
    o = (inf_engine_opts){
        .model_path = DENSE, .n_seq = 1, .n_ctx = 64, .spec_kind = INF_SPEC_DRAFT};
    CHECK(inf_engine_open(&e, &o, &err) == -1 && strstr(err.msg, "-md"));
    o = (inf_engine_opts){.model_path = DENSE,
                          .n_seq = 1,
                          .n_ctx = 64,
                          .spec_kind = INF_SPEC_NGRAM,
                          .spec = {.n_max = 65}};
    CHECK(inf_engine_open(&e, &o, &err) == -1 && strstr(err.msg, "--draft-max"));
    /* a request's knobs are checked at submit */
    e = open_engine(DENSE, INF_SPEC_NGRAM, NULL, 4, 0, 1, INF_KV_BASIC, 64);
    CHECK(e != NULL);
    if (!e) return;
    inf_gen_params g = greedy(4);
    g.spec = (inf_spec_params){.n_max = 2, .n_min = 3};
    int32_t *p = malloc(3 * sizeof *p);
    p[0] = 1, p[1] = 2, p[2] = 3;
    CHECK(inf_engine_submit(e, p, 3, &g, &err) == NULL && strstr(err.msg, "--draft-min"));
    inf_engine_close(e);
}

int main(void) {
    fprintf(stderr, "greedy, against plain decoding:\n");
    test_greedy(DENSE, INF_SPEC_NGRAM, NULL, 8, INF_KV_BASIC, false);
    test_greedy(DENSE, INF_SPEC_DRAFT, "models/tiny-q8_0.gguf", 5, INF_KV_PAGED, false);
    test_greedy(DENSE, INF_SPEC_DRAFT, "models/tiny-q4_0.gguf", 3, INF_KV_BASIC, true);
    test_greedy(MOE, INF_SPEC_NGRAM, NULL, 6, INF_KV_PAGED, false);
    test_greedy(MOE, INF_SPEC_DRAFT, "models/tiny-moe-q8_0.gguf", 4, INF_KV_BASIC, true);
    /* the hybrids, drafted by hybrids: refused drafts' rows leave the
       DeltaNet states, the target's and the draft's */
    test_greedy(HYBRID, INF_SPEC_DRAFT, "models/tiny-qwen35-q4_k_m.gguf", 4, INF_KV_BASIC, true);
    test_greedy(HYBRID, INF_SPEC_DRAFT, "models/tiny-qwen35-q8_0.gguf", 16, INF_KV_PAGED, true);
    test_greedy(HYBRID_MOE, INF_SPEC_DRAFT, "models/tiny-qwen35-moe-q8_0.gguf", 6, INF_KV_PAGED,
                true);
    test_ngram_grammar(HYBRID, INF_KV_BASIC);
    test_ngram_grammar(HYBRID_MOE, INF_KV_PAGED);
    test_seeded();
    test_rejection_sampling();
    test_limits(DENSE, "models/tiny-q8_0.gguf", INF_KV_BASIC);
    test_limits(DENSE, "models/tiny-q8_0.gguf", INF_KV_PAGED);
    test_limits(HYBRID, "models/tiny-qwen35-q8_0.gguf", INF_KV_BASIC);
    test_limits(HYBRID, "models/tiny-qwen35-q8_0.gguf", INF_KV_PAGED);
    test_refusals();
    printf("%d passed, %d failed\n", th_passed, th_failed);
    return th_failed != 0;
}
