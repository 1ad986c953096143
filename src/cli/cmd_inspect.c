/* inferno inspect FILE|DIR: what is inside a GGUF file or a Hugging Face
 * folder: format, hyperparameters, metadata (long arrays summarized), the
 * tensor table and totals. --json prints everything, arrays in full, for
 * machines (the oracle test compares it with @huggingface/gguf). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "modelfile/gguf.h"
#include "model/model.h"
#include "modelfile/model.h"

/* ---- value printing ------------------------------------------------------ */

/* A JSON string literal of raw bytes: quotes, backslashes and control bytes
 * escaped, everything else (UTF-8) passed through. */
static void put_json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* A value as JSON. 64-bit integers are strings (JSON numbers lose them);
 * FLOAT32 prints enough digits to round-trip the float. */
static void put_json_value(FILE *f, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
        fprintf(f, "%" PRIu64, v->u);
        break;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
        fprintf(f, "%" PRId64, v->i);
        break;
    case GGUF_TYPE_UINT64:
        fprintf(f, "\"%" PRIu64 "\"", v->u);
        break;
    case GGUF_TYPE_INT64:
        fprintf(f, "\"%" PRId64 "\"", v->i);
        break;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64:
        if (v->f != v->f || v->f - v->f != 0)
            fprintf(f, "\"%g\"", v->f); /* NaN, inf */
        else
            fprintf(f, "%.17g", v->f);
        break;
    case GGUF_TYPE_BOOL:
        fputs(v->b ? "true" : "false", f);
        break;
    case GGUF_TYPE_STRING:
        put_json_str(f, v->str.ptr, (size_t)v->str.len);
        break;
    case GGUF_TYPE_ARRAY:
        fputc('[', f);
        for (uint64_t i = 0; i < v->arr.n; i++) {
            if (i) fputc(',', f);
            gguf_value e = gguf_arr_at(v, i);
            put_json_value(f, &e);
        }
        fputc(']', f);
        break;
    default:
        fputs("null", f);
    }
}

/* A value for people: strings quoted (long ones cut with their length),
 * arrays longer than 8 summarized as [N type: first, ...]. */
static void put_text_value(FILE *f, const gguf_value *v) {
    if (v->type == GGUF_TYPE_STRING) {
        size_t n = (size_t)v->str.len;
        if (n > 60) {
            put_json_str(f, v->str.ptr, 50);
            fprintf(f, "... (%zu bytes)", n);
        } else {
            put_json_str(f, v->str.ptr, n);
        }
    } else if (v->type == GGUF_TYPE_ARRAY) {
        uint64_t n = v->arr.n, show = n > 8 ? 3 : n;
        if (n > 8)
            fprintf(f, "[%" PRIu64 " %s%s: ", n,
                    v->arr.type == GGUF_TYPE_STRING ? "string" : gguf_type_name(v->arr.type),
                    v->arr.type == GGUF_TYPE_STRING ? "s" : "");
        else
            fputc('[', f);
        for (uint64_t i = 0; i < show; i++) {
            gguf_value e = gguf_arr_at(v, i);
            fputs(i ? ", " : "", f);
            put_text_value(f, &e);
        }
        fputs(n > show ? ", ...]" : "]", f);
    } else if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64) {
        fprintf(f, "%g", v->f);
    } else {
        put_json_value(f, v);
    }
}

/* ---- sections ------------------------------------------------------------ */

static void hparams_text(const inf_model_file *m) {
    const inf_hparams *h = &m->hp;
    printf("\nhyperparameters (%s, %s):\n", m->arch, m->name ? m->name : "");
    printf("  n_layer %d  n_embd %d  n_head %d  n_head_kv %d  head_dim %d  n_ff %d  n_vocab %d\n",
           h->n_layer, h->n_embd, h->n_head, h->n_head_kv, h->head_dim, h->n_ff, h->n_vocab);
    printf("  n_ctx_train %d  rope_theta %g  rms_eps %g  tied_output %s\n", h->n_ctx_train,
           (double)h->rope_theta, (double)h->rms_eps, h->tied_output ? "yes" : "no");
    if (h->n_expert > 0)
        printf("  experts %d, %d used per token, expert n_ff %d, top-k renormalized %s\n",
               h->n_expert, h->n_expert_used, h->n_ff_exp, h->norm_topk_prob ? "yes" : "no");
    if (h->yarn_factor > 0)
        printf("  rope scaling yarn: factor %g, original context %d, attention factor %g\n",
               (double)h->yarn_factor, h->yarn_orig_ctx, (double)h->rope_attn_factor);
    const inf_vocab_desc *v = &m->vocab;
    printf("  tokenizer %s/%s: %d tokens, %d merges, bos %d, eos %d, pad %d, eot %d, add_bos %s, "
           "chat template %s\n",
           v->model ? v->model : "?", v->pre ? v->pre : "?", v->n_tokens, v->n_merges, v->bos_id,
           v->eos_id, v->pad_id, v->eot_id, v->add_bos ? "yes" : "no",
           v->chat_template ? "yes" : "no");
}

