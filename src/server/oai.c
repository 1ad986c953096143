#include "server/oai.h"
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

static int bad(srv_error *e, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(srv_error *e, const char *field, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return srv_error_set(e, 400, "invalid_request_error", NULL, field, "'%s': %s", field, msg);
}

/* A present, non-null field; NULL when absent or null (null means "default"). */
static json_t *field(json_t *o, const char *name) {
    json_t *v = json_object_get(o, name);
    return v && !json_is_null(v) ? v : NULL;
}

static int get_number(json_t *o, const char *name, double lo, double hi, float *out, srv_error *e) {
    json_t *v = field(o, name);
    if (!v) return 0;
    if (!json_is_number(v)) return bad(e, name, "expected a number");
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return bad(e, name, "%g is out of range [%g, %g]", d, lo, hi);
    *out = (float)d;
    return 0;
}

static int get_int(json_t *o, const char *name, long long lo, long long hi, long long *out,
                   bool *present, srv_error *e) {
    json_t *v = field(o, name);
    if (present) *present = v != NULL;
    if (!v) return 0;
    if (!json_is_integer(v)) return bad(e, name, "expected an integer");
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return bad(e, name, "%lld is out of range [%lld, %lld]", x, lo, hi);
    *out = x;
    return 0;
}

static int get_bool(json_t *o, const char *name, bool *out, srv_error *e) {
    json_t *v = field(o, name);
    if (!v) return 0;
    if (!json_is_boolean(v)) return bad(e, name, "expected true or false");
    *out = json_is_true(v);
    return 0;
}

static const char *const ROLES[] = {"system", "developer", "user", "assistant", "tool"};

/* Checks one message and returns a normalized copy whose content is a string
 * (text parts joined) or null. */
static json_t *normalize_message(json_t *m, size_t i, srv_error *e) {
    char where[64];
    snprintf(where, sizeof where, "messages[%zu]", i);
    if (!json_is_object(m)) return bad(e, where, "expected an object"), NULL;
    json_t *role = json_object_get(m, "role");
    if (!json_is_string(role)) return bad(e, where, "'role' must be a string"), NULL;
    bool known = false;
    for (size_t k = 0; k < sizeof ROLES / sizeof ROLES[0]; k++)
        known |= !strcmp(json_string_value(role), ROLES[k]);
    if (!known) return bad(e, where, "unknown role '%s'", json_string_value(role)), NULL;

    json_t *out = json_deep_copy(m);
    if (!out) return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory"), NULL;
    json_t *content = json_object_get(m, "content");
    if (!content || json_is_null(content)) {
        bool has_calls = json_is_array(json_object_get(m, "tool_calls"));
        if (!has_calls && strcmp(json_string_value(role), "assistant")) {
            json_decref(out);
            return bad(e, where, "'content' is required"), NULL;
        }
        json_object_set_new(out, "content", json_null());
    } else if (json_is_array(content)) {
        inf_buf text = {0};
        size_t k;
        json_t *part;
        json_array_foreach(content, k, part) {
            json_t *type = json_object_get(part, "type");
            json_t *t = json_object_get(part, "text");
            if (!json_is_string(type) || strcmp(json_string_value(type), "text") ||
                !json_is_string(t)) {
                inf_buf_free(&text);
                json_decref(out);
                return bad(e, where,
                           "content part %zu: only {\"type\": \"text\", \"text\": ...} "
                           "parts are supported",
                           k),
                       NULL;
            }
            inf_buf_add(&text, json_string_value(t), json_string_length(t));
        }
        json_object_set_new(out, "content", json_stringn(text.data ? text.data : "", text.len));
        inf_buf_free(&text);
    } else if (!json_is_string(content)) {
        json_decref(out);
        return bad(e, where, "'content' must be a string, an array of text parts, or null"), NULL;
    }
    return out;
}

static int parse_messages(srv_request *r, srv_error *e) {
    json_t *msgs = json_object_get(r->root, "messages");
    if (!msgs) return bad(e, "messages", "is required");
    if (!json_is_array(msgs)) return bad(e, "messages", "expected an array");
    if (json_array_size(msgs) == 0) return bad(e, "messages", "must not be empty");
    if (json_array_size(msgs) > SRV_MAX_MESSAGES)
        return bad(e, "messages", "has %zu messages, more than the limit of %d",
                   json_array_size(msgs), SRV_MAX_MESSAGES);
    r->messages = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        json_t *n = normalize_message(m, i, e);
        if (!n) return -1;
        json_array_append_new(r->messages, n);
    }
    json_t *tools = field(r->root, "tools");
    if (tools && !json_is_array(tools)) return bad(e, "tools", "expected an array");
    r->tools = tools;
    json_t *kw = field(r->root, "chat_template_kwargs");
    if (kw) {
        if (!json_is_object(kw)) return bad(e, "chat_template_kwargs", "expected an object");
        json_t *think = json_object_get(kw, "enable_thinking");
        if (think && !json_is_boolean(think))
            return bad(e, "chat_template_kwargs.enable_thinking", "expected true or false");
        if (think) r->enable_thinking = json_is_true(think);
        r->template_kwargs = kw;
    }
    return 0;
}

