/* llama.cpp's quantization mixes ("file types"): per tensor, the weight type
 * llama-quantize gives it, by the rules of llama.cpp's llama_tensor_get_type
 * without an importance matrix: the output head (or the tied token
 * embedding) and llama.cpp's "more bits" layers of attn_v and ffn_down get
 * more bits; a model of exactly 8 experts (its Mixtral rule) gets attn_k and
 * attn_v in Q8_0 and attn_output in Q5_K in the low-bit mixes; a tensor
 * whose rows are not a multiple of the type's block falls back to a type
 * whose block fits (F16 when none does).
 *
 * One owner of these rules, used by `inferno quantize` and by the test-model
 * maker, so both write the files llama-quantize writes. */
#ifndef INF_QUANT_MIX_H
#define INF_QUANT_MIX_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/dtype.h"

typedef struct inf_mix {
    const char *name; /* llama-quantize's name: "Q4_K_M" */
    uint32_t ftype;   /* llama_ftype, written as general.file_type */
    inf_dtype base;   /* the type of most tensors */
    const char *desc; /* one line for --help */
} inf_mix;

/* The mixes inferno can write, in llama-quantize's --help order; n = count. */
const inf_mix *inf_mix_list(int *n);
/* The mix named s (case-insensitive, "q4_k_m" = "Q4_K_M"), or NULL. */
const inf_mix *inf_mix_find(const char *s);

/* What the rules need to know of one tensor. */
typedef struct inf_mix_tensor {
    const char *name; /* GGUF name: "blk.3.attn_v.weight", "token_embd.weight" */
    int n_dims;       /* 1-D tensors (norms) are never quantized */
    int64_t ne0;      /* row length */
    int layer;        /* N of blk.N (ignored for others) */
    int n_layer;
    int n_gqa;      /* n_head / n_head_kv */
    int n_expert;   /* experts per MoE layer (0 for a dense model) */
    bool tied;      /* the file has no output.weight (token_embd is the head too) */
    inf_dtype keep; /* the type of a tensor that is not quantized */
} inf_mix_tensor;

/* The type llama-quantize gives tensor t in mix m. */
inf_dtype inf_mix_tensor_type(const inf_mix *m, const inf_mix_tensor *t);

#endif