static void hparams_json(const inf_model_file *m) {
    const inf_hparams *h = &m->hp;
    printf("\"hparams\":{\"arch\":");
    put_json_str(stdout, m->arch, strlen(m->arch));
    printf(",\"n_layer\":%d,\"n_embd\":%d,\"n_head\":%d,\"n_head_kv\":%d,\"head_dim\":%d,"
           "\"n_ff\":%d,\"n_vocab\":%d,\"n_ctx_train\":%d,\"rope_theta\":%.9g,\"rms_eps\":%.9g,"
           "\"tied_output\":%s},\n",
           h->n_layer, h->n_embd, h->n_head, h->n_head_kv, h->head_dim, h->n_ff, h->n_vocab,
           h->n_ctx_train, (double)h->rope_theta, (double)h->rms_eps,
           h->tied_output ? "true" : "false");
    const inf_vocab_desc *v = &m->vocab;
    printf("\"vocab\":{\"n_tokens\":%d,\"n_merges\":%d,\"bos_id\":%d,\"eos_id\":%d,\"pad_id\":%d,"
           "\"eot_id\":%d,\"add_bos\":%s},\n",
           v->n_tokens, v->n_merges, v->bos_id, v->eos_id, v->pad_id, v->eot_id,
           v->add_bos ? "true" : "false");
}

static int64_t n_elements(int n_dims, const int64_t *ne) {
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++)
        n *= ne[d];
    return n;
}

/* One tensor row; shape in the file's own order (HF: slowest first). */
static void tensor_text(const char *name, uint32_t type, int n_dims, const int64_t *ne,
                        bool hf_order, size_t bytes, uint64_t offset, int file_index) {
    char shape[96];
    size_t k = (size_t)snprintf(shape, sizeof shape, "[");
    for (int d = 0; d < n_dims; d++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? ", " : "",
                              ne[hf_order ? n_dims - 1 - d : d]);
    snprintf(shape + k, sizeof shape - k, "]");
    printf("  %-48s %-5s %-22s %12zu %12" PRIu64, name, inf_ggml_type_name(type), shape, bytes,
           offset);
    if (file_index >= 0) printf("  %d", file_index);
    printf("\n");
}

static void tensor_json(bool first, const char *name, uint32_t type, int n_dims, const int64_t *ne,
                        size_t bytes, uint64_t offset, uint64_t file_offset, int file_index) {
    printf("%s{\"name\":", first ? "" : ",\n");
    put_json_str(stdout, name, strlen(name));
    printf(",\"type\":\"%s\",\"type_id\":%u,\"shape\":[", inf_ggml_type_name(type), type);
    for (int d = 0; d < n_dims; d++)
        printf("%s%" PRId64, d ? "," : "", ne[d]);
    printf("],\"bytes\":%zu,\"offset\":%" PRIu64 ",\"file_offset\":%" PRIu64 ",\"file\":%d}", bytes,
           offset, file_offset, file_index);
}

static void totals(bool json, int64_t count, int64_t params, int64_t bytes) {
    if (json)
        printf("\"totals\":{\"tensors\":%" PRId64 ",\"params\":%" PRId64 ",\"bytes\":%" PRId64
               "}\n}\n",
               count, params, bytes);
    else
        printf("\ntotals: %" PRId64 " tensors, %" PRId64 " parameters (%.2f M), %" PRId64
               " bytes (%.1f MiB)\n",
               count, params, (double)params / 1e6, bytes, (double)bytes / (1 << 20));
}

/* ---- GGUF ---------------------------------------------------------------- */

