/* The scheduler against a fake engine whose logits are a hash of the whole
 * token history of a sequence. The fake checks the KV contract on every row
 * (a row at position p needs positions 0..p-1 present), so wrong positions,
 * a stale prefix or a mixed-up sequence fail loudly; and any result that
 * depends on batching, slot choice or prefix reuse would change the tokens.
 * Every generation is compared with a reference computed alone. */
#include <stdlib.h>
#include <time.h>

#include "harness.h"
#include "runtime/sched.h"
#include "server_fake.h"
#include "util/utf8.h"

/* The reference: greedy generation for one prompt alone. Returns the ids
 * (tokens[*n]) and whether it ended by EOG. */
static void reference(const int32_t *prompt, int n_prompt, int max_tokens, int n_ctx,
                      int32_t *tokens, int *n, bool *eog) {
    uint64_t h = 12345;
    for (int i = 0; i < n_prompt; i++)
        h = mix(i ? h : 12345, (uint64_t)prompt[i]);
    int pos = n_prompt;
    *n = 0;
    *eog = false;
    for (;;) {
        float lg[V];
        fake_logits(h, lg);
        int best = 0;
        for (int i = 1; i < V; i++)
            if (lg[i] > lg[best]) best = i;
        tokens[(*n)++] = best;
        if (best == EOG) {
            *eog = true;
            return;
        }
        if ((max_tokens >= 0 && *n >= max_tokens) || pos >= n_ctx) return;
        h = mix(h, (uint64_t)best);
        pos++;
    }
}

static char *text_of(const int32_t *ids, int n) {
    inf_buf b = {0};
    inf_buf_add(&b, "", 0);
    for (int i = 0; i < n; i++) {
        if (ids[i] == EOG) continue;
        char p[16];
        int len = fake_piece(NULL, ids[i], p, sizeof p);
        inf_buf_add(&b, p, (size_t)len);
    }
    /* The scheduler releases whole valid UTF-8: a stray byte is U+FFFD. */
    char *clean = inf_utf8_sanitize(b.data, b.len, NULL);
    inf_buf_free(&b);
    return clean;
}

static inf_task *make_task(const int32_t *prompt, int n, int max_tokens, const char *stop) {
    inf_gen_params r = inf_gen_defaults();
    r.sampling.temp = 0;
    r.max_tokens = max_tokens;
    if (stop) r.stop[r.n_stop++] = stop;
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    memcpy(copy, prompt, (size_t)n * sizeof *copy);
    return inf_task_new(copy, n, &r);
}

static bool wait_done(inf_task *t, int seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    pthread_mutex_lock(&t->mu);
    while (!t->done)
        if (pthread_cond_timedwait(&t->cv, &t->mu, &ts)) break;
    bool done = t->done;
    pthread_mutex_unlock(&t->mu);
    return done;
}

static void make_prompt(int32_t *p, int n, int salt) {
    for (int i = 0; i < n; i++)
        p[i] = (int32_t)(mix((uint64_t)salt, (uint64_t)i) % 27);
}

/* Checks a finished task against the reference run. */
static void check_task(inf_task *t, const int32_t *prompt, int n_prompt, int max_tokens, int n_ctx,
                       const char *what) {
    int32_t ref[MAXCTX];
    int n;
    bool eog;
    reference(prompt, n_prompt, max_tokens, n_ctx, ref, &n, &eog);
    char *want = text_of(ref, n);
    CHECK_MSG(t->done && t->status == INF_TASK_OK, "%s: done %d status %d %s", what, t->done,
              t->status, t->err);
    CHECK_MSG(t->text.data && !strcmp(t->text.data, want), "%s: text \"%s\", expected \"%s\"", what,
              t->text.data ? t->text.data : "(null)", want);
    CHECK_MSG(t->n_gen == n, "%s: n_gen %d, expected %d", what, t->n_gen, n);
    CHECK_INT(t->stop_index, -1);
    CHECK_MSG(t->finish == (eog ? INF_FINISH_STOP : INF_FINISH_LENGTH), "%s: finish %d", what,
              t->finish);
    free(want);
}

