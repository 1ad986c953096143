#include "support/st_writer.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *name;
    inf_dtype type;
    int n_dims;
    int64_t shape[INF_MAX_DIMS]; /* slowest-first */
    uint64_t nbytes;
} st_tensor;

struct st_writer {
    st_tensor *tensors; /* [n_tensors] */
    int n_tensors, cap_tensors;
    uint64_t total;
    char first_error[512];

    FILE *f;
    char *path;
    int cur;
    uint64_t cur_done;
};

static const char *st_dtype_name(inf_dtype t) {
    switch (t) {
    case INF_F32:
        return "F32";
    case INF_F16:
        return "F16";
    case INF_BF16:
        return "BF16";
    default:
        return NULL;
    }
}

st_writer *st_writer_create(void) {
    return calloc(1, sizeof(st_writer));
}

void st_writer_free(st_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    for (int i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->tensors);
    free(w->path);
    free(w);
}

static void st_fail_arg(st_writer *w, const char *name, const char *what) {
    if (!w->first_error[0])
        snprintf(w->first_error, sizeof w->first_error, "tensor %s: %s", name, what);
}

void st_writer_add_tensor(st_writer *w, const char *name, inf_dtype type, int n_dims,
                          const int64_t *shape) {
    if (!st_dtype_name(type)) {
        st_fail_arg(w, name, "safetensors holds only F32, F16, BF16");
        return;
    }
    if (n_dims < 1 || n_dims > INF_MAX_DIMS) {
        st_fail_arg(w, name, "n_dims must be 1..4");
        return;
    }
    uint64_t nbytes = inf_dtype_get(type)->block_bytes;
    for (int d = 0; d < n_dims; d++) {
        if (shape[d] <= 0) {
            st_fail_arg(w, name, "dimensions must be positive");
            return;
        }
        nbytes *= (uint64_t)shape[d];
    }
    if (w->n_tensors == w->cap_tensors) {
        int cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        st_tensor *t = realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) {
            st_fail_arg(w, name, "out of memory");
            return;
        }
        w->tensors = t;
        w->cap_tensors = cap;
    }
    st_tensor *t = &w->tensors[w->n_tensors];
    *t = (st_tensor){.name = strdup(name), .type = type, .n_dims = n_dims, .nbytes = nbytes};
    if (!t->name) {
        st_fail_arg(w, name, "out of memory");
        return;
    }
    memcpy(t->shape, shape, (size_t)n_dims * sizeof *shape);
    w->n_tensors++;
    w->total += nbytes;
}

uint64_t st_writer_data_bytes(const st_writer *w) {
    return w->total;
}

