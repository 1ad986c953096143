/* A tensor: a typed, shaped array of weights that lives in a file mapping.
 *
 * The model file readers (modelfile/) describe every tensor of a file this
 * way and the backends (backend/) read weights through it, so neither needs
 * the other. Header-only. */
#ifndef INF_QUANT_TENSOR_H
#define INF_QUANT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "quant/dtype.h"

#define INF_MAX_DIMS 4

typedef struct inf_tensor {
    char *name;               /* as stored in the file (GGUF or HF name) */
    inf_dtype type;           /* element/block type */
    int n_dims;               /* 1..4 */
    int64_t ne[INF_MAX_DIMS]; /* shape fastest-first (ggml order): ne[0] is the row length;
                                 a [out][in] matrix has ne[0] = in, ne[1] = out. Unused = 1 */
    const void *data;         /* points into the file mapping; never copied */
    size_t nbytes;
    uint64_t offset; /* byte offset of data within its file (for inspect) */
    int file_index;  /* which file of a sharded model (0 for GGUF) */
} inf_tensor;

#endif
