/* /v1/embeddings (OpenAI's shape): the request's inputs as token ids, and
 * the response from the engine's hidden states.
 *
 * Each input is one task (inf_gen_params.embed) through the scheduler; its
 * result, the last token's final-normed hidden state, is pooled here as
 * Qwen3-Embedding does: truncated to `dimensions` (Matryoshka), then L2
 * normalized. Text inputs are tokenized with the model's rules (BOS, and the
 * token the tokenizer appends: <|endoftext|> for Qwen3-Embedding); token id
 * inputs are used as given. */
#ifndef INF_SERVER_EMBD_H
#define INF_SERVER_EMBD_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/exec.h"
#include "server/oai.h"

#define SRV_MAX_EMBD_INPUTS 2048 /* OpenAI's limit on inputs per request */

typedef struct srv_embd_request {
    int n_inputs;
    int32_t **ids;     /* [n_inputs] each malloc'd [n_ids[i]] */
    int *n_ids;        /* [n_inputs] */
    int dimensions;    /* 1..n_embd */
    bool base64;       /* encoding_format "base64": little-endian f32 bytes */
    const char *model; /* as sent (copied), or NULL */
    char model_buf[256];
} srv_embd_request;

/* Parses and tokenizes a body for ex (its tokenizer, n_vocab, n_ctx,
 * n_embd). On failure returns -1 with a 400 (413 for too many inputs)
 * naming the field; r is then empty. Free with srv_embd_request_free. */
int srv_embd_parse(srv_embd_request *r, const inf_exec *ex, const char *body, size_t len,
                   srv_error *e);
void srv_embd_request_free(srv_embd_request *r);

/* v[0..dims) scaled to unit L2 norm (a zero vector stays zero). */
void srv_embd_normalize(float *v, int dims);

/* The response body (malloc'd JSON): data[i] is embs[i][0..dimensions),
 * already normalized; usage counts every input's tokens. NULL when out of
 * memory. */
char *srv_embd_response(const srv_embd_request *r, float *const *embs, const char *model);

#endif
