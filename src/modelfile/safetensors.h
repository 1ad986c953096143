/* safetensors reader.
 *
 * A safetensors file is: an 8-byte little-endian header length N, N bytes of
 * JSON mapping each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end]} (offsets relative to the byte after the header), an optional
 * "__metadata__" object of strings, then the data. st_parse checks every
 * entry: dtype one of F32/F16/BF16, 1..4 positive dims, offsets inside the
 * file, end - begin equal to the shape's byte size, no two tensors
 * overlapping. Tensor data stays in the buffer (no copy). */
#ifndef INF_MODELFILE_SAFETENSORS_H
#define INF_MODELFILE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "modelfile/model.h"
#include "util/err.h"
#include "util/mem.h"

/* The largest header the reader accepts (the format's own limit). */
#define ST_MAX_HEADER (100u << 20)

typedef struct st_tensor {
    char *name;
    inf_dtype type;           /* INF_F32, INF_F16 or INF_BF16 */
    int n_dims;               /* 1..4 */
    int64_t ne[INF_MAX_DIMS]; /* fastest-first (the file's shape reversed); unused = 1 */
    uint64_t offset;          /* file offset of the data */
    size_t nbytes;
    const void *data; /* into the buffer */
} st_tensor;

typedef struct st_file {
    char *name;                /* path, or the name given to st_parse */
    inf_mmap map;              /* owned mapping when opened by path */
    const unsigned char *data; /* [size] */
    size_t size;
    uint64_t header_len; /* N; data starts at 8 + N */
    int n_tensors;
    st_tensor *tensors; /* [n_tensors] sorted by data offset */
} st_file;

/* Parses a safetensors image; the buffer must outlive the result. On failure
 * returns -1 with a message naming the file and the tensor/field. */
int st_parse(st_file **out, const void *data, size_t size, const char *name, inf_err *err);

/* Maps `path` and parses it; the result owns the mapping. */
int st_open(st_file **out, const char *path, inf_err *err);

/* NULL is a no-op. */
void st_close(st_file *f);

/* The tensor named `name`, or NULL. */
const st_tensor *st_find(const st_file *f, const char *name);

#endif
