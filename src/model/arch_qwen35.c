/* qwen35, qwen35moe: Qwen3.5 / Qwen3.6's hybrids, dense (0.8B .. 27B) and
 * mixture-of-experts (35B-A3B, 122B-A10B), after transformers'
 * modeling_qwen3_5 / modeling_qwen3_5_moe (qwen3_5, qwen3_5_text,
 * qwen3_5_moe, qwen3_5_moe_text) and llama.cpp's GGUF layouts (qwen35,
 * qwen35moe).
 *
 * Layers come in groups: Gated DeltaNet layers (linear attention with a
 * recurrent state), then a full-attention layer (every
 * full_attention_interval-th, or as config.json's layer_types lists them).
 * Each layer is a token mixer, then, after the post-attention norm, the
 * SwiGLU FFN (dense) or the Qwen3 MoE block (router softmax, top k,
 * renormalized) plus a shared expert scaled by sigmoid(shared_gate . h)
 * (MoE).
 *   attention  Qwen3's block with an output gate: q_proj yields, per head,
 *              head_dim q rows then head_dim gate rows; q/k RMSNorm, RoPE on
 *              the first n_rot dims (a quarter of the head), attention, the
 *              heads' output times sigmoid(gate), o_proj.
 *   DeltaNet   in_proj_qkv -> causal depthwise conv1d (kernel 4) + SiLU ->
 *              q, k, v; beta = sigmoid(in_proj_b x); g = A softplus(in_proj_a
 *              x + dt_bias) with A = -exp(A_log); the gated delta rule
 *              (backend op, which L2-normalizes q and k); RMSNorm of each
 *              head's output (a plain weight) times silu(in_proj_z x);
 *              out_proj.
 * The layouts store values differently, and each is read as its writer
 * meant it: Hugging Face holds the RMSNorm weights zero-centred (the norm
 * multiplies by 1 + w; not the DeltaNet output norm), A_log, a 3-D conv1d
 * weight [C, 1, K], and the DeltaNet V heads grouped by K head; llama.cpp's
 * converter folds the 1 in, stores ssm_a = -exp(A_log), squeezes the conv
 * weight and tiles the V heads over the K heads (delta shape's k_tiled).
 * A GGUF's block_count includes the multi-token-prediction blocks after the
 * trunk (nextn_predict_layers); Hugging Face keeps them as mtp.*. Neither is
 * run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/arch_qwen3.h"
#include "model/arch_qwen35.h"
#include "model/arch_qwen3moe.h"
#include "model/blocks.h"
#include "quant/quantize.h"
#include "util/mem.h"

/* ---- names -------------------------------------------------------------- */

typedef struct delta_names {
    blk_name norm, qkv, z, beta, alpha, conv, dt_bias, a, out_norm, out;
} delta_names;

#define LA "model.layers.%d.linear_attn."
static const delta_names dn = {
    .norm = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    .qkv = {"blk.%d.attn_qkv.weight", LA "in_proj_qkv.weight"},
    .z = {"blk.%d.attn_gate.weight", LA "in_proj_z.weight"},
    .beta = {"blk.%d.ssm_beta.weight", LA "in_proj_b.weight"},
    .alpha = {"blk.%d.ssm_alpha.weight", LA "in_proj_a.weight"},
    .conv = {"blk.%d.ssm_conv1d.weight", LA "conv1d.weight"},
    .dt_bias = {"blk.%d.ssm_dt.bias", LA "dt_bias"},
    .a = {"blk.%d.ssm_a", LA "A_log"},
    .out_norm = {"blk.%d.ssm_norm.weight", LA "norm.weight"},
    .out = {"blk.%d.ssm_out.weight", LA "out_proj.weight"},
};
#undef LA

