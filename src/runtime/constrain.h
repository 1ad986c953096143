/* A request's grammar as the scheduler applies it, token by token: sample
 * as usual and check only the sampled token; only when the grammar refuses
 * it build the mask of allowed tokens (cached per grammar state) and sample
 * again from the masked logits. With thinking, the grammar starts after the
 * model's </think>. Everything here runs on the scheduler thread. */
#ifndef INF_RUNTIME_CONSTRAIN_H
#define INF_RUNTIME_CONSTRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/grammar.h"
#include "runtime/exec.h"
#include "runtime/sched.h"

typedef enum {
    CONSTRAIN_OFF,        /* no grammar */
    CONSTRAIN_WAIT_THINK, /* free until the model writes </think> */
    CONSTRAIN_MAY_THINK,  /* the first token may open <think>; else constrained */
    CONSTRAIN_ON,
} constrain_state;

typedef struct inf_constraint {
    constrain_state state;
    inf_gram_matcher *gm; /* the grammar's parse state (NULL until the first token) */
    bool applied;         /* the last token was constrained */
    char think_tail[8];   /* the last bytes written while waiting for </think> */
    int n_think_tail;
} inf_constraint;

/* Starts c for grammar g (NULL: no constraint) with its start rule. */
void inf_constraint_begin(inf_constraint *c, const inf_gram *g, inf_gram_start start);
/* Frees the parse state; c is off afterwards. */
void inf_constraint_end(inf_constraint *c);

/* Draws a token from logits (which it may modify). */
typedef int32_t (*inf_sample_fn)(void *ud, float *logits);

/* The next token of a request under c: sample(ud, logits) draws one, and
 * when the grammar refuses it, a second draw from raw[0..n_vocab) (a copy
 * of the logits made before the first draw) with the refused tokens masked
 * out. *vocab is the vocabulary's byte trie, built at the first use. Adds
 * the grammar's time and mask counts to tm. Returns the token, or -1 with
 * *status and *msg (out of memory; a grammar bound broken; no token of the
 * vocabulary can continue). */
int32_t inf_constraint_pick(inf_constraint *c, const inf_gram *g, const inf_exec *e,
                            inf_gram_vocab **vocab, float *logits, float *raw, inf_sample_fn sample,
                            void *ud, inf_timings *tm, inf_task_status *status, const char **msg);

/* The last token ended a whole sentence that nothing may follow. */
bool inf_constraint_done(const inf_constraint *c);

#endif
