#include "tokenizer/pretok.h"

#include <stddef.h>
#include <string.h>

/* The patterns as the models' tokenizer.json files state them. "qwen2" is the
 * one Qwen2, Qwen2.5 and Qwen3 ship: contractions in any case, letters with at
 * most one leading non-letter, single digits, punctuation runs, newlines, and
 * whitespace that leaves its last space to the following word. "qwen35" is
 * Qwen3.5's and Qwen3.6's (vocabulary of 248,320; llama.cpp's name): the same
 * with combining marks (\p{M}) in the letter runs and out of the punctuation
 * runs, so a Devanagari or Thai word with its vowel signs, or a letter with
 * accents NFC has no precomposed form for, stays one piece where qwen2 cuts
 * the marks off. Both normalize to NFC first (tokenizer.json's normalizer). */
static const tok_pre_info pre_table[] = {
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     true},
    {"qwen35",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
     "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     true},
    {"gpt2", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
     false},
};

const tok_pre_info *tok_pre_by_name(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++)
        if (!strcmp(pre_table[i].name, name)) return &pre_table[i];
    return NULL;
}

const tok_pre_info *tok_pre_by_regex(const char *regex) {
    if (!regex) return NULL;
    for (size_t i = 0; i < sizeof pre_table / sizeof pre_table[0]; i++)
        if (!strcmp(pre_table[i].regex, regex)) return &pre_table[i];
    return NULL;
}
