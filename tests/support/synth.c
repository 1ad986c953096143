#include "support/synth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/gguf_writer.h"
#include "convert/qwen3_meta.h"
#include "support/st_writer.h"
#include "quant/mix.h"
#include "quant/quantize.h"
#include "util/half.h"

static const char *const mix_names[SYNTH_N_MIX] = {
    [SYNTH_F32] = "f32",       [SYNTH_F16] = "f16",       [SYNTH_BF16] = "bf16",
    [SYNTH_Q8_0] = "q8_0",     [SYNTH_Q4_0] = "q4_0",     [SYNTH_Q4_K] = "q4_k",
    [SYNTH_Q6_K] = "q6_k",     [SYNTH_Q4_K_M] = "q4_k_m", [SYNTH_Q4_1] = "q4_1",
    [SYNTH_Q5_0] = "q5_0",     [SYNTH_Q5_1] = "q5_1",     [SYNTH_Q2_K] = "q2_k",
    [SYNTH_Q3_K_S] = "q3_k_s", [SYNTH_Q3_K_M] = "q3_k_m", [SYNTH_Q3_K_L] = "q3_k_l",
    [SYNTH_Q4_K_S] = "q4_k_s", [SYNTH_Q5_K_S] = "q5_k_s", [SYNTH_Q5_K_M] = "q5_k_m",
    [SYNTH_IQ4_NL] = "iq4_nl", [SYNTH_IQ4_XS] = "iq4_xs", [SYNTH_MXFP4] = "mxfp4",
};

/* llama-quantize's mix of the same name, or NULL (the pure q4_k, q6_k, mxfp4) */
static const inf_mix *llama_mix(synth_mix m) {
    return (m >= SYNTH_Q4_1 || m == SYNTH_Q4_K_M) && m != SYNTH_MXFP4 ? inf_mix_find(mix_names[m])
                                                                      : NULL;
}

const char *synth_mix_name(synth_mix m) {
    return (unsigned)m < SYNTH_N_MIX ? mix_names[m] : "unknown";
}

int synth_mix_parse(const char *s) {
    for (int m = 0; m < SYNTH_N_MIX; m++)
        if (!strcmp(s, mix_names[m])) return m;
    return -1;
}

/* Qwen3.5's layer pattern: every interval-th layer is full attention, the
 * others Gated DeltaNet (HF full_attention_interval, llama.cpp's reading of it). */
static void hybrid_layers(inf_hparams *hp, int interval) {
    for (int l = 0; l < hp->n_layer; l++)
        hp->recurrent[l] = (l + 1) % interval != 0;
}

int synth_preset(inf_hparams *hp, const char *name) {
    if (!strcmp(name, "tiny-qwen35")) {
        *hp = (inf_hparams){.n_layer = 4,
                            .n_embd = 256,
                            .n_head = 4,
                            .n_head_kv = 2,
                            .head_dim = 64,
                            .n_rot = 16, /* partial_rotary_factor 0.25 */
                            .n_ff = 512,
                            .n_vocab = 151936,
                            .n_ctx_train = 4096,
                            .rope_theta = 1e7f,
                            .rms_eps = 1e-6f,
                            .tied_output = true,
                            .ssm_d_conv = 4,
                            .ssm_n_k_heads = 2,
                            .ssm_n_v_heads = 4, /* two V heads per K head: the reorder matters */
                            .ssm_d_k = 32,
                            .ssm_d_v = 32};
        hybrid_layers(hp, 4);
        return 0;
    }
    /* Qwen3.5-2B's per-layer shapes; one group of its 24 layers (benchmarks) */
    if (!strcmp(name, "qwen35-2b-4l")) {
        *hp = (inf_hparams){.n_layer = 4,
                            .n_embd = 2048,
                            .n_head = 8,
                            .n_head_kv = 2,
                            .head_dim = 256,
                            .n_rot = 64,
                            .n_ff = 6144,
                            .n_vocab = 151936,
                            .n_ctx_train = 262144,
                            .rope_theta = 1e7f,
                            .rms_eps = 1e-6f,
                            .tied_output = false,
                            .ssm_d_conv = 4,
                            .ssm_n_k_heads = 16,
                            .ssm_n_v_heads = 16,
                            .ssm_d_k = 128,
                            .ssm_d_v = 128};
        hybrid_layers(hp, 4);
        return 0;
    }
    /* tiny-qwen35's trunk with a MoE block in every layer (qwen35moe) */
    if (!strcmp(name, "tiny-qwen35-moe")) {
        synth_preset(hp, "tiny-qwen35");
        hp->n_ff = 0; /* no dense FFN (the real config has no intermediate_size) */
        hp->n_expert = 8;
        hp->n_expert_used = 2;
        hp->n_ff_exp = 128;
        hp->n_ff_shexp = 256;
        hp->norm_topk_prob = true; /* Qwen3.5's router always renormalizes */
        return 0;
    }
    /* Qwen3.5-35B-A3B's per-layer shapes (transformers' Qwen3_5MoeTextConfig
     * defaults, which are that checkpoint's; llama.cpp's qwen35moe keys for
     * it); one group of its 40 layers (benchmarks) */
    if (!strcmp(name, "qwen35-35b-a3b-4l")) {
        *hp = (inf_hparams){.n_layer = 4,
                            .n_embd = 2048,
                            .n_head = 16,
                            .n_head_kv = 2,
                            .head_dim = 256,
                            .n_rot = 64, /* partial_rotary_factor 0.25 */
                            .n_vocab = 151936,
                            .n_ctx_train = 262144,
                            .rope_theta = 1e7f,
                            .rms_eps = 1e-6f,
                            .tied_output = false,
                            .n_expert = 256,
                            .n_expert_used = 8,
                            .n_ff_exp = 512,
                            .n_ff_shexp = 512,
                            .norm_topk_prob = true,
                            .ssm_d_conv = 4,
                            .ssm_n_k_heads = 16,
                            .ssm_n_v_heads = 32,
                            .ssm_d_k = 128,
                            .ssm_d_v = 128};
        hybrid_layers(hp, 4);
        return 0;
    }
    if (!strcmp(name, "tiny")) {
        *hp = (inf_hparams){.n_layer = 4,
                            .n_embd = 256,
                            .n_head = 4,
                            .n_head_kv = 2,
                            .head_dim = 64,
                            .n_ff = 768,
                            .n_vocab = 151936,
                            .n_ctx_train = 4096,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = true};
        return 0;
    }
    if (!strcmp(name, "qwen3-0.6b")) {
        *hp = (inf_hparams){.n_layer = 28,
                            .n_embd = 1024,
                            .n_head = 16,
                            .n_head_kv = 8,
                            .head_dim = 128,
                            .n_ff = 3072,
                            .n_vocab = 151936,
                            .n_ctx_train = 40960,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = true};
        return 0;
    }
    if (!strcmp(name, "tiny-moe")) {
        *hp = (inf_hparams){.n_layer = 4,
                            .n_embd = 256,
                            .n_head = 4,
                            .n_head_kv = 2,
                            .head_dim = 64,
                            .n_ff = 768,
                            .n_vocab = 151936,
                            .n_ctx_train = 4096,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = true,
                            .n_expert = 8,
                            .n_expert_used = 2,
                            .n_ff_exp = 256,
                            .norm_topk_prob = true};
        return 0;
    }
    /* Qwen3-30B-A3B's shapes; "-6l" keeps six of its 48 layers (benchmarks) */
    if (!strcmp(name, "qwen3-30b-a3b-6l") || !strcmp(name, "qwen3-30b-a3b")) {
        *hp = (inf_hparams){.n_layer = strcmp(name, "qwen3-30b-a3b") ? 6 : 48,
                            .n_embd = 2048,
                            .n_head = 32,
                            .n_head_kv = 4,
                            .head_dim = 128,
                            .n_ff = 6144,
                            .n_vocab = 151936,
                            .n_ctx_train = 40960,
                            .rope_theta = 1e6f,
                            .rms_eps = 1e-6f,
                            .tied_output = false,
                            .n_expert = 128,
                            .n_expert_used = 8,
                            .n_ff_exp = 768,
                            .norm_topk_prob = true};
        return 0;
    }
    return -1;
}

