/* GGUF -> the neutral model description: the shared hyperparameters from
 * the <arch>.* keys every llama.cpp architecture writes (block_count,
 * embedding_length, ...), the tokenizer from tokenizer.ggml.* and
 * tokenizer.chat_template, every tensor, indexed by model_index. See
 * gguf_model.h. */
#include "modelfile/gguf_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modelfile/model_build.h"

/* A malloc'd NUL-terminated copy of a file string (embedded NULs refused). */
static char *dup_value_str(const gguf_file *g, const char *what, const char *p, size_t n,
                           inf_err *err) {
    if (memchr(p, 0, n)) {
        inf_fail(err, "%s: %s contains a NUL byte", g->name, what);
        return NULL;
    }
    char *s = malloc(n + 1);
    if (!s) {
        inf_fail(err, "%s: out of memory copying %s", g->name, what);
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static int get_str_dup(const gguf_file *g, const char *key, char **out, inf_err *err) {
    const char *p;
    size_t n;
    if (gguf_get_str(g, key, &p, &n, err)) return -1;
    return (*out = dup_value_str(g, key, p, n, err)) ? 0 : -1;
}

/* An integer key that must fit a positive int. */
static int get_pos_int(const gguf_file *g, const char *key, int *out, inf_err *err) {
    int64_t v;
    if (gguf_get_int(g, key, &v, err)) return -1;
    if (v <= 0 || v > INT32_MAX)
        return inf_fail(err, "%s: metadata %s is %lld, expected 1..%d", g->name, key, (long long)v,
                        INT32_MAX);
    *out = (int)v;
    return 0;
}

static int load_hparams(inf_model_file *m, const gguf_file *g, inf_err *err) {
    inf_hparams *hp = &m->hp;
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", m->arch, suffix), key)
    double theta, eps;
    if (get_pos_int(g, KEY("block_count"), &hp->n_layer, err) ||
        get_pos_int(g, KEY("embedding_length"), &hp->n_embd, err) ||
        get_pos_int(g, KEY("attention.head_count"), &hp->n_head, err) ||
        get_pos_int(g, KEY("feed_forward_length"), &hp->n_ff, err) ||
        get_pos_int(g, KEY("context_length"), &hp->n_ctx_train, err) ||
        gguf_get_float(g, KEY("rope.freq_base"), &theta, err) ||
        gguf_get_float(g, KEY("attention.layer_norm_rms_epsilon"), &eps, err))
        return -1;
    hp->rope_theta = (float)theta;
    hp->rms_eps = (float)eps;
    hp->n_head_kv = hp->n_head;
    if (gguf_find(g, KEY("attention.head_count_kv")) && get_pos_int(g, key, &hp->n_head_kv, err))
        return -1;
    /* head_dim when stated; n_head*head_dim need not equal n_embd */
    if (gguf_find(g, KEY("attention.key_length"))) {
        if (get_pos_int(g, key, &hp->head_dim, err)) return -1;
    } else {
        if (hp->n_embd % hp->n_head)
            return inf_fail(err,
                            "%s: metadata %s is missing and n_embd %d is not a multiple "
                            "of n_head %d",
                            g->name, key, hp->n_embd, hp->n_head);
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    if (gguf_find(g, KEY("attention.value_length"))) {
        int vl;
        if (get_pos_int(g, key, &vl, err)) return -1;
        if (vl != hp->head_dim)
            return inf_fail(err, "%s: metadata %s is %d, expected the key length %d", g->name, key,
                            vl, hp->head_dim);
    }
#undef KEY
    return 0;
}

/* Copies a string array into v->tokens-like storage. */
static int copy_str_array(const gguf_file *g, const char *key, const gguf_value *arr, char ***out,
                          int *n_out, inf_err *err) {
    if (arr->arr.n > INT32_MAX)
        return inf_fail(err, "%s: metadata %s has %llu entries, too many", g->name, key,
                        (unsigned long long)arr->arr.n);
    int n = (int)arr->arr.n;
    char **s = calloc(n ? (size_t)n : 1, sizeof *s);
    if (!s) return inf_fail(err, "%s: out of memory for %s", g->name, key);
    *out = s;
    *n_out = n;
    for (int i = 0; i < n; i++) {
        const gguf_value *e = &arr->arr.items[i];
        char what[160];
        snprintf(what, sizeof what, "metadata %s[%d]", key, i);
        if (!(s[i] = dup_value_str(g, what, e->str.ptr, (size_t)e->str.len, err))) return -1;
    }
    return 0;
}

/* An optional token id key; it must name one of the n tokens. */
static int get_token_id(const gguf_file *g, const char *key, int n, int *out, inf_err *err) {
    if (!gguf_find(g, key)) return 0;
    int64_t v;
    if (gguf_get_int(g, key, &v, err)) return -1;
    if (v < 0 || v >= n)
        return inf_fail(err, "%s: metadata %s is %lld, expected a token id below %d", g->name, key,
                        (long long)v, n);
    *out = (int)v;
    return 0;
}

static int load_vocab(inf_vocab_desc *v, const gguf_file *g, inf_err *err) {
    const gguf_value *arr;
    if (get_str_dup(g, "tokenizer.ggml.model", &v->model, err)) return -1;
    if (gguf_find(g, "tokenizer.ggml.pre") && get_str_dup(g, "tokenizer.ggml.pre", &v->pre, err))
        return -1;
    if (gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &arr, err) ||
        copy_str_array(g, "tokenizer.ggml.tokens", arr, &v->tokens, &v->n_tokens, err))
        return -1;
    v->token_type = calloc(v->n_tokens ? (size_t)v->n_tokens : 1, sizeof *v->token_type);
    if (!v->token_type) return inf_fail(err, "%s: out of memory", g->name);
    if (gguf_find(g, "tokenizer.ggml.token_type")) {
        if (gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &arr, err)) return -1;
        if (arr->arr.n != (uint64_t)v->n_tokens)
            return inf_fail(err,
                            "%s: metadata tokenizer.ggml.token_type has %llu entries, "
                            "expected one per token (%d)",
                            g->name, (unsigned long long)arr->arr.n, v->n_tokens);
        for (int i = 0; i < v->n_tokens; i++) {
            int64_t ty = gguf_arr_at(arr, i).i;
            if (ty < INF_TOKEN_NORMAL || ty > INF_TOKEN_BYTE)
                return inf_fail(err,
                                "%s: metadata tokenizer.ggml.token_type[%d] is %lld, expected "
                                "%d..%d",
                                g->name, i, (long long)ty, INF_TOKEN_NORMAL, INF_TOKEN_BYTE);
            v->token_type[i] = (int32_t)ty;
        }
    } else {
        for (int i = 0; i < v->n_tokens; i++)
            v->token_type[i] = INF_TOKEN_NORMAL;
    }
    if (gguf_find(g, "tokenizer.ggml.merges") &&
        (gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &arr, err) ||
         copy_str_array(g, "tokenizer.ggml.merges", arr, &v->merges, &v->n_merges, err)))
        return -1;
    if (get_token_id(g, "tokenizer.ggml.bos_token_id", v->n_tokens, &v->bos_id, err) ||
        get_token_id(g, "tokenizer.ggml.eos_token_id", v->n_tokens, &v->eos_id, err) ||
        get_token_id(g, "tokenizer.ggml.padding_token_id", v->n_tokens, &v->pad_id, err) ||
        get_token_id(g, "tokenizer.ggml.eot_token_id", v->n_tokens, &v->eot_id, err))
        return -1;
    if (gguf_find(g, "tokenizer.ggml.add_bos_token") &&
        gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err))
        return -1;
    if (gguf_find(g, "tokenizer.chat_template") &&
        get_str_dup(g, "tokenizer.chat_template", &v->chat_template, err))
        return -1;
    /* Qwen's end of turn; added tokens sit at the end of the vocabulary */
    for (int i = v->n_tokens - 1; i >= 0 && v->eot_id < 0; i--)
        if (!strcmp(v->tokens[i], "<|im_end|>")) v->eot_id = i;
    return 0;
}

