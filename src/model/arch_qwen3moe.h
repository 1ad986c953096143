/* The parts of qwen3moe (arch_qwen3moe.c) that qwen35moe reuses: the expert
 * counts and the MoE FFN's tensors, in both layouts (model/ only). */
#ifndef INF_MODEL_ARCH_QWEN3MOE_H
#define INF_MODEL_ARCH_QWEN3MOE_H

#include "model/blocks.h"

/* Reads the expert counts into mf->hp (GGUF <arch>.expert_count, ...; HF
 * num_experts, ...) and which layers are sparse into sparse[n_layer]. */
int inf_qwen3moe_read_keys(inf_model_file *mf, bool *sparse, inf_err *err);
/* Checks (be NULL) or binds layer l's MoE FFN: the norm (named norm_name),
 * the router and the experts, stacked or one tensor per expert. */
int inf_qwen3moe_bind(blk_moe *w, const inf_model_file *mf, const inf_backend *be, int l,
                      blk_name norm_name, inf_err *err);
void inf_qwen3moe_release(blk_moe *w, const inf_backend *be);
/* A Hugging Face folder's layer l experts as llama.cpp's stacked
 * ffn_{gate,up,down}_exps (nothing for a layer without a router). */
int inf_qwen3moe_plan_experts(const inf_model_file *mf, inf_gguf_plan *p, int l, inf_err *err);

#endif
