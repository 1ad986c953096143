/* The GGUF metadata of a Qwen3 model (qwen3, qwen3moe, and the Qwen3.5
 * hybrids qwen35 and qwen35moe) as llama.cpp's converter writes it:
 * general.*, the <arch>.* hyperparameters (feed_forward_length only when hp
 * has a dense FFN size, the expert counts when it has experts, the shared
 * expert's size when it has one, and the partial RoPE, ssm.* and
 * full_attention_interval keys when it has DeltaNet layers) and the
 * tokenizer.ggml.* keys.
 * One owner, used by `inferno quantize` (from a Hugging Face folder) and by
 * the test-model maker. */
#ifndef INF_CONVERT_QWEN3_META_H
#define INF_CONVERT_QWEN3_META_H

#include <stdint.h>

#include "convert/gguf_writer.h"
#include "modelfile/model.h"

/* general.architecture (arch, "qwen3", "qwen3moe", "qwen35" or "qwen35moe") /type/name/
 * file_type/quantization_version/alignment and the <arch>.* keys of hp. A
 * hybrid's layer kinds (hp->recurrent) are written as llama.cpp reads them,
 * full_attention_interval, so they must follow its pattern. */
void inf_convert_qwen3_meta(gguf_writer *w, const char *arch, const char *name,
                            const inf_hparams *hp, uint32_t file_type);

/* The tokenizer keys of v; ids below n_vocab the vocabulary leaves empty get
 * "[PAD<id>]" of type UNUSED, and USER_DEFINED tokens that look special
 * (<|...|>, as convert_hf_to_gguf's does_token_look_special) are written
 * CONTROL, as the converter writes them. -1 if out of memory. */
int inf_convert_tokenizer_meta(gguf_writer *w, const inf_vocab_desc *v, int n_vocab, inf_err *err);

#endif
