/* inferno quantize (see quantize.h). */
#include "convert/quantize.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/gguf_writer.h"
#include "convert/qwen3_meta.h"
#include "modelfile/gguf.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "quant/quantize.h"
#include "util/mem.h"

/* One output tensor: the plan's (name, shape, runs of source rows) and the
 * chosen type. */
typedef struct out_tensor {
    const inf_gguf_tensor *g;
    inf_dtype type;
} out_tensor;

static int64_t out_rows(const inf_gguf_tensor *g) {
    return g->ne[1] * g->ne[2] * g->ne[3];
}

static inf_dtype choose_type(const inf_quantize_opts *o, const inf_model_file *mf,
                             const out_tensor *t) {
    const int n_dims = t->g->n_dims;
    if (n_dims == 1) return INF_F32; /* norms: F32, as llama.cpp's converter writes them */
    const bool output = !strcmp(t->g->name, "output.weight");
    const bool embd = !strcmp(t->g->name, "token_embd.weight");
    if (output && o->output_type >= 0) return (inf_dtype)o->output_type;
    if (embd && o->token_embd_type >= 0) return (inf_dtype)o->token_embd_type;
    const inf_mix_tensor mt = {.name = t->g->name,
                               .n_dims = n_dims,
                               .ne0 = t->g->ne[0],
                               .layer = t->g->layer,
                               .n_layer = mf->hp.n_layer,
                               .n_gqa = mf->hp.n_head / (mf->hp.n_head_kv ? mf->hp.n_head_kv : 1),
                               .n_expert = mf->hp.n_expert,
                               .tied = mf->hp.tied_output,
                               .keep = INF_F32};
    if (o->pure) { /* the base type, with only the fallback for rows it does not fit */
        const inf_mix pure_mix = {
            .name = o->mix->name, .ftype = o->mix->ftype, .base = o->mix->base};
        inf_mix_tensor p = mt;
        p.name = "pure.weight"; /* no category: no per-tensor rule applies */
        return inf_mix_tensor_type(&pure_mix, &p);
    }
    return inf_mix_tensor_type(o->mix, &mt);
}

/* ---- copying a GGUF file's metadata ---- */

static char *strndup_z(const char *p, uint64_t n) {
    char *s = malloc((size_t)n + 1);
    if (s) {
        memcpy(s, p, (size_t)n);
        s[n] = 0;
    }
    return s;
}

static int copy_kv(gguf_writer *w, const gguf_kv *kv, inf_err *err) {
    const gguf_value *v = &kv->val;
    switch (v->type) {
    case GGUF_TYPE_UINT8:
        gguf_writer_add_u8(w, kv->key, (uint8_t)v->u);
        break;
    case GGUF_TYPE_INT8:
        gguf_writer_add_i8(w, kv->key, (int8_t)v->i);
        break;
    case GGUF_TYPE_UINT16:
        gguf_writer_add_u16(w, kv->key, (uint16_t)v->u);
        break;
    case GGUF_TYPE_INT16:
        gguf_writer_add_i16(w, kv->key, (int16_t)v->i);
        break;
    case GGUF_TYPE_UINT32:
        gguf_writer_add_u32(w, kv->key, (uint32_t)v->u);
        break;
    case GGUF_TYPE_INT32:
        gguf_writer_add_i32(w, kv->key, (int32_t)v->i);
        break;
    case GGUF_TYPE_UINT64:
        gguf_writer_add_u64(w, kv->key, v->u);
        break;
    case GGUF_TYPE_INT64:
        gguf_writer_add_i64(w, kv->key, v->i);
        break;
    case GGUF_TYPE_FLOAT32:
        gguf_writer_add_f32(w, kv->key, (float)v->f);
        break;
    case GGUF_TYPE_FLOAT64:
        gguf_writer_add_f64(w, kv->key, v->f);
        break;
    case GGUF_TYPE_BOOL:
        gguf_writer_add_bool(w, kv->key, v->b);
        break;
    case GGUF_TYPE_STRING: {
        char *s = strndup_z(v->str.ptr, v->str.len);
        if (!s) return inf_fail(err, "out of memory copying %s", kv->key);
        gguf_writer_add_str(w, kv->key, s);
        free(s);
        break;
    }
    case GGUF_TYPE_ARRAY:
        if (v->arr.type == GGUF_TYPE_STRING) {
            char **items = calloc(v->arr.n ? (size_t)v->arr.n : 1, sizeof *items);
            int rc = items ? 0 : -1;
            for (uint64_t i = 0; !rc && i < v->arr.n; i++)
                if (!(items[i] = strndup_z(v->arr.items[i].str.ptr, v->arr.items[i].str.len)))
                    rc = -1;
            if (!rc) gguf_writer_add_arr_str(w, kv->key, (const char *const *)items, v->arr.n);
            for (uint64_t i = 0; items && i < v->arr.n; i++)
                free(items[i]);
            free(items);
            if (rc) return inf_fail(err, "out of memory copying %s", kv->key);
        } else if (v->arr.type != GGUF_TYPE_ARRAY) {
            gguf_writer_add_arr(w, kv->key, (enum gguf_type)v->arr.type, v->arr.raw, v->arr.n);
        } else {
            return inf_fail(err, "metadata %s: arrays of arrays are not copied by inferno",
                            kv->key);
        }
        break;
    default:
        return inf_fail(err, "metadata %s: unknown value type %u", kv->key, v->type);
    }
    return 0;
}

