/* qwen35, qwen35moe: a Hugging Face folder as llama.cpp's GGUF (see
 * arch_qwen35.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch_qwen3.h"
#include "model/arch_qwen35.h"
#include "model/arch_qwen3moe.h"

typedef struct plan_ctx {
    const inf_model_file *mf;
    inf_gguf_plan *p;
    int nk, r, dv;
} plan_ctx;

/* The HF V head at GGUF position g. */
static int hf_head(const plan_ctx *c, int g) {
    return (g % c->nk) * c->r + g / c->nk;
}

static int add(const plan_ctx *c, const char *name, int l, const inf_tensor *t, inf_row_map map) {
    if (inf_gguf_plan_add(c->p, name, l, t)) return -1;
    c->p->t[c->p->n - 1].map = map;
    return 0;
}

/* t's rows with its V-head blocks of blk rows (after `keep` rows) tiled;
 * the GGUF shape {ne0, rows}. */
static int add_vrows(const plan_ctx *c, const char *name, int l, const inf_tensor *t, int64_t keep,
                     int64_t blk) {
    const int nv = c->nk * c->r;
    inf_rows *runs = malloc((size_t)(nv + 1) * sizeof *runs);
    if (!runs) return -1;
    int n = 0;
    if (keep) runs[n++] = (inf_rows){t, 0, keep};
    for (int g = 0; g < nv; g++)
        runs[n++] = (inf_rows){t, keep + (int64_t)hf_head(c, g) * blk, blk};
    const int64_t ne[2] = {t->ne[0], keep + (int64_t)nv * blk};
    int rc = inf_gguf_plan_add_runs(c->p, name, l, 2, ne, runs, n);
    free(runs);
    return rc;
}

/* t (one row per output row) with its elements' V-head blocks of blk tiled */
static int add_vcols(const plan_ctx *c, const char *name, int l, const inf_tensor *t, int64_t blk,
                     inf_row_map map) {
    if (add(c, name, l, t, map)) return -1;
    inf_gguf_tensor *g = &c->p->t[c->p->n - 1];
    if (!(g->perm = malloc((size_t)t->ne[0] * sizeof *g->perm))) return -1;
    for (int64_t i = 0; i < t->ne[0]; i++)
        g->perm[i] = (int32_t)((int64_t)hf_head(c, (int)(i / blk)) * blk + i % blk);
    return 0;
}

/* One HF tensor of layer l (its name after "model.layers.L.") as GGUF. */
static int plan_layer_tensor(const plan_ctx *c, const inf_tensor *t, int l, const char *s) {
    const inf_hparams *hp = &c->mf->hp;
    const int64_t qk = 2 * (int64_t)hp->ssm_n_k_heads * hp->ssm_d_k;
    char name[96];
#define G(fmt) (snprintf(name, sizeof name, "blk.%d." fmt, l), name)
    static const struct {
        const char *hf, *gguf;
        inf_row_map map;
    } same[] = {
        {"input_layernorm.weight", "attn_norm.weight", INF_ROW_ONE_PLUS},
        {"post_attention_layernorm.weight", "post_attention_norm.weight", INF_ROW_ONE_PLUS},
        {"self_attn.q_norm.weight", "attn_q_norm.weight", INF_ROW_ONE_PLUS},
        {"self_attn.k_norm.weight", "attn_k_norm.weight", INF_ROW_ONE_PLUS},
        {"self_attn.q_proj.weight", "attn_q.weight", INF_ROW_COPY},
        {"self_attn.k_proj.weight", "attn_k.weight", INF_ROW_COPY},
        {"self_attn.v_proj.weight", "attn_v.weight", INF_ROW_COPY},
        {"self_attn.o_proj.weight", "attn_output.weight", INF_ROW_COPY},
        {"mlp.gate_proj.weight", "ffn_gate.weight", INF_ROW_COPY},
        {"mlp.up_proj.weight", "ffn_up.weight", INF_ROW_COPY},
        {"mlp.down_proj.weight", "ffn_down.weight", INF_ROW_COPY},
        {"mlp.gate.weight", "ffn_gate_inp.weight", INF_ROW_COPY},
        {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", INF_ROW_COPY},
        {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", INF_ROW_COPY},
        {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", INF_ROW_COPY},
        {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", INF_ROW_COPY},
        {"linear_attn.norm.weight", "ssm_norm.weight", INF_ROW_COPY},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (!strcmp(s, same[i].hf)) {
            snprintf(name, sizeof name, "blk.%d.%s", l, same[i].gguf);
            return add(c, name, l, t, same[i].map);
        }
    if (!strcmp(s, "linear_attn.in_proj_qkv.weight"))
        return add_vrows(c, G("attn_qkv.weight"), l, t, qk, c->dv);
    if (!strcmp(s, "linear_attn.conv1d.weight")) /* [C, 1, K]: a row of K per channel */
        return add_vrows(c, G("ssm_conv1d.weight"), l, t, qk, c->dv);
    if (!strcmp(s, "linear_attn.in_proj_z.weight"))
        return add_vrows(c, G("attn_gate.weight"), l, t, 0, c->dv);
    if (!strcmp(s, "linear_attn.in_proj_b.weight"))
        return add_vrows(c, G("ssm_beta.weight"), l, t, 0, 1);
    if (!strcmp(s, "linear_attn.in_proj_a.weight"))
        return add_vrows(c, G("ssm_alpha.weight"), l, t, 0, 1);
    if (!strcmp(s, "linear_attn.dt_bias"))
        return add_vcols(c, G("ssm_dt.bias"), l, t, 1, INF_ROW_COPY);
    if (!strcmp(s, "linear_attn.A_log")) return add_vcols(c, G("ssm_a"), l, t, 1, INF_ROW_NEG_EXP);
    if (!strcmp(s, "linear_attn.out_proj.weight"))
        return add_vcols(c, G("ssm_out.weight"), l, t, c->dv, INF_ROW_COPY);
#undef G
    return 1; /* not a tensor of this layer's */
}

int inf_qwen35_gguf_plan(const inf_model_file *mf, inf_gguf_plan *p, inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    const plan_ctx c = {.mf = mf,
                        .p = p,
                        .nk = hp->ssm_n_k_heads,
                        .r = hp->ssm_n_v_heads / hp->ssm_n_k_heads,
                        .dv = hp->ssm_d_v};
    for (int i = 0; i < mf->n_tensors; i++) {
        const inf_tensor *t = &mf->tensors[i];
        int l, at = 0;
        if (!strncmp(t->name, "mtp.", 4)) continue; /* the MTP layers: not converted */
        if (sscanf(t->name, "model.layers.%d.%n", &l, &at) == 1 && at > 0) {
            if (strstr(t->name, ".mlp.experts.")) continue; /* stacked below */
            int rc = plan_layer_tensor(&c, t, l, t->name + at);
            if (rc < 0) return inf_fail(err, "out of memory");
            if (rc > 0)
                return inf_fail(err, "%s: tensor %s is not part of a %s model", mf->path, t->name,
                                mf->arch);
            continue;
        }
        if (!strcmp(t->name, "model.norm.weight")) {
            if (add(&c, "output_norm.weight", -1, t, INF_ROW_ONE_PLUS))
                return inf_fail(err, "out of memory");
            continue;
        }
        if (inf_qwen3_gguf_plan_add(mf, p, t, err)) return -1; /* the embedding, the head */
    }
    for (int l = 0; l < hp->n_layer; l++)
        if (inf_qwen3moe_plan_experts(mf, p, l, err)) return -1;
    return 0;
}