static int parse_prompt(srv_request *r, srv_error *e) {
    json_t *p = json_object_get(r->root, "prompt");
    if (!p || json_is_null(p)) return bad(e, "prompt", "is required");
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        return 0;
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return bad(e, "prompt",
                   "expected a string, an array of token ids, or one string in "
                   "an array");
    json_t *first = json_array_get(p, 0);
    if (json_is_string(first)) {
        if (json_array_size(p) != 1) return bad(e, "prompt", "only one prompt per request");
        r->prompt = json_string_value(first);
        return 0;
    }
    if (json_is_array(first)) {
        if (json_array_size(p) != 1) return bad(e, "prompt", "only one prompt per request");
        p = first;
        if (json_array_size(p) == 0) return bad(e, "prompt", "must not be empty");
    }
    size_t n = json_array_size(p), i;
    json_t *v;
    r->prompt_tokens = malloc(n * sizeof *r->prompt_tokens);
    if (!r->prompt_tokens)
        return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    json_array_foreach(p, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return bad(e, "prompt", "element %zu: expected a token id (non-negative integer)", i);
        r->prompt_tokens[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_tokens = (int)n;
    return 0;
}

static int parse_stop(srv_request *r, srv_error *e) {
    json_t *s = field(r->root, "stop");
    if (!s) return 0;
    if (json_is_string(s)) {
        if (json_string_length(s)) r->stop[r->n_stop++] = json_string_value(s);
        return 0;
    }
    if (!json_is_array(s)) return bad(e, "stop", "expected a string or an array of strings");
    if (json_array_size(s) > INF_MAX_STOPS)
        return bad(e, "stop", "at most %d stop strings", INF_MAX_STOPS);
    size_t i;
    json_t *v;
    json_array_foreach(s, i, v) {
        if (!json_is_string(v)) return bad(e, "stop", "element %zu: expected a string", i);
        if (json_string_length(v)) r->stop[r->n_stop++] = json_string_value(v);
    }
    return 0;
}

/* The constraint on the output: response_format (OpenAI), or llama.cpp's
 * `grammar` (GBNF) and `json_schema`; at most one. A schema or grammar that
 * cannot be compiled is a 400 naming what is wrong. */
static int parse_grammar(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    json_t *rf = field(o, "response_format"), *gr = field(o, "grammar"), *js = field(o, "json_schema");
    const char *param = NULL;
    const json_t *schema = NULL;
    bool any_object = false;
    if (rf) {
        json_t *type = json_object_get(rf, "type");
        if (!json_is_object(rf) || !json_is_string(type))
            return bad(e, "response_format", "expected an object with a string 'type'");
        const char *t = json_string_value(type);
        if (!strcmp(t, "json_object")) {
            any_object = true;
            param = "response_format";
        } else if (!strcmp(t, "json_schema")) {
            json_t *w = json_object_get(rf, "json_schema");
            if (!json_is_object(w))
                return bad(e, "response_format.json_schema", "expected an object");
            json_t *st = field(w, "strict");
            if (st && !json_is_boolean(st))
                return bad(e, "response_format.json_schema.strict", "expected true or false");
            schema = field(w, "schema");
            if (!schema) any_object = true;
            param = "response_format.json_schema.schema";
        } else if (strcmp(t, "text")) {
            return bad(e, "response_format",
                       "type '%s' is not supported (text, json_object, json_schema)", t);
        }
    }
    if (gr) {
        if (param) return bad(e, "grammar", "give only one of response_format, grammar, json_schema");
        if (!json_is_string(gr)) return bad(e, "grammar", "expected a string (GBNF)");
        param = "grammar";
    }
    if (js) {
        if (param)
            return bad(e, "json_schema", "give only one of response_format, grammar, json_schema");
        schema = js;
        param = "json_schema";
    }
    if (!param) return 0;
    inf_err err = {{0}};
    int rc = gr              ? inf_gram_compile(&r->grammar, json_string_value(gr),
                                                json_string_length(gr), "root", &err)
             : any_object ? inf_gram_json_object(&r->grammar, &err)
                          : inf_gram_from_json_schema(&r->grammar, schema, &err);
    if (rc) return bad(e, param, "%s", err.msg);
    return 0;
}

static int parse_fields(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    json_t *model = field(o, "model");
    if (model && !json_is_string(model)) return bad(e, "model", "expected a string");
    r->model = model ? json_string_value(model) : NULL;

    if (r->kind == SRV_CHAT ? parse_messages(r, e) : parse_prompt(r, e)) return -1;

    long long x = -1;
    bool have = false;
    if (get_int(o, "max_tokens", 1, INT32_MAX, &x, &have, e)) return -1;
    if (have) r->max_tokens = (int)x;
    if (get_int(o, "max_completion_tokens", 1, INT32_MAX, &x, &have, e)) return -1;
    if (have) r->max_tokens = (int)x;
    if (r->kind == SRV_COMPLETION && r->max_tokens < 0 &&
        !field(o, "max_tokens")) /* null: absent */
        r->max_tokens = 16;      /* OpenAI's default for /v1/completions */

    srv_sampling *s = &r->samp;
    if (get_number(o, "temperature", 0, 2, &s->temperature, e)) return -1;
    if (get_number(o, "top_p", 0, 1, &s->top_p, e)) return -1;
    if (get_number(o, "min_p", 0, 1, &s->min_p, e)) return -1;
    if (get_number(o, "presence_penalty", -2, 2, &s->presence_penalty, e)) return -1;
    if (get_number(o, "frequency_penalty", -2, 2, &s->frequency_penalty, e)) return -1;
    if (get_number(o, "repeat_penalty", 0, 100, &s->repeat_penalty, e)) return -1;
    if (json_object_get(o, "repeat_penalty") && s->repeat_penalty <= 0)
        return bad(e, "repeat_penalty", "must be > 0");
    if (get_int(o, "top_k", 0, INT32_MAX, &x, &have, e)) return -1;
    if (have) s->top_k = (int)x;
    if (get_int(o, "seed", INT64_MIN, INT64_MAX, &x, &have, e)) return -1;
    if (have) {
        s->seed = (uint64_t)x;
        s->has_seed = true;
    }
    if (parse_stop(r, e)) return -1;

    if (get_bool(o, "stream", &r->stream, e)) return -1;
    if (get_bool(o, "ignore_eos", &r->ignore_eos, e)) return -1;
    json_t *so = field(o, "stream_options");
    if (so) {
        if (!json_is_object(so)) return bad(e, "stream_options", "expected an object");
        if (get_bool(so, "include_usage", &r->include_usage, e)) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return -1;
        }
    }

    if (r->kind == SRV_CHAT) {
        if (get_bool(o, "logprobs", &r->logprobs, e)) return -1;
        if (get_int(o, "top_logprobs", 0, INF_MAX_TOP_LOGPROBS, &x, &have, e)) return -1;
        if (have) {
            if (!r->logprobs) return bad(e, "top_logprobs", "requires 'logprobs': true");
            r->top_logprobs = (int)x;
        }
    } else {
        /* /v1/completions: logprobs is the number of alternatives (0..5; we allow 20). */
        if (get_int(o, "logprobs", 0, INF_MAX_TOP_LOGPROBS, &x, &have, e)) return -1;
        if (have) {
            r->logprobs = true;
            r->top_logprobs = (int)x;
        }
    }

    json_t *n = field(o, "n");
    if (n && (!json_is_integer(n) || json_integer_value(n) != 1))
        return bad(e, "n", "only n = 1 is supported");
    return parse_grammar(r, e);
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
    r->kind = kind;
    r->max_tokens = -1;
    r->enable_thinking = true;
    if (defaults)
        srv_sampling_from(&r->samp, defaults);
    else
        srv_sampling_default(&r->samp);
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
    json_decref(r->root);
    free(r->prompt_tokens);
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
    p->grammar = r->grammar;
    r->grammar = NULL;
    p->grammar_start = r->kind == SRV_CHAT && r->enable_thinking ? INF_GRAM_UNLESS_THINK
                                                                  : INF_GRAM_AT_ONCE;
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

json_t *srv_timings_json(const inf_timings *t) {
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
