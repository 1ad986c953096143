/* OpenAI's chat completions and completions, as srv_apis: the request parser
 * is oai.c's; here are the writers.
 *
 * A chat stream is framed as OpenAI frames it: a first chunk with the
 * assistant role, then chunks whose delta holds new content, reasoning_content
 * or tool_calls (a call's index, id, type and name first, then its arguments),
 * a chunk with an empty delta and the finish_reason ("tool_calls" when the
 * reply called tools), when stream_options.include_usage a chunk with
 * "choices": [] and the usage, then `data: [DONE]`. Completions stream their
 * text the same way, without roles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

static const char *finish_name(const inf_parts *p, const srv_outcome *o) {
    if (o->finish == INF_FINISH_LENGTH) return "length";
    return inf_parts_calls(p) ? "tool_calls" : "stop";
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

static json_t *usage_json(const srv_outcome *o) {
    json_t *u = srv_usage_json(o->prompt_tokens, o->completion_tokens);
    json_object_set_new(u, "prompt_tokens_details",
                        json_pack("{s:i}", "cached_tokens", o->cached_tokens));
    return u;
}

/* The parts of one kind, joined. */
static void join(const inf_parts *p, inf_part_kind kind, inf_buf *out) {
    for (int i = 0; i < p->n; i++)
        if (p->v[i].kind == kind) inf_buf_add(out, p->v[i].text, p->v[i].n);
}

static json_t *tool_call_json(const srv_resp_meta *m, const inf_part *c, int index, bool with_index,
                              bool with_args) {
    char id[80];
    srv_tool_call_id(m, "call_", index, id, sizeof id);
    json_t *fn = json_object();
    json_object_set_new(fn, "name", srv_json_stringn(c->name, strlen(c->name)));
    json_object_set_new(fn, "arguments",
                        with_args ? srv_json_stringn(c->text, c->n) : json_string(""));
    json_t *j = json_object();
    if (with_index) json_object_set_new(j, "index", json_integer(index));
    json_object_set_new(j, "id", json_string(id));
    json_object_set_new(j, "type", json_string("function"));
    json_object_set_new(j, "function", fn);
    return j;
}

static char *body(const srv_resp_meta *m, const inf_parts *p, const srv_outcome *o) {
    json_t *j = envelope(m, false);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    inf_buf text = {0};
    join(p, INF_PART_TEXT, &text);
    if (m->kind == SRV_CHAT) {
        inf_buf reasoning = {0};
        join(p, INF_PART_REASONING, &reasoning);
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("assistant"));
        int calls = inf_parts_calls(p);
        json_object_set_new(msg, "content",
                            text.len || !calls
                                ? srv_json_stringn(text.data ? text.data : "", text.len)
                                : json_null());
        if (reasoning.len)
            json_object_set_new(msg, "reasoning_content",
                                srv_json_stringn(reasoning.data, reasoning.len));
        if (calls) {
            json_t *tc = json_array();
            for (int i = 0, k = 0; i < p->n; i++)
                if (p->v[i].kind == INF_PART_TOOL_CALL)
                    json_array_append_new(tc, tool_call_json(m, &p->v[i], k++, false, true));
            json_object_set_new(msg, "tool_calls", tc);
        }
        json_object_set_new(msg, "refusal", json_null());
        json_object_set_new(choice, "message", msg);
        inf_buf_free(&reasoning);
    } else {
        json_object_set_new(choice, "text", srv_json_stringn(text.data ? text.data : "", text.len));
    }
    inf_buf_free(&text);
    json_object_set_new(choice, "logprobs", o->logprobs ? json_incref(o->logprobs) : json_null());
    json_object_set_new(choice, "finish_reason", json_string(finish_name(p, o)));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(j, "choices", choices);
    json_object_set_new(j, "usage", usage_json(o));
    if (o->timings) json_object_set_new(j, "timings", srv_timings_json(o->timings, o->draft));
    return srv_json_dump_free(j);
}

