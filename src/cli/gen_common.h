/* What `inferno run` and `inferno chat` share: their flags (llama.cpp's names
 * and defaults), loading a model with its tokenizer into a session, the
 * streaming printer, the timing summary and the --dump-logits writer. */
#ifndef INF_CLI_GEN_COMMON_H
#define INF_CLI_GEN_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend/backend.h"
#include "model/qwen3.h"
#include "modelfile/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

typedef struct gen_args {
    const char *model;       /* -m; INF_DEFAULT_MODEL when absent */
    const char *prompt;      /* -p */
    const char *system;      /* -sys */
    const char *dump_logits; /* --dump-logits FILE.npy */
    const char *token_ids;   /* --token-ids 1,2,3: the prompt as ids (oracle checks) */
    const char *backend;     /* --backend (scalar: the oracle checks compare its logits at 1e-4) */
    const char *isa;         /* --isa: force a lower SIMD level (NULL: INFERNO_ISA or the best) */
    bool trace;              /* --trace: per-op histogram after the run */
    int n_predict;           /* -n; -1: until end of generation or a full context */
    int n_ctx;               /* -c; 0: min(4096, the model's training context) */
    int n_threads;           /* -t: pool threads (0: the physical cores we may use) */
    int n_batch;             /* -b: rows per forward call in a prefill */
    bool raw;                /* --raw: no chat template */
    bool no_think;           /* --no-think: enable_thinking=false */
    bool ignore_eos;         /* --ignore-eos */
    bool verbose_prompt;     /* --verbose-prompt: print the prompt's token ids to stderr */
    inf_sampler_params sp;
    inf_kv_opts kv;          /* --kv basic|paged, --kv-block N, --cache-mem SIZE */
} gen_args;

/* Parses argv (argv[0] is the command name). Prints one line and returns -1
 * on a bad flag or value, 1 after printing --help, 0 otherwise. */
int gen_args_parse(gen_args *a, int argc, char **argv, const char *cmd, bool want_prompt);

/* Everything a generating command holds. */
typedef struct gen_ctx {
    inf_model_file *mf;
    inf_tokenizer *tok;
    inf_backend be;          /* a copy of *be_owned */
    inf_backend *be_owned;   /* from inf_backend_create */
    inf_qwen3 *model;
    inf_session *session;
    inf_detok *detok;
    double t_load_s;
    FILE *dump;     /* --dump-logits */
    int dump_rows;
    int n_vocab;
} gen_ctx;

/* Opens the model and builds tokenizer, model and session. Returns 0 or -1
 * with the message in err. */
int gen_ctx_open(gen_ctx *g, const gen_args *a, inf_err *err);
void gen_ctx_close(gen_ctx *g);

/* Renders messages (JSON array) with the model's chat template and
 * add_generation_prompt, then tokenizes the result. *ids is malloc'd. */
int gen_render_chat(gen_ctx *g, const gen_args *a, const void *messages_json, int32_t **ids,
                    int *n_ids, inf_err *err);

/* Tokenizes text as is (special tokens parsed; BOS added when the model asks). */
int gen_tokenize_raw(gen_ctx *g, const char *text, int32_t **ids, int *n_ids, inf_err *err);

/* Options for inf_session_generate that stream text to stdout through the
 * detokenizer (and append it to *capture when not NULL), write --dump-logits
 * rows, and stop at the tokenizer's end-of-generation tokens. */
typedef struct gen_stream {
    gen_ctx *g;
    char **capture;
    size_t capture_len, capture_cap;
} gen_stream;
inf_gen_opts gen_stream_opts(gen_stream *st, const gen_args *a);
/* Prints what the detokenizer still holds. */
void gen_stream_finish(gen_stream *st);

/* The llama.cpp-style timing summary on stderr. */
void gen_print_timings(const gen_ctx *g, inf_stop_reason why);

/* Finishes the .npy file (writes its final header). Returns 0 or -1. */
int gen_dump_close(gen_ctx *g, inf_err *err);

#endif
