/* The vocabulary in neutral form: what a tokenizer is built from.
 *
 * The model file readers (modelfile/) fill it from GGUF metadata or a
 * tokenizer.json; the tokenizer (tokenizer.h) is built from it, so neither
 * needs the other's format. */
#ifndef INF_TOKENIZER_VOCAB_H
#define INF_TOKENIZER_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

/* Token types as GGUF's tokenizer.ggml.token_type numbers them. */
enum {
    INF_TOKEN_NORMAL = 1,
    INF_TOKEN_UNKNOWN = 2,
    INF_TOKEN_CONTROL = 3,
    INF_TOKEN_USER_DEFINED = 4,
    INF_TOKEN_UNUSED = 5,
    INF_TOKEN_BYTE = 6,
};

/* The tokenizer in neutral form. All strings are malloc'd and owned by the
 * holder (the model file, for a loaded model): NUL-terminated UTF-8; token
 * texts are in byte-level BPE's printable form, e.g. "Ġthe". */
typedef struct inf_vocab_desc {
    int n_tokens;
    char **tokens;       /* [n_tokens]; id = index */
    int32_t *token_type; /* [n_tokens] INF_TOKEN_* */
    int n_merges;
    char **merges;              /* [n_merges] "left right", rank = index */
    int bos_id, eos_id, pad_id; /* -1 when absent */
    int eot_id;                 /* end of turn (<|im_end|>), -1 when unknown */
    bool add_bos;
    /* The tokenizer appends a token after the text (GGUF add_eos_token: the
     * eos id; tokenizer.json's TemplateProcessing post-processor: its
     * trailing special token, <|endoftext|> in Qwen3-Embedding). */
    bool add_eos;
    int add_eos_id;      /* when add_eos */
    char *model;         /* "gpt2" (byte-level BPE) */
    char *pre;           /* pre-tokenizer name, e.g. "qwen2" */
    char *pretok_regex;  /* the split regex when the file states it (tokenizer.json), else NULL */
    bool nfc;            /* normalize text to NFC before splitting (tokenizer.json's
                            normalizer); GGUF readers leave it false and the
                            tokenizer decides from `pre` */
    char *chat_template; /* Jinja source, or NULL */
} inf_vocab_desc;

/* Frees every string and array of v (each malloc'd) and resets it to empty. */
void inf_vocab_desc_free(inf_vocab_desc *v);

#endif
