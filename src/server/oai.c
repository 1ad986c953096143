#include "server/oai.h"
#include "server/fields.h"
#include "util/utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_error_set(srv_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...) {
    if (!e) return -1;
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

char *srv_error_json(const srv_error *e) {
    json_t *err = json_object();
    json_object_set_new(err, "message", srv_json_stringn(e->msg, strlen(e->msg)));
    json_object_set_new(err, "type", json_string(e->type ? e->type : "server_error"));
    json_object_set_new(err, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", err);
    return srv_json_dump_free(root);
}

void srv_sampling_default(srv_sampling *s) {
    *s = (srv_sampling){
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .penalty_last_n = 64,
    };
}

void srv_sampling_from(srv_sampling *s, const inf_sampler_params *p) {
    srv_sampling_default(s);
    s->temperature = p->temp;
    s->top_k = p->top_k;
    s->top_p = p->top_p;
    s->min_p = p->min_p;
    s->repeat_penalty = p->repeat_penalty;
    s->penalty_last_n = p->repeat_last_n;
    s->presence_penalty = p->presence_penalty;
    s->frequency_penalty = p->frequency_penalty;
}

/* ---- field validation ---- */

static const char *const ROLES[] = {"system", "developer", "user", "assistant", "tool"};

/* A message's content as one string: a string, text parts joined, or
 * (allow_null) null as "". NULL with a 400 naming `where` otherwise. */
static json_t *content_string(json_t *content, bool allow_null, const char *where, srv_error *e) {
    if (!content || json_is_null(content)) {
        if (!allow_null) return srv_bad(e, where, "'content' is required"), NULL;
        return json_string("");
    }
    if (json_is_string(content)) return json_incref(content);
    if (!json_is_array(content))
        return srv_bad(e, where, "'content' must be a string, an array of text parts, or null"),
               NULL;
    inf_buf text = {0};
    size_t k;
    json_t *part;
    json_array_foreach(content, k, part) {
        json_t *type = json_object_get(part, "type");
        json_t *t = json_object_get(part, "text");
        const char *ty = json_string_value(type);
        if (ty && (!strcmp(ty, "image_url") || !strcmp(ty, "input_image") ||
                   !strcmp(ty, "input_audio") || !strcmp(ty, "file"))) {
            inf_buf_free(&text);
            return srv_bad(e, where,
                           "content part %zu is of type '%s': inferno runs the model's text part "
                           "only (no vision or audio encoder), so images, audio and files cannot "
                           "be read",
                           k, ty),
                   NULL;
        }
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(t)) {
            inf_buf_free(&text);
            return srv_bad(e, where,
                           "content part %zu: only {\"type\": \"text\", \"text\": ...} "
                           "parts are supported",
                           k),
                   NULL;
        }
        if (inf_buf_add(&text, json_string_value(t), json_string_length(t))) {
            inf_buf_free(&text);
            return srv_oom(e), NULL;
        }
    }
    json_t *j = json_stringn(text.data ? text.data : "", text.len);
    inf_buf_free(&text);
    if (!j) srv_bad(e, where, "the text parts are not valid UTF-8");
    return j;
}

/* An assistant's tool calls as templates read them: arguments an object.
 * OpenAI sends arguments as a JSON string; one that does not hold an object
 * is a 400 naming messages[i].tool_calls[k]. NULL with e set on failure. */
static json_t *normalize_tool_calls(json_t *calls, size_t i, srv_error *e) {
    char where[96];
    snprintf(where, sizeof where, "messages[%zu].tool_calls", i);
    if (!json_is_array(calls)) return srv_bad(e, where, "expected an array"), NULL;
    json_t *out = json_array();
    if (!out) return srv_oom(e), NULL;
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu]", i, k);
        json_t *type = json_object_get(c, "type"), *id = json_object_get(c, "id");
        json_t *fn = json_object_get(c, "function");
        const char *why = NULL;
        if (!json_is_object(c))
            why = "expected an object";
        else if (type && !json_is_null(type) &&
                 (!json_is_string(type) || strcmp(json_string_value(type), "function")))
            why = "'type' must be \"function\"";
        else if (id && !json_is_null(id) && !json_is_string(id))
            why = "'id' must be a string";
        else if (!json_is_object(fn))
            why = "'function' must be an object with 'name' and 'arguments'";
        else if (!json_is_string(json_object_get(fn, "name")) ||
                 !json_string_length(json_object_get(fn, "name")))
            why = "'function.name' must be a non-empty string";
        if (why) {
            json_decref(out);
            return srv_bad(e, where, "%s", why), NULL;
        }
        json_t *args = json_object_get(fn, "arguments"), *obj = NULL;
        if (json_is_object(args)) {
            obj = json_incref(args);
        } else if (json_is_string(args)) {
            const char *a = json_string_value(args);
            size_t n = json_string_length(args), ws = 0;
            while (ws < n && strchr(" \t\r\n", a[ws]))
                ws++;
            json_error_t je;
            /* "" (a call without arguments, as some clients send it) is {} */
            obj = ws == n ? json_object() : json_loadb(a, n, 0, &je);
            if (!json_is_object(obj)) {
                json_decref(obj);
                json_decref(out);
                return srv_bad(e, where,
                               "'function.arguments' must be a JSON object (as a string or an "
                               "object)"),
                       NULL;
            }
        } else if (!args || json_is_null(args)) {
            obj = json_object();
        } else {
            json_decref(out);
            return srv_bad(e, where,
                           "'function.arguments' must be a JSON object (as a string or an object)"),
                   NULL;
        }
        json_t *f = json_object(), *call = json_object();
        json_object_set(f, "name", json_object_get(fn, "name"));
        json_object_set_new(f, "arguments", obj);
        if (json_is_string(id)) json_object_set(call, "id", id);
        json_object_set_new(call, "type", json_string("function"));
        json_object_set_new(call, "function", f);
        json_array_append_new(out, call);
    }
    return out;
}