/* Per-block tensors: role, GGUF suffix, HF suffix. */
typedef struct {
    synth_role role;
    const char *gguf, *hf;
} block_tensor;

static const block_tensor block_tensors[] = {
    {SYNTH_ATTN_NORM, "attn_norm.weight", "input_layernorm.weight"},
    {SYNTH_ATTN_Q, "attn_q.weight", "self_attn.q_proj.weight"},
    {SYNTH_ATTN_K, "attn_k.weight", "self_attn.k_proj.weight"},
    {SYNTH_ATTN_V, "attn_v.weight", "self_attn.v_proj.weight"},
    {SYNTH_ATTN_OUTPUT, "attn_output.weight", "self_attn.o_proj.weight"},
    {SYNTH_ATTN_Q_NORM, "attn_q_norm.weight", "self_attn.q_norm.weight"},
    {SYNTH_ATTN_K_NORM, "attn_k_norm.weight", "self_attn.k_norm.weight"},
    {SYNTH_FFN_NORM, "ffn_norm.weight", "post_attention_layernorm.weight"},
    {SYNTH_FFN_GATE, "ffn_gate.weight", "mlp.gate_proj.weight"},
    {SYNTH_FFN_UP, "ffn_up.weight", "mlp.up_proj.weight"},
    {SYNTH_FFN_DOWN, "ffn_down.weight", "mlp.down_proj.weight"},
};
/* A MoE block: the attention and ffn_norm as above, then these. The HF names
 * of the expert tensors are the fused layout's (per-expert names are made
 * when writing). */
static const block_tensor moe_tensors[] = {
    {SYNTH_FFN_GATE_INP, "ffn_gate_inp.weight", "mlp.gate.weight"},
    {SYNTH_FFN_GATE_EXPS, "ffn_gate_exps.weight", "mlp.experts.gate_proj"},
    {SYNTH_FFN_UP_EXPS, "ffn_up_exps.weight", "mlp.experts.up_proj"},
    {SYNTH_FFN_DOWN_EXPS, "ffn_down_exps.weight", "mlp.experts.down_proj"},
};
/* Qwen3.5's blocks: a gated-attention layer (q_proj holds each head's query
 * and gate rows) and a Gated DeltaNet layer, each with the dense FFN; llama.cpp
 * names the norm before the FFN post_attention_norm here. */
