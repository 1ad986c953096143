/* The format-neutral part of loading, shared by the readers: allocating the
 * model, binding the Qwen3 weight slots by GGUF or HF tensor names and
 * checking every shape against the hyperparameters; and inf_model_close /
 * inf_model_find. See model_build.h. */
#include "modelfile/model_build.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int model_alloc(inf_model_file **out, inf_format format, const char *path, inf_err *err) {
    *out = NULL;
    inf_model_file *m = calloc(1, sizeof *m);
    if (!m) return inf_fail(err, "%s: out of memory", path);
    m->priv = calloc(1, sizeof *m->priv);
    m->path = strdup(path);
    if (!m->priv || !m->path) {
        free(m->priv);
        free(m->path);
        free(m);
        return inf_fail(err, "%s: out of memory", path);
    }
    m->format = format;
    m->priv->tie_hint = -1;
    m->vocab = (inf_vocab_desc){.bos_id = -1, .eos_id = -1, .pad_id = -1, .eot_id = -1};
    *out = m;
    return 0;
}

void inf_model_close(inf_model_file *m) {
    if (!m) return;
    for (int i = 0; m->tensors && i < m->n_tensors; i++)
        free(m->tensors[i].name);
    free(m->tensors);
    free(m->layers);
    inf_vocab_desc_free(&m->vocab);
    free(m->path);
    free(m->arch);
    free(m->name);
    if (m->priv) {
        gguf_close(m->priv->gguf);
        for (int i = 0; i < m->priv->n_st; i++)
            st_close(m->priv->st[i]);
        free(m->priv->st);
        free(m->priv->by_name);
        free(m->priv);
    }
    free(m);
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp((*(const inf_tensor *const *)a)->name, (*(const inf_tensor *const *)b)->name);
}

const inf_tensor *inf_model_find(const inf_model_file *m, const char *name) {
    if (!m->priv || !m->priv->by_name) {
        for (int i = 0; i < m->n_tensors; i++)
            if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
        return NULL;
    }
    inf_tensor key = {.name = (char *)name};
    const inf_tensor *kp = &key;
    const inf_tensor **hit = bsearch(&kp, m->priv->by_name, (size_t)m->n_tensors,
                                     sizeof *m->priv->by_name, cmp_tensor_name);
    return hit ? *hit : NULL;
}

/* One weight slot: its GGUF and HF names ("%d" = layer) and its expected
 * shape, given as multipliers of the hyperparameters below. */
enum dim { D_EMBD, D_Q, D_KV, D_HEAD, D_FF, D_VOCAB, D_NONE };

typedef struct slot_def {
    const char *gguf, *hf;
    int n_dims;
    enum dim shape[2]; /* fastest-first */
    bool is_norm;
    size_t field; /* offset in inf_layer_weights */
} slot_def;

#define LW(f) offsetof(inf_layer_weights, f)
static const slot_def layer_slots[] = {
    {"blk.%d.attn_norm.weight",
     "model.layers.%d.input_layernorm.weight",
     1,
     {D_EMBD},
     true,
     LW(attn_norm)},
    {"blk.%d.attn_q.weight",
     "model.layers.%d.self_attn.q_proj.weight",
     2,
     {D_EMBD, D_Q},
     false,
     LW(wq)},
    {"blk.%d.attn_k.weight",
     "model.layers.%d.self_attn.k_proj.weight",
     2,
     {D_EMBD, D_KV},
     false,
     LW(wk)},
    {"blk.%d.attn_v.weight",
     "model.layers.%d.self_attn.v_proj.weight",
     2,
     {D_EMBD, D_KV},
     false,
     LW(wv)},
    {"blk.%d.attn_output.weight",
     "model.layers.%d.self_attn.o_proj.weight",
     2,
     {D_Q, D_EMBD},
     false,
     LW(wo)},
    {"blk.%d.attn_q_norm.weight",
     "model.layers.%d.self_attn.q_norm.weight",
     1,
     {D_HEAD},
     true,
     LW(q_norm)},
    {"blk.%d.attn_k_norm.weight",
     "model.layers.%d.self_attn.k_norm.weight",
     1,
     {D_HEAD},
     true,
     LW(k_norm)},
    {"blk.%d.ffn_norm.weight",
     "model.layers.%d.post_attention_layernorm.weight",
     1,
     {D_EMBD},
     true,
     LW(ffn_norm)},
    {"blk.%d.ffn_gate.weight",
     "model.layers.%d.mlp.gate_proj.weight",
     2,
     {D_EMBD, D_FF},
     false,
     LW(w_gate)},
    {"blk.%d.ffn_up.weight",
     "model.layers.%d.mlp.up_proj.weight",
     2,
     {D_EMBD, D_FF},
     false,
     LW(w_up)},
    {"blk.%d.ffn_down.weight",
     "model.layers.%d.mlp.down_proj.weight",
     2,
     {D_FF, D_EMBD},
     false,
     LW(w_down)},
};
#define N_LAYER_SLOTS (int)(sizeof layer_slots / sizeof layer_slots[0])

