/* The engine: one model opened for generation, used alike by `run`, `chat`,
 * `bench` and `serve`. inf_engine_open takes a model path (a GGUF file or a
 * Hugging Face folder) and assembles, once and in one place: the model file,
 * the backend, the architecture's weights on it, the tokenizer, the chat
 * template, the KV caches of every slot (basic, or paged with the radix
 * prefix cache) and the scheduler that batches the slots' requests.
 *
 * Programs turn their input into a prompt (inf_engine_tokenize, or
 * inf_engine_chat_prompt through the model's chat template), submit it as a
 * task with inf_gen_params, and read the task's text as it is released
 * (inf_task_wait). The same prompt, parameters and seed give the same tokens
 * in every program. */
#ifndef INF_RUNTIME_ENGINE_H
#define INF_RUNTIME_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/select.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "modelfile/model.h"
#include "runtime/engine_draft.h"
#include "runtime/engine_pack.h"
#include "runtime/exec.h"
#include "runtime/sched.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"

typedef struct inf_engine_opts {
    const char *model_path;
    inf_backend_opts backend; /* name NULL: pool */
    int n_seq;                /* slots (requests generated at once); 0: 1 */
    int n_ctx;                /* positions per slot; 0: the model's training context, or what
                                 the memory left after the weights holds (see note) */
    int n_batch;              /* prompt rows per step; 0: 512 */
    inf_kv_opts kv;
    inf_pack_mode pack;   /* packed weights in a pack cache file: auto (0), on, off */
    const char *pack_dir; /* where pack caches live; NULL: the default (engine_pack.h) */
    /* Speculative decoding (runtime/spec.h): the drafter, INF_SPEC_DRAFT
     * with draft_path (-md; a draft path alone means it), and the knobs a
     * request gets by default (inf_spec_defaults: llama.cpp's). */
    inf_spec_kind spec_kind;
    const char *draft_path;
    inf_spec_params spec;
} inf_engine_opts;

/* Read-only for programs; the scheduler thread owns model and caches. */
typedef struct inf_engine {
    inf_model_file *mf;
    inf_tokenizer *tok;
    inf_backend *be; /* owned */
    inf_model *model;
    inf_kv_cache *kv;
    float *logits; /* [n_seq][n_vocab] the scheduler's forward output */
    inf_exec ex;   /* the scheduler's view of all of the above */
    inf_sched *sched;
    inf_draft *draft; /* -md: the draft model, or NULL */
    int n_batch;
    double t_load_s; /* seconds inf_engine_open took */
    char name[128];
    char backend_name[64];
    char note[320];       /* "" or why the context is shorter than the model's (for stderr) */
    char pack_note[1024]; /* "" or what the pack cache did (for stderr) */
} inf_engine;

/* Opens o->model_path and starts the scheduler. Returns 0, or -1 with a
 * message naming what failed (file, architecture, sizes, memory). Close with
 * inf_engine_close (NULL is a no-op): running tasks end UNAVAILABLE. */
int inf_engine_open(inf_engine **out, const inf_engine_opts *o, inf_err *err);
void inf_engine_close(inf_engine *e);

/* Text -> ids (malloc'd), with the model's one BOS rule: BOS first when the
 * tokenizer asks for it and the text does not already start with it.
 * parse_special: special-token texts become their ids. */
int inf_engine_tokenize(const inf_engine *e, const char *text, size_t n, bool parse_special,
                        int32_t **ids, int *n_ids, inf_err *err);

/* The model's chat template over in, with the generation prompt (malloc'd). */
int inf_engine_render(const inf_engine *e, const inf_chat_input *in, char **out, inf_err *err);

/* render + tokenize (special tokens parsed). *in_think: the prompt ends
 * inside an open <think> (the reply starts with reasoning). *text, when not
 * NULL, receives the rendered prompt (malloc'd). */
int inf_engine_chat_prompt(const inf_engine *e, const inf_chat_input *in, int32_t **ids, int *n_ids,
                           bool *in_think, char **text, inf_err *err);

/* Queues prompt[0..n) (ownership taken, freed on failure too) as a task and
 * returns it holding one reference for the caller (inf_task_release), or
 * NULL with a message (empty prompt, no room in the context, shutting
 * down, out of memory). */
inf_task *inf_engine_submit(inf_engine *e, int32_t *prompt, int n, const inf_gen_params *p,
                            inf_err *err);

/* Runs a task to its end, passing each piece of released text to on_text
 * (NULL: not called); returns 0, or -1 with the task's error. The task is
 * not released. */
int inf_engine_wait(inf_engine *e, inf_task *t, void (*on_text)(void *ud, const char *s, size_t n),
                    void *ud, inf_err *err);

#endif