static int inspect_gguf(const char *path, bool json) {
    gguf_file *g;
    inf_err err = {{0}};
    if (gguf_open(&g, path, &err)) {
        fprintf(stderr, "inferno inspect: %s\n", err.msg);
        return 1;
    }
    inf_model_file *m = NULL;
    inf_err merr = {{0}};
    inf_model_open(&m, path, &merr);

    if (json) {
        printf("{\"file\":");
        put_json_str(stdout, path, strlen(path));
        printf(",\"format\":\"gguf\",\"version\":%u,\"alignment\":%" PRIu64
               ",\"data_offset\":%" PRIu64 ",\n",
               g->version, g->alignment, g->data_offset);
        if (m)
            hparams_json(m);
        else {
            printf("\"model_error\":");
            put_json_str(stdout, merr.msg, strlen(merr.msg));
            printf(",\n");
        }
        printf("\"metadata\":[\n");
        for (int64_t i = 0; i < g->n_kv; i++) {
            const gguf_kv *kv = &g->kv[i];
            printf("%s{\"key\":", i ? ",\n" : "");
            put_json_str(stdout, kv->key, strlen(kv->key));
            printf(",\"type\":\"%s\"", gguf_type_name(kv->val.type));
            if (kv->val.type == GGUF_TYPE_ARRAY)
                printf(",\"elem_type\":\"%s\"", gguf_type_name(kv->val.arr.type));
            printf(",\"value\":");
            put_json_value(stdout, &kv->val);
            printf("}");
        }
        printf("],\n\"tensors\":[\n");
    } else {
        printf("%s: GGUF v%u, %" PRId64 " metadata keys, %" PRId64 " tensors, alignment %" PRIu64
               ", data at offset %" PRIu64 "\n",
               path, g->version, g->n_kv, g->n_tensors, g->alignment, g->data_offset);
        if (m)
            hparams_text(m);
        else
            printf("\nnot a model inferno can run: %s\n", merr.msg);
        printf("\nmetadata:\n");
        for (int64_t i = 0; i < g->n_kv; i++) {
            const gguf_kv *kv = &g->kv[i];
            printf("  %-40s %-7s ", kv->key, gguf_type_name(kv->val.type));
            put_text_value(stdout, &kv->val);
            printf("\n");
        }
        printf("\ntensors (shape fastest-first; offset in the file):\n");
        printf("  %-48s %-5s %-22s %12s %12s\n", "name", "type", "shape", "bytes", "offset");
    }
    int64_t params = 0, bytes = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor_info *t = &g->tensors[i];
        params += n_elements(t->n_dims, t->ne);
        bytes += (int64_t)t->nbytes;
        if (json)
            tensor_json(i == 0, t->name, t->type, t->n_dims, t->ne, t->nbytes, t->offset,
                        g->data_offset + t->offset, 0);
        else
            tensor_text(t->name, t->type, t->n_dims, t->ne, false, t->nbytes,
                        g->data_offset + t->offset, -1);
    }
    if (json) printf("],\n");
    totals(json, g->n_tensors, params, bytes);
    inf_model_close(m);
    gguf_close(g);
    return 0;
}

/* ---- Hugging Face folder ------------------------------------------------- */

static int inspect_hf(const char *path, bool json) {
    inf_model_file *m;
    inf_err err = {{0}};
    if (inf_model_open(&m, path, &err)) {
        fprintf(stderr, "inferno inspect: %s\n", err.msg);
        return 1;
    }
    char cfg_path[4096];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", path);
    json_t *cfg = json_load_file(cfg_path, 0, NULL);
    int n_files = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].file_index + 1 > n_files) n_files = m->tensors[i].file_index + 1;
    if (json) {
        printf("{\"file\":");
        put_json_str(stdout, path, strlen(path));
        printf(",\"format\":\"hf\",\"files\":%d,\n", n_files);
        hparams_json(m);
        char *c = cfg ? json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        printf("\"config\":%s,\n\"tensors\":[\n", c ? c : "null");
        free(c);
    } else {
        printf("%s: Hugging Face folder, %d safetensors file%s, %d tensors\n", path, n_files,
               n_files == 1 ? "" : "s", m->n_tensors);
        hparams_text(m);
        printf("\nconfig.json:\n");
        const char *key;
        json_t *val;
        json_object_foreach(cfg, key, val) {
            char *s = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
            printf("  %-40s %s\n", key, s ? s : "?");
            free(s);
        }
        printf("\ntensors (shape as the file writes it, slowest-first; offset in its file; "
               "file):\n");
        printf("  %-48s %-5s %-22s %12s %12s  %s\n", "name", "type", "shape", "bytes", "offset",
               "file");
    }
    int64_t params = 0, bytes = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const inf_tensor *t = &m->tensors[i];
        params += n_elements(t->n_dims, t->ne);
        bytes += (int64_t)t->nbytes;
        if (json)
            tensor_json(i == 0, t->name, t->type, t->n_dims, t->ne, t->nbytes, t->offset, t->offset,
                        t->file_index);
        else
            tensor_text(t->name, t->type, t->n_dims, t->ne, true, t->nbytes, t->offset,
                        t->file_index);
    }
    if (json) printf("],\n");
    totals(json, m->n_tensors, params, bytes);
    json_decref(cfg);
    inf_model_close(m);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: inferno inspect [--json] FILE.gguf|HF_FOLDER\n"
               "  shows format, hyperparameters, metadata, the tensor table and totals\n"
               "  --json   everything as JSON (arrays in full)\n");
}

int cmd_inspect(int argc, char **argv) {
    bool json = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "inferno inspect: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "inferno inspect: one model at a time\n");
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return inspect_hf(path, json);
    return inspect_gguf(path, json);
}
