/* safetensors parsing. See safetensors.h. */
#include "modelfile/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the safetensors reader assumes a little-endian host"
#endif

void st_close(st_file *f) {
    if (!f) return;
    for (int i = 0; f->tensors && i < f->n_tensors; i++)
        free(f->tensors[i].name);
    free(f->tensors);
    free(f->name);
    inf_mmap_close(&f->map);
    free(f);
}

static const struct {
    const char *name;
    inf_dtype type;
    size_t size;
} st_dtypes[] = {{"F32", INF_F32, 4}, {"F16", INF_F16, 2}, {"BF16", INF_BF16, 2}};

/* Fills t from one header entry {"dtype", "shape", "data_offsets"}.
 * data_len is the size of the data section. */
static int parse_entry(st_file *f, st_tensor *t, json_t *e, uint64_t data_len, inf_err *err) {
    if (!json_is_object(e))
        return inf_fail(err, "%s: tensor %s: header entry is not a JSON object", f->name, t->name);
    json_t *dt = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape"),
           *offs = json_object_get(e, "data_offsets");
    if (!json_is_string(dt))
        return inf_fail(err, "%s: tensor %s: \"dtype\" is missing or not a string", f->name,
                        t->name);
    size_t es = 0;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(json_string_value(dt), st_dtypes[i].name)) {
            t->type = st_dtypes[i].type;
            es = st_dtypes[i].size;
        }
    if (!es)
        return inf_fail(err,
                        "%s: tensor %s has dtype %s, which inferno does not support "
                        "(F32, F16, BF16)",
                        f->name, t->name, json_string_value(dt));
    if (!json_is_array(shape))
        return inf_fail(err, "%s: tensor %s: \"shape\" is missing or not an array", f->name,
                        t->name);
    size_t nd = json_array_size(shape);
    if (nd < 1 || nd > INF_MAX_DIMS)
        return inf_fail(err, "%s: tensor %s has %zu dimensions, expected 1..%d", f->name, t->name,
                        nd, INF_MAX_DIMS);
    t->n_dims = (int)nd;
    for (int d = 0; d < INF_MAX_DIMS; d++)
        t->ne[d] = 1;
    uint64_t count = 1;
    for (size_t d = 0; d < nd; d++) {
        json_t *v = json_array_get(shape, d);
        json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
        if (n <= 0)
            return inf_fail(err, "%s: tensor %s: shape[%zu] is not a positive integer", f->name,
                            t->name, d);
        if (count > (uint64_t)INT64_MAX / (uint64_t)n)
            return inf_fail(err, "%s: tensor %s: element count overflows 64 bits", f->name,
                            t->name);
        count *= (uint64_t)n;
        t->ne[nd - 1 - d] = n; /* the file lists slowest-first */
    }
    if (count > (uint64_t)INT64_MAX / es)
        return inf_fail(err, "%s: tensor %s: byte size overflows", f->name, t->name);
    uint64_t want = count * es;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_is_integer(json_array_get(offs, 0)) || !json_is_integer(json_array_get(offs, 1)))
        return inf_fail(err, "%s: tensor %s: \"data_offsets\" is not a [begin, end] pair", f->name,
                        t->name);
    json_int_t b = json_integer_value(json_array_get(offs, 0)),
               en = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || en < b)
        return inf_fail(err, "%s: tensor %s: data_offsets [%lld, %lld] are not ordered", f->name,
                        t->name, (long long)b, (long long)en);
    if ((uint64_t)en > data_len)
        return inf_fail(err,
                        "%s: tensor %s: data_offsets end %lld is past the end of the data "
                        "(%llu bytes)",
                        f->name, t->name, (long long)en, (unsigned long long)data_len);
    if ((uint64_t)(en - b) != want)
        return inf_fail(err,
                        "%s: tensor %s: data_offsets span %lld bytes, but shape and dtype "
                        "need %llu",
                        f->name, t->name, (long long)(en - b), (unsigned long long)want);
    t->offset = 8 + f->header_len + (uint64_t)b;
    t->nbytes = (size_t)want;
    t->data = f->data + t->offset;
    return 0;
}

