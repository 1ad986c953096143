/* RoPE tables: cos and sin of every (position, frequency) pair, computed once. */
#ifndef INF_MODEL_ROPE_H
#define INF_MODEL_ROPE_H

/* Fills cos_tab and sin_tab, each [n_ctx][head_dim/2]: entry (p, i) is the
 * cos/sin of p * theta^(-2i/head_dim), computed in double and rounded once. */
void inf_rope_tables(float *cos_tab, float *sin_tab, int n_ctx, int head_dim, double theta);

#endif