/* Checks one message and returns it as templates read it (see `messages` in
 * oai.h). */
static json_t *normalize_message(json_t *m, size_t i, srv_error *e) {
    char where[64];
    snprintf(where, sizeof where, "messages[%zu]", i);
    if (!json_is_object(m)) return srv_bad(e, where, "expected an object"), NULL;
    json_t *role = json_object_get(m, "role");
    if (!json_is_string(role)) return srv_bad(e, where, "'role' must be a string"), NULL;
    const char *rs = json_string_value(role);
    bool known = false;
    for (size_t k = 0; k < sizeof ROLES / sizeof ROLES[0]; k++)
        known |= !strcmp(rs, ROLES[k]);
    if (!known) return srv_bad(e, where, "unknown role '%s'", rs), NULL;
    bool assistant = !strcmp(rs, "assistant");

    json_t *out = json_deep_copy(m);
    if (!out) return srv_oom(e), NULL;
    /* developer is OpenAI's newer name for system; Qwen3's template has no
       branch for it and would drop it */
    if (!strcmp(rs, "developer")) json_object_set_new(out, "role", json_string("system"));

    json_t *calls = json_object_get(m, "tool_calls");
    if (calls && !json_is_null(calls) && !assistant) {
        json_decref(out);
        return srv_bad(e, where, "only assistant messages carry 'tool_calls'"), NULL;
    }
    bool has_calls = json_is_array(calls) && json_array_size(calls) > 0;
    json_t *content = content_string(json_object_get(m, "content"), assistant, where, e);
    if (!content) {
        json_decref(out);
        return NULL;
    }
    json_object_set_new(out, "content", content);
    json_object_del(out, "tool_calls");
    if (has_calls) {
        json_t *nc = normalize_tool_calls(calls, i, e);
        if (!nc) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, "tool_calls", nc);
    } else if (calls && !json_is_null(calls) && !json_is_array(calls)) {
        json_decref(out);
        return srv_bad(e, where, "'tool_calls' must be an array"), NULL;
    }

    if (assistant) {
        /* the reasoning given back: reasoning_content (DeepSeek, llama.cpp,
           vLLM) or reasoning (OpenRouter, Ollama, vLLM's newer name) */
        json_t *rc = json_object_get(m, "reasoning_content"), *rn = json_object_get(m, "reasoning");
        if (rc && !json_is_null(rc) && !json_is_string(rc)) {
            json_decref(out);
            return srv_bad(e, where, "'reasoning_content' must be a string or null"), NULL;
        }
        if (rn && !json_is_null(rn) && !json_is_string(rn)) {
            json_decref(out);
            return srv_bad(e, where, "'reasoning' must be a string or null"), NULL;
        }
        json_object_del(out, "reasoning");
        json_object_del(out, "reasoning_content");
        json_t *r = json_is_string(rc) ? rc : json_is_string(rn) ? rn : NULL;
        if (r) json_object_set(out, "reasoning_content", r);
    }
    if (!strcmp(rs, "tool")) {
        json_t *id = json_object_get(m, "tool_call_id");
        if (id && !json_is_null(id) && !json_is_string(id)) {
            json_decref(out);
            return srv_bad(e, where, "'tool_call_id' must be a string"), NULL;
        }
    }
    return out;
}

int srv_tools_check(const json_t *tools, const char *param, srv_error *e) {
    if (!json_is_array(tools)) return srv_bad(e, param, "expected an array");
    size_t i;
    json_t *t;
    json_array_foreach((json_t *)tools, i, t) {
        char where[96];
        snprintf(where, sizeof where, "%s[%zu]", param, i);
        json_t *type = json_object_get(t, "type");
        if (!json_is_object(t)) return srv_bad(e, where, "expected an object");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
            return srv_bad(e, where,
                           "only {\"type\": \"function\", \"function\": {...}} tools are "
                           "supported");
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) return srv_bad(e, where, "'function' must be an object");
        json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description");
        json_t *params = json_object_get(fn, "parameters"), *strict = json_object_get(fn, "strict");
        if (!json_is_string(name) || !json_string_length(name))
            return srv_bad(e, where, "'function.name' must be a non-empty string");
        if (desc && !json_is_null(desc) && !json_is_string(desc))
            return srv_bad(e, where, "'function.description' must be a string");
        if (params && !json_is_null(params) && !json_is_object(params))
            return srv_bad(e, where, "'function.parameters' must be an object (a JSON Schema)");
        if (strict && !json_is_null(strict) && !json_is_boolean(strict))
            return srv_bad(e, where, "'function.strict' must be true or false");
        for (size_t k = 0; k < i; k++) {
            json_t *other =
                json_object_get(json_object_get(json_array_get(tools, k), "function"), "name");
            if (json_equal(other, name))
                return srv_bad(e, where, "the function name '%s' is also tools[%zu]'s",
                               json_string_value(name), k);
        }
    }
    return 0;
}

