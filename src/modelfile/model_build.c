/* The format-neutral part of loading, shared by the readers: allocating the
 * model, indexing its tensors by name, checking the shared hyperparameters;
 * inf_model_close, inf_model_find and the metadata look-ups. See
 * model_build.h. */
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
    m->pooling = INF_POOL_UNSPECIFIED;
    m->vocab = (inf_vocab_desc){.bos_id = -1, .eos_id = -1, .pad_id = -1, .eot_id = -1};
    *out = m;
    return 0;
}

void inf_model_close(inf_model_file *m) {
    if (!m) return;
    for (int i = 0; m->tensors && i < m->n_tensors; i++)
        free(m->tensors[i].name);
    free(m->tensors);
    inf_vocab_desc_free(&m->vocab);
    free(m->path);
    free(m->arch);
    free(m->name);
    if (m->priv) {
        if (m->priv->splits) {
            for (int i = 0; i < m->priv->n_splits; i++)
                gguf_close(m->priv->splits[i]);
            free(m->priv->splits);
        } else {
            gguf_close(m->priv->gguf);
        }
        for (int i = 0; i < m->priv->n_st; i++)
            st_close(m->priv->st[i]);
        free(m->priv->st);
        free(m->priv->by_name);
        json_decref(m->priv->cfg);
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

static int check_hparams(const inf_model_file *m, inf_err *err) {
    const inf_hparams *hp = &m->hp;
    const struct {
        const char *name;
        int v;
    } pos[] = {{"n_layer", hp->n_layer},   {"n_embd", hp->n_embd},
               {"n_head", hp->n_head},     {"n_head_kv", hp->n_head_kv},
               {"head_dim", hp->head_dim}, {"n_ctx_train", hp->n_ctx_train}};
    /* n_ff may be 0: a model of MoE blocks only (its architecture checks) */
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
    /* every layer needs a tensor: bounds n_layer before anything is sized by it */
    if (hp->n_layer > m->n_tensors)
        return inf_fail(err, "%s: %d layers, but the file has only %d tensors", m->path,
                        hp->n_layer, m->n_tensors);
    if (hp->n_layer > INF_MAX_LAYERS)
        return inf_fail(err, "%s: %d layers, more than the %d inferno runs", m->path, hp->n_layer,
                        INF_MAX_LAYERS);
    return 0;
}

int model_index(inf_model_file *m, inf_err *err) {
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
    return check_hparams(m, err);
}

/* The mapping t's data lies in, or NULL. */
static const inf_mmap *tensor_map(const inf_model_file *m, const inf_tensor *t) {
    const struct inf_model_file_priv *p = m->priv;
    if (!p || !t) return NULL;
    if (p->gguf && !p->splits) return &p->gguf->map;
    if (p->splits && t->file_index >= 0 && t->file_index < p->n_splits)
        return &p->splits[t->file_index]->map;
    if (!p->gguf && t->file_index >= 0 && t->file_index < p->n_st)
        return &p->st[t->file_index]->map;
    return NULL;
}

bool inf_model_locate(const inf_model_file *m, const inf_tensor *t, int *file, uint64_t *offset) {
    *file = 0;
    *offset = 0;
    const inf_mmap *map = tensor_map(m, t);
    const unsigned char *d = t ? t->data : NULL;
    if (!map || !map->data || !d || d < map->data || t->nbytes > map->size ||
        (size_t)(d - map->data) > map->size - t->nbytes)
        return false;
    *file = 1 + (t->file_index > 0 ? t->file_index : 0);
    *offset = (uint64_t)(d - map->data);
    return true;
}

/* The mapping of file i of m, its path in *name; NULL past the last. */
static const inf_mmap *file_map(const inf_model_file *m, int i, const char **name) {
    const struct inf_model_file_priv *p = m->priv;
    if (p->splits) {
        if (i >= p->n_splits) return NULL;
        *name = p->splits[i]->name;
        return &p->splits[i]->map;
    }
    if (p->gguf) {
        if (i > 0) return NULL;
        *name = p->gguf->name;
        return &p->gguf->map;
    }
    if (i >= p->n_st) return NULL;
    *name = p->st[i]->name;
    return &p->st[i]->map;
}

int inf_model_file_ident(const inf_model_file *m, char *buf, size_t cap, size_t *bytes) {
    size_t len = 0;
    *bytes = 0;
    const char *name;
    const inf_mmap *map;
    for (int i = 0; m->priv && (map = file_map(m, i, &name)) != NULL; i++) {
        char *real = realpath(name, NULL);
        if (!real) return -1;
        int n = snprintf(buf + len, cap - len, "%s %zu %llu %llu %lld\n", real, map->size, map->dev,
                         map->ino, map->mtime_ns);
        free(real);
        if (n < 0 || (size_t)n >= cap - len) return -1;
        len += (size_t)n;
        *bytes += map->size;
    }
    return len ? (int)len : -1;
}

void inf_model_drop_pages(const inf_model_file *m, const inf_tensor *t) {
    const inf_mmap *map = tensor_map(m, t);
    if (map) inf_mmap_drop(map, t->data, t->nbytes);
}

void inf_model_populate_pages(const inf_model_file *m, const inf_tensor *t) {
    const inf_mmap *map = tensor_map(m, t);
    if (map) inf_mmap_populate(map, t->data, t->nbytes);
}

/* ---- metadata ---- */

/* A config.json field; "a.b" is field b of object a (rope_parameters.partial_rotary_factor). */
static json_t *cfg_field(const inf_model_file *m, const char *key) {
    json_t *v = m->priv ? m->priv->cfg : NULL;
    while (v && key) {
        const char *dot = strchr(key, '.');
        if (!dot) return json_object_get(v, key);
        char part[128];
        if ((size_t)(dot - key) >= sizeof part) return NULL;
        memcpy(part, key, (size_t)(dot - key));
        part[dot - key] = 0;
        v = json_object_get(v, part);
        if (!json_is_object(v)) return NULL;
        key = dot + 1;
    }
    return NULL;
}

int inf_model_meta_int(const inf_model_file *m, const char *key, int64_t *out, inf_err *err) {
    if (m->priv && m->priv->gguf) {
        if (!gguf_find(m->priv->gguf, key)) return 0;
        return gguf_get_int(m->priv->gguf, key, out, err) ? -1 : 1;
    }
    json_t *v = cfg_field(m, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v))
        return inf_fail(err, "%s: config.json field %s is not an integer", m->path, key);
    *out = json_integer_value(v);
    return 1;
}

int inf_model_meta_float(const inf_model_file *m, const char *key, double *out, inf_err *err) {
    if (m->priv && m->priv->gguf) {
        if (!gguf_find(m->priv->gguf, key)) return 0;
        return gguf_get_float(m->priv->gguf, key, out, err) ? -1 : 1;
    }
    json_t *v = cfg_field(m, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v))
        return inf_fail(err, "%s: config.json field %s is not a number", m->path, key);
    *out = json_number_value(v);
    return 1;
}

