/* The architecture table (model/ only).
 *
 * One entry per architecture, each in its own file (arch_qwen3.c,
 * arch_qwen3moe.c): everything particular to it. Its tensor names in GGUF
 * and Hugging Face layout, its hyperparameter keys, how its weights bind,
 * and its forward pass, written over backend ops from the shared blocks
 * (blocks.h). Adding an architecture is one file, one line in model.c's
 * list, and its tests. */
#ifndef INF_MODEL_ARCH_H
#define INF_MODEL_ARCH_H

#include <stddef.h>

#include "model/model.h"

typedef struct inf_arch {
    const char *name;              /* inferno's name, "qwen3moe" */
    const char *const *gguf_archs; /* general.architecture values it reads, NULL-terminated */
    const char *const *hf_types;   /* config.json model_type values, NULL-terminated */

    /* Completes mf->hp (n_vocab, tied_output, its own keys) and checks every
     * tensor it needs (presence, shape; norm types). */
    int (*bind_file)(inf_model_file *mf, inf_err *err);
    /* Binds the weights for m->be and allocates m->w (m's file, backend,
     * hyperparameters, sizes, RoPE tables are set). On failure leaves what
     * it bound in m->w for free_model. */
    int (*create)(inf_model *m, inf_err *err);
    void (*free_model)(inf_model *m); /* releases m->w (NULL allowed) */
    /* The forward pass, once the batch is checked (model.c). */
    int (*forward)(inf_model *m, const inf_batch *b, const inf_kv_view *kv, float *logits,
                   inf_err *err);
    /* See inf_model_replay (NULL: the architecture keeps no state). */
    void (*replay)(inf_model *m, const inf_kv_view *kv, int from, int n);
    /* A Hugging Face folder's tensors as GGUF ones (see inf_model_gguf_plan). */
    int (*gguf_plan)(const inf_model_file *mf, inf_gguf_plan *p, inf_err *err);
    /* See inf_model_facts_get. */
    void (*facts)(const inf_model_file *mf, inf_model_facts *f);
} inf_arch;

extern const inf_arch inf_arch_qwen3;
extern const inf_arch inf_arch_qwen3moe;
extern const inf_arch inf_arch_qwen35;
extern const inf_arch inf_arch_qwen35moe;

#endif
