/* The builder the model file readers share (model_build.c); not public.
 *
 * A reader allocates the model with model_alloc, fills arch, name, the
 * shared hyperparameters it knows (all but n_vocab, which the architecture
 * takes from its embedding), tensors[] and vocab, and then calls model_index,
 * which indexes the tensors by name (refusing duplicates) and checks the
 * hyperparameters. On failure the reader frees the half-built model with
 * inf_model_close, which also closes the parsed files it holds in priv. */
#ifndef INF_MODELFILE_MODEL_BUILD_H
#define INF_MODELFILE_MODEL_BUILD_H

#include <jansson.h>

#include "modelfile/gguf.h"
#include "modelfile/model.h"
#include "modelfile/safetensors.h"

struct inf_model_file_priv {
    gguf_file *gguf; /* GGUF: the parsed (first) file; owns the mapping */
    int n_splits;
    gguf_file **splits; /* GGUF split into files: [n_splits], splits[0] == gguf */
    int n_st;
    st_file **st;               /* HF: [n_st] safetensors files (shards); own their mappings */
    json_t *cfg;                /* HF: config.json (a multimodal one's text_config merged
                                   over it), for inf_model_meta_* */
    bool text_of_multimodal;    /* HF: the text model of a vision-language folder */
    const inf_tensor **by_name; /* [n_tensors] sorted by name, for inf_model_find */
};

/* A zeroed model with its priv part; path is copied. */
int model_alloc(inf_model_file **out, inf_format format, const char *path, inf_err *err);

/* Indexes the tensors by name and checks the hyperparameters (see above).
 * Returns -1 with a message naming the duplicate tensor or the field. */
int model_index(inf_model_file *m, inf_err *err);

#endif