int inf_model_meta_bool(const inf_model_file *m, const char *key, bool *out, inf_err *err) {
    if (m->priv && m->priv->gguf) {
        if (!gguf_find(m->priv->gguf, key)) return 0;
        return gguf_get_bool(m->priv->gguf, key, out, err) ? -1 : 1;
    }
    json_t *v = cfg_field(m, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v))
        return inf_fail(err, "%s: config.json field %s is not true or false", m->path, key);
    *out = json_is_true(v);
    return 1;
}

int inf_model_meta_ints(const inf_model_file *m, const char *key, int64_t *out, int cap, int *n,
                        inf_err *err) {
    *n = 0;
    if (m->priv && m->priv->gguf) {
        if (!gguf_find(m->priv->gguf, key)) return 0;
        const gguf_value *arr;
        if (gguf_get_arr(m->priv->gguf, key, GGUF_TYPE_INT32, &arr, err)) return -1;
        if (arr->arr.n > (uint64_t)cap)
            return inf_fail(err, "%s: metadata %s has %llu entries, expected at most %d", m->path,
                            key, (unsigned long long)arr->arr.n, cap);
        for (uint64_t i = 0; i < arr->arr.n; i++)
            out[i] = gguf_arr_at(arr, i).i;
        *n = (int)arr->arr.n;
        return 1;
    }
    json_t *v = cfg_field(m, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_array(v))
        return inf_fail(err, "%s: config.json field %s is not an array", m->path, key);
    if (json_array_size(v) > (size_t)cap)
        return inf_fail(err, "%s: config.json field %s has %zu entries, expected at most %d",
                        m->path, key, json_array_size(v), cap);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e))
            return inf_fail(err, "%s: config.json field %s[%zu] is not an integer", m->path, key,
                            i);
        out[i] = json_integer_value(e);
    }
    *n = (int)json_array_size(v);
    return 1;
}

int inf_model_meta_strs(const inf_model_file *m, const char *key, const char **out, int cap, int *n,
                        inf_err *err) {
    *n = 0;
    if (m->priv && m->priv->gguf) {
        if (!gguf_find(m->priv->gguf, key)) return 0;
        return inf_fail(err, "%s: metadata %s: string arrays are read from config.json only",
                        m->path, key);
    }
    json_t *v = cfg_field(m, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_array(v))
        return inf_fail(err, "%s: config.json field %s is not an array", m->path, key);
    if (json_array_size(v) > (size_t)cap)
        return inf_fail(err, "%s: config.json field %s has %zu entries, expected at most %d",
                        m->path, key, json_array_size(v), cap);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e))
            return inf_fail(err, "%s: config.json field %s[%zu] is not a string", m->path, key, i);
        out[i] = json_string_value(e);
    }
    *n = (int)json_array_size(v);
    return 1;
}
