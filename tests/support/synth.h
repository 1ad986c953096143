/* Synthetic Qwen3 test models: random weights from a fixed seed, written as
 * GGUF files and Hugging Face folders.
 *
 * Every weight is a pure function of (seed, tensor name, element index), so
 * the same tensor holds the same f32 values in every file, and a test can
 * recompute any part of any tensor without the file. The f32 values are the
 * source; every other type is a conversion of them (inf_quantize_row).
 *
 * Scales keep activations finite and non-degenerate through all layers:
 * matrices ~ N(0, 1/n_in) (variance-preserving), norm weights ~ 1 + N(0, 0.05²),
 * token embeddings ~ N(0, (2/sqrt(n_embd))²) so that the tied output head
 * gives logits with a spread of about 2.
 *
 * Hybrid presets (Qwen3.5: hp.ssm_n_v_heads > 0; GGUF "qwen35", HF "qwen3_5";
 * with experts GGUF "qwen35moe", HF "qwen3_5_moe") have Gated DeltaNet layers
 * (hp.recurrent[l]) between gated-attention layers.
 * A synthetic tensor is the model's value in Hugging Face's head order; the
 * formats store some of them differently, as real files do (synth_fill_stored):
 *   - HF stores the RMSNorm weights of input_layernorm, post_attention_layernorm,
 *     the final norm, q_norm and k_norm zero-centred (value - 1; Qwen3.5's norm
 *     multiplies by 1 + w); linear_attn.norm holds the value itself in both.
 *   - GGUF stores ssm_a = -exp(A_log) for the log rate A_log that HF stores.
 *   - GGUF holds the DeltaNet V heads in llama.cpp's tiled order: with
 *     r = Nv/Nk, HF's V head k*r + j sits at GGUF position j*Nk + k (the V rows
 *     of attn_qkv and channels of ssm_conv1d, the rows of attn_gate, ssm_beta
 *     and ssm_alpha, the elements of ssm_dt.bias and ssm_a, the column blocks
 *     of ssm_out).
 * DeltaNet scales: A_log, dt_bias ~ N(0, 0.5²), conv1d ~ N(0, 1/K); these and
 * every norm are rounded through bf16, so GGUF (which keeps them F32 in every
 * mix) and a bf16 HF folder hold the same values. */
#ifndef INF_SUPPORT_SYNTH_H
#define INF_SUPPORT_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "modelfile/model.h"
#include "quant/dtype.h"
#include "util/err.h"

/* Type mixes, as llama.cpp writes them (1-D tensors and ssm_conv1d stay F32 in GGUF). */
typedef enum synth_mix {
    SYNTH_F32,
    SYNTH_F16,
    SYNTH_BF16,
    SYNTH_Q8_0,
    SYNTH_Q4_0,   /* Q4_0; token_embd (the tied output) Q6_K */
    SYNTH_Q4_K,   /* every matrix Q4_K (Q5_0 where rows are not whole blocks) */
    SYNTH_Q6_K,   /* every matrix Q6_K (Q8_0 where rows are not whole blocks) */
    SYNTH_Q4_K_M, /* llama-quantize's Q4_K_M, by its rules (quant/mix.h) */
    /* llama-quantize's other mixes, by its rules (quant/mix.h) */
    SYNTH_Q4_1,
    SYNTH_Q5_0,
    SYNTH_Q5_1,
    SYNTH_Q2_K,
    SYNTH_Q3_K_S,
    SYNTH_Q3_K_M,
    SYNTH_Q3_K_L,
    SYNTH_Q4_K_S,
    SYNTH_Q5_K_S,
    SYNTH_Q5_K_M,
    SYNTH_IQ4_NL,
    SYNTH_IQ4_XS,
    SYNTH_MXFP4, /* every matrix MXFP4 (as MoE files hold their experts; no dense llama.cpp mix) */
    SYNTH_N_MIX,
} synth_mix;

/* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m", and
 * llama-quantize's names in lower case ("q5_k_m", "iq4_xs", ...), "mxfp4". */
const char *synth_mix_name(synth_mix m);
/* The mix named s, or -1. */
int synth_mix_parse(const char *s);