/* ---- quantizing one tensor on n threads ---- */

typedef struct job {
    const inf_gguf_tensor *g;
    inf_dtype to;
    int64_t rows, n;
    size_t rb_out;
    uint8_t *dst; /* [rows][rb_out] */
    int ith, nth;
    int failed;
} job;

/* The source of output row r: a row of one of the plan's runs. */
static const uint8_t *source_row(const inf_gguf_tensor *g, int64_t r, inf_dtype *type) {
    for (int k = 0; k < g->n_runs; k++) {
        const inf_rows *run = &g->runs[k];
        if (r < run->n_rows) {
            *type = run->src->type;
            const size_t rb = inf_dtype_row_bytes(run->src->type, run->src->ne[0]);
            return (const uint8_t *)run->src->data + (size_t)(run->row0 + r) * rb;
        }
        r -= run->n_rows;
    }
    return NULL; /* the plan's runs cover every row (check_runs) */
}

static void *work(void *arg) {
    job *j = arg;
    float *row = malloc(sizeof(float) * (size_t)j->n);
    if (!row) {
        j->failed = 1;
        return NULL;
    }
    const int64_t r0 = j->rows * j->ith / j->nth, r1 = j->rows * (j->ith + 1) / j->nth;
    float *src = j->g->perm ? malloc(sizeof(float) * (size_t)j->n) : NULL;
    if (j->g->perm && !src) {
        free(row);
        j->failed = 1;
        return NULL;
    }
    for (int64_t r = r0; r < r1; r++) {
        inf_dtype type = INF_F32;
        const uint8_t *in = source_row(j->g, r, &type);
        inf_dequantize_row(type, src ? src : row, in, j->n);
        for (int64_t i = 0; src && i < j->n; i++)
            row[i] = src[j->g->perm[i]];
        if (j->g->map == INF_ROW_ONE_PLUS)
            for (int64_t i = 0; i < j->n; i++)
                row[i] = 1.0f + row[i];
        else if (j->g->map == INF_ROW_NEG_EXP)
            for (int64_t i = 0; i < j->n; i++)
                row[i] = -expf(row[i]);
        if (inf_quantize_row(j->to, j->dst + (size_t)r * j->rb_out, row, j->n)) j->failed = 1;
    }
    free(src);
    free(row);
    return NULL;
}

