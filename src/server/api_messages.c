/* Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens).
 *
 * The request: `system` and `messages` (content a string or blocks: text,
 * tool_use, tool_result, thinking) become the chat conversation Hugging Face
 * templates read — an assistant's tool_use blocks its tool_calls, its
 * thinking its reasoning_content, each tool_result a tool message; `tools`
 * (input_schema) become OpenAI chat's tools, `tool_choice` any/tool forces a
 * call through the constrained decoding. As Anthropic has it, max_tokens is
 * required and thinking is off unless `thinking` enables it (its
 * budget_tokens is checked as Anthropic checks it, and only max_tokens
 * bounds the output). A `seed` (integer) is accepted as an extension.
 *
 * The response: content blocks thinking, text and tool_use, one per reply
 * part, in order; stop_reason end_turn, max_tokens, stop_sequence (with the
 * string) or tool_use. Streamed as message_start, ping, per block
 * content_block_start, content_block_delta (thinking_delta, text_delta,
 * input_json_delta) and content_block_stop, then message_delta (stop reason
 * and usage) and message_stop. Errors are Anthropic's
 * {"type": "error", "error": {"type", "message"}}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "server/api.h"
#include "server/fields.h"

/* ---- the request ---- */

static bool is(const json_t *v, const char *s) {
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

static int add_text(inf_buf *b, json_t *text, const char *p, srv_error *e) {
    if (!json_is_string(text)) return srv_bad(e, p, "'text' must be a string");
    if (b->len && inf_buf_add(b, "\n", 1)) return srv_oom(e);
    return inf_buf_add(b, json_string_value(text), json_string_length(text)) ? srv_oom(e) : 0;
}

static json_t *buf_string(inf_buf *b) {
    json_t *s = json_stringn(b->data ? b->data : "", b->len);
    inf_buf_clear(b);
    return s;
}

/* A string or an array of text blocks, joined by newlines. */
static int text_blocks(json_t *v, const char *p, inf_buf *out, srv_error *e) {
    if (json_is_string(v)) return inf_buf_add(out, json_string_value(v), json_string_length(v));
    if (!json_is_array(v)) return srv_bad(e, p, "expected a string or an array of text blocks");
    size_t k;
    json_t *b;
    json_array_foreach(v, k, b) {
        char q[96];
        snprintf(q, sizeof q, "%s[%zu]", p, k);
        json_t *type = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(type))
            return srv_bad(e, q, "expected a block with a string 'type'");
        if (!is(type, "text"))
            return srv_bad(e, q, "'%s' blocks are not supported here (text only)",
                           json_string_value(type));
        if (add_text(out, json_object_get(b, "text"), q, e)) return -1;
    }
    return 0;
}

static int push(srv_request *r, json_t *m, srv_error *e) {
    return !m || json_array_append_new(r->messages, m) ? srv_oom(e) : 0;
}

static int user_message(srv_request *r, json_t *content, const char *where, srv_error *e) {
    if (json_is_string(content))
        return push(r, json_pack("{s:s,s:O}", "role", "user", "content", content), e);
    inf_buf text = {0};
    size_t k;
    json_t *b;
    int rc = 0;
    json_array_foreach(content, k, b) {
        char p[96];
        snprintf(p, sizeof p, "%s[%zu]", where, k);
        json_t *type = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(type)) {
            rc = srv_bad(e, p, "expected a content block with a string 'type'");
            break;
        }
        const char *t = json_string_value(type);
        if (!strcmp(t, "text")) {
            if ((rc = add_text(&text, json_object_get(b, "text"), p, e))) break;
        } else if (!strcmp(t, "tool_result")) {
            const char *id = NULL;
            char q[128];
            snprintf(q, sizeof q, "%s.tool_use_id", p);
            if ((rc = srv_get_string(b, "tool_use_id", q, &id, e))) break;
            if (!id) {
                rc = srv_bad(e, q, "is required");
                break;
            }
            bool err = false;
            snprintf(q, sizeof q, "%s.is_error", p);
            if ((rc = srv_get_bool(b, "is_error", q, &err, e))) break;
            /* text before a result stays before it */
            if (text.len &&
                (rc = push(r, json_pack("{s:s,s:o}", "role", "user", "content", buf_string(&text)),
                           e)))
                break;
            inf_buf res = {0};
            /* the template has no place for is_error: the result says it */
            if (err) inf_buf_adds(&res, "Error: ");
            json_t *c = srv_field(b, "content");
            snprintf(q, sizeof q, "%s.content", p);
            inf_buf body = {0};
            if (c && (rc = text_blocks(c, q, &body, e))) {
                inf_buf_free(&body);
                inf_buf_free(&res);
                break;
            }
            if (body.len) inf_buf_add(&res, body.data, body.len);
            inf_buf_free(&body);
            rc = push(r,
                      json_pack("{s:s,s:o,s:s}", "role", "tool", "content", buf_string(&res),
                                "tool_call_id", id),
                      e);
            inf_buf_free(&res);
            if (rc) break;
        } else if (!strcmp(t, "image") || !strcmp(t, "document")) {
            rc = srv_bad(e, p, "'%s' blocks are not supported (this server reads text only)", t);
            break;
        } else {
            rc = srv_bad(e, p,
                         "'%s' blocks are not supported in a user message (text, "
                         "tool_result)",
                         t);
            break;
        }
    }
    /* a message of tool results only is those tool messages */
    if (!rc && (text.len || !json_array_size(content)))
        rc = push(r, json_pack("{s:s,s:o}", "role", "user", "content", buf_string(&text)), e);
    inf_buf_free(&text);
    return rc;
}