int srv_request_apply_tools(srv_request *r, const char *param, srv_error *e) {
    if (r->tools && !json_array_size(r->tools)) { /* [] offers nothing */
        json_decref(r->tools);
        r->tools = NULL;
    }
    if (r->tool_choice == SRV_TOOLS_NONE) {
        json_decref(r->tools);
        r->tools = NULL;
        return 0;
    }
    if (r->tool_choice == SRV_TOOLS_AUTO) return 0;
    if (!r->tools)
        return srv_bad(e, param, "%s needs tools to call",
                       r->tool_choice == SRV_TOOLS_NAMED ? "a named function" : "'required'");
    if (r->tool_choice == SRV_TOOLS_NAMED) {
        bool found = false;
        size_t i;
        json_t *t;
        json_array_foreach(r->tools, i, t) {
            json_t *fn = json_object_get(t, "function");
            json_t *n = json_object_get(fn ? fn : t, "name");
            found |= json_is_string(n) && !strcmp(json_string_value(n), r->tool_name);
        }
        if (!found)
            return srv_bad(e, param, "names the function '%s', which is not in tools",
                           r->tool_name);
    }
    if (r->grammar)
        return srv_bad(e, param,
                       "a forced tool call cannot be combined with response_format, grammar or "
                       "json_schema");
    inf_err err = {{0}};
    if (inf_gram_tool_calls(&r->grammar, r->tools,
                            r->tool_choice == SRV_TOOLS_NAMED ? r->tool_name : NULL,
                            r->parallel_tool_calls, &err))
        return srv_bad(e, "tools", "%s", err.msg);
    return 0;
}

int srv_reasoning_effort(srv_request *r, const json_t *v, const char *param, srv_error *e) {
    if (!v || json_is_null(v)) return 0;
    static const char *const KEEP[] = {"minimal", "low", "medium", "high", "xhigh"};
    if (!json_is_string(v))
        return srv_bad(e, param, "expected one of none, minimal, low, medium, high, xhigh");
    const char *s = json_string_value(v);
    if (!strcmp(s, "none")) {
        json_t *think = json_object_get(r->template_kwargs, "enable_thinking");
        if (json_is_true(think))
            return srv_bad(e, param,
                           "\"none\" contradicts chat_template_kwargs.enable_thinking: true");
        r->enable_thinking = false;
        return 0;
    }
    for (size_t k = 0; k < sizeof KEEP / sizeof KEEP[0]; k++) {
        if (strcmp(s, KEEP[k])) continue;
        if (json_is_false(json_object_get(r->template_kwargs, "enable_thinking")))
            return srv_bad(e, param, "'%s' contradicts chat_template_kwargs.enable_thinking: false",
                           s);
        return 0;
    }
    return srv_bad(e, param, "'%s' is not one of none, minimal, low, medium, high, xhigh", s);
}

/* OpenAI chat's tool_choice: "auto" | "none" | "required" | {"type":
 * "function", "function": {"name"}}; absent: auto. */
static int parse_tool_choice(srv_request *r, srv_error *e) {
    json_t *tc = srv_field(r->root, "tool_choice");
    r->tool_choice = SRV_TOOLS_AUTO;
    if (!tc) return 0;
    if (json_is_string(tc)) return srv_tool_choice_word(r, json_string_value(tc), e);
    json_t *type = json_object_get(tc, "type");
    json_t *name = json_object_get(json_object_get(tc, "function"), "name");
    if (!json_is_object(tc) || !json_is_string(type))
        return srv_bad(e, "tool_choice",
                       "expected \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                       "\"function\": {\"name\": ...}}");
    if (strcmp(json_string_value(type), "function"))
        return srv_bad(e, "tool_choice", "type '%s' is not supported (only \"function\")",
                       json_string_value(type));
    if (!json_is_string(name) || !json_string_length(name))
        return srv_bad(e, "tool_choice", "'function.name' must be a non-empty string");
    return srv_tool_choice_named(r, json_string_value(name), "tool_choice", e);
}

int srv_tool_choice_word(srv_request *r, const char *word, srv_error *e) {
    if (!strcmp(word, "auto"))
        r->tool_choice = SRV_TOOLS_AUTO;
    else if (!strcmp(word, "none"))
        r->tool_choice = SRV_TOOLS_NONE;
    else if (!strcmp(word, "required"))
        r->tool_choice = SRV_TOOLS_REQUIRED;
    else
        return srv_bad(e, "tool_choice", "'%s' is not one of auto, none, required", word);
    return 0;
}

int srv_tool_choice_named(srv_request *r, const char *name, const char *param, srv_error *e) {
    if (strlen(name) >= sizeof r->tool_name)
        return srv_bad(e, param, "the function name is longer than %zu bytes",
                       sizeof r->tool_name - 1);
    snprintf(r->tool_name, sizeof r->tool_name, "%s", name);
    r->tool_choice = SRV_TOOLS_NAMED;
    return 0;
}

int srv_check_messages(const json_t *msgs, srv_error *e) {
    if (!msgs || json_is_null(msgs)) return srv_bad(e, "messages", "is required");
    if (!json_is_array(msgs)) return srv_bad(e, "messages", "expected an array");
    if (json_array_size(msgs) == 0) return srv_bad(e, "messages", "must not be empty");
    if (json_array_size(msgs) > SRV_MAX_MESSAGES)
        return srv_bad(e, "messages", "has %zu messages, more than the limit of %d",
                       json_array_size(msgs), SRV_MAX_MESSAGES);
    return 0;
}

