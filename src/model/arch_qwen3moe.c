/* qwen3moe: Qwen3's mixture-of-experts models (Qwen3-30B-A3B,
 * Qwen3-235B-A22B, Qwen3-Coder-30B-A3B), after transformers'
 * modeling_qwen3_moe.
 *
 * Per layer: the Qwen3 attention block (as qwen3), then, in a sparse layer,
 * a router ([n_embd → n_expert], F32 in GGUF) → softmax over all experts →
 * the top n_expert_used → renormalized to sum 1 when norm_topk_prob (GGUF
 * files carry no such key: llama.cpp always renormalizes) → SwiGLU per chosen
 * expert → the weighted sum; no shared expert, no bias. A layer is dense (the
 * plain SwiGLU FFN of intermediate_size) when it is listed in
 * mlp_only_layers or off the decoder_sparse_step (Hugging Face), or has no
 * router (GGUF). The head is untied in the released models.
 *
 * Experts as files store them, each becoming one matrix per expert (an
 * inf_weight, so prepare_weight packs each on its own):
 *   GGUF   ffn_{gate,up}_exps {n_embd, n_ff_exp, n_expert} and ffn_down_exps
 *          {n_ff_exp, n_embd, n_expert}, or the fused ffn_gate_up_exps
 *          {n_embd, 2·n_ff_exp, n_expert} (gate rows first);
 *   HF     mlp.experts.E.{gate,up,down}_proj.weight, one tensor per expert,
 *          or transformers v5's fused mlp.experts.gate_up_proj [E, 2F, H]
 *          (gate first) and mlp.experts.down_proj [E, H, F]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/arch_qwen3.h"
#include "model/arch_qwen3moe.h"
#include "model/blocks.h"
#include "util/mem.h"

/* ---- names and keys ----------------------------------------------------- */

static const blk_name router_name = {"blk.%d.ffn_gate_inp.weight",
                                     "model.layers.%d.mlp.gate.weight"};
/* 3-D: every expert in one tensor */
static const blk_name gate_exps = {"blk.%d.ffn_gate_exps.weight", NULL};
static const blk_name up_exps = {"blk.%d.ffn_up_exps.weight", NULL};
static const blk_name down_exps = {"blk.%d.ffn_down_exps.weight",
                                   "model.layers.%d.mlp.experts.down_proj"};
static const blk_name gate_up_exps = {"blk.%d.ffn_gate_up_exps.weight",
                                      "model.layers.%d.mlp.experts.gate_up_proj"};
/* HF: one tensor per expert ("%d" layer, then expert) */
static const blk_name expert_gate = {NULL, "model.layers.%d.mlp.experts.%d.gate_proj.weight"};
static const blk_name expert_up = {NULL, "model.layers.%d.mlp.experts.%d.up_proj.weight"};
static const blk_name expert_down = {NULL, "model.layers.%d.mlp.experts.%d.down_proj.weight"};

#define MAX_LAYERS 4096

/* Reads the expert counts; fills sparse[l] for every layer. */
int inf_qwen3moe_read_keys(inf_model_file *mf, bool *sparse, inf_err *err) {
    inf_hparams *hp = &mf->hp;
    if (hp->n_layer > MAX_LAYERS)
        return inf_fail(err, "%s: %d layers, at most %d", mf->path, hp->n_layer, MAX_LAYERS);
    if (mf->format == INF_FORMAT_GGUF) {
        char k1[96], k2[96], k3[96];
        snprintf(k1, sizeof k1, "%s.expert_count", mf->arch);
        snprintf(k2, sizeof k2, "%s.expert_used_count", mf->arch);
        snprintf(k3, sizeof k3, "%s.expert_feed_forward_length", mf->arch);
        if (blk_key_int(mf, k1, -1, &hp->n_expert, err) < 0 ||
            blk_key_int(mf, k2, -1, &hp->n_expert_used, err) < 0 ||
            blk_key_int(mf, k3, -1, &hp->n_ff_exp, err) < 0)
            return -1;
        hp->norm_topk_prob = true;
        for (int l = 0; l < hp->n_layer; l++) {
            char name[96];
            blk_name_fmt(name, sizeof name, mf, router_name, l, -1);
            sparse[l] = inf_model_find(mf, name) != NULL;
        }
    } else {
        int step, r = blk_key_int(mf, "num_experts", 0, &hp->n_expert, err);
        if (r < 0) return -1;
        if (r == 0 && blk_key_int(mf, "num_local_experts", -1, &hp->n_expert, err) < 0) return -1;
        if (blk_key_int(mf, "num_experts_per_tok", -1, &hp->n_expert_used, err) < 0 ||
            blk_key_int(mf, "moe_intermediate_size", -1, &hp->n_ff_exp, err) < 0 ||
            blk_key_int(mf, "decoder_sparse_step", 1, &step, err) < 0)
            return -1;
        bool norm = false; /* transformers' Qwen3MoeConfig default */
        if (inf_model_meta_bool(mf, "norm_topk_prob", &norm, err) < 0) return -1;
        hp->norm_topk_prob = norm;
        int64_t only[MAX_LAYERS];
        int n_only;
        if (inf_model_meta_ints(mf, "mlp_only_layers", only, MAX_LAYERS, &n_only, err) < 0)
            return -1;
        for (int l = 0; l < hp->n_layer; l++)
            sparse[l] = (l + 1) % step == 0;
        for (int i = 0; i < n_only; i++) {
            if (only[i] < 0 || only[i] >= hp->n_layer)
                return inf_fail(err, "%s: mlp_only_layers[%d] is %lld, expected a layer 0..%d",
                                mf->path, i, (long long)only[i], hp->n_layer - 1);
            sparse[only[i]] = false;
        }
    }
    if (hp->n_expert_used > hp->n_expert)
        return inf_fail(err, "%s: %d experts used per token, but the model has %d", mf->path,
                        hp->n_expert_used, hp->n_expert);
    return 0;
}

