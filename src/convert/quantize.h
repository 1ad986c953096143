/* `inferno quantize`: a model file (GGUF, or a Hugging Face folder) written
 * as a GGUF file of one of llama-quantize's mixes (quant/mix.h).
 *
 * Tensors get llama.cpp's per-tensor types; norms stay F32. From a GGUF file
 * every metadata key is copied (general.file_type and
 * general.quantization_version rewritten, as llama-quantize does); from a
 * Hugging Face folder the metadata is what llama.cpp's converter writes
 * (convert/qwen3_meta.h). Rows are quantized by the reference quantizers
 * (quant/) on n_threads threads, one tensor at a time, so memory stays near
 * one tensor's output. */
#ifndef INF_CONVERT_QUANTIZE_H
#define INF_CONVERT_QUANTIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/mix.h"
#include "util/err.h"

typedef struct inf_quantize_tensor_info {
    int index, count; /* this is tensor index+1 of count */
    const char *name; /* GGUF name */
    int n_dims;
    const int64_t *ne; /* fastest-first */
    inf_dtype from, to;
    size_t bytes_in, bytes_out;
} inf_quantize_tensor_info;

typedef struct inf_quantize_opts {
    const inf_mix *mix;
    int n_threads;         /* >= 1 */
    bool pure;             /* every matrix the mix's base type (llama-quantize --pure) */
    bool allow_requantize; /* accept quantized input tensors */
    int output_type;       /* the output head's type, or -1 for the mix's */
    int token_embd_type;   /* token_embd's type, or -1 for the mix's */
    /* called after each tensor is written (NULL: none) */
    void (*progress)(void *ud, const inf_quantize_tensor_info *t);
    void *ud;
} inf_quantize_opts;

/* Writes `out` from the model at `in`. On failure returns -1 with a message
 * naming the file, tensor or type, and leaves no partial file behind. */
int inf_quantize_model(const char *in, const char *out, const inf_quantize_opts *o, inf_err *err);

#endif