static void test_single_and_batched(void) {
    fake f;
    inf_exec e = make_engine(&f, 4, 512, 64);
    /* each step takes a while, so the first request cannot finish before the
       fourth is submitted on a loaded machine (CI saw 3 decode rows once) */
    f.delay_us = 500;
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 32, &err), 0);

    /* Eight requests, four slots: four run batched, four wait. */
    int32_t prompts[8][40];
    inf_task *t[8];
    for (int i = 0; i < 8; i++) {
        make_prompt(prompts[i], 10 + 3 * i, i + 1);
        t[i] = make_task(prompts[i], 10 + 3 * i, 20 + i, NULL);
        CHECK_INT(inf_sched_submit(s, t[i], NULL), 0);
    }
    for (int i = 0; i < 8; i++) {
        CHECK(wait_done(t[i], 10));
        char what[32];
        snprintf(what, sizeof what, "request %d", i);
        check_task(t[i], prompts[i], 10 + 3 * i, 20 + i, 512, what);
        inf_task_release(t[i]);
    }
    inf_sched_metrics m;
    inf_sched_metrics_get(s, &m);
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);
    CHECK_MSG(f.max_decode_rows == 4, "max decode rows in one forward: %d, expected 4",
              f.max_decode_rows);
    CHECK(f.max_rows_seen <= 64);
    CHECK_INT(m.requests_finished_total, 8);
    CHECK_INT(m.requests_processing, 0);
    CHECK(m.tokens_predicted_total > 0);
    CHECK(m.n_decode_total == (uint64_t)f.calls);
}

static void test_prefix_reuse(void) {
    fake f;
    inf_exec e = make_engine(&f, 2, 512, 64);
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 64, &err), 0);

    int32_t turn1[300];
    make_prompt(turn1, 200, 77);
    inf_task *a = make_task(turn1, 200, 8, NULL);
    inf_sched_submit(s, a, NULL);
    CHECK(wait_done(a, 10));
    check_task(a, turn1, 200, 8, 512, "turn 1");
    CHECK_INT(a->timings.cache_n, 0);
    CHECK_INT(a->timings.prompt_n, 200);

    /* An unrelated request must take the other slot, keeping turn 1's cache. */
    int32_t other[50];
    make_prompt(other, 50, 99);
    inf_task *o = make_task(other, 50, 4, NULL);
    inf_sched_submit(s, o, NULL);
    CHECK(wait_done(o, 10));
    check_task(o, other, 50, 4, 512, "other");

    /* Turn 2: the history (prompt + reply) plus 30 new tokens. The reply's
     * last token was sampled but never fed back, so the cache holds 200 + 7. */
    int32_t ref[64];
    int n;
    bool eog;
    reference(turn1, 200, 8, 512, ref, &n, &eog);
    int len = 200;
    for (int i = 0; i < n; i++)
        turn1[len++] = ref[i];
    for (int i = 0; i < 30; i++)
        turn1[len++] = (int32_t)(i % 27);
    int before = f.prefill_rows;
    inf_task *b = make_task(turn1, len, 6, NULL);
    inf_sched_submit(s, b, NULL);
    CHECK(wait_done(b, 10));
    check_task(b, turn1, len, 6, 512, "turn 2");
    CHECK_MSG(b->timings.cache_n == 200 + n - 1, "cache_n %d, expected %d", b->timings.cache_n,
              200 + n - 1);
    CHECK_INT(b->timings.prompt_n, len - (200 + n - 1));
    CHECK_MSG(f.prefill_rows - before <= len - (200 + n - 1), "prefilled %d rows for turn 2",
              f.prefill_rows - before);

    /* The same prompt again: all cached but the last two rows, which run as
     * a prefill span (inf_exec_max_reuse). */
    inf_task *c = make_task(turn1, len, 6, NULL);
    inf_sched_submit(s, c, NULL);
    CHECK(wait_done(c, 10));
    check_task(c, turn1, len, 6, 512, "repeat");
    CHECK_INT(c->timings.cache_n, len - 2);
    inf_sched_metrics m;
    inf_sched_metrics_get(s, &m);
    CHECK(m.cache_tokens_reused >= (uint64_t)(200 + len - 2));
    inf_task_release(a);
    inf_task_release(o);
    inf_task_release(b);
    inf_task_release(c);
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);
}