static int parse_messages(srv_request *r, srv_error *e) {
    json_t *msgs = json_object_get(r->root, "messages");
    if (srv_check_messages(msgs, e)) return -1;
    r->messages = json_array();
    if (!r->messages) return srv_oom(e);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        json_t *n = normalize_message(m, i, e);
        if (!n) return -1;
        json_array_append_new(r->messages, n);
    }
    json_t *tools = srv_field(r->root, "tools");
    if (tools && srv_tools_check(tools, "tools", e)) return -1;
    r->tools = json_incref(tools);
    if (srv_field(r->root, "functions") || srv_field(r->root, "function_call"))
        return srv_bad(e, srv_field(r->root, "functions") ? "functions" : "function_call",
                       "the deprecated functions API is not supported: use tools and tool_choice");
    if (parse_tool_choice(r, e)) return -1;
    if (srv_get_bool(r->root, "parallel_tool_calls", NULL, &r->parallel_tool_calls, e)) return -1;
    json_t *kw = srv_field(r->root, "chat_template_kwargs");
    if (kw) {
        if (!json_is_object(kw)) return srv_bad(e, "chat_template_kwargs", "expected an object");
        json_t *think = json_object_get(kw, "enable_thinking");
        if (think && !json_is_boolean(think))
            return srv_bad(e, "chat_template_kwargs.enable_thinking", "expected true or false");
        if (think) r->enable_thinking = json_is_true(think);
        r->template_kwargs = kw;
    }
    return srv_reasoning_effort(r, srv_field(r->root, "reasoning_effort"), "reasoning_effort", e);
}

