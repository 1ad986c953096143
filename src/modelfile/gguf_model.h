/* A parsed GGUF file (gguf.h) bound into the neutral model description
 * (model.h). */
#ifndef INF_MODELFILE_GGUF_MODEL_H
#define INF_MODELFILE_GGUF_MODEL_H

#include "modelfile/gguf.h"
#include "modelfile/model.h"
#include "util/err.h"

/* Builds the neutral model description from a parsed GGUF file: Qwen3
 * hyperparameters (qwen3.* keys), the tokenizer (tokenizer.ggml.*,
 * tokenizer.chat_template), every tensor, and the bound weight slots.
 * A file split by llama.cpp's gguf-split (split.count > 1) is opened from its
 * first split (NAME-00001-of-0000N.gguf); the others are found by name.
 * Takes ownership of g in every case (closed on failure). */
int gguf_model_open(inf_model_file **out, gguf_file *g, inf_err *err);

#endif
