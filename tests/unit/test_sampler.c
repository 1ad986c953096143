/* The sampler: greedy, each filter's cut, temperature's distribution, the
 * penalties and their window, seeds, and the flag checks. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "runtime/sampler.h"

static inf_sampler *make(inf_sampler_params p, int n_vocab) {
    inf_sampler *s;
    inf_err err;
    if (inf_sampler_create(&s, &p, n_vocab, 128, &err)) {
        fprintf(stderr, "sampler: %s\n", err.msg);
        abort();
    }
    return s;
}

/* Base params with every filter off. */
static inf_sampler_params plain(float temp) {
    inf_sampler_params p = inf_sampler_defaults();
    p.temp = temp, p.top_k = 0, p.top_p = 1, p.min_p = 0, p.seed = 7;
    return p;
}

static void test_defaults_and_checks(void) {
    inf_sampler_params p = inf_sampler_defaults();
    CHECK(p.temp == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f);
    CHECK(p.repeat_penalty == 1.0f && p.repeat_last_n == 64 && p.seed == INF_SEED_RANDOM);
    inf_err err;
    CHECK(inf_sampler_check(&p, &err) == 0);
    p.top_p = 7;
    CHECK(inf_sampler_check(&p, &err) == -1 && strstr(err.msg, "--top-p"));
    p = inf_sampler_defaults(), p.min_p = -0.1f;
    CHECK(inf_sampler_check(&p, &err) == -1 && strstr(err.msg, "--min-p"));
    p = inf_sampler_defaults(), p.top_k = -1;
    CHECK(inf_sampler_check(&p, &err) == -1 && strstr(err.msg, "--top-k"));
    p = inf_sampler_defaults(), p.repeat_penalty = 0;
    CHECK(inf_sampler_check(&p, &err) == -1 && strstr(err.msg, "--repeat-penalty"));
    p = inf_sampler_defaults(), p.repeat_last_n = -2;
    CHECK(inf_sampler_check(&p, &err) == -1 && strstr(err.msg, "--repeat-last-n"));
    p = inf_sampler_defaults(), p.temp = NAN;
    CHECK(inf_sampler_check(&p, &err) == -1);
    inf_sampler *s;
    p = inf_sampler_defaults(), p.top_p = 2;
    CHECK(inf_sampler_create(&s, &p, 10, 10, &err) == -1 && s == NULL);
    /* a random seed is drawn and reported */
    p = inf_sampler_defaults();
    s = make(p, 10);
    CHECK(inf_sampler_seed(s) != INF_SEED_RANDOM);
    inf_sampler_free(s);
    inf_sampler_free(NULL);
}

static void test_greedy(void) {
    float logits[6] = {0.1f, 2.0f, -1.0f, 3.5f, 3.4f, 0};
    for (float temp = 0; temp >= -1; temp -= 1) {
        inf_sampler *s = make(plain(temp), 6);
        CHECK_INT(inf_sampler_sample(s, logits), 3);
        inf_sampler_free(s);
    }
    inf_sampler_params p = plain(5.0f);
    p.top_k = 1; /* top-k 1 is greedy at any temperature */
    inf_sampler *s = make(p, 6);
    for (int i = 0; i < 50; i++)
        CHECK_INT(inf_sampler_sample(s, logits), 3);
    inf_sampler_free(s);
}

/* Draws n tokens and counts them into hist[n_vocab]. */
static void draw(inf_sampler *s, const float *logits, int n, int *hist) {
    for (int i = 0; i < n; i++)
        hist[inf_sampler_sample(s, logits)]++;
}

