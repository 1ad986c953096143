/* The builder the model file readers share (model_build.c); not public.
 *
 * A reader allocates the model with model_alloc, fills arch, name, the
 * hyperparameters it knows (all but n_vocab), tensors[] and vocab, and then
 * calls model_bind, which binds the Qwen3 weight slots by the format's tensor
 * names and checks every shape against the hyperparameters. On failure the
 * reader frees the half-built model with inf_model_close, which also closes
 * the parsed files it holds in priv. */
#ifndef INF_MODELFILE_MODEL_BUILD_H
#define INF_MODELFILE_MODEL_BUILD_H

#include "modelfile/gguf.h"
#include "modelfile/model.h"
#include "modelfile/safetensors.h"

struct inf_model_file_priv {
    gguf_file *gguf; /* GGUF: the parsed file; owns the mapping */
    int n_st;
    st_file **st;               /* HF: [n_st] safetensors files (shards); own their mappings */
    int tie_hint;               /* HF tie_word_embeddings: 1/0; -1 when the format has no flag */
    int64_t cfg_vocab;          /* HF vocab_size from config.json; 0 when not stated */
    const inf_tensor **by_name; /* [n_tensors] sorted by name, for inf_model_find */
};

/* A zeroed model with its priv part; path is copied. */
int model_alloc(inf_model_file **out, inf_format format, const char *path, inf_err *err);

/* Binds slots and checks shapes (see above). Sets hp.n_vocab from the
 * embedding and hp.tied_output. Returns -1 with a message naming the tensor,
 * the expected and the actual shape. */
int model_bind(inf_model_file *m, inf_err *err);

#endif
