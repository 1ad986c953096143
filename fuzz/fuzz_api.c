/* libFuzzer target: the Responses, Anthropic Messages and Ollama request
 * parsers and their writers (server/api_responses.c, server/api_messages.c,
 * server/api_ollama.c).
 * Input: byte 0 picks the API (% 3: Responses, Messages, Messages
 * count_tokens; with bit 32 set, bit 0: Ollama chat or generate),
 * byte 1 the poll size (1..8 bytes), the rest is the request body. A body
 * that is refused must give an error body in the API's shape (valid JSON)
 * with a 4xx; one that parses must give a conversation of objects with a
 * role. Then the body's own bytes play the reply: cut into reasoning, text
 * and tool-call parts by its bytes, streamed in polls of the chosen size;
 * every SSE frame must be `event: NAME` + valid JSON, and for Responses the
 * final event's response must equal the whole body; Ollama's NDJSON must be
 * one JSON object per line, the last one done. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

static void check_json(const char *s, size_t n) {
    json_t *j = json_loadb(s, n, 0, NULL);
    if (!j) abort();
    json_decref(j);
}

/* Frames "event: NAME\ndata: JSON\n\n"; returns the last frame's data. */
static json_t *check_frames(const inf_buf *out) {
    const char *s = out->data ? out->data : "";
    json_t *last = NULL;
    while (*s) {
        if (strncmp(s, "event: ", 7)) abort();
        const char *nl = strchr(s, '\n');
        if (!nl || strncmp(nl + 1, "data: ", 6)) abort();
        const char *end = strstr(nl + 1, "\n\n");
        if (!end) abort();
        json_decref(last);
        last = json_loadb(nl + 7, (size_t)(end - nl - 7), 0, NULL);
        if (!last) abort();
        s = end + 2;
    }
    return last;
}

/* NDJSON: one object per line, every line ended; returns the last. */
static json_t *check_lines(const inf_buf *out) {
    const char *s = out->data ? out->data : "";
    json_t *last = NULL;
    while (*s) {
        const char *nl = strchr(s, '\n');
        if (!nl) abort();
        json_decref(last);
        last = json_loadb(s, (size_t)(nl - s), 0, NULL);
        if (!json_is_object(last)) abort();
        s = nl + 1;
    }
    if (!json_is_true(json_object_get(last, "done"))) abort();
    return last;
}

/* The reply's parts from bytes: a byte < 8 switches the kind (0-2:
 * reasoning, 3-5: text, 6-7: a tool call of the next bytes up to the next
 * switch, as a JSON string argument). */
static void reply_parts(const uint8_t *d, size_t n, inf_parts *out) {
    inf_part_kind kind = INF_PART_TEXT;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && d[i] >= 8) continue;
        if (i > start) {
            if (kind == INF_PART_TOOL_CALL) {
                json_t *a = json_pack("{s:s%}", "x", (const char *)d + start, i - start);
                char *args = a ? json_dumps(a, JSON_COMPACT) : NULL;
                if (args) inf_parts_add_call(out, "f", args, strlen(args));
                free(args);
                json_decref(a);
            } else {
                inf_parts_add_text(out, kind, (const char *)d + start, i - start);
            }
        }
        if (i < n)
            kind = d[i] < 3 ? INF_PART_REASONING : d[i] < 6 ? INF_PART_TEXT : INF_PART_TOOL_CALL;
        start = i + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int which = data[0] & 32 ? 3 + (data[0] & 1) : data[0] % 3;
    const srv_api *api = which == 0   ? &srv_api_responses
                         : which == 3 ? &srv_api_ollama_chat
                         : which == 4 ? &srv_api_ollama_generate
                                      : &srv_api_messages;
    bool ndjson = which >= 3;
    size_t poll = (size_t)(data[1] % 8) + 1;
    const char *body = (const char *)data + 2;
    size_t n = size - 2;

    srv_request r;
    srv_error e;
    int rc =
        which == 2 ? srv_messages_count_parse(&r, body, n, &e) : api->parse(&r, body, n, NULL, &e);
    if (rc) {
        if (e.status < 400 || e.status >= 500) abort();
        char *j = api->error_body(&e);
        check_json(j, strlen(j));
        free(j);
        return 0;
    }
    size_t i;
    json_t *m;
    /* (Ollama's raw generate is a completion: a prompt, no messages) */
    if (r.kind == SRV_COMPLETION ? !r.prompt
                                 : !json_is_array(r.messages) || json_array_size(r.messages) == 0)
        abort();
    json_array_foreach(r.messages, i, m) {
        if (!json_is_string(json_object_get(m, "role"))) abort();
    }
    json_t *echo = api->echo ? api->echo(&r) : NULL;
    srv_request_free(&r);

    srv_resp_meta meta;
    srv_resp_meta_init(&meta, api, "fuzz", echo);
    inf_parts whole = {0};
    reply_parts((const uint8_t *)body, n, &whole);
    srv_outcome o = {.finish = data[0] & 8 ? INF_FINISH_LENGTH : INF_FINISH_STOP,
                     .stop_string = data[0] & 16 ? "x" : NULL,
                     .prompt_tokens = 3,
                     .completion_tokens = 2};
    char *b = api->body(&meta, &whole, &o);
    json_t *bj = json_loads(b, 0, NULL);
    if (!bj) abort();
    free(b);

    /* the same parts in polls of `poll` bytes (a call is never cut) */
    srv_stream st;
    memset(&st, 0, sizeof st);
    st.api = api;
    st.meta = meta;
    st.open = -1;
    inf_buf sse = {0};
    api->stream_begin(&st, &sse);
    for (int k = 0; k < whole.n; k++) {
        const inf_part *p = &whole.v[k];
        size_t at = 0;
        do {
            inf_parts one = {0};
            size_t len =
                p->kind == INF_PART_TOOL_CALL ? p->n : (p->n - at < poll ? p->n - at : poll);
            if (p->kind == INF_PART_TOOL_CALL)
                inf_parts_add_call(&one, p->name, p->text, p->n);
            else
                inf_parts_add_text(&one, p->kind, p->text + at, len);
            inf_parts_append(&st.all, &one);
            api->stream_parts(&st, &sse, &one, NULL);
            inf_parts_free(&one);
            at += len;
        } while (at < whole.v[k].n);
    }
    api->stream_end(&st, &sse, &o);
    json_t *last = ndjson ? check_lines(&sse) : check_frames(&sse);
    /* the final event repeats the whole response, built from the parts */
    if (api == &srv_api_responses && !json_equal(json_object_get(last, "response"), bj)) abort();
    json_decref(last);
    json_decref(bj);
    inf_buf_free(&sse);
    inf_parts_free(&st.all);
    inf_parts_free(&whole);
    srv_resp_meta_free(&meta);
    return 0;
}
