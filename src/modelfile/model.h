/* The neutral model description.
 *
 * Both readers (GGUF and Hugging Face folder) produce this one structure:
 * the hyperparameters every decoder states under its format's shared keys,
 * every tensor of the file by name (type, shape, pointer into an mmap), the
 * file's own metadata behind typed look-ups, and the tokenizer in neutral
 * form. Nothing here knows an architecture: which tensors a model needs,
 * under which names, and its particular keys live in its architecture file
 * (model/arch_*.c), which completes hp when the model is opened
 * (inf_model_open in model/model.h). */
#ifndef INF_MODELFILE_MODEL_H
#define INF_MODELFILE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/tensor.h"
#include "tokenizer/vocab.h"
#include "util/err.h"

/* Layers a model may have (a hybrid model's layer kinds are kept per layer). */
#define INF_MAX_LAYERS 256

typedef struct inf_hparams {
    int n_layer;      /* 28 for Qwen3-0.6B */
    int n_embd;       /* hidden size, 1024 */
    int n_head;       /* query heads, 16 */
    int n_head_kv;    /* key/value heads, 8 */
    int head_dim;     /* 128 (Qwen3: n_head*head_dim != n_embd in general) */
    int n_ff;         /* FFN inner size, 3072 */
    int n_vocab;      /* 151936 */
    int n_ctx_train;  /* 40960 */
    float rope_theta; /* 1e6 */
    /* YaRN (rope_scaling type yarn; GGUF rope.scaling.type "yarn"); factor 0: none */
    float yarn_factor;      /* 4 for the "-128K" setups */
    int yarn_orig_ctx;      /* original_max_position_embeddings, 32768 */
    float yarn_beta_fast;   /* 32 */
    float yarn_beta_slow;   /* 1 */
    float rope_attn_factor; /* cos/sin are scaled by it: YaRN's 0.1 ln(factor) + 1; 1 without */
    float rms_eps;          /* 1e-6 */
    bool tied_output;       /* output head is token_embd (set by the architecture) */
    bool no_head;           /* no output head at all (an embedding model saved without lm_head and
                               untied): it embeds, it cannot generate (set by the architecture) */
    /* Mixture of experts (0 for a dense model; set by the architecture) */
    int n_expert;        /* experts per MoE layer, 128 for Qwen3-30B-A3B */
    int n_expert_used;   /* experts each token goes through, 8 */
    int n_ff_exp;        /* each expert's FFN inner size, 768 */
    bool norm_topk_prob; /* renormalize the chosen experts' weights to sum to 1 */
    /* Hybrid models (Qwen3.5 / Qwen3.6: Gated DeltaNet layers between the
     * attention layers; set by the architecture, 0 elsewhere) */
    int n_rot;                        /* RoPE'd leading dims of each head; 0 = head_dim */
    int n_ff_shexp;                   /* MoE: the shared expert's FFN inner size; 0 = none */
    int ssm_d_conv;                   /* conv1d kernel, 4 */
    int ssm_n_k_heads, ssm_n_v_heads; /* DeltaNet q/k heads, v heads (a multiple) */
    int ssm_d_k, ssm_d_v;             /* their head sizes, 128 */
    bool recurrent[INF_MAX_LAYERS];   /* layer l is a DeltaNet layer (else attention) */
} inf_hparams;

/* Fills v from a Hugging Face tokenizer.json (model.vocab, model.merges,
 * added_tokens, pre_tokenizer regex) and, when tokenizer_config_path is not
 * NULL, tokenizer_config.json (chat_template, bos/eos tokens). */
int inf_vocab_from_hf(inf_vocab_desc *v, const char *tokenizer_json_path,
                      const char *tokenizer_config_path, inf_err *err);

typedef enum inf_format { INF_FORMAT_GGUF, INF_FORMAT_HF } inf_format;

/* How the file says a text's embedding is pooled from its tokens' states:
 * GGUF <arch>.pooling_type (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last,
 * 4 rank), sentence-transformers' 1_Pooling/config.json. */
typedef enum inf_pooling {
    INF_POOL_UNSPECIFIED = -1, /* the file does not say (last-token, as Qwen3-Embedding) */
    INF_POOL_NONE = 0,
    INF_POOL_MEAN = 1,
    INF_POOL_CLS = 2,
    INF_POOL_LAST = 3,
    INF_POOL_RANK = 4,
    INF_POOL_OTHER = 5, /* a sentence-transformers mode llama.cpp has no name for (max, ...) */
} inf_pooling;

