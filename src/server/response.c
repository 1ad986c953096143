#include "server/response.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/timer.h"

void srv_resp_meta_init(srv_resp_meta *m, srv_kind kind, const char *model, bool split_think,
                        bool start_in_think) {
    static atomic_ulong counter;
    memset(m, 0, sizeof *m);
    m->kind = kind;
    m->created = (long)time(NULL);
    unsigned long n = atomic_fetch_add(&counter, 1) + 1;
    snprintf(m->id, sizeof m->id, "%s-%lx%04lx", kind == SRV_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long)(inf_now_ns() & 0xffffffffffull), n & 0xffff);
    snprintf(m->model, sizeof m->model, "%s", model ? model : "");
    m->split_think = split_think && kind == SRV_CHAT;
    m->start_in_think = start_in_think;
}

const char *srv_finish_name(inf_finish f) {
    return f == INF_FINISH_LENGTH ? "length" : "stop";
}

static json_t *envelope(const srv_resp_meta *m, bool chunk) {
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(m->id));
    const char *obj = m->kind == SRV_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                          : "text_completion";
    json_object_set_new(j, "object", json_string(obj));
    json_object_set_new(j, "created", json_integer(m->created));
    json_object_set_new(j, "model", srv_json_stringn(m->model, strlen(m->model)));
    json_object_set_new(j, "system_fingerprint", json_string("inferno"));
    return j;
}

/* Splits text into content and reasoning (or all content). */
static int split_text(const srv_resp_meta *m, inf_think *th, inf_buf *content, inf_buf *reasoning,
                      const char *text, size_t n, bool flush) {
    if (!m->split_think) return inf_buf_add(content, text, n);
    if (inf_think_push(th, content, reasoning, text, n)) return -1;
    return flush ? inf_think_flush(th, content, reasoning) : 0;
}

char *srv_response_body(const srv_resp_meta *m, const char *text, size_t n, inf_finish fin,
                        json_t *logprobs, int prompt_tokens, int completion_tokens,
                        const inf_timings *tm) {
    json_t *j = envelope(m, false);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (m->kind == SRV_CHAT) {
        inf_think th;
        inf_buf content = {0}, reasoning = {0};
        inf_think_init(&th, m->start_in_think);
        split_text(m, &th, &content, &reasoning, text, n, true);
        inf_think_free(&th);
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("assistant"));
        json_object_set_new(msg, "content",
                            srv_json_stringn(content.data ? content.data : "", content.len));
        if (reasoning.len)
            json_object_set_new(msg, "reasoning_content",
                                srv_json_stringn(reasoning.data, reasoning.len));
        json_object_set_new(msg, "refusal", json_null());
        json_object_set_new(choice, "message", msg);
        inf_buf_free(&content);
        inf_buf_free(&reasoning);
    } else {
        json_object_set_new(choice, "text", srv_json_stringn(text ? text : "", n));
    }
    json_object_set_new(choice, "logprobs", logprobs ? logprobs : json_null());
    json_object_set_new(choice, "finish_reason", json_string(srv_finish_name(fin)));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(j, "choices", choices);
    json_object_set_new(j, "usage", srv_usage_json(prompt_tokens, completion_tokens));
    if (tm) json_object_set_new(j, "timings", srv_timings_json(tm));
    return srv_json_dump_free(j);
}

void srv_stream_init(srv_stream *st, const srv_resp_meta *m, bool include_usage) {
    memset(st, 0, sizeof *st);
    st->meta = *m;
    st->include_usage = include_usage;
    inf_think_init(&st->think, m->start_in_think);
}

void srv_stream_free(srv_stream *st) {
    inf_think_free(&st->think);
}

static int frame(inf_buf *out, json_t *j) {
    char *s = srv_json_dump_free(j);
    if (!s) return -1;
    int rc = inf_buf_printf(out, "data: %s\n\n", s);
    free(s);
    return rc;
}

/* One chunk: a chat delta object or a completion text, and a finish reason. */
static json_t *chunk(const srv_stream *st, json_t *delta, const char *text, size_t n,
                     json_t *logprobs, const char *finish) {
    json_t *j = envelope(&st->meta, true);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (st->meta.kind == SRV_CHAT)
        json_object_set_new(choice, "delta", delta);
    else {
        json_decref(delta);
        json_object_set_new(choice, "text", srv_json_stringn(text ? text : "", n));
    }
    json_object_set_new(choice, "logprobs", logprobs ? logprobs : json_null());
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(j, "choices", choices);
    return j;
}

int srv_stream_begin(srv_stream *st, inf_buf *out) {
    if (st->meta.kind != SRV_CHAT) return 0;
    json_t *delta = json_object();
    json_object_set_new(delta, "role", json_string("assistant"));
    json_object_set_new(delta, "content", json_string(""));
    return frame(out, chunk(st, delta, NULL, 0, NULL, NULL));
}

static int delta_frame(srv_stream *st, inf_buf *out, const char *text, size_t n, json_t *logprobs,
                       bool flush) {
    inf_buf content = {0}, reasoning = {0};
    int rc = split_text(&st->meta, &st->think, &content, &reasoning, text, n, flush);
    if (!rc && (content.len || reasoning.len || logprobs)) {
        if (st->meta.kind == SRV_CHAT) {
            json_t *delta = json_object();
            if (content.len)
                json_object_set_new(delta, "content", srv_json_stringn(content.data, content.len));
            if (reasoning.len)
                json_object_set_new(delta, "reasoning_content",
                                    srv_json_stringn(reasoning.data, reasoning.len));
            rc = frame(out, chunk(st, delta, NULL, 0, logprobs, NULL));
        } else {
            rc = frame(out, chunk(st, NULL, content.data, content.len, logprobs, NULL));
        }
        logprobs = NULL;
    }
    json_decref(logprobs);
    inf_buf_free(&content);
    inf_buf_free(&reasoning);
    return rc;
}

int srv_stream_delta(srv_stream *st, inf_buf *out, const char *text, size_t n, json_t *logprobs) {
    return delta_frame(st, out, text, n, logprobs, false);
}

int srv_stream_end(srv_stream *st, inf_buf *out, inf_finish fin, int prompt_tokens,
                   int completion_tokens, const inf_timings *tm) {
    if (delta_frame(st, out, "", 0, NULL, true)) return -1;
    json_t *fin_chunk = chunk(st, json_object(), "", 0, NULL, srv_finish_name(fin));
    if (tm) json_object_set_new(fin_chunk, "timings", srv_timings_json(tm));
    if (frame(out, fin_chunk)) return -1;
    if (st->include_usage) {
        json_t *j = envelope(&st->meta, true);
        json_object_set_new(j, "choices", json_array());
        json_object_set_new(j, "usage", srv_usage_json(prompt_tokens, completion_tokens));
        if (frame(out, j)) return -1;
    }
    return inf_buf_adds(out, "data: [DONE]\n\n");
}

int srv_stream_error(inf_buf *out, const srv_error *e) {
    char *s = srv_error_json(e);
    if (!s) return -1;
    int rc = inf_buf_printf(out, "data: %s\n\n", s);
    free(s);
    return rc ? rc : inf_buf_adds(out, "data: [DONE]\n\n");
}
