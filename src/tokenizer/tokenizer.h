/* The tokenizer: byte-level BPE as Qwen (and GPT-2 family) models use it.
 *
 * Built from the neutral inf_vocab_desc, so a GGUF file and a tokenizer.json
 * give the same tokenizer. Encoding follows Hugging Face tokenizers:
 *   1. added tokens are cut out of the raw text first (leftmost, then
 *      longest match); see parse_special below for which ones;
 *   2. each remaining piece is normalized (NFC when the model says so),
 *   3. split by the model's pre-tokenizer regex (PCRE2, UTF + UCP + JIT),
 *   4. mapped to byte-level symbols and merged by merge rank (lowest first,
 *      leftmost on ties).
 * No BOS is added: callers prepend inf_tok_bos() when inf_tok_add_bos() says
 * so (Qwen: never).
 *
 * A tokenizer is immutable after creation except for an internal word cache
 * guarded by a mutex: encode/decode may be called from several threads. */
#ifndef INF_TOKENIZER_TOKENIZER_H
#define INF_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/vocab.h"
#include "util/utf8.h"
#include "util/err.h"

typedef struct inf_tokenizer inf_tokenizer;

/* Builds a tokenizer from v (which is only read; the tokenizer keeps its own
 * copies). Fails with a message when the vocabulary is not byte-level BPE,
 * a merge names a token that does not exist, or the pre-tokenizer is unknown
 * (v->pretok_regex, else the regex registered for v->pre) or does not compile.
 * On success *out is owned by the caller: free with inf_tok_free. */
int inf_tok_create(inf_tokenizer **out, const inf_vocab_desc *v, inf_err *err);
void inf_tok_free(inf_tokenizer *t); /* NULL is a no-op */

/* Text (len bytes of UTF-8, NUL not required) -> token ids in *ids (malloc'd,
 * caller frees; NULL with *n_ids = 0 for empty text).
 *
 * parse_special = true: every added token (control and user-defined) found
 * in the text is emitted as its id. parse_special = false follows llama.cpp's
 * parse_special=false, which is Hugging Face's split_special_tokens=True:
 * control tokens (tokenizer.json "special": true, e.g. <|im_start|>) are
 * tokenized as plain text, while user-defined added tokens (special: false,
 * e.g. <think>, <tool_call>) are still matched as tokens — HF cuts added
 * tokens out before the pre-tokenizer and the flag only exempts the special
 * ones. Use it for untrusted text so that a user cannot inject turn markers.
 *
 * Invalid UTF-8 is refused: -1 with a message giving the byte offset. */
int inf_tok_encode(const inf_tokenizer *t, const char *text, size_t len, bool parse_special,
                   int32_t **ids, int *n_ids, inf_err *err);

/* One piece of a text as encoding cuts it, before BPE: `len` bytes of whole
 * UTF-8 characters (not NUL-terminated, valid only during the call), and
 * `added`: the id of an added token cut out of the text, or -1 for a
 * pre-token (a piece of the split). 0 goes on; anything else stops the walk. */
typedef int (*inf_tok_piece_fn)(void *ctx, const char *piece, size_t len, int32_t added);

/* Steps 1-3 of encoding (added tokens cut out as parse_special says, NFC when
 * the model says so, the pre-tokenizer's split) over text, calling fn with
 * each piece in order: the same walk inf_tok_encode merges piece by piece, so
 * a split can be checked against another regex engine. The pieces joined are
 * the normalized text. -1 with a message on invalid UTF-8, out of memory, a
 * regex failure, or when fn stops the walk (err must not be NULL). */
int inf_tok_pretokenize(const inf_tokenizer *t, const char *text, size_t len, bool parse_special,
                        inf_tok_piece_fn fn, void *ctx, inf_err *err);

/* ids -> the concatenation of their raw bytes in *out (malloc'd, caller frees,
 * NUL-terminated for convenience; *len excludes the NUL). Control tokens give
 * their text. The bytes may be invalid UTF-8 when the ids cut a character;
 * use the streaming detokenizer to print. -1 on an id out of range. */
int inf_tok_decode(const inf_tokenizer *t, const int32_t *ids, int n_ids, char **out, size_t *len,
                   inf_err *err);

/* The raw bytes of one token (byte-level form decoded; added tokens give their
 * text); NULL when id is out of range. The pointer lives as long as t; the
 * bytes are followed by a NUL, but may contain NULs: use *len. */
const char *inf_tok_token_bytes(const inf_tokenizer *t, int32_t id, size_t *len);

/* The token's text as the vocabulary stores it (byte-level printable form,
 * e.g. "Ġthe"); NULL when out of range. */
const char *inf_tok_token_text(const inf_tokenizer *t, int32_t id);

/* INF_TOKEN_* of id, or 0 when out of range. */
int inf_tok_token_type(const inf_tokenizer *t, int32_t id);

/* The id of the token whose vocabulary text is exactly `text` (e.g.
 * "<|im_start|>"), or -1. */
int32_t inf_tok_find(const inf_tokenizer *t, const char *text);

/* End of generation: eos, end of turn (<|im_end|>), <|endoftext|>. */
bool inf_tok_is_eog(const inf_tokenizer *t, int32_t id);

int inf_tok_n_vocab(const inf_tokenizer *t);
int32_t inf_tok_bos(const inf_tokenizer *t); /* -1 when none */
int32_t inf_tok_eos(const inf_tokenizer *t); /* -1 when none */
int32_t inf_tok_eot(const inf_tokenizer *t); /* -1 when none */
bool inf_tok_add_bos(const inf_tokenizer *t);
/* The token the tokenizer appends after a text (vocab.h add_eos), -1 when none. */
int32_t inf_tok_add_eos(const inf_tokenizer *t);
size_t inf_tok_max_token_bytes(const inf_tokenizer *t); /* longest token, in bytes */

/* inf_utf8_valid_prefix (util/utf8.h) checks text before encoding. */

/* ---- streaming detokenizer ----
 *
 * Feed ids one at a time; each call returns only complete UTF-8 text. A
 * multi-byte character cut across tokens (an emoji split in two) waits for
 * the next token and is never printed half. The output is always valid
 * UTF-8: a byte sequence that can no longer become a character becomes one
 * U+FFFD per maximal invalid subpart (as Python's errors="replace"), and an
 * incomplete tail still waiting at inf_detok_flush becomes one U+FFFD. */
typedef struct inf_detok inf_detok;

/* NULL when out of memory. t must outlive the detokenizer. */
inf_detok *inf_detok_create(const inf_tokenizer *t);
void inf_detok_free(inf_detok *d); /* NULL is a no-op */

/* Adds one token and returns the text it completes (*len bytes, possibly 0),
 * valid until the next call on d. An id out of range adds nothing. */
const char *inf_detok_push(inf_detok *d, int32_t id, size_t *len);

/* Ends the stream: returns what is still held (as U+FFFD) and resets d for a
 * new stream. */
const char *inf_detok_flush(inf_detok *d, size_t *len);

#endif