static int assistant_message(srv_request *r, json_t *content, const char *where, srv_error *e) {
    if (json_is_string(content))
        return push(r, json_pack("{s:s,s:O}", "role", "assistant", "content", content), e);
    inf_buf text = {0}, think = {0};
    json_t *calls = NULL;
    size_t k;
    json_t *b;
    int rc = 0;
    json_array_foreach(content, k, b) {
        char p[96], q[128];
        snprintf(p, sizeof p, "%s[%zu]", where, k);
        json_t *type = json_object_get(b, "type");
        if (!json_is_object(b) || !json_is_string(type)) {
            rc = srv_bad(e, p, "expected a content block with a string 'type'");
            break;
        }
        const char *t = json_string_value(type);
        if (!strcmp(t, "text")) {
            if ((rc = add_text(&text, json_object_get(b, "text"), p, e))) break;
        } else if (!strcmp(t, "thinking")) {
            json_t *th = json_object_get(b, "thinking");
            snprintf(q, sizeof q, "%s.thinking", p);
            if (!json_is_string(th)) {
                rc = srv_bad(e, q, "expected a string");
                break;
            }
            if (think.len) inf_buf_add(&think, "\n", 1);
            inf_buf_add(&think, json_string_value(th), json_string_length(th));
        } else if (!strcmp(t, "redacted_thinking")) {
            /* encrypted by another server: nothing here can read it */
        } else if (!strcmp(t, "tool_use")) {
            const char *id = NULL, *name = NULL;
            snprintf(q, sizeof q, "%s.id", p);
            if ((rc = srv_get_string(b, "id", q, &id, e))) break;
            if (!id) {
                rc = srv_bad(e, q, "is required");
                break;
            }
            snprintf(q, sizeof q, "%s.name", p);
            if ((rc = srv_get_string(b, "name", q, &name, e))) break;
            if (!name || !*name) {
                rc = srv_bad(e, q, "a non-empty string is required");
                break;
            }
            json_t *input = json_object_get(b, "input");
            snprintf(q, sizeof q, "%s.input", p);
            if (!json_is_object(input)) {
                rc = srv_bad(e, q, "expected an object");
                break;
            }
            if (!calls) calls = json_array();
            json_array_append_new(calls,
                                  json_pack("{s:s,s:s,s:{s:s,s:O}}", "id", id, "type", "function",
                                            "function", "name", name, "arguments", input));
        } else {
            rc = srv_bad(e, p,
                         "'%s' blocks are not supported in an assistant message (text, "
                         "thinking, tool_use)",
                         t);
            break;
        }
    }
    if (!rc) {
        /* content is a string even beside tool calls (Qwen3's template needs one) */
        json_t *m = json_pack("{s:s,s:o}", "role", "assistant", "content", buf_string(&text));
        if (think.len) json_object_set_new(m, "reasoning_content", buf_string(&think));
        if (calls) json_object_set(m, "tool_calls", calls);
        rc = push(r, m, e);
    }
    json_decref(calls);
    inf_buf_free(&text);
    inf_buf_free(&think);
    return rc;
}