static void test_chunked_prefill_interleaves(void) {
    fake f;
    inf_exec e = make_engine(&f, 2, 1024, 32);
    f.delay_us = 1000;
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 16, &err), 0);
    int32_t p1[8], p2[600];
    make_prompt(p1, 8, 5);
    make_prompt(p2, 600, 6);
    inf_task *a = make_task(p1, 8, 200, NULL);
    inf_sched_submit(s, a, NULL);
    /* Let a start generating, then a long prompt arrives. */
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&a->mu);
        int g = a->n_gen;
        pthread_mutex_unlock(&a->mu);
        if (g > 0) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    inf_task *b = make_task(p2, 600, 5, NULL);
    inf_sched_submit(s, b, NULL);
    CHECK(wait_done(a, 10));
    CHECK(wait_done(b, 10));
    check_task(a, p1, 8, 200, 1024, "short");
    check_task(b, p2, 600, 5, 1024, "long prompt");
    CHECK_MSG(f.max_rows_seen <= 16 + 2, "a forward carried %d rows (chunk 16)", f.max_rows_seen);
    /* Only meaningful when a was still generating while b prefilled. */
    if (a->n_gen >= 60) CHECK_MSG(f.mixed_calls > 0, "no step mixed decode and prefill rows");
    inf_task_release(a);
    inf_task_release(b);
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);
}

static void test_cancel_and_context_end(void) {
    fake f;
    inf_exec e = make_engine(&f, 1, 64, 16);
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 16, &err), 0);

    /* Context end: 60 prompt tokens in a 64-position context; finish "length"
     * unless the model ends first. */
    int32_t p[60];
    make_prompt(p, 60, 1234);
    inf_task *t = make_task(p, 60, -1, NULL);
    inf_sched_submit(s, t, NULL);
    CHECK(wait_done(t, 10));
    check_task(t, p, 60, -1, 64, "context end");
    CHECK(t->n_gen <= 64 - 60 + 1);
    inf_task_release(t);

    /* A cancelled task frees the single slot for the next one (slow steps so
     * that q cannot finish before the cancel lands). */
    f.delay_us = 2000;
    inf_task *q = make_task(p, 8, -1, NULL);
    inf_task *w = make_task(p, 10, 3, NULL);
    inf_sched_submit(s, q, NULL);
    inf_sched_submit(s, w, NULL); /* waits behind q */
    inf_sched_cancel(s, q);
    CHECK(wait_done(q, 10));
    CHECK(wait_done(w, 10));
    check_task(w, p, 10, 3, 64, "after cancel");
    inf_sched_metrics m;
    inf_sched_metrics_get(s, &m);
    CHECK_INT(m.requests_cancelled_total, 1);
    inf_task_release(q);
    inf_task_release(w);

    /* Cancelled while still queued: dropped without running. */
    inf_task *x = make_task(p, 8, 40, NULL);
    inf_task *y = make_task(p, 9, 3, NULL);
    inf_sched_submit(s, x, NULL);
    inf_sched_submit(s, y, NULL);
    inf_sched_cancel(s, y);
    CHECK(wait_done(x, 10));
    inf_task_release(x);
    inf_task_release(y);

    /* Shutdown ends a running task with a 503. */
    inf_task *z = make_task(p, 8, -1, NULL);
    inf_sched_submit(s, z, NULL);
    inf_sched_free(s);
    CHECK(z->done);
    CHECK(z->status == INF_TASK_UNAVAILABLE || z->finish != INF_FINISH_NONE);
    inf_task_release(z);
    CHECK_INT(f.contract_errors, 0);
}

