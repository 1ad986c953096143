/* OpenAI's Responses API (POST /v1/responses), stateless.
 *
 * The request: `input` (a string, or items: messages, function_call,
 * function_call_output, reasoning) with `instructions` first becomes the
 * chat conversation Hugging Face templates read; function `tools` become
 * OpenAI chat's tools; `text.format` becomes the grammar. Nothing is stored:
 * `store` is accepted (true or false) and ignored, and what needs a stored
 * response or conversation (previous_response_id, conversation, item
 * references, background) is refused with a 400 naming the field.
 *
 * The response: output items `reasoning` (reasoning_text content),
 * `message` (one output_text) and `function_call`, one per reply part, in
 * order; streamed as response.created, response.in_progress, then per item
 * output_item.added, content_part.added, the deltas, the .done events and
 * output_item.done, and finally response.completed (or response.incomplete
 * when max_output_tokens ended it) holding the whole response, every event
 * with its sequence_number. */
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

/* Text of a content array: parts of the given types joined (other types are
 * a 400 naming the part). */
static int parts_text(json_t *content, const char *where, const char *const *types, int n_types,
                      inf_buf *out, srv_error *e) {
    size_t k;
    json_t *part;
    json_array_foreach(content, k, part) {
        char p[96];
        snprintf(p, sizeof p, "%s[%zu]", where, k);
        json_t *type = json_object_get(part, "type");
        if (!json_is_object(part) || !json_is_string(type))
            return srv_bad(e, p, "expected a content part with a string 'type'");
        const char *t = json_string_value(type);
        int i = 0;
        while (i < n_types && strcmp(t, types[i]))
            i++;
        if (i == n_types) {
            if (!strncmp(t, "input_", 6) && strcmp(t, "input_text"))
                return srv_bad(e, p, "'%s' parts are not supported (this server reads text only)",
                               t);
            return srv_bad(e, p, "unknown content part type '%s'", t);
        }
        const char *key = !strcmp(t, "refusal") ? "refusal" : "text";
        json_t *text = json_object_get(part, key);
        if (!json_is_string(text)) return srv_bad(e, p, "'%s' must be a string", key);
        if (inf_buf_add(out, json_string_value(text), json_string_length(text))) return srv_oom(e);
    }
    return 0;
}

/* content (a string or parts) → a JSON string. */
static json_t *content_string(json_t *content, const char *where, bool assistant, srv_error *e) {
    if (json_is_string(content)) return json_incref(content);
    if (!json_is_array(content))
        return srv_bad(e, where, "expected a string or an array of content parts"), NULL;
    static const char *const user_types[] = {"input_text", "output_text"};
    static const char *const asst_types[] = {"output_text", "input_text", "refusal"};
    inf_buf b = {0};
    if (parts_text(content, where, assistant ? asst_types : user_types, assistant ? 3 : 2, &b, e)) {
        inf_buf_free(&b);
        return NULL;
    }
    json_t *s = json_stringn(b.data ? b.data : "", b.len);
    inf_buf_free(&b);
    if (!s) srv_oom(e);
    return s;
}

/* The assistant turn being assembled from consecutive reasoning, message and
 * function_call items. */
typedef struct turn {
    json_t *msg; /* {role: assistant, ...} or NULL */
} turn;

static int flush(srv_request *r, turn *t) {
    if (!t->msg) return 0;
    /* Qwen3's template needs a string content beside tool calls */
    if (!json_object_get(t->msg, "content"))
        json_object_set_new(t->msg, "content", json_string(""));
    int rc = json_array_append_new(r->messages, t->msg);
    t->msg = NULL;
    return rc;
}

static json_t *turn_msg(turn *t) {
    if (!t->msg) t->msg = json_pack("{s:s}", "role", "assistant");
    return t->msg;
}