/* ---- binding the experts ------------------------------------------------ */

/* Expert e's slice of rows [r0, r0 + n) of a 3-D tensor t {n_in, rows, X}:
 * an ordinary [n][n_in] matrix of t's type. */
static int slice(inf_tensor *out, const inf_model_file *mf, const inf_tensor *t, int e, int64_t r0,
                 int64_t n, inf_err *err) {
    const size_t rb = inf_dtype_row_bytes(t->type, t->ne[0]);
    if (!inf_dtype_get(t->type) || rb == 0)
        return inf_fail(err, "%s: tensor %s: type %s with rows of %lld is not supported", mf->path,
                        t->name, inf_ggml_type_name(t->type), (long long)t->ne[0]);
    if (t->nbytes < rb * (size_t)t->ne[1] * (size_t)t->ne[2])
        return inf_fail(err, "%s: tensor %s holds %zu bytes, expected %zu", mf->path, t->name,
                        t->nbytes, rb * (size_t)t->ne[1] * (size_t)t->ne[2]);
    const size_t at = ((size_t)e * (size_t)t->ne[1] + (size_t)r0) * rb;
    *out = (inf_tensor){.name = t->name,
                        .type = t->type,
                        .n_dims = 2,
                        .ne = {t->ne[0], n, 1, 1},
                        .data = (const char *)t->data + at,
                        .nbytes = rb * (size_t)n,
                        .offset = t->offset + at,
                        .file_index = t->file_index};
    return 0;
}

/* A Hugging Face gate_up_proj of shape [X, E, 2F] (ne {2F, E, X}) with
 * down_proj [X, F, E]: the x·W layout of Qwen3-VL-MoE's experts, not
 * transformers v5's W·x [X, 2F, E] and [X, E, F]. Where 2F = E the first
 * fits both; down_proj then tells (F = E too cannot be). */
static bool transposed_experts(const inf_model_file *mf, int l) {
    char name[128];
    blk_name_fmt(name, sizeof name, mf, gate_up_exps, l, -1);
    const inf_tensor *t = inf_model_find(mf, name);
    blk_name_fmt(name, sizeof name, mf, down_exps, l, -1);
    const inf_tensor *d = inf_model_find(mf, name);
    const inf_hparams *hp = &mf->hp;
    return t && t->n_dims == 3 && t->ne[0] == 2 * hp->n_ff_exp && t->ne[1] == hp->n_embd &&
           (!d || (d->ne[0] == hp->n_embd && d->ne[1] == hp->n_ff_exp));
}

