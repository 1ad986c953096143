/* A Hugging Face model folder read into the neutral model description
 * (model.h): config.json, model.safetensors or a sharded
 * model.safetensors.index.json, tokenizer.json and tokenizer_config.json. */
#ifndef INF_MODELFILE_HF_H
#define INF_MODELFILE_HF_H

#include "modelfile/model.h"
#include "util/err.h"

/* Reads the folder `dir` into *out; weights stay in the mmapped safetensors
 * files. On failure returns -1 with a message naming the file and the field. */
int hf_model_open(inf_model_file **out, const char *dir, inf_err *err);

#endif