static int add_item(srv_request *r, turn *t, json_t *it, size_t i, srv_error *e) {
    char where[48], p[96];
    snprintf(where, sizeof where, "input[%zu]", i);
    if (!json_is_object(it)) return srv_bad(e, where, "expected an object");
    json_t *type = json_object_get(it, "type");
    if (type && !json_is_string(type)) return srv_bad(e, where, "'type' must be a string");
    const char *ty = type ? json_string_value(type) : "message";
    if (!strcmp(ty, "message")) {
        json_t *role = json_object_get(it, "role");
        snprintf(p, sizeof p, "%s.role", where);
        if (!json_is_string(role))
            return srv_bad(e, p, "expected one of user, assistant, system, developer");
        const char *ro = json_string_value(role);
        bool asst = !strcmp(ro, "assistant");
        if (!asst && strcmp(ro, "user") && strcmp(ro, "system") && strcmp(ro, "developer"))
            return srv_bad(e, p, "unknown role '%s' (user, assistant, system, developer)", ro);
        snprintf(p, sizeof p, "%s.content", where);
        json_t *content = json_object_get(it, "content");
        if (!content) return srv_bad(e, p, "is required");
        json_t *s = content_string(content, p, asst, e);
        if (!s) return -1;
        if (asst) {
            if (t->msg &&
                (json_object_get(t->msg, "content") || json_object_get(t->msg, "tool_calls")))
                flush(r, t);
            return json_object_set_new(turn_msg(t), "content", s) ? srv_oom(e) : 0;
        }
        flush(r, t);
        json_t *m =
            json_pack("{s:s,s:o}", "role", strcmp(ro, "developer") ? ro : "system", "content", s);
        return json_array_append_new(r->messages, m) ? srv_oom(e) : 0;
    }
    if (!strcmp(ty, "function_call")) {
        const char *call_id = NULL, *name = NULL, *args = NULL;
        snprintf(p, sizeof p, "%s.call_id", where);
        if (srv_get_string(it, "call_id", p, &call_id, e)) return -1;
        if (!call_id) return srv_bad(e, p, "is required");
        snprintf(p, sizeof p, "%s.name", where);
        if (srv_get_string(it, "name", p, &name, e)) return -1;
        if (!name || !*name) return srv_bad(e, p, "a non-empty string is required");
        snprintf(p, sizeof p, "%s.arguments", where);
        if (srv_get_string(it, "arguments", p, &args, e)) return -1;
        if (!args) return srv_bad(e, p, "is required (a JSON object in a string)");
        json_t *obj = json_loads(args, JSON_DECODE_ANY, NULL);
        if (!json_is_object(obj)) {
            json_decref(obj);
            return srv_bad(e, p, "expected a JSON object in a string");
        }
        json_t *m = turn_msg(t);
        json_t *calls = json_object_get(m, "tool_calls");
        if (!calls) {
            calls = json_array();
            json_object_set_new(m, "tool_calls", calls);
        }
        json_t *call = json_pack("{s:s,s:s,s:{s:s,s:o}}", "id", call_id, "type", "function",
                                 "function", "name", name, "arguments", obj);
        return json_array_append_new(calls, call) ? srv_oom(e) : 0;
    }
    if (!strcmp(ty, "function_call_output")) {
        const char *call_id = NULL;
        snprintf(p, sizeof p, "%s.call_id", where);
        if (srv_get_string(it, "call_id", p, &call_id, e)) return -1;
        if (!call_id) return srv_bad(e, p, "is required");
        snprintf(p, sizeof p, "%s.output", where);
        json_t *out = json_object_get(it, "output");
        if (!out) return srv_bad(e, p, "is required");
        static const char *const types[] = {"input_text"};
        json_t *s = json_is_string(out) ? json_incref(out) : NULL;
        if (!s && json_is_array(out)) {
            inf_buf b = {0};
            if (parts_text(out, p, types, 1, &b, e)) {
                inf_buf_free(&b);
                return -1;
            }
            s = json_stringn(b.data ? b.data : "", b.len);
            inf_buf_free(&b);
        } else if (!s) {
            return srv_bad(e, p, "expected a string or an array of input_text parts");
        }
        flush(r, t);
        json_t *m =
            json_pack("{s:s,s:o,s:s}", "role", "tool", "content", s, "tool_call_id", call_id);
        return json_array_append_new(r->messages, m) ? srv_oom(e) : 0;
    }
    if (!strcmp(ty, "reasoning")) {
        /* its reasoning_text content, else its summary: the assistant's
           reasoning_content (encrypted_content cannot be read here) */
        json_t *content = srv_field(it, "content"), *summary = srv_field(it, "summary");
        inf_buf b = {0};
        static const char *const ct[] = {"reasoning_text"}, *const st[] = {"summary_text"};
        snprintf(p, sizeof p, "%s.%s", where, content ? "content" : "summary");
        json_t *src = content ? content : summary;
        if (src && !json_is_array(src)) return srv_bad(e, p, "expected an array");
        if (src && parts_text(src, p, content ? ct : st, 1, &b, e)) {
            inf_buf_free(&b);
            return -1;
        }
        if (t->msg) flush(r, t);
        json_t *rc = json_stringn(b.data ? b.data : "", b.len);
        inf_buf_free(&b);
        return json_object_set_new(turn_msg(t), "reasoning_content", rc) ? srv_oom(e) : 0;
    }
    if (!strcmp(ty, "item_reference"))
        return srv_bad(e, where,
                       "item references need stored responses; this server stores "
                       "nothing (send the items themselves)");
    return srv_bad(e, where,
                   "item type '%s' is not supported (message, function_call, "
                   "function_call_output, reasoning)",
                   ty);
}

