#include <stdlib.h>

#include "tokenizer/vocab.h"

void inf_vocab_desc_free(inf_vocab_desc *v) {
    if (!v) return;
    for (int i = 0; v->tokens && i < v->n_tokens; i++)
        free(v->tokens[i]);
    for (int i = 0; v->merges && i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->tokens);
    free(v->token_type);
    free(v->merges);
    free(v->model);
    free(v->pre);
    free(v->pretok_regex);
    free(v->chat_template);
    *v = (inf_vocab_desc){.bos_id = -1, .eos_id = -1, .pad_id = -1, .eot_id = -1};
}
