/* The parts of qwen3 (arch_qwen3.c) that qwen3moe reuses: the same names
 * for the embedding, head, attention and dense FFN (model/ only). */
#ifndef INF_MODEL_ARCH_QWEN3_H
#define INF_MODEL_ARCH_QWEN3_H

#include "model/blocks.h"

extern const blk_name inf_qwen3_embd, inf_qwen3_output_norm, inf_qwen3_output;
extern const blk_attn_names inf_qwen3_attn_names;
extern const blk_ffn_names inf_qwen3_ffn_names;

/* Checks (be NULL) or binds layer l's attention / dense FFN (under the
 * names n). A gated attention's q projection holds 2 * head_dim rows per
 * head (Qwen3.5: the head's q, then its output gate). */
int inf_qwen3_attn_bind(blk_attn *w, const inf_model_file *mf, const inf_backend *be, int l,
                        bool gated, inf_err *err);
void inf_qwen3_attn_release(blk_attn *w, const inf_backend *be);
int inf_qwen3_ffn_bind(blk_ffn *w, const inf_model_file *mf, const inf_backend *be, int l,
                       const blk_ffn_names *n, inf_err *err);
void inf_qwen3_ffn_release(blk_ffn *w, const inf_backend *be);
/* The embedding (n_vocab, tied head), final norm, layer range, checked. */
int inf_qwen3_bind_globals(inf_model_file *mf, inf_err *err);
/* The embedding, head and final norm bound for be. */
int inf_qwen3_bind_head(const inf_model_file *mf, const inf_backend *be,
                        const inf_tensor **token_embd, inf_weight *output, float **output_norm,
                        inf_err *err);
/* The GGUF name and layer of one of qwen3's Hugging Face tensor names: 1, or
 * 0 when it is not one of them. */
int inf_qwen3_gguf_name(const char *name, char *out, size_t cap, int *layer);
/* Adds t to a GGUF plan under its qwen3 name (a tied head left out); -1 with
 * a message when it is not a qwen3 tensor. */
int inf_qwen3_gguf_plan_add(const inf_model_file *mf, inf_gguf_plan *p, const inf_tensor *t,
                            inf_err *err);

#endif