/* Stop strings across token boundaries, and whole UTF-8, through the scheduler. */
static void test_stop_and_utf8(void) {
    fake f;
    inf_exec e = make_engine(&f, 2, 512, 16);
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 16, &err), 0);
    /* Find a prompt whose reference output has a letter followed by another
     * token, and stop on the last char of one piece plus the next piece. */
    int found = 0;
    for (int salt = 1; salt < 200 && found < 3; salt++) {
        int32_t p[12], ref[64];
        make_prompt(p, 12, salt * 31);
        int n;
        bool eog;
        reference(p, 12, 30, 512, ref, &n, &eog);
        char *full = text_of(ref, n);
        int k = -1;
        for (int i = 2; i + 1 < n; i++)
            if (ref[i] < 26 && ref[i + 1] < 27) {
                k = i;
                break;
            }
        if (k < 0) {
            free(full);
            continue;
        }
        char *head = text_of(ref, k); /* text before token k */
        char stop[3] = {(char)('a' + ref[k]), ref[k + 1] == 26 ? ' ' : (char)('a' + ref[k + 1]), 0};
        /* The expected text ends before the first occurrence of stop. */
        char *at = strstr(full, stop);
        size_t cut = at ? (size_t)(at - full) : strlen(full);
        inf_task *t = make_task(p, 12, 30, stop);
        inf_sched_submit(s, t, NULL);
        CHECK(wait_done(t, 10));
        CHECK_MSG(t->text.len == cut && !memcmp(t->text.data ? t->text.data : "", full, cut),
                  "stop \"%s\" in \"%s\": got \"%s\"", stop, full, t->text.data);
        CHECK_INT(t->finish, INF_FINISH_STOP);
        CHECK_INT(t->stop_index, 0);
        inf_task_release(t);

        /* Which stop string ended it, when several are given; an empty one
         * does not count. */
        inf_gen_params g = inf_gen_defaults();
        g.sampling.temp = 0;
        g.max_tokens = 30;
        g.stop[0] = "\x01never";
        g.stop[1] = "";
        g.stop[2] = stop;
        g.n_stop = 3;
        int32_t *copy = malloc(sizeof p);
        memcpy(copy, p, sizeof p);
        t = inf_task_new(copy, 12, &g);
        inf_sched_submit(s, t, NULL);
        CHECK(wait_done(t, 10));
        CHECK_INT(t->text.len, cut);
        CHECK_INT(t->stop_index, 1);
        CHECK_STR(t->p.stop[t->stop_index], stop);
        inf_task_release(t);

        /* The same string as end_after: the text ends right after it. */
        g.n_stop = 0;
        g.end_after = stop;
        copy = malloc(sizeof p);
        memcpy(copy, p, sizeof p);
        t = inf_task_new(copy, 12, &g);
        inf_sched_submit(s, t, NULL);
        CHECK(wait_done(t, 10));
        CHECK_MSG(t->text.len == cut + 2 &&
                      !memcmp(t->text.data ? t->text.data : "", full, cut + 2),
                  "end_after \"%s\" in \"%s\": got \"%s\"", stop, full, t->text.data);
        CHECK_INT(t->finish, INF_FINISH_STOP);
        CHECK_INT(t->stop_index, -1);
        CHECK(t->stop.after_matched);
        inf_task_release(t);
        free(head);
        free(full);
        found++;
    }
    CHECK_MSG(found == 3, "found %d stop cases", found);

    /* Whole UTF-8: a prompt is irrelevant here; feed the fake's split "é"
     * through the detokenizing path by checking every finished text. */
    for (int salt = 0; salt < 40; salt++) {
        int32_t p[6];
        make_prompt(p, 6, 5000 + salt);
        inf_task *t = make_task(p, 6, 40, NULL);
        inf_sched_submit(s, t, NULL);
        CHECK(wait_done(t, 10));
        size_t len = t->text.len;
        CHECK(inf_utf8_valid_prefix(t->text.data ? t->text.data : "", len) == len);
        inf_task_release(t);
    }
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);
}

