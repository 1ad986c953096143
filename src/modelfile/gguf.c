/* GGUF parsing and the generic metadata API. See gguf.h. */
#include "modelfile/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/dtype.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

/* Arrays may nest; real files use one level. Bounded so a hostile file
 * cannot recurse deep. */
#define GGUF_MAX_DEPTH 8

/* A bounds-checked cursor over the file. `what` names the field being read
 * so a truncation message says where it happened. */
typedef struct gguf_cursor {
    const unsigned char *data;
    size_t size, pos;
    const char *file;
    inf_err *err;
} gguf_cursor;

static int cur_need(gguf_cursor *c, size_t n, const char *what) {
    if (n > c->size - c->pos)
        return inf_fail(c->err, "%s: file is truncated: %s needs %zu bytes at offset %zu, %zu left",
                        c->file, what, n, c->pos, c->size - c->pos);
    return 0;
}

static int cur_bytes(gguf_cursor *c, void *out, size_t n, const char *what) {
    if (cur_need(c, n, what)) return -1;
    memcpy(out, c->data + c->pos, n);
    c->pos += n;
    return 0;
}

static int cur_u32(gguf_cursor *c, uint32_t *v, const char *what) {
    return cur_bytes(c, v, 4, what);
}
static int cur_u64(gguf_cursor *c, uint64_t *v, const char *what) {
    return cur_bytes(c, v, 8, what);
}

/* A length-prefixed string; the pointer stays in the file. */
static int cur_str(gguf_cursor *c, const char **ptr, uint64_t *len, const char *what) {
    uint64_t n;
    if (cur_u64(c, &n, what)) return -1;
    if (n > c->size - c->pos)
        return inf_fail(c->err, "%s: %s has length %llu at offset %zu, but only %zu bytes are left",
                        c->file, what, (unsigned long long)n, c->pos - 8, c->size - c->pos);
    *ptr = (const char *)c->data + c->pos;
    *len = n;
    c->pos += (size_t)n;
    return 0;
}

/* A NUL-terminated copy of a file string; refuses embedded NULs, which would
 * silently truncate the name. */
static char *dup_name(const char *p, uint64_t n, gguf_cursor *c, const char *what) {
    if (memchr(p, 0, (size_t)n)) {
        inf_fail(c->err, "%s: %s contains a NUL byte", c->file, what);
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        inf_fail(c->err, "%s: out of memory copying %s", c->file, what);
        return NULL;
    }
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    return s;
}

const char *gguf_type_name(uint32_t type) {
    static const char *names[GGUF_TYPE_COUNT] = {
        "UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",   "FLOAT32",
        "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64",
    };
    return type < GGUF_TYPE_COUNT ? names[type] : "unknown";
}