static int cmp_offset(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    /* zero-size tensors cannot exist (dims > 0), so equal offsets overlap */
    return 0;
}

static int parse_header(st_file *f, json_t *root, inf_err *err) {
    if (!json_is_object(root)) return inf_fail(err, "%s: header is not a JSON object", f->name);
    size_t n = json_object_size(root);
    if (json_object_get(root, "__metadata__")) {
        if (!json_is_object(json_object_get(root, "__metadata__")))
            return inf_fail(err, "%s: \"__metadata__\" is not a JSON object", f->name);
        n--;
    }
    if (n > INT32_MAX) return inf_fail(err, "%s: too many tensors", f->name);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) return inf_fail(err, "%s: out of memory", f->name);
    uint64_t data_len = f->size - 8 - f->header_len;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) continue;
        st_tensor *t = &f->tensors[f->n_tensors];
        if (!(t->name = strdup(key))) return inf_fail(err, "%s: out of memory", f->name);
        f->n_tensors++;
        if (parse_entry(f, t, val, data_len, err)) return -1;
    }
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, cmp_offset);
    /* As the safetensors format says (and its reference reader checks): the
       tensors cover the data region exactly, from its first byte to the end of
       the file, without holes. A header length off by a few bytes (JSON still
       parses, padding cut or included) shifts every tensor; this refuses it. */
    uint64_t at = 8 + f->header_len;
    for (int i = 0; i < f->n_tensors; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->offset < at)
            return inf_fail(err, "%s: tensor %s overlaps the data of tensor %s", f->name, t->name,
                            f->tensors[i - 1].name);
        if (t->offset > at)
            return inf_fail(err,
                            "%s: tensor %s starts at data offset %llu, but the data before it "
                            "ends at %llu (a hole: the header length or data_offsets are wrong)",
                            f->name, t->name, (unsigned long long)(t->offset - 8 - f->header_len),
                            (unsigned long long)(at - 8 - f->header_len));
        at = t->offset + t->nbytes;
    }
    if (at != f->size)
        return inf_fail(err,
                        "%s: the tensors cover %llu bytes of data, but the data region after "
                        "the %llu-byte header is %llu bytes",
                        f->name, (unsigned long long)(at - 8 - f->header_len),
                        (unsigned long long)f->header_len, (unsigned long long)data_len);
    return 0;
}

int st_parse(st_file **out, const void *data, size_t size, const char *name, inf_err *err) {
    *out = NULL;
    st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(name))) {
        free(f);
        return inf_fail(err, "%s: out of memory", name);
    }
    f->data = data;
    f->size = size;
    int rc = -1;
    json_t *root = NULL;
    if (size < 8) {
        inf_fail(err, "%s: file is truncated: %zu bytes, the header length alone needs 8", f->name,
                 size);
        goto done;
    }
    memcpy(&f->header_len, data, 8);
    if (f->header_len > size - 8) {
        inf_fail(err, "%s: header length %llu is past the end of the file (%zu bytes)", f->name,
                 (unsigned long long)f->header_len, size);
        goto done;
    }
    if (f->header_len > ST_MAX_HEADER) {
        inf_fail(err, "%s: header length %llu is over the limit of %u bytes", f->name,
                 (unsigned long long)f->header_len, ST_MAX_HEADER);
        goto done;
    }
    if (f->header_len < 2 || f->data[8] != '{') {
        inf_fail(err, "%s: header does not start with '{' (not a safetensors file?)", f->name);
        goto done;
    }
    json_error_t je;
    root =
        json_loadb((const char *)f->data + 8, (size_t)f->header_len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        inf_fail(err, "%s: header JSON is broken at line %d column %d: %s", f->name, je.line,
                 je.column, je.text);
        goto done;
    }
    rc = parse_header(f, root, err);
done:
    json_decref(root);
    if (rc) {
        st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int st_open(st_file **out, const char *path, inf_err *err) {
    *out = NULL;
    inf_mmap map;
    if (inf_mmap_open(&map, path, err)) return -1;
    if (st_parse(out, map.data, map.size, path, err)) {
        inf_mmap_close(&map);
        return -1;
    }
    (*out)->map = map;
    return 0;
}

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}