static int parse_prompt(srv_request *r, srv_error *e) {
    json_t *p = json_object_get(r->root, "prompt");
    if (!p || json_is_null(p)) return srv_bad(e, "prompt", "is required");
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        return 0;
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return srv_bad(e, "prompt",
                       "expected a string, an array of token ids, or one string in "
                       "an array");
    json_t *first = json_array_get(p, 0);
    if (json_is_string(first)) {
        if (json_array_size(p) != 1) return srv_bad(e, "prompt", "only one prompt per request");
        r->prompt = json_string_value(first);
        return 0;
    }
    if (json_is_array(first)) {
        if (json_array_size(p) != 1) return srv_bad(e, "prompt", "only one prompt per request");
        p = first;
        if (json_array_size(p) == 0) return srv_bad(e, "prompt", "must not be empty");
    }
    size_t n = json_array_size(p), i;
    json_t *v;
    r->prompt_tokens = malloc(n * sizeof *r->prompt_tokens);
    if (!r->prompt_tokens)
        return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    json_array_foreach(p, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return srv_bad(e, "prompt", "element %zu: expected a token id (non-negative integer)",
                           i);
        r->prompt_tokens[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_tokens = (int)n;
    return 0;
}

int srv_stop_value(srv_request *r, json_t *s, const char *field, srv_error *e) {
    if (json_is_string(s)) {
        if (json_string_length(s)) r->stop[r->n_stop++] = json_string_value(s);
        return 0;
    }
    if (!json_is_array(s)) return srv_bad(e, field, "expected a string or an array of strings");
    if (json_array_size(s) > INF_MAX_STOPS)
        return srv_bad(e, field, "at most %d stop strings", INF_MAX_STOPS);
    size_t i;
    json_t *v;
    json_array_foreach(s, i, v) {
        if (!json_is_string(v)) return srv_bad(e, field, "element %zu: expected a string", i);
        if (json_string_length(v)) r->stop[r->n_stop++] = json_string_value(v);
    }
    return 0;
}

static int parse_stop(srv_request *r, srv_error *e) {
    json_t *s = srv_field(r->root, "stop");
    return s ? srv_stop_value(r, s, "stop", e) : 0;
}

/* The constraint on the output: response_format (OpenAI), or llama.cpp's
 * `grammar` (GBNF) and `json_schema`; at most one. A schema or grammar that
 * cannot be compiled is a 400 naming what is wrong. */
static int parse_grammar(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    json_t *rf = srv_field(o, "response_format"), *gr = srv_field(o, "grammar"),
           *js = srv_field(o, "json_schema");
    const char *param = NULL;
    const json_t *schema = NULL;
    bool any_object = false;
    if (rf) {
        json_t *type = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(type))
            return srv_bad(e, "response_format", "expected an object with a string 'type'");
        const char *t = json_string_value(type);
        if (!strcmp(t, "json_object")) {
            any_object = true;
            param = "response_format";
        } else if (!strcmp(t, "json_schema")) {
            json_t *w = json_object_get(rf, "json_schema");
            if (!json_is_object(w))
                return srv_bad(e, "response_format.json_schema", "expected an object");
            json_t *st = srv_field(w, "strict");
            if (st && !json_is_boolean(st))
                return srv_bad(e, "response_format.json_schema.strict", "expected true or false");
            schema = srv_field(w, "schema");
            if (!schema) any_object = true;
            param = "response_format.json_schema.schema";
        } else if (strcmp(t, "text")) {
            return srv_bad(e, "response_format",
                           "type '%s' is not supported (text, json_object, json_schema)", t);
        }
    }
    if (gr) {
        if (param)
            return srv_bad(e, "grammar", "give only one of response_format, grammar, json_schema");
        if (!json_is_string(gr)) return srv_bad(e, "grammar", "expected a string (GBNF)");
        param = "grammar";
    }
    if (js) {
        if (param)
            return srv_bad(e, "json_schema",
                           "give only one of response_format, grammar, json_schema");
        schema = js;
        param = "json_schema";
    }
    if (!param) return 0;
    inf_err err = {{0}};
    int rc = gr ? inf_gram_compile(&r->grammar, json_string_value(gr), json_string_length(gr),
                                   "root", &err)
             : any_object ? inf_gram_json_object(&r->grammar, &err)
                          : inf_gram_from_json_schema(&r->grammar, schema, &err);
    if (rc) return srv_bad(e, param, "%s", err.msg);
    return 0;
}

/* OpenAI's logit_bias: {"token id": bias in [-100, 100]}, added to the
 * logits before sampling. The ids are checked against the vocabulary by
 * srv_request_check_vocab. */
static int parse_logit_bias(srv_request *r, srv_error *e) {
    json_t *lb = srv_field(r->root, "logit_bias");
    if (!lb) return 0;
    if (!json_is_object(lb))
        return srv_bad(e, "logit_bias", "expected an object mapping token ids to biases");
    size_t n = json_object_size(lb);
    if (n > INF_MAX_LOGIT_BIAS)
        return srv_bad(e, "logit_bias", "has %zu entries, more than the limit of %d", n,
                       INF_MAX_LOGIT_BIAS);
    if (!n) return 0;
    r->logit_bias = calloc(n, sizeof *r->logit_bias);
    if (!r->logit_bias) return srv_oom(e);
    const char *k;
    json_t *v;
    json_object_foreach(lb, k, v) {
        char *end;
        long long id = (k[0] >= '0' && k[0] <= '9') ? strtoll(k, &end, 10) : -1;
        if (id < 0 || *end || id > INT32_MAX)
            return srv_bad(e, "logit_bias", "key '%s' is not a token id (a non-negative integer)",
                           k);
        if (!json_is_number(v))
            return srv_bad(e, "logit_bias", "the bias of token %lld must be a number", id);
        double b = json_number_value(v);
        if (!(b >= -100 && b <= 100))
            return srv_bad(e, "logit_bias",
                           "the bias of token %lld, %g, is out of range [-100, 100]", id, b);
        r->logit_bias[r->n_logit_bias++] = (inf_logit_bias){(int32_t)id, (float)b};
    }
    return 0;
}

/* OpenAI fields that would change the result and that inferno does not do:
 * a 400 rather than a reply that silently ignores them. Fields with no
 * effect on the text (user, store, metadata, service_tier, ...) are
 * ignored. */
static int refuse_unsupported(srv_request *r, srv_error *e) {
    json_t *o = r->root, *v;
    if (r->kind == SRV_CHAT) {
        if ((v = srv_field(o, "modalities"))) {
            bool text_only = json_is_array(v) && json_array_size(v) > 0;
            size_t i;
            json_t *m;
            json_array_foreach(v, i, m) text_only &=
                json_is_string(m) && !strcmp(json_string_value(m), "text");
            if (!text_only) return srv_bad(e, "modalities", "only [\"text\"] is supported");
        }
        if (srv_field(o, "audio")) return srv_bad(e, "audio", "audio output is not supported");
        if (srv_field(o, "web_search_options"))
            return srv_bad(e, "web_search_options", "web search is not supported");
        if ((v = srv_field(o, "verbosity")) &&
            (!json_is_string(v) || strcmp(json_string_value(v), "medium")))
            return srv_bad(e, "verbosity",
                           "only \"medium\" is supported (Qwen3 has no verbosity control)");
    } else {
        if ((v = srv_field(o, "echo")) && !json_is_false(v))
            return srv_bad(e, "echo", "echoing the prompt is not supported");
        if ((v = srv_field(o, "best_of")) && (!json_is_integer(v) || json_integer_value(v) != 1))
            return srv_bad(e, "best_of", "only best_of = 1 is supported");
        if ((v = srv_field(o, "suffix")) && (!json_is_string(v) || json_string_length(v)))
            return srv_bad(e, "suffix", "a suffix (insertion) is not supported");
    }
    return 0;
}

/* llama.cpp's speculative.n_max, n_min and p_min, flat keys as its server
 * reads them, each in its range here (n_min against n_max in
 * srv_request_spec, which knows the engine's). */
static int parse_spec(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    long long x;
    bool have = false;
    if (srv_get_int(o, "speculative.n_max", NULL, 0, INF_SPEC_MAX_DRAFT, &x, &have, e)) return -1;
    if (have) r->spec.n_max = (int)x, r->spec_set |= SRV_SPEC_N_MAX;
    if (srv_get_int(o, "speculative.n_min", NULL, 0, INF_SPEC_MAX_DRAFT, &x, &have, e)) return -1;
    if (have) r->spec.n_min = (int)x, r->spec_set |= SRV_SPEC_N_MIN;
    if (srv_field(o, "speculative.p_min")) {
        if (srv_get_number(o, "speculative.p_min", NULL, 0, 1, &r->spec.p_min, e)) return -1;
        r->spec_set |= SRV_SPEC_P_MIN;
    }
    if ((r->spec_set & (SRV_SPEC_N_MAX | SRV_SPEC_N_MIN)) == (SRV_SPEC_N_MAX | SRV_SPEC_N_MIN) &&
        r->spec.n_min > r->spec.n_max)
        return srv_bad(e, "speculative.n_min", "%d is more than speculative.n_max, %d",
                       r->spec.n_min, r->spec.n_max);
    return 0;
}

int srv_request_spec(srv_request *r, const inf_spec_params *engine, srv_error *e) {
    if (!r->spec_set) return 0;
    inf_spec_params p = *engine;
    if (r->spec_set & SRV_SPEC_N_MAX) {
        p.n_max = r->spec.n_max;
        if (!(r->spec_set & SRV_SPEC_N_MIN) && p.n_min > p.n_max) p.n_min = p.n_max;
    }
    if (r->spec_set & SRV_SPEC_N_MIN) {
        p.n_min = r->spec.n_min;
        if (p.n_min > p.n_max)
            return srv_bad(e, "speculative.n_min",
                           "%d is more than the %d tokens drafted per step (speculative.n_max%s)",
                           p.n_min, p.n_max,
                           r->spec_set & SRV_SPEC_N_MAX ? "" : ": the server's --draft-max");
    }
    if (r->spec_set & SRV_SPEC_P_MIN) p.p_min = r->spec.p_min;
    r->spec = p;
    return 0;
}

/* llama.cpp's own request fields: n_predict (max_tokens when that is not
 * given; -1: no limit), repeat_last_n and speculative.* are done; its other
 * samplers are accepted only at the value that turns them off, a 400
 * otherwise. */
static int parse_llamacpp(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    long long x;
    bool have = false;
    if (parse_spec(r, e)) return -1;
    if (srv_get_int(o, "n_predict", NULL, -1, INT32_MAX, &x, &have, e)) return -1;
    if (have && x == 0) return srv_bad(e, "n_predict", "must be -1 (no limit) or at least 1");
    if (have && !srv_field(o, "max_tokens") && !srv_field(o, "max_completion_tokens"))
        r->max_tokens = (int)x;
    if (srv_get_int(o, "repeat_last_n", NULL, -1, INT32_MAX, &x, &have, e)) return -1;
    if (have) r->samp.penalty_last_n = (int)x;
    static const struct {
        const char *name;
        double off; /* the value that turns the sampler off */
        bool off_at_or_below;
    } OFF[] = {{"typical_p", 1, false},       {"tfs_z", 1, false},
               {"mirostat", 0, false},        {"dynatemp_range", 0, false},
               {"xtc_probability", 0, false}, {"dry_multiplier", 0, false},
               {"top_n_sigma", 0, true},      {"n_probs", 0, false}};
    for (size_t i = 0; i < sizeof OFF / sizeof OFF[0]; i++) {
        json_t *v = srv_field(o, OFF[i].name);
        if (!v) continue;
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        bool off = OFF[i].off_at_or_below ? d <= OFF[i].off : d == OFF[i].off;
        if (!off)
            return srv_bad(e, OFF[i].name,
                           "this llama.cpp sampler is not supported (only %s%g, off)",
                           OFF[i].off_at_or_below ? "<= " : "", OFF[i].off);
    }
    return 0;
}

json_t *srv_request_template_kwargs(const srv_request *r) {
    json_t *kw = r->template_kwargs ? json_deep_copy(r->template_kwargs) : json_object();
    if (kw) json_object_set_new(kw, "enable_thinking", json_boolean(r->enable_thinking));
    return kw;
}

int srv_request_check_vocab(const srv_request *r, int n_vocab, srv_error *e) {
    for (int i = 0; i < r->n_logit_bias; i++)
        if (r->logit_bias[i].id >= n_vocab)
            return srv_bad(e, "logit_bias", "token id %d is not below n_vocab %d",
                           (int)r->logit_bias[i].id, n_vocab);
    return 0;
}

static int parse_fields(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    json_t *model = srv_field(o, "model");
    if (model && !json_is_string(model)) return srv_bad(e, "model", "expected a string");
    r->model = model ? json_string_value(model) : NULL;

    if (r->kind == SRV_CHAT ? parse_messages(r, e) : parse_prompt(r, e)) return -1;

    long long x = -1;
    bool have = false;
    if (srv_get_int(o, "max_tokens", NULL, 1, INT32_MAX, &x, &have, e)) return -1;
    if (have) r->max_tokens = (int)x;
    if (srv_get_int(o, "max_completion_tokens", NULL, 1, INT32_MAX, &x, &have, e)) return -1;
    if (have) r->max_tokens = (int)x;
    if (r->kind == SRV_COMPLETION && r->max_tokens < 0 &&
        !srv_field(o, "max_tokens")) /* null: absent */
        r->max_tokens = 16;          /* OpenAI's default for /v1/completions */

    srv_sampling *s = &r->samp;
    if (srv_get_number(o, "temperature", NULL, 0, 2, &s->temperature, e)) return -1;
    if (srv_get_number(o, "top_p", NULL, 0, 1, &s->top_p, e)) return -1;
    if (srv_get_number(o, "min_p", NULL, 0, 1, &s->min_p, e)) return -1;
    if (srv_get_number(o, "presence_penalty", NULL, -2, 2, &s->presence_penalty, e)) return -1;
    if (srv_get_number(o, "frequency_penalty", NULL, -2, 2, &s->frequency_penalty, e)) return -1;
    if (srv_get_number(o, "repeat_penalty", NULL, 0, 100, &s->repeat_penalty, e)) return -1;
    if (json_object_get(o, "repeat_penalty") && s->repeat_penalty <= 0)
        return srv_bad(e, "repeat_penalty", "must be > 0");
    if (srv_get_int(o, "top_k", NULL, 0, INT32_MAX, &x, &have, e)) return -1;
    if (have) s->top_k = (int)x;
    if (srv_get_int(o, "seed", NULL, INT64_MIN, INT64_MAX, &x, &have, e)) return -1;
    if (have) {
        s->seed = (uint64_t)x;
        s->has_seed = true;
    }
    if (parse_stop(r, e)) return -1;

    if (srv_get_bool(o, "stream", NULL, &r->stream, e)) return -1;
    if (srv_get_bool(o, "ignore_eos", NULL, &r->ignore_eos, e)) return -1;
    json_t *so = srv_field(o, "stream_options");
    if (so) {
        if (!json_is_object(so)) return srv_bad(e, "stream_options", "expected an object");
        if (srv_get_bool(so, "include_usage", NULL, &r->include_usage, e)) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return -1;
        }
    }

    if (r->kind == SRV_CHAT) {
        if (srv_get_bool(o, "logprobs", NULL, &r->logprobs, e)) return -1;
        if (srv_get_int(o, "top_logprobs", NULL, 0, INF_MAX_TOP_LOGPROBS, &x, &have, e)) return -1;
        if (have) {
            if (!r->logprobs) return srv_bad(e, "top_logprobs", "requires 'logprobs': true");
            r->top_logprobs = (int)x;
        }
    } else {
        /* /v1/completions: logprobs is the number of alternatives (0..5; we allow 20). */
        if (srv_get_int(o, "logprobs", NULL, 0, INF_MAX_TOP_LOGPROBS, &x, &have, e)) return -1;
        if (have) {
            r->logprobs = true;
            r->top_logprobs = (int)x;
        }
    }

    json_t *n = srv_field(o, "n");
    if (n && (!json_is_integer(n) || json_integer_value(n) != 1))
        return srv_bad(e, "n", "only n = 1 is supported");
    if (parse_logit_bias(r, e) || refuse_unsupported(r, e) || parse_llamacpp(r, e)) return -1;
    if (parse_grammar(r, e)) return -1;
    return r->kind == SRV_CHAT ? srv_request_apply_tools(r, "tool_choice", e) : 0;
}

