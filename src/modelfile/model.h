/* The neutral model description.
 *
 * Both readers (GGUF and Hugging Face folder) produce this one structure:
 * hyperparameters, every tensor of the file (type, shape, pointer into an
 * mmap), the Qwen3 weight slots bound by name, and the tokenizer in neutral
 * form. Nothing above this layer knows which format a model came from. */
#ifndef INF_MODELFILE_MODEL_H
#define INF_MODELFILE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/tensor.h"
#include "tokenizer/vocab.h"
#include "util/err.h"

typedef struct inf_hparams {
    int n_layer;     /* 28 for Qwen3-0.6B */
    int n_embd;      /* hidden size, 1024 */
    int n_head;      /* query heads, 16 */
    int n_head_kv;   /* key/value heads, 8 */
    int head_dim;    /* 128 (Qwen3: n_head*head_dim != n_embd in general) */
    int n_ff;        /* FFN inner size, 3072 */
    int n_vocab;     /* 151936 */
    int n_ctx_train; /* 40960 */
    float rope_theta;   /* 1e6 */
    float rms_eps;      /* 1e-6 */
    bool tied_output;   /* output head is token_embd */
} inf_hparams;

/* One transformer block's weights; pointers into inf_model_file.tensors. */
typedef struct inf_layer_weights {
    const inf_tensor *attn_norm; /* [n_embd] */
    const inf_tensor *wq;        /* [n_head*head_dim][n_embd] */
    const inf_tensor *wk;        /* [n_head_kv*head_dim][n_embd] */
    const inf_tensor *wv;        /* [n_head_kv*head_dim][n_embd] */
    const inf_tensor *wo;        /* [n_embd][n_head*head_dim] */
    const inf_tensor *q_norm;    /* [head_dim] Qwen3: per-head RMSNorm of q before RoPE */
    const inf_tensor *k_norm;    /* [head_dim] */
    const inf_tensor *ffn_norm;  /* [n_embd] */
    const inf_tensor *w_gate;    /* [n_ff][n_embd] */
    const inf_tensor *w_up;      /* [n_ff][n_embd] */
    const inf_tensor *w_down;    /* [n_embd][n_ff] */
} inf_layer_weights;

/* Fills v from a Hugging Face tokenizer.json (model.vocab, model.merges,
 * added_tokens, pre_tokenizer regex) and, when tokenizer_config_path is not
 * NULL, tokenizer_config.json (chat_template, bos/eos tokens). */
int inf_vocab_from_hf(inf_vocab_desc *v, const char *tokenizer_json_path,
                      const char *tokenizer_config_path, inf_err *err);

typedef enum inf_format { INF_FORMAT_GGUF, INF_FORMAT_HF } inf_format;

typedef struct inf_model_file {
    inf_format format;
    char *path;
    char *arch; /* "qwen3" */
    char *name; /* general.name or the folder name */
    inf_hparams hp;

    int n_tensors;
    inf_tensor *tensors; /* [n_tensors] in file order */

    const inf_tensor *token_embd;  /* [n_vocab][n_embd] */
    const inf_tensor *output_norm; /* [n_embd] */
    const inf_tensor *output;      /* [n_vocab][n_embd]; == token_embd when tied */
    inf_layer_weights *layers;     /* [n_layer] */

    inf_vocab_desc vocab;

    struct inf_model_file_priv *priv; /* reader-specific: mappings, metadata */
} inf_model_file;

/* Opens a model: a regular file is read as GGUF, a directory as a Hugging Face
 * folder (config.json + safetensors). Weights are mmapped, never copied.
 * On success *out owns everything; free with inf_model_close. On failure
 * returns -1 with a message naming the file and the field. */
int inf_model_open(inf_model_file **out, const char *path, inf_err *err);
void inf_model_close(inf_model_file *m);

/* Finds a tensor by its file name; NULL if absent. */
const inf_tensor *inf_model_find(const inf_model_file *m, const char *name);

#endif