int gguf_model_open(inf_model_file **out, gguf_file *g, inf_err *err) {
    *out = NULL;
    inf_model_file *m;
    if (model_alloc(&m, INF_FORMAT_GGUF, g->name, err)) {
        gguf_close(g);
        return -1;
    }
    m->priv->gguf = g;
    if (get_str_dup(g, "general.architecture", &m->arch, err)) goto fail;
    if (gguf_find(g, "general.name")) {
        if (get_str_dup(g, "general.name", &m->name, err)) goto fail;
    } else if (!(m->name = strdup(m->arch))) {
        inf_fail(err, "%s: out of memory", g->name);
        goto fail;
    }
    if (load_hparams(m, g, err)) goto fail;
    if (g->n_tensors > INT32_MAX) {
        inf_fail(err, "%s: %lld tensors, too many", g->name, (long long)g->n_tensors);
        goto fail;
    }
    m->tensors = calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof *m->tensors);
    if (!m->tensors) {
        inf_fail(err, "%s: out of memory", g->name);
        goto fail;
    }
    m->n_tensors = (int)g->n_tensors;
    for (int i = 0; i < m->n_tensors; i++) {
        const gguf_tensor_info *ti = &g->tensors[i];
        inf_tensor *t = &m->tensors[i];
        if (!(t->name = strdup(ti->name))) {
            m->n_tensors = i;
            inf_fail(err, "%s: out of memory", g->name);
            goto fail;
        }
        t->type = (inf_dtype)ti->type;
        t->n_dims = ti->n_dims;
        memcpy(t->ne, ti->ne, sizeof t->ne);
        t->data = ti->data;
        t->nbytes = ti->nbytes;
        t->offset = g->data_offset + ti->offset;
        t->file_index = 0;
    }
    if (load_vocab(&m->vocab, g, err)) goto fail;
    if (model_index(m, err)) goto fail;
    *out = m;
    return 0;
fail:
    inf_model_close(m);
    return -1;
}
