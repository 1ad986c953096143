/* A Qwen3 model built in memory from pseudo-random weights, for tests that
 * need an inf_model_file without reading one: the same neutral description a
 * loader produces, every tensor quantized to the type asked for. */
#ifndef INF_TEST_SYNTH_MODEL_H
#define INF_TEST_SYNTH_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/model.h"
#include "quant/quantize.h"

static uint64_t synth_rng = 1;
static inline float synth_rand(void) { /* uniform in [-1, 1) */
    synth_rng = synth_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((synth_rng >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

/* Fills t with ne0 x ne1 weights base + amp * uniform, stored as type. */
static inline void synth_tensor(inf_tensor *t, const char *name, inf_dtype type, int64_t ne0,
                                int64_t ne1, float base, float amp) {
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->type = type;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = 1, t->ne[3] = 1;
    size_t row = inf_dtype_row_bytes(type, ne0);
    t->nbytes = row * (size_t)ne1;
    void *data = malloc(t->nbytes);
    float *src = malloc(sizeof(float) * (size_t)ne0);
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++)
            src[i] = base + amp * synth_rand();
        if (inf_quantize_row(type, (char *)data + (size_t)r * row, src, ne0) != 0) abort();
    }
    free(src);
    t->data = data;
}

/* types[0] is used for the embedding table, types[1] for attention matrices,
 * types[2] for MLP matrices (norms are always F32, as in GGUF files). */
static inline inf_model_file *synth_model(inf_hparams hp, const inf_dtype types[3], uint64_t seed) {
    synth_rng = seed;
    inf_model_file *m = calloc(1, sizeof *m);
    m->path = strdup("synthetic");
    m->arch = strdup("qwen3");
    m->hp = hp;
    int per_layer = 11;
    m->n_tensors = 3 + per_layer * hp.n_layer;
    m->tensors = calloc((size_t)m->n_tensors, sizeof(inf_tensor));
    int64_t E = hp.n_embd, Q = (int64_t)hp.n_head * hp.head_dim,
            KV = (int64_t)hp.n_head_kv * hp.head_dim, F = hp.n_ff;
    inf_tensor *t = m->tensors;
    synth_tensor(t, "token_embd.weight", types[0], E, hp.n_vocab, 0, 1.0f);
    t++;
    synth_tensor(t, "output_norm.weight", INF_F32, E, 1, 1.0f, 0.2f);
    t++;
    if (hp.tied_output) {
        m->n_tensors--;
    } else {
        synth_tensor(t, "output.weight", types[0], E, hp.n_vocab, 0, 0.2f);
        t++;
    }
    for (int l = 0; l < hp.n_layer; l++) {
        char name[64];
#define SYNTH(slot, nm, ty, n0, n1, base, amp)                                                     \
    snprintf(name, sizeof name, "blk.%d." nm ".weight", l);                                        \
    synth_tensor(t, name, ty, n0, n1, base, amp);                                                  \
    t++;
        SYNTH(attn_norm, "attn_norm", INF_F32, E, 1, 1.0f, 0.2f)
        SYNTH(wq, "attn_q", types[1], E, Q, 0, 1.7f / sqrtf((float)E))
        SYNTH(wk, "attn_k", types[1], E, KV, 0, 1.7f / sqrtf((float)E))
        SYNTH(wv, "attn_v", types[1], E, KV, 0, 1.7f / sqrtf((float)E))
        SYNTH(wo, "attn_output", types[1], Q, E, 0, 4.0f / sqrtf((float)Q))
        SYNTH(q_norm, "attn_q_norm", INF_F32, hp.head_dim, 1, 1.0f, 0.3f)
        SYNTH(k_norm, "attn_k_norm", INF_F32, hp.head_dim, 1, 1.0f, 0.3f)
        SYNTH(ffn_norm, "ffn_norm", INF_F32, E, 1, 1.0f, 0.2f)
        SYNTH(w_gate, "ffn_gate", types[2], E, F, 0, 1.7f / sqrtf((float)E))
        SYNTH(w_up, "ffn_up", types[2], E, F, 0, 1.7f / sqrtf((float)E))
        SYNTH(w_down, "ffn_down", types[2], F, E, 0, 4.0f / sqrtf((float)F))
#undef SYNTH
    }
    return m;
}

static inline void synth_model_free(inf_model_file *m) {
    if (!m) return;
    for (int i = 0; i < m->n_tensors; i++) {
        free(m->tensors[i].name);
        free((void *)m->tensors[i].data);
    }
    free(m->tensors);
    free(m->path);
    free(m->arch);
    free(m);
}

/* A copy of m with every tensor dequantized to F32 (the same values the
 * reference dequantization gives the quantized model). */
static inline inf_model_file *synth_dequantized(const inf_model_file *m) {
    inf_model_file *d = calloc(1, sizeof *d);
    d->path = strdup("synthetic-dequantized");
    d->arch = strdup("qwen3");
    d->hp = m->hp;
    d->n_tensors = m->n_tensors;
    d->tensors = calloc((size_t)m->n_tensors, sizeof(inf_tensor));
    for (int i = 0; i < m->n_tensors; i++) {
        const inf_tensor *s = &m->tensors[i];
        inf_tensor *t = &d->tensors[i];
        *t = *s;
        t->name = strdup(s->name);
        t->type = INF_F32;
        t->nbytes = sizeof(float) * (size_t)s->ne[0] * (size_t)s->ne[1];
        float *data = malloc(t->nbytes);
        size_t row = inf_dtype_row_bytes(s->type, s->ne[0]);
        for (int64_t r = 0; r < s->ne[1]; r++)
            inf_dequantize_row(s->type, data + r * s->ne[0], (const char *)s->data + r * row,
                               s->ne[0]);
        t->data = data;
    }
    return d;
}

/* A small model with Qwen3's structure: GQA 2:1, q/k norms, tied head. */
static inline inf_hparams synth_tiny_hparams(void) {
    return (inf_hparams){.n_layer = 2,
                         .n_embd = 64,
                         .n_head = 4,
                         .n_head_kv = 2,
                         .head_dim = 32,
                         .n_ff = 96,
                         .n_vocab = 300,
                         .n_ctx_train = 4096,
                         .rope_theta = 1e6f,
                         .rms_eps = 1e-6f,
                         .tied_output = true};
}

#endif