static int parse_messages(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    r->messages = json_array();
    if (!r->messages) return srv_oom(e);
    json_t *sys = srv_field(o, "system");
    if (sys) {
        inf_buf b = {0};
        if (text_blocks(sys, "system", &b, e)) {
            inf_buf_free(&b);
            return -1;
        }
        int rc = push(r, json_pack("{s:s,s:o}", "role", "system", "content", buf_string(&b)), e);
        inf_buf_free(&b);
        if (rc) return -1;
    }
    json_t *msgs = json_object_get(o, "messages");
    if (srv_check_messages(msgs, e)) return -1;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        char p[64];
        snprintf(p, sizeof p, "messages[%zu]", i);
        if (!json_is_object(m)) return srv_bad(e, p, "expected an object");
        json_t *role = json_object_get(m, "role");
        snprintf(p, sizeof p, "messages[%zu].role", i);
        if (!is(role, "user") && !is(role, "assistant"))
            return srv_bad(e, p, "expected \"user\" or \"assistant\"");
        json_t *content = json_object_get(m, "content");
        snprintf(p, sizeof p, "messages[%zu].content", i);
        if (!json_is_string(content) && !json_is_array(content))
            return srv_bad(e, p, "expected a string or an array of content blocks");
        if (is(role, "user") ? user_message(r, content, p, e) : assistant_message(r, content, p, e))
            return -1;
    }
    return 0;
}

static int parse_tools(srv_request *r, srv_error *e) {
    json_t *tools = srv_field(r->root, "tools");
    char p[64];
    if (tools) {
        if (!json_is_array(tools)) return srv_bad(e, "tools", "expected an array");
        if (json_array_size(tools)) r->tools = json_array();
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            snprintf(p, sizeof p, "tools[%zu]", i);
            if (!json_is_object(t)) return srv_bad(e, p, "expected an object");
            json_t *type = srv_field(t, "type");
            snprintf(p, sizeof p, "tools[%zu].type", i);
            if (type && !json_is_string(type)) return srv_bad(e, p, "expected a string");
            if (type && !is(type, "custom"))
                return srv_bad(e, p,
                               "'%s' tools are not supported (client tools with an input_schema "
                               "only: this server runs no server tools)",
                               json_string_value(type));
            const char *name = NULL, *desc = NULL;
            snprintf(p, sizeof p, "tools[%zu].name", i);
            if (srv_get_string(t, "name", p, &name, e)) return -1;
            if (!name || !*name) return srv_bad(e, p, "a non-empty string is required");
            snprintf(p, sizeof p, "tools[%zu].description", i);
            if (srv_get_string(t, "description", p, &desc, e)) return -1;
            json_t *schema = srv_field(t, "input_schema");
            snprintf(p, sizeof p, "tools[%zu].input_schema", i);
            if (!json_is_object(schema)) return srv_bad(e, p, "a JSON Schema object is required");
            json_t *fn = json_pack("{s:s}", "name", name);
            if (desc) json_object_set_new(fn, "description", json_string(desc));
            json_object_set(fn, "parameters", schema);
            json_array_append_new(r->tools,
                                  json_pack("{s:s,s:o}", "type", "function", "function", fn));
        }
    }
    json_t *tc = srv_field(r->root, "tool_choice");
    if (tc) {
        json_t *type = json_object_get(tc, "type");
        if (!json_is_object(tc) || !json_is_string(type))
            return srv_bad(e, "tool_choice", "expected an object with a string 'type'");
        const char *t = json_string_value(type);
        if (!strcmp(t, "auto"))
            r->tool_choice = SRV_TOOLS_AUTO;
        else if (!strcmp(t, "any"))
            r->tool_choice = SRV_TOOLS_REQUIRED;
        else if (!strcmp(t, "none"))
            r->tool_choice = SRV_TOOLS_NONE;
        else if (!strcmp(t, "tool")) {
            const char *name = NULL;
            if (srv_get_string(tc, "name", "tool_choice.name", &name, e)) return -1;
            if (!name) return srv_bad(e, "tool_choice.name", "is required");
            if (srv_tool_choice_named(r, name, "tool_choice.name", e)) return -1;
        } else
            return srv_bad(e, "tool_choice.type", "'%s' is not one of auto, any, tool, none", t);
        bool dis = false;
        if (srv_get_bool(tc, "disable_parallel_tool_use", "tool_choice.disable_parallel_tool_use",
                         &dis, e))
            return -1;
        r->parallel_tool_calls = !dis;
    }
    return 0;
}