static const block_tensor qwen35_attn_tensors[] = {
    {SYNTH_ATTN_NORM, "attn_norm.weight", "input_layernorm.weight"},
    {SYNTH_ATTN_Q, "attn_q.weight", "self_attn.q_proj.weight"},
    {SYNTH_ATTN_K, "attn_k.weight", "self_attn.k_proj.weight"},
    {SYNTH_ATTN_V, "attn_v.weight", "self_attn.v_proj.weight"},
    {SYNTH_ATTN_OUTPUT, "attn_output.weight", "self_attn.o_proj.weight"},
    {SYNTH_ATTN_Q_NORM, "attn_q_norm.weight", "self_attn.q_norm.weight"},
    {SYNTH_ATTN_K_NORM, "attn_k_norm.weight", "self_attn.k_norm.weight"},
    {SYNTH_FFN_NORM, "post_attention_norm.weight", "post_attention_layernorm.weight"},
    {SYNTH_FFN_GATE, "ffn_gate.weight", "mlp.gate_proj.weight"},
    {SYNTH_FFN_UP, "ffn_up.weight", "mlp.up_proj.weight"},
    {SYNTH_FFN_DOWN, "ffn_down.weight", "mlp.down_proj.weight"},
};
static const block_tensor qwen35_delta_tensors[] = {
    {SYNTH_ATTN_NORM, "attn_norm.weight", "input_layernorm.weight"},
    {SYNTH_SSM_QKV, "attn_qkv.weight", "linear_attn.in_proj_qkv.weight"},
    {SYNTH_SSM_GATE, "attn_gate.weight", "linear_attn.in_proj_z.weight"},
    {SYNTH_SSM_BETA, "ssm_beta.weight", "linear_attn.in_proj_b.weight"},
    {SYNTH_SSM_ALPHA, "ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
    {SYNTH_SSM_CONV1D, "ssm_conv1d.weight", "linear_attn.conv1d.weight"},
    {SYNTH_SSM_DT_BIAS, "ssm_dt.bias", "linear_attn.dt_bias"},
    {SYNTH_SSM_A_LOG, "ssm_a", "linear_attn.A_log"},
    {SYNTH_SSM_NORM, "ssm_norm.weight", "linear_attn.norm.weight"},
    {SYNTH_SSM_OUT, "ssm_out.weight", "linear_attn.out_proj.weight"},
    {SYNTH_FFN_NORM, "post_attention_norm.weight", "post_attention_layernorm.weight"},
    {SYNTH_FFN_GATE, "ffn_gate.weight", "mlp.gate_proj.weight"},
    {SYNTH_FFN_UP, "ffn_up.weight", "mlp.up_proj.weight"},
    {SYNTH_FFN_DOWN, "ffn_down.weight", "mlp.down_proj.weight"},
};
/* Qwen3.5's MoE block (qwen35moe), in place of the two tables' last three
 * (the dense FFN): the routed experts as qwen3moe's, then the shared expert
 * and its gate (llama.cpp's ffn_gate_inp_shexp; HF shared_expert_gate [1,
 * n_embd], which the converter writes unsqueezed: GGUF {n_embd, 1}). The HF
 * names of the routed experts are those of the fused layout the checkpoints
 * hold (see plan_tensors). */
static const block_tensor qwen35_moe_tensors[] = {
    {SYNTH_FFN_GATE_INP, "ffn_gate_inp.weight", "mlp.gate.weight"},
    {SYNTH_FFN_GATE_EXPS, "ffn_gate_exps.weight", "mlp.experts.gate_proj"},
    {SYNTH_FFN_UP_EXPS, "ffn_up_exps.weight", "mlp.experts.up_proj"},
    {SYNTH_FFN_DOWN_EXPS, "ffn_down_exps.weight", "mlp.experts.down_proj"},
    {SYNTH_FFN_GATE_INP_SHEXP, "ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},
    {SYNTH_FFN_GATE_SHEXP, "ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
    {SYNTH_FFN_UP_SHEXP, "ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
    {SYNTH_FFN_DOWN_SHEXP, "ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
};
#define COUNT(a) ((int)(sizeof(a) / sizeof(a)[0]))
/* N_SHARED: block_tensors a MoE block keeps; N_DENSE_FFN: the dense FFN at
 * the end of the Qwen3.5 tables, which a MoE block replaces */
enum { N_SHARED = 8, N_DENSE_FFN = 3, MAX_BLOCK_TENSORS = 20 };

static bool hybrid(const inf_hparams *hp) {
    return hp->ssm_n_v_heads > 0;
}

/* Shape fastest-first {n_in, n_out} of a role; n_out = 0 for 1-D tensors. */
static void role_shape(int64_t ne[3], synth_role r, const inf_hparams *hp) {
    ne[2] = 1;
    const int64_t q = (int64_t)hp->n_head * hp->head_dim,
                  kv = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t nv = hp->ssm_n_v_heads, v = nv * hp->ssm_d_v,
                  conv = 2 * (int64_t)hp->ssm_n_k_heads * hp->ssm_d_k + v;
    switch (r) {
    case SYNTH_TOKEN_EMBD:
        ne[0] = hp->n_embd, ne[1] = hp->n_vocab;
        break;
    case SYNTH_OUTPUT_NORM:
    case SYNTH_ATTN_NORM:
    case SYNTH_FFN_NORM:
        ne[0] = hp->n_embd, ne[1] = 0;
        break;
    case SYNTH_ATTN_Q_NORM:
    case SYNTH_ATTN_K_NORM:
        ne[0] = hp->head_dim, ne[1] = 0;
        break;
    case SYNTH_ATTN_Q: /* Qwen3.5: each head's query rows, then its output-gate rows */
        ne[0] = hp->n_embd, ne[1] = hybrid(hp) ? 2 * q : q;
        break;
    case SYNTH_ATTN_K:
    case SYNTH_ATTN_V:
        ne[0] = hp->n_embd, ne[1] = kv;
        break;
    case SYNTH_ATTN_OUTPUT:
        ne[0] = q, ne[1] = hp->n_embd;
        break;
    case SYNTH_FFN_GATE:
    case SYNTH_FFN_UP:
        ne[0] = hp->n_embd, ne[1] = hp->n_ff;
        break;
    case SYNTH_FFN_DOWN:
        ne[0] = hp->n_ff, ne[1] = hp->n_embd;
        break;
    case SYNTH_FFN_GATE_INP:
        ne[0] = hp->n_embd, ne[1] = hp->n_expert;
        break;
    case SYNTH_FFN_GATE_EXPS:
    case SYNTH_FFN_UP_EXPS:
        ne[0] = hp->n_embd, ne[1] = hp->n_ff_exp, ne[2] = hp->n_expert;
        break;
    case SYNTH_FFN_DOWN_EXPS:
        ne[0] = hp->n_ff_exp, ne[1] = hp->n_embd, ne[2] = hp->n_expert;
        break;
    case SYNTH_FFN_GATE_INP_SHEXP: /* one output row: 2-D with ne[1] = 1 */
        ne[0] = hp->n_embd, ne[1] = 1;
        break;
    case SYNTH_FFN_GATE_SHEXP:
    case SYNTH_FFN_UP_SHEXP:
        ne[0] = hp->n_embd, ne[1] = hp->n_ff_shexp;
        break;
    case SYNTH_FFN_DOWN_SHEXP:
        ne[0] = hp->n_ff_shexp, ne[1] = hp->n_embd;
        break;
    case SYNTH_SSM_QKV:
        ne[0] = hp->n_embd, ne[1] = conv;
        break;
    case SYNTH_SSM_GATE:
        ne[0] = hp->n_embd, ne[1] = v;
        break;
    case SYNTH_SSM_BETA:
    case SYNTH_SSM_ALPHA:
        ne[0] = hp->n_embd, ne[1] = nv;
        break;
    case SYNTH_SSM_CONV1D:
        ne[0] = hp->ssm_d_conv, ne[1] = conv;
        break;
    case SYNTH_SSM_DT_BIAS:
    case SYNTH_SSM_A_LOG:
        ne[0] = nv, ne[1] = 0;
        break;
    case SYNTH_SSM_NORM:
        ne[0] = hp->ssm_d_v, ne[1] = 0;
        break;
    case SYNTH_SSM_OUT:
        ne[0] = v, ne[1] = hp->n_embd;
        break;
    }
}

static void set_tensor(synth_tensor *t, synth_role r, int layer, const inf_hparams *hp) {
    t->role = r;
    t->layer = layer;
    role_shape(t->ne, r, hp);
    t->n_dims = t->ne[2] > 1 ? 3 : t->ne[1] ? 2 : 1;
    if (!t->ne[1]) t->ne[1] = 1;
}

/* The tensors of layer l: one table, or (MoE) the shared part of one and another. */
static int layer_tables(const block_tensor *tab[2], int n[2], const inf_hparams *hp, int l) {
    if (hybrid(hp)) {
        const bool delta = hp->recurrent[l];
        tab[0] = delta ? qwen35_delta_tensors : qwen35_attn_tensors;
        n[0] = delta ? COUNT(qwen35_delta_tensors) : COUNT(qwen35_attn_tensors);
        if (hp->n_expert == 0) return 1;
        n[0] -= N_DENSE_FFN;
        tab[1] = qwen35_moe_tensors, n[1] = COUNT(qwen35_moe_tensors);
        return 2;
    }
    tab[0] = block_tensors;
    if (hp->n_expert == 0) {
        n[0] = COUNT(block_tensors);
        return 1;
    }
    n[0] = N_SHARED;
    tab[1] = moe_tensors, n[1] = COUNT(moe_tensors);
    return 2;
}

int synth_tensor_list(synth_tensor **out, const inf_hparams *hp) {
    const int cap = 3 + hp->n_layer * MAX_BLOCK_TENSORS;
    synth_tensor *t = calloc((size_t)cap, sizeof *t);
    *out = t;
    if (!t) return -1;
    /* a Qwen3.5 folder holds the text model of Qwen3_5ForConditionalGeneration */
    const char *hf = hybrid(hp) ? "model.language_model." : "model.";
    int k = 0;
    set_tensor(&t[k], SYNTH_TOKEN_EMBD, -1, hp);
    snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "token_embd.weight");
    snprintf(t[k].hf_name, sizeof t[k].hf_name, "%sembed_tokens.weight", hf);
    k++;
    for (int l = 0; l < hp->n_layer; l++) {
        const block_tensor *tab[2];
        int n[2];
        const int n_tab = layer_tables(tab, n, hp, l);
        for (int i = 0; i < n_tab; i++)
            for (int j = 0; j < n[i]; j++, k++) {
                INF_ASSERT(k < cap - 2);
                set_tensor(&t[k], tab[i][j].role, l, hp);
                snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "blk.%d.%s", l, tab[i][j].gguf);
                snprintf(t[k].hf_name, sizeof t[k].hf_name, "%slayers.%d.%s", hf, l, tab[i][j].hf);
            }
    }
    set_tensor(&t[k], SYNTH_OUTPUT_NORM, -1, hp);
    snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "output_norm.weight");
    snprintf(t[k].hf_name, sizeof t[k].hf_name, "%snorm.weight", hf);
    k++;
    if (!hp->tied_output) {
        set_tensor(&t[k], SYNTH_TOKEN_EMBD, -1, hp); /* same shape and scale as the embedding */
        snprintf(t[k].gguf_name, sizeof t[k].gguf_name, "output.weight");
        snprintf(t[k].hf_name, sizeof t[k].hf_name, "lm_head.weight");
        k++;
    }
    return k;
}

/* ---- weights ---- */

static uint64_t mix64(uint64_t z) { /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_key(const char *name, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return mix64(h ^ mix64(seed + 0x9e3779b97f4a7c15ull));
}

/* The RMSNorm weights Qwen3.5's HF checkpoints store zero-centred. */
static bool role_is_centred_norm(synth_role r) {
    return r == SYNTH_OUTPUT_NORM || r == SYNTH_ATTN_NORM || r == SYNTH_FFN_NORM ||
           r == SYNTH_ATTN_Q_NORM || r == SYNTH_ATTN_K_NORM;
}

static bool role_is_norm(synth_role r) {
    return role_is_centred_norm(r) || r == SYNTH_SSM_NORM;
}

/* The tensors GGUF keeps F32 in every mix that a folder may hold as bf16. */
static bool role_rounds_to_bf16(synth_role r) {
    return role_is_norm(r) || r == SYNTH_SSM_CONV1D || r == SYNTH_SSM_DT_BIAS ||
           r == SYNTH_SSM_A_LOG;
}

void synth_fill(float *dst, const synth_tensor *t, const inf_hparams *hp, uint64_t seed,
                int64_t start, int64_t n) {
    float mean = 0.0f, std;
    if (role_is_norm(t->role))
        mean = 1.0f, std = 0.05f;
    else if (t->role == SYNTH_TOKEN_EMBD)
        std = 2.0f / sqrtf((float)hp->n_embd);
    else if (t->role == SYNTH_SSM_DT_BIAS || t->role == SYNTH_SSM_A_LOG)
        std = 0.5f; /* A = exp(A_log) around 1; softplus(a + dt_bias) around 0.7 */
    else
        std = 1.0f / sqrtf((float)t->ne[0]); /* conv1d: 1/sqrt(K) */
    /* Element i is a function of (key, i) alone (counter-based splitmix64),
     * so any range can be generated on its own. A sum of four 16-bit
     * uniforms (Irwin-Hall, mean 2, variance 1/3) is a cheap, bounded
     * (±3.46σ) approximation of a normal. */
    const uint64_t key = name_key(t->gguf_name, seed);
    const float k = std * sqrtf(3.0f) / 65536.0f;
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = mix64(key + (uint64_t)(start + i + 1) * 0x9e3779b97f4a7c15ull);
        int32_t s = (int32_t)(z & 0xffff) + (int32_t)((z >> 16) & 0xffff) +
                    (int32_t)((z >> 32) & 0xffff) + (int32_t)(z >> 48) - 2 * 65536;
        dst[i] = mean + k * (float)s;
    }
    /* Norm vectors (and DeltaNet's conv1d, dt_bias, A_log) stay F32 in GGUF
     * files but take the file's type in HF folders; values exact in bf16
     * (hence in f16: 8 significant bits, none below 2^-24) keep both the same. */
    if (role_rounds_to_bf16(t->role))
        for (int64_t i = 0; i < n; i++)
            dst[i] = inf_bf16_to_f32(inf_f32_to_bf16(dst[i]));
}

/* GGUF's DeltaNet V heads (see synth.h): the HF head at GGUF position p. */
static int64_t hf_v_head(const inf_hparams *hp, int64_t p) {
    const int64_t nk = hp->ssm_n_k_heads, r = hp->ssm_n_v_heads / nk;
    return (p % nk) * r + p / nk;
}

/* The element of t's HF order that GGUF element i holds, and in *run how many
 * elements from i on follow it in both orders. Rows (or, for the 1-D dt_bias
 * and A_log, elements) from `first` on come in blocks of `per` per V head;
 * ssm_out's columns come in blocks of dv per head, in every row. */
static int64_t gguf_source(const synth_tensor *t, const inf_hparams *hp, int64_t i, int64_t *run) {
    const int64_t ne0 = t->ne[0], dv = hp->ssm_d_v;
    const int64_t qk = 2 * (int64_t)hp->ssm_n_k_heads * hp->ssm_d_k;
    int64_t unit = ne0, first = 0, per = dv; /* unit: elements per row */
    switch (t->role) {
    case SYNTH_SSM_OUT: {
        const int64_t row = i / ne0, col = i % ne0, w = col % dv;
        *run = dv - w;
        return row * ne0 + hf_v_head(hp, col / dv) * dv + w;
    }
    case SYNTH_SSM_QKV:
    case SYNTH_SSM_CONV1D: /* its channels are attn_qkv's rows */
        first = qk;
        break;
    case SYNTH_SSM_GATE:
        break;
    case SYNTH_SSM_BETA:
    case SYNTH_SSM_ALPHA:
        per = 1;
        break;
    case SYNTH_SSM_DT_BIAS:
    case SYNTH_SSM_A_LOG:
        unit = 1, per = 1;
        break;
    default:
        *run = t->ne[0] * t->ne[1] * t->ne[2] - i;
        return i;
    }
    const int64_t row = i / unit;
    if (row < first) {
        *run = first * unit - i;
        return i;
    }
    const int64_t in_block = i - (first + (row - first) / per * per) * unit;
    const int64_t h = hf_v_head(hp, (row - first) / per);
    *run = per * unit - in_block;
    return (first + h * per) * unit + in_block;
}

void synth_fill_stored(float *dst, const synth_tensor *t, const inf_hparams *hp, uint64_t seed,
                       bool gguf, int64_t start, int64_t n) {
    if (!hybrid(hp)) {
        synth_fill(dst, t, hp, seed, start, n);
        return;
    }
    if (gguf && hp->ssm_n_k_heads != hp->ssm_n_v_heads) {
        for (int64_t i = 0; i < n;) { /* llama.cpp reorders only when Nk != Nv */
            int64_t run;
            const int64_t src = gguf_source(t, hp, start + i, &run);
            run = run < n - i ? run : n - i;
            synth_fill(dst + i, t, hp, seed, src, run);
            i += run;
        }
    } else {
        synth_fill(dst, t, hp, seed, start, n);
    }
    if (gguf && t->role == SYNTH_SSM_A_LOG)
        for (int64_t i = 0; i < n; i++)
            dst[i] = -expf(dst[i]);
    if (!gguf && role_is_centred_norm(t->role)) /* exact: both sides near 1 */
        for (int64_t i = 0; i < n; i++)
            dst[i] -= 1.0f;
}

/* ---- type mixes ---- */

inf_dtype synth_gguf_type(synth_mix m, const synth_tensor *t, const inf_hparams *hp) {
    /* norms, the routers and DeltaNet's conv1d (llama.cpp keeps
     * ffn_gate_inp, ffn_gate_inp_shexp and ssm_conv1d F32) */
    if (t->n_dims == 1 || t->role == SYNTH_FFN_GATE_INP || t->role == SYNTH_FFN_GATE_INP_SHEXP ||
        t->role == SYNTH_SSM_CONV1D)
        return INF_F32;
    switch (m) {
    case SYNTH_F32:
        return INF_F32;
    case SYNTH_F16:
        return INF_F16;
    case SYNTH_BF16:
        return INF_BF16;
    case SYNTH_Q8_0:
        return INF_Q8_0;
    case SYNTH_Q4_0:
        return t->role == SYNTH_TOKEN_EMBD ? INF_Q6_K : INF_Q4_0;
    /* rows that are not whole 256-blocks (a small DeltaNet's ssm_out) fall
     * back as llama-quantize's do */
    case SYNTH_Q4_K:
        return t->ne[0] % 256 ? INF_Q5_0 : INF_Q4_K;
    case SYNTH_Q6_K:
        return t->ne[0] % 256 ? INF_Q8_0 : INF_Q6_K;
    case SYNTH_MXFP4:
        return INF_MXFP4;
    default: {
        const inf_mix *mix = llama_mix(m);
        INF_ASSERT(mix && "bad mix");
        const inf_mix_tensor mt = {.name = t->gguf_name,
                                   .n_dims = t->n_dims,
                                   .ne0 = t->ne[0],
                                   .layer = t->layer,
                                   .n_layer = hp->n_layer,
                                   .n_gqa = hp->n_head / hp->n_head_kv,
                                   .n_expert = hp->n_expert,
                                   .tied = hp->tied_output,
                                   .keep = INF_F32};
        return inf_mix_tensor_type(mix, &mt);
    }
    }
}

int synth_hf_type(synth_mix m) {
    switch (m) {
    case SYNTH_F32:
        return INF_F32;
    case SYNTH_F16:
        return INF_F16;
    case SYNTH_BF16:
        return INF_BF16;
    default:
        return -1;
    }
}

uint32_t synth_file_type(synth_mix m) {
    /* llama_ftype: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q8_0 7, Q4_K_S 14, Q4_K_M 15, Q6_K 18, BF16 32
     */
    static const uint32_t ft[SYNTH_N_MIX] = {
        [SYNTH_F32] = 0,  [SYNTH_F16] = 1,   [SYNTH_BF16] = 32, [SYNTH_Q8_0] = 7,
        [SYNTH_Q4_0] = 2, [SYNTH_Q4_K] = 14, [SYNTH_Q6_K] = 18, [SYNTH_Q4_K_M] = 15,
    };
    if (m == SYNTH_MXFP4) return 38; /* MOSTLY_MXFP4_MOE */
    if (llama_mix(m)) return llama_mix(m)->ftype;
    return ft[m];
}

/* ---- writing ---- */

/* One output being written: a GGUF writer, or one safetensors writer per shard. */
typedef struct {
    const synth_output *o;
    char tmp[4096];
    gguf_writer *gguf;
    st_writer *st[SYNTH_HF_SHARDS];
    int n_st;
    struct file_tensor *ft; /* [n_ft] the tensors of this output, in file order */
    int n_ft;
    struct piece *pieces; /* [n_pieces] their element ranges of the maker's tensors */
    int n_pieces;
} sink;

/* A range of elements of one of the maker's tensors (whole rows), in the
 * order and with the values the output stores (synth_fill_stored). */
typedef struct piece {
    const synth_tensor *src;
    int64_t start, n;
} piece;

/* One tensor as an output file holds it: a name, a shape, and the pieces
 * whose values it holds one after the other. */
typedef struct file_tensor {
    char name[96];
    int n_dims;
    int64_t ne[3];           /* fastest-first */
    const synth_tensor *src; /* decides the type */
    int first, n_pieces;
} file_tensor;

static int add_piece(sink *s, const synth_tensor *src, int64_t start, int64_t n) {
    piece *g = realloc(s->pieces, (size_t)(s->n_pieces + 1) * sizeof *g);
    if (!g) return -1;
    s->pieces = g;
    g[s->n_pieces++] = (piece){src, start, n};
    s->ft[s->n_ft - 1].n_pieces++;
    return 0;
}

static int add_file_tensor(sink *s, const char *name, const synth_tensor *src, int n_dims,
                           int64_t ne0, int64_t ne1, int64_t ne2) {
    file_tensor *f = realloc(s->ft, (size_t)(s->n_ft + 1) * sizeof *f);
    if (!f) return -1;
    s->ft = f;
    f += s->n_ft++;
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->n_dims = n_dims;
    f->ne[0] = ne0, f->ne[1] = ne1, f->ne[2] = ne2;
    f->src = src;
    f->first = s->n_pieces;
    return 0;
}

/* The output's tensors: the maker's, under the format's names, with the
 * experts (and a DeltaNet's conv1d) laid out as the format holds them (see
 * synth.h). A Qwen3.5 folder holds its experts fused in every HF kind, as its
 * checkpoints do. */
static int plan_tensors(sink *s, const synth_tensor *ts, int n_tensors, const inf_hparams *hp) {
    const synth_kind kind = s->o->kind;
    const bool fused = kind == SYNTH_HF_FUSED || hybrid(hp);
    for (int i = 0; i < n_tensors; i++) {
        const synth_tensor *t = &ts[i];
        const int64_t total = t->ne[0] * t->ne[1] * t->ne[2];
        const bool expert = t->role == SYNTH_FFN_GATE_EXPS || t->role == SYNTH_FFN_UP_EXPS ||
                            t->role == SYNTH_FFN_DOWN_EXPS;
        if (kind != SYNTH_GGUF && t->role == SYNTH_SSM_CONV1D) { /* HF: [C, 1, K] */
            if (add_file_tensor(s, t->hf_name, t, 3, t->ne[0], 1, t->ne[1]) ||
                add_piece(s, t, 0, total))
                return -1;
            continue;
        }
        if (kind == SYNTH_GGUF || !expert) {
            if (add_file_tensor(s, kind == SYNTH_GGUF ? t->gguf_name : t->hf_name, t, t->n_dims,
                                t->ne[0], t->ne[1], t->ne[2]) ||
                add_piece(s, t, 0, total))
                return -1;
            continue;
        }
        if (t->role == SYNTH_FFN_UP_EXPS) continue; /* written with the gate */
        const int64_t X = t->ne[2], slice = t->ne[0] * t->ne[1];
        /* the layer's prefix: "model.layers.3." (Qwen3.5: "model.language_model.layers.3.") */
        const char *experts = strstr(t->hf_name, "mlp.experts.");
        INF_ASSERT(experts);
        const int pre = (int)(experts - t->hf_name);
        char name[96];
        if (fused) {
            if (t->role == SYNTH_FFN_DOWN_EXPS) {
                if (add_file_tensor(s, t->hf_name, t, 3, t->ne[0], t->ne[1], X) ||
                    add_piece(s, t, 0, total))
                    return -1;
                continue;
            }
            /* gate_up_proj [E, 2F, H]: each expert's gate rows, then its up rows */
            snprintf(name, sizeof name, "%.*smlp.experts.gate_up_proj", pre, t->hf_name);
            if (add_file_tensor(s, name, t, 3, t->ne[0], 2 * t->ne[1], X)) return -1;
            for (int64_t e = 0; e < X; e++)
                if (add_piece(s, t, e * slice, slice) || add_piece(s, t + 1, e * slice, slice))
                    return -1;
            continue;
        }
        if (t->role == SYNTH_FFN_DOWN_EXPS) continue; /* written with the gate */
        /* one tensor per expert: gate, up, down of expert 0, then expert 1, ... */
        static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
        for (int64_t e = 0; e < X; e++)
            for (int j = 0; j < 3; j++) {
                const synth_tensor *src = t + j;
                snprintf(name, sizeof name, "%.*smlp.experts.%lld.%s.weight", pre, t->hf_name,
                         (long long)e, proj[j]);
                if (add_file_tensor(s, name, src, 2, src->ne[0], src->ne[1], 1) ||
                    add_piece(s, src, e * src->ne[0] * src->ne[1], src->ne[0] * src->ne[1]))
                    return -1;
            }
    }
    return 0;
}

static inf_dtype file_type(const sink *s, const file_tensor *f, const inf_hparams *hp) {
    return s->o->kind == SYNTH_GGUF ? synth_gguf_type(s->o->mix, f->src, hp)
                                    : (inf_dtype)synth_hf_type(s->o->mix);
}

static void gguf_metadata(gguf_writer *w, const synth_model *m, synth_mix mix) {
    const char *arch = m->hp.n_expert ? "qwen3moe" : "qwen3";
    if (hybrid(&m->hp)) arch = m->hp.n_expert ? "qwen35moe" : "qwen35";
    inf_convert_qwen3_meta(w, arch, m->name, &m->hp, synth_file_type(mix));
}

static int gguf_tokenizer(gguf_writer *w, const inf_vocab_desc *v, int n_vocab, inf_err *err) {
    return inf_convert_tokenizer_meta(w, v, n_vocab, err);
}

static int make_dir(const char *path, inf_err *err) {
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return inf_fail(err, "%s: cannot create folder: %s", path, strerror(errno));
    return 0;
}

static void shard_name(char *buf, size_t n, int k) {
    snprintf(buf, n, "model-%05d-of-%05d.safetensors", k + 1, SYNTH_HF_SHARDS);
}

/* Removes an HF folder this module wrote (only the files it writes), so a
 * finished temporary folder can take its name. */
static int remove_hf_dir(const char *dir, inf_err *err) {
    char p[4200], name[64];
    static const char *const files[] = {"config.json", "model.safetensors",
                                        "model.safetensors.index.json", "tokenizer.json",
                                        "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    for (int k = 0; k < SYNTH_HF_SHARDS; k++) {
        shard_name(name, sizeof name, k);
        snprintf(p, sizeof p, "%s/%s", dir, name);
        unlink(p);
    }
    if (rmdir(dir) != 0 && errno != ENOENT)
        return inf_fail(err, "%s: cannot replace folder: %s", dir, strerror(errno));
    return 0;
}

static int shard_of(int i, int n_tensors) {
    return (int)((int64_t)i * SYNTH_HF_SHARDS / n_tensors);
}

/* Declares the tensors and opens the output's file(s) under the temporary name. */
static int sink_open(sink *s, const synth_model *m, const synth_tensor *ts, int n_tensors,
                     inf_err *err) {
    const synth_output *o = s->o;
    snprintf(s->tmp, sizeof s->tmp, "%s.tmp", o->path);
    if (plan_tensors(s, ts, n_tensors, &m->hp)) return inf_fail(err, "%s: out of memory", o->path);
    if (o->kind == SYNTH_GGUF) {
        s->gguf = gguf_writer_create();
        if (!s->gguf) return inf_fail(err, "%s: out of memory", o->path);
        gguf_metadata(s->gguf, m, o->mix);
        if (m->vocab && gguf_tokenizer(s->gguf, m->vocab, m->hp.n_vocab, err))
            return inf_fail_ctx(err, "%s", o->path);
        for (int i = 0; i < s->n_ft; i++) {
            const file_tensor *f = &s->ft[i];
            const int64_t ne[4] = {f->ne[0], f->ne[1], f->ne[2], 1};
            gguf_writer_add_tensor(s->gguf, f->name, file_type(s, f, &m->hp), f->n_dims, ne);
        }
        return gguf_writer_open(s->gguf, s->tmp, err);
    }
    int dtype = synth_hf_type(o->mix);
    if (dtype < 0)
        return inf_fail(err, "%s: Hugging Face folders hold f32, f16 or bf16, not %s", o->path,
                        synth_mix_name(o->mix));
    if (remove_hf_dir(s->tmp, err) || make_dir(s->tmp, err)) return -1;
    s->n_st = o->kind == SYNTH_HF_SHARDED ? SYNTH_HF_SHARDS : 1;
    for (int k = 0; k < s->n_st; k++)
        if (!(s->st[k] = st_writer_create())) return inf_fail(err, "%s: out of memory", o->path);
    for (int i = 0; i < s->n_ft; i++) {
        const file_tensor *f = &s->ft[i];
        int64_t shape[3]; /* HF: slowest-first, [experts][out][in] */
        for (int d = 0; d < f->n_dims; d++)
            shape[d] = f->ne[f->n_dims - 1 - d];
        st_writer *w = s->st[s->n_st > 1 ? shard_of(i, s->n_ft) : 0];
        st_writer_add_tensor(w, f->name, (inf_dtype)dtype, f->n_dims, shape);
    }
    char p[4200], name[64];
    for (int k = 0; k < s->n_st; k++) {
        if (s->n_st > 1)
            shard_name(name, sizeof name, k);
        else
            snprintf(name, sizeof name, "model.safetensors");
        snprintf(p, sizeof p, "%s/%s", s->tmp, name);
        if (st_writer_open(s->st[k], p, err)) return -1;
    }
    return 0;
}

static int sink_write(sink *s, int tensor, int n_tensors, const void *data, size_t n,
                      inf_err *err) {
    if (s->gguf) return gguf_writer_write(s->gguf, data, n, err);
    return st_writer_write(s->st[s->n_st > 1 ? shard_of(tensor, n_tensors) : 0], data, n, err);
}

/* Closes the files, writes the folder's JSON files, renames into place. */
static int sink_finish(sink *s, const synth_model *m, const synth_tensor *ts, int n_tensors,
                       inf_err *err) {
    const synth_output *o = s->o;
    if (s->gguf) {
        if (gguf_writer_close(s->gguf, err)) return -1;
        if (rename(s->tmp, o->path) != 0)
            return inf_fail(err, "%s: cannot rename from %s: %s", o->path, s->tmp, strerror(errno));
        return 0;
    }
    uint64_t total = 0;
    for (int k = 0; k < s->n_st; k++) {
        total += st_writer_data_bytes(s->st[k]);
        if (st_writer_close(s->st[k], err)) return -1;
    }
    char p[4200];
    if (s->n_st > 1) {
        const char **names = malloc((size_t)s->n_ft * sizeof *names);
        const char **files = malloc((size_t)s->n_ft * sizeof *files);
        char shard_files[SYNTH_HF_SHARDS][64];
        for (int k = 0; k < SYNTH_HF_SHARDS; k++)
            shard_name(shard_files[k], 64, k);
        if (!names || !files) {
            free(names);
            free(files);
            return inf_fail(err, "%s: out of memory", o->path);
        }
        for (int i = 0; i < s->n_ft; i++) {
            names[i] = s->ft[i].name;
            files[i] = shard_files[shard_of(i, s->n_ft)];
        }
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", s->tmp);
        int rc = st_write_index(p, s->n_ft, names, files, total, err);
        free(names);
        free(files);
        if (rc) return -1;
    }
    static const char *const torch_dtype[] = {
        [INF_F32] = "float32", [INF_F16] = "float16", [INF_BF16] = "bfloat16"};
    int bos = m->vocab && m->vocab->bos_id >= 0 ? m->vocab->bos_id : 151643;
    int eos = m->vocab && m->vocab->eos_id >= 0 ? m->vocab->eos_id : 151645;
    snprintf(p, sizeof p, "%s/config.json", s->tmp);
    if (st_write_config(p, &m->hp, torch_dtype[synth_hf_type(o->mix)], bos, eos, err)) return -1;
    const char *tok[2][2] = {{m->tokenizer_json, "tokenizer.json"},
                             {m->tokenizer_config_json, "tokenizer_config.json"}};
    for (int k = 0; k < 2; k++) {
        if (!tok[k][0]) continue;
        snprintf(p, sizeof p, "%s/%s", s->tmp, tok[k][1]);
        if (st_copy_file(p, tok[k][0], err)) return -1;
    }
    if (remove_hf_dir(o->path, err)) return -1;
    if (rename(s->tmp, o->path) != 0)
        return inf_fail(err, "%s: cannot rename from %s: %s", o->path, s->tmp, strerror(errno));
    return 0;
}

static void sink_free(sink *s) {
    free(s->ft);
    free(s->pieces);
    gguf_writer_free(s->gguf);
    for (int k = 0; k < s->n_st; k++)
        st_writer_free(s->st[k]);
}

int synth_write(const synth_model *m, const synth_output *outs, int n_outs, inf_err *err) {
    synth_tensor *ts = NULL;
    int n_tensors = synth_tensor_list(&ts, &m->hp);
    sink *sinks = calloc((size_t)n_outs, sizeof *sinks);
    int64_t max_row = 0;
    for (int i = 0; i < n_tensors; i++)
        max_row = ts[i].ne[0] > max_row ? ts[i].ne[0] : max_row;
    /* about 1 MiB of f32 source per chunk: a whole number of rows */
    const int64_t chunk = max_row > 262144 ? max_row : 262144 / max_row * max_row;
    float *src = malloc((size_t)chunk * sizeof *src);            /* [chunk] */
    unsigned char *conv = malloc((size_t)chunk * sizeof(float)); /* the chunk, converted */
    int rc = 0;
    if (n_tensors < 0 || !sinks || !src || !conv) {
        rc = inf_fail(err, "out of memory");
        goto done;
    }
    for (int k = 0; k < n_outs && !rc; k++) {
        sinks[k].o = &outs[k];
        rc = sink_open(&sinks[k], m, ts, n_tensors, err);
    }
    /* each output's tensors in its own order, each piece a chunk of rows at a time */
    for (int k = 0; k < n_outs && !rc; k++) {
        sink *s = &sinks[k];
        for (int i = 0; i < s->n_ft && !rc; i++) {
            const file_tensor *f = &s->ft[i];
            const inf_dtype type = file_type(s, f, &m->hp);
            for (int p = f->first; p < f->first + f->n_pieces && !rc; p++) {
                const piece *pc = &s->pieces[p];
                const int64_t row = pc->src->ne[0], per = chunk / row * row;
                const size_t rb = inf_dtype_row_bytes(type, row);
                for (int64_t at = 0; at < pc->n && !rc; at += per) {
                    const int64_t n = pc->n - at < per ? pc->n - at : per;
                    synth_fill_stored(src, pc->src, &m->hp, m->seed, s->o->kind == SYNTH_GGUF,
                                      pc->start + at, n);
                    for (int64_t r = 0; r < n / row; r++)
                        INF_ASSERT(inf_quantize_row(type, conv + r * rb, src + r * row, row) == 0);
                    rc = sink_write(s, i, s->n_ft, conv, rb * (size_t)(n / row), err);
                }
            }
        }
    }
    for (int k = 0; k < n_outs && !rc; k++)
        rc = sink_finish(&sinks[k], m, ts, n_tensors, err);
done:
    for (int k = 0; sinks && k < n_outs; k++) {
        sink_free(&sinks[k]);
        if (rc && sinks[k].o) { /* leave no half-written temporary behind */
            if (sinks[k].o->kind == SYNTH_GGUF)
                unlink(sinks[k].tmp);
            else
                remove_hf_dir(sinks[k].tmp, NULL);
        }
    }
    free(sinks);
    free(src);
    free(conv);
    free(ts);
    return rc;
}