static int quantize_tensor(const out_tensor *t, int n_threads, uint8_t *dst, inf_err *err) {
    enum { MAX_THREADS = 64 };
    const int64_t n = t->g->ne[0], rows = out_rows(t->g);
    int nth = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
    if (rows < nth) nth = rows > 0 ? (int)rows : 1;
    job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int i = 0; i < nth; i++) {
        jobs[i] = (job){.g = t->g,
                        .to = t->type,
                        .rows = rows,
                        .n = n,
                        .rb_out = inf_dtype_row_bytes(t->type, n),
                        .dst = dst,
                        .ith = i,
                        .nth = nth};
        if (i > 0) started[i] = pthread_create(&th[i], NULL, work, &jobs[i]) == 0;
    }
    /* the calling thread takes slice 0 and any slice whose thread did not start */
    for (int i = 0; i < nth; i++)
        if (!started[i]) work(&jobs[i]);
    int failed = 0;
    for (int i = 0; i < nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        failed |= jobs[i].failed;
    }
    if (failed)
        return inf_fail(err, "tensor %s: cannot quantize to %s (out of memory)", t->g->name,
                        inf_dtype_get(t->type)->name);
    return 0;
}

/* A plan tensor's runs: rows of ne[0] elements inside their sources, summing
 * to its rows; a quantized source only with --allow-requantize. */
static int check_runs(const inf_gguf_tensor *g, bool allow_requantize, const char *in,
                      inf_err *err) {
    int64_t rows = 0;
    for (int k = 0; k < g->n_runs; k++) {
        const inf_rows *run = &g->runs[k];
        const inf_tensor *src = run->src;
        int64_t src_rows = 1;
        for (int d = 1; d < src->n_dims; d++)
            src_rows *= src->ne[d];
        if (src->ne[0] != g->ne[0] || run->row0 < 0 || run->n_rows < 0 ||
            run->row0 + run->n_rows > src_rows)
            return inf_fail(err, "tensor %s: its rows from %s do not fit (internal)", g->name,
                            src->name);
        const inf_dtype_info *ti = inf_dtype_get(src->type);
        if (ti->block > 1 && !allow_requantize)
            return inf_fail(err,
                            "%s: tensor %s is already quantized (%s); quantize from an F32, F16 or "
                            "BF16 file, or pass --allow-requantize",
                            in, src->name, ti->name);
        rows += run->n_rows;
    }
    if (rows != out_rows(g))
        return inf_fail(err, "tensor %s: %lld rows from its sources, %lld expected (internal)",
                        g->name, (long long)rows, (long long)out_rows(g));
    return 0;
}