static int parse_input(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    r->messages = json_array();
    if (!r->messages) return srv_oom(e);
    json_t *ins = srv_field(o, "instructions");
    if (ins) {
        if (!json_is_string(ins)) return srv_bad(e, "instructions", "expected a string");
        json_array_append_new(r->messages,
                              json_pack("{s:s,s:O}", "role", "system", "content", ins));
    }
    json_t *in = srv_field(o, "input");
    if (!in) return srv_bad(e, "input", "is required");
    if (json_is_string(in)) {
        json_array_append_new(r->messages, json_pack("{s:s,s:O}", "role", "user", "content", in));
        return 0;
    }
    if (!json_is_array(in)) return srv_bad(e, "input", "expected a string or an array of items");
    if (json_array_size(in) == 0) return srv_bad(e, "input", "must not be empty");
    if (json_array_size(in) > SRV_MAX_MESSAGES)
        return srv_bad(e, "input", "has %zu items, more than the limit of %d", json_array_size(in),
                       SRV_MAX_MESSAGES);
    turn t = {0};
    size_t i;
    json_t *it;
    json_array_foreach(in, i, it) {
        if (add_item(r, &t, it, i, e)) {
            json_decref(t.msg);
            return -1;
        }
    }
    return flush(r, &t) ? srv_oom(e) : 0;
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
            json_t *type = json_object_get(t, "type");
            if (!json_is_object(t) || !json_is_string(type))
                return srv_bad(e, p, "expected an object with a string 'type'");
            snprintf(p, sizeof p, "tools[%zu].type", i);
            if (!is(type, "function"))
                return srv_bad(e, p,
                               "'%s' tools are not supported (only 'function': this server runs "
                               "no hosted tools)",
                               json_string_value(type));
            const char *name = NULL, *desc = NULL;
            bool strict = false;
            snprintf(p, sizeof p, "tools[%zu].name", i);
            if (srv_get_string(t, "name", p, &name, e)) return -1;
            if (!name || !*name) return srv_bad(e, p, "a non-empty string is required");
            snprintf(p, sizeof p, "tools[%zu].description", i);
            if (srv_get_string(t, "description", p, &desc, e)) return -1;
            snprintf(p, sizeof p, "tools[%zu].strict", i);
            if (srv_get_bool(t, "strict", p, &strict, e)) return -1;
            json_t *params = srv_field(t, "parameters");
            snprintf(p, sizeof p, "tools[%zu].parameters", i);
            if (params && !json_is_object(params)) return srv_bad(e, p, "expected an object");
            json_t *fn = json_pack("{s:s}", "name", name);
            if (desc) json_object_set_new(fn, "description", json_string(desc));
            if (params) json_object_set(fn, "parameters", params);
            json_array_append_new(r->tools,
                                  json_pack("{s:s,s:o}", "type", "function", "function", fn));
        }
    }
    json_t *tc = srv_field(r->root, "tool_choice");
    if (json_is_string(tc)) {
        if (srv_tool_choice_word(r, json_string_value(tc), e)) return -1;
    } else if (json_is_object(tc)) {
        json_t *type = json_object_get(tc, "type");
        if (!is(type, "function"))
            return srv_bad(e, "tool_choice.type",
                           "only {\"type\": \"function\", \"name\": ...} is supported");
        const char *name = NULL;
        if (srv_get_string(tc, "name", "tool_choice.name", &name, e)) return -1;
        if (!name) return srv_bad(e, "tool_choice.name", "is required");
        if (srv_tool_choice_named(r, name, "tool_choice.name", e)) return -1;
    } else if (tc) {
        return srv_bad(e, "tool_choice",
                       "expected \"auto\", \"none\", \"required\" or "
                       "{\"type\": \"function\", \"name\": ...}");
    }
    if (srv_get_bool(r->root, "parallel_tool_calls", NULL, &r->parallel_tool_calls, e)) return -1;
    long long mtc = 0;
    bool have = false;
    if (srv_get_int(r->root, "max_tool_calls", NULL, 1, 1, &mtc, &have, e)) return -1;
    if (have) r->parallel_tool_calls = false;

    return 0;
}

