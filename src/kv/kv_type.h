/* K/V element types: names (llama.cpp's -ctk/-ctv values), checks, and the
 * one conversion of a row into the cache (see kv_view.h for what a stored
 * element means). */
#ifndef INF_KV_KV_TYPE_H
#define INF_KV_KV_TYPE_H

#include "kv/kv_view.h"
#include "util/err.h"

/* The K/V types, by the names -ctk/-ctv take. */
#define INF_KV_TYPE_NAMES "f32, f16, bf16, q8_0"

/* Parses "f32", "f16", "bf16" or "q8_0" (case-insensitive) into *out. Returns
 * 0, or -1 with a message quoting text and listing the valid names (what
 * names the flag, e.g. "--cache-type-k"). */
int inf_kv_parse_type(inf_dtype *out, const char *text, const char *what, inf_err *err);

/* The -ctk name of a K/V type ("f16"). */
const char *inf_kv_type_name(inf_dtype t);

/* Whether rows of kv_dim elements, heads of head_dim, can be stored as t:
 * 0, or -1 with a message (bad sizes; not a K/V type; q8_0 with head_dim
 * not a multiple of 32). */
int inf_kv_check_type(inf_dtype t, int kv_dim, int head_dim, inf_err *err);

/* Stores k[row_stride] and v[row_stride] as row j of the view, head by
 * head, converting each to its type once (scalar reference: the bits do not depend on the
 * CPU). */
void inf_kv_store_row(const inf_kv_view *kv, int j, const float *k, const float *v);

#endif