int inf_quantize_model(const char *in, const char *out, const inf_quantize_opts *o, inf_err *err) {
    inf_model_file *mf = NULL;
    gguf_file *g = NULL;
    gguf_writer *w = NULL;
    inf_gguf_plan plan = {0};
    out_tensor *ts = NULL;
    uint8_t *buf = NULL;
    bool opened = false;
    int rc = -1;
    if (inf_model_open(&mf, in, err)) return -1;
    if (inf_model_gguf_plan(mf, &plan, err)) goto done;
    const int n = plan.n;
    if (!(ts = calloc((size_t)(n ? n : 1), sizeof *ts))) {
        inf_fail(err, "out of memory");
        goto done;
    }
    size_t most = 0;
    for (int i = 0; i < n; i++) {
        ts[i].g = &plan.t[i];
        if (check_runs(ts[i].g, o->allow_requantize, in, err)) goto done;
        ts[i].type = choose_type(o, mf, &ts[i]);
        if (!inf_dtype_get(ts[i].type)->quant) {
            inf_fail(err,
                     "tensor %s: inferno cannot write %s (it reads the grid types but has no "
                     "quantizer for them)",
                     ts[i].g->name, inf_dtype_get(ts[i].type)->name);
            goto done;
        }
        if (!inf_dtype_row_bytes(ts[i].type, ts[i].g->ne[0])) {
            inf_fail(err, "tensor %s: rows of %lld do not split into %s blocks of %d",
                     ts[i].g->name, (long long)ts[i].g->ne[0], inf_dtype_get(ts[i].type)->name,
                     inf_dtype_get(ts[i].type)->block);
            goto done;
        }
        const size_t bytes =
            inf_dtype_row_bytes(ts[i].type, ts[i].g->ne[0]) * (size_t)out_rows(ts[i].g);
        most = bytes > most ? bytes : most;
    }
    if (!(w = gguf_writer_create())) {
        inf_fail(err, "out of memory");
        goto done;
    }
    if (mf->format == INF_FORMAT_GGUF) {
        if (gguf_open(&g, in, err)) goto done;
        /* every key in its place; the file type and quantization version rewritten */
        bool have_ft = false, have_qv = false;
        for (int64_t i = 0; i < g->n_kv; i++) {
            const char *k = g->kv[i].key;
            if (!strcmp(k, "general.file_type")) {
                gguf_writer_add_u32(w, k, o->mix->ftype);
                have_ft = true;
            } else if (!strcmp(k, "general.quantization_version")) {
                gguf_writer_add_u32(w, k, 2);
                have_qv = true;
            } else if (copy_kv(w, &g->kv[i], err)) {
                goto done;
            }
        }
        if (!have_qv) gguf_writer_add_u32(w, "general.quantization_version", 2);
        if (!have_ft) gguf_writer_add_u32(w, "general.file_type", o->mix->ftype);
    } else {
        inf_convert_qwen3_meta(w, inf_model_arch_name(mf), mf->name ? mf->name : "model", &mf->hp,
                               o->mix->ftype);
        /* A special token the tokenizer files leave unnamed comes from config.json's
         * <typ>_token_id, as the converter's SpecialVocab takes it (Qwen3: bos_token_id). */
        inf_vocab_desc v = mf->vocab;
        int64_t id;
        int got = 0;
        if (v.bos_id < 0 && (got = inf_model_meta_int(mf, "bos_token_id", &id, err)) < 0) goto done;
        if (got && id >= 0 && id < mf->hp.n_vocab) v.bos_id = (int32_t)id;
        if (inf_convert_tokenizer_meta(w, &v, mf->hp.n_vocab, err)) goto done;
    }
    for (int i = 0; i < n; i++)
        gguf_writer_add_tensor(w, ts[i].g->name, ts[i].type, ts[i].g->n_dims, ts[i].g->ne);
    if (gguf_writer_open(w, out, err)) goto done;
    opened = true; /* from here a failure removes the incomplete file */
    if (!(buf = malloc(most ? most : 1))) {
        inf_fail(err, "out of memory: %zu bytes for one tensor", most);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const inf_gguf_tensor *gt = ts[i].g;
        const size_t bytes = inf_dtype_row_bytes(ts[i].type, gt->ne[0]) * (size_t)out_rows(gt);
        if (quantize_tensor(&ts[i], o->n_threads, buf, err) ||
            gguf_writer_write(w, buf, bytes, err))
            goto done;
        if (o->progress) {
            uint64_t bytes_in = 0;
            for (int k = 0; k < gt->n_runs; k++)
                bytes_in += inf_dtype_row_bytes(gt->runs[k].src->type, gt->ne[0]) *
                            (uint64_t)gt->runs[k].n_rows;
            const inf_quantize_tensor_info info = {.index = i,
                                                   .count = n,
                                                   .name = gt->name,
                                                   .n_dims = gt->n_dims,
                                                   .ne = gt->ne,
                                                   .from = gt->runs[0].src->type,
                                                   .to = ts[i].type,
                                                   .bytes_in = bytes_in,
                                                   .bytes_out = bytes};
            o->progress(o->ud, &info);
        }
    }
    if (gguf_writer_close(w, err)) goto done;
    rc = 0;
done:
    gguf_writer_free(w);
    if (rc && opened) remove(out);
    free(buf);
    free(ts);
    inf_gguf_plan_free(&plan);
    gguf_close(g);
    inf_model_close(mf);
    return rc;
}