static const slot_def embd_slot = {
    "token_embd.weight", "model.embed_tokens.weight", 2, {D_EMBD, D_VOCAB}, false, 0};
static const slot_def norm_slot = {"output_norm.weight", "model.norm.weight", 1, {D_EMBD}, true, 0};
static const slot_def output_slot = {
    "output.weight", "lm_head.weight", 2, {D_EMBD, D_VOCAB}, false, 0};

static int64_t dim_value(const inf_hparams *hp, enum dim d) {
    switch (d) {
    case D_EMBD:
        return hp->n_embd;
    case D_Q:
        return (int64_t)hp->n_head * hp->head_dim;
    case D_KV:
        return (int64_t)hp->n_head_kv * hp->head_dim;
    case D_HEAD:
        return hp->head_dim;
    case D_FF:
        return hp->n_ff;
    case D_VOCAB:
        return hp->n_vocab;
    default:
        return 1;
    }
}

/* "[256, 1024]" in the file's own convention: GGUF fastest-first, HF
 * slowest-first (as config and safetensors headers write it). */
static void fmt_shape(char *buf, size_t cap, inf_format f, int n_dims, const int64_t *ne) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int d = 0; d < n_dims && k < cap; d++) {
        int64_t v = f == INF_FORMAT_HF ? ne[n_dims - 1 - d] : ne[d];
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)v);
    }
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* Finds a slot's tensor for `layer` (-1 for global slots) and checks its
 * shape and type. A missing tensor is an error unless `optional`. */
static int bind_slot(const inf_model_file *m, const slot_def *s, int layer, bool optional,
                     const inf_tensor **out, inf_err *err) {
    char name[128];
    snprintf(name, sizeof name, m->format == INF_FORMAT_GGUF ? s->gguf : s->hf, layer);
    *out = inf_model_find(m, name);
    if (!*out) {
        if (optional) return 0;
        return inf_fail(err, "%s: tensor %s is missing", m->path, name);
    }
    const inf_tensor *t = *out;
    int64_t want[INF_MAX_DIMS] = {1, 1, 1, 1};
    for (int d = 0; d < s->n_dims; d++)
        want[d] = dim_value(&m->hp, s->shape[d]);
    bool ok = t->n_dims == s->n_dims;
    for (int d = 0; d < s->n_dims && ok; d++)
        ok = t->ne[d] == want[d];
    if (!ok) {
        char a[96], e[96];
        fmt_shape(a, sizeof a, m->format, t->n_dims, t->ne);
        fmt_shape(e, sizeof e, m->format, s->n_dims, want);
        return inf_fail(err, "%s: tensor %s has shape %s, expected %s", m->path, name, a, e);
    }
    if (s->is_norm && t->type != INF_F32 && t->type != INF_F16 && t->type != INF_BF16)
        return inf_fail(err, "%s: tensor %s has type %s; norm weights must be F32, F16 or BF16",
                        m->path, name, inf_ggml_type_name(t->type));
    return 0;
}

static int check_hparams(const inf_model_file *m, inf_err *err) {
    const inf_hparams *hp = &m->hp;
    const struct {
        const char *name;
        int v;
    } pos[] = {{"n_layer", hp->n_layer},        {"n_embd", hp->n_embd},     {"n_head", hp->n_head},
               {"n_head_kv", hp->n_head_kv},    {"head_dim", hp->head_dim}, {"n_ff", hp->n_ff},
               {"n_ctx_train", hp->n_ctx_train}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0)
            return inf_fail(err, "%s: hyperparameter %s is %d, expected a positive number", m->path,
                            pos[i].name, pos[i].v);
    if (hp->n_head % hp->n_head_kv)
        return inf_fail(err, "%s: %d query heads are not a multiple of %d key/value heads", m->path,
                        hp->n_head, hp->n_head_kv);
    /* FLT_MIN: a denormal θ or ε is a corrupt file, not a model (and would
       turn every RoPE angle or norm into inf/NaN arithmetic) */
    if (!(hp->rope_theta >= FLT_MIN) || !(hp->rope_theta < 1e30f))
        return inf_fail(err, "%s: rope theta %g is not a positive normal finite number", m->path,
                        (double)hp->rope_theta);
    if (!(hp->rms_eps >= FLT_MIN) || !(hp->rms_eps < 1))
        return inf_fail(err, "%s: rms norm epsilon %g is not a normal number in (0, 1)", m->path,
                        (double)hp->rms_eps);
    /* every layer needs its tensors: bounds n_layer before anything is sized by it */
    if ((int64_t)hp->n_layer * N_LAYER_SLOTS > m->n_tensors)
        return inf_fail(err, "%s: %d layers need %lld tensors, the file has %d", m->path,
                        hp->n_layer, (long long)hp->n_layer * N_LAYER_SLOTS, m->n_tensors);
    return 0;
}

