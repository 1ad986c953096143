/* libFuzzer target: what a client controls on the server's pure paths.
 * The input is a request body for /v1/chat/completions, /v1/completions or
 * /v1/embeddings (the first byte picks which; an embeddings request that
 * parses is answered with vectors of its inputs' ids, float or base64, and
 * the answer must be valid JSON); when a generation request parses, the
 * text after a NUL byte (or, without one, the body itself) plays the
 * generated text: it runs through the stop matcher (stop strings from the
 * request, text cut at input-chosen points), the reply parser (reasoning,
 * tool calls when the request offers tools) and the API's SSE writer, and
 * every frame must be valid JSON. Checks: no crash, no out-of-bounds
 * access, the stop matcher never releases more than the one-piece answer,
 * the streamed parts equal the parts of the whole text, every JSON payload
 * parses. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/embd.h"
#include "server/oai.h"
#include "server/api.h"
#include "runtime/text.h"

static void check_frames(const inf_buf *out) {
    const char *s = out->data ? out->data : "";
    while (*s) {
        if (strncmp(s, "data: ", 6)) abort();
        const char *end = strstr(s, "\n\n");
        if (!end) abort();
        if (strncmp(s + 6, "[DONE]", 6)) {
            json_error_t je;
            json_t *j = json_loadb(s + 6, (size_t)(end - s - 6), JSON_ALLOW_NUL, &je);
            if (!j) abort();
            json_decref(j);
        }
        s = end + 2;
    }
}

/* Embeddings: a tokenizer of one id per byte. */
static int byte_tokenize(void *ctx, const char *text, size_t n, bool special, int32_t **ids,
                         int *n_ids, inf_err *err) {
    *ids = malloc((n ? n : 1) * sizeof **ids);
    if (!*ids) return inf_fail(err, "out of memory");
    for (size_t i = 0; i < n; i++)
        (*ids)[i] = (unsigned char)text[i];
    *n_ids = (int)n;
    return 0;
}

static void fuzz_embeddings(const char *body, size_t n) {
    static const inf_exec ex = {
        .n_vocab = 300, .n_ctx = 64, .n_embd = 16, .embd_eos = 299, .tokenize = byte_tokenize};
    srv_embd_request r;
    srv_error e;
    char *j;
    if (srv_embd_parse(&r, &ex, body, n, &e)) {
        j = srv_error_json(&e);
    } else {
        float *embs[SRV_MAX_EMBD_INPUTS], vecs[4][16];
        for (int i = 0; i < r.n_inputs; i++) {
            embs[i] = vecs[i % 4];
            for (int k = 0; k < 16; k++)
                vecs[i % 4][k] = (float)r.ids[i][k % r.n_ids[i]] - 100.0f;
            srv_embd_normalize(embs[i], r.dimensions);
        }
        j = srv_embd_response(&r, embs, "fuzz");
        srv_embd_request_free(&r);
    }
    json_t *p = j ? json_loads(j, 0, NULL) : NULL;
    if (!p) abort();
    json_decref(p);
    free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    srv_kind kind = data[0] & 1 ? SRV_CHAT : SRV_COMPLETION;
    size_t cut = data[1] % 8; /* the generated text is fed in pieces of 1..8 bytes */
    const char *body = (const char *)data + 2;
    size_t n = size - 2;
    if ((data[0] & 6) == 6) {
        fuzz_embeddings(body, n);
        return 0;
    }
    /* "BODY\0TEXT": TEXT plays the generated text; without a NUL byte the
       body plays it too */
    const char *text = body;
    size_t n_text = n;
    const char *nul = memchr(body, 0, n);
    if (nul) {
        text = nul + 1;
        n_text = n - (size_t)(text - body);
        n = (size_t)(nul - body);
    }

    srv_request r;
    srv_error e;
    if (srv_request_parse(&r, kind, body, n, NULL, &e)) {
        char *j = srv_error_json(&e);
        json_t *p = json_loads(j, 0, NULL);
        if (!p) abort();
        json_decref(p);
        free(j);
        return 0;
    }

    /* The one-piece answer of the stop matcher, then the same text in pieces. */
    inf_stop one, pieces;
    inf_buf whole = {0}, out = {0};
    inf_stop_init(&one, r.stop, r.n_stop);
    inf_stop_init(&pieces, r.stop, r.n_stop);
    if (inf_stop_push(&one, &whole, text, n_text) == 0) inf_stop_flush(&one, &whole);

    const srv_api *api = kind == SRV_CHAT ? &srv_api_chat : &srv_api_completions;
    inf_reply_opts ro = {.think = kind == SRV_CHAT,
                         .start_in_think = data[0] & 2,
                         .tool_calls = kind == SRV_CHAT && r.tools};
    srv_resp_meta meta, meta2;
    srv_resp_meta_init(&meta, api, "fuzz", NULL);
    meta2 = meta;
    srv_stream st;
    srv_stream_init(&st, api, &meta, &ro, r.include_usage);
    inf_buf sse = {0};
    srv_stream_begin(&st, &sse);
    int rc = 0;
    for (size_t at = 0; at < n_text && rc == 0;) {
        size_t k = cut + 1 < n_text - at ? cut + 1 : n_text - at;
        size_t before = out.len;
        rc = inf_stop_push(&pieces, &out, text + at, k);
        if (out.len > whole.len ||
            memcmp(out.data ? out.data : "", whole.data ? whole.data : "", out.len))
            abort(); /* released something the whole answer does not have */
        srv_stream_text(&st, &sse, out.data + before, out.len - before, NULL);
        at += k;
    }
    if (rc == 0) inf_stop_flush(&pieces, &out);
    if (out.len != whole.len) abort();
    inf_timings tm = {0};
    srv_outcome o = {
        .finish = INF_FINISH_STOP, .prompt_tokens = 1, .completion_tokens = 1, .timings = &tm};
    srv_stream_end(&st, &sse, &o);
    check_frames(&sse);

    /* the parts streamed in pieces are the parts of the whole text */
    inf_reply rw;
    inf_parts pw = {0};
    inf_reply_init(&rw, &ro);
    inf_reply_push(&rw, &pw, whole.data ? whole.data : "", whole.len);
    inf_reply_flush(&rw, &pw);
    if (pw.n != st.all.n) abort();
    for (int i = 0; i < pw.n; i++) {
        const inf_part *a = &pw.v[i], *b = &st.all.v[i];
        if (a->kind != b->kind || a->n != b->n || memcmp(a->text, b->text, a->n)) abort();
        if ((a->name == NULL) != (b->name == NULL) || (a->name && strcmp(a->name, b->name)))
            abort();
    }
    inf_parts_free(&pw);
    inf_reply_free(&rw);

    o.finish = INF_FINISH_LENGTH;
    char *resp = srv_whole_body(api, &meta2, &ro, whole.data, whole.len, &o);
    json_t *p = json_loads(resp, JSON_ALLOW_NUL, NULL);
    if (!p) abort();
    json_decref(p);
    free(resp);

    srv_stream_free(&st);
    inf_buf_free(&sse);
    inf_buf_free(&whole);
    inf_buf_free(&out);
    inf_stop_free(&one);
    inf_stop_free(&pieces);
    srv_request_free(&r);
    return 0;
}