static void test_logprobs(void) {
    inf_logprob lp;
    float lg[5] = {1, 3, 2, 3, -1};
    inf_logprobs_from_logits(&lp, lg, 5, 2, 3);
    double lse = log(exp(1) + exp(3) + exp(2) + exp(3) + exp(-1));
    CHECK(fabs(lp.logprob - (2 - lse)) < 1e-5);
    CHECK_INT(lp.n_top, 3);
    CHECK_INT(lp.top_id[0], 1); /* tie: lower id first */
    CHECK_INT(lp.top_id[1], 3);
    CHECK_INT(lp.top_id[2], 2);
    CHECK(fabs(lp.top_logprob[0] - (3 - lse)) < 1e-5);
    inf_logprobs_from_logits(&lp, lg, 5, 0, 0);
    CHECK_INT(lp.n_top, 0);

    /* Through the scheduler: each token's logprob is the fake's log-softmax. */
    fake f;
    inf_exec e = make_engine(&f, 1, 128, 16);
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 16, &err), 0);
    int32_t p[5] = {1, 2, 3, 4, 5};
    inf_gen_params r = inf_gen_defaults();
    r.sampling.temp = 0;
    r.max_tokens = 5;
    r.logprobs = true;
    r.top_logprobs = 2;
    int32_t *copy = malloc(sizeof p);
    memcpy(copy, p, sizeof p);
    inf_task *t = inf_task_new(copy, 5, &r);
    inf_sched_submit(s, t, NULL);
    CHECK(wait_done(t, 10));
    int32_t ref[16];
    int n;
    bool eog;
    reference(p, 5, 5, 128, ref, &n, &eog);
    CHECK_INT(t->n_lp, eog ? n - 1 : n);
    uint64_t h = 12345;
    for (int i = 0; i < 5; i++)
        h = mix(i ? h : 12345, (uint64_t)p[i]);
    for (int i = 0; i < t->n_lp; i++) {
        float lg2[V];
        fake_logits(h, lg2);
        inf_logprob want;
        inf_logprobs_from_logits(&want, lg2, V, ref[i], 2);
        CHECK_INT(t->lp[i].id, ref[i]);
        CHECK(fabsf(t->lp[i].logprob - want.logprob) < 1e-6f);
        CHECK_INT(t->lp[i].top_id[0], ref[i]); /* greedy picks the best */
        h = mix(h, (uint64_t)ref[i]);
    }
    inf_task_release(t);
    inf_sched_free(s);
}

/* The prefix-cache hooks: reuse across slots, publish after prefill,
 * donation at the end, and a pool that runs out failing with a 503. */
static void test_prefix_hooks(void) {
    fake f;
    inf_exec e = make_paged(&f, 2, 512, 64);
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 32, &err), 0);
    int32_t p[300];
    make_prompt(p, 80, 4242);
    inf_task *a = make_task(p, 80, 5, NULL);
    inf_sched_submit(s, a, NULL);
    CHECK(wait_done(a, 10));
    check_task(a, p, 80, 5, 512, "donor");
    CHECK_INT(f.publishes, 1);
    CHECK_INT(f.ends, 1);
    /* Keep slot 0 busy so the next request runs on the other slot. */
    int32_t q[10];
    make_prompt(q, 10, 77);
    f.delay_us = 1000;
    inf_task *busy = make_task(q, 10, 60, NULL);
    inf_sched_submit(s, busy, NULL);
    for (int i = 0; i < 20; i++)
        p[80 + i] = (int32_t)(i % 26);
    inf_task *b = make_task(p, 100, 4, NULL);
    inf_sched_submit(s, b, NULL);
    CHECK(wait_done(b, 10));
    CHECK(wait_done(busy, 10));
    check_task(b, p, 100, 4, 512, "reuser");
    CHECK_MSG(b->timings.cache_n >= 80, "cache_n %d", b->timings.cache_n);
    CHECK_INT(b->timings.prompt_n, 100 - b->timings.cache_n);
    CHECK(f.reserves > 0);
    /* The pool runs out: a clear 503, never a forward past the reservation. */
    f.pool_left = 10;
    make_prompt(p, 40, 999);
    inf_task *c = make_task(p, 40, 4, NULL);
    inf_sched_submit(s, c, NULL);
    CHECK(wait_done(c, 10));
    CHECK_INT(c->status, INF_TASK_UNAVAILABLE);
    CHECK(strstr(c->err, "exhausted") != NULL);
    inf_task_release(a);
    inf_task_release(b);
    inf_task_release(c);
    inf_task_release(busy);
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);
}

/* Issue 20 row 11: non-finite logits end the task with an error (a 500 in the
 * server), never a stream of whatever argmax makes of NaN. */