/* One chunk: a chat delta object or a completion text, and a finish reason. */
static json_t *chunk(const srv_stream *st, json_t *delta, const char *text, size_t n,
                     json_t *logprobs, const char *finish) {
    json_t *j = envelope(&st->meta, true);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (st->meta.kind == SRV_CHAT) {
        json_object_set_new(choice, "delta", delta);
    } else {
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

static int stream_begin(srv_stream *st, inf_buf *out) {
    if (st->meta.kind != SRV_CHAT) return 0;
    json_t *delta = json_object();
    json_object_set_new(delta, "role", json_string("assistant"));
    json_object_set_new(delta, "content", json_string(""));
    return srv_sse_frame(out, NULL, chunk(st, delta, NULL, 0, NULL, NULL));
}

static json_t *one_call_delta(json_t *call) {
    json_t *a = json_array();
    json_array_append_new(a, call);
    return json_pack("{s:o}", "tool_calls", a);
}

static int stream_parts(srv_stream *st, inf_buf *out, const inf_parts *p, json_t *logprobs) {
    int rc = 0;
    if (p->n == 0) /* logprobs of tokens whose text is held */
        return srv_sse_frame(out, NULL, chunk(st, json_object(), "", 0, logprobs, NULL));
    for (int i = 0; i < p->n && !rc; i++) {
        const inf_part *q = &p->v[i];
        json_t *lp = i == 0 ? logprobs : NULL;
        if (st->meta.kind != SRV_CHAT) {
            rc = srv_sse_frame(out, NULL, chunk(st, NULL, q->text, q->n, lp, NULL));
        } else if (q->kind == INF_PART_TOOL_CALL) {
            int k = st->n_calls++;
            /* the call's id, type and name, then its arguments */
            json_t *head = tool_call_json(&st->meta, q, k, true, false);
            rc = srv_sse_frame(out, NULL, chunk(st, one_call_delta(head), NULL, 0, lp, NULL));
            json_t *args = json_pack("{s:i,s:{s:o}}", "index", k, "function", "arguments",
                                     srv_json_stringn(q->text, q->n));
            if (!rc)
                rc = srv_sse_frame(out, NULL, chunk(st, one_call_delta(args), NULL, 0, NULL, NULL));
        } else {
            json_t *delta = json_object();
            json_object_set_new(delta, q->kind == INF_PART_TEXT ? "content" : "reasoning_content",
                                srv_json_stringn(q->text, q->n));
            rc = srv_sse_frame(out, NULL, chunk(st, delta, NULL, 0, lp, NULL));
        }
    }
    return rc;
}

static int stream_end(srv_stream *st, inf_buf *out, const srv_outcome *o) {
    json_t *fin = chunk(st, json_object(), "", 0, NULL, finish_name(&st->all, o));
    if (o->timings) json_object_set_new(fin, "timings", srv_timings_json(o->timings, o->draft));
    if (srv_sse_frame(out, NULL, fin)) return -1;
    if (st->include_usage) {
        json_t *j = envelope(&st->meta, true);
        json_object_set_new(j, "choices", json_array());
        json_object_set_new(j, "usage", usage_json(o));
        if (srv_sse_frame(out, NULL, j)) return -1;
    }
    return inf_buf_adds(out, "data: [DONE]\n\n");
}

static int stream_error(inf_buf *out, const srv_error *e) {
    char *s = srv_error_json(e);
    if (!s) return -1;
    int rc = inf_buf_printf(out, "data: %s\n\n", s);
    free(s);
    return rc ? rc : inf_buf_adds(out, "data: [DONE]\n\n");
}

static int parse_chat(srv_request *r, const char *b, size_t n, const inf_sampler_params *d,
                      srv_error *e) {
    return srv_request_parse(r, SRV_CHAT, b, n, d, e);
}

static int parse_completion(srv_request *r, const char *b, size_t n, const inf_sampler_params *d,
                            srv_error *e) {
    return srv_request_parse(r, SRV_COMPLETION, b, n, d, e);
}

const srv_api srv_api_chat = {
    .name = "chat.completions",
    .kind = SRV_CHAT,
    .id_prefix = "chatcmpl-",
    .parse = parse_chat,
    .body = body,
    .stream_begin = stream_begin,
    .stream_parts = stream_parts,
    .stream_end = stream_end,
    .error_body = srv_error_json,
    .stream_error = stream_error,
};

const srv_api srv_api_completions = {
    .name = "completions",
    .kind = SRV_COMPLETION,
    .id_prefix = "cmpl-",
    .parse = parse_completion,
    .body = body,
    .stream_begin = stream_begin,
    .stream_parts = stream_parts,
    .stream_end = stream_end,
    .error_body = srv_error_json,
    .stream_error = stream_error,
};
