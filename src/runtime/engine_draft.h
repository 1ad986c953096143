/* The draft model of speculative decoding (`-md FILE`): a second, smaller
 * model of the same vocabulary, run on the engine's backend with a basic
 * cache per slot, and driven by runtime/spec.c through an inf_exec of its
 * own (forward and the seq_* calls only). */
#ifndef INF_RUNTIME_ENGINE_DRAFT_H
#define INF_RUNTIME_ENGINE_DRAFT_H

#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/exec.h"
#include "util/err.h"

/* An exec batch through a model over its caches, then the rows' tokens
 * committed to them: the forward of the engine's table and the draft's. */
int inf_exec_forward_kv(inf_model *m, inf_kv_cache *kv, const inf_exec_batch *b, float *logits,
                        inf_err *err);
/* Keeps positions 0..n-1 of seq (the tables' seq_truncate): the caches cut
 * back, and with recurrent layers the model redoes the rows from the mark
 * to n. */
void inf_exec_truncate_kv(inf_model *m, inf_kv_cache *kv, int seq, int n);
/* The layout of m's caches; with spec, recurrent layers keep rewind logs
 * long enough for a speculative step (INF_SPEC_MAX_DRAFT + 1 rows). */
inf_kv_layout inf_exec_kv_layout(const inf_hparams *hp, bool spec);

typedef struct inf_draft {
    inf_model_file *mf;
    inf_model *model;
    inf_kv_cache *kv;
    inf_exec ex;
    char name[128];
} inf_draft;

/* Opens path for n_seq slots of n_ctx positions and batches of max_rows
 * rows on be, K/V in kv's types. It must share target's vocabulary (size
 * and every token's text); its recurrent layers, if any, keep rewind logs.
 * 0 or -1 with a message naming the file and what does not match. */
int inf_draft_open(inf_draft **out, const char *path, const inf_backend *be,
                   const inf_model_file *target, int n_seq, int n_ctx, int max_rows,
                   const inf_kv_opts *kv, inf_err *err);
void inf_draft_close(inf_draft *d); /* NULL: a no-op */

#endif
