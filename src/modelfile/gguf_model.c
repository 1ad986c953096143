/* GGUF -> the neutral model description: the shared hyperparameters from
 * the <arch>.* keys every llama.cpp architecture writes (block_count,
 * embedding_length, ...), the tokenizer from tokenizer.ggml.* and
 * tokenizer.chat_template, every tensor, indexed by model_index. See
 * gguf_model.h. */
#include "modelfile/gguf_model.h"

#include <math.h>
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
        get_pos_int(g, KEY("context_length"), &hp->n_ctx_train, err) ||
        gguf_get_float(g, KEY("rope.freq_base"), &theta, err) ||
        gguf_get_float(g, KEY("attention.layer_norm_rms_epsilon"), &eps, err))
        return -1;
    hp->rope_theta = (float)theta;
    hp->rms_eps = (float)eps;
    /* the dense FFN's size; a model made of MoE blocks only has none
       (Qwen3.5-MoE): its architecture says whether it needs one */
    if (gguf_find(g, KEY("feed_forward_length")) && get_pos_int(g, key, &hp->n_ff, err)) return -1;
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
    /* YaRN: rope.scaling.type "yarn", .factor, .original_context_length;
       llama.cpp scales cos/sin by attn_factor (default 1) * (0.1 ln factor + 1) */
    hp->rope_attn_factor = 1;
    if (gguf_find(g, KEY("rope.scaling.type"))) {
        const char *p;
        size_t n;
        if (gguf_get_str(g, key, &p, &n, err)) return -1;
        if (n == 4 && !memcmp(p, "none", 4)) return 0;
        if (n != 4 || memcmp(p, "yarn", 4))
            return inf_fail(err, "%s: metadata %s is \"%.*s\": inferno supports none and yarn",
                            g->name, key, (int)(n < 32 ? n : 32), p);
        double factor, attn = 1, fast = 32, slow = 1;
        int orig;
        if (gguf_get_float(g, KEY("rope.scaling.factor"), &factor, err) ||
            get_pos_int(g, KEY("rope.scaling.original_context_length"), &orig, err) ||
            (gguf_find(g, KEY("rope.scaling.attn_factor")) && gguf_get_float(g, key, &attn, err)) ||
            (gguf_find(g, KEY("rope.scaling.yarn_beta_fast")) &&
             gguf_get_float(g, key, &fast, err)) ||
            (gguf_find(g, KEY("rope.scaling.yarn_beta_slow")) &&
             gguf_get_float(g, key, &slow, err)))
            return -1;
        if (!(factor >= 1) || !(factor < 1e6) || !(attn > 0) || !(attn < 1e6) || !(fast > 0) ||
            !(slow > 0))
            return inf_fail(err,
                            "%s: yarn factor %g, attn_factor %g, beta_fast %g, beta_slow %g: "
                            "expected factor >= 1 and positive numbers",
                            g->name, factor, attn, fast, slow);
        hp->yarn_factor = (float)factor;
        hp->yarn_orig_ctx = orig;
        hp->yarn_beta_fast = (float)fast;
        hp->yarn_beta_slow = (float)slow;
        hp->rope_attn_factor = (float)(attn * (factor > 1 ? 0.1 * log(factor) + 1.0 : 1.0));
        if (factor * orig > hp->n_ctx_train && factor * orig <= INT32_MAX)
            hp->n_ctx_train = (int)(factor * orig);
    }
#undef KEY
    return 0;
}

/* <arch>.pooling_type (llama.cpp's enum) and general.sampling.* (the
 * authors' recommended sampling, llama.cpp's keys: top_k an integer, the
 * others floats). */
static int load_extras(inf_model_file *m, const gguf_file *g, inf_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.pooling_type", m->arch);
    int64_t pool;
    if (gguf_find(g, key)) {
        if (gguf_get_int(g, key, &pool, err)) return -1;
        if (pool < INF_POOL_NONE || pool > INF_POOL_RANK)
            return inf_fail(err, "%s: %s is %lld, expected 0..4 (none, mean, cls, last, rank)",
                            g->name, key, (long long)pool);
        m->pooling = (inf_pooling)pool;
    }
    static const struct {
        const char *key;
        unsigned bit;
    } fields[] = {{"general.sampling.temp", INF_REC_TEMP},
                  {"general.sampling.top_k", INF_REC_TOP_K},
                  {"general.sampling.top_p", INF_REC_TOP_P},
                  {"general.sampling.min_p", INF_REC_MIN_P},
                  {"general.sampling.penalty_repeat", INF_REC_REPEAT_PENALTY}};
    inf_sampling_rec *r = &m->sampling;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (!gguf_find(g, fields[i].key)) continue;
        double x;
        int64_t k;
        if (fields[i].bit == INF_REC_TOP_K) {
            if (gguf_get_int(g, fields[i].key, &k, err)) return -1;
            r->top_k = k > INT32_MAX ? INT32_MAX : k < INT32_MIN ? INT32_MIN : (int)k;
        } else {
            if (gguf_get_float(g, fields[i].key, &x, err)) return -1;
            if (fields[i].bit == INF_REC_TEMP) r->temp = (float)x;
            if (fields[i].bit == INF_REC_TOP_P) r->top_p = (float)x;
            if (fields[i].bit == INF_REC_MIN_P) r->min_p = (float)x;
            if (fields[i].bit == INF_REC_REPEAT_PENALTY) r->repeat_penalty = (float)x;
        }
        r->set |= fields[i].bit;
    }
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
    if (gguf_find(g, "tokenizer.ggml.add_eos_token") &&
        gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err))
        return -1;
    if (v->add_eos && v->eos_id < 0)
        return inf_fail(err, "%s: tokenizer.ggml.add_eos_token is true but there is no eos token",
                        g->name);
    v->add_eos_id = v->eos_id;
    if (gguf_find(g, "tokenizer.chat_template") &&
        get_str_dup(g, "tokenizer.chat_template", &v->chat_template, err))
        return -1;
    /* Qwen's end of turn; added tokens sit at the end of the vocabulary */
    for (int i = v->n_tokens - 1; i >= 0 && v->eot_id < 0; i--)
        if (!strcmp(v->tokens[i], "<|im_end|>")) v->eot_id = i;
    return 0;
}