/* Checks (be NULL: at open) or binds (w, be) layer l's MoE FFN. */
int inf_qwen3moe_bind(blk_moe *w, const inf_model_file *mf, const inf_backend *be, int l,
                      blk_name norm_name, inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, X = hp->n_expert;
    const bool gguf = mf->format == INF_FORMAT_GGUF;
    const inf_tensor *norm, *router, *gu = NULL, *g = NULL, *u = NULL, *d = NULL;
    if (!gguf && transposed_experts(mf, l))
        return inf_fail(err,
                        "layer %d: the experts are stored for x·W (mlp.experts.gate_up_proj [%lld, "
                        "%lld, %lld], Qwen3-VL-MoE's layout); inferno reads that layout only from "
                        "GGUF (llama.cpp's converter transposes it)",
                        l, (long long)X, (long long)E, (long long)(2 * F));
    if (blk_find(&norm, mf, norm_name, l, -1, 1, (int64_t[]){E}, true, false, err) ||
        blk_find(&router, mf, router_name, l, -1, 2, (int64_t[]){E, X}, false, false, err) ||
        blk_find(&gu, mf, gate_up_exps, l, -1, 3, (int64_t[]){E, 2 * F, X}, false, true, err))
        return -1;
    /* which layout: 3-D (GGUF, HF fused) or one tensor per expert (HF) */
    const bool stacked = gguf || gu;
    if (stacked) {
        if ((!gu &&
             (blk_find(&g, mf, gate_exps, l, -1, 3, (int64_t[]){E, F, X}, false, false, err) ||
              blk_find(&u, mf, up_exps, l, -1, 3, (int64_t[]){E, F, X}, false, false, err))) ||
            blk_find(&d, mf, down_exps, l, -1, 3, (int64_t[]){F, E, X}, false, false, err))
            return -1;
    } else {
        for (int e = 0; e < X; e++) {
            const inf_tensor *t;
            if (blk_find(&t, mf, expert_gate, l, e, 2, (int64_t[]){E, F}, false, false, err) ||
                blk_find(&t, mf, expert_up, l, e, 2, (int64_t[]){E, F}, false, false, err) ||
                blk_find(&t, mf, expert_down, l, e, 2, (int64_t[]){F, E}, false, false, err))
                return -1;
        }
    }
    if (!be) return 0;

    w->n_expert = (int)X;
    w->w_gate = calloc((size_t)X, sizeof *w->w_gate);
    w->w_up = calloc((size_t)X, sizeof *w->w_up);
    w->w_down = calloc((size_t)X, sizeof *w->w_down);
    if (stacked) w->slices = calloc((size_t)(3 * X), sizeof *w->slices);
    if (!w->w_gate || !w->w_up || !w->w_down || (stacked && !w->slices))
        return inf_fail(err, "out of memory for %lld experts", (long long)X);
    if (blk_bind_vector(&w->norm, mf, norm, E, err) ||
        blk_bind_matrix(&w->router, mf, be, router, X, E, err))
        return -1;
    for (int e = 0; e < X; e++) {
        const inf_tensor *tg, *tu, *td;
        if (stacked) {
            inf_tensor *s = &w->slices[3 * e];
            if ((gu ? slice(&s[0], mf, gu, e, 0, F, err) || slice(&s[1], mf, gu, e, F, F, err)
                    : slice(&s[0], mf, g, e, 0, F, err) || slice(&s[1], mf, u, e, 0, F, err)) ||
                slice(&s[2], mf, d, e, 0, E, err))
                return -1;
            tg = &s[0], tu = &s[1], td = &s[2];
        } else {
            blk_find(&tg, mf, expert_gate, l, e, 2, (int64_t[]){E, F}, false, false, err);
            blk_find(&tu, mf, expert_up, l, e, 2, (int64_t[]){E, F}, false, false, err);
            blk_find(&td, mf, expert_down, l, e, 2, (int64_t[]){F, E}, false, false, err);
        }
        if (blk_bind_matrix(&w->w_gate[e], mf, be, tg, F, E, err) ||
            blk_bind_matrix(&w->w_up[e], mf, be, tu, F, E, err) ||
            blk_bind_matrix(&w->w_down[e], mf, be, td, E, F, err))
            return inf_fail_ctx(err, "expert %d", e);
    }
    return 0;
}

void inf_qwen3moe_release(blk_moe *w, const inf_backend *be) {
    for (int e = 0; e < w->n_expert; e++) {
        if (w->w_gate) blk_release(be, &w->w_gate[e]);
        if (w->w_up) blk_release(be, &w->w_up[e]);
        if (w->w_down) blk_release(be, &w->w_down[e]);
    }
    blk_release(be, &w->router);
    free(w->w_gate);
    free(w->w_up);
    free(w->w_down);
    free(w->slices);
    inf_free(w->norm);
}

/* ---- the model ---------------------------------------------------------- */

typedef struct moe_layer {
    blk_attn attn;
    bool sparse;
    blk_moe moe; /* sparse layers */
    blk_ffn ffn; /* dense layers (mlp_only_layers) */
} moe_layer;