static void test_nan_logits(void) {
    fake f;
    inf_exec e = make_engine(&f, 2, 64, 16);
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 16, &err), 0);
    int32_t p[8];
    make_prompt(p, 8, 77);
    f.nan_from = 10; /* logits at positions 7, 8, 9 give three tokens, then the model breaks */
    for (int greedy = 0; greedy < 2; greedy++) {
        inf_task *t = make_task(p, 8, 40, NULL);
        if (!greedy) t->p.sampling.temp = 0.8f, t->p.sampling.seed = 1;
        t->p.ignore_eos = true;
        inf_sched_submit(s, t, NULL);
        CHECK(wait_done(t, 10));
        CHECK_MSG(t->status == INF_TASK_INTERNAL && strstr(t->err, "non-finite logits"),
                  "status %d err \"%s\"", t->status, t->err);
        CHECK_INT(t->n_gen, 3);
        inf_task_release(t);
        f.len[0] = f.len[1] = 0;
    }
    /* the scheduler goes on serving healthy requests */
    f.nan_from = 0;
    inf_task *t = make_task(p, 8, 3, NULL);
    inf_sched_submit(s, t, NULL);
    CHECK(wait_done(t, 10));
    CHECK_INT(t->status, INF_TASK_OK);
    CHECK_INT(t->n_gen, 3);
    inf_task_release(t);
    inf_sched_free(s);
}

/* logit_bias: added to the logits before sampling; ids checked at submit. */
static void test_logit_bias(void) {
    fake f;
    inf_exec e = make_engine(&f, 1, 128, 16);
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 16, &err), 0);
    int32_t p[5] = {3, 1, 4, 1, 5}, ref[16];
    int n;
    bool eog;
    reference(p, 5, 8, 128, ref, &n, &eog);
    /* +100 on 'f' (5): the fake's logits lie in [0, 8), so greedy takes it
     * every time; -100 on the reference's first token: another one. */
    inf_logit_bias up[1] = {{5, 100}}, down[1] = {{ref[0], -100}};
    const inf_logit_bias *which[2] = {up, down};
    for (int k = 0; k < 2; k++) {
        inf_gen_params g = inf_gen_defaults();
        g.sampling.temp = 0;
        g.max_tokens = 8;
        g.logit_bias = which[k];
        g.n_logit_bias = 1;
        g.logprobs = true;
        int32_t *copy = malloc(sizeof p);
        memcpy(copy, p, sizeof p);
        inf_task *t = inf_task_new(copy, 5, &g);
        CHECK_INT(inf_sched_submit(s, t, &err), 0);
        CHECK(wait_done(t, 10));
        if (k == 0) {
            CHECK_STR(t->text.data, "ffffffff");
            CHECK_INT(t->n_gen, 8);
        } else {
            CHECK(t->n_lp > 0 && t->lp[0].id != ref[0]);
        }
        inf_task_release(t);
    }
    /* An id the vocabulary does not have is refused at submit. */
    inf_logit_bias far[1] = {{V, 1}};
    inf_gen_params g = inf_gen_defaults();
    g.logit_bias = far;
    g.n_logit_bias = 1;
    int32_t *copy = malloc(sizeof p);
    memcpy(copy, p, sizeof p);
    inf_task *t = inf_task_new(copy, 5, &g);
    CHECK_INT(inf_sched_submit(s, t, &err), -1);
    CHECK(strstr(err.msg, "logit_bias") != NULL);
    inf_task_release(t);
    inf_sched_free(s);
}

static inf_task *make_embed(const int32_t *prompt, int n) {
    inf_gen_params r = inf_gen_defaults();
    r.embed = true;
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    memcpy(copy, prompt, (size_t)n * sizeof *copy);
    return inf_task_new(copy, n, &r);
}

/* An embedding task's result: the hidden state of its whole prompt's last row. */
static void check_embed(inf_task *t, const int32_t *prompt, int n, const char *what) {
    uint64_t h = 12345;
    for (int i = 0; i < n; i++)
        h = mix(i ? h : 12345, (uint64_t)prompt[i]);
    float want[FAKE_EMBD];
    fake_hidden(h, want);
    CHECK_MSG(t->done && t->status == INF_TASK_OK && t->finish == INF_FINISH_STOP,
              "%s: done %d status %d finish %d %s", what, t->done, t->status, t->finish, t->err);
    CHECK_MSG(t->n_gen == 0 && t->text.len == 0, "%s: generated %d tokens, %zu bytes", what,
              t->n_gen, t->text.len);
    CHECK_MSG(t->embd && t->n_embd == FAKE_EMBD && !memcmp(t->embd, want, sizeof want),
              "%s: embedding differs (first %g, expected %g)", what, t->embd ? t->embd[0] : 0.0,
              want[0]);
}