json_t *srv_json_parse_body(const char *body, size_t len, json_error_t *je) {
    /* jansson stops at a NUL byte as if the input ended there, which would
     * accept a valid prefix and silently drop the rest: refuse it instead. */
    const char *nul = body ? memchr(body, 0, len) : NULL;
    if (nul) {
        memset(je, 0, sizeof *je);
        snprintf(je->text, sizeof je->text, "a NUL byte at offset %zu", (size_t)(nul - body));
        je->line = -1;
        je->column = -1;
        return NULL;
    }
    return json_loadb(body ? body : "", len, 0, je);
}

/* An upper bound on the JSON values in a body, from its brackets and commas
 * outside strings: bounds what parsing it builds before it is built. */
static size_t json_values_bound(const char *p, size_t n) {
    size_t k = 1;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '{' || ch == '[' || ch == ',') {
            k++;
        }
    }
    return k;
}

void srv_request_init(srv_request *r, srv_kind kind, const inf_sampler_params *defaults) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->enable_thinking = true;
    r->parallel_tool_calls = true;
    /* what the request leaves out: the model's recommended sampling */
    if (defaults)
        srv_sampling_from(&r->samp, defaults);
    else
        srv_sampling_default(&r->samp);
}

int srv_request_parse(srv_request *r, srv_kind kind, const char *body, size_t len,
                      const inf_sampler_params *defaults, srv_error *e) {
    memset(r, 0, sizeof *r);
    /* 6.6 MB of empty messages would expand into hundreds of MB of JSON tree
       and template values: the limit is on the values, not only the bytes */
    size_t nv = body ? json_values_bound(body, len) : 1;
    if (nv > SRV_MAX_JSON_VALUES)
        return srv_error_set(e, 413, "invalid_request_error", "request_too_large", NULL,
                             "the request body holds about %zu JSON values, more than the limit "
                             "of %d",
                             nv, SRV_MAX_JSON_VALUES);
    srv_request_init(r, kind, defaults);
    json_error_t je;
    r->root = srv_json_parse_body(body, len, &je);
    if (!r->root)
        return srv_error_set(e, 400, "invalid_request_error", NULL, NULL,
                             "malformed JSON in the request body: %s (line %d, column %d)", je.text,
                             je.line, je.column);
    if (!json_is_object(r->root)) {
        srv_request_free(r);
        return srv_error_set(e, 400, "invalid_request_error", NULL, NULL,
                             "the request body must be a JSON object");
    }
    if (parse_fields(r, e)) {
        srv_request_free(r);
        return -1;
    }
    return 0;
}