static const blk_ffn_names ffn_names = {
    .norm = {"blk.%d.post_attention_norm.weight",
             "model.layers.%d.post_attention_layernorm.weight"},
    .gate = {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
    .up = {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
    .down = {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
};

/* the MoE variant's shared expert and its gate ([n_embd]; HF [1, n_embd]) */
static const blk_ffn_names shexp_names = {
    .gate = {"blk.%d.ffn_gate_shexp.weight", "model.layers.%d.mlp.shared_expert.gate_proj.weight"},
    .up = {"blk.%d.ffn_up_shexp.weight", "model.layers.%d.mlp.shared_expert.up_proj.weight"},
    .down = {"blk.%d.ffn_down_shexp.weight", "model.layers.%d.mlp.shared_expert.down_proj.weight"},
};
static const blk_name shexp_gate_name = {"blk.%d.ffn_gate_inp_shexp.weight",
                                         "model.layers.%d.mlp.shared_expert_gate.weight"};

/* ---- keys --------------------------------------------------------------- */

static bool is_moe(const inf_model_file *mf) {
    return !strcmp(mf->arch, "qwen35moe") || !strncmp(mf->arch, "qwen3_5_moe", 11);
}

/* The GGUF key <arch>.<k>. */
static const char *gkey(char *buf, size_t cap, const inf_model_file *mf, const char *k) {
    snprintf(buf, cap, "%s.%s", mf->arch, k);
    return buf;
}

/* Which layers are DeltaNet ones, from config.json's layer_types. */
static int hf_layer_types(inf_model_file *mf, bool *have, inf_err *err) {
    inf_hparams *hp = &mf->hp;
    const char *types[INF_MAX_LAYERS];
    int n;
    int r = inf_model_meta_strs(mf, "layer_types", types, INF_MAX_LAYERS, &n, err);
    if (r <= 0) {
        *have = false;
        return r;
    }
    if (n != hp->n_layer)
        return inf_fail(err, "%s: config.json layer_types has %d entries for %d layers", mf->path,
                        n, hp->n_layer);
    for (int l = 0; l < n; l++) {
        if (!strcmp(types[l], "linear_attention"))
            hp->recurrent[l] = true;
        else if (!strcmp(types[l], "full_attention"))
            hp->recurrent[l] = false;
        else
            return inf_fail(err,
                            "%s: config.json layer_types[%d] is \"%s\"; expected "
                            "linear_attention or full_attention",
                            mf->path, l, types[l]);
    }
    *have = true;
    return 0;
}

/* The MoE variant's expert counts (qwen3moe's keys) and shared expert. The
 * router's top-k weights are renormalized unless config.json says
 * norm_topk_prob false (llama.cpp's qwen35moe always renormalizes). */
static int read_moe_keys(inf_model_file *mf, bool *sparse, inf_err *err) {
    inf_hparams *hp = &mf->hp;
    if (inf_qwen3moe_read_keys(mf, sparse, err)) return -1;
    bool norm = true;
    if (mf->format == INF_FORMAT_HF && inf_model_meta_bool(mf, "norm_topk_prob", &norm, err) < 0)
        return -1;
    hp->norm_topk_prob = norm;
    char k[96];
    if (mf->format == INF_FORMAT_GGUF)
        snprintf(k, sizeof k, "%s.expert_shared_feed_forward_length", mf->arch);
    else
        snprintf(k, sizeof k, "shared_expert_intermediate_size");
    return blk_key_int(mf, k, -1, &hp->n_ff_shexp, err) < 0 ? -1 : 0;
}

/* Reads the DeltaNet shape, the RoPE'd dims and the layer kinds into
 * mf->hp (and for MoE the expert counts, sparse[l] the layers with a MoE
 * block); drops a GGUF's MTP blocks from n_layer. */
static int read_keys(inf_model_file *mf, bool *sparse, inf_err *err) {
    inf_hparams *hp = &mf->hp;
    int interval = 4, inner = 0;
    bool listed = false;
    if (mf->format == INF_FORMAT_GGUF) {
        char k[7][96];
        int64_t nextn = 0;
        if (blk_key_int(mf, gkey(k[0], 96, mf, "ssm.conv_kernel"), -1, &hp->ssm_d_conv, err) < 0 ||
            blk_key_int(mf, gkey(k[1], 96, mf, "ssm.state_size"), -1, &hp->ssm_d_k, err) < 0 ||
            blk_key_int(mf, gkey(k[2], 96, mf, "ssm.group_count"), -1, &hp->ssm_n_k_heads, err) <
                0 ||
            blk_key_int(mf, gkey(k[3], 96, mf, "ssm.time_step_rank"), -1, &hp->ssm_n_v_heads, err) <
                0 ||
            blk_key_int(mf, gkey(k[4], 96, mf, "ssm.inner_size"), -1, &inner, err) < 0 ||
            blk_key_int(mf, gkey(k[5], 96, mf, "rope.dimension_count"), hp->head_dim, &hp->n_rot,
                        err) < 0 ||
            blk_key_int(mf, gkey(k[6], 96, mf, "full_attention_interval"), 4, &interval, err) < 0)
            return -1;
        if (inner % hp->ssm_n_v_heads)
            return inf_fail(err, "%s: %s %d is not a multiple of %s %d", mf->path, k[4], inner,
                            k[3], hp->ssm_n_v_heads);
        hp->ssm_d_v = inner / hp->ssm_n_v_heads;
        char nk[96];
        if (inf_model_meta_int(mf, gkey(nk, sizeof nk, mf, "nextn_predict_layers"), &nextn, err) <
            0)
            return -1;
        if (nextn < 0 || nextn >= hp->n_layer)
            return inf_fail(err, "%s: %s is %lld, but block_count is %d", mf->path, nk,
                            (long long)nextn, hp->n_layer);
        /* the trunk's range is checked with the MTP blocks counted (bind_file) */
        hp->n_layer -= (int)nextn;
    } else {
        double partial = 0.25;
        int r = inf_model_meta_float(mf, "rope_parameters.partial_rotary_factor", &partial, err);
        if (r == 0) r = inf_model_meta_float(mf, "partial_rotary_factor", &partial, err);
        if (r < 0 || blk_key_int(mf, "linear_conv_kernel_dim", 4, &hp->ssm_d_conv, err) < 0 ||
            blk_key_int(mf, "linear_key_head_dim", 128, &hp->ssm_d_k, err) < 0 ||
            blk_key_int(mf, "linear_value_head_dim", 128, &hp->ssm_d_v, err) < 0 ||
            blk_key_int(mf, "linear_num_key_heads", 16, &hp->ssm_n_k_heads, err) < 0 ||
            blk_key_int(mf, "linear_num_value_heads", 32, &hp->ssm_n_v_heads, err) < 0 ||
            blk_key_int(mf, "full_attention_interval", 4, &interval, err) < 0 ||
            hf_layer_types(mf, &listed, err) < 0)
            return -1;
        if (!(partial > 0 && partial <= 1))
            return inf_fail(err, "%s: config.json partial_rotary_factor %g: expected (0, 1]",
                            mf->path, partial);
        hp->n_rot = (int)(hp->head_dim * partial);
    }
    if (hp->n_layer > INF_MAX_LAYERS)
        return inf_fail(err, "%s: %d layers, at most %d", mf->path, hp->n_layer, INF_MAX_LAYERS);
    if (!listed)
        for (int l = 0; l < hp->n_layer; l++)
            hp->recurrent[l] = (l + 1) % interval != 0;
    if (hp->ssm_n_v_heads % hp->ssm_n_k_heads || hp->ssm_d_k > INF_DELTA_MAX_DK ||
        hp->ssm_d_v > INF_DELTA_MAX_DK)
        return inf_fail(err,
                        "%s: DeltaNet heads %d (v) over %d (k) of %d/%d: expected v heads a "
                        "multiple of k heads and head sizes up to %d",
                        mf->path, hp->ssm_n_v_heads, hp->ssm_n_k_heads, hp->ssm_d_k, hp->ssm_d_v,
                        INF_DELTA_MAX_DK);
    if (hp->n_rot <= 0 || hp->n_rot % 2 || hp->n_rot > hp->head_dim)
        return inf_fail(err, "%s: %d RoPE dimensions: expected an even number up to head_dim %d",
                        mf->path, hp->n_rot, hp->head_dim);
    if (is_moe(mf)) return read_moe_keys(mf, sparse, err);
    return 0;
}

/* ---- binding ------------------------------------------------------------ */

typedef struct delta {
    float *norm; /* [n_embd] the pre-norm's multiplier */
    inf_weight qkv, z, beta, alpha,
        out;            /* in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj */
    float *conv;        /* [C][K] */
    float *dt_bias, *a; /* [n_v_heads]; a = -exp(A_log) */
    float *out_norm;    /* [d_v] */
} delta;

/* Conv channels: q and k of every K head, then v of every V head. */
static int64_t conv_channels(const inf_hparams *hp) {
    return 2 * (int64_t)hp->ssm_n_k_heads * hp->ssm_d_k + (int64_t)hp->ssm_n_v_heads * hp->ssm_d_v;
}

/* An f32 copy of a small tensor of n values (any shape, any type whose
 * blocks n fills). */
static int bind_floats(float **out, const inf_model_file *mf, const inf_tensor *t, int64_t n,
                       inf_err *err) {
    *out = NULL;
    if (!inf_dtype_get(t->type) || !inf_dtype_row_bytes(t->type, n))
        return inf_fail(err, "%s: tensor %s: type %s cannot hold its %lld values", mf->path,
                        t->name, inf_ggml_type_name(t->type), (long long)n);
    if (t->nbytes < inf_dtype_row_bytes(t->type, n))
        return inf_fail(err, "%s: tensor %s holds %zu bytes, expected %zu", mf->path, t->name,
                        t->nbytes, inf_dtype_row_bytes(t->type, n));
    if (!(*out = inf_alloc((size_t)n * sizeof(float))))
        return inf_fail(err, "%s: tensor %s: out of memory", mf->path, t->name);
    inf_dequantize_row(t->type, *out, t->data, n);
    return 0;
}

/* Finds (and with be, binds) DeltaNet layer l. */
static int delta_bind(delta *w, const inf_model_file *mf, const inf_backend *be, int l,
                      inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    const bool hf = mf->format == INF_FORMAT_HF;
    const int64_t E = hp->n_embd, C = conv_channels(hp), K = hp->ssm_d_conv,
                  V = (int64_t)hp->ssm_n_v_heads * hp->ssm_d_v, H = hp->ssm_n_v_heads;
    const inf_tensor *t[10];
    if (blk_find(&t[0], mf, dn.norm, l, -1, 1, (int64_t[]){E}, true, false, err) ||
        blk_find(&t[1], mf, dn.qkv, l, -1, 2, (int64_t[]){E, C}, false, false, err) ||
        blk_find(&t[2], mf, dn.z, l, -1, 2, (int64_t[]){E, V}, false, false, err) ||
        blk_find(&t[3], mf, dn.beta, l, -1, 2, (int64_t[]){E, H}, false, false, err) ||
        blk_find(&t[4], mf, dn.alpha, l, -1, 2, (int64_t[]){E, H}, false, false, err) ||
        blk_find(&t[5], mf, dn.conv, l, -1, hf ? 3 : 2,
                 hf ? (int64_t[]){K, 1, C} : (int64_t[]){K, C}, true, false, err) ||
        blk_find(&t[6], mf, dn.dt_bias, l, -1, 1, (int64_t[]){H}, true, false, err) ||
        blk_find(&t[7], mf, dn.a, l, -1, 1, (int64_t[]){H}, true, false, err) ||
        blk_find(&t[8], mf, dn.out_norm, l, -1, 1, (int64_t[]){hp->ssm_d_v}, true, false, err) ||
        blk_find(&t[9], mf, dn.out, l, -1, 2, (int64_t[]){V, E}, false, false, err))
        return -1;
    if (!be) return 0;
    if (blk_bind_vector(&w->norm, mf, t[0], E, err) ||
        blk_bind_matrix(&w->qkv, mf, be, t[1], C, E, err) ||
        blk_bind_matrix(&w->z, mf, be, t[2], V, E, err) ||
        blk_bind_matrix(&w->beta, mf, be, t[3], H, E, err) ||
        blk_bind_matrix(&w->alpha, mf, be, t[4], H, E, err) ||
        bind_floats(&w->conv, mf, t[5], C * K, err) ||
        blk_bind_vector(&w->dt_bias, mf, t[6], H, err) ||
        blk_bind_vector(&w->a, mf, t[7], H, err) ||
        blk_bind_vector(&w->out_norm, mf, t[8], hp->ssm_d_v, err) ||
        blk_bind_matrix(&w->out, mf, be, t[9], E, V, err))
        return -1;
    if (hf)
        for (int64_t h = 0; h < H; h++)
            w->a[h] = -expf(w->a[h]); /* A_log */
    return 0;
}

static void delta_release(delta *w, const inf_backend *be) {
    inf_weight *ms[] = {&w->qkv, &w->z, &w->beta, &w->alpha, &w->out};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        blk_release(be, ms[i]);
    float *fs[] = {w->norm, w->conv, w->dt_bias, w->a, w->out_norm};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
        inf_free(fs[i]);
}

/* Hugging Face's zero-centred RMSNorm weights: the multiplier is 1 + w. */
static void one_plus(const inf_model_file *mf, float *w, int64_t n) {
    if (mf->format != INF_FORMAT_HF) return;
    for (int64_t i = 0; i < n; i++)
        w[i] += 1.0f;
}

/* ---- the model ---------------------------------------------------------- */

typedef struct qwen35_layer {
    bool recurrent;
    blk_attn attn; /* attention layers */
    delta d;       /* DeltaNet layers */
    bool sparse;
    blk_ffn ffn;       /* dense layers */
    blk_moe moe;       /* MoE layers: the routed experts, */
    blk_ffn shexp;     /* the shared expert (its norm is moe's) */
    float *shexp_gate; /* [n_embd] */
} qwen35_layer;

/* Checks (be NULL) or binds layer l's MoE FFN: the routed experts (with the
 * post-attention norm), the shared expert and its gate. */
static int moe_layer_bind(qwen35_layer *L, const inf_model_file *mf, const inf_backend *be, int l,
                          inf_err *err) {
    const int64_t E = mf->hp.n_embd, F = mf->hp.n_ff_shexp;
    const blk_ffn_names *n = &shexp_names;
    const inf_tensor *t[4];
    char name[160];
    if (inf_qwen3moe_bind(be ? &L->moe : NULL, mf, be, l, ffn_names.norm, err) ||
        blk_find(&t[0], mf, n->gate, l, -1, 2, (int64_t[]){E, F}, false, false, err) ||
        blk_find(&t[1], mf, n->up, l, -1, 2, (int64_t[]){E, F}, false, false, err) ||
        blk_find(&t[2], mf, n->down, l, -1, 2, (int64_t[]){F, E}, false, false, err))
        return -1;
    blk_name_fmt(name, sizeof name, mf, shexp_gate_name, l, -1);
    t[3] = inf_model_find(mf, name);
    if (!t[3] || t[3]->ne[0] != E || t[3]->ne[1] != 1 || t[3]->n_dims > 2)
        return inf_fail(err, "%s: tensor %s is %s, expected [%lld] weights", mf->path, name,
                        t[3] ? "of another shape" : "missing", (long long)E);
    if (!be) return 0;
    return blk_bind_matrix(&L->shexp.w_gate, mf, be, t[0], F, E, err) ||
                   blk_bind_matrix(&L->shexp.w_up, mf, be, t[1], F, E, err) ||
                   blk_bind_matrix(&L->shexp.w_down, mf, be, t[2], E, F, err) ||
                   bind_floats(&L->shexp_gate, mf, t[3], E, err)
               ? -1
               : 0;
}

/* Activations beyond blk_acts, for max_rows (R) rows. */
typedef struct qwen35_acts {
    float *qg;       /* [R][2 * n_head * head_dim] q_proj's output: per head q, then gate */
    float *gate;     /* [R][n_head * head_dim] the attention's output gate */
    float *mixed;    /* [R][C] in_proj_qkv's output */
    float *conv;     /* [R][C] after the conv and SiLU */
    float *dq, *dk;  /* [R][n_k_heads * d_k] */
    float *dv, *z;   /* [R][n_v_heads * d_v] */
    float *dout;     /* [R][n_v_heads * d_v] the delta rule's output */
    float *beta, *g; /* [R][n_v_heads] */
} qwen35_acts;

typedef struct qwen35 {
    const inf_tensor *token_embd;
    qwen35_layer *layers; /* [n_layer] */
    float *output_norm;   /* [n_embd] */
    inf_weight output;
    blk_acts acts;
    qwen35_acts h;
    inf_delta_shape shape;
    size_t state_floats; /* of one DeltaNet layer's state (inf_model_state_floats) */
} qwen35;

static int bind_file(inf_model_file *mf, inf_err *err) {
    const int blocks = mf->hp.n_layer;
    bool sparse[INF_MAX_LAYERS] = {0};
    if (blocks > INF_MAX_LAYERS)
        return inf_fail(err, "%s: %d layers, at most %d", mf->path, blocks, INF_MAX_LAYERS);
    if (read_keys(mf, sparse, err)) return -1;
    /* the MTP blocks are the file's own: count them for the range check */
    const int trunk = mf->hp.n_layer;
    mf->hp.n_layer = blocks;
    int rc = inf_qwen3_bind_globals(mf, err);
    mf->hp.n_layer = trunk;
    if (rc) return -1;
    for (int l = 0; l < trunk; l++) {
        rc = mf->hp.recurrent[l] ? delta_bind(NULL, mf, NULL, l, err)
                                 : inf_qwen3_attn_bind(NULL, mf, NULL, l, true, err);
        if (rc || (sparse[l] ? moe_layer_bind(NULL, mf, NULL, l, err)
                             : inf_qwen3_ffn_bind(NULL, mf, NULL, l, &ffn_names, err)))
            return inf_fail_ctx(err, "layer %d (%s)", l,
                                mf->hp.recurrent[l] ? "DeltaNet" : "attention");
    }
    return 0;
}

static int acts_alloc(qwen35_acts *h, const inf_hparams *hp, int max_rows) {
    const size_t R = (size_t)max_rows, Q = (size_t)hp->n_head * (size_t)hp->head_dim,
                 C = (size_t)conv_channels(hp),
                 QK = (size_t)hp->ssm_n_k_heads * (size_t)hp->ssm_d_k,
                 V = (size_t)hp->ssm_n_v_heads * (size_t)hp->ssm_d_v, H = (size_t)hp->ssm_n_v_heads;
    h->qg = inf_alloc(R * 2 * Q * sizeof(float));
    h->gate = inf_alloc(R * Q * sizeof(float));
    h->mixed = inf_alloc(R * C * sizeof(float));
    h->conv = inf_alloc(R * C * sizeof(float));
    h->dq = inf_alloc(R * QK * sizeof(float));
    h->dk = inf_alloc(R * QK * sizeof(float));
    h->dv = inf_alloc(R * V * sizeof(float));
    h->z = inf_alloc(R * V * sizeof(float));
    h->dout = inf_alloc(R * V * sizeof(float));
    h->beta = inf_alloc(R * H * sizeof(float));
    h->g = inf_alloc(R * H * sizeof(float));
    return h->qg && h->gate && h->mixed && h->conv && h->dq && h->dk && h->dv && h->z && h->dout &&
                   h->beta && h->g
               ? 0
               : -1;
}

static void acts_free(qwen35_acts *h) {
    float *fs[] = {h->qg, h->gate, h->mixed, h->conv, h->dq, h->dk,
                   h->dv, h->z,    h->dout,  h->beta, h->g};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
        inf_free(fs[i]);
}

static int create(inf_model *m, inf_err *err) {
    const inf_model_file *mf = m->file;
    const inf_hparams *hp = &m->hp;
    const int E = hp->n_embd, D = hp->head_dim;
    qwen35 *w = m->w = calloc(1, sizeof *w);
    if (!w || !(w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers)))
        return inf_fail(err, "out of memory");
    bool sparse[INF_MAX_LAYERS] = {0};
    inf_model_file probe = *mf; /* read_keys writes hp: on a copy */
    probe.hp.n_layer = hp->n_layer;
    if (is_moe(mf) && read_moe_keys(&probe, sparse, err)) return -1;
    if (inf_qwen3_bind_head(mf, m->be, &w->token_embd, &w->output, &w->output_norm, err)) return -1;
    one_plus(mf, w->output_norm, E);
    for (int l = 0; l < hp->n_layer; l++) {
        qwen35_layer *L = &w->layers[l];
        L->recurrent = hp->recurrent[l];
        L->sparse = sparse[l];
        int rc = L->recurrent ? delta_bind(&L->d, mf, m->be, l, err)
                              : inf_qwen3_attn_bind(&L->attn, mf, m->be, l, true, err);
        if (rc || (L->sparse ? moe_layer_bind(L, mf, m->be, l, err)
                             : inf_qwen3_ffn_bind(&L->ffn, mf, m->be, l, &ffn_names, err)))
            return inf_fail_ctx(err, "layer %d", l);
        if (L->recurrent) {
            one_plus(mf, L->d.norm, E);
        } else {
            one_plus(mf, L->attn.norm, E);
            one_plus(mf, L->attn.q_norm, D);
            one_plus(mf, L->attn.k_norm, D);
        }
        one_plus(mf, L->sparse ? L->moe.norm : L->ffn.norm, E);
    }
    w->shape = (inf_delta_shape){.n_k_heads = hp->ssm_n_k_heads,
                                 .n_v_heads = hp->ssm_n_v_heads,
                                 .d_k = hp->ssm_d_k,
                                 .d_v = hp->ssm_d_v,
                                 .k_tiled = mf->format == INF_FORMAT_GGUF,
                                 .eps = 1e-6f};
    w->state_floats = inf_model_state_floats(hp);
    if (blk_acts_alloc(&w->acts, hp, m->max_rows) || acts_alloc(&w->h, hp, m->max_rows))
        return inf_fail(err, "out of memory for the model's buffers (batch %d)", m->max_rows);
    return 0;
}

static void free_model(inf_model *m) {
    qwen35 *w = m->w;
    if (!w) return;
    for (int l = 0; w->layers && l < m->hp.n_layer; l++) {
        inf_qwen3_attn_release(&w->layers[l].attn, m->be);
        delta_release(&w->layers[l].d, m->be);
        inf_qwen3_ffn_release(&w->layers[l].ffn, m->be);
        inf_qwen3moe_release(&w->layers[l].moe, m->be);
        inf_qwen3_ffn_release(&w->layers[l].shexp, m->be);
        inf_free(w->layers[l].shexp_gate);
    }
    free(w->layers);
    blk_release(m->be, &w->output);
    inf_free(w->output_norm);
    blk_acts_free(&w->acts);
    acts_free(&w->h);
    free(w);
}

/* ---- the forward pass --------------------------------------------------- */

static float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

/* torch's softplus (beta 1, threshold 20) */
static float softplus(float x) {
    return x > 20.0f ? x : log1pf(expf(x));
}

/* x += o_proj(attention(q, k, v) * sigmoid(gate)), from rmsnorm(x). */
static void gated_attention(const inf_model *m, qwen35 *w, const inf_batch *b,
                            const inf_kv_view *kv, int l, const blk_attn *at) {
    const inf_backend *be = m->be;
    blk_acts *a = &w->acts;
    const int T = b->n_rows, E = m->hp.n_embd, D = m->hp.head_dim, NH = m->hp.n_head;
    const int64_t Q = (int64_t)NH * D;
    be->rmsnorm(be, a->xb, a->x, at->norm, T, E, m->hp.rms_eps);
    blk_matmul_rows(be, b, (float *const[]){w->h.qg, a->k, a->v}, a->xb,
                    (const inf_weight *const[]){&at->wq, &at->wk, &at->wv}, 3);
    for (int64_t r = 0; r < T; r++)
        for (int h = 0; h < NH; h++) {
            const float *src = w->h.qg + (r * NH + h) * 2 * D;
            memcpy(a->q + r * Q + (int64_t)h * D, src, (size_t)D * sizeof(float));
            memcpy(w->h.gate + r * Q + (int64_t)h * D, src + D, (size_t)D * sizeof(float));
        }
    blk_attn_core(m, a, b, kv, l, at);
    for (int64_t i = 0; i < T * Q; i++)
        a->att[i] *= sigmoid(w->h.gate[i]);
    blk_matmul_rows(be, b, (float *const[]){a->xb}, a->att, (const inf_weight *const[]){&at->wo},
                    1);
    be->add(be, a->x, a->xb, (int64_t)T * E);
}

/* Row r's conv input, decay and write strength into its sequence's rewind
 * log (inf_model_log_floats' layout), where the log has a row for it. */
static void log_row(const inf_hparams *hp, const qwen35_acts *h, const inf_batch *b,
                    const inf_kv_view *v, int r) {
    const int i = b->pos[r] - v->log_from, R = v->log_rows, NV = hp->ssm_n_v_heads;
    if (!v->log || v->log_from < 0 || i < 0 || i >= R) return;
    const int64_t C = conv_channels(hp);
    memcpy(v->log + i * C, h->mixed + r * C, (size_t)C * sizeof(float));
    memcpy(v->log + R * C + (int64_t)i * NV, h->g + (int64_t)r * NV, (size_t)NV * sizeof(float));
    memcpy(v->log + R * (C + NV) + (int64_t)i * NV, h->beta + (int64_t)r * NV,
           (size_t)NV * sizeof(float));
}

/* The delta rule over rows [r, r + n) of h (their conv inputs in mixed, g
 * and beta set), continuing the states conv_state and delta_state. */
static void delta_rows(const inf_model *m, qwen35 *w, const delta *d, const float *mixed,
                       const float *g, const float *beta, float *conv_state, float *delta_state,
                       int r, int n) {
    const inf_backend *be = m->be;
    const inf_hparams *hp = &m->hp;
    qwen35_acts *h = &w->h;
    const int64_t C = conv_channels(hp), QK = (int64_t)hp->ssm_n_k_heads * hp->ssm_d_k,
                  V = (int64_t)hp->ssm_n_v_heads * hp->ssm_d_v;
    be->ssm_conv(be, h->conv + r * C, mixed, conv_state, d->conv, n, (int)C, hp->ssm_d_conv);
    for (int t = r; t < r + n; t++) {
        const float *row = h->conv + (int64_t)t * C;
        memcpy(h->dq + t * QK, row, (size_t)QK * sizeof(float));
        memcpy(h->dk + t * QK, row + QK, (size_t)QK * sizeof(float));
        memcpy(h->dv + t * V, row + 2 * QK, (size_t)V * sizeof(float));
    }
    be->gated_delta(be, h->dout + r * V, h->dq + r * QK, h->dk + r * QK, h->dv + r * V, g, beta,
                    delta_state, n, &w->shape);
}

/* x += out_proj(gated_norm(delta_rule(conv(in_proj_qkv h)), z)), h = rmsnorm(x);
 * each span continues its sequence's state (zeroed at position 0). */
static void deltanet(const inf_model *m, qwen35 *w, const inf_batch *b, const inf_kv_view *kv,
                     int l, const delta *d) {
    const inf_backend *be = m->be;
    const inf_hparams *hp = &m->hp;
    blk_acts *a = &w->acts;
    qwen35_acts *h = &w->h;
    const int T = b->n_rows, E = hp->n_embd, NV = hp->ssm_n_v_heads, K = hp->ssm_d_conv;
    const int64_t C = conv_channels(hp), V = (int64_t)NV * hp->ssm_d_v;

    be->rmsnorm(be, a->xb, a->x, d->norm, T, E, hp->rms_eps);
    blk_matmul_rows(be, b, (float *const[]){h->mixed, h->z, h->beta, h->g}, a->xb,
                    (const inf_weight *const[]){&d->qkv, &d->z, &d->beta, &d->alpha}, 4);
    for (int64_t i = 0; i < (int64_t)T * NV; i++) {
        const int hd = (int)(i % NV);
        h->beta[i] = sigmoid(h->beta[i]);
        h->g[i] = d->a[hd] * softplus(h->g[i] + d->dt_bias[hd]);
    }
    for (int r = 0, n; r < T; r += n) {
        n = blk_span_len(b, r);
        const inf_kv_view *v = &kv[(int64_t)b->seq[r] * hp->n_layer + l];
        float *conv_state = v->state, *delta_state = conv_state + (size_t)(K - 1) * (size_t)C;
        if (b->pos[r] == 0) memset(conv_state, 0, w->state_floats * sizeof(float));
        for (int t = r; t < r + n; t++)
            log_row(hp, h, b, v, t);
        delta_rows(m, w, d, h->mixed + r * C, h->g + (int64_t)r * NV, h->beta + (int64_t)r * NV,
                   conv_state, delta_state, r, n);
    }
    be->rmsnorm(be, h->dout, h->dout, d->out_norm, T * NV, hp->ssm_d_v, hp->rms_eps);
    be->swiglu(be, h->dout, h->z, h->dout, (int64_t)T * V);
    blk_matmul_rows(be, b, (float *const[]){a->xb}, h->dout, (const inf_weight *const[]){&d->out},
                    1);
    be->add(be, a->x, a->xb, (int64_t)T * E);
}

/* Redoes rows from..n-1 of each DeltaNet layer's state from its log (the
 * rows the forward pass ran them as: the ops give the same bits in pieces
 * as at once), max_rows at a time through the activations' rows. */
static void replay(inf_model *m, const inf_kv_view *kv, int from, int n) {
    qwen35 *w = m->w;
    const inf_hparams *hp = &m->hp;
    const int64_t C = conv_channels(hp), NV = hp->ssm_n_v_heads;
    for (int l = 0; l < hp->n_layer; l++) {
        const qwen35_layer *L = &w->layers[l];
        const inf_kv_view *v = &kv[l];
        if (!L->recurrent) continue;
        INF_ASSERT(v->log && v->log_from == from && n - from <= v->log_rows);
        const int64_t R = v->log_rows;
        float *conv_state = v->state, *delta_state = conv_state + (hp->ssm_d_conv - 1) * C;
        if (from == 0) memset(conv_state, 0, w->state_floats * sizeof(float));
        for (int i = 0, k; i < n - from; i += k) {
            k = n - from - i < m->max_rows ? n - from - i : m->max_rows;
            delta_rows(m, w, &L->d, v->log + i * C, v->log + R * C + i * NV,
                       v->log + R * (C + NV) + i * NV, conv_state, delta_state, 0, k);
        }
    }
}

/* After blk_ffn_moe (x holds the routed experts' sum, a->xb still the normed
 * h): x += sigmoid(shared_gate . h) * shared_expert(h). */
static void shared_expert(const inf_model *m, qwen35 *w, const inf_batch *b,
                          const qwen35_layer *L) {
    const inf_backend *be = m->be;
    blk_acts *a = &w->acts;
    const int T = b->n_rows, E = m->hp.n_embd;
    const int64_t F = L->shexp.w_gate.n_out;
    blk_matmul_rows(be, b, (float *const[]){a->gate, a->up}, a->xb,
                    (const inf_weight *const[]){&L->shexp.w_gate, &L->shexp.w_up}, 2);
    be->swiglu(be, a->gate, a->gate, a->up, T * F);
    blk_matmul_rows(be, b, (float *const[]){a->ye}, a->gate,
                    (const inf_weight *const[]){&L->shexp.w_down}, 1);
    for (int64_t r = 0; r < T; r++) {
        const float *h = a->xb + r * E, *y = a->ye + r * E;
        float dot = 0;
        for (int i = 0; i < E; i++)
            dot += h[i] * L->shexp_gate[i];
        const float s = sigmoid(dot);
        float *x = a->x + r * E;
        for (int i = 0; i < E; i++)
            x[i] += s * y[i];
    }
}

static int forward(inf_model *m, const inf_batch *b, const inf_kv_view *kv, float *logits,
                   inf_err *err) {
    qwen35 *w = m->w;
    blk_acts *a = &w->acts;
    m->be->embed(m->be, a->x, w->token_embd, b->tokens, b->n_rows);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const qwen35_layer *L = &w->layers[l];
        if (L->recurrent)
            deltanet(m, w, b, kv, l, &L->d);
        else
            gated_attention(m, w, b, kv, l, &L->attn);
        if (L->sparse) {
            blk_ffn_moe(m, a, b, &L->moe);
            shared_expert(m, w, b, L);
        } else {
            blk_ffn_swiglu(m, a, b, &L->ffn);
        }
        if (m->be->take_error(m->be, err)) return -1;
    }
    return blk_logits(m, a, b, w->output_norm, &w->output, logits, err);
}

/* ---- files -------------------------------------------------------------- */

static void facts(const inf_model_file *mf, inf_model_facts *f) {
    blk_decode_facts(mf, f, inf_qwen3_embd, inf_qwen3_output, ffn_names.gate);
}

static const char *const gguf_archs[] = {"qwen35", NULL};
static const char *const hf_types[] = {"qwen3_5", "qwen3_5_text", NULL};
static const char *const gguf_archs_moe[] = {"qwen35moe", NULL};
static const char *const hf_types_moe[] = {"qwen3_5_moe", "qwen3_5_moe_text", NULL};

const inf_arch inf_arch_qwen35 = {
    .name = "qwen35",
    .gguf_archs = gguf_archs,
    .hf_types = hf_types,
    .bind_file = bind_file,
    .create = create,
    .free_model = free_model,
    .forward = forward,
    .replay = replay,
    .gguf_plan = inf_qwen35_gguf_plan,
    .facts = facts,
};

const inf_arch inf_arch_qwen35moe = {
    .name = "qwen35moe",
    .gguf_archs = gguf_archs_moe,
    .hf_types = hf_types_moe,
    .bind_file = bind_file,
    .create = create,
    .free_model = free_model,
    .forward = forward,
    .replay = replay,
    .gguf_plan = inf_qwen35_gguf_plan,
    .facts = facts,
};