static int st_write_all(st_writer *w, const void *p, size_t n, inf_err *err) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return inf_fail(err, "%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

/* The JSON header, in declaration order, "__metadata__" first. */
static char *st_header_json(const st_writer *w) {
    json_t *root = json_object();
    json_object_set_new(root, "__metadata__", json_pack("{s:s}", "format", "pt"));
    uint64_t off = 0;
    for (int i = 0; i < w->n_tensors; i++) {
        const st_tensor *t = &w->tensors[i];
        json_t *shape = json_array();
        for (int d = 0; d < t->n_dims; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *desc = json_object();
        json_object_set_new(desc, "dtype", json_string(st_dtype_name(t->type)));
        json_object_set_new(desc, "shape", shape);
        json_object_set_new(desc, "data_offsets",
                            json_pack("[I,I]", (json_int_t)off, (json_int_t)(off + t->nbytes)));
        json_object_set_new(root, t->name, desc);
        off += t->nbytes;
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    return s;
}

int st_writer_open(st_writer *w, const char *path, inf_err *err) {
    if (w->first_error[0]) return inf_fail(err, "%s: %s", path, w->first_error);
    if (w->f) return inf_fail(err, "%s: writer is already open", path);
    char *json = st_header_json(w);
    if (!json) return inf_fail(err, "%s: out of memory building the header", path);
    size_t len = strlen(json);
    size_t padded = (len + 7) / 8 * 8;
    free(w->path);
    w->path = strdup(path);
    w->f = fopen(path, "wb");
    if (!w->f || !w->path) {
        free(json);
        return inf_fail(err, "%s: cannot create: %s", path, strerror(errno));
    }
    uint64_t hlen = padded; /* little-endian, like every target */
    int rc = st_write_all(w, &hlen, 8, err);
    if (!rc) rc = st_write_all(w, json, len, err);
    for (size_t i = len; !rc && i < padded; i++)
        rc = st_write_all(w, " ", 1, err);
    free(json);
    w->cur = 0;
    w->cur_done = 0;
    return rc;
}

int st_writer_write(st_writer *w, const void *data, size_t n, inf_err *err) {
    if (!w->f) return inf_fail(err, "safetensors writer: write before open");
    if (w->cur >= w->n_tensors)
        return inf_fail(err, "%s: more data than the declared tensors hold", w->path);
    st_tensor *t = &w->tensors[w->cur];
    if (n > t->nbytes - w->cur_done)
        return inf_fail(err, "%s: tensor %s: %zu bytes would overrun its %llu bytes", w->path,
                        t->name, n, (unsigned long long)t->nbytes);
    if (st_write_all(w, data, n, err)) return -1;
    w->cur_done += n;
    if (w->cur_done == t->nbytes) {
        w->cur++;
        w->cur_done = 0;
    }
    return 0;
}

int st_writer_close(st_writer *w, inf_err *err) {
    if (!w->f) return inf_fail(err, "safetensors writer: close before open");
    int rc = 0;
    if (w->cur != w->n_tensors)
        rc = inf_fail(err, "%s: tensor %s was not written completely", w->path,
                      w->tensors[w->cur].name);
    if (fclose(w->f) != 0 && !rc)
        rc = inf_fail(err, "%s: close failed: %s", w->path, strerror(errno));
    w->f = NULL;
    if (rc) remove(w->path);
    return rc;
}

/* Writes a JSON value to a file, indented like Hugging Face's files. */
static int dump_json(const char *path, json_t *root, inf_err *err) {
    if (!root) return inf_fail(err, "%s: out of memory building JSON", path);
    int rc =
        json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (rc != 0) return inf_fail(err, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

int st_write_index(const char *path, int n, const char *const *names, const char *const *files,
                   uint64_t total_size, inf_err *err) {
    json_t *map = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(map, names[i], json_string(files[i]));
    json_t *root = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)total_size,
                             "weight_map", map);
    return dump_json(path, root, err);
}

/* A float as JSON the way Python writes it: an integer when integral, else
 * the shortest decimal that reads back as the same float (1e-06, not
 * 9.99999997e-07). */
static json_t *json_float(float v) {
    if (v == floorf(v) && fabsf(v) < 1e15f) return json_integer((json_int_t)v);
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return json_real(strtod(buf, NULL));
}

/* Qwen3.5's config.json, as its downloads have it: Qwen3_5ForConditionalGeneration
 * (Qwen3_5MoeForConditionalGeneration) with the text model's fields in
 * text_config (no vision_config: the folder holds no vision tower). The MoE
 * text config has the expert fields of transformers' Qwen3_5MoeTextConfig and
 * no intermediate_size (no dense FFN) and no norm_topk_prob (its router
 * always renormalizes). */
static json_t *qwen35_config(const inf_hparams *hp, const char *torch_dtype, int bos_id,
                             int eos_id) {
    json_t *t = json_object();
    json_t *layer_types = json_array();
    int interval = 0; /* the first attention layer's number, from 1 */
    for (int l = 0; l < hp->n_layer; l++) {
        json_array_append_new(
            layer_types, json_string(hp->recurrent[l] ? "linear_attention" : "full_attention"));
        if (!interval && !hp->recurrent[l]) interval = l + 1;
    }
    const int n_rot = hp->n_rot ? hp->n_rot : hp->head_dim;
    json_t *rope = json_object();
    json_object_set_new(rope, "rope_type", json_string("default"));
    json_object_set_new(rope, "rope_theta", json_float(hp->rope_theta));
    json_object_set_new(rope, "partial_rotary_factor", json_float((float)n_rot / hp->head_dim));
    json_object_set_new(rope, "mrope_section", json_pack("[i,i,i]", 11, 11, 10));
    json_object_set_new(rope, "mrope_interleaved", json_true());
    const bool moe = hp->n_expert > 0;
    json_object_set_new(t, "model_type", json_string(moe ? "qwen3_5_moe_text" : "qwen3_5_text"));
    json_object_set_new(t, "attention_bias", json_false());
    json_object_set_new(t, "attention_dropout", json_real(0.0));
    json_object_set_new(t, "attn_output_gate", json_true());
    json_object_set_new(t, "bos_token_id", json_integer(bos_id));
    json_object_set_new(t, "eos_token_id", json_integer(eos_id));
    json_object_set_new(t, "dtype", json_string(torch_dtype));
    json_object_set_new(t, "full_attention_interval", json_integer(interval ? interval : 4));
    json_object_set_new(t, "head_dim", json_integer(hp->head_dim));
    json_object_set_new(t, "hidden_act", json_string("silu"));
    json_object_set_new(t, "hidden_size", json_integer(hp->n_embd));
    json_object_set_new(t, "initializer_range", json_real(0.02));
    if (hp->n_ff > 0) json_object_set_new(t, "intermediate_size", json_integer(hp->n_ff));
    json_object_set_new(t, "layer_types", layer_types);
    json_object_set_new(t, "linear_conv_kernel_dim", json_integer(hp->ssm_d_conv));
    json_object_set_new(t, "linear_key_head_dim", json_integer(hp->ssm_d_k));
    json_object_set_new(t, "linear_num_key_heads", json_integer(hp->ssm_n_k_heads));
    json_object_set_new(t, "linear_num_value_heads", json_integer(hp->ssm_n_v_heads));
    json_object_set_new(t, "linear_value_head_dim", json_integer(hp->ssm_d_v));
    json_object_set_new(t, "max_position_embeddings", json_integer(hp->n_ctx_train));
    if (moe) json_object_set_new(t, "moe_intermediate_size", json_integer(hp->n_ff_exp));
    json_object_set_new(t, "num_attention_heads", json_integer(hp->n_head));
    if (moe) {
        json_object_set_new(t, "num_experts", json_integer(hp->n_expert));
        json_object_set_new(t, "num_experts_per_tok", json_integer(hp->n_expert_used));
    }
    json_object_set_new(t, "num_hidden_layers", json_integer(hp->n_layer));
    json_object_set_new(t, "num_key_value_heads", json_integer(hp->n_head_kv));
    if (moe) json_object_set_new(t, "output_router_logits", json_false());
    json_object_set_new(t, "rms_norm_eps", json_float(hp->rms_eps));
    json_object_set_new(t, "rope_parameters", rope);
    if (moe) {
        json_object_set_new(t, "router_aux_loss_coef", json_real(0.001));
        json_object_set_new(t, "shared_expert_intermediate_size", json_integer(hp->n_ff_shexp));
    }
    json_object_set_new(t, "tie_word_embeddings", json_boolean(hp->tied_output));
    json_object_set_new(t, "use_cache", json_true());
    json_object_set_new(t, "vocab_size", json_integer(hp->n_vocab));
    json_t *c = json_object();
    json_object_set_new(c, "architectures",
                        json_pack("[s]", moe ? "Qwen3_5MoeForConditionalGeneration"
                                             : "Qwen3_5ForConditionalGeneration"));
    json_object_set_new(c, "model_type", json_string(moe ? "qwen3_5_moe" : "qwen3_5"));
    json_object_set_new(c, "text_config", t);
    json_object_set_new(c, "tie_word_embeddings", json_boolean(hp->tied_output));
    return c;
}

int st_write_config(const char *path, const inf_hparams *hp, const char *torch_dtype, int bos_id,
                    int eos_id, inf_err *err) {
    if (hp->ssm_n_v_heads > 0)
        return dump_json(path, qwen35_config(hp, torch_dtype, bos_id, eos_id), err);
    json_t *c = json_object();
    const bool moe = hp->n_expert > 0;
    json_object_set_new(c, "architectures",
                        json_pack("[s]", moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"));
    json_object_set_new(c, "attention_bias", json_false());
    json_object_set_new(c, "attention_dropout", json_real(0.0));
    json_object_set_new(c, "bos_token_id", json_integer(bos_id));
    json_object_set_new(c, "eos_token_id", json_integer(eos_id));
    json_object_set_new(c, "head_dim", json_integer(hp->head_dim));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "hidden_size", json_integer(hp->n_embd));
    json_object_set_new(c, "initializer_range", json_real(0.02));
    json_object_set_new(c, "intermediate_size", json_integer(hp->n_ff));
    json_object_set_new(c, "max_position_embeddings", json_integer(hp->n_ctx_train));
    json_object_set_new(c, "max_window_layers", json_integer(hp->n_layer));
    json_object_set_new(c, "model_type", json_string(moe ? "qwen3_moe" : "qwen3"));
    if (moe) { /* as Qwen3-30B-A3B's config.json states them */
        json_object_set_new(c, "num_experts", json_integer(hp->n_expert));
        json_object_set_new(c, "num_experts_per_tok", json_integer(hp->n_expert_used));
        json_object_set_new(c, "moe_intermediate_size", json_integer(hp->n_ff_exp));
        json_object_set_new(c, "norm_topk_prob", json_boolean(hp->norm_topk_prob));
        json_object_set_new(c, "decoder_sparse_step", json_integer(1));
        json_object_set_new(c, "mlp_only_layers", json_array());
        json_object_set_new(c, "output_router_logits", json_false());
        json_object_set_new(c, "router_aux_loss_coef", json_real(0.001));
    }
    json_object_set_new(c, "num_attention_heads", json_integer(hp->n_head));
    json_object_set_new(c, "num_hidden_layers", json_integer(hp->n_layer));
    json_object_set_new(c, "num_key_value_heads", json_integer(hp->n_head_kv));
    json_object_set_new(c, "rms_norm_eps", json_float(hp->rms_eps));
    json_object_set_new(c, "rope_scaling", json_null());
    json_object_set_new(c, "rope_theta", json_float(hp->rope_theta));
    json_object_set_new(c, "sliding_window", json_null());
    json_object_set_new(c, "tie_word_embeddings", json_boolean(hp->tied_output));
    json_object_set_new(c, "torch_dtype", json_string(torch_dtype));
    json_object_set_new(c, "transformers_version", json_string("4.51.0"));
    json_object_set_new(c, "use_cache", json_true());
    json_object_set_new(c, "use_sliding_window", json_false());
    json_object_set_new(c, "vocab_size", json_integer(hp->n_vocab));
    return dump_json(path, c, err);
}

int st_copy_file(const char *dst, const char *src, inf_err *err) {
    FILE *in = fopen(src, "rb");
    if (!in) return inf_fail(err, "%s: cannot open: %s", src, strerror(errno));
    FILE *out = fopen(dst, "wb");
    if (!out) {
        fclose(in);
        return inf_fail(err, "%s: cannot create: %s", dst, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) {
            rc = inf_fail(err, "%s: write failed: %s", dst, strerror(errno));
            break;
        }
    if (!rc && ferror(in)) rc = inf_fail(err, "%s: read failed", src);
    fclose(in);
    if (fclose(out) != 0 && !rc) rc = inf_fail(err, "%s: close failed: %s", dst, strerror(errno));
    return rc;
}
