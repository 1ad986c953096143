/* qwen3: Qwen3's dense models (Qwen3-0.6B .. Qwen3-32B).
 *
 * Per layer: the Qwen3 attention block (per-head RMSNorm of q and k before
 * the NeoX RoPE, n_head*head_dim != n_embd in general), then a SwiGLU FFN;
 * the output head is tied to the embedding in the small models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/arch_qwen3.h"
#include "model/blocks.h"
#include "util/mem.h"

/* ---- names -------------------------------------------------------------- */

const blk_name inf_qwen3_embd = {"token_embd.weight", "model.embed_tokens.weight"};
const blk_name inf_qwen3_output_norm = {"output_norm.weight", "model.norm.weight"};
const blk_name inf_qwen3_output = {"output.weight", "lm_head.weight"};
const blk_attn_names inf_qwen3_attn_names = {
    .norm = {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    .q = {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"},
    .k = {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"},
    .v = {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"},
    .o = {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
    .q_norm = {"blk.%d.attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight"},
    .k_norm = {"blk.%d.attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight"},
};
const blk_ffn_names inf_qwen3_ffn_names = {
    .norm = {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
    .gate = {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
    .up = {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
    .down = {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
};

/* ---- shared with qwen3moe (same attention, same dense FFN) -------------- */

/* Finds (and with be, binds) layer l's attention tensors. */
int inf_qwen3_attn_bind(blk_attn *w, const inf_model_file *mf, const inf_backend *be, int l,
                        bool gated, inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    const blk_attn_names *n = &inf_qwen3_attn_names;
    const int64_t E = hp->n_embd, Q = (int64_t)hp->n_head * hp->head_dim * (gated ? 2 : 1),
                  KV = (int64_t)hp->n_head_kv * hp->head_dim, D = hp->head_dim,
                  O = (int64_t)hp->n_head * hp->head_dim;
    const inf_tensor *t[7];
    if (blk_find(&t[0], mf, n->norm, l, -1, 1, (int64_t[]){E}, true, false, err) ||
        blk_find(&t[1], mf, n->q, l, -1, 2, (int64_t[]){E, Q}, false, false, err) ||
        blk_find(&t[2], mf, n->k, l, -1, 2, (int64_t[]){E, KV}, false, false, err) ||
        blk_find(&t[3], mf, n->v, l, -1, 2, (int64_t[]){E, KV}, false, false, err) ||
        blk_find(&t[4], mf, n->o, l, -1, 2, (int64_t[]){O, E}, false, false, err) ||
        blk_find(&t[5], mf, n->q_norm, l, -1, 1, (int64_t[]){D}, true, false, err) ||
        blk_find(&t[6], mf, n->k_norm, l, -1, 1, (int64_t[]){D}, true, false, err))
        return -1;
    if (!be) return 0;
    return blk_bind_vector(&w->norm, mf, t[0], E, err) ||
                   blk_bind_matrix(&w->wq, mf, be, t[1], Q, E, err) ||
                   blk_bind_matrix(&w->wk, mf, be, t[2], KV, E, err) ||
                   blk_bind_matrix(&w->wv, mf, be, t[3], KV, E, err) ||
                   blk_bind_matrix(&w->wo, mf, be, t[4], E, O, err) ||
                   blk_bind_vector(&w->q_norm, mf, t[5], D, err) ||
                   blk_bind_vector(&w->k_norm, mf, t[6], D, err)
               ? -1
               : 0;
}

void inf_qwen3_attn_release(blk_attn *w, const inf_backend *be) {
    blk_release(be, &w->wq);
    blk_release(be, &w->wk);
    blk_release(be, &w->wv);
    blk_release(be, &w->wo);
    inf_free(w->norm);
    inf_free(w->q_norm);
    inf_free(w->k_norm);
}

/* Layer l's dense SwiGLU FFN of n_ff. */
int inf_qwen3_ffn_bind(blk_ffn *w, const inf_model_file *mf, const inf_backend *be, int l,
                       const blk_ffn_names *n, inf_err *err) {
    const int64_t E = mf->hp.n_embd, F = mf->hp.n_ff;
    if (F <= 0)
        return mf->format == INF_FORMAT_GGUF
                   ? inf_fail(err,
                              "%s: metadata %s.feed_forward_length is missing (layer %d has a "
                              "dense FFN)",
                              mf->path, mf->arch, l)
                   : inf_fail(err,
                              "%s/config.json: field intermediate_size is missing (layer %d has a "
                              "dense FFN)",
                              mf->path, l);
    const inf_tensor *t[4];
    if (blk_find(&t[0], mf, n->norm, l, -1, 1, (int64_t[]){E}, true, false, err) ||
        blk_find(&t[1], mf, n->gate, l, -1, 2, (int64_t[]){E, F}, false, false, err) ||
        blk_find(&t[2], mf, n->up, l, -1, 2, (int64_t[]){E, F}, false, false, err) ||
        blk_find(&t[3], mf, n->down, l, -1, 2, (int64_t[]){F, E}, false, false, err))
        return -1;
    if (!be) return 0;
    return blk_bind_vector(&w->norm, mf, t[0], E, err) ||
                   blk_bind_matrix(&w->w_gate, mf, be, t[1], F, E, err) ||
                   blk_bind_matrix(&w->w_up, mf, be, t[2], F, E, err) ||
                   blk_bind_matrix(&w->w_down, mf, be, t[3], E, F, err)
               ? -1
               : 0;
}

void inf_qwen3_ffn_release(blk_ffn *w, const inf_backend *be) {
    blk_release(be, &w->w_gate);
    blk_release(be, &w->w_up);
    blk_release(be, &w->w_down);
    inf_free(w->norm);
}

/* The embedding, final norm and head, checked (bind_file). */
int inf_qwen3_bind_globals(inf_model_file *mf, inf_err *err) {
    const inf_tensor *t;
    if (blk_bind_embedding(mf, inf_qwen3_embd, inf_qwen3_output, err) ||
        blk_find(&t, mf, inf_qwen3_output_norm, -1, -1, 1, (int64_t[]){mf->hp.n_embd}, true, false,
                 err) ||
        blk_check_layer_range(mf, "blk.", "model.layers.", err))
        return -1;
    return 0;
}

int inf_qwen3_bind_head(const inf_model_file *mf, const inf_backend *be,
                        const inf_tensor **token_embd, inf_weight *output, float **output_norm,
                        inf_err *err) {
    const inf_hparams *hp = &mf->hp;
    char name[160];
    blk_name_fmt(name, sizeof name, mf, inf_qwen3_embd, -1, -1);
    const inf_tensor *te = *token_embd = inf_model_find(mf, name);
    if (!te || te->ne[0] != hp->n_embd || te->ne[1] != hp->n_vocab ||
        !inf_dtype_row_bytes(te->type, hp->n_embd))
        return inf_fail(err, "%s: token_embd: expected [%d, %d]", mf->path, hp->n_vocab,
                        hp->n_embd);
    const inf_tensor *head = blk_output_tensor(mf, inf_qwen3_embd, inf_qwen3_output);
    blk_name_fmt(name, sizeof name, mf, inf_qwen3_output_norm, -1, -1);
    const inf_tensor *norm = inf_model_find(mf, name);
    if (!norm) return inf_fail(err, "%s: tensor output_norm is missing", mf->path);
    /* embed reads rows of the table in place: map its pages now rather than
       fault them in a row at a time while decoding (a tied head's panels may
       come from the pack cache, which leaves the table unread) */
    inf_model_populate_pages(mf, te);
    if (hp->no_head) return blk_bind_vector(output_norm, mf, norm, hp->n_embd, err);
    if (!head) return inf_fail(err, "%s: tensor output is missing", mf->path);
    /* a tied head is the embedding table, which embed reads as stored */
    return (hp->tied_output ? blk_bind_matrix_shared : blk_bind_matrix)(
               output, mf, be, head, hp->n_vocab, hp->n_embd, err) ||
                   blk_bind_vector(output_norm, mf, norm, hp->n_embd, err)
               ? -1
               : 0;
}

/* The HF → GGUF name of one of the tensors above ("%d" patterns matched
 * with the layer number). Returns 1 when found. */
static int map_name(const blk_name *names, int n, const char *name, char *out, size_t cap,
                    int *layer) {
    for (int i = 0; i < n; i++) {
        const char *pat = names[i].hf, *pct = strstr(pat, "%d");
        if (!pct) {
            if (strcmp(pat, name)) continue;
            snprintf(out, cap, "%s", names[i].gguf);
            *layer = -1;
            return 1;
        }
        size_t pre = (size_t)(pct - pat);
        if (strncmp(name, pat, pre) || name[pre] < '0' || name[pre] > '9') continue;
        char *end;
        long l = strtol(name + pre, &end, 10);
        if (strcmp(end, pct + 2)) continue;
        snprintf(out, cap, names[i].gguf, (int)l);
        *layer = (int)l;
        return 1;
    }
    return 0;
}

/* ---- the model ---------------------------------------------------------- */

typedef struct qwen3_layer {
    blk_attn attn;
    blk_ffn ffn;
} qwen3_layer;

typedef struct qwen3 {
    const inf_tensor *token_embd; /* [n_vocab][n_embd] */
    qwen3_layer *layers;          /* [n_layer] */
    float *output_norm;           /* [n_embd] */
    inf_weight output;            /* [n_vocab][n_embd]; the embedding table when tied */
    blk_acts acts;
} qwen3;

static int bind_file(inf_model_file *mf, inf_err *err) {
    if (inf_qwen3_bind_globals(mf, err)) return -1;
    for (int l = 0; l < mf->hp.n_layer; l++)
        if (inf_qwen3_attn_bind(NULL, mf, NULL, l, false, err) ||
            inf_qwen3_ffn_bind(NULL, mf, NULL, l, &inf_qwen3_ffn_names, err))
            return -1;
    return 0;
}

static int create(inf_model *m, inf_err *err) {
    const inf_model_file *mf = m->file;
    const inf_hparams *hp = &m->hp;
    qwen3 *w = m->w = calloc(1, sizeof *w);
    if (!w || !(w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers)))
        return inf_fail(err, "out of memory");
    if (inf_qwen3_bind_head(mf, m->be, &w->token_embd, &w->output, &w->output_norm, err)) return -1;
    for (int l = 0; l < hp->n_layer; l++)
        if (inf_qwen3_attn_bind(&w->layers[l].attn, mf, m->be, l, false, err) ||
            inf_qwen3_ffn_bind(&w->layers[l].ffn, mf, m->be, l, &inf_qwen3_ffn_names, err))
            return inf_fail_ctx(err, "layer %d", l);
    if (blk_acts_alloc(&w->acts, hp, m->max_rows))
        return inf_fail(err, "out of memory for the model's buffers (batch %d)", m->max_rows);
    return 0;
}

static void free_model(inf_model *m) {
    qwen3 *w = m->w;
    if (!w) return;
    for (int l = 0; w->layers && l < m->hp.n_layer; l++) {
        inf_qwen3_attn_release(&w->layers[l].attn, m->be);
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
    qwen3 *w = m->w;
    blk_acts *a = &w->acts;
    m->be->embed(m->be, a->x, w->token_embd, b->tokens, b->n_rows);
    for (int l = 0; l < m->hp.n_layer; l++) {
        blk_attention(m, a, b, kv, l, &w->layers[l].attn);
        blk_ffn_swiglu(m, a, b, &w->layers[l].ffn);
        if (m->be->take_error(m->be, err)) return -1;
    }
    return blk_logits(m, a, b, w->output_norm, &w->output, logits, err);
}

int inf_qwen3_gguf_name(const char *name, char *out, size_t cap, int *layer) {
    const blk_name names[] = {inf_qwen3_embd,
                              inf_qwen3_output_norm,
                              inf_qwen3_output,
                              inf_qwen3_attn_names.norm,
                              inf_qwen3_attn_names.q,
                              inf_qwen3_attn_names.k,
                              inf_qwen3_attn_names.v,
                              inf_qwen3_attn_names.o,
                              inf_qwen3_attn_names.q_norm,
                              inf_qwen3_attn_names.k_norm,
                              inf_qwen3_ffn_names.norm,
                              inf_qwen3_ffn_names.gate,
                              inf_qwen3_ffn_names.up,
                              inf_qwen3_ffn_names.down};
    return map_name(names, (int)(sizeof names / sizeof names[0]), name, out, cap, layer);
}

int inf_qwen3_gguf_plan_add(const inf_model_file *mf, inf_gguf_plan *p, const inf_tensor *t,
                            inf_err *err) {
    char name[64];
    int layer;
    if (!inf_qwen3_gguf_name(t->name, name, sizeof name, &layer))
        return inf_fail(err, "%s: tensor %s is not part of a %s model", mf->path, t->name,
                        mf->arch);
    /* a tied head stored beside the embedding: transformers ignores it */
    if (mf->hp.tied_output && !strcmp(name, "output.weight")) return 0;
    if (inf_gguf_plan_add(p, name, layer, t)) return inf_fail(err, "out of memory");
    return 0;
}

static int gguf_plan(const inf_model_file *mf, inf_gguf_plan *p, inf_err *err) {
    for (int i = 0; i < mf->n_tensors; i++)
        if (inf_qwen3_gguf_plan_add(mf, p, &mf->tensors[i], err)) return -1;
    return 0;
}

static void facts(const inf_model_file *mf, inf_model_facts *f) {
    blk_decode_facts(mf, f, inf_qwen3_embd, inf_qwen3_output, inf_qwen3_ffn_names.gate);
}

/* qwen3vl: Qwen3-VL's text model as llama.cpp writes it (the vision tower
 * lives in a separate mmproj file). For text tokens its multi-section RoPE
 * is the NeoX RoPE (the three position ids are equal) and deepstack adds
 * nothing, so text prompts run as qwen3. */
static const char *const gguf_archs[] = {"qwen3", "qwen3vl", NULL};
static const char *const hf_types[] = {"qwen3", "qwen3_vl", NULL};

const inf_arch inf_arch_qwen3 = {
    .name = "qwen3",
    .gguf_archs = gguf_archs,
    .hf_types = hf_types,
    .bind_file = bind_file,
    .create = create,
    .free_model = free_model,
    .forward = forward,
    .gguf_plan = gguf_plan,
    .facts = facts,
};