/* text.format → the grammar; a forced tool call → its grammar. */
static int parse_format(srv_request *r, srv_error *e) {
    json_t *text = srv_field(r->root, "text");
    json_t *fmt = NULL;
    if (text) {
        if (!json_is_object(text)) return srv_bad(e, "text", "expected an object");
        /* as chat's verbosity: Qwen3 has no such control, so only the default */
        json_t *verb = srv_field(text, "verbosity");
        if (verb && !is(verb, "medium"))
            return srv_bad(e, "text.verbosity", "only \"medium\" is supported");
        fmt = srv_field(text, "format");
    }
    inf_err err = {{0}};
    if (fmt) {
        json_t *type = json_object_get(fmt, "type");
        if (!json_is_object(fmt) || !json_is_string(type))
            return srv_bad(e, "text.format", "expected an object with a string 'type'");
        const char *t = json_string_value(type);
        if (!strcmp(t, "text")) {
            fmt = NULL;
        } else if (!strcmp(t, "json_object")) {
            if (inf_gram_json_object(&r->grammar, &err))
                return srv_bad(e, "text.format", "%s", err.msg);
        } else if (!strcmp(t, "json_schema")) {
            const char *name = NULL;
            bool strict = false;
            if (srv_get_string(fmt, "name", "text.format.name", &name, e)) return -1;
            if (srv_get_bool(fmt, "strict", "text.format.strict", &strict, e)) return -1;
            const char *desc = NULL;
            if (srv_get_string(fmt, "description", "text.format.description", &desc, e)) return -1;
            json_t *schema = srv_field(fmt, "schema");
            if (!json_is_object(schema))
                return srv_bad(e, "text.format.schema", "a JSON Schema object is required");
            if (inf_gram_from_json_schema(&r->grammar, schema, &err))
                return srv_bad(e, "text.format.schema", "%s", err.msg);
        } else {
            return srv_bad(e, "text.format.type",
                           "'%s' is not supported (text, json_object, json_schema)", t);
        }
    }
    /* the tools (each name once) and tool_choice as chat applies them: "none"
       drops them, required and named force a call through its grammar (a 400
       beside the format's grammar) */
    if (r->tools && srv_tools_check(r->tools, "tools", e)) return -1;
    return srv_request_apply_tools(r, "tool_choice", e);
}

