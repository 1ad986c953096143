/* The streaming detokenizer: complete UTF-8 characters only. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/utf8.h"

struct inf_detok {
    const inf_tokenizer *tok;
    inf_utf8_stream st; /* the start of a character still waiting for bytes */
    char *out;          /* [cap]: the text returned by the last call */
    size_t cap;
};

inf_detok *inf_detok_create(const inf_tokenizer *t) {
    inf_detok *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->tok = t;
    d->cap = INF_UTF8_STREAM_OUT(inf_tok_max_token_bytes(t));
    if (!(d->out = malloc(d->cap))) {
        free(d);
        return NULL;
    }
    return d;
}

void inf_detok_free(inf_detok *d) {
    if (!d) return;
    free(d->out);
    free(d);
}

const char *inf_detok_push(inf_detok *d, int32_t id, size_t *len) {
    size_t n = 0;
    const char *b = inf_tok_token_bytes(d->tok, id, &n);
    if (!b) n = 0;
    size_t k = inf_utf8_stream_push(&d->st, b ? b : "", n, d->out);
    d->out[k] = 0;
    *len = k;
    return d->out;
}

const char *inf_detok_flush(inf_detok *d, size_t *len) {
    size_t k = inf_utf8_stream_flush(&d->st, d->out);
    d->out[k] = 0;
    *len = k;
    return d->out;
}
