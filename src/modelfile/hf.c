/* Hugging Face folder reader: config.json, model.safetensors or the sharded
 * model.safetensors.index.json, tokenizer.json and tokenizer_config.json,
 * into the neutral model description. */
#include "modelfile/hf.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "modelfile/model_build.h"

#define HF_MAX_JSON (64u << 20) /* config and index files are small */

static char *join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", dir, file);
    return s;
}

/* Present and not a folder. Anything else there (a FIFO, a device) is then
   refused by the reader, which opens without blocking and names it. */
static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* Loads a JSON file whose top level must be an object. */
static json_t *load_json(const char *path, inf_err *err) {
    char *text;
    size_t len;
    if (inf_read_file(&text, &len, path, HF_MAX_JSON, err)) return NULL;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        inf_fail(err, "%s: broken JSON at line %d column %d: %s", path, je.line, je.column,
                 je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        inf_fail(err, "%s: the top level is not a JSON object", path);
        return NULL;
    }
    return root;
}

/* A config.json integer field that must be a positive int; `def` < 0 means
 * required, else the value used when absent. */
static int cfg_int(json_t *cfg, const char *path, const char *key, int def, int *out,
                   inf_err *err) {
    json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v)) {
        if (def < 0) return inf_fail(err, "%s: field %s is missing", path, key);
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > INT32_MAX)
        return inf_fail(err, "%s: field %s is not a positive integer", path, key);
    *out = (int)json_integer_value(v);
    return 0;
}

static int cfg_num(json_t *cfg, const char *path, const char *key, double *out, inf_err *err) {
    json_t *v = json_object_get(cfg, key);
    if (!v) return inf_fail(err, "%s: field %s is missing", path, key);
    if (!json_is_number(v)) return inf_fail(err, "%s: field %s is not a number", path, key);
    *out = json_number_value(v);
    return 0;
}

/* A number field of obj, or def when absent; a present non-number is an error. */
static int obj_num(json_t *obj, const char *path, const char *what, const char *key, double def,
                   double *out, inf_err *err) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return inf_fail(err, "%s: field %s.%s is not a number", path, what, key);
    *out = json_number_value(v);
    return 0;
}

/* RoPE: rope_theta at the top level, or in transformers v5's rope_parameters;
 * scaling from rope_scaling or rope_parameters ({type|rope_type: yarn,
 * factor, original_max_position_embeddings, attention_factor, beta_fast,
 * beta_slow}), with the attention factor as transformers computes it. */