/* Appends file i's tensors (file_index i). */
static int add_tensors(inf_model_file *m, const gguf_file *g, int file_index, inf_err *err) {
    if (g->n_tensors > INT32_MAX - m->n_tensors)
        return inf_fail(err, "%s: %lld tensors, too many", g->name, (long long)g->n_tensors);
    inf_tensor *grown =
        realloc(m->tensors, (size_t)(m->n_tensors + g->n_tensors + 1) * sizeof *m->tensors);
    if (!grown) return inf_fail(err, "%s: out of memory", g->name);
    m->tensors = grown;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor_info *ti = &g->tensors[i];
        inf_tensor *t = &m->tensors[m->n_tensors];
        memset(t, 0, sizeof *t);
        if (!(t->name = strdup(ti->name))) return inf_fail(err, "%s: out of memory", g->name);
        m->n_tensors++;
        t->type = (inf_dtype)ti->type;
        t->n_dims = ti->n_dims;
        memcpy(t->ne, ti->ne, sizeof t->ne);
        t->data = ti->data;
        t->nbytes = ti->nbytes;
        t->offset = g->data_offset + ti->offset;
        t->file_index = file_index;
    }
    return 0;
}

/* llama.cpp's gguf-split: NAME-00001-of-0000N.gguf holds the metadata and
 * split.{no,count,tensors.count}; every other split holds split.* and its
 * share of the tensors. Opened from the first; the others are found by name. */
static int open_splits(inf_model_file *m, gguf_file *g, inf_err *err) {
    int64_t count, no = 0, total = -1;
    if (gguf_get_int(g, "split.count", &count, err)) return -1;
    if (gguf_find(g, "split.no") && gguf_get_int(g, "split.no", &no, err)) return -1;
    if (gguf_find(g, "split.tensors.count") && gguf_get_int(g, "split.tensors.count", &total, err))
        return -1;
    if (count < 1 || count > 9999)
        return inf_fail(err, "%s: metadata split.count is %lld, expected 1..9999", g->name,
                        (long long)count);
    if (no != 0)
        return inf_fail(err,
                        "%s: this is split %lld of %lld; open the first (-00001-of-%05lld.gguf)",
                        g->name, (long long)no + 1, (long long)count, (long long)count);
    struct inf_model_file_priv *p = m->priv;
    if (!(p->splits = calloc((size_t)count, sizeof *p->splits)))
        return inf_fail(err, "%s: out of memory", g->name);
    p->splits[0] = g;
    p->n_splits = 1;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "-00001-of-%05lld.gguf", (long long)count);
    size_t n = strlen(g->name), k = strlen(suffix);
    if (count > 1 && (n < k || strcmp(g->name + n - k, suffix)))
        return inf_fail(err, "%s: split 1 of %lld, but the name does not end in %s", g->name,
                        (long long)count, suffix);
    for (int i = 1; i < count; i++) {
        char *path = malloc(n + 1);
        if (!path) return inf_fail(err, "%s: out of memory", g->name);
        memcpy(path, g->name, n + 1);
        snprintf(path + n - k, k + 1, "-%05d-of-%05lld.gguf", i + 1, (long long)count);
        gguf_file *s;
        int rc = gguf_open(&s, path, err);
        free(path);
        if (rc) return -1;
        p->splits[p->n_splits++] = s;
        int64_t sno = -1, scount = -1;
        if ((gguf_find(s, "split.no") && gguf_get_int(s, "split.no", &sno, err)) ||
            (gguf_find(s, "split.count") && gguf_get_int(s, "split.count", &scount, err)))
            return -1;
        if (sno != i || scount != count)
            return inf_fail(err, "%s: split.no %lld and split.count %lld, expected %d and %lld",
                            s->name, (long long)sno, (long long)scount, i, (long long)count);
        if (add_tensors(m, s, i, err)) return -1;
    }
    if (total >= 0 && total != m->n_tensors)
        return inf_fail(err, "%s: split.tensors.count is %lld, but the %lld splits hold %d",
                        g->name, (long long)total, (long long)count, m->n_tensors);
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
    int64_t split_no = 0;
    if (gguf_find(g, "split.no") && gguf_get_int(g, "split.no", &split_no, err)) goto fail;
    if (split_no != 0) {
        inf_fail(err,
                 "%s: this is split %lld of a model split into files; open the first "
                 "(-00001-of-...)",
                 g->name, (long long)split_no + 1);
        goto fail;
    }
    if (get_str_dup(g, "general.architecture", &m->arch, err)) goto fail;
    if (gguf_find(g, "general.name")) {
        if (get_str_dup(g, "general.name", &m->name, err)) goto fail;
    } else if (!(m->name = strdup(m->arch))) {
        inf_fail(err, "%s: out of memory", g->name);
        goto fail;
    }
    if (load_hparams(m, g, err) || load_extras(m, g, err)) goto fail;
    if (add_tensors(m, g, 0, err)) goto fail;
    if (gguf_find(g, "split.count") && open_splits(m, g, err)) goto fail;
    if (load_vocab(&m->vocab, g, err)) goto fail;
    if (model_index(m, err)) goto fail;
    *out = m;
    return 0;
fail:
    inf_model_close(m);
    return -1;
}