void srv_request_free(srv_request *r) {
    json_decref(r->messages);
    json_decref(r->tools);
    json_decref(r->root);
    free(r->prompt_tokens);
    free(r->logit_bias);
    inf_gram_free(r->grammar);
    memset(r, 0, sizeof *r);
}

void srv_request_gen_params(srv_request *r, inf_gen_params *p) {
    *p = inf_gen_defaults();
    const srv_sampling *s = &r->samp;
    p->sampling.temp = s->temperature;
    p->sampling.top_k = s->top_k;
    p->sampling.top_p = s->top_p;
    p->sampling.min_p = s->min_p;
    p->sampling.repeat_penalty = s->repeat_penalty;
    p->sampling.repeat_last_n = s->penalty_last_n;
    p->sampling.presence_penalty = s->presence_penalty;
    p->sampling.frequency_penalty = s->frequency_penalty;
    p->sampling.seed = s->has_seed ? s->seed : INF_SEED_RANDOM;
    p->max_tokens = r->max_tokens;
    p->n_stop = r->n_stop;
    for (int i = 0; i < r->n_stop; i++)
        p->stop[i] = r->stop[i];
    p->logprobs = r->logprobs;
    p->top_logprobs = r->top_logprobs;
    p->ignore_eos = r->ignore_eos;
    p->logit_bias = r->logit_bias;
    p->n_logit_bias = r->n_logit_bias;
    /* One call at most: end right after the first; a forced call's grammar
       (several = false) ends there too. */
    if (r->tools && !r->parallel_tool_calls) p->end_after = "</tool_call>";
    if (r->spec_set) p->spec = r->spec; /* else the engine's (n_max -1) */
    p->grammar = r->grammar;
    r->grammar = NULL;
    p->grammar_start =
        r->kind == SRV_CHAT && r->enable_thinking ? INF_GRAM_UNLESS_THINK : INF_GRAM_AT_ONCE;
}