/* The sampling the model's authors recommend: GGUF general.sampling.* (temp,
 * top_k, top_p, min_p, penalty_repeat), HF generation_config.json
 * (temperature, top_k, top_p, min_p, repetition_penalty; do_sample false is
 * temperature 0). Only the fields in `set` were stated. */
enum {
    INF_REC_TEMP = 1u << 0,
    INF_REC_TOP_K = 1u << 1,
    INF_REC_TOP_P = 1u << 2,
    INF_REC_MIN_P = 1u << 3,
    INF_REC_REPEAT_PENALTY = 1u << 4,
};
typedef struct inf_sampling_rec {
    unsigned set; /* INF_REC_* */
    float temp, top_p, min_p, repeat_penalty;
    int top_k;
} inf_sampling_rec;

typedef struct inf_model_file {
    inf_format format;
    char *path;
    char *arch; /* as the file names it: general.architecture or config.json model_type */
    char *name; /* general.name or the folder name */
    inf_hparams hp;

    int n_tensors;
    inf_tensor *tensors; /* [n_tensors] in file order */

    inf_vocab_desc vocab;
    inf_pooling pooling;       /* as the file states it */
    inf_sampling_rec sampling; /* the authors' recommended sampling */

    struct inf_model_file_priv *priv; /* reader-specific: mappings, metadata */
} inf_model_file;

/* Reads a model file: a regular file as GGUF, a directory as a Hugging Face
 * folder (config.json + safetensors). Weights are mmapped, never copied.
 * Only the format is checked here (every tensor within the file, names
 * unique, the shared hyperparameters sane); programs open models with
 * inf_model_open (model/model.h), which also binds the architecture.
 * On success *out owns everything; free with inf_model_close. On failure
 * returns -1 with a message naming the file and the field. */
int inf_modelfile_open(inf_model_file **out, const char *path, inf_err *err);
void inf_model_close(inf_model_file *m);

/* Finds a tensor by its file name; NULL if absent. */
const inf_tensor *inf_model_find(const inf_model_file *m, const char *name);

/* The pages of t's data are no longer needed (a backend holds a packed copy
 * of the weight): they leave the resident set and come back from the file if
 * read again, so a packed copy does not sit beside the whole mapped file.
 * A no-op for a tensor not in one of the file's mappings. */
void inf_model_drop_pages(const inf_model_file *m, const inf_tensor *t);
/* The file's pages of t mapped now, for a weight the backend reads in place
 * (see inf_mmap_populate). */
void inf_model_populate_pages(const inf_model_file *m, const inf_tensor *t);

/* Where t's data lies: *file = 1 + the index of the model's file that holds
 * it, *offset its byte offset there; returns false (and *file 0) for data in
 * none of the mappings. With the file identity below, a weight's key in a
 * pack cache. */
bool inf_model_locate(const inf_model_file *m, const inf_tensor *t, int *file, uint64_t *offset);

/* The identity of m's files as text, one line per file: its real path, size,
 * device, inode and modification time (ns) when it was mapped. A pack cache
 * built from these files is valid while this text is the same. *bytes gets
 * the files' total size. Returns the length, or -1 when cap is too small or a
 * path cannot be resolved. */
int inf_model_file_ident(const inf_model_file *m, char *buf, size_t cap, size_t *bytes);

/* The file's own metadata by key: a GGUF key ("qwen3moe.expert_count") or a
 * top-level config.json field ("num_experts"), whichever the format holds.
 * Each returns 1 and sets *out when the key is there, 0 when it is absent
 * (or JSON null), -1 with a message naming the key when it has another type.
 * inf_model_meta_ints fills at most cap integers of an array and sets *n to
 * its length (an array longer than cap is an error); inf_model_meta_strs the
 * same for an array of strings (config.json only; borrowed, valid while m is
 * open). A config.json key "a.b" names field b of object a. */
int inf_model_meta_int(const inf_model_file *m, const char *key, int64_t *out, inf_err *err);
int inf_model_meta_float(const inf_model_file *m, const char *key, double *out, inf_err *err);
int inf_model_meta_bool(const inf_model_file *m, const char *key, bool *out, inf_err *err);
int inf_model_meta_ints(const inf_model_file *m, const char *key, int64_t *out, int cap, int *n,
                        inf_err *err);
int inf_model_meta_strs(const inf_model_file *m, const char *key, const char **out, int cap, int *n,
                        inf_err *err);

#endif
