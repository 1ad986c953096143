/* GGUF reader (versions 2 and 3).
 *
 * A GGUF file is: magic "GGUF", version, tensor count, metadata count, the
 * metadata key/value pairs, the tensor infos (name, dims fastest-first, type,
 * offset), padding to general.alignment (default 32), then the tensor data.
 * gguf_parse validates all of it against the buffer size before anything
 * reads it: string lengths, counts, dims, types, offsets and sizes. Strings
 * and tensor data stay in the buffer (no copy); keys and tensor names are
 * copied as NUL-terminated strings.
 *
 * The generic metadata API below lets any caller list or look up keys
 * (inspect prints them; the model loader reads qwen3.* and tokenizer.*).
 * Binding a parsed file into a model is gguf_model.h's job. */
#ifndef INF_MODELFILE_GGUF_H
#define INF_MODELFILE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/tensor.h" /* INF_MAX_DIMS */
#include "util/err.h"
#include "util/mem.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types, numbered as the format numbers them. */
enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

/* One metadata value. Strings point into the file and are NOT NUL-terminated.
 * Arrays of scalars keep `raw` (elements packed little-endian in the file);
 * arrays of strings or of arrays have `items` (parsed, owned by the file). */
typedef struct gguf_value gguf_value;
struct gguf_value {
    uint32_t type; /* enum gguf_type */
    union {
        uint64_t u; /* UINT8, UINT16, UINT32, UINT64 */
        int64_t i;  /* INT8, INT16, INT32, INT64 */
        double f;   /* FLOAT32 (exactly widened), FLOAT64 */
        bool b;     /* BOOL */
        struct {
            const char *ptr;
            uint64_t len;
        } str;
        struct {
            uint32_t type; /* element type */
            uint64_t n;
            const unsigned char *raw; /* [n * elem size] scalar elements */
            gguf_value *items;        /* [n] string or array elements */
        } arr;
    };
};

typedef struct gguf_kv {
    char *key; /* NUL-terminated copy */
    gguf_value val;
} gguf_kv;

typedef struct gguf_tensor_info {
    char *name;               /* NUL-terminated copy */
    uint32_t type;            /* ggml type id (always one inferno supports after parsing) */
    int n_dims;               /* 1..4 */
    int64_t ne[INF_MAX_DIMS]; /* fastest-first; unused = 1 */
    uint64_t offset;          /* as stored: relative to the data section */
    size_t nbytes;
    const void *data; /* into the buffer */
} gguf_tensor_info;

typedef struct gguf_file {
    char *name;                /* path (or the name given to gguf_parse) */
    inf_mmap map;              /* owned mapping when opened by path */
    const unsigned char *data; /* [size] the whole file */
    size_t size;
    uint32_t version;
    int64_t n_kv;
    gguf_kv *kv; /* [n_kv] in file order */
    int64_t n_tensors;
    gguf_tensor_info *tensors; /* [n_tensors] in file order */
    uint64_t alignment;
    uint64_t data_offset; /* file offset of the tensor data section */
} gguf_file;

/* Parses a GGUF image of `size` bytes at `data`; `name` is used in messages.
 * The buffer must outlive the result (nothing is copied but keys and names).
 * On failure returns -1 with a message naming the file and the field. */
int gguf_parse(gguf_file **out, const void *data, size_t size, const char *name, inf_err *err);

/* Maps the file at `path` and parses it; the result owns the mapping. */
int gguf_open(gguf_file **out, const char *path, inf_err *err);

/* Frees everything (and unmaps when the file owns a mapping). NULL is a no-op. */
void gguf_close(gguf_file *g);

/* The key/value pair named `key`, or NULL. */
const gguf_kv *gguf_find(const gguf_file *g, const char *key);

/* Typed getters. Each returns 0 on success, -1 with a message naming the
 * file and the key when the key is missing or has the wrong type.
 * gguf_get_int accepts any integer type (and rejects values that do not fit
 * int64); gguf_get_float accepts FLOAT32 and FLOAT64; gguf_get_str gives a
 * pointer into the file and its length (not NUL-terminated); gguf_get_arr
 * checks the element type unless elem_type is GGUF_TYPE_COUNT. */
int gguf_get_int(const gguf_file *g, const char *key, int64_t *out, inf_err *err);
int gguf_get_float(const gguf_file *g, const char *key, double *out, inf_err *err);
int gguf_get_bool(const gguf_file *g, const char *key, bool *out, inf_err *err);
int gguf_get_str(const gguf_file *g, const char *key, const char **ptr, size_t *len, inf_err *err);
int gguf_get_arr(const gguf_file *g, const char *key, uint32_t elem_type, const gguf_value **arr,
                 inf_err *err);

/* Element i (< arr->arr.n) of an array value, decoded into a scalar, string
 * or array value. */
gguf_value gguf_arr_at(const gguf_value *arr, uint64_t i);

/* "UINT32", "STRING", ... or "unknown". */
const char *gguf_type_name(uint32_t type);

#endif
