/* What speculative decoding is asked to do (runtime/spec.h does it): the
 * drafter an engine was opened with, and the knobs a request may set. */
#ifndef INF_RUNTIME_SPEC_PARAMS_H
#define INF_RUNTIME_SPEC_PARAMS_H

#include "util/err.h"

#define INF_SPEC_MAX_DRAFT 64 /* tokens drafted per step: the most a request may ask */

typedef enum inf_spec_kind { INF_SPEC_NONE, INF_SPEC_NGRAM, INF_SPEC_DRAFT } inf_spec_kind;

/* "none", "ngram" or "draft". */
const char *inf_spec_kind_name(inf_spec_kind k);

typedef struct inf_spec_params {
    int n_max; /* --draft-max: tokens drafted per step (16, llama.cpp's); 0: plain decoding */
    int n_min; /* --draft-min: a step with fewer drafts decodes plainly (0) */
    float
        p_min; /* --draft-p-min: the draft model stops where its likeliest token has less (0.75) */
} inf_spec_params;

/* llama.cpp's defaults (above). */
inf_spec_params inf_spec_defaults(void);

/* n_max in 0..INF_SPEC_MAX_DRAFT, n_min in 0..n_max, p_min in [0, 1].
 * Returns 0, or -1 naming the flag (prefix: "--draft-max" style names). */
int inf_spec_check(const inf_spec_params *p, inf_err *err);

#endif