static int load_rope(inf_hparams *hp, json_t *cfg, const char *path, inf_err *err) {
    json_t *params = json_object_get(cfg, "rope_parameters");
    json_t *scaling = json_object_get(cfg, "rope_scaling");
    if (params && !json_is_null(params) && !json_is_object(params))
        return inf_fail(err, "%s: field rope_parameters is not an object", path);
    if (scaling && !json_is_null(scaling) && !json_is_object(scaling))
        return inf_fail(err, "%s: field rope_scaling is not an object or null", path);
    double theta;
    if (json_object_get(cfg, "rope_theta") || !json_is_object(params)) {
        if (cfg_num(cfg, path, "rope_theta", &theta, err)) return -1;
    } else if (obj_num(params, path, "rope_parameters", "rope_theta", -1, &theta, err)) {
        return -1;
    } else if (theta == -1) {
        return inf_fail(err, "%s: field rope_theta is missing (nor in rope_parameters)", path);
    }
    hp->rope_theta = (float)theta;
    hp->rope_attn_factor = 1;
    json_t *s = json_is_object(scaling) ? scaling : json_is_object(params) ? params : NULL;
    if (!s) return 0;
    json_t *type = json_object_get(s, "rope_type");
    if (!type) type = json_object_get(s, "type");
    const char *name = json_is_string(type) ? json_string_value(type) : NULL;
    const char *what = s == scaling ? "rope_scaling" : "rope_parameters";
    if (!name || !strcmp(name, "default")) return 0;
    if (strcmp(name, "yarn"))
        return inf_fail(err, "%s: %s type \"%s\": inferno supports default and yarn", path, what,
                        name);
    double factor = 0, orig = 0, attn = 0, fast = 0, slow = 0, ms = 0, ms_all = 0;
    if (obj_num(s, path, what, "factor", 0, &factor, err) ||
        obj_num(s, path, what, "original_max_position_embeddings", hp->n_ctx_train, &orig, err) ||
        obj_num(s, path, what, "attention_factor", 0, &attn, err) ||
        obj_num(s, path, what, "beta_fast", 32, &fast, err) ||
        obj_num(s, path, what, "beta_slow", 1, &slow, err) ||
        obj_num(s, path, what, "mscale", 0, &ms, err) ||
        obj_num(s, path, what, "mscale_all_dim", 0, &ms_all, err))
        return -1;
    if (!(factor >= 1) || !(factor < 1e6) || !(orig >= 1) || !(orig <= INT32_MAX) || !(fast > 0) ||
        !(slow > 0) || !(attn >= 0) || !(attn < 1e6))
        return inf_fail(err,
                        "%s: %s: yarn factor %g, original_max_position_embeddings %g, beta_fast "
                        "%g, beta_slow %g, attention_factor %g: expected factor >= 1 and "
                        "positive sizes",
                        path, what, factor, orig, fast, slow, attn);
    hp->yarn_factor = (float)factor;
    hp->yarn_orig_ctx = (int)orig;
    hp->yarn_beta_fast = (float)fast;
    hp->yarn_beta_slow = (float)slow;
    /* transformers: 0.1 * mscale * ln(factor) + 1 (1 for factor <= 1) */
#define YARN_MSCALE(f, k) ((f) <= 1 ? 1.0 : 0.1 * (k)*log(f) + 1.0)
    if (attn > 0)
        hp->rope_attn_factor = (float)attn;
    else if (ms > 0 && ms_all > 0)
        hp->rope_attn_factor = (float)(YARN_MSCALE(factor, ms) / YARN_MSCALE(factor, ms_all));
    else
        hp->rope_attn_factor = (float)YARN_MSCALE(factor, 1);
#undef YARN_MSCALE
    /* the context the scaling was made for */
    if (factor * orig > hp->n_ctx_train && factor * orig <= INT32_MAX)
        hp->n_ctx_train = (int)(factor * orig);
    return 0;
}

static int load_config(inf_model_file *m, const char *dir, inf_err *err) {
    char *path = join(dir, "config.json");
    if (!path) return inf_fail(err, "%s: out of memory", dir);
    int rc = -1;
    json_t *cfg = NULL;
    if (!is_file(path)) {
        inf_fail(err, "%s: folder has no config.json", dir);
        goto done;
    }
    if (!(cfg = load_json(path, err))) goto done;
    json_t *mt = json_object_get(cfg, "model_type");
    if (!json_is_string(mt)) {
        inf_fail(err, "%s: field model_type is missing or not a string", path);
        goto done;
    }
    if (!(m->arch = strdup(json_string_value(mt)))) goto oom;
    /* A vision-language folder (Qwen3-VL: model_type qwen3_vl) holds its text
     * model's fields in text_config: they are the model's, read over the
     * top level's (tie_word_embeddings may sit at either). */
    json_t *text = json_object_get(cfg, "text_config");
    if (text) {
        if (!json_is_object(text)) {
            inf_fail(err, "%s: field text_config is not an object", path);
            goto done;
        }
        json_t *merged = json_copy(cfg);
        if (!merged || json_object_update(merged, text)) {
            json_decref(merged);
            goto oom;
        }
        json_object_del(merged, "text_config");
        json_object_del(merged, "vision_config");
        json_decref(cfg);
        cfg = merged;
        m->priv->text_of_multimodal = true;
    }
    inf_hparams *hp = &m->hp;
    double eps;
    if (cfg_int(cfg, path, "hidden_size", -1, &hp->n_embd, err) ||
        cfg_int(cfg, path, "num_hidden_layers", -1, &hp->n_layer, err) ||
        cfg_int(cfg, path, "num_attention_heads", -1, &hp->n_head, err) ||
        cfg_int(cfg, path, "num_key_value_heads", hp->n_head, &hp->n_head_kv, err) ||
        /* 0 when absent: a model of MoE blocks only (its architecture checks) */
        cfg_int(cfg, path, "intermediate_size", 0, &hp->n_ff, err) ||
        cfg_int(cfg, path, "max_position_embeddings", -1, &hp->n_ctx_train, err) ||
        load_rope(hp, cfg, path, err) || cfg_num(cfg, path, "rms_norm_eps", &eps, err))
        goto done;
    /* head_dim when stated; n_head*head_dim need not equal hidden_size */
    if (!json_object_get(cfg, "head_dim") && hp->n_embd % hp->n_head) {
        inf_fail(err,
                 "%s: field head_dim is missing and hidden_size is not a multiple of "
                 "num_attention_heads",
                 path);
        goto done;
    }
    if (cfg_int(cfg, path, "head_dim", hp->n_embd / hp->n_head, &hp->head_dim, err)) goto done;
    hp->rms_eps = (float)eps;
    m->priv->cfg = json_incref(cfg); /* the architecture reads its own fields */
    rc = 0;
    goto done;
oom:
    inf_fail(err, "%s: out of memory", path);
done:
    json_decref(cfg);
    free(path);
    return rc;
}

