/* inferno inspect FILE|DIR: what is inside a GGUF file or a Hugging Face
 * folder: format, hyperparameters, metadata (long arrays summarized), the
 * tensor table and totals. --json prints everything, arrays in full, for
 * machines (the oracle test compares it with @huggingface/gguf).
 * --tensor NAME shows one tensor: type, shape, offset, statistics and its
 * first values, dequantized by the scalar reference; --npy FILE writes all
 * of its values as a NumPy .npy file of float32 (shape slowest-first, as
 * NumPy and PyTorch write it). */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "modelfile/gguf.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "quant/dtype.h"

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
    if (h->n_ff_shexp > 0) printf("  shared expert n_ff %d\n", h->n_ff_shexp);
    int n_rec = 0;
    for (int l = 0; l < h->n_layer && l < INF_MAX_LAYERS; l++)
        n_rec += h->recurrent[l];
    if (n_rec)
        printf("  hybrid: %d Gated DeltaNet layers (conv %d, %d q/k heads and %d v heads of "
               "%d/%d), %d attention layer(s), RoPE on %d of %d dims\n",
               n_rec, h->ssm_d_conv, h->ssm_n_k_heads, h->ssm_n_v_heads, h->ssm_d_k, h->ssm_d_v,
               h->n_layer - n_rec, h->n_rot ? h->n_rot : h->head_dim, h->head_dim);
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

/* ---- one tensor's values (--tensor, --npy) -------------------------------- */

/* A tensor of either format. */
typedef struct tview {
    const char *name;
    uint32_t type;
    int n_dims;
    const int64_t *ne; /* [n_dims] fastest-first */
    const void *data;
    size_t nbytes;
    uint64_t offset; /* in its file */
} tview;

/* The .npy header (format 1.0) of a float32 array of t's shape, slowest
 * dimension first; the values follow it in row-major order. */
static int npy_header(FILE *f, const tview *t) {
    char shape[160] = "", dict[256];
    size_t k = 0;
    for (int d = t->n_dims - 1; d >= 0; d--)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%" PRId64 "%s", t->ne[d],
                              t->n_dims == 1 || d ? ", " : "");
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }",
                     shape);
    /* magic (6) + version (2) + length (2) + dict + padding + '\n': a multiple of 64 */
    int len = n + 1;
    len += (64 - (10 + len) % 64) % 64;
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(len & 0xFF),
                             (unsigned char)(len >> 8)};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)n, f) != (size_t)n) return -1;
    for (int i = n; i < len - 1; i++)
        if (fputc(' ', f) == EOF) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

/* Prints t's statistics and first rows; with npy, writes all its values there. */
static int tensor_values(const char *path, const tview *t, const char *npy) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    if (npy) {
        fprintf(stderr, "inferno inspect: --npy writes little-endian floats; this host is not\n");
        return 1;
    }
#endif
    const inf_dtype_info *ti = inf_dtype_get(t->type);
    int64_t ne0 = t->ne[0], rows = n_elements(t->n_dims, t->ne) / (ne0 ? ne0 : 1);
    size_t row_bytes = inf_dtype_row_bytes(t->type, ne0);
    if (!ti || !ti->dequant || !row_bytes || row_bytes * (size_t)rows > t->nbytes) {
        fprintf(stderr,
                "inferno inspect: %s: tensor '%s' (%s, %" PRId64 " per row) cannot be read "
                "as values\n",
                path, t->name, inf_ggml_type_name(t->type), ne0);
        return 1;
    }
    float *row = malloc((size_t)ne0 * sizeof *row);
    FILE *f = NULL;
    if (!row) {
        fprintf(stderr, "inferno inspect: out of memory (a row of %" PRId64 " values)\n", ne0);
        return 1;
    }
    if (npy && (!(f = fopen(npy, "wb")) || npy_header(f, t))) {
        fprintf(stderr, "inferno inspect: cannot write %s\n", npy);
        if (f) fclose(f);
        free(row);
        return 1;
    }
    printf("%s: %s, shape [", t->name, inf_ggml_type_name(t->type));
    for (int d = 0; d < t->n_dims; d++)
        printf("%s%" PRId64, d ? ", " : "", t->ne[d]);
    printf("] (fastest-first), %" PRId64 " values, %zu bytes at offset %" PRIu64 "\n",
           n_elements(t->n_dims, t->ne), t->nbytes, t->offset);
    enum { SHOW_ROWS = 4, SHOW_COLS = 8 };
    double sum = 0, sum2 = 0;
    float lo = 0, hi = 0;
    int64_t n_nan = 0, n_inf = 0, n_fin = 0;
    int rc = 0;
    for (int64_t r = 0; r < rows; r++) {
        ti->dequant(row, (const char *)t->data + (size_t)r * row_bytes, ne0);
        for (int64_t i = 0; i < ne0; i++) {
            float x = row[i];
            if (x != x) {
                n_nan++;
            } else if (x - x != 0) {
                n_inf++;
            } else {
                if (!n_fin++ || x < lo) lo = x;
                if (n_fin == 1 || x > hi) hi = x;
                sum += x;
                sum2 += (double)x * x;
            }
        }
        if (r < SHOW_ROWS) {
            printf("  row %" PRId64 ":", r);
            for (int64_t i = 0; i < ne0 && i < SHOW_COLS; i++)
                printf(" %.9g", (double)row[i]);
            printf("%s\n", ne0 > SHOW_COLS ? " ..." : "");
        }
        if (f && fwrite(row, sizeof *row, (size_t)ne0, f) != (size_t)ne0) rc = 1;
    }
    if (rows > SHOW_ROWS) printf("  ... (%" PRId64 " rows of %" PRId64 ")\n", rows, ne0);
    printf("  min %.9g  max %.9g  mean %.9g  rms %.9g  (%" PRId64 " NaN, %" PRId64 " inf)\n",
           (double)lo, (double)hi, n_fin ? sum / (double)n_fin : 0.0,
           n_fin ? sqrt(sum2 / (double)n_fin) : 0.0, n_nan, n_inf);
    if (f && fclose(f)) rc = 1;
    if (rc)
        fprintf(stderr, "inferno inspect: writing %s failed\n", npy);
    else if (npy)
        printf("wrote %s (float32, %" PRId64 " values)\n", npy, rows * ne0);
    free(row);
    return rc;
}