int model_bind(inf_model_file *m, inf_err *err) {
    struct inf_model_file_priv *p = m->priv;
    p->by_name = malloc((m->n_tensors ? (size_t)m->n_tensors : 1) * sizeof *p->by_name);
    if (!p->by_name) return inf_fail(err, "%s: out of memory", m->path);
    for (int i = 0; i < m->n_tensors; i++)
        p->by_name[i] = &m->tensors[i];
    qsort(p->by_name, (size_t)m->n_tensors, sizeof *p->by_name, cmp_tensor_name);
    for (int i = 1; i < m->n_tensors; i++)
        if (!strcmp(p->by_name[i - 1]->name, p->by_name[i]->name))
            return inf_fail(err, "%s: tensor %s appears more than once", m->path,
                            p->by_name[i]->name);

    if (check_hparams(m, err)) return -1;

    /* n_vocab comes from the embedding's shape */
    const inf_tensor *te = NULL;
    char name[128];
    snprintf(name, sizeof name, "%s", m->format == INF_FORMAT_GGUF ? embd_slot.gguf : embd_slot.hf);
    te = inf_model_find(m, name);
    if (!te) return inf_fail(err, "%s: tensor %s is missing", m->path, name);
    if (te->n_dims != 2 || te->ne[1] > INT32_MAX) {
        char a[96];
        fmt_shape(a, sizeof a, m->format, te->n_dims, te->ne);
        return inf_fail(err, "%s: tensor %s has shape %s, expected a [n_vocab x %d] matrix",
                        m->path, name, a, m->hp.n_embd);
    }
    m->hp.n_vocab = (int)te->ne[1];
    if (p->cfg_vocab && p->cfg_vocab != m->hp.n_vocab)
        return inf_fail(err, "%s: config.json vocab_size is %lld but %s has %d rows", m->path,
                        (long long)p->cfg_vocab, name, m->hp.n_vocab);
    if (m->vocab.n_tokens > m->hp.n_vocab)
        return inf_fail(err, "%s: the tokenizer has %d tokens, more than the %d embedding rows",
                        m->path, m->vocab.n_tokens, m->hp.n_vocab);

    if (bind_slot(m, &embd_slot, -1, false, &m->token_embd, err) ||
        bind_slot(m, &norm_slot, -1, false, &m->output_norm, err))
        return -1;
    /* Tied output head: GGUF omits output.weight; HF says tie_word_embeddings
     * (and then any lm_head.weight in the file is ignored, as transformers does). */
    if (p->tie_hint == 1) {
        m->output = NULL;
    } else if (bind_slot(m, &output_slot, -1, p->tie_hint == -1, &m->output, err)) {
        return -1;
    }
    m->hp.tied_output = m->output == NULL;
    if (!m->output) m->output = m->token_embd;

    /* a layer count lower than the layers the file holds would silently run a
       truncated model */
    for (int i = 0; i < m->n_tensors; i++) {
        const char *nm = m->tensors[i].name;
        const char *pre = m->format == INF_FORMAT_GGUF ? "blk." : "model.layers.";
        size_t k = strlen(pre);
        if (strncmp(nm, pre, k) || nm[k] < '0' || nm[k] > '9') continue;
        long layer = strtol(nm + k, NULL, 10);
        if (layer >= m->hp.n_layer)
            return inf_fail(err, "%s: tensor %s belongs to layer %ld, but the model has %d layers",
                            m->path, nm, layer, m->hp.n_layer);
    }
    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers) return inf_fail(err, "%s: out of memory", m->path);
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int s = 0; s < N_LAYER_SLOTS; s++) {
            const inf_tensor **slot =
                (const inf_tensor **)((char *)&m->layers[l] + layer_slots[s].field);
            if (bind_slot(m, &layer_slots[s], l, false, slot, err)) return -1;
        }
    return 0;
}
