#include "convert/gguf_writer.h"

#include "modelfile/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable byte buffer; `failed` is sticky. */
typedef struct {
    unsigned char *data;
    size_t len, cap;
    bool failed;
} bytes;

static void bytes_put(bytes *b, const void *p, size_t n) {
    if (b->failed || n == 0) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* GGUF is little-endian; so is every machine inferno builds for. */
static void put_u32(bytes *b, uint32_t v) {
    bytes_put(b, &v, 4);
}
static void put_u64(bytes *b, uint64_t v) {
    bytes_put(b, &v, 8);
}
static void put_str(bytes *b, const char *s) {
    put_u64(b, strlen(s));
    bytes_put(b, s, strlen(s));
}

typedef struct {
    char *name;
    inf_dtype type;
    int n_dims;
    int64_t ne[INF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset; /* within the data section */
} tensor_info;

struct gguf_writer {
    bytes kv; /* serialized metadata pairs */
    uint64_t n_kv;
    tensor_info *tensors; /* [n_tensors] */
    int n_tensors, cap_tensors;
    uint32_t alignment;
    char first_error[512]; /* the first bad argument, reported by open */
    bool oom;

    FILE *f;
    char *path;
    int cur;           /* tensor being filled */
    uint64_t cur_done; /* bytes of it written */
};

static void fail_arg(gguf_writer *w, const char *fmt, const char *what) {
    if (!w->first_error[0]) snprintf(w->first_error, sizeof w->first_error, fmt, what);
}

gguf_writer *gguf_writer_create(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    free(w->kv.data);
    for (int i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->tensors);
    free(w->path);
    free(w);
}

static void put_key(gguf_writer *w, const char *key, enum gguf_type t) {
    put_str(&w->kv, key);
    put_u32(&w->kv, t);
    w->n_kv++;
}

#define SCALAR_ADDER(fn, ctype, gtype)                                                             \
    void fn(gguf_writer *w, const char *key, ctype v) {                                            \
        put_key(w, key, gtype);                                                                    \
        bytes_put(&w->kv, &v, sizeof v);                                                           \
    }
SCALAR_ADDER(gguf_writer_add_u8, uint8_t, GGUF_TYPE_UINT8)
SCALAR_ADDER(gguf_writer_add_i8, int8_t, GGUF_TYPE_INT8)
SCALAR_ADDER(gguf_writer_add_u16, uint16_t, GGUF_TYPE_UINT16)
SCALAR_ADDER(gguf_writer_add_i16, int16_t, GGUF_TYPE_INT16)
SCALAR_ADDER(gguf_writer_add_i32, int32_t, GGUF_TYPE_INT32)
SCALAR_ADDER(gguf_writer_add_u64, uint64_t, GGUF_TYPE_UINT64)
SCALAR_ADDER(gguf_writer_add_i64, int64_t, GGUF_TYPE_INT64)
SCALAR_ADDER(gguf_writer_add_f32, float, GGUF_TYPE_FLOAT32)
SCALAR_ADDER(gguf_writer_add_f64, double, GGUF_TYPE_FLOAT64)

void gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v) {
    if (!strcmp(key, "general.alignment")) {
        if (v == 0 || (v & (v - 1)))
            fail_arg(w, "general.alignment %s: must be a power of 2", "");
        else
            w->alignment = v;
    }
    put_key(w, key, GGUF_TYPE_UINT32);
    bytes_put(&w->kv, &v, 4);
}

void gguf_writer_add_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    put_key(w, key, GGUF_TYPE_BOOL);
    bytes_put(&w->kv, &b, 1);
}

void gguf_writer_add_str(gguf_writer *w, const char *key, const char *v) {
    put_key(w, key, GGUF_TYPE_STRING);
    put_str(&w->kv, v);
}

static size_t scalar_size(enum gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL:
        return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16:
        return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32:
        return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

void gguf_writer_add_arr(gguf_writer *w, const char *key, enum gguf_type t, const void *values,
                         uint64_t n) {
    size_t sz = scalar_size(t);
    if (!sz) {
        fail_arg(w, "metadata %s: array element type must be a scalar", key);
        return;
    }
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_u32(&w->kv, t);
    put_u64(&w->kv, n);
    bytes_put(&w->kv, values, (size_t)n * sz);
}

void gguf_writer_add_arr_str(gguf_writer *w, const char *key, const char *const *values,
                             uint64_t n) {
    put_key(w, key, GGUF_TYPE_ARRAY);
    put_u32(&w->kv, GGUF_TYPE_STRING);
    put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++)
        put_str(&w->kv, values[i]);
}

