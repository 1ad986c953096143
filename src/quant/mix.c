/* llama.cpp's per-tensor type rules (see mix.h), for the mixes inferno writes. */
#include "quant/mix.h"

#include <string.h>
#include <strings.h>

/* llama_ftype numbers (llama.h) */
enum {
    FT_F32 = 0,
    FT_F16 = 1,
    FT_Q4_0 = 2,
    FT_Q4_1 = 3,
    FT_Q8_0 = 7,
    FT_Q5_0 = 8,
    FT_Q5_1 = 9,
    FT_Q2_K = 10,
    FT_Q3_K_S = 11,
    FT_Q3_K_M = 12,
    FT_Q3_K_L = 13,
    FT_Q4_K_S = 14,
    FT_Q4_K_M = 15,
    FT_Q5_K_S = 16,
    FT_Q5_K_M = 17,
    FT_Q6_K = 18,
    FT_IQ4_NL = 25,
    FT_IQ4_XS = 30,
    FT_BF16 = 32,
};

static const inf_mix mixes[] = {
    {"Q4_0", FT_Q4_0, INF_Q4_0, "4.5 bpw, Q4_0; output Q6_K"},
    {"Q4_1", FT_Q4_1, INF_Q4_1, "5.0 bpw, Q4_1; output Q6_K"},
    {"Q5_0", FT_Q5_0, INF_Q5_0, "5.5 bpw, Q5_0; output Q6_K"},
    {"Q5_1", FT_Q5_1, INF_Q5_1, "6.0 bpw, Q5_1; output Q6_K"},
    {"IQ4_NL", FT_IQ4_NL, INF_IQ4_NL, "4.5 bpw non-linear; ffn_down of the first eighth Q5_K"},
    {"IQ4_XS", FT_IQ4_XS, INF_IQ4_XS, "4.25 bpw non-linear; ffn_down of the first eighth Q5_K"},
    {"Q2_K", FT_Q2_K, INF_Q2_K, "2.6 bpw, Q2_K; attn_v, attn_output, ffn_down Q3_K"},
    {"Q3_K_S", FT_Q3_K_S, INF_Q3_K, "3.4 bpw, Q3_K everywhere but the output"},
    {"Q3_K_M", FT_Q3_K_M, INF_Q3_K, "Q3_K; attn_v, attn_output, ffn_down Q4_K/Q5_K"},
    {"Q3_K_L", FT_Q3_K_L, INF_Q3_K, "Q3_K; attn_v, attn_output, ffn_down Q5_K"},
    {"Q4_K_S", FT_Q4_K_S, INF_Q4_K, "4.5 bpw, Q4_K; a few attn_v and ffn_down Q5_K"},
    {"Q4_K_M", FT_Q4_K_M, INF_Q4_K, "Q4_K; attn_v, ffn_down Q6_K in the \"more bits\" layers"},
    {"Q5_K_S", FT_Q5_K_S, INF_Q5_K, "5.5 bpw, Q5_K everywhere but the output"},
    {"Q5_K_M", FT_Q5_K_M, INF_Q5_K, "Q5_K; attn_v, ffn_down Q6_K in the \"more bits\" layers"},
    {"Q6_K", FT_Q6_K, INF_Q6_K, "6.6 bpw, Q6_K"},
    {"Q8_0", FT_Q8_0, INF_Q8_0, "8.5 bpw, Q8_0"},
    {"F16", FT_F16, INF_F16, "16 bpw, F16"},
    {"BF16", FT_BF16, INF_BF16, "16 bpw, BF16"},
    {"F32", FT_F32, INF_F32, "32 bpw, F32"},
};

const inf_mix *inf_mix_list(int *n) {
    *n = (int)(sizeof mixes / sizeof mixes[0]);
    return mixes;
}

const inf_mix *inf_mix_find(const char *s) {
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++)
        if (!strcasecmp(s, mixes[i].name)) return &mixes[i];
    return NULL;
}

static bool has(const char *name, const char *part) {
    return strstr(name, part) != NULL;
}

/* llama.cpp's layers that get more bits in *_M mixes: the first and last
 * eighth, and every third layer in between. */
static bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool quantizable(const inf_mix_tensor *t) {
    const size_t n = strlen(t->name);
    /* llama.cpp keeps the MoE router (ffn_gate_inp) and the small 2-D conv
       weights of recurrent layers (ssm_conv1d) as they are */
    return t->n_dims >= 2 && n >= 6 && !strcmp(t->name + n - 6, "weight") &&
           !has(t->name, "_norm.weight") && !has(t->name, "ffn_gate_inp.weight") &&
           !has(t->name, "ssm_conv1d.weight");
}

/* a type whose block fits a row of ne0 weights, llama.cpp's fallback order */
static inf_dtype fallback(inf_dtype type, int64_t ne0) {
    if (ne0 % inf_dtype_get(type)->block == 0) return type;
    inf_dtype f;
    switch (type) {
    case INF_IQ4_XS:
    case INF_IQ3_S:
    case INF_IQ3_XXS:
    case INF_IQ2_S:
        f = INF_IQ4_NL;
        break;
    case INF_Q2_K:
    case INF_Q3_K:
        f = INF_Q4_0;
        break;
    case INF_Q4_K:
        f = INF_Q5_0;
        break;
    case INF_Q5_K:
        f = INF_Q5_1;
        break;
    case INF_Q6_K:
        f = INF_Q8_0;
        break;
    default:
        f = INF_F16;
        break;
    }
    return ne0 % inf_dtype_get(f)->block == 0 ? f : INF_F16;
}

inf_dtype inf_mix_tensor_type(const inf_mix *m, const inf_mix_tensor *t) {
    if (!quantizable(t)) return t->keep;
    const inf_dtype base = m->base;
    if (inf_dtype_get(base)->block == 1) return base; /* F32/F16/BF16: no rules */
    const uint32_t ft = m->ftype;
    const char *nm = t->name;
    const bool output = !strcmp(nm, "output.weight");
    const bool embd = !strcmp(nm, "token_embd.weight");
    const int i = t->layer, n = t->n_layer;
    inf_dtype ty = base;
    if (output || (t->tied && embd)) {
        /* the output head: Q6_K (Q8_0 stays), Q8_0 where the base block does not fit */
        if (t->ne0 % inf_dtype_get(base)->block)
            ty = INF_Q8_0;
        else if (base != INF_Q8_0)
            ty = INF_Q6_K;
    } else if (embd) {
        ty = base;
    } else if (has(nm, "attn_v.weight")) {
        if (ft == FT_Q2_K)
            ty = t->n_gqa >= 4 ? INF_Q4_K : INF_Q3_K;
        else if (ft == FT_Q3_K_M)
            ty = i < 2 ? INF_Q5_K : INF_Q4_K;
        else if (ft == FT_Q3_K_L)
            ty = INF_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && t->n_gqa >= 4)
            ty = INF_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i, n))
            ty = INF_Q6_K;
        else if (ft == FT_Q4_K_S && i < 4)
            ty = INF_Q5_K;
        if (t->n_expert == 8) ty = INF_Q8_0; /* llama.cpp: "trades just ~128MB" on Mixtral */
    } else if (has(nm, "attn_k.weight")) {
        if (t->n_expert == 8) ty = INF_Q8_0;
    } else if (has(nm, "ffn_down")) {
        if (ft == FT_Q2_K)
            ty = INF_Q3_K;
        else if (ft == FT_Q3_K_M)
            ty = i < n / 16 ? INF_Q5_K : INF_Q4_K;
        else if (ft == FT_Q3_K_L)
            ty = INF_Q5_K;
        else if (ft == FT_Q4_K_M)
            ty = use_more_bits(i, n) ? INF_Q6_K : ty;
        else if (i < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS))
            ty = INF_Q5_K;
        else if (ft == FT_Q5_K_M && use_more_bits(i, n))
            ty = INF_Q6_K;
        else if (ft == FT_Q4_K_S && i < n / 8)
            ty = INF_Q5_K;
    } else if (has(nm, "attn_output.weight") && t->n_expert == 8) {
        if (ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_IQ4_NL ||
            ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ4_XS)
            ty = INF_Q5_K;
    } else if (has(nm, "attn_output.weight")) {
        if (ft == FT_Q2_K)
            ty = INF_Q3_K;
        else if (ft == FT_Q3_K_M)
            ty = INF_Q4_K;
        else if (ft == FT_Q3_K_L)
            ty = INF_Q5_K;
    }
    return fallback(ty, t->ne0);
}