static int parse_fields(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    static const char *const stateful[] = {"previous_response_id", "conversation", "prompt"};
    for (size_t i = 0; i < sizeof stateful / sizeof stateful[0]; i++)
        if (srv_field(o, stateful[i]))
            return srv_bad(e, stateful[i],
                           "this server is stateless: it stores no responses, conversations or "
                           "prompts (send the whole input instead)");
    bool bg = false, store = true, obf = false;
    if (srv_get_bool(o, "background", NULL, &bg, e)) return -1;
    if (bg) return srv_bad(e, "background", "background responses are not supported");
    if (srv_get_bool(o, "store", NULL, &store, e)) return -1; /* nothing is ever stored */
    if (srv_get_string(o, "model", NULL, &r->model, e)) return -1;
    const char *s = NULL;
    static const char *const strings[] = {"user", "safety_identifier", "prompt_cache_key",
                                          "service_tier"};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        if (srv_get_string(o, strings[i], NULL, &s, e)) return -1;
    json_t *md = srv_field(o, "metadata");
    if (md && !json_is_object(md)) return srv_bad(e, "metadata", "expected an object");
    json_t *tr = srv_field(o, "truncation");
    if (tr && !is(tr, "disabled"))
        return srv_bad(e, "truncation",
                       "only 'disabled' is supported (a prompt longer than the context is a 400)");
    json_t *inc = srv_field(o, "include");
    if (inc) {
        if (!json_is_array(inc)) return srv_bad(e, "include", "expected an array of strings");
        size_t i;
        json_t *v;
        json_array_foreach(inc, i, v) {
            if (!is(v, "reasoning.encrypted_content"))
                return srv_bad(e, "include",
                               "element %zu: only \"reasoning.encrypted_content\" "
                               "is accepted (and there is none to include)",
                               i);
        }
    }
    long long x = 0;
    bool have = false;
    if (srv_get_int(o, "top_logprobs", NULL, 0, 0, &x, &have, e)) return -1;

    if (parse_input(r, e)) return -1;
    if (parse_tools(r, e)) return -1;

    if (srv_get_int(o, "max_output_tokens", NULL, 1, INT32_MAX, &x, &have, e)) return -1;
    if (have) r->max_tokens = (int)x;
    if (srv_get_number(o, "temperature", NULL, 0, 2, &r->samp.temperature, e)) return -1;
    if (srv_get_number(o, "top_p", NULL, 0, 1, &r->samp.top_p, e)) return -1;
    /* llama.cpp's extension, so that a response can be reproduced */
    if (srv_get_int(o, "seed", NULL, INT64_MIN, INT64_MAX, &x, &have, e)) return -1;
    if (have) {
        r->samp.seed = (uint64_t)x;
        r->samp.has_seed = true;
    }
    json_t *rs = srv_field(o, "reasoning");
    if (rs) {
        if (!json_is_object(rs)) return srv_bad(e, "reasoning", "expected an object");
        if (srv_reasoning_effort(r, srv_field(rs, "effort"), "reasoning.effort", e)) return -1;
        static const char *const sums[] = {"summary", "generate_summary"};
        for (int k = 0; k < 2; k++) {
            json_t *sm = srv_field(rs, sums[k]);
            char p[48];
            snprintf(p, sizeof p, "reasoning.%s", sums[k]);
            if (sm && !is(sm, "auto") && !is(sm, "concise") && !is(sm, "detailed"))
                return srv_bad(e, p, "expected auto, concise or detailed");
        }
    }
    if (srv_get_bool(o, "stream", NULL, &r->stream, e)) return -1;
    json_t *so = srv_field(o, "stream_options");
    if (so) {
        if (!json_is_object(so)) return srv_bad(e, "stream_options", "expected an object");
        if (srv_get_bool(so, "include_obfuscation", "stream_options.include_obfuscation", &obf, e))
            return -1;
    }
    return parse_format(r, e);
}

static int responses_parse(srv_request *r, const char *body, size_t len,
                           const inf_sampler_params *defaults, srv_error *e) {
    srv_request_init(r, SRV_CHAT, defaults);
    r->root = srv_parse_object(body, len, e);
    if (!r->root) return -1;
    if (parse_fields(r, e)) {
        srv_request_free(r);
        return -1;
    }
    return 0;
}

/* The request fields every response object repeats, with their effective
 * values. */
/* A float as the decimal it was sent as (0.8f would print as 0.800000011920929). */
static json_t *real_json(float x) {
    char b[32];
    snprintf(b, sizeof b, "%g", (double)x);
    return json_real(strtod(b, NULL));
}

/* j[key] = v when v is present, else dflt (taken). */
static void set_or(json_t *j, const char *key, json_t *v, json_t *dflt) {
    if (v) {
        json_decref(dflt);
        json_object_set(j, key, v);
    } else {
        json_object_set_new(j, key, dflt);
    }
}