/* Bytes of one scalar of `type`; 0 for STRING/ARRAY/unknown. */
static size_t scalar_size(uint32_t type) {
    switch (type) {
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

/* Decodes one scalar at p (size checked by the caller). */
static gguf_value decode_scalar(uint32_t type, const unsigned char *p) {
    gguf_value v = {.type = type};
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    float f32;
    double f64;
    switch (type) {
    case GGUF_TYPE_UINT8:
        memcpy(&u8, p, 1);
        v.u = u8;
        break;
    case GGUF_TYPE_INT8:
        memcpy(&i8, p, 1);
        v.i = i8;
        break;
    case GGUF_TYPE_UINT16:
        memcpy(&u16, p, 2);
        v.u = u16;
        break;
    case GGUF_TYPE_INT16:
        memcpy(&i16, p, 2);
        v.i = i16;
        break;
    case GGUF_TYPE_UINT32:
        memcpy(&u32, p, 4);
        v.u = u32;
        break;
    case GGUF_TYPE_INT32:
        memcpy(&i32, p, 4);
        v.i = i32;
        break;
    case GGUF_TYPE_FLOAT32:
        memcpy(&f32, p, 4);
        v.f = f32;
        break;
    case GGUF_TYPE_BOOL:
        v.b = p[0] != 0;
        break;
    case GGUF_TYPE_UINT64:
        memcpy(&u64, p, 8);
        v.u = u64;
        break;
    case GGUF_TYPE_INT64:
        memcpy(&i64, p, 8);
        v.i = i64;
        break;
    case GGUF_TYPE_FLOAT64:
        memcpy(&f64, p, 8);
        v.f = f64;
        break;
    default:
        INF_ASSERT(0);
    }
    return v;
}

static void value_free(gguf_value *v) {
    if (v->type != GGUF_TYPE_ARRAY || !v->arr.items) return;
    for (uint64_t i = 0; i < v->arr.n; i++)
        value_free(&v->arr.items[i]);
    free(v->arr.items);
    v->arr.items = NULL;
}

static int read_value(gguf_cursor *c, gguf_value *v, uint32_t type, int depth, const char *key);

/* An array value: element type, count, then the elements. Counts are checked
 * against the bytes left before anything is allocated. */
static int read_array(gguf_cursor *c, gguf_value *v, int depth, const char *key) {
    uint32_t et;
    uint64_t n;
    if (cur_u32(c, &et, "array element type") || cur_u64(c, &n, "array length"))
        return inf_fail_ctx(c->err, "metadata %s", key);
    if (et >= GGUF_TYPE_COUNT)
        return inf_fail(c->err, "%s: metadata %s: array element type %u is not a GGUF type",
                        c->file, key, et);
    if (depth + 1 >= GGUF_MAX_DEPTH)
        return inf_fail(c->err, "%s: metadata %s: arrays nested deeper than %d", c->file, key,
                        GGUF_MAX_DEPTH);
    size_t es = scalar_size(et);
    size_t min_elem = es ? es : et == GGUF_TYPE_STRING ? 8 : 12;
    size_t left = c->size - c->pos;
    if (n > left / min_elem)
        return inf_fail(c->err,
                        "%s: metadata %s: array of %llu %s elements needs at least %llu bytes, "
                        "only %zu are left",
                        c->file, key, (unsigned long long)n, gguf_type_name(et),
                        (unsigned long long)n * min_elem, left);
    v->arr.type = et;
    v->arr.n = n;
    if (es) {
        v->arr.raw = c->data + c->pos;
        c->pos += (size_t)n * es;
        return 0;
    }
    v->arr.items = calloc(n ? (size_t)n : 1, sizeof *v->arr.items);
    if (!v->arr.items)
        return inf_fail(c->err, "%s: metadata %s: out of memory for %llu elements", c->file, key,
                        (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        /* mark filled elements so value_free on failure frees only those */
        if (read_value(c, &v->arr.items[i], et, depth + 1, key)) {
            v->arr.n = i + 1;
            return -1;
        }
    }
    return 0;
}

static int read_value(gguf_cursor *c, gguf_value *v, uint32_t type, int depth, const char *key) {
    v->type = type;
    if (type == GGUF_TYPE_STRING) {
        if (cur_str(c, &v->str.ptr, &v->str.len, "string value"))
            return inf_fail_ctx(c->err, "metadata %s", key);
        return 0;
    }
    if (type == GGUF_TYPE_ARRAY) return read_array(c, v, depth, key);
    size_t es = scalar_size(type);
    if (!es)
        return inf_fail(c->err, "%s: metadata %s: value type %u is not a GGUF type", c->file, key,
                        type);
    if (cur_need(c, es, gguf_type_name(type))) return inf_fail_ctx(c->err, "metadata %s", key);
    *v = decode_scalar(type, c->data + c->pos);
    c->pos += es;
    return 0;
}

gguf_value gguf_arr_at(const gguf_value *arr, uint64_t i) {
    INF_ASSERT(arr->type == GGUF_TYPE_ARRAY && i < arr->arr.n);
    if (arr->arr.items) return arr->arr.items[i];
    size_t es = scalar_size(arr->arr.type);
    return decode_scalar(arr->arr.type, arr->arr.raw + i * es);
}

void gguf_close(gguf_file *g) {
    if (!g) return;
    for (int64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        value_free(&g->kv[i].val);
    }
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++)
        free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->name);
    inf_mmap_close(&g->map);
    free(g);
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Finds a duplicate among n names in O(n log n); returns it or NULL. */
static const char *find_duplicate(char **names, int64_t n) {
    if (n < 2) return NULL;
    char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) return NULL;
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
    const char *dup = NULL;
    for (int64_t i = 1; i < n && !dup; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) dup = sorted[i];
    free(sorted);
    return dup;
}

static int parse_kvs(gguf_file *g, gguf_cursor *c) {
    for (int64_t i = 0; i < g->n_kv; i++) {
        char what[64];
        snprintf(what, sizeof what, "metadata key %lld", (long long)i);
        const char *kp;
        uint64_t kn;
        if (cur_str(c, &kp, &kn, what)) return -1;
        if (kn == 0) return inf_fail(c->err, "%s: %s is empty", g->name, what);
        if (!(g->kv[i].key = dup_name(kp, kn, c, what))) return -1;
        uint32_t type;
        if (cur_u32(c, &type, "value type"))
            return inf_fail_ctx(c->err, "metadata %s", g->kv[i].key);
        if (type >= GGUF_TYPE_COUNT)
            return inf_fail(c->err, "%s: metadata %s: value type %u is not a GGUF type", g->name,
                            g->kv[i].key, type);
        if (read_value(c, &g->kv[i].val, type, 0, g->kv[i].key)) return -1;
    }
    char **keys = malloc((g->n_kv ? (size_t)g->n_kv : 1) * sizeof *keys);
    if (!keys) return inf_fail(c->err, "%s: out of memory", g->name);
    for (int64_t i = 0; i < g->n_kv; i++)
        keys[i] = g->kv[i].key;
    const char *dup = find_duplicate(keys, g->n_kv);
    int rc = dup ? inf_fail(c->err, "%s: metadata key %s appears more than once", g->name, dup) : 0;
    free(keys);
    return rc;
}

static int parse_tensor_info(gguf_file *g, gguf_cursor *c, int64_t i) {
    gguf_tensor_info *t = &g->tensors[i];
    char what[64];
    snprintf(what, sizeof what, "tensor info %lld name", (long long)i);
    const char *np;
    uint64_t nn;
    if (cur_str(c, &np, &nn, what)) return -1;
    if (nn == 0) return inf_fail(c->err, "%s: %s is empty", g->name, what);
    if (!(t->name = dup_name(np, nn, c, what))) return -1;
    uint32_t n_dims;
    if (cur_u32(c, &n_dims, "n_dims")) return inf_fail_ctx(c->err, "tensor %s", t->name);
    if (n_dims < 1 || n_dims > INF_MAX_DIMS)
        return inf_fail(c->err, "%s: tensor %s has %u dimensions, expected 1..%d", g->name, t->name,
                        n_dims, INF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t count = 1;
    for (int d = 0; d < INF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (int d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (cur_u64(c, &ne, "dimension")) return inf_fail_ctx(c->err, "tensor %s", t->name);
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return inf_fail(c->err, "%s: tensor %s: dimension %d is %llu, expected 1..2^63-1",
                            g->name, t->name, d, (unsigned long long)ne);
        if (count > (uint64_t)INT64_MAX / ne)
            return inf_fail(c->err, "%s: tensor %s: element count overflows 64 bits", g->name,
                            t->name);
        count *= ne;
        t->ne[d] = (int64_t)ne;
    }
    if (cur_u32(c, &t->type, "type") || cur_u64(c, &t->offset, "offset"))
        return inf_fail_ctx(c->err, "tensor %s", t->name);
    const inf_dtype_info *ti = inf_dtype_get(t->type);
    if (!ti)
        return inf_fail(c->err, "%s: tensor %s has type %s, which inferno does not support yet",
                        g->name, t->name, inf_ggml_type_name(t->type));
    if (t->ne[0] % ti->block)
        return inf_fail(c->err,
                        "%s: tensor %s: row length %lld is not a multiple of the %s block size %d",
                        g->name, t->name, (long long)t->ne[0], ti->name, ti->block);
    uint64_t blocks = count / (uint64_t)ti->block;
    if (blocks > SIZE_MAX / ti->block_bytes)
        return inf_fail(c->err, "%s: tensor %s: byte size overflows", g->name, t->name);
    t->nbytes = (size_t)blocks * ti->block_bytes;
    return 0;
}

typedef struct span {
    uint64_t begin, end;
    int64_t index;
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Places every tensor's data: aligned, inside the file, not overlapping. */
static int place_tensors(gguf_file *g, gguf_cursor *c) {
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_offset = c->pos + pad;
    if (g->n_tensors == 0) return 0;
    if (g->data_offset > g->size)
        return inf_fail(c->err,
                        "%s: file is truncated: tensor data section starts at %llu, "
                        "past the end (%zu bytes)",
                        g->name, (unsigned long long)g->data_offset, g->size);
    uint64_t avail = g->size - g->data_offset;
    span *spans = malloc((size_t)g->n_tensors * sizeof *spans);
    if (!spans) return inf_fail(c->err, "%s: out of memory", g->name);
    int rc = 0;
    for (int64_t i = 0; i < g->n_tensors && !rc; i++) {
        gguf_tensor_info *t = &g->tensors[i];
        if (t->offset % g->alignment)
            rc = inf_fail(c->err,
                          "%s: tensor %s: offset %llu is not a multiple of the "
                          "alignment %llu",
                          g->name, t->name, (unsigned long long)t->offset,
                          (unsigned long long)g->alignment);
        else if (t->offset > avail || t->nbytes > avail - t->offset)
            rc = inf_fail(c->err,
                          "%s: tensor %s: data [%llu, +%zu) runs past the end of the "
                          "file (data section is %llu bytes)",
                          g->name, t->name, (unsigned long long)t->offset, t->nbytes,
                          (unsigned long long)avail);
        else {
            t->data = g->data + g->data_offset + t->offset;
            spans[i] = (span){t->offset, t->offset + t->nbytes, i};
        }
    }
    if (!rc) {
        qsort(spans, (size_t)g->n_tensors, sizeof *spans, cmp_span);
        for (int64_t i = 1; i < g->n_tensors && !rc; i++)
            if (spans[i].begin < spans[i - 1].end)
                rc = inf_fail(c->err, "%s: tensor %s overlaps the data of tensor %s", g->name,
                              g->tensors[spans[i].index].name, g->tensors[spans[i - 1].index].name);
    }
    free(spans);
    return rc;
}

int gguf_parse(gguf_file **out, const void *data, size_t size, const char *name, inf_err *err) {
    *out = NULL;
    gguf_file *g = calloc(1, sizeof *g);
    if (!g || !(g->name = strdup(name))) {
        free(g);
        return inf_fail(err, "%s: out of memory", name);
    }
    g->data = data;
    g->size = size;
    gguf_cursor c = {.data = data, .size = size, .file = g->name, .err = err};
    char magic[4];
    uint64_t n_tensors, n_kv;
    if (cur_bytes(&c, magic, 4, "magic")) goto fail;
    if (memcmp(magic, GGUF_MAGIC, 4)) {
        inf_fail(err, "%s: not a GGUF file (magic is %02x %02x %02x %02x, expected \"GGUF\")",
                 g->name, (unsigned char)magic[0], (unsigned char)magic[1], (unsigned char)magic[2],
                 (unsigned char)magic[3]);
        goto fail;
    }
    if (cur_u32(&c, &g->version, "version")) goto fail;
    if (g->version != 2 && g->version != 3) {
        inf_fail(err, "%s: GGUF version %u is not supported (expected 2 or 3%s)", g->name,
                 g->version, g->version > 0xffff ? "; a big-endian file?" : "");
        goto fail;
    }
    if (cur_u64(&c, &n_tensors, "tensor count") || cur_u64(&c, &n_kv, "metadata count")) goto fail;
    /* smallest metadata entry: key length + 1-byte key + type + 1-byte value;
     * smallest tensor info: name length + 1 byte + n_dims + one dim + type + offset */
    size_t left = c.size - c.pos;
    if (n_kv > left / 14) {
        inf_fail(err, "%s: metadata count %llu cannot fit in the %zu bytes left", g->name,
                 (unsigned long long)n_kv, left);
        goto fail;
    }
    if (n_tensors > left / 33) {
        inf_fail(err, "%s: tensor count %llu cannot fit in the %zu bytes left", g->name,
                 (unsigned long long)n_tensors, left);
        goto fail;
    }
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) {
        inf_fail(err, "%s: out of memory", g->name);
        goto fail;
    }
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    if (parse_kvs(g, &c)) goto fail;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_find(g, "general.alignment");
    if (al) {
        if (al->val.type != GGUF_TYPE_UINT32) {
            inf_fail(err, "%s: metadata general.alignment has type %s, expected UINT32", g->name,
                     gguf_type_name(al->val.type));
            goto fail;
        }
        /* the format requires a multiple of 8; blocks are read in place */
        if (al->val.u < 8 || (al->val.u & (al->val.u - 1))) {
            inf_fail(err,
                     "%s: metadata general.alignment is %llu, expected a power of two and a "
                     "multiple of 8",
                     g->name, (unsigned long long)al->val.u);
            goto fail;
        }
        g->alignment = al->val.u;
    }

    for (int64_t i = 0; i < g->n_tensors; i++)
        if (parse_tensor_info(g, &c, i)) goto fail;
    {
        char **names = malloc((n_tensors ? (size_t)n_tensors : 1) * sizeof *names);
        if (!names) {
            inf_fail(err, "%s: out of memory", g->name);
            goto fail;
        }
        for (int64_t i = 0; i < g->n_tensors; i++)
            names[i] = g->tensors[i].name;
        const char *dup = find_duplicate(names, g->n_tensors);
        if (dup) inf_fail(err, "%s: tensor %s appears more than once", g->name, dup);
        free(names);
        if (dup) goto fail;
    }
    if (place_tensors(g, &c)) goto fail;
    *out = g;
    return 0;
fail:
    gguf_close(g);
    return -1;
}

int gguf_open(gguf_file **out, const char *path, inf_err *err) {
    *out = NULL;
    inf_mmap map;
    if (inf_mmap_open(&map, path, err)) return -1;
    if (gguf_parse(out, map.data, map.size, path, err)) {
        inf_mmap_close(&map);
        return -1;
    }
    (*out)->map = map;
    return 0;
}

const gguf_kv *gguf_find(const gguf_file *g, const char *key) {
    for (int64_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

static const gguf_kv *find_required(const gguf_file *g, const char *key, inf_err *err) {
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) inf_fail(err, "%s: metadata key %s is missing", g->name, key);
    return kv;
}

static int wrong_type(const gguf_file *g, const gguf_kv *kv, const char *expected, inf_err *err) {
    return inf_fail(err, "%s: metadata %s has type %s, expected %s", g->name, kv->key,
                    gguf_type_name(kv->val.type), expected);
}

int gguf_get_int(const gguf_file *g, const char *key, int64_t *out, inf_err *err) {
    const gguf_kv *kv = find_required(g, key, err);
    if (!kv) return -1;
    switch (kv->val.type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64:
        if (kv->val.u > (uint64_t)INT64_MAX)
            return inf_fail(err, "%s: metadata %s is %llu, too large", g->name, key,
                            (unsigned long long)kv->val.u);
        *out = (int64_t)kv->val.u;
        return 0;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64:
        *out = kv->val.i;
        return 0;
    default:
        return wrong_type(g, kv, "an integer", err);
    }
}

int gguf_get_float(const gguf_file *g, const char *key, double *out, inf_err *err) {
    const gguf_kv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->val.type != GGUF_TYPE_FLOAT32 && kv->val.type != GGUF_TYPE_FLOAT64)
        return wrong_type(g, kv, "FLOAT32 or FLOAT64", err);
    *out = kv->val.f;
    return 0;
}

int gguf_get_bool(const gguf_file *g, const char *key, bool *out, inf_err *err) {
    const gguf_kv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->val.type != GGUF_TYPE_BOOL) return wrong_type(g, kv, "BOOL", err);
    *out = kv->val.b;
    return 0;
}

int gguf_get_str(const gguf_file *g, const char *key, const char **ptr, size_t *len, inf_err *err) {
    const gguf_kv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->val.type != GGUF_TYPE_STRING) return wrong_type(g, kv, "STRING", err);
    *ptr = kv->val.str.ptr;
    *len = (size_t)kv->val.str.len;
    return 0;
}

int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type, const gguf_value **arr,
                 inf_err *err) {
    const gguf_kv *kv = find_required(g, key, err);
    if (!kv) return -1;
    if (kv->val.type != GGUF_TYPE_ARRAY) return wrong_type(g, kv, "ARRAY", err);
    if (elem_type != GGUF_TYPE_COUNT && kv->val.arr.type != elem_type)
        return inf_fail(err, "%s: metadata %s is an array of %s, expected an array of %s", g->name,
                        key, gguf_type_name(kv->val.arr.type), gguf_type_name(elem_type));
    *arr = &kv->val;
    return 0;
}
