/* Qwen3 GGUF metadata (see qwen3_meta.h). */
#include "convert/qwen3_meta.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp reads the layer kinds of a hybrid from one number: layer l is
 * full attention when (l + 1) % interval == 0. The first attention layer
 * gives it (every layer recurrent: n_layer + 1, none of them attention). */
static uint32_t full_attention_interval(const inf_hparams *hp) {
    int l = 0;
    while (l < hp->n_layer && hp->recurrent[l])
        l++;
    return (uint32_t)l + 1;
}

void inf_convert_qwen3_meta(gguf_writer *w, const char *arch, const char *name,
                            const inf_hparams *hp, uint32_t file_type) {
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, arch), key)
    gguf_writer_add_str(w, "general.architecture", arch);
    gguf_writer_add_str(w, "general.type", "model");
    gguf_writer_add_str(w, "general.name", name);
    gguf_writer_add_u32(w, "general.file_type", file_type);
    gguf_writer_add_u32(w, "general.quantization_version", 2);
    gguf_writer_add_u32(w, "general.alignment", GGUF_DEFAULT_ALIGNMENT);
    gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)hp->n_layer);
    gguf_writer_add_u32(w, KEY("context_length"), (uint32_t)hp->n_ctx_train);
    gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)hp->n_embd);
    /* the converter writes it from intermediate_size, which a Qwen3.5 MoE
     * config does not have (its experts' sizes follow) */
    if (hp->n_ff > 0) gguf_writer_add_u32(w, KEY("feed_forward_length"), (uint32_t)hp->n_ff);
    gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)hp->n_head);
    gguf_writer_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)hp->n_head_kv);
    gguf_writer_add_f32(w, KEY("rope.freq_base"), hp->rope_theta);
    gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), hp->rms_eps);
    gguf_writer_add_u32(w, KEY("attention.key_length"), (uint32_t)hp->head_dim);
    gguf_writer_add_u32(w, KEY("attention.value_length"), (uint32_t)hp->head_dim);
    if (hp->yarn_factor > 0) { /* llama.cpp multiplies attn_factor by 0.1 ln(factor) + 1 */
        const double ms = hp->yarn_factor > 1 ? 0.1 * log(hp->yarn_factor) + 1.0 : 1.0;
        gguf_writer_add_str(w, KEY("rope.scaling.type"), "yarn");
        gguf_writer_add_f32(w, KEY("rope.scaling.factor"), hp->yarn_factor);
        gguf_writer_add_u32(w, KEY("rope.scaling.original_context_length"),
                            (uint32_t)hp->yarn_orig_ctx);
        gguf_writer_add_f32(w, KEY("rope.scaling.attn_factor"), (float)(hp->rope_attn_factor / ms));
        gguf_writer_add_f32(w, KEY("rope.scaling.yarn_beta_fast"), hp->yarn_beta_fast);
        gguf_writer_add_f32(w, KEY("rope.scaling.yarn_beta_slow"), hp->yarn_beta_slow);
    }
    if (hp->n_expert > 0) {
        gguf_writer_add_u32(w, KEY("expert_count"), (uint32_t)hp->n_expert);
        gguf_writer_add_u32(w, KEY("expert_used_count"), (uint32_t)hp->n_expert_used);
        gguf_writer_add_u32(w, KEY("expert_feed_forward_length"), (uint32_t)hp->n_ff_exp);
        if (hp->n_ff_shexp > 0) /* qwen35moe's shared expert */
            gguf_writer_add_u32(w, KEY("expert_shared_feed_forward_length"),
                                (uint32_t)hp->n_ff_shexp);
    }
    if (hp->ssm_n_v_heads > 0) { /* a hybrid (qwen35): Gated DeltaNet layers */
        /* Qwen3.5's interleaved M-RoPE sections (text positions use all three
         * alike); the converter writes them padded to four */
        static const int32_t sections[4] = {11, 11, 10, 0};
        gguf_writer_add_u32(w, KEY("rope.dimension_count"),
                            (uint32_t)(hp->n_rot ? hp->n_rot : hp->head_dim));
        gguf_writer_add_arr(w, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sections, 4);
        gguf_writer_add_u32(w, KEY("ssm.conv_kernel"), (uint32_t)hp->ssm_d_conv);
        gguf_writer_add_u32(w, KEY("ssm.state_size"), (uint32_t)hp->ssm_d_k);
        gguf_writer_add_u32(w, KEY("ssm.group_count"), (uint32_t)hp->ssm_n_k_heads);
        gguf_writer_add_u32(w, KEY("ssm.time_step_rank"), (uint32_t)hp->ssm_n_v_heads);
        gguf_writer_add_u32(w, KEY("ssm.inner_size"), (uint32_t)(hp->ssm_n_v_heads * hp->ssm_d_v));
        gguf_writer_add_u32(w, KEY("full_attention_interval"), full_attention_interval(hp));
    }
#undef KEY
}

/* convert_hf_to_gguf's does_token_look_special: added tokens some models leave
 * non-special (Qwen3's <|fim_prefix|>, <|repo_name|>, ...) that ought to be
 * control tokens. */
static bool looks_special(const char *t) {
    size_t n = strlen(t);
#define ENDS(s) (n >= strlen(s) && !strcmp(t + n - strlen(s), s))
#define STARTS(s) (!strncmp(t, s, strlen(s)))
    return !strcmp(t, "<pad>") || !strcmp(t, "<mask>") || !strcmp(t, "<2mass>") ||
           !strcmp(t, "[@BOS@]") || (n >= 4 && STARTS("<|") && ENDS("|>")) ||
           (STARTS("<\xef\xbd\x9c") && ENDS("\xef\xbd\x9c>") && n >= 8) || /* <｜...｜> */
           (STARTS("<unused") && ENDS(">"));
#undef ENDS
#undef STARTS
}

int inf_convert_tokenizer_meta(gguf_writer *w, const inf_vocab_desc *v, int n_vocab, inf_err *err) {
    int n = v->n_tokens > n_vocab ? v->n_tokens : n_vocab;
    const char **tokens = calloc((size_t)n, sizeof *tokens);
    int32_t *types = calloc((size_t)n, sizeof *types);
    char *pads = malloc((size_t)(n - v->n_tokens + 1) * 16);
    if (!tokens || !types || !pads) {
        free(tokens);
        free(types);
        free(pads);
        return inf_fail(err, "out of memory building the token list");
    }
    for (int i = 0; i < n; i++) {
        if (i < v->n_tokens && v->tokens[i]) {
            tokens[i] = v->tokens[i];
            types[i] = v->token_type ? v->token_type[i] : INF_TOKEN_NORMAL;
            if (types[i] == INF_TOKEN_USER_DEFINED && looks_special(tokens[i]))
                types[i] = INF_TOKEN_CONTROL;
        } else {
            char *p = pads + (size_t)(i - v->n_tokens) * 16;
            snprintf(p, 16, "[PAD%d]", i);
            tokens[i] = p;
            types[i] = INF_TOKEN_UNUSED;
        }
    }
    gguf_writer_add_str(w, "tokenizer.ggml.model", v->model ? v->model : "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", v->pre ? v->pre : "qwen2");
    gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    gguf_writer_add_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n);
    gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges,
                            (uint64_t)v->n_merges);
    if (v->eos_id >= 0) gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos_id);
    if (v->pad_id >= 0)
        gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad_id);
    if (v->bos_id >= 0) gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos_id);
    gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (v->chat_template) gguf_writer_add_str(w, "tokenizer.chat_template", v->chat_template);
    free(tokens);
    free(types);
    free(pads); /* the writer has copied the strings */
    return 0;
}
