/* What the tokenizer's files share; not part of the public API. */
#ifndef INF_TOKENIZER_TOK_INTERNAL_H
#define INF_TOKENIZER_TOK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/tokenizer.h"

/* One merge: the pair (left, right) of token ids becomes `merged`. */
typedef struct tok_pair {
    uint64_t key;   /* (uint64)left << 32 | right; TOK_PAIR_EMPTY when free */
    int32_t rank;   /* position in the merge list: lower merges first */
    int32_t merged; /* id of the joined token */
} tok_pair;
#define TOK_PAIR_EMPTY UINT64_MAX

/* Word cache: pre-token bytes -> ids, shared by all callers under `mu`. */
typedef struct tok_cache {
    pthread_mutex_t mu;
    struct tok_cache_slot {
        uint64_t hash;   /* 0 = empty */
        uint32_t word;   /* offset in words */
        uint32_t ids;    /* offset in id_pool */
        uint16_t n_word; /* bytes */
        uint16_t n_ids;
    } * slots;        /* [TOK_CACHE_SLOTS] */
    char *words;      /* [TOK_CACHE_WORD_BYTES] */
    int32_t *id_pool; /* [TOK_CACHE_IDS] */
    uint32_t n_used, words_used, ids_used;
} tok_cache;
#define TOK_CACHE_SLOTS (1u << 15)
#define TOK_CACHE_WORD_BYTES (1u << 19)
#define TOK_CACHE_IDS (1u << 18)
#define TOK_CACHE_MAX_WORD 256 /* longer pre-tokens are not cached */

struct inf_tokenizer {
    int n_vocab;
    char **text;         /* [n_vocab] vocabulary text (printable form) */
    int32_t *type;       /* [n_vocab] INF_TOKEN_* */
    uint32_t *bytes_off; /* [n_vocab + 1] token id -> its raw bytes in bytes_buf */
    char *bytes_buf;     /* every token's raw bytes, each followed by a NUL */
    size_t max_bytes;    /* longest token in bytes */

    int32_t *text_map; /* [text_mask + 1] open addressing: id or -1 */
    uint32_t text_mask;

    int32_t byte_id[256]; /* byte -> the id of its single-byte token */

    tok_pair *pairs; /* [pair_mask + 1] open addressing */
    uint32_t pair_mask;

    /* Added tokens (control and user-defined) for the first split, sorted by
     * first byte, then longest first; by_byte[b]..by_byte[b+1] is the range
     * that starts with byte b. */
    int n_added;
    int32_t *added; /* [n_added] ids */
    uint32_t by_byte[257];

    bool nfc;
    pcre2_code *re;

    int32_t bos, eos, eot;
    bool add_bos;
    int32_t add_eos; /* appended token, -1: none */
    int32_t eog[4];  /* end-of-generation ids, -1 padded */

    tok_cache cache;
};

/* GPT-2's byte-level map: byte -> code point of its printable stand-in. */
uint32_t tok_byte_to_cp(unsigned char b);
/* Inverse; -1 when cp stands for no byte. */
int tok_cp_to_byte(uint32_t cp);

/* Decodes one UTF-8 code point at s (known valid); returns its length. */
int tok_utf8_next(const unsigned char *s, uint32_t *cp);
/* Encodes cp; returns bytes written (1..4). */

/* BPE of one pre-token's raw bytes -> ids appended to out (grown as needed). */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
int tok_ids_push(tok_ids *a, const int32_t *ids, size_t n);
int tok_bpe_word(const inf_tokenizer *t, const unsigned char *w, size_t n, tok_ids *out);

/* Pair table lookup: rank (or -1) and merged id of (left, right). */
static inline uint32_t tok_pair_hash(uint64_t key) {
    key ^= key >> 29;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 32;
    return (uint32_t)key;
}
static inline const tok_pair *tok_pair_find(const inf_tokenizer *t, int32_t l, int32_t r) {
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    for (uint32_t i = tok_pair_hash(key) & t->pair_mask;; i = (i + 1) & t->pair_mask) {
        const tok_pair *p = &t->pairs[i];
        if (p->key == key) return p;
        if (p->key == TOK_PAIR_EMPTY) return NULL;
    }
}

#endif
