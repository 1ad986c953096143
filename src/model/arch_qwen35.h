/* The part of qwen35 / qwen35moe (arch_qwen35.c) in its own file
 * (arch_qwen35_plan.c), model/ only. */
#ifndef INF_MODEL_ARCH_QWEN35_H
#define INF_MODEL_ARCH_QWEN35_H

#include "model/model.h"

/* A Hugging Face folder as llama.cpp's converter writes it: the zero-centred
 * norms as 1 + w, A_log as ssm_a = -exp(A_log), the conv weight squeezed to
 * {K, C}, and the DeltaNet V heads from grouped to tiled order (GGUF head
 * j Nk + k is HF head k r + j, r = Nv / Nk) in the V rows of the fused QKV
 * and the conv, in z, beta, alpha (rows), dt_bias, A (elements) and the
 * output projection's columns; the MoE variant's experts stacked as
 * qwen3moe's. */
int inf_qwen35_gguf_plan(const inf_model_file *mf, inf_gguf_plan *p, inf_err *err);

#endif
