/* Speculative decoding's flags, llama.cpp's names, shared by run, chat,
 * serve and bench: -md/--model-draft FILE, --spec ngram|draft|none,
 * --draft-max N (--draft, --draft-n), --draft-min N (--draft-n-min),
 * --draft-p-min P. */
#ifndef INF_CLI_SPEC_FLAGS_H
#define INF_CLI_SPEC_FLAGS_H

#include <stdbool.h>

#include "runtime/engine.h"

typedef struct spec_flags {
    const char *draft; /* -md: the draft model */
    inf_spec_kind kind;
    inf_spec_params p;
} spec_flags;

#define SPEC_FLAGS_USAGE                                                                           \
    "  -md, --model-draft PATH   speculative decoding with this draft model (same tokenizer)\n"    \
    "  --spec ngram|draft|none   the drafter: n-gram lookup in the sequence itself (no model),\n"  \
    "                            the draft model (-md), or none (default: draft with -md)\n"       \
    "  --draft-max N             tokens drafted per step (16)\n"                                   \
    "  --draft-min N             a step with fewer drafts decodes plainly (0)\n"                   \
    "  --draft-p-min P           the draft model stops below this probability (0.75)\n"

/* llama.cpp's defaults, no drafter. */
spec_flags spec_flags_defaults(void);

/* Whether flag f is one of these (each takes a value). */
bool spec_flag_is(const char *f);

/* Applies flag f with value v; prints a line naming the flag and returns
 * -1 on a bad value, else 0. */
int spec_flag_set(spec_flags *s, const char *cmd, const char *f, const char *v);

/* The flags together (--draft-min within --draft-max, ...); prints and
 * returns -1 when they do not fit. */
int spec_flags_check(const spec_flags *s, const char *cmd);

/* Into the engine's options. */
void spec_flags_apply(const spec_flags *s, inf_engine_opts *o);

#endif