static void test_filters(void) {
    /* probabilities 0.5, 0.3, 0.15, 0.05 */
    float logits[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    int hist[4] = {0};
    inf_sampler_params p = plain(1.0f);
    p.top_p = 0.7f; /* 0.5 < 0.7 <= 0.8: keeps two */
    inf_sampler *s = make(p, 4);
    draw(s, logits, 4000, hist);
    CHECK(hist[0] > 0 && hist[1] > 0 && hist[2] == 0 && hist[3] == 0);
    /* renormalized over the two kept: 0.625 / 0.375 */
    CHECK_MSG(fabs(hist[0] / 4000.0 - 0.625) < 0.03, "top-p share %g", hist[0] / 4000.0);
    inf_sampler_free(s);

    memset(hist, 0, sizeof hist);
    p = plain(1.0f);
    p.min_p = 0.2f; /* floor 0.1: keeps 0.5, 0.3, 0.15 */
    s = make(p, 4);
    draw(s, logits, 4000, hist);
    CHECK(hist[0] > 0 && hist[1] > 0 && hist[2] > 0 && hist[3] == 0);
    inf_sampler_free(s);

    memset(hist, 0, sizeof hist);
    p = plain(1.0f);
    p.top_k = 3;
    s = make(p, 4);
    draw(s, logits, 4000, hist);
    CHECK(hist[0] > 0 && hist[1] > 0 && hist[2] > 0 && hist[3] == 0);
    inf_sampler_free(s);

    /* no filter at temperature 0.5: frequencies follow softmax(logit / 0.5) */
    memset(hist, 0, sizeof hist);
    s = make(plain(0.5f), 4);
    draw(s, logits, 20000, hist);
    double z = 0.25 + 0.09 + 0.0225 + 0.0025,
           want[4] = {0.25 / z, 0.09 / z, 0.0225 / z, 0.0025 / z};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(fabs(hist[i] / 20000.0 - want[i]) < 0.015, "token %d: %g, expected %g", i,
                  hist[i] / 20000.0, want[i]);
    inf_sampler_free(s);

    /* top-k over a big vocabulary keeps exactly the k best */
    enum { V = 5000, K = 40 };
    static float big[V];
    static int hb[V];
    for (int i = 0; i < V; i++)
        big[i] = (float)((i * 7919) % V) / V; /* a permutation */
    p = plain(1e6f);                          /* nearly uniform over the kept */
    p.top_k = K;
    s = make(p, V);
    draw(s, big, 20000, hb);
    int seen = 0, outside = 0;
    for (int i = 0; i < V; i++) {
        int rank = V - 1 - (i * 7919) % V; /* 0 = best */
        if (hb[i]) seen++;
        if (hb[i] && rank >= K) outside++;
    }
    CHECK_INT(seen, K);
    CHECK_INT(outside, 0);
    inf_sampler_free(s);
}

static void test_penalties(void) {
    float logits[4] = {2.0f, 1.5f, -1.0f, -1.2f};
    inf_sampler_params p = plain(0);
    p.repeat_penalty = 2.0f; /* 2.0 -> 1.0: token 1 wins */
    inf_sampler *s = make(p, 4);
    CHECK_INT(inf_sampler_sample(s, logits), 0);
    inf_sampler_accept(s, 0);
    CHECK_INT(inf_sampler_sample(s, logits), 1);
    inf_sampler_free(s);

    /* a negative logit is multiplied: -1.0 -> -2.0 falls below -1.2 */
    float neg[2] = {-1.0f, -1.2f};
    s = make(p, 2);
    inf_sampler_accept(s, 0);
    CHECK_INT(inf_sampler_sample(s, neg), 1);
    inf_sampler_free(s);

    /* frequency: 2.0 - 3 * 0.2 = 1.4 < 1.5; presence: 2.0 - 0.4 = 1.6 > 1.5 */
    p = plain(0);
    p.frequency_penalty = 0.2f;
    s = make(p, 4);
    inf_sampler_accept(s, 0), inf_sampler_accept(s, 0), inf_sampler_accept(s, 0);
    CHECK_INT(inf_sampler_sample(s, logits), 1);
    inf_sampler_free(s);
    p = plain(0);
    p.presence_penalty = 0.4f;
    s = make(p, 4);
    inf_sampler_accept(s, 0), inf_sampler_accept(s, 0), inf_sampler_accept(s, 0);
    CHECK_INT(inf_sampler_sample(s, logits), 0);
    inf_sampler_free(s);

    /* the window: with repeat_last_n 2, token 0 leaves it after two more */
    p = plain(0);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 2;
    s = make(p, 4);
    inf_sampler_accept(s, 0);
    CHECK_INT(inf_sampler_sample(s, logits), 1);
    inf_sampler_accept(s, 2);
    CHECK_INT(inf_sampler_sample(s, logits), 1);
    inf_sampler_accept(s, 3);
    CHECK_INT(inf_sampler_sample(s, logits), 0);
    /* the same token twice in the window is penalized once, not twice */
    inf_sampler_accept(s, 0), inf_sampler_accept(s, 0);
    float close[4] = {2.0f, 0.9f, -5, -5}; /* 2.0/2 = 1.0 > 0.9; twice would be 0.5 */
    CHECK_INT(inf_sampler_sample(s, close), 0);
    inf_sampler_reset(s);
    CHECK_INT(inf_sampler_sample(s, logits), 0);
    inf_sampler_free(s);
    /* repeat_last_n 0 turns the penalties off */
    p.repeat_last_n = 0;
    s = make(p, 4);
    inf_sampler_accept(s, 0);
    CHECK_INT(inf_sampler_sample(s, logits), 0);
    inf_sampler_free(s);
}

static void test_seed(void) {
    enum { V = 1000 };
    static float logits[V];
    for (int i = 0; i < V; i++)
        logits[i] = sinf((float)i * 0.37f) * 3;
    inf_sampler_params p = inf_sampler_defaults();
    p.seed = 1234;
    p.top_k = 0, p.top_p = 1, p.min_p = 0, p.temp = 1.5f;
    inf_sampler *a = make(p, V), *b = make(p, V);
    p.seed = 1235;
    inf_sampler *c = make(p, V);
    int same = 1, differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t ta = inf_sampler_sample(a, logits), tb = inf_sampler_sample(b, logits);
        int32_t tc = inf_sampler_sample(c, logits);
        same &= ta == tb;
        differ += ta != tc;
        inf_sampler_accept(a, ta), inf_sampler_accept(b, tb), inf_sampler_accept(c, tc);
    }
    CHECK(same);
    CHECK_MSG(differ > 50, "seeds 1234 and 1235 agree on %d of 200 draws", 200 - differ);
    CHECK_INT(inf_sampler_seed(a), 1234);
    inf_sampler_free(a), inf_sampler_free(b), inf_sampler_free(c);
}

int main(void) {
    test_defaults_and_checks();
    test_greedy();
    test_filters();
    test_penalties();
    test_seed();
    return th_report();
}