/* output_config.format → the grammar; a forced tool call → its grammar. */
static int parse_constraint(srv_request *r, srv_error *e) {
    json_t *oc = srv_field(r->root, "output_config");
    json_t *fmt = NULL;
    inf_err err = {{0}};
    if (oc) {
        if (!json_is_object(oc)) return srv_bad(e, "output_config", "expected an object");
        json_t *eff = srv_field(oc, "effort");
        if (eff && !is(eff, "low") && !is(eff, "medium") && !is(eff, "high") && !is(eff, "xhigh") &&
            !is(eff, "max"))
            return srv_bad(e, "output_config.effort", "expected low, medium, high, xhigh or max");
        fmt = srv_field(oc, "format");
    }
    if (fmt) {
        if (!json_is_object(fmt) || !is(json_object_get(fmt, "type"), "json_schema"))
            return srv_bad(e, "output_config.format",
                           "expected {\"type\": \"json_schema\", \"schema\": ...}");
        json_t *schema = srv_field(fmt, "schema");
        if (!json_is_object(schema))
            return srv_bad(e, "output_config.format.schema", "a JSON Schema object is required");
        if (inf_gram_from_json_schema(&r->grammar, schema, &err))
            return srv_bad(e, "output_config.format.schema", "%s", err.msg);
    }
    /* the tools (each name once) and tool_choice as chat applies them: "none"
       drops them, required and named force a call through its grammar (a 400
       beside the format's grammar) */
    if (r->tools && srv_tools_check(r->tools, "tools", e)) return -1;
    return srv_request_apply_tools(r, "tool_choice", e);
}

static int parse_fields(srv_request *r, bool count, srv_error *e) {
    json_t *o = r->root;
    static const char *const refused[] = {"container", "mcp_servers"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (srv_field(o, refused[i]))
            return srv_bad(e, refused[i], "is not supported (this server runs no server tools)");
    if (srv_get_string(o, "model", NULL, &r->model, e)) return -1;
    if (parse_messages(r, e)) return -1;
    if (parse_tools(r, e)) return -1;

    long long x = 0;
    bool have = false;
    if (srv_get_int(o, "max_tokens", NULL, 1, INT32_MAX, &x, &have, e)) return -1;
    if (!have && !count) return srv_bad(e, "max_tokens", "is required");
    if (have) r->max_tokens = (int)x;

    json_t *th = srv_field(o, "thinking");
    r->enable_thinking = false; /* Anthropic: off unless enabled */
    if (th) {
        json_t *type = json_object_get(th, "type");
        if (!json_is_object(th) || !json_is_string(type))
            return srv_bad(e, "thinking", "expected an object with a string 'type'");
        if (is(type, "enabled")) {
            long long budget = 0;
            if (srv_get_int(th, "budget_tokens", "thinking.budget_tokens", 1024, INT32_MAX, &budget,
                            &have, e))
                return -1;
            if (!have) return srv_bad(e, "thinking.budget_tokens", "is required");
            if (r->max_tokens > 0 && budget >= r->max_tokens)
                return srv_bad(e, "thinking.budget_tokens", "must be less than max_tokens (%d)",
                               r->max_tokens);
            r->enable_thinking = true;
        } else if (is(type, "adaptive")) {
            r->enable_thinking = true;
        } else if (!is(type, "disabled")) {
            return srv_bad(e, "thinking.type", "expected enabled, adaptive or disabled");
        }
    }

    srv_sampling *s = &r->samp;
    if (srv_get_number(o, "temperature", NULL, 0, 1, &s->temperature, e)) return -1;
    if (srv_get_number(o, "top_p", NULL, 0, 1, &s->top_p, e)) return -1;
    if (srv_get_int(o, "top_k", NULL, 0, INT32_MAX, &x, &have, e)) return -1;
    if (have) s->top_k = (int)x;
    if (srv_get_int(o, "seed", NULL, INT64_MIN, INT64_MAX, &x, &have, e)) return -1;
    if (have) {
        s->seed = (uint64_t)x;
        s->has_seed = true;
    }
    json_t *stop = srv_field(o, "stop_sequences");
    if (stop) {
        if (!json_is_array(stop))
            return srv_bad(e, "stop_sequences", "expected an array of strings");
        if (json_array_size(stop) > INF_MAX_STOPS)
            return srv_bad(e, "stop_sequences", "at most %d stop sequences", INF_MAX_STOPS);
        size_t i;
        json_t *v;
        json_array_foreach(stop, i, v) {
            if (!json_is_string(v))
                return srv_bad(e, "stop_sequences", "element %zu: expected a string", i);
            if (json_string_length(v)) r->stop[r->n_stop++] = json_string_value(v);
        }
    }
    if (srv_get_bool(o, "stream", NULL, &r->stream, e)) return -1;
    json_t *md = srv_field(o, "metadata");
    if (md && !json_is_object(md)) return srv_bad(e, "metadata", "expected an object");
    const char *str = NULL;
    if (srv_get_string(o, "service_tier", NULL, &str, e)) return -1;
    return parse_constraint(r, e);
}

static int parse_common(srv_request *r, const char *body, size_t len,
                        const inf_sampler_params *defaults, bool count, srv_error *e) {
    srv_request_init(r, SRV_CHAT, defaults);
    r->root = srv_parse_object(body, len, e);
    if (!r->root) return -1;
    if (parse_fields(r, count, e)) {
        srv_request_free(r);
        return -1;
    }
    return 0;
}

static int messages_parse(srv_request *r, const char *body, size_t len,
                          const inf_sampler_params *defaults, srv_error *e) {
    return parse_common(r, body, len, defaults, false, e);
}

int srv_messages_count_parse(srv_request *r, const char *body, size_t len, srv_error *e) {
    return parse_common(r, body, len, NULL, true, e);
}

/* ---- the response ---- */

static bool makes_block(const inf_part *p) {
    return p->kind == INF_PART_TOOL_CALL || p->n > 0;
}

static json_t *block_json(const srv_resp_meta *m, const inf_part *p, int c, bool full) {
    if (p->kind == INF_PART_TEXT)
        return json_pack("{s:s,s:o}", "type", "text", "text",
                         full ? srv_json_stringn(p->text, p->n) : json_string(""));
    if (p->kind == INF_PART_REASONING)
        return json_pack("{s:s,s:o,s:s}", "type", "thinking", "thinking",
                         full ? srv_json_stringn(p->text, p->n) : json_string(""), "signature", "");
    char id[96];
    srv_tool_call_id(m, "toolu_", c, id, sizeof id);
    json_t *input = full ? json_loadb(p->text, p->n, 0, NULL) : NULL;
    if (!json_is_object(input)) {
        json_decref(input);
        input = json_object();
    }
    return json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", id, "name", p->name, "input",
                     input);
}

