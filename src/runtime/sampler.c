#include "runtime/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/timer.h"

typedef struct cand {
    int32_t id;
    float logit;
} cand;

struct inf_sampler {
    inf_sampler_params p;
    int n_vocab;
    int window;       /* penalty window length (0: off) */
    int32_t *history; /* [window] ring of the last tokens */
    int n_history;    /* tokens in the ring (<= window) */
    int head;         /* next slot to write */
    int32_t *count;   /* [n_vocab] occurrences of each token in the window */
    cand *cands;      /* [n_vocab] working candidates */
    double *probs;    /* [n_vocab] probabilities of the kept candidates */
    uint64_t rng;     /* splitmix64 state */
    uint64_t seed;
};

inf_sampler_params inf_sampler_defaults(void) {
    return (inf_sampler_params){.temp = 0.8f,
                                .top_k = 40,
                                .top_p = 0.95f,
                                .min_p = 0.05f,
                                .repeat_penalty = 1.0f,
                                .repeat_last_n = 64,
                                .presence_penalty = 0.0f,
                                .frequency_penalty = 0.0f,
                                .seed = INF_SEED_RANDOM};
}

int inf_sampler_check(const inf_sampler_params *p, inf_err *err) {
    if (!isfinite(p->temp)) return inf_fail(err, "--temp must be a number, got %g", p->temp);
    if (p->top_k < 0) return inf_fail(err, "--top-k must be >= 0 (0 = off), got %d", p->top_k);
    if (!(p->top_p >= 0 && p->top_p <= 1))
        return inf_fail(err, "--top-p must be in [0, 1], got %g", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return inf_fail(err, "--min-p must be in [0, 1], got %g", p->min_p);
    if (!(p->repeat_penalty > 0) || !isfinite(p->repeat_penalty))
        return inf_fail(err, "--repeat-penalty must be > 0 (1 = off), got %g", p->repeat_penalty);
    if (p->repeat_last_n < -1)
        return inf_fail(err, "--repeat-last-n must be >= -1 (-1 = context size), got %d",
                        p->repeat_last_n);
    if (!isfinite(p->presence_penalty))
        return inf_fail(err, "--presence-penalty must be a number, got %g", p->presence_penalty);
    if (!isfinite(p->frequency_penalty))
        return inf_fail(err, "--frequency-penalty must be a number, got %g", p->frequency_penalty);
    return 0;
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t *state) {
    return (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

int inf_sampler_create(inf_sampler **out, const inf_sampler_params *p, int n_vocab, int n_ctx,
                       inf_err *err) {
    *out = NULL;
    if (inf_sampler_check(p, err)) return -1;
    if (n_vocab <= 0) return inf_fail(err, "sampler: vocabulary of %d tokens", n_vocab);
    inf_sampler *s = calloc(1, sizeof *s);
    if (!s) return inf_fail(err, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->window = p->repeat_last_n == -1 ? n_ctx : p->repeat_last_n;
    if (s->window < 0) s->window = 0;
    s->history = calloc((size_t)s->window + 1, sizeof *s->history);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->cands = calloc((size_t)n_vocab, sizeof *s->cands);
    s->probs = calloc((size_t)n_vocab, sizeof *s->probs);
    if (!s->history || !s->count || !s->cands || !s->probs) {
        inf_sampler_free(s);
        return inf_fail(err, "sampler: out of memory");
    }
    s->seed = p->seed;
    if (s->seed == INF_SEED_RANDOM) {
        uint64_t t = inf_now_ns() ^ ((uint64_t)(uintptr_t)s << 16);
        s->seed = splitmix64(&t) & 0xFFFFFFFFu;
    }
    s->rng = s->seed;
    *out = s;
    return 0;
}

void inf_sampler_free(inf_sampler *s) {
    if (!s) return;
    free(s->history);
    free(s->count);
    free(s->cands);
    free(s->probs);
    free(s);
}

uint64_t inf_sampler_seed(const inf_sampler *s) {
    return s->seed;
}

void inf_sampler_accept(inf_sampler *s, int32_t token) {
    if (s->window == 0 || token < 0 || token >= s->n_vocab) return;
    if (s->n_history == s->window)
        s->count[s->history[s->head]]--; /* evict the oldest */
    else
        s->n_history++;
    s->history[s->head] = token;
    s->count[token]++;
    s->head = (s->head + 1) % s->window;
}

void inf_sampler_reset(inf_sampler *s) {
    for (int i = 0; i < s->n_history; i++)
        s->count[s->history[i]] = 0;
    s->n_history = 0;
    s->head = 0;
}

/* Descending logit; ties by id so the order never depends on the sort. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Moves the k best candidates (by cand_cmp) to the front of c[n], sorted,
 * through a min-heap of size k: O(n log k) instead of a full sort. */
static void top_k_sorted(cand *c, int n, int k) {
    if (k >= n) {
        qsort(c, (size_t)n, sizeof *c, cand_cmp);
        return;
    }
    /* heap in c[0..k): root is the worst of the kept (the largest by cand_cmp) */
    for (int i = 0; i < n; i++) {
        cand x = c[i];
        int size = i < k ? i : k;
        if (i >= k) {
            if (cand_cmp(&x, &c[0]) >= 0) continue; /* not better than the worst kept */
            /* replace the root and sift down */
            int j = 0;
            for (;;) {
                int l = 2 * j + 1, r = l + 1, w = j;
                cand *wc = &x;
                if (l < size && cand_cmp(&c[l], wc) > 0) w = l, wc = &c[l];
                if (r < size && cand_cmp(&c[r], wc) > 0) w = r, wc = &c[r];
                if (w == j) break;
                c[j] = c[w];
                j = w;
            }
            c[j] = x;
        } else {
            /* sift up */
            int j = size;
            while (j > 0 && cand_cmp(&c[(j - 1) / 2], &x) < 0) {
                c[j] = c[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            c[j] = x;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
}

/* probs[0..n) = softmax(c[i].logit / temp), candidates sorted descending. */
static void softmax_sorted(double *probs, const cand *c, int n, double temp) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += probs[i] = exp((c[i].logit - c[0].logit) / temp);
    for (int i = 0; i < n; i++)
        probs[i] /= sum;
}

/* The chain over logits: leaves the kept candidates, most probable first,
 * in s->cands[0..n) and their probabilities in s->probs; returns n. A
 * temperature <= 0 keeps the highest logit (the lowest id on ties) alone. */
static int chain(inf_sampler *s, const float *logits) {
    const inf_sampler_params *p = &s->p;
    int n = s->n_vocab;
    for (int i = 0; i < n; i++)
        s->cands[i] = (cand){i, logits[i]};

    /* Penalties, once per distinct token of the window (llama.cpp's formulas).
     * A token's count is negated while it is done, so repeats skip it. */
    for (int i = 0; i < s->n_history; i++) {
        int32_t t = s->history[i];
        int cnt = s->count[t];
        if (cnt <= 0) continue;
        float *l = &s->cands[t].logit;
        *l = *l <= 0 ? *l * p->repeat_penalty : *l / p->repeat_penalty;
        *l -= (float)cnt * p->frequency_penalty + p->presence_penalty;
        s->count[t] = -cnt;
    }
    for (int i = 0; i < s->n_history; i++)
        if (s->count[s->history[i]] < 0) s->count[s->history[i]] = -s->count[s->history[i]];

    if (p->temp <= 0) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (s->cands[i].logit > s->cands[best].logit) best = i;
        s->cands[0] = s->cands[best];
        s->probs[0] = 1.0;
        return 1;
    }

    int kept = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    top_k_sorted(s->cands, n, kept);

    if (p->top_p < 1.0f) {
        softmax_sorted(s->probs, s->cands, kept, 1.0);
        double cum = 0;
        for (int i = 0; i < kept; i++) {
            cum += s->probs[i];
            if (cum >= p->top_p) {
                kept = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p) */
        float floor_logit = s->cands[0].logit + logf(p->min_p);
        int i = 1;
        while (i < kept && s->cands[i].logit >= floor_logit)
            i++;
        kept = i;
    }
    softmax_sorted(s->probs, s->cands, kept, p->temp);
    return kept;
}

int32_t inf_sampler_sample(inf_sampler *s, const float *logits) {
    int kept = chain(s, logits);
    if (s->p.temp <= 0) return s->cands[0].id;
    double u = rng_uniform(&s->rng), cum = 0;
    for (int i = 0; i < kept; i++) {
        cum += s->probs[i];
        if (u < cum) return s->cands[i].id;
    }
    return s->cands[kept - 1].id;
}

int inf_sampler_dist(inf_sampler *s, const float *logits, int32_t *ids, double *probs) {
    int kept = chain(s, logits);
    for (int i = 0; i < kept; i++) {
        ids[i] = s->cands[i].id;
        probs[i] = s->probs[i];
    }
    return kept;
}

double inf_sampler_uniform(inf_sampler *s) {
    return rng_uniform(&s->rng);
}