/* Opens one safetensors file of the folder and appends it to the shards. */
static int add_shard(inf_model_file *m, const char *dir, const char *file, inf_err *err) {
    struct inf_model_file_priv *p = m->priv;
    st_file **grown = realloc(p->st, (size_t)(p->n_st + 1) * sizeof *grown);
    if (!grown) return inf_fail(err, "%s: out of memory", dir);
    p->st = grown;
    char *path = join(dir, file);
    if (!path) return inf_fail(err, "%s: out of memory", dir);
    int rc = st_open(&p->st[p->n_st], path, err);
    free(path);
    if (rc) return -1;
    p->n_st++;
    return 0;
}

static int find_shard(const inf_model_file *m, const char *dir, const char *file) {
    for (int i = 0; i < m->priv->n_st; i++) {
        const char *name = m->priv->st[i]->name + strlen(dir) + 1;
        if (!strcmp(name, file)) return i;
    }
    return -1;
}

/* model.safetensors.index.json: {"weight_map": {tensor: file, ...}}. Every
 * file named is opened once; every tensor named must be in its file. */
static int load_index(inf_model_file *m, const char *dir, const char *index_path, inf_err *err) {
    json_t *idx = load_json(index_path, err);
    if (!idx) return -1;
    int rc = -1;
    json_t *wm = json_object_get(idx, "weight_map");
    if (!json_is_object(wm) || json_object_size(wm) == 0) {
        inf_fail(err, "%s: field weight_map is missing or not a non-empty object", index_path);
        goto done;
    }
    const char *tname;
    json_t *fv;
    json_object_foreach(wm, tname, fv) {
        const char *file = json_string_value(fv);
        if (!file || !*file || strchr(file, '/') || !strcmp(file, "..") || !strcmp(file, ".")) {
            inf_fail(err, "%s: weight_map[\"%s\"] is not a file name in the folder", index_path,
                     tname);
            goto done;
        }
        if (find_shard(m, dir, file) < 0 && add_shard(m, dir, file, err)) goto done;
    }
    json_object_foreach(wm, tname, fv) {
        const char *file = json_string_value(fv);
        if (!st_find(m->priv->st[find_shard(m, dir, file)], tname)) {
            inf_fail(err,
                     "%s: weight_map says tensor %s is in %s, but that file has no such "
                     "tensor",
                     index_path, tname, file);
            goto done;
        }
    }
    rc = 0;
done:
    json_decref(idx);
    return rc;
}