static const char *stop_reason(const srv_outcome *o, int n_calls) {
    if (o->finish == INF_FINISH_LENGTH) return "max_tokens";
    if (o->stop_string) return "stop_sequence";
    return n_calls ? "tool_use" : "end_turn";
}

/* Anthropic counts input_tokens apart from what was read from a cache. */
static json_t *usage_json(const srv_outcome *o) {
    return json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", o->prompt_tokens - o->cached_tokens,
                     "cache_creation_input_tokens", 0, "cache_read_input_tokens", o->cached_tokens,
                     "output_tokens", o->completion_tokens);
}

static json_t *message_json(const srv_resp_meta *m) {
    return json_pack("{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:n,s:n}", "id", m->id, "type", "message",
                     "role", "assistant", "model", m->model, "content", "stop_reason",
                     "stop_sequence", "stop_details", "container");
}

static char *messages_body(const srv_resp_meta *m, const inf_parts *ps, const srv_outcome *o) {
    json_t *j = message_json(m);
    json_t *content = json_object_get(j, "content");
    int c = 0;
    for (int i = 0; i < ps->n; i++) {
        const inf_part *p = &ps->v[i];
        if (!makes_block(p)) continue;
        json_array_append_new(content, block_json(m, p, c, true));
        c += p->kind == INF_PART_TOOL_CALL;
    }
    json_object_set_new(j, "stop_reason", json_string(stop_reason(o, c)));
    json_object_set_new(j, "stop_sequence",
                        o->stop_string ? json_string(o->stop_string) : json_null());
    json_object_set_new(j, "usage", usage_json(o));
    return srv_json_dump_free(j);
}

/* ---- streaming ---- */

static int event(inf_buf *out, const char *type, json_t *j) {
    if (!j) return -1;
    json_t *head = json_pack("{s:s}", "type", type);
    json_object_update(head, j);
    json_decref(j);
    return srv_sse_frame(out, type, head);
}

#define PING "event: ping\ndata: {\"type\":\"ping\"}\n\n"