typedef struct qwen3moe {
    const inf_tensor *token_embd; /* [n_vocab][n_embd] */
    moe_layer *layers;            /* [n_layer] */
    float *output_norm;           /* [n_embd] */
    inf_weight output;            /* [n_vocab][n_embd] */
    blk_acts acts;
} qwen3moe;

static int bind_file(inf_model_file *mf, inf_err *err) {
    bool *sparse = calloc((size_t)(mf->hp.n_layer > 0 ? mf->hp.n_layer : 1), sizeof *sparse);
    if (!sparse) return inf_fail(err, "%s: out of memory", mf->path);
    int rc = -1;
    if (inf_qwen3moe_read_keys(mf, sparse, err) || inf_qwen3_bind_globals(mf, err)) goto done;
    for (int l = 0; l < mf->hp.n_layer; l++)
        if (inf_qwen3_attn_bind(NULL, mf, NULL, l, false, err) ||
            (sparse[l] ? inf_qwen3moe_bind(NULL, mf, NULL, l, inf_qwen3_ffn_names.norm, err)
                       : inf_qwen3_ffn_bind(NULL, mf, NULL, l, &inf_qwen3_ffn_names, err)))
            goto done;
    rc = 0;
done:
    free(sparse);
    return rc;
}

static int create(inf_model *m, inf_err *err) {
    const inf_model_file *mf = m->file;
    const inf_hparams *hp = &m->hp;
    qwen3moe *w = m->w = calloc(1, sizeof *w);
    bool *sparse = calloc((size_t)hp->n_layer, sizeof *sparse);
    if (!w || !sparse || !(w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers))) {
        free(sparse);
        return inf_fail(err, "out of memory");
    }
    int rc = -1;
    inf_model_file probe = *mf; /* inf_qwen3moe_read_keys writes hp: on a copy */
    if (inf_qwen3moe_read_keys(&probe, sparse, err) ||
        inf_qwen3_bind_head(mf, m->be, &w->token_embd, &w->output, &w->output_norm, err))
        goto done;
    for (int l = 0; l < hp->n_layer; l++) {
        moe_layer *L = &w->layers[l];
        L->sparse = sparse[l];
        if (inf_qwen3_attn_bind(&L->attn, mf, m->be, l, false, err) ||
            (L->sparse ? inf_qwen3moe_bind(&L->moe, mf, m->be, l, inf_qwen3_ffn_names.norm, err)
                       : inf_qwen3_ffn_bind(&L->ffn, mf, m->be, l, &inf_qwen3_ffn_names, err))) {
            inf_fail_ctx(err, "layer %d", l);
            goto done;
        }
    }
    if (blk_acts_alloc(&w->acts, hp, m->max_rows)) {
        inf_fail(err, "out of memory for the model's buffers (batch %d)", m->max_rows);
        goto done;
    }
    rc = 0;
done:
    free(sparse);
    return rc;
}

static void free_model(inf_model *m) {
    qwen3moe *w = m->w;
    if (!w) return;
    for (int l = 0; w->layers && l < m->hp.n_layer; l++) {
        inf_qwen3_attn_release(&w->layers[l].attn, m->be);
        inf_qwen3moe_release(&w->layers[l].moe, m->be);
        inf_qwen3_ffn_release(&w->layers[l].ffn, m->be);
    }
    free(w->layers);
    blk_release(m->be, &w->output);
    inf_free(w->output_norm);
    blk_acts_free(&w->acts);
    free(w);
}

static int forward(inf_model *m, const inf_batch *b, const inf_kv_view *kv, float *logits,
                   inf_err *err) {
    qwen3moe *w = m->w;
    blk_acts *a = &w->acts;
    m->be->embed(m->be, a->x, w->token_embd, b->tokens, b->n_rows);
    for (int l = 0; l < m->hp.n_layer; l++) {
        const moe_layer *L = &w->layers[l];
        blk_attention(m, a, b, kv, l, &L->attn);
        if (L->sparse)
            blk_ffn_moe(m, a, b, &L->moe);
        else
            blk_ffn_swiglu(m, a, b, &L->ffn);
        if (m->be->take_error(m->be, err)) return -1;
    }
    return blk_logits(m, a, b, w->output_norm, &w->output, logits, err);
}

/* A decode step reads the chosen experts only: n_expert_used / n_expert of
 * every expert tensor. */
static void facts(const inf_model_file *mf, inf_model_facts *f) {
    blk_decode_facts(mf, f, inf_qwen3_embd, inf_qwen3_output, inf_qwen3_ffn_names.gate);
}

