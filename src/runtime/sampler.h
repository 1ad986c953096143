/* Token sampling with llama.cpp's knobs, names and defaults.
 *
 * The chain, in llama.cpp's order: repetition penalties over the last
 * repeat_last_n tokens → top-k → top-p → min-p → temperature → a draw from a
 * seeded generator. A temperature <= 0 means greedy (penalties, then the
 * highest logit). The same seed and the same logits give the same tokens. */
#ifndef INF_RUNTIME_SAMPLER_H
#define INF_RUNTIME_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "util/err.h"

/* llama.cpp's LLAMA_DEFAULT_SEED: "pick a random seed". */
#define INF_SEED_RANDOM 0xFFFFFFFFu

typedef struct inf_sampler_params {
    float temp;              /* 0.8; <= 0: greedy */
    int top_k;               /* 40; 0: off */
    float top_p;             /* 0.95; 1: off */
    float min_p;             /* 0.05; 0: off */
    float repeat_penalty;    /* 1.0: off */
    int repeat_last_n;       /* 64; 0: off; -1: the whole context */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    uint64_t seed;           /* INF_SEED_RANDOM: from the clock */
} inf_sampler_params;

/* llama.cpp's defaults (listed above). */
inf_sampler_params inf_sampler_defaults(void);

/* Checks ranges: top-p and min-p in [0, 1], top-k >= 0, repeat-penalty > 0,
 * repeat-last-n >= -1, every float finite. Returns 0 or -1 naming the flag. */
int inf_sampler_check(const inf_sampler_params *p, inf_err *err);

typedef struct inf_sampler inf_sampler;

/* A sampler over n_vocab logits; n_ctx resolves repeat_last_n = -1. All its
 * buffers are allocated here. Returns 0, or -1 with a message (bad params,
 * out of memory). Free with inf_sampler_free (NULL is a no-op). */
int inf_sampler_create(inf_sampler **out, const inf_sampler_params *p, int n_vocab, int n_ctx,
                       inf_err *err);
void inf_sampler_free(inf_sampler *s);

/* The seed in use (the drawn one when the params asked for a random seed). */
uint64_t inf_sampler_seed(const inf_sampler *s);

/* Records a token (prompt or generated) in the penalty window. */
void inf_sampler_accept(inf_sampler *s, int32_t token);

/* Forgets the penalty window (the generator keeps its state). */
void inf_sampler_reset(inf_sampler *s);

/* Picks the next token from logits[n_vocab] (not modified). Does not accept
 * it: call inf_sampler_accept with the token actually used. */
int32_t inf_sampler_sample(inf_sampler *s, const float *logits);

/* The distribution inf_sampler_sample draws from, after the whole chain:
 * the kept candidates, most probable first, in ids[0..n) and probs[0..n)
 * (summing to 1; a temperature <= 0 keeps the highest logit alone, with
 * probability 1). Returns n; ids and probs hold n_vocab entries. Draws
 * nothing (speculative decoding weighs drafts with it). */
int inf_sampler_dist(inf_sampler *s, const float *logits, int32_t *ids, double *probs);

/* A uniform number in [0, 1) from the sampler's generator, which it advances. */
double inf_sampler_uniform(inf_sampler *s);

#endif
