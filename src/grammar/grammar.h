/* Constrained decoding: a grammar over bytes, and the set of tokens of a
 * vocabulary that keep the output a prefix of its language.
 *
 * A grammar is written in llama.cpp's GBNF (rules `name ::= ...`,
 * alternatives `|`, groups `( )`, `? * +`, `{m}` `{m,}` `{m,n}`, literals
 * "..." and character classes [...] / [^...] with llama.cpp's escapes, `.`
 * for any character, `#` comments) and compiled once per request
 * (inf_gram_compile) into rules of elements; repetitions become rules.
 * JSON Schema compiles to GBNF text first (json_schema.c), so both share
 * one compiler.
 *
 * A matcher (inf_gram_matcher) is the parse state of one output: a set of
 * pushdown stacks of rule positions, as in llama.cpp, over Unicode code
 * points, with a partly read UTF-8 character held beside the stacks so a
 * token may end (or start) inside a character. A token is checked by its
 * bytes, so one token may cross several terminals and rules. The state set
 * is bounded (INF_GRAM_MAX_STACKS stacks of INF_GRAM_MAX_DEPTH positions,
 * and a work budget per step): a hostile grammar fails the request with a
 * message instead of exploding. Left recursion is refused at compile time;
 * a repeated item that can match "" is not left recursion: x* compiles as
 * (x less "")*, the same language.
 *
 * Speed (llama.cpp's trick): the scheduler samples as usual and asks only
 * whether the sampled token is allowed (inf_gram_matcher_allows, a walk over
 * its few bytes); only when it is not does it take the full mask
 * (inf_gram_matcher_mask), a walk over a byte trie of the vocabulary
 * (inf_gram_vocab, built once per model) that shares the work of tokens
 * with a common prefix and stops at the first dead byte. Parse states are
 * interned per matcher and their byte transitions memoized, so once the
 * states near the output are known a walk costs a table lookup per trie
 * node (a bounded string, where every length is its own state, included).
 * Masks are cached per parse state, so a state that recurs (inside a
 * string, between digits) costs one walk per request.
 *
 * Threads: an inf_gram and an inf_gram_vocab are immutable once built and
 * may be shared; a matcher belongs to one thread. */
#ifndef INF_GRAMMAR_GRAMMAR_H
#define INF_GRAMMAR_GRAMMAR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define INF_GRAM_MAX_STACKS 128   /* parse stacks alive at once */
#define INF_GRAM_MAX_DEPTH 1024   /* positions on one stack (nesting) */
#define INF_GRAM_MAX_ELEMS 400000 /* compiled elements of one grammar */
#define INF_GRAM_MAX_REPEAT 10000 /* m and n of {m,n} */

typedef struct inf_gram inf_gram;

/* Compiles GBNF text[0..n) with start rule `root` (NULL: "root"). Returns 0,
 * or -1 with a message naming the line and column. Free with inf_gram_free
 * (NULL is a no-op). */
int inf_gram_compile(inf_gram **out, const char *text, size_t n, const char *root, inf_err *err);
void inf_gram_free(inf_gram *g);

/* JSON Schema (the subset real clients send: see json_schema.c) -> GBNF text
 * (malloc'd *gbnf). An unsupported keyword is an error naming it, never an
 * unconstrained output. */
int inf_json_schema_to_gbnf(const json_t *schema, char **gbnf, inf_err *err);
/* The same, compiled. */
int inf_gram_from_json_schema(inf_gram **out, const json_t *schema, inf_err *err);
/* Any JSON object (response_format json_object). */
int inf_gram_json_object(inf_gram **out, inf_err *err);

/* A forced tool call in Qwen3's format (what tool_choice "required" or a
 * named function needs):
 *     <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 * NAME one of the functions in tools (only that one when `only` is not NULL),
 * ARGS following that function's parameters schema (any object when it has
 * none); with `several`, one or more calls separated by a newline. tools is
 * an array of OpenAI chat tools ({type: "function", function: {name,
 * parameters}}), Responses API tools ({type, name, parameters}) or Anthropic
 * tools ({name, input_schema}). Errors name the tool (tools[i] 'name') and
 * the schema keyword, or the missing function. */
int inf_tool_calls_to_gbnf(const json_t *tools, const char *only, bool several, char **gbnf,
                           inf_err *err);
int inf_gram_tool_calls(inf_gram **out, const json_t *tools, const char *only, bool several,
                        inf_err *err);

/* What a token is to a grammar. */
typedef enum inf_gram_tok_kind {
    INF_GRAM_TOK_TEXT,  /* its bytes are output text */
    INF_GRAM_TOK_EOG,   /* ends generation: allowed where the grammar may end */
    INF_GRAM_TOK_NEVER, /* control/unused tokens: never allowed */
} inf_gram_tok_kind;

typedef struct inf_gram_vocab inf_gram_vocab;

/* The vocabulary's token bytes (piece) and kinds (kind), as a byte trie.
 * Both functions are called once per token here and never after. */
int inf_gram_vocab_create(inf_gram_vocab **out, int n_vocab,
                          int (*piece)(void *ud, int32_t id, char *buf, int cap),
                          inf_gram_tok_kind (*kind)(void *ud, int32_t id), void *ud, inf_err *err);
void inf_gram_vocab_free(inf_gram_vocab *v);
int inf_gram_vocab_size(const inf_gram_vocab *v);

typedef struct inf_gram_matcher inf_gram_matcher;

/* A matcher at the start of g's language over v (both borrowed: they must
 * outlive it). -1 + err when out of memory or the grammar's start state
 * breaks a bound. */
int inf_gram_matcher_create(inf_gram_matcher **out, const inf_gram *g, const inf_gram_vocab *v,
                            inf_err *err);
void inf_gram_matcher_free(inf_gram_matcher *m);

/* Whether token id may come next (EOG tokens: where the grammar may end):
 * 1 yes, 0 no, -1 a bound was broken (inf_gram_matcher_error). */
int inf_gram_matcher_allows(inf_gram_matcher *m, int32_t id);
/* Takes token id (it must be allowed): 0, or -1 with the reason in
 * inf_gram_matcher_error (not allowed, or a bound was broken). */
int inf_gram_matcher_accept(inf_gram_matcher *m, int32_t id);
/* Feeds raw bytes (tests, forced text): 0, or -1 when they leave the
 * language (the state is unchanged then). */
int inf_gram_matcher_accept_bytes(inf_gram_matcher *m, const char *s, size_t n);
/* The allowed tokens as bits (bit i of word i/32 = token i), owned by m and
 * valid until the next call on m; NULL when a bound was broken (see
 * inf_gram_matcher_error). *n_allowed: how many bits are set. */
const uint32_t *inf_gram_matcher_mask(inf_gram_matcher *m, int *n_allowed);
/* The output so far is a whole sentence (an EOG token may come). */
bool inf_gram_matcher_can_end(const inf_gram_matcher *m);
/* The output is a whole sentence and nothing may follow it. */
bool inf_gram_matcher_done(const inf_gram_matcher *m);
/* Why the last call failed. */
const char *inf_gram_matcher_error(const inf_gram_matcher *m);
/* Counters: masks computed by a trie walk, masks served from the cache. */
void inf_gram_matcher_counts(const inf_gram_matcher *m, long *walks, long *cached);

#endif
