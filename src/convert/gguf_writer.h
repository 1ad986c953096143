/* A GGUF v3 writer.
 *
 * Usage: create, add metadata (in the order it should appear) and tensor
 * infos, then open the file (writes header, metadata, tensor infos and the
 * padding before the data), append every tensor's bytes in declaration order
 * (in as many pieces as convenient), and close. Only one tensor's worth of
 * data (or less) is ever held by the caller, so files larger than memory are
 * fine. The data section and every tensor start on a multiple of the
 * alignment (32, or the value of a u32 "general.alignment" key when added).
 *
 * Adding metadata or tensor infos never fails immediately: an allocation
 * failure or a bad argument is remembered and reported by
 * gguf_writer_open. */
#ifndef INF_CONVERT_GGUF_WRITER_H
#define INF_CONVERT_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modelfile/gguf.h" /* enum gguf_type, GGUF_DEFAULT_ALIGNMENT */
#include "quant/dtype.h"
#include "util/err.h"

typedef struct gguf_writer gguf_writer;

/* A new, empty writer; NULL if out of memory. Free with gguf_writer_free. */
gguf_writer *gguf_writer_create(void);
/* Closes the file if still open (without completing it) and frees everything.
 * NULL is a no-op. */
void gguf_writer_free(gguf_writer *w);

/* Scalar metadata. Keys and strings are copied. */
void gguf_writer_add_u8(gguf_writer *w, const char *key, uint8_t v);
void gguf_writer_add_i8(gguf_writer *w, const char *key, int8_t v);
void gguf_writer_add_u16(gguf_writer *w, const char *key, uint16_t v);
void gguf_writer_add_i16(gguf_writer *w, const char *key, int16_t v);
void gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v);
void gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v);
void gguf_writer_add_i64(gguf_writer *w, const char *key, int64_t v);
void gguf_writer_add_f32(gguf_writer *w, const char *key, float v);
void gguf_writer_add_f64(gguf_writer *w, const char *key, double v);
void gguf_writer_add_bool(gguf_writer *w, const char *key, bool v);
void gguf_writer_add_str(gguf_writer *w, const char *key, const char *v);

/* An array of n scalars of type t (any type but STRING and ARRAY), read from
 * `values` as the matching C type (uint8_t, ..., float, double, bool as one
 * byte 0/1). */
void gguf_writer_add_arr(gguf_writer *w, const char *key, enum gguf_type t, const void *values,
                         uint64_t n);
/* An array of n NUL-terminated strings. */
void gguf_writer_add_arr_str(gguf_writer *w, const char *key, const char *const *values,
                             uint64_t n);

/* Declares the next tensor: name, element type, n_dims (1..4) and the shape
 * fastest-first (ne[0] = row length, a multiple of the type's block size).
 * Its data will be inf_dtype_row_bytes(type, ne[0]) * ne[1] * ... bytes. */
void gguf_writer_add_tensor(gguf_writer *w, const char *name, inf_dtype type, int n_dims,
                            const int64_t *ne);

/* Creates `path` and writes everything before the tensor data. Returns -1
 * (naming the path, or the first bad key/tensor added) on failure. */
int gguf_writer_open(gguf_writer *w, const char *path, inf_err *err);

/* Appends n bytes of tensor data. Tensors are filled in declaration order;
 * a piece may not cross from one tensor into the next. */
int gguf_writer_write(gguf_writer *w, const void *data, size_t n, inf_err *err);

/* Checks that every declared tensor was filled completely, flushes and closes.
 * On failure the incomplete file is removed. */
int gguf_writer_close(gguf_writer *w, inf_err *err);

#endif