static json_t *responses_echo(const srv_request *r) {
    json_t *o = r->root;
    json_t *j = json_object();
    set_or(j, "instructions", srv_field(o, "instructions"), json_null());
    json_object_set_new(j, "max_output_tokens",
                        r->max_tokens > 0 ? json_integer(r->max_tokens) : json_null());
    json_object_set_new(j, "max_tool_calls",
                        r->parallel_tool_calls ? json_null() : json_integer(1));
    set_or(j, "metadata", srv_field(o, "metadata"), json_object());
    json_object_set_new(j, "parallel_tool_calls", json_boolean(r->parallel_tool_calls));
    json_object_set_new(j, "previous_response_id", json_null());
    json_t *rs = json_object();
    json_t *req_rs = srv_field(o, "reasoning");
    set_or(rs, "effort", srv_field(req_rs, "effort"), json_null());
    set_or(rs, "summary", srv_field(req_rs, "summary"), json_null());
    json_object_set_new(j, "reasoning", rs);
    /* whatever was asked, nothing was stored */
    json_object_set_new(j, "store", json_false());
    json_object_set_new(j, "temperature", real_json(r->samp.temperature));
    json_t *text = json_object();
    json_t *fmt = srv_field(srv_field(o, "text"), "format");
    json_object_set_new(text, "format",
                        fmt ? json_incref(fmt) : json_pack("{s:s}", "type", "text"));
    set_or(text, "verbosity", srv_field(srv_field(o, "text"), "verbosity"), json_string("medium"));
    json_object_set_new(j, "text", text);
    set_or(j, "tool_choice", srv_field(o, "tool_choice"), json_string("auto"));
    set_or(j, "tools", srv_field(o, "tools"), json_array());
    json_object_set_new(j, "top_p", real_json(r->samp.top_p));
    json_object_set_new(j, "truncation", json_string("disabled"));
    set_or(j, "user", srv_field(o, "user"), json_null());
    return j;
}

/* ---- the response ---- */

/* The k-th output item's part: parts with no text make no item. */
static bool makes_item(const inf_part *p) {
    return p->kind == INF_PART_TOOL_CALL || p->n > 0;
}

static const inf_part *nth_item(const inf_parts *ps, int k) {
    for (int i = 0; i < ps->n; i++)
        if (makes_item(&ps->v[i]) && k-- == 0) return &ps->v[i];
    return NULL;
}

static void item_id(const srv_resp_meta *m, inf_part_kind kind, int k, char *out, size_t cap) {
    srv_tool_call_id(m,
                     kind == INF_PART_TEXT        ? "msg_"
                     : kind == INF_PART_REASONING ? "rs_"
                                                  : "fc_",
                     k, out, cap);
}

static json_t *text_json(const inf_part *p) {
    return p ? srv_json_stringn(p->text, p->n) : json_string("");
}

static json_t *output_text_part(const inf_part *p) {
    return json_pack("{s:s,s:[],s:[],s:o}", "type", "output_text", "annotations", "logprobs",
                     "text", text_json(p));
}

/* Output item k (call number c) of part p; `full`: with its content (else
 * as output_item.added announces it: no content yet). */
static json_t *item_json(const srv_resp_meta *m, const inf_part *p, int k, int c,
                         const char *status, bool full) {
    char id[96];
    item_id(m, p->kind, k, id, sizeof id);
    if (p->kind == INF_PART_TOOL_CALL) {
        char call[96];
        srv_tool_call_id(m, "call_", c, call, sizeof call);
        return json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "id", id, "type", "function_call", "status",
                         status, "call_id", call, "name", p->name, "arguments",
                         full ? srv_json_stringn(p->text, p->n) : json_string(""));
    }
    if (p->kind == INF_PART_TEXT)
        return json_pack("{s:s,s:s,s:s,s:s,s:o}", "id", id, "type", "message", "status", status,
                         "role", "assistant", "content",
                         full ? json_pack("[o]", output_text_part(p)) : json_array());
    json_t *j =
        json_pack("{s:s,s:s,s:s,s:[]}", "id", id, "type", "reasoning", "status", status, "summary");
    if (full)
        json_object_set_new(
            j, "content", json_pack("[{s:s,s:o}]", "type", "reasoning_text", "text", text_json(p)));
    return j;
}

static json_t *usage_json(const srv_outcome *o) {
    return json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", o->prompt_tokens,
                     "input_tokens_details", "cached_tokens", o->cached_tokens, "output_tokens",
                     o->completion_tokens, "output_tokens_details", "reasoning_tokens", 0,
                     "total_tokens", o->prompt_tokens + o->completion_tokens);
}

static bool incomplete(const srv_outcome *o) {
    return o && o->finish == INF_FINISH_LENGTH;
}

/* The status of item k of n: the last text or reasoning item of a response
 * that max_output_tokens cut is incomplete. */