/* A Hugging Face folder as llama.cpp's GGUF: the experts of each sparse
 * layer stacked into ffn_{gate,up,down}_exps (a fused gate_up_proj split
 * into its gate and up rows), the rest named as qwen3's. */
static int gguf_plan(const inf_model_file *mf, inf_gguf_plan *p, inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    if (!hp->norm_topk_prob)
        return inf_fail(err,
                        "%s: norm_topk_prob is false, but llama.cpp's qwen3moe always "
                        "renormalizes the chosen experts' weights: a GGUF of this model would "
                        "compute another function",
                        mf->path);
    for (int i = 0; i < mf->n_tensors; i++) {
        const inf_tensor *t = &mf->tensors[i];
        char name[160];
        int l;
        if (strstr(t->name, ".mlp.experts.")) continue; /* stacked below */
        if (sscanf(t->name, "model.layers.%d.", &l) == 1) {
            blk_name_fmt(name, sizeof name, mf, router_name, l, -1);
            if (!strcmp(name, t->name)) {
                snprintf(name, sizeof name, router_name.gguf, l);
                if (inf_gguf_plan_add(p, name, l, t)) return inf_fail(err, "out of memory");
                continue;
            }
        }
        if (inf_qwen3_gguf_plan_add(mf, p, t, err)) return -1;
    }
    for (int l = 0; l < hp->n_layer; l++)
        if (inf_qwen3moe_plan_experts(mf, p, l, err)) return -1;
    return 0;
}

int inf_qwen3moe_plan_experts(const inf_model_file *mf, inf_gguf_plan *p, int l, inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    char name[160];
    blk_name_fmt(name, sizeof name, mf, router_name, l, -1);
    if (!inf_model_find(mf, name)) return 0; /* a dense layer */
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, X = hp->n_expert;
    inf_rows *gate = malloc((size_t)X * sizeof *gate), *up = malloc((size_t)X * sizeof *up),
             *down = malloc((size_t)X * sizeof *down);
    int rc = gate && up && down ? 0 : inf_fail(err, "out of memory");
    blk_name_fmt(name, sizeof name, mf, gate_up_exps, l, -1);
    const inf_tensor *gu = inf_model_find(mf, name), *d = NULL;
    if (gu) {
        blk_name_fmt(name, sizeof name, mf, down_exps, l, -1);
        d = inf_model_find(mf, name);
    }
    for (int64_t e = 0; e < X && !rc; e++) {
        if (gu) {
            gate[e] = (inf_rows){gu, 2 * F * e, F};
            up[e] = (inf_rows){gu, 2 * F * e + F, F};
            down[e] = (inf_rows){d, E * e, E};
            continue;
        }
        const inf_tensor *t[3];
        const blk_name *nm[3] = {&expert_gate, &expert_up, &expert_down};
        for (int k = 0; k < 3; k++) {
            blk_name_fmt(name, sizeof name, mf, *nm[k], l, (int)e);
            t[k] = inf_model_find(mf, name);
        }
        gate[e] = (inf_rows){t[0], 0, F};
        up[e] = (inf_rows){t[1], 0, F};
        down[e] = (inf_rows){t[2], 0, E};
    }
    if (!rc) {
        char g[64];
        snprintf(g, sizeof g, gate_exps.gguf, l);
        rc = inf_gguf_plan_add_runs(p, g, l, 3, (int64_t[]){E, F, X}, gate, (int)X);
        snprintf(g, sizeof g, up_exps.gguf, l);
        rc = rc || inf_gguf_plan_add_runs(p, g, l, 3, (int64_t[]){E, F, X}, up, (int)X);
        snprintf(g, sizeof g, down_exps.gguf, l);
        rc = rc || inf_gguf_plan_add_runs(p, g, l, 3, (int64_t[]){F, E, X}, down, (int)X);
        if (rc) inf_fail(err, "out of memory");
    }
    free(gate);
    free(up);
    free(down);
    return rc ? -1 : 0;
}

/* qwen3vlmoe: Qwen3-VL-30B-A3B's text model (see arch_qwen3.c's qwen3vl) */
static const char *const gguf_archs[] = {"qwen3moe", "qwen3vlmoe", NULL};
static const char *const hf_types[] = {"qwen3_moe", "qwen3_vl_moe", NULL};

const inf_arch inf_arch_qwen3moe = {
    .name = "qwen3moe",
    .gguf_archs = gguf_archs,
    .hf_types = hf_types,
    .bind_file = bind_file,
    .create = create,
    .free_model = free_model,
    .forward = forward,
    .gguf_plan = gguf_plan,
    .facts = facts,
};