/* Fills hp with the preset "tiny" (4 layers, 256 wide, 4/2 heads of 64, FFN
 * 768, full Qwen3 vocab), "qwen3-0.6b" (Qwen3-0.6B's exact shapes),
 * "tiny-moe" (qwen3moe: tiny's attention, 8 experts of FFN 256, top 2, tied
 * head), "qwen3-30b-a3b-6l" (Qwen3-30B-A3B's per-layer shapes: 2048 wide,
 * 32/4 heads of 128, 128 experts of 768, top 8, untied head; 6 layers),
 * "tiny-qwen35" (Qwen3.5 hybrid: 4 layers, DeltaNet 0-2 and attention 3;
 * 256 wide, 4/2 gated heads of 64 with 16 RoPE'd dims, FFN 512, DeltaNet 2 K
 * heads and 4 V heads of 32, conv kernel 4, tied head) or "qwen35-2b-4l"
 * (Qwen3.5-2B's per-layer shapes: 2048 wide, 8/2 heads of 256 with 64 RoPE'd,
 * FFN 6144, DeltaNet 16/16 heads of 128; one group of 3 DeltaNet + 1
 * attention layer, untied head); "tiny-qwen35-moe" (qwen35moe: tiny-qwen35
 * with a MoE block in every layer in place of the FFN: 8 experts of FFN 128,
 * top 2, renormalized, a shared expert of FFN 256 scaled by
 * sigmoid(shared_expert_gate . x)) or "qwen35-35b-a3b-4l" (Qwen3.5-35B-A3B's
 * per-layer shapes: 2048 wide, 16/2 gated heads of 256 with 64 RoPE'd,
 * DeltaNet 16 K and 32 V heads of 128, 256 experts of FFN 512, top 8, shared
 * expert FFN 512; one group of 3 DeltaNet + 1 attention layer, untied head).
 * Every preset has the Qwen3 vocabulary (151936; Qwen3.5's own has 248320).
 * Returns -1 for any other name. */
int synth_preset(inf_hparams *hp, const char *name);

typedef enum synth_role {
    SYNTH_TOKEN_EMBD,
    SYNTH_OUTPUT_NORM,
    SYNTH_ATTN_NORM,
    SYNTH_ATTN_Q,
    SYNTH_ATTN_K,
    SYNTH_ATTN_V,
    SYNTH_ATTN_OUTPUT,
    SYNTH_ATTN_Q_NORM,
    SYNTH_ATTN_K_NORM,
    SYNTH_FFN_NORM,
    SYNTH_FFN_GATE,
    SYNTH_FFN_UP,
    SYNTH_FFN_DOWN,
    /* MoE layers (hp.n_expert > 0) have these in place of the dense FFN */
    SYNTH_FFN_GATE_INP,  /* router [n_expert][n_embd], F32 in GGUF */
    SYNTH_FFN_GATE_EXPS, /* {n_embd, n_ff_exp, n_expert} */
    SYNTH_FFN_UP_EXPS,   /* {n_embd, n_ff_exp, n_expert} */
    SYNTH_FFN_DOWN_EXPS, /* {n_ff_exp, n_embd, n_expert} */
    /* Qwen3.5 MoE layers add a shared expert (hp.n_ff_shexp) and its gate */
    SYNTH_FFN_GATE_INP_SHEXP, /* {n_embd, 1} (HF shared_expert_gate [1, n_embd]), F32 in GGUF */
    SYNTH_FFN_GATE_SHEXP,     /* {n_embd, n_ff_shexp} */
    SYNTH_FFN_UP_SHEXP,       /* {n_embd, n_ff_shexp} */
    SYNTH_FFN_DOWN_SHEXP,     /* {n_ff_shexp, n_embd} */
    /* Gated DeltaNet layers (hp.recurrent[l]) have these in place of the
     * attention; Nk/Nv heads of dk/dv, C = 2*Nk*dk + Nv*dv, K the conv kernel */
    SYNTH_SSM_QKV,     /* attn_qkv {n_embd, C}: q, k, then v rows */
    SYNTH_SSM_GATE,    /* attn_gate (HF in_proj_z) {n_embd, Nv*dv} */
    SYNTH_SSM_BETA,    /* ssm_beta (in_proj_b) {n_embd, Nv} */
    SYNTH_SSM_ALPHA,   /* ssm_alpha (in_proj_a) {n_embd, Nv} */
    SYNTH_SSM_CONV1D,  /* {K, C}, F32 in GGUF; HF [C, 1, K] */
    SYNTH_SSM_DT_BIAS, /* {Nv} */
    SYNTH_SSM_A_LOG,   /* {Nv} the log rate A_log (GGUF ssm_a = -exp(A_log)) */
    SYNTH_SSM_NORM,    /* {dv} the gated RMSNorm's weight */
    SYNTH_SSM_OUT,     /* ssm_out (out_proj) {Nv*dv, n_embd} */
} synth_role;