static int load_weights(inf_model_file *m, const char *dir, inf_err *err) {
    char *index = join(dir, "model.safetensors.index.json"),
         *single = join(dir, "model.safetensors");
    int rc = -1;
    if (!index || !single) {
        inf_fail(err, "%s: out of memory", dir);
        goto done;
    }
    if (is_file(index)) {
        if (load_index(m, dir, index, err)) goto done;
    } else if (is_file(single)) {
        if (add_shard(m, dir, "model.safetensors", err)) goto done;
    } else {
        inf_fail(err,
                 "%s: folder has no model: neither model.safetensors nor "
                 "model.safetensors.index.json",
                 dir);
        goto done;
    }
    int64_t total = 0;
    for (int i = 0; i < m->priv->n_st; i++)
        total += m->priv->st[i]->n_tensors;
    if (total > INT32_MAX) {
        inf_fail(err, "%s: too many tensors", dir);
        goto done;
    }
    m->tensors = calloc(total ? (size_t)total : 1, sizeof *m->tensors);
    if (!m->tensors) {
        inf_fail(err, "%s: out of memory", dir);
        goto done;
    }
    for (int s = 0; s < m->priv->n_st; s++) {
        const st_file *f = m->priv->st[s];
        for (int i = 0; i < f->n_tensors; i++) {
            const st_tensor *st = &f->tensors[i];
            inf_tensor *t = &m->tensors[m->n_tensors];
            const char *name = st->name;
            if (m->priv->text_of_multimodal) {
                /* the text model only: the language model's tensors under the
                   names of the text-only checkpoint, the vision tower left out */
                if (!strncmp(name, "model.visual.", 13) || !strncmp(name, "visual.", 7)) continue;
                static const char LM[] = "model.language_model.";
                if (!strncmp(name, LM, sizeof LM - 1)) {
                    t->name = malloc(strlen(name) + 1);
                    if (t->name) sprintf(t->name, "model.%s", name + sizeof LM - 1);
                } else {
                    t->name = strdup(name);
                }
            } else {
                t->name = strdup(name);
            }
            if (!t->name) {
                inf_fail(err, "%s: out of memory", dir);
                goto done;
            }
            m->n_tensors++;
            t->type = st->type;
            t->n_dims = st->n_dims;
            memcpy(t->ne, st->ne, sizeof t->ne);
            t->data = st->data;
            t->nbytes = st->nbytes;
            t->offset = st->offset;
            t->file_index = s;
        }
    }
    /* A folder saved from the base model (transformers' AutoModel, as the
     * Qwen3-Embedding checkpoints are) names its tensors without the
     * causal-LM wrapper's base_model_prefix "model.": index them as
     * transformers loads them, so that both layouts read alike. */
    bool flat = m->n_tensors > 0;
    for (int i = 0; i < m->n_tensors && flat; i++)
        if (!strncmp(m->tensors[i].name, "model.", 6) ||
            !strcmp(m->tensors[i].name, "lm_head.weight"))
            flat = false;
    for (int i = 0; i < m->n_tensors && flat; i++) {
        char *name = malloc(strlen(m->tensors[i].name) + 7);
        if (!name) {
            inf_fail(err, "%s: out of memory", dir);
            goto done;
        }
        sprintf(name, "model.%s", m->tensors[i].name);
        free(m->tensors[i].name);
        m->tensors[i].name = name;
    }
    rc = 0;
done:
    free(index);
    free(single);
    return rc;
}

/* sentence-transformers' pooling module (modules.json → 1_Pooling/config.json
 * for Qwen3-Embedding): which token's state is the text's embedding. */
static int load_pooling(inf_model_file *m, const char *dir, inf_err *err) {
    char *path = join(dir, "1_Pooling/config.json");
    if (!path) return inf_fail(err, "%s: out of memory", dir);
    int rc = 0;
    if (is_file(path)) {
        json_t *cfg = load_json(path, err);
        if (!cfg) {
            free(path);
            return -1;
        }
        static const struct {
            const char *key;
            inf_pooling kind;
        } modes[] = {{"pooling_mode_lasttoken", INF_POOL_LAST},
                     {"pooling_mode_mean_tokens", INF_POOL_MEAN},
                     {"pooling_mode_cls_token", INF_POOL_CLS},
                     {"pooling_mode_max_tokens", INF_POOL_OTHER},
                     {"pooling_mode_mean_sqrt_len_tokens", INF_POOL_OTHER},
                     {"pooling_mode_weightedmean_tokens", INF_POOL_OTHER}};
        m->pooling = INF_POOL_NONE;
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
            json_t *v = json_object_get(cfg, modes[i].key);
            if (v && !json_is_boolean(v)) {
                rc = inf_fail(err, "%s: %s: expected true or false", path, modes[i].key);
                break;
            }
            if (json_is_true(v) && m->pooling == INF_POOL_NONE) m->pooling = modes[i].kind;
        }
        json_decref(cfg);
    }
    free(path);
    return rc;
}