static const char *item_status(const inf_part *p, int k, int n, const srv_outcome *o) {
    return incomplete(o) && k == n - 1 && p->kind != INF_PART_TOOL_CALL ? "incomplete"
                                                                        : "completed";
}

static int n_items(const inf_parts *ps) {
    int n = 0;
    for (int i = 0; i < ps->n; i++)
        n += makes_item(&ps->v[i]);
    return n;
}

/* The response object: in progress (o NULL: no output, no usage) or done. */
static json_t *response_json(const srv_resp_meta *m, const inf_parts *ps, const srv_outcome *o) {
    json_t *out = json_array();
    int n = o ? n_items(ps) : 0, k = 0, c = 0;
    for (int i = 0; o && i < ps->n; i++) {
        const inf_part *p = &ps->v[i];
        if (!makes_item(p)) continue;
        json_array_append_new(out, item_json(m, p, k, c, item_status(p, k, n, o), true));
        k++;
        c += p->kind == INF_PART_TOOL_CALL;
    }
    const char *status = !o ? "in_progress" : incomplete(o) ? "incomplete" : "completed";
    json_t *j = json_pack(
        "{s:s,s:s,s:I,s:s,s:b,s:n,s:o,s:s,s:o}", "id", m->id, "object", "response", "created_at",
        (json_int_t)m->created, "status", status, "background", 0, "error", "incomplete_details",
        incomplete(o) ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null(), "model",
        m->model, "output", out);
    if (m->echo) json_object_update(j, m->echo);
    json_object_set_new(j, "usage", o ? usage_json(o) : json_null());
    return j;
}

static char *responses_body(const srv_resp_meta *m, const inf_parts *parts, const srv_outcome *o) {
    return srv_json_dump_free(response_json(m, parts, o));
}

/* ---- streaming ---- */

static int event(srv_stream *st, inf_buf *out, const char *type, json_t *j) {
    if (!j) return -1;
    json_t *head = json_pack("{s:s,s:i}", "type", type, "sequence_number", st->seq++);
    json_object_update(head, j);
    json_decref(j);
    return srv_sse_frame(out, type, head);
}

static int responses_stream_begin(srv_stream *st, inf_buf *out) {
    st->seq = 0;
    st->open = -1;
    st->n_blocks = 0;
    st->n_calls = 0;
    json_t *r = response_json(&st->meta, NULL, NULL);
    int rc = event(st, out, "response.created", json_pack("{s:O}", "response", r));
    rc |= event(st, out, "response.in_progress", json_pack("{s:o}", "response", r));
    return rc ? -1 : 0;
}

/* Ends the open message or reasoning item with its .done events. */
static int close_item(srv_stream *st, inf_buf *out, const srv_outcome *o) {
    if (st->open < 0) return 0;
    int k = st->open;
    const inf_part *p = nth_item(&st->all, k);
    char id[96];
    item_id(&st->meta, st->open_kind, k, id, sizeof id);
    inf_part empty = {.kind = st->open_kind, .text = "", .n = 0};
    if (!p) p = &empty;
    int rc;
    if (st->open_kind == INF_PART_TEXT) {
        rc = event(st, out, "response.output_text.done",
                   json_pack("{s:s,s:i,s:i,s:o,s:[]}", "item_id", id, "output_index", k,
                             "content_index", 0, "text", text_json(p), "logprobs"));
        rc |= event(st, out, "response.content_part.done",
                    json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", k,
                              "content_index", 0, "part", output_text_part(p)));
    } else {
        rc = event(st, out, "response.reasoning_text.done",
                   json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", k, "content_index",
                             0, "text", text_json(p)));
        rc |= event(st, out, "response.content_part.done",
                    json_pack("{s:s,s:i,s:i,s:{s:s,s:o}}", "item_id", id, "output_index", k,
                              "content_index", 0, "part", "type", "reasoning_text", "text",
                              text_json(p)));
    }
    const char *status = o && incomplete(o) ? "incomplete" : "completed";
    rc |= event(st, out, "response.output_item.done",
                json_pack("{s:i,s:o}", "output_index", k, "item",
                          item_json(&st->meta, p, k, 0, status, true)));
    st->open = -1;
    return rc ? -1 : 0;
}