static int messages_stream_begin(srv_stream *st, inf_buf *out) {
    st->open = -1;
    st->n_blocks = 0;
    st->n_calls = 0;
    json_t *msg = message_json(&st->meta);
    /* what the cache holds is known only later: message_delta's usage splits
       the prompt into input_tokens and cache_read_input_tokens */
    json_object_set_new(msg, "usage",
                        json_pack("{s:i,s:i,s:i,s:i}", "input_tokens", st->prompt_tokens,
                                  "cache_creation_input_tokens", 0, "cache_read_input_tokens", 0,
                                  "output_tokens", 0));
    int rc = event(out, "message_start", json_pack("{s:o}", "message", msg));
    rc |= inf_buf_adds(out, PING);
    return rc ? -1 : 0;
}

static int close_block(srv_stream *st, inf_buf *out) {
    if (st->open < 0) return 0;
    int rc = event(out, "content_block_stop", json_pack("{s:i}", "index", st->open));
    st->open = -1;
    return rc;
}

static int messages_stream_parts(srv_stream *st, inf_buf *out, const inf_parts *ps,
                                 json_t *logprobs) {
    json_decref(logprobs);
    int rc = 0;
    for (int i = 0; i < ps->n; i++) {
        const inf_part *p = &ps->v[i];
        if (!makes_block(p)) continue;
        if (p->kind == INF_PART_TOOL_CALL) {
            rc |= close_block(st, out);
            int k = st->n_blocks++;
            rc |= event(out, "content_block_start",
                        json_pack("{s:i,s:o}", "index", k, "content_block",
                                  block_json(&st->meta, p, st->n_calls++, false)));
            rc |= event(out, "content_block_delta",
                        json_pack("{s:i,s:{s:s,s:o}}", "index", k, "delta", "type",
                                  "input_json_delta", "partial_json",
                                  srv_json_stringn(p->text, p->n)));
            rc |= event(out, "content_block_stop", json_pack("{s:i}", "index", k));
            continue;
        }
        if (st->open < 0 || st->open_kind != p->kind) {
            rc |= close_block(st, out);
            st->open = st->n_blocks++;
            st->open_kind = p->kind;
            rc |= event(out, "content_block_start",
                        json_pack("{s:i,s:o}", "index", st->open, "content_block",
                                  block_json(&st->meta, p, 0, false)));
        }
        bool text = p->kind == INF_PART_TEXT;
        rc |= event(out, "content_block_delta",
                    json_pack("{s:i,s:{s:s,s:o}}", "index", st->open, "delta", "type",
                              text ? "text_delta" : "thinking_delta", text ? "text" : "thinking",
                              srv_json_stringn(p->text, p->n)));
    }
    return rc ? -1 : 0;
}

static int messages_stream_end(srv_stream *st, inf_buf *out, const srv_outcome *o) {
    int rc = close_block(st, out);
    rc |= event(out, "message_delta",
                json_pack("{s:{s:s,s:o,s:n},s:o}", "delta", "stop_reason",
                          stop_reason(o, st->n_calls), "stop_sequence",
                          o->stop_string ? json_string(o->stop_string) : json_null(),
                          "stop_details", "usage", usage_json(o)));
    rc |= event(out, "message_stop", json_object());
    return rc ? -1 : 0;
}

/* Anthropic's error types by HTTP status. */
static const char *error_type(int status) {
    switch (status) {
    case 400:
    case 405:
    case 415:
    case 421:
        return "invalid_request_error";
    case 401:
        return "authentication_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 503:
    case 529:
        return "overloaded_error";
    default:
        return status < 500 ? "invalid_request_error" : "api_error";
    }
}

static json_t *error_json(const srv_error *e) {
    return json_pack("{s:s,s:{s:s,s:o}}", "type", "error", "error", "type", error_type(e->status),
                     "message", srv_json_stringn(e->msg, strlen(e->msg)));
}

static char *messages_error_body(const srv_error *e) {
    return srv_json_dump_free(error_json(e));
}

static int messages_stream_error(inf_buf *out, const srv_error *e) {
    return srv_sse_frame(out, "error", error_json(e));
}

const srv_api srv_api_messages = {
    .name = "messages",
    .kind = SRV_CHAT,
    .id_prefix = "msg_",
    .parse = messages_parse,
    .echo = NULL,
    .body = messages_body,
    .stream_begin = messages_stream_begin,
    .stream_parts = messages_stream_parts,
    .stream_end = messages_stream_end,
    .error_body = messages_error_body,
    .stream_error = messages_stream_error,
    .ping = PING,
};
