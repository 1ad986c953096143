/* What `inferno run` and `inferno chat` share: their flags (llama.cpp's names
 * and defaults), opening the engine, the
 * streaming printer, the timing summary and the --dump-logits writer. */
#ifndef INF_CLI_GEN_COMMON_H
#define INF_CLI_GEN_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/spec_flags.h"
#include "kv/kv_cache.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"

typedef struct gen_args {
    const char *model;       /* -m; INF_DEFAULT_MODEL when absent */
    const char *prompt;      /* -p */
    const char *system;      /* -sys */
    const char *dump_logits; /* --dump-logits FILE.npy */
    const char *token_ids;   /* --token-ids 1,2,3: the prompt as ids (oracle checks) */
    const char *backend;     /* --backend (scalar: the oracle checks compare its logits at 1e-4) */
    const char *isa;         /* --isa: force a lower SIMD level (NULL: INFERNO_ISA or the best) */
    inf_pack_mode pack;      /* --pack-cache auto|on|off */
    const char *pack_dir;    /* --pack-cache-dir DIR (NULL: the default) */
    bool trace;              /* --trace: per-op histogram after the run */
    int n_predict;           /* -n; -1: until end of generation or a full context */
    int n_ctx;               /* -c; 0: the model's training context, or what fits in memory */
    int n_threads;           /* -t: pool threads (0: the physical cores we may use) */
    int n_batch;             /* -b: rows per forward call in a prefill */
    bool raw;                /* --raw: no chat template */
    bool no_think;           /* --no-think: enable_thinking=false */
    bool ignore_eos;         /* --ignore-eos */
    bool verbose_prompt;     /* --verbose-prompt: print the prompt's token ids to stderr */
    const char *grammar;     /* --grammar FILE: GBNF the output must follow */
    const char *json_schema; /* --json-schema FILE: a JSON Schema the output must follow */
    inf_sampler_params sp;
    unsigned sp_set; /* INF_REC_* flags given: the others take the model's defaults */
    inf_kv_opts kv;  /* --kv basic|paged, --kv-block N, --cache-mem SIZE */
    spec_flags spec; /* -md, --spec, --draft-max/-min/-p-min */
} gen_args;

/* Parses argv (argv[0] is the command name). Prints one line and returns -1
 * on a bad flag or value, 1 after printing --help, 0 otherwise. */
int gen_args_parse(gen_args *a, int argc, char **argv, const char *cmd, bool want_prompt);

/* Everything a generating command holds: the engine (one slot) and the
 * --dump-logits file. */
typedef struct gen_ctx {
    inf_engine *e;
    FILE *dump; /* --dump-logits */
    int dump_rows;
    int n_vocab;
    bool chat;     /* the last prompt came from the chat template */
    bool in_think; /* ... and ends inside <think> */
} gen_ctx;

/* Opens the model as a one-slot engine. Returns 0 or -1 with the message in
 * err. */
int gen_ctx_open(gen_ctx *g, const gen_args *a, inf_err *err);
void gen_ctx_close(gen_ctx *g);

/* The chat prompt of messages (JSON array) through the model's template,
 * with --no-think applied. *ids is malloc'd. */
int gen_chat_prompt(gen_ctx *g, const gen_args *a, const json_t *messages, int32_t **ids,
                    int *n_ids, inf_err *err);

/* The grammar --grammar or --json-schema give (NULL *out when neither);
 * 0 or -1 with a message naming the file. */
int gen_grammar(const gen_args *a, inf_gram **out, inf_err *err);

/* The generation parameters the flags give (and the --dump-logits writer);
 * no grammar (gen_generate adds it). */
inf_gen_params gen_params(gen_ctx *g, const gen_args *a);

/* Generates from prompt[0..n) (ownership taken): streams the text to stdout
 * (and appends it to *capture when capture is not NULL), then prints a
 * newline. Returns the ended task (release it), or NULL with err. */
inf_task *gen_generate(gen_ctx *g, const gen_args *a, int32_t *prompt, int n, char **capture,
                       inf_err *err);

/* The llama.cpp-style timing summary of an ended task on stderr. */
void gen_print_timings(const gen_ctx *g, const inf_task *t);

/* Finishes the .npy file (writes its final header). Returns 0 or -1. */
int gen_dump_close(gen_ctx *g, inf_err *err);

#endif