void gguf_writer_add_tensor(gguf_writer *w, const char *name, inf_dtype type, int n_dims,
                            const int64_t *ne) {
    if (n_dims < 1 || n_dims > INF_MAX_DIMS) {
        fail_arg(w, "tensor %s: n_dims must be 1..4", name);
        return;
    }
    uint64_t nbytes = inf_dtype_row_bytes(type, ne[0]);
    if (!nbytes) {
        fail_arg(w, "tensor %s: row length is not a multiple of the type's block size", name);
        return;
    }
    for (int d = 1; d < n_dims; d++) {
        if (ne[d] <= 0) {
            fail_arg(w, "tensor %s: dimensions must be positive", name);
            return;
        }
        nbytes *= (uint64_t)ne[d];
    }
    if (w->n_tensors == w->cap_tensors) {
        int cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        tensor_info *t = realloc(w->tensors, (size_t)cap * sizeof *t);
        if (!t) {
            w->oom = true;
            return;
        }
        w->tensors = t;
        w->cap_tensors = cap;
    }
    tensor_info *t = &w->tensors[w->n_tensors];
    *t = (tensor_info){.name = strdup(name), .type = type, .n_dims = n_dims, .nbytes = nbytes};
    if (!t->name) {
        w->oom = true;
        return;
    }
    for (int d = 0; d < INF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    w->n_tensors++;
}

static uint64_t align_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

static int write_all(gguf_writer *w, const void *p, size_t n, inf_err *err) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return inf_fail(err, "%s: write failed: %s", w->path, strerror(errno));
    return 0;
}

static int write_zeros(gguf_writer *w, size_t n, inf_err *err) {
    static const unsigned char zeros[256];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        if (write_all(w, zeros, k, err)) return -1;
        n -= k;
    }
    return 0;
}

int gguf_writer_open(gguf_writer *w, const char *path, inf_err *err) {
    if (w->first_error[0]) return inf_fail(err, "%s: %s", path, w->first_error);
    if (w->oom || w->kv.failed) return inf_fail(err, "%s: out of memory building the header", path);
    if (w->f) return inf_fail(err, "%s: writer is already open", path);

    bytes head = {0};
    bytes_put(&head, "GGUF", 4);
    put_u32(&head, 3);
    put_u64(&head, (uint64_t)w->n_tensors);
    put_u64(&head, w->n_kv);
    bytes_put(&head, w->kv.data, w->kv.len);
    uint64_t offset = 0;
    for (int i = 0; i < w->n_tensors; i++) {
        tensor_info *t = &w->tensors[i];
        t->offset = offset;
        offset = align_up(offset + t->nbytes, w->alignment);
        put_str(&head, t->name);
        put_u32(&head, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            put_u64(&head, (uint64_t)t->ne[d]);
        put_u32(&head, (uint32_t)t->type);
        put_u64(&head, t->offset);
    }
    if (head.failed) {
        free(head.data);
        return inf_fail(err, "%s: out of memory building the header", path);
    }
    free(w->path);
    w->path = strdup(path);
    w->f = fopen(path, "wb");
    if (!w->f || !w->path) {
        free(head.data);
        return inf_fail(err, "%s: cannot create: %s", path, strerror(errno));
    }
    int rc = write_all(w, head.data, head.len, err);
    if (!rc) rc = write_zeros(w, align_up(head.len, w->alignment) - head.len, err);
    free(head.data);
    w->cur = 0;
    w->cur_done = 0;
    return rc;
}

int gguf_writer_write(gguf_writer *w, const void *data, size_t n, inf_err *err) {
    if (!w->f) return inf_fail(err, "gguf writer: write before open");
    if (w->cur >= w->n_tensors)
        return inf_fail(err, "%s: more data than the declared tensors hold", w->path);
    tensor_info *t = &w->tensors[w->cur];
    if (n > t->nbytes - w->cur_done)
        return inf_fail(err, "%s: tensor %s: %zu bytes would overrun its %llu bytes", w->path,
                        t->name, n, (unsigned long long)t->nbytes);
    if (write_all(w, data, n, err)) return -1;
    w->cur_done += n;
    if (w->cur_done == t->nbytes) {
        /* pad so the next tensor starts aligned (the last one too: harmless, as llama.cpp does) */
        if (write_zeros(w, align_up(t->nbytes, w->alignment) - t->nbytes, err)) return -1;
        w->cur++;
        w->cur_done = 0;
    }
    return 0;
}

int gguf_writer_close(gguf_writer *w, inf_err *err) {
    if (!w->f) return inf_fail(err, "gguf writer: close before open");
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