typedef struct synth_tensor {
    char gguf_name[64]; /* "blk.3.attn_q.weight" */
    char hf_name[96];   /* "model.layers.3.self_attn.q_proj.weight" (experts: see synth_write;
                           hybrid: "model.language_model.layers.3...") */
    synth_role role;
    int layer;     /* -1 for token_embd, output_norm, output */
    int n_dims;    /* 1 (norms), 2, or 3 (experts) */
    int64_t ne[3]; /* fastest-first: ne[0] = n_in (row length), ne[1] = n_out, ne[2] experts */
} synth_tensor;

/* The model's tensors in GGUF file order (token_embd, each block,
 * output_norm, output when untied).
 * *out is malloc'd (caller frees). Returns the count, or -1 if out of memory. */
int synth_tensor_list(synth_tensor **out, const inf_hparams *hp);

/* dst[n] = elements start..start+n-1 of tensor t (row-major: element
 * row * ne[0] + col), for the given seed: the model's values. */
void synth_fill(float *dst, const synth_tensor *t, const inf_hparams *hp, uint64_t seed,
                int64_t start, int64_t n);
/* The same elements as a GGUF file (gguf) or an HF folder stores them, in
 * the file's element order (see the top of this file); synth_fill itself for
 * every tensor of a Qwen3 preset. */
void synth_fill_stored(float *dst, const synth_tensor *t, const inf_hparams *hp, uint64_t seed,
                       bool gguf, int64_t start, int64_t n);

/* The type tensor t has in a GGUF file of mix m. */
inf_dtype synth_gguf_type(synth_mix m, const synth_tensor *t, const inf_hparams *hp);
/* The dtype of every tensor in a Hugging Face folder of mix m (F32, F16 or
 * BF16; -1 for quantized mixes, which HF folders do not hold). */
int synth_hf_type(synth_mix m);
/* llama.cpp's general.file_type for mix m. */
uint32_t synth_file_type(synth_mix m);

typedef enum synth_kind {
    SYNTH_GGUF,       /* path = the .gguf file */
    SYNTH_HF,         /* path = the folder: config.json, model.safetensors, tokenizer files */
    SYNTH_HF_SHARDED, /* the same with 3 shards and model.safetensors.index.json */
    SYNTH_HF_FUSED,   /* HF, experts in transformers v5's fused layout (MoE presets) */
} synth_kind;

#define SYNTH_HF_SHARDS 3

/* The seed inferno-mkmodel uses unless told otherwise (models/ is made with it). */
#define SYNTH_DEFAULT_SEED 42

typedef struct synth_output {
    synth_kind kind;
    synth_mix mix;
    const char *path;
} synth_output;

typedef struct synth_model {
    const char *name; /* general.name */
    inf_hparams hp;
    uint64_t seed;
    /* GGUF tokenizer metadata; ids below hp.n_vocab with no token become
     * "[PAD<id>]" (type UNUSED) as llama.cpp's converter writes them.
     * NULL writes no tokenizer keys. */
    const inf_vocab_desc *vocab;
    /* Copied into HF folders when not NULL. */
    const char *tokenizer_json;
    const char *tokenizer_config_json;
} synth_model;

/* Writes every output, tensor by tensor, a chunk of rows at a time, so
 * memory stays small whatever the model size. The experts of a MoE preset
 * are three 3-D tensors in GGUF; HF folders hold them one tensor per expert
 * (mlp.experts.E.{gate,up,down}_proj.weight) or, SYNTH_HF_FUSED, as
 * mlp.experts.gate_up_proj [E, 2F, H] (gate rows first) and
 * mlp.experts.down_proj [E, H, F]: the same values in every layout. A hybrid
 * preset's HF folder is laid out as Qwen3_5ForConditionalGeneration's
 * (Qwen3_5MoeForConditionalGeneration's) downloads are (text tensors under
 * model.language_model., lm_head.weight at the top, linear_attn.conv1d.weight
 * [C, 1, K], no vision tower; experts always fused, as those checkpoints
 * hold them, whatever the HF kind). Each output is
 * written under a temporary name and renamed into place when complete.
 * Returns -1 with a message naming the output on failure. */
int synth_write(const synth_model *m, const synth_output *outs, int n_outs, inf_err *err);

#endif
