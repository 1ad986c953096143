/* Speculative decoding: drafts for the generating slots, and the rule that
 * keeps the output exact.
 *
 * A drafter proposes tokens likely to follow a slot's sequence: n-gram
 * lookup in the sequence itself (the latest earlier place where its last
 * tokens occur, and what followed them there: `--spec ngram`), or a small
 * model of the same vocabulary (`-md`) run on caches of its own over the same
 * tokens. The scheduler feeds the slot's pending token and the drafts to the
 * model as decode rows of one forward call (inf_exec_batch.decode: each row
 * has the bits of the decode step it stands for, and every weight is read
 * once for all of them), then walks their logits in order: the request's own
 * sampler picks from row i exactly as it would have without speculation, and
 * the walk goes on while the pick equals draft i. So greedy output, and
 * sampled output at a given seed, are token for token what plain decoding
 * gives.
 *
 * A draft model under sampling (temperature > 0, no grammar) proposes from
 * its own distribution q instead; the target takes draft x with probability
 * min(1, p(x)/q(x)) and otherwise draws from max(0, p - q) renormalized
 * (Leviathan et al. 2023; Chen et al. 2023), where p is the distribution the
 * request's sampler draws from (penalties, top-k, top-p, min-p, temperature).
 * Every output token is then distributed as p exactly, and more drafts are
 * taken than by picking and comparing; the seed makes it reproducible.
 *
 * The rows past the first refusal leave the caches again (seq_truncate; a
 * model whose recurrent layers keep a state, the Qwen3.5 hybrids, goes back
 * to the step's mark and redoes the rows kept: exec.h's seq_mark).
 * Everything here runs on the scheduler thread. */
#ifndef INF_RUNTIME_SPEC_H
#define INF_RUNTIME_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/exec.h"
#include "runtime/spec_params.h"
#include "util/err.h"

#define INF_SPEC_NGRAM_MAX 4 /* the longest suffix n-gram looked up */
#define INF_SPEC_NGRAM_MIN 2 /* the shortest */

typedef struct inf_spec inf_spec;

/* The drafting state of target's slots (target->spec_kind: the drafter;
 * target->draft: the draft model's table for INF_SPEC_DRAFT). 0 or -1 with
 * a message (out of memory). Free with inf_spec_free (NULL: a no-op). */
int inf_spec_create(inf_spec **out, const inf_exec *target, inf_err *err);
void inf_spec_free(inf_spec *sp);

/* A request starts on slot with prompt[0..n). sampling: its sampler's
 * parameters (a concrete seed); stochastic: the draft model proposes by
 * sampling and inf_spec_judge decides (else drafts are greedy and the
 * scheduler compares). -1 when out of memory (the request then decodes
 * plainly). */
int inf_spec_begin(inf_spec *sp, int slot, const int32_t *prompt, int n,
                   const inf_sampler_params *sampling, bool stochastic);

/* A generated token entered slot's sequence (it is the one the target's
 * cache does not hold yet). */
void inf_spec_push(inf_spec *sp, int slot, int32_t token);

/* Up to max tokens to follow slot's sequence, in *drafts (valid until the
 * next call for the slot); returns how many (fewer than p->n_min: 0). The
 * draft model runs here, over what of the sequence its cache lacks. */
int inf_spec_propose(inf_spec *sp, int slot, const inf_spec_params *p, int max,
                     const int32_t **drafts);

/* The token the target emits at draft i of a stochastic slot, from its row's
 * logits (bias applied) and its sampler smpl: draft i itself with
 * probability min(1, p/q), else a draw from max(0, p - q). */
int32_t inf_spec_judge(inf_spec *sp, int slot, int i, void *smpl, const float *logits);

/* The target's cache of slot holds n positions of its sequence (the
 * refused rows left), taken of the step's drafts were taken: the draft
 * model's cache forgets what goes past them, and the next step drafts at
 * most taken + 1 after a refusal, twice as many as this one's after none
 * (up to n_max): long drafts only while they keep being taken. */
void inf_spec_kept(inf_spec *sp, int slot, int n, int taken);

/* The request on slot ended. */
void inf_spec_end(inf_spec *sp, int slot);

#endif