static int responses_stream_parts(srv_stream *st, inf_buf *out, const inf_parts *ps,
                                  json_t *logprobs) {
    json_decref(logprobs);
    int rc = 0;
    for (int i = 0; i < ps->n; i++) {
        const inf_part *p = &ps->v[i];
        if (!makes_item(p)) continue;
        char id[96];
        if (p->kind == INF_PART_TOOL_CALL) {
            rc |= close_item(st, out, NULL);
            int k = st->n_blocks++, c = st->n_calls++;
            item_id(&st->meta, p->kind, k, id, sizeof id);
            rc |= event(st, out, "response.output_item.added",
                        json_pack("{s:i,s:o}", "output_index", k, "item",
                                  item_json(&st->meta, p, k, c, "in_progress", false)));
            rc |= event(st, out, "response.function_call_arguments.delta",
                        json_pack("{s:s,s:i,s:o}", "item_id", id, "output_index", k, "delta",
                                  srv_json_stringn(p->text, p->n)));
            rc |= event(st, out, "response.function_call_arguments.done",
                        json_pack("{s:s,s:i,s:s,s:o}", "item_id", id, "output_index", k, "name",
                                  p->name, "arguments", srv_json_stringn(p->text, p->n)));
            rc |= event(st, out, "response.output_item.done",
                        json_pack("{s:i,s:o}", "output_index", k, "item",
                                  item_json(&st->meta, p, k, c, "completed", true)));
            continue;
        }
        if (st->open < 0 || st->open_kind != p->kind) {
            rc |= close_item(st, out, NULL);
            int k = st->n_blocks++;
            st->open = k;
            st->open_kind = p->kind;
            item_id(&st->meta, p->kind, k, id, sizeof id);
            rc |= event(st, out, "response.output_item.added",
                        json_pack("{s:i,s:o}", "output_index", k, "item",
                                  item_json(&st->meta, p, k, 0, "in_progress", false)));
            json_t *part = p->kind == INF_PART_TEXT
                               ? output_text_part(NULL)
                               : json_pack("{s:s,s:s}", "type", "reasoning_text", "text", "");
            rc |= event(st, out, "response.content_part.added",
                        json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", k,
                                  "content_index", 0, "part", part));
        }
        item_id(&st->meta, p->kind, st->open, id, sizeof id);
        if (p->kind == INF_PART_TEXT)
            rc |= event(st, out, "response.output_text.delta",
                        json_pack("{s:s,s:i,s:i,s:o,s:[]}", "item_id", id, "output_index", st->open,
                                  "content_index", 0, "delta", srv_json_stringn(p->text, p->n),
                                  "logprobs"));
        else
            rc |= event(st, out, "response.reasoning_text.delta",
                        json_pack("{s:s,s:i,s:i,s:o}", "item_id", id, "output_index", st->open,
                                  "content_index", 0, "delta", srv_json_stringn(p->text, p->n)));
    }
    return rc ? -1 : 0;
}

static int responses_stream_end(srv_stream *st, inf_buf *out, const srv_outcome *o) {
    int rc = close_item(st, out, o);
    const char *type = incomplete(o) ? "response.incomplete" : "response.completed";
    rc |=
        event(st, out, type, json_pack("{s:o}", "response", response_json(&st->meta, &st->all, o)));
    return rc ? -1 : 0;
}

static char *responses_error_body(const srv_error *e) {
    return srv_error_json(e);
}

/* An error event as the Responses API streams it. */
static int responses_stream_error(inf_buf *out, const srv_error *e) {
    json_t *j =
        json_pack("{s:s,s:o,s:o,s:o,s:i}", "type", "error", "code",
                  e->code ? json_string(e->code) : json_string(e->type ? e->type : "server_error"),
                  "message", srv_json_stringn(e->msg, strlen(e->msg)), "param",
                  e->param[0] ? json_string(e->param) : json_null(), "sequence_number", 0);
    return srv_sse_frame(out, "error", j);
}

const srv_api srv_api_responses = {
    .name = "responses",
    .kind = SRV_CHAT,
    .id_prefix = "resp_",
    .parse = responses_parse,
    .echo = responses_echo,
    .body = responses_body,
    .stream_begin = responses_stream_begin,
    .stream_parts = responses_stream_parts,
    .stream_end = responses_stream_end,
    .error_body = responses_error_body,
    .stream_error = responses_stream_error,
    .ping = NULL,
};