/* Embedding tasks go through the scheduler like every request, beside
 * generations, chunked, batched across slots, reusing cached prefixes. */
static void test_embed(void) {
    fake f;
    inf_exec e = make_engine(&f, 3, 64, 16);
    e.n_embd = FAKE_EMBD;
    inf_sched *s;
    inf_err err;
    CHECK_INT(inf_sched_create(&s, &e, 8, &err), 0);
    static const int lens[6] = {1, 5, 20, 40, 12, 9};
    int32_t prompts[6][64];
    inf_task *t[6];
    for (int i = 0; i < 6; i++) {
        make_prompt(prompts[i], lens[i], 100 + i);
        t[i] = i < 4 ? make_embed(prompts[i], lens[i]) : make_task(prompts[i], lens[i], 6, NULL);
        CHECK_INT(inf_sched_submit(s, t[i], NULL), 0);
    }
    for (int i = 0; i < 6; i++) {
        CHECK(wait_done(t[i], 10));
        char what[32];
        snprintf(what, sizeof what, "%s %d", i < 4 ? "embed" : "generate", i);
        if (i < 4)
            check_embed(t[i], prompts[i], lens[i], what);
        else
            check_task(t[i], prompts[i], lens[i], 6, 64, what);
        inf_task_release(t[i]);
    }
    /* again, after its prefix is cached; and a prompt filling the whole context */
    inf_task *a = make_embed(prompts[3], lens[3]);
    CHECK_INT(inf_sched_submit(s, a, NULL), 0);
    CHECK(wait_done(a, 10));
    check_embed(a, prompts[3], lens[3], "embed again");
    inf_task_release(a);
    int32_t full[65];
    make_prompt(full, 65, 7);
    a = make_embed(full, 64);
    CHECK_INT(inf_sched_submit(s, a, NULL), 0);
    CHECK(wait_done(a, 10));
    check_embed(a, full, 64, "embed a whole context");
    inf_task_release(a);
    a = make_embed(full, 65);
    CHECK_INT(inf_sched_submit(s, a, &err), -1);
    CHECK_MSG(strstr(err.msg, "65 tokens"), "too long: %s", err.msg);
    inf_task_release(a);
    inf_sched_free(s);
    CHECK_INT(f.contract_errors, 0);

    /* a model with no head embeds only; one with no width cannot embed */
    e = make_engine(&f, 1, 64, 16);
    e.n_embd = FAKE_EMBD;
    e.no_head = true;
    CHECK_INT(inf_sched_create(&s, &e, 8, &err), 0);
    a = make_task(prompts[0], 5, 3, NULL);
    CHECK_INT(inf_sched_submit(s, a, &err), -1);
    CHECK_MSG(strstr(err.msg, "no output head"), "generate without a head: %s", err.msg);
    inf_task_release(a);
    a = make_embed(prompts[1], lens[1]);
    CHECK_INT(inf_sched_submit(s, a, NULL), 0);
    CHECK(wait_done(a, 10));
    check_embed(a, prompts[1], lens[1], "embed without a head");
    inf_task_release(a);
    inf_sched_free(s);
    e = make_engine(&f, 1, 64, 16);
    CHECK_INT(inf_sched_create(&s, &e, 8, &err), 0);
    a = make_embed(prompts[1], lens[1]);
    CHECK_INT(inf_sched_submit(s, a, &err), -1);
    CHECK_MSG(strstr(err.msg, "cannot embed"), "embed without a width: %s", err.msg);
    inf_task_release(a);
    inf_sched_free(s);
}

int main(void) {
    test_logit_bias();
    test_embed();
    test_nan_logits();
    test_prefix_hooks();
    test_logprobs();
    test_single_and_batched();
    test_prefix_reuse();
    test_chunked_prefill_interleaves();
    test_cancel_and_context_end();
    test_stop_and_utf8();
    return th_report();
}
