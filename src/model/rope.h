/* RoPE tables: cos and sin of every (position, frequency) pair, computed once
 * (as far as the positions a model has reached: inf_model_forward). */
#ifndef INF_MODEL_ROPE_H
#define INF_MODEL_ROPE_H

#include "modelfile/model.h"

/* Fills positions [from, to) of cos_tab and sin_tab, each [n_ctx][head_dim/2],
 * computed in double and rounded once (an entry's bits do not depend on the
 * range it was filled in). Entry (p, i) is the cos/sin of p * inv_freq[i], times
 * hp->rope_attn_factor (1 without scaling). inv_freq[i] = theta^(-2i/d)
 * (d = head_dim), or with YaRN (hp->yarn_factor > 0), as transformers'
 * _compute_yarn_parameters and llama.cpp's rope_yarn compute it: the
 * interpolated inv_freq / factor below the correction range of dims found
 * from beta_fast/beta_slow rotations over the original context, the
 * original inv_freq above it, a linear ramp between. */
void inf_rope_fill(float *cos_tab, float *sin_tab, int from, int to, int head_dim,
                   const inf_hparams *hp);

#endif