/* generation_config.json: the sampling the model's authors recommend. */
static int load_generation_config(inf_model_file *m, const char *dir, inf_err *err) {
    char *path = join(dir, "generation_config.json");
    if (!path) return inf_fail(err, "%s: out of memory", dir);
    if (!is_file(path)) {
        free(path);
        return 0;
    }
    json_t *cfg = load_json(path, err);
    int rc = cfg ? 0 : -1;
    inf_sampling_rec *r = &m->sampling;
    static const struct {
        const char *key;
        unsigned bit;
    } fields[] = {{"temperature", INF_REC_TEMP},
                  {"top_k", INF_REC_TOP_K},
                  {"top_p", INF_REC_TOP_P},
                  {"min_p", INF_REC_MIN_P},
                  {"repetition_penalty", INF_REC_REPEAT_PENALTY}};
    for (size_t i = 0; cfg && !rc && i < sizeof fields / sizeof fields[0]; i++) {
        json_t *v = json_object_get(cfg, fields[i].key);
        if (!v || json_is_null(v)) continue;
        if (!json_is_number(v) || (fields[i].bit == INF_REC_TOP_K && !json_is_integer(v))) {
            rc = inf_fail(err, "%s: %s: expected a number%s", path, fields[i].key,
                          fields[i].bit == INF_REC_TOP_K ? " (an integer)" : "");
            break;
        }
        double x = json_number_value(v);
        r->set |= fields[i].bit;
        if (fields[i].bit == INF_REC_TEMP) r->temp = (float)x;
        if (fields[i].bit == INF_REC_TOP_K) r->top_k = x > INT32_MAX ? INT32_MAX : (int)x;
        if (fields[i].bit == INF_REC_TOP_P) r->top_p = (float)x;
        if (fields[i].bit == INF_REC_MIN_P) r->min_p = (float)x;
        if (fields[i].bit == INF_REC_REPEAT_PENALTY) r->repeat_penalty = (float)x;
    }
    /* do_sample false: transformers decodes greedily whatever the others say */
    json_t *ds = cfg ? json_object_get(cfg, "do_sample") : NULL;
    if (!rc && ds && !json_is_boolean(ds))
        rc = inf_fail(err, "%s: do_sample: expected true or false", path);
    if (!rc && json_is_false(ds)) {
        r->set |= INF_REC_TEMP;
        r->temp = 0;
    }
    json_decref(cfg);
    free(path);
    return rc;
}

static int load_tokenizer(inf_model_file *m, const char *dir, inf_err *err) {
    char *tj = join(dir, "tokenizer.json"), *tc = join(dir, "tokenizer_config.json");
    int rc = -1;
    if (!tj || !tc) {
        inf_fail(err, "%s: out of memory", dir);
    } else if (!is_file(tj)) {
        inf_fail(err, "%s: folder has no tokenizer.json", dir);
    } else {
        rc = inf_vocab_from_hf(&m->vocab, tj, is_file(tc) ? tc : NULL, err);
    }
    free(tj);
    free(tc);
    return rc;
}

int hf_model_open(inf_model_file **out, const char *dir, inf_err *err) {
    *out = NULL;
    inf_model_file *m;
    if (model_alloc(&m, INF_FORMAT_HF, dir, err)) return -1;
    /* the folder's own name, without trailing slashes */
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    if (!(m->name = strndup(dir + b, n - b))) {
        inf_model_close(m);
        return inf_fail(err, "%s: out of memory", dir);
    }
    if (load_config(m, dir, err) || load_weights(m, dir, err) || load_tokenizer(m, dir, err) ||
        load_pooling(m, dir, err) || load_generation_config(m, dir, err) || model_index(m, err)) {
        inf_model_close(m);
        return -1;
    }
    *out = m;
    return 0;
}