/* ---- responses ---- */

json_t *srv_json_stringn(const char *s, size_t n) {
    size_t m;
    char *clean = inf_utf8_sanitize(s, n, &m);
    if (!clean) return json_null();
    json_t *j = json_stringn_nocheck(clean, m);
    free(clean);
    return j;
}

char *srv_json_dump_free(json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

json_t *srv_timings_json(const inf_timings *t, bool draft) {
    json_t *j = json_object();
    json_object_set_new(j, "cache_n", json_integer(t->cache_n));
    json_object_set_new(j, "prompt_n", json_integer(t->prompt_n));
    json_object_set_new(j, "prompt_ms", json_real(t->prompt_ms));
    json_object_set_new(j, "prompt_per_token_ms",
                        json_real(t->prompt_n ? t->prompt_ms / t->prompt_n : 0));
    json_object_set_new(j, "prompt_per_second",
                        json_real(t->prompt_ms > 0 ? 1e3 * t->prompt_n / t->prompt_ms : 0));
    json_object_set_new(j, "predicted_n", json_integer(t->predicted_n));
    json_object_set_new(j, "predicted_ms", json_real(t->predicted_ms));
    json_object_set_new(j, "predicted_per_token_ms",
                        json_real(t->predicted_n ? t->predicted_ms / t->predicted_n : 0));
    json_object_set_new(
        j, "predicted_per_second",
        json_real(t->predicted_ms > 0 ? 1e3 * t->predicted_n / t->predicted_ms : 0));
    if (draft) { /* llama.cpp's names */
        json_object_set_new(j, "draft_n", json_integer(t->draft_n));
        json_object_set_new(j, "draft_n_accepted", json_integer(t->draft_accepted));
    }
    return j;
}

json_t *srv_usage_json(int prompt_tokens, int completion_tokens) {
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(prompt_tokens));
    json_object_set_new(u, "completion_tokens", json_integer(completion_tokens));
    json_object_set_new(u, "total_tokens", json_integer(prompt_tokens + completion_tokens));
    return u;
}

static json_t *bytes_json(const char *s, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

json_t *srv_logprobs_json(srv_kind kind, const inf_logprob *lp, int n, int text_offset,
                          srv_piece_fn piece, void *piece_ctx) {
    char buf[256];
    if (kind == SRV_CHAT) {
        json_t *content = json_array();
        for (int i = 0; i < n; i++) {
            int len = piece(piece_ctx, lp[i].id, buf, sizeof buf);
            json_t *t = json_object();
            json_object_set_new(t, "token", srv_json_stringn(buf, (size_t)len));
            json_object_set_new(t, "logprob", json_real(lp[i].logprob));
            json_object_set_new(t, "bytes", bytes_json(buf, len));
            json_t *top = json_array();
            for (int k = 0; k < lp[i].n_top; k++) {
                int l2 = piece(piece_ctx, lp[i].top_id[k], buf, sizeof buf);
                json_t *o = json_object();
                json_object_set_new(o, "token", srv_json_stringn(buf, (size_t)l2));
                json_object_set_new(o, "logprob", json_real(lp[i].top_logprob[k]));
                json_object_set_new(o, "bytes", bytes_json(buf, l2));
                json_array_append_new(top, o);
            }
            json_object_set_new(t, "top_logprobs", top);
            json_array_append_new(content, t);
        }
        json_t *j = json_object();
        json_object_set_new(j, "content", content);
        return j;
    }
    json_t *tokens = json_array(), *tlp = json_array(), *top = json_array(), *off = json_array();
    for (int i = 0; i < n; i++) {
        int len = piece(piece_ctx, lp[i].id, buf, sizeof buf);
        json_array_append_new(tokens, srv_json_stringn(buf, (size_t)len));
        json_array_append_new(tlp, json_real(lp[i].logprob));
        json_array_append_new(off, json_integer(text_offset));
        text_offset += len;
        json_t *o = json_object();
        for (int k = 0; k < lp[i].n_top; k++) {
            int l2 = piece(piece_ctx, lp[i].top_id[k], buf, sizeof buf);
            json_t *key = srv_json_stringn(buf, (size_t)l2);
            json_object_set_new(o, json_string_value(key), json_real(lp[i].top_logprob[k]));
            json_decref(key);
        }
        json_array_append_new(top, o);
    }
    json_t *j = json_object();
    json_object_set_new(j, "tokens", tokens);
    json_object_set_new(j, "token_logprobs", tlp);
    json_object_set_new(j, "top_logprobs", top);
    json_object_set_new(j, "text_offset", off);
    return j;
}

size_t srv_json_values(const char *body, size_t len) {
    return body ? json_values_bound(body, len) : 1;
}
