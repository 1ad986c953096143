/* A safetensors writer and the other files of a Hugging Face model folder.
 *
 * safetensors: an 8-byte little-endian header length, a JSON header
 * ({"__metadata__": {"format": "pt"}, name: {dtype, shape, data_offsets}},
 * padded with spaces to a multiple of 8), then the tensors back to back.
 * Usage mirrors gguf_writer: declare every tensor, open, append the bytes of
 * each tensor in declaration order (in pieces if convenient), close. */
#ifndef INF_SUPPORT_ST_WRITER_H
#define INF_SUPPORT_ST_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "modelfile/model.h"
#include "quant/dtype.h"
#include "util/err.h"

typedef struct st_writer st_writer;

/* A new, empty writer; NULL if out of memory. Free with st_writer_free
 * (NULL is a no-op; an open file is closed without completing it). */
st_writer *st_writer_create(void);
void st_writer_free(st_writer *w);

/* Declares the next tensor: its name, type (F32, F16 or BF16) and shape
 * slowest-first as Hugging Face writes it (a matrix is [out, in]). Errors
 * (bad type, out of memory) are remembered and reported by st_writer_open. */
void st_writer_add_tensor(st_writer *w, const char *name, inf_dtype type, int n_dims,
                          const int64_t *shape);

/* Total bytes of tensor data declared so far. */
uint64_t st_writer_data_bytes(const st_writer *w);

/* Creates `path` and writes the header. -1 with a message on failure. */
int st_writer_open(st_writer *w, const char *path, inf_err *err);
/* Appends n bytes of tensor data; a piece may not cross into the next tensor. */
int st_writer_write(st_writer *w, const void *data, size_t n, inf_err *err);
/* Checks every tensor was filled, closes; removes the file on failure. */
int st_writer_close(st_writer *w, inf_err *err);

/* Writes model.safetensors.index.json at `path`: metadata.total_size and
 * weight_map (names[i] -> files[i], i < n). */
int st_write_index(const char *path, int n, const char *const *names, const char *const *files,
                   uint64_t total_size, inf_err *err);

/* Writes a Qwen3 config.json at `path` from the hyperparameters, with
 * torch_dtype ("float32", "float16", "bfloat16") and the bos/eos ids; for a
 * hybrid (hp->ssm_n_v_heads > 0) Qwen3.5's, the text model's fields in
 * text_config (model_type qwen3_5, dtype, layer_types, linear_*,
 * rope_parameters with partial_rotary_factor and mrope_section; with experts
 * qwen3_5_moe and the expert fields, no intermediate_size). */
int st_write_config(const char *path, const inf_hparams *hp, const char *torch_dtype, int bos_id,
                    int eos_id, inf_err *err);

/* Copies the file src to dst (replacing dst). */
int st_copy_file(const char *dst, const char *src, inf_err *err);

#endif