static int tensor_gguf(const char *path, const char *name, const char *npy) {
    gguf_file *g;
    inf_err err = {{0}};
    if (gguf_open(&g, path, &err)) {
        fprintf(stderr, "inferno inspect: %s\n", err.msg);
        return 1;
    }
    int rc = -1;
    for (int64_t i = 0; i < g->n_tensors && rc < 0; i++) {
        const gguf_tensor_info *t = &g->tensors[i];
        if (strcmp(t->name, name)) continue;
        tview v = {
            t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, g->data_offset + t->offset};
        rc = tensor_values(path, &v, npy);
    }
    if (rc < 0) {
        fprintf(stderr, "inferno inspect: %s has no tensor named '%s' (see inferno inspect %s)\n",
                path, name, path);
        rc = 1;
    }
    gguf_close(g);
    return rc;
}

static int tensor_hf(const char *path, const char *name, const char *npy) {
    inf_model_file *m;
    inf_err err = {{0}};
    if (inf_model_open(&m, path, &err)) {
        fprintf(stderr, "inferno inspect: %s\n", err.msg);
        return 1;
    }
    int rc = -1;
    for (int i = 0; i < m->n_tensors && rc < 0; i++) {
        const inf_tensor *t = &m->tensors[i];
        if (strcmp(t->name, name)) continue;
        tview v = {t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, t->offset};
        rc = tensor_values(path, &v, npy);
    }
    if (rc < 0) {
        fprintf(stderr, "inferno inspect: %s has no tensor named '%s' (see inferno inspect %s)\n",
                path, name, path);
        rc = 1;
    }
    inf_model_close(m);
    return rc;
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
               "       inferno inspect FILE.gguf|HF_FOLDER --tensor NAME [--npy OUT.npy]\n"
               "  shows format, hyperparameters, metadata, the tensor table and totals\n"
               "  --json           everything as JSON (arrays in full)\n"
               "  --tensor NAME    one tensor: type, shape, offset, statistics, first values\n"
               "  --npy OUT.npy    with --tensor: all its values, dequantized, as float32 .npy\n");
}

int cmd_inspect(int argc, char **argv) {
    bool json = false;
    const char *path = NULL, *tensor = NULL, *npy = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = true;
        else if (!strcmp(argv[i], "--tensor") || !strcmp(argv[i], "--npy")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "inferno inspect: %s needs a value\n", argv[i]);
                return 2;
            }
            *(!strcmp(argv[i], "--tensor") ? &tensor : &npy) = argv[i + 1];
            i++;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
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
    if (npy && !tensor) {
        fprintf(stderr, "inferno inspect: --npy needs --tensor NAME (which tensor to write)\n");
        return 2;
    }
    if (tensor && json) {
        fprintf(stderr, "inferno inspect: --tensor prints text; use --npy for the values\n");
        return 2;
    }
    struct stat st;
    bool dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (tensor) return dir ? tensor_hf(path, tensor, npy) : tensor_gguf(path, tensor, npy);
    if (dir) return inspect_hf(path, json);
    return inspect_gguf(path, json);
}
