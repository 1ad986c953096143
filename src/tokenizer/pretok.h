/* Pre-tokenizer split patterns known by name.
 *
 * A GGUF file names its pre-tokenizer (tokenizer.ggml.pre = "qwen2") but does
 * not carry the regex; tokenizer.json carries the regex itself. This table
 * joins the two: name -> pattern for GGUF, pattern -> name for writing GGUF. */
#ifndef INF_TOKENIZER_PRETOK_H
#define INF_TOKENIZER_PRETOK_H

#include <stdbool.h>

typedef struct tok_pre_info {
    const char *name;  /* "qwen2" */
    const char *regex; /* the split pattern, in the syntax tokenizer.json uses */
    bool nfc;          /* the models using it normalize input to NFC first */
} tok_pre_info;

/* The entry for a pre-tokenizer name; NULL when unknown. */
const tok_pre_info *tok_pre_by_name(const char *name);

/* The entry whose pattern is exactly `regex`; NULL when none. */
const tok_pre_info *tok_pre_by_regex(const char *regex);

#endif
