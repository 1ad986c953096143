/* Ollama's /api/chat and /api/generate, as srv_apis (server/api.h).
 *
 * The request: `messages` (role, content, thinking, tool_calls with
 * arguments as an object, tool_name) or `prompt` + `system` (a user turn
 * through the chat template; with `raw` the prompt as is, a completion)
 * become the conversation Hugging Face templates read; `tools` are OpenAI
 * chat's shape already; `think` sets the template's enable_thinking;
 * `format` ("json" or a JSON Schema) compiles the grammar response_format
 * compiles; `options` map onto the sampling (see OPTIONS below). As Ollama
 * has it, `stream` defaults to true. What would change the result and is
 * not done here (images, suffix, template, context, typical_p, mirostat,
 * tfs_z, an unknown option) is a 400 naming the field; what does not
 * (keep_alive, num_thread, num_gpu, use_mmap, ...) is accepted.
 *
 * The response: one object with `model`, `created_at`, `message` (chat:
 * role, content, thinking, tool_calls) or `response` + `thinking`
 * (generate), `done`, and on the last one `done_reason` ("stop", "length")
 * and the timings in nanoseconds. Streamed, each poll's parts are one such
 * object per line (NDJSON), with the timings on the last. Errors are
 * Ollama's {"error": "message"}; a stream that fails ends with one such
 * line. Nothing is ever sent as a keep-alive ping: the client parses every
 * line as JSON and warns on an empty one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grammar/grammar.h"
#include "server/api.h"
#include "server/fields.h"
#include "util/timer.h"

/* ---- the request ---- */

static bool is(const json_t *v, const char *s) {
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}

/* An assistant's tool_calls as templates read them:
 * [{id, type: "function", function: {name, arguments}}], arguments an
 * object (Ollama sends an object; absent or null is {}). */
static json_t *tool_calls(json_t *calls, size_t i, srv_error *e) {
    char p[96];
    snprintf(p, sizeof p, "messages[%zu].tool_calls", i);
    if (!json_is_array(calls)) return srv_bad(e, p, "expected an array"), NULL;
    json_t *out = json_array();
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        snprintf(p, sizeof p, "messages[%zu].tool_calls[%zu]", i, k);
        json_t *fn = json_object_get(c, "function"), *id = srv_field(c, "id");
        json_t *name = json_object_get(fn, "name"), *args = srv_field(fn, "arguments");
        const char *why = !json_is_object(c)    ? "expected an object"
                          : !json_is_object(fn) ? "'function' must be an object"
                          : !json_is_string(name) || !json_string_length(name)
                              ? "'function.name' must be a non-empty string"
                          : args && !json_is_object(args) ? "'function.arguments' must be an object"
                          : id && !json_is_string(id)     ? "'id' must be a string"
                                                          : NULL;
        if (why) {
            json_decref(out);
            return srv_bad(e, p, "%s", why), NULL;
        }
        json_t *call = json_pack("{s:s,s:{s:O,s:o}}", "type", "function", "function", "name", name,
                                 "arguments", args ? json_incref(args) : json_object());
        if (id) json_object_set(call, "id", id);
        json_array_append_new(out, call);
    }
    return out;
}

/* One of Ollama's messages → the template's shape. */
static json_t *message(json_t *m, size_t i, srv_error *e) {
    char p[64], q[96];
    snprintf(p, sizeof p, "messages[%zu]", i);
    if (!json_is_object(m)) return srv_bad(e, p, "expected an object"), NULL;
    json_t *role = json_object_get(m, "role");
    snprintf(q, sizeof q, "%s.role", p);
    if (!is(role, "system") && !is(role, "user") && !is(role, "assistant") && !is(role, "tool"))
        return srv_bad(e, q, "expected \"system\", \"user\", \"assistant\" or \"tool\""), NULL;
    bool assistant = is(role, "assistant");
    const char *content = "", *thinking = NULL, *tool_name = NULL, *call_id = NULL;
    snprintf(q, sizeof q, "%s.content", p);
    if (srv_get_string(m, "content", q, &content, e)) return NULL;
    snprintf(q, sizeof q, "%s.thinking", p);
    if (srv_get_string(m, "thinking", q, &thinking, e)) return NULL;
    snprintf(q, sizeof q, "%s.tool_name", p);
    if (srv_get_string(m, "tool_name", q, &tool_name, e)) return NULL;
    snprintf(q, sizeof q, "%s.tool_call_id", p);
    if (srv_get_string(m, "tool_call_id", q, &call_id, e)) return NULL;
    json_t *images = srv_field(m, "images");
    snprintf(q, sizeof q, "%s.images", p);
    if (images && (!json_is_array(images) || json_array_size(images)))
        return srv_bad(e, q,
                       "inferno runs the model's text part only (no vision encoder), so images "
                       "cannot be read"),
               NULL;
    json_t *calls = srv_field(m, "tool_calls");
    snprintf(q, sizeof q, "%s.tool_calls", p);
    if (calls && !assistant) return srv_bad(e, q, "only assistant messages carry tool_calls"), NULL;

    json_t *out = json_pack("{s:O,s:s}", "role", role, "content", content);
    if (!out) return srv_oom(e), NULL;
    /* the reasoning given back goes where Qwen3's template reads it */
    if (assistant && thinking && *thinking)
        json_object_set_new(out, "reasoning_content", json_string(thinking));
    if (tool_name) json_object_set_new(out, "tool_name", json_string(tool_name));
    if (call_id) json_object_set_new(out, "tool_call_id", json_string(call_id));
    if (calls && json_array_size(calls)) {
        json_t *tc = tool_calls(calls, i, e);
        if (!tc) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, "tool_calls", tc);
    } else if (calls && !json_is_array(calls)) {
        json_decref(out);
        return srv_bad(e, q, "expected an array"), NULL;
    }
    return out;
}

static int push(srv_request *r, json_t *m, srv_error *e) {
    if (!m) return -1;
    return json_array_append_new(r->messages, m) ? srv_oom(e) : 0;
}

static int chat_messages(srv_request *r, srv_error *e) {
    json_t *msgs = srv_field(r->root, "messages");
    if (srv_check_messages(msgs, e)) return -1;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (push(r, message(m, i, e), e)) return -1;
    }
    json_t *tools = srv_field(r->root, "tools");
    if (tools && srv_tools_check(tools, "tools", e)) return -1;
    r->tools = json_incref(tools);
    return srv_request_apply_tools(r, "tools", e); /* Ollama has no tool_choice: auto */
}

/* /api/generate: system + prompt as one user turn, or with raw the prompt
 * as is (Ollama refuses system, template and context beside raw). */
static int generate_prompt(srv_request *r, srv_error *e) {
    json_t *o = r->root;
    const char *prompt = NULL, *system = NULL;
    bool raw = false;
    if (srv_get_string(o, "prompt", NULL, &prompt, e)) return -1;
    if (srv_get_string(o, "system", NULL, &system, e)) return -1;
    if (srv_get_bool(o, "raw", NULL, &raw, e)) return -1;
    if (!prompt || !*prompt) return srv_bad(e, "prompt", "is required (and not empty)");
    if (raw) {
        if (system && *system)
            return srv_bad(e, "system", "raw mode does not support template, system, or context");
        r->kind = SRV_COMPLETION;
        r->prompt = prompt;
        return 0;
    }
    if (system && *system &&
        push(r, json_pack("{s:s,s:s}", "role", "system", "content", system), e))
        return -1;
    return push(r, json_pack("{s:s,s:s}", "role", "user", "content", prompt), e);
}

/* Request fields Ollama has that inferno does not do: refused when they
 * would change the result (a non-empty value). */
static int refuse_fields(json_t *o, bool generate, srv_error *e) {
    json_t *v;
    if ((v = srv_field(o, "images")) && (!json_is_array(v) || json_array_size(v)))
        return srv_bad(e, "images",
                       "inferno runs the model's text part only (no vision encoder), so images "
                       "cannot be read");
    if (generate) {
        if ((v = srv_field(o, "suffix")) && (!json_is_string(v) || json_string_length(v)))
            return srv_bad(e, "suffix", "fill-in-the-middle (a suffix) is not supported");
        if ((v = srv_field(o, "template")) && (!json_is_string(v) || json_string_length(v)))
            return srv_bad(e, "template",
                           "a Go prompt template is not supported: the model's own chat template "
                           "renders the prompt (or send raw: true with the prompt as is)");
        if ((v = srv_field(o, "context")) && (!json_is_array(v) || json_array_size(v)))
            return srv_bad(e, "context",
                           "the deprecated context (token ids of an earlier reply) is not "
                           "supported: send the conversation to /api/chat instead");
    }
    if ((v = srv_field(o, "_debug_render_only")) && !json_is_false(v))
        return srv_bad(e, "_debug_render_only",
                       "is not supported (POST /apply-template renders a chat prompt)");
    return 0;
}

/* think: true, false, or a level ("low", "medium", "high", "max"). Qwen3
 * has no thinking budget: every level is thinking on. Absent: the model's
 * default, as Ollama has it for a thinking model (on). */
static int parse_think(srv_request *r, srv_error *e) {
    json_t *v = srv_field(r->root, "think");
    if (!v) return 0;
    if (json_is_boolean(v)) {
        r->enable_thinking = json_is_true(v);
        return 0;
    }
    if (is(v, "low") || is(v, "medium") || is(v, "high") || is(v, "max")) return 0;
    return srv_bad(e, "think", "expected true, false, \"low\", \"medium\", \"high\" or \"max\"");
}

/* format: "json" (any JSON object) or a JSON Schema; "" is none. */
static int parse_format(srv_request *r, srv_error *e) {
    json_t *f = srv_field(r->root, "format");
    if (!f || is(f, "")) return 0;
    inf_err err = {{0}};
    int rc;
    if (is(f, "json"))
        rc = inf_gram_json_object(&r->grammar, &err);
    else if (json_is_object(f))
        rc = inf_gram_from_json_schema(&r->grammar, f, &err);
    else
        return srv_bad(e, "format", "expected \"json\" or a JSON Schema object");
    return rc ? srv_bad(e, "format", "%s", err.msg) : 0;
}

/* ---- options ---- */

/* Options that change nothing inferno computes: how the model is loaded or
 * run (threads, GPUs, mmap, batch), what only a context shift would use
 * (num_keep: inferno does not shift), and what Ollama itself no longer
 * reads (penalize_newline) or only reads with mirostat on. */
static const char *const NO_EFFECT[] = {
    "num_keep",     "num_batch",         "num_gpu",        "main_gpu",         "use_mmap",
    "use_mlock",    "num_thread",        "numa",           "low_vram",         "f16_kv",
    "vocab_only",   "logits_all",        "embedding_only", "penalize_newline", "mirostat_tau",
    "mirostat_eta", "draft_num_predict",
};

/* Samplers inferno does not have: accepted only at the value that turns
 * them off. */
static const struct {
    const char *name;
    double off;
} OFF_ONLY[] = {{"typical_p", 1}, {"tfs_z", 1}, {"mirostat", 0}};

/* The sampling and limits options; each name is checked so that a typo is
 * a 400 rather than a default silently kept. */
static int option(srv_request *r, json_t *opts, const char *k, json_t *v, srv_error *e) {
    char p[96];
    snprintf(p, sizeof p, "options.%s", k);
    srv_sampling *s = &r->samp;
    long long x = 0;
    bool have = false;
    if (!strcmp(k, "temperature")) return srv_get_number(opts, k, p, 0, 100, &s->temperature, e);
    if (!strcmp(k, "top_p")) return srv_get_number(opts, k, p, 0, 1, &s->top_p, e);
    if (!strcmp(k, "min_p")) return srv_get_number(opts, k, p, 0, 1, &s->min_p, e);
    if (!strcmp(k, "presence_penalty"))
        return srv_get_number(opts, k, p, -2, 2, &s->presence_penalty, e);
    if (!strcmp(k, "frequency_penalty"))
        return srv_get_number(opts, k, p, -2, 2, &s->frequency_penalty, e);
    if (!strcmp(k, "repeat_penalty")) {
        if (srv_get_number(opts, k, p, 0, 100, &s->repeat_penalty, e)) return -1;
        return s->repeat_penalty > 0 ? 0 : srv_bad(e, p, "must be > 0");
    }
    if (!strcmp(k, "top_k")) {
        if (srv_get_int(opts, k, p, 0, INT32_MAX, &x, &have, e)) return -1;
        if (have) s->top_k = (int)x;
        return 0;
    }
    if (!strcmp(k, "repeat_last_n")) { /* 0: off, -1: the whole context */
        if (srv_get_int(opts, k, p, -1, INT32_MAX, &x, &have, e)) return -1;
        if (have) s->penalty_last_n = (int)x;
        return 0;
    }
    if (!strcmp(k, "seed")) { /* Ollama: a negative seed is a fresh random one */
        if (srv_get_int(opts, k, p, INT64_MIN, INT64_MAX, &x, &have, e)) return -1;
        if (have && x >= 0) {
            s->seed = (uint64_t)x;
            s->has_seed = true;
        }
        return 0;
    }
    if (!strcmp(k, "num_predict")) { /* -1: no limit, -2: until the context is full */
        if (srv_get_int(opts, k, p, -2, INT32_MAX, &x, &have, e)) return -1;
        if (have && x == 0)
            return srv_bad(e, p, "must be -1 (no limit), -2 (fill the context) or at least 1");
        if (have) r->max_tokens = x < 0 ? -1 : (int)x;
        return 0;
    }
    if (!strcmp(k, "num_ctx")) { /* checked against the server's context when tokenized */
        if (srv_get_int(opts, k, p, 1, INT32_MAX, &x, &have, e)) return -1;
        if (have) r->n_ctx_limit = (int)x;
        return 0;
    }
    if (!strcmp(k, "stop")) return srv_stop_value(r, v, "options.stop", e);
    for (size_t i = 0; i < sizeof NO_EFFECT / sizeof NO_EFFECT[0]; i++)
        if (!strcmp(k, NO_EFFECT[i])) return 0;
    for (size_t i = 0; i < sizeof OFF_ONLY / sizeof OFF_ONLY[0]; i++) {
        if (strcmp(k, OFF_ONLY[i].name)) continue;
        if (json_is_number(v) && json_number_value(v) == OFF_ONLY[i].off) return 0;
        return srv_bad(e, p, "this sampler is not supported (only %g, which turns it off)",
                       OFF_ONLY[i].off);
    }
    return srv_bad(e, p, "is not an option inferno knows (docs/OLLAMA.md lists them)");
}

static int parse_options(srv_request *r, srv_error *e) {
    json_t *opts = srv_field(r->root, "options");
    if (!opts) return 0;
    if (!json_is_object(opts)) return srv_bad(e, "options", "expected an object");
    const char *k;
    json_t *v;
    json_object_foreach(opts, k, v) {
        if (json_is_null(v)) continue;
        if (option(r, opts, k, v, e)) return -1;
    }
    return 0;
}

static int parse_fields(srv_request *r, bool generate, srv_error *e) {
    json_t *o = r->root;
    if (srv_get_string(o, "model", NULL, &r->model, e)) return -1;
    if (refuse_fields(o, generate, e)) return -1;
    if (generate ? generate_prompt(r, e) : chat_messages(r, e)) return -1;
    json_t *ka = srv_field(o, "keep_alive"); /* the model stays loaded: no effect */
    if (ka && !json_is_string(ka) && !json_is_number(ka))
        return srv_bad(e, "keep_alive", "expected a duration (\"5m\") or a number of seconds");
    r->stream = true; /* Ollama's default */
    if (srv_get_bool(o, "stream", NULL, &r->stream, e)) return -1;
    bool b = false;
    if (srv_get_bool(o, "truncate", NULL, &b, e) || srv_get_bool(o, "shift", NULL, &b, e))
        return -1;
    if (srv_get_bool(o, "logprobs", NULL, &r->logprobs, e)) return -1;
    long long x = 0;
    bool have = false;
    if (srv_get_int(o, "top_logprobs", NULL, 0, INF_MAX_TOP_LOGPROBS, &x, &have, e)) return -1;
    if (have) r->top_logprobs = r->logprobs ? (int)x : 0;
    if (parse_think(r, e) || parse_options(r, e)) return -1;
    if (parse_format(r, e)) return -1;
    return 0;
}

static int parse(srv_request *r, const char *body, size_t len, const inf_sampler_params *defaults,
                 bool generate, srv_error *e) {
    srv_request_init(r, SRV_CHAT, defaults);
    r->messages = json_array();
    r->root = srv_parse_object(body, len, e);
    if (!r->root || !r->messages) {
        if (r->root && !r->messages) srv_oom(e);
        srv_request_free(r);
        return -1;
    }
    if (parse_fields(r, generate, e)) {
        srv_request_free(r);
        return -1;
    }
    return 0;
}

static int parse_chat(srv_request *r, const char *b, size_t n, const inf_sampler_params *d,
                      srv_error *e) {
    return parse(r, b, n, d, false, e);
}

static int parse_generate(srv_request *r, const char *b, size_t n, const inf_sampler_params *d,
                          srv_error *e) {
    return parse(r, b, n, d, true, e);
}

/* Responses name the model as the request did ("tiny" or "tiny:latest"). */
static json_t *echo(const srv_request *r) {
    return r->model ? json_pack("{s:s}", "model", r->model) : NULL;
}

/* ---- the response ---- */

void srv_ollama_time(char *out, size_t cap, long long unix_ns) {
    time_t s = (time_t)(unix_ns / 1000000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%09lldZ", date, unix_ns % 1000000000);
}

static long long wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *model_name(const srv_resp_meta *m) {
    const char *s = json_string_value(json_object_get(m->echo, "model"));
    return s ? s : m->model;
}

/* {"model", "created_at"}: what every object begins with. */
static json_t *envelope(const srv_resp_meta *m) {
    char at[64];
    srv_ollama_time(at, sizeof at, wall_ns());
    json_t *j = json_object();
    const char *name = model_name(m);
    json_object_set_new(j, "model", srv_json_stringn(name, strlen(name)));
    json_object_set_new(j, "created_at", json_string(at));
    return j;
}

/* The last object's fields: done, done_reason and the timings (ns). */
static void finish(json_t *j, const srv_resp_meta *m, const srv_outcome *o) {
    const inf_timings *t = o->timings;
    json_object_set_new(j, "done", json_true());
    json_object_set_new(j, "done_reason",
                        json_string(o->finish == INF_FINISH_LENGTH ? "length" : "stop"));
    json_object_set_new(j, "total_duration",
                        json_integer((json_int_t)((long long)inf_now_ns() - m->start_ns)));
    json_object_set_new(j, "load_duration", json_integer(0)); /* loaded before serving */
    json_object_set_new(j, "prompt_eval_count", json_integer(o->prompt_tokens));
    json_object_set_new(j, "prompt_eval_duration",
                        json_integer(t ? (json_int_t)(t->prompt_ms * 1e6) : 0));
    json_object_set_new(j, "eval_count", json_integer(o->completion_tokens));
    json_object_set_new(j, "eval_duration",
                        json_integer(t ? (json_int_t)(t->predicted_ms * 1e6) : 0));
}

static json_t *call_json(const srv_resp_meta *m, const inf_part *c, int index) {
    char id[80];
    srv_tool_call_id(m, "call_", index, id, sizeof id);
    json_t *args = json_loadb(c->text, c->n, 0, NULL); /* the parser's compact object */
    if (!json_is_object(args)) {
        json_decref(args);
        args = json_object();
    }
    return json_pack("{s:s,s:{s:i,s:o,s:o}}", "id", id, "function", "index", index, "name",
                     srv_json_stringn(c->name, strlen(c->name)), "arguments", args);
}

static json_t *joined(const inf_parts *p, inf_part_kind kind) {
    inf_buf b = {0};
    for (int i = 0; i < p->n; i++)
        if (p->v[i].kind == kind) inf_buf_add(&b, p->v[i].text, p->v[i].n);
    json_t *s = srv_json_stringn(b.data ? b.data : "", b.len);
    inf_buf_free(&b);
    return s;
}

/* chat: {"role": "assistant", "content", "thinking"?, "tool_calls"?} of
 * parts; calls numbered from first_call. */
static json_t *message_json(const srv_resp_meta *m, const inf_parts *p, int first_call) {
    json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content", joined(p, INF_PART_TEXT));
    bool think = false;
    for (int i = 0; i < p->n; i++)
        think |= p->v[i].kind == INF_PART_REASONING && p->v[i].n;
    if (think) json_object_set_new(msg, "thinking", joined(p, INF_PART_REASONING));
    if (inf_parts_calls(p)) {
        json_t *calls = json_array();
        for (int i = 0, k = first_call; i < p->n; i++)
            if (p->v[i].kind == INF_PART_TOOL_CALL)
                json_array_append_new(calls, call_json(m, &p->v[i], k++));
        json_object_set_new(msg, "tool_calls", calls);
    }
    return msg;
}

/* The reply's parts into an object: chat's message, or generate's
 * response and thinking. */
static void put_parts(json_t *j, const srv_resp_meta *m, const inf_parts *p, bool chat,
                      int first_call) {
    if (chat) {
        json_object_set_new(j, "message", message_json(m, p, first_call));
        return;
    }
    json_object_set_new(j, "response", joined(p, INF_PART_TEXT));
    for (int i = 0; i < p->n; i++)
        if (p->v[i].kind == INF_PART_REASONING && p->v[i].n) {
            json_object_set_new(j, "thinking", joined(p, INF_PART_REASONING));
            break;
        }
}

/* Ollama's logprobs: the entries of OpenAI chat's logprobs.content. */
static void put_logprobs(json_t *j, const json_t *lp) {
    json_t *content = json_object_get(lp, "content");
    if (json_is_array(content)) json_object_set(j, "logprobs", content);
}

static char *body(const srv_resp_meta *m, const inf_parts *p, const srv_outcome *o, bool chat) {
    json_t *j = envelope(m);
    put_parts(j, m, p, chat, 0);
    finish(j, m, o);
    if (o->logprobs) put_logprobs(j, o->logprobs);
    return srv_json_dump_free(j);
}

static char *chat_body(const srv_resp_meta *m, const inf_parts *p, const srv_outcome *o) {
    return body(m, p, o, true);
}

static char *generate_body(const srv_resp_meta *m, const inf_parts *p, const srv_outcome *o) {
    return body(m, p, o, false);
}

/* One NDJSON line; j is released. */
static int line(inf_buf *out, json_t *j) {
    char *s = srv_json_dump_free(j);
    if (!s) return -1;
    int rc = inf_buf_printf(out, "%s\n", s);
    free(s);
    return rc;
}

static int stream_begin(srv_stream *st, inf_buf *out) {
    (void)st, (void)out; /* Ollama's first object already carries text */
    return 0;
}

/* One object per part (a part is one kind: text, thinking or one call). */
static int stream_parts(srv_stream *st, inf_buf *out, const inf_parts *p, json_t *logprobs) {
    bool chat = st->api == &srv_api_ollama_chat;
    int rc = 0;
    if (p->n == 0) { /* logprobs of tokens whose text is held */
        json_t *j = envelope(&st->meta);
        put_parts(j, &st->meta, p, chat, 0);
        json_object_set_new(j, "done", json_false());
        put_logprobs(j, logprobs);
        json_decref(logprobs);
        return line(out, j);
    }
    for (int i = 0; i < p->n && !rc; i++) {
        inf_parts one = {.v = &p->v[i], .n = 1, .cap = 1};
        json_t *j = envelope(&st->meta);
        put_parts(j, &st->meta, &one, chat, st->n_calls);
        if (p->v[i].kind == INF_PART_TOOL_CALL) st->n_calls++;
        json_object_set_new(j, "done", json_false());
        if (i == 0 && logprobs) put_logprobs(j, logprobs);
        rc = line(out, j);
    }
    json_decref(logprobs);
    return rc;
}

static int stream_end(srv_stream *st, inf_buf *out, const srv_outcome *o) {
    json_t *j = envelope(&st->meta);
    inf_parts none = {0};
    put_parts(j, &st->meta, &none, st->api == &srv_api_ollama_chat, 0);
    finish(j, &st->meta, o);
    return line(out, j);
}

char *srv_ollama_error_body(const srv_error *e) {
    return srv_json_dump_free(
        json_pack("{s:o}", "error", srv_json_stringn(e->msg, strlen(e->msg))));
}

/* The client throws the line's "error" as it reads it. */
static int stream_error(inf_buf *out, const srv_error *e) {
    char *s = srv_ollama_error_body(e);
    if (!s) return -1;
    int rc = inf_buf_printf(out, "%s\n", s);
    free(s);
    return rc;
}

const srv_api srv_api_ollama_chat = {
    .name = "ollama.chat",
    .kind = SRV_CHAT,
    .id_prefix = "ollama-",
    .parse = parse_chat,
    .echo = echo,
    .body = chat_body,
    .stream_begin = stream_begin,
    .stream_parts = stream_parts,
    .stream_end = stream_end,
    .error_body = srv_ollama_error_body,
    .stream_error = stream_error,
    .ping = "",
    .stream_type = "application/x-ndjson",
};

const srv_api srv_api_ollama_generate = {
    .name = "ollama.generate",
    .kind = SRV_CHAT,
    .id_prefix = "ollama-",
    .parse = parse_generate,
    .echo = echo,
    .body = generate_body,
    .stream_begin = stream_begin,
    .stream_parts = stream_parts,
    .stream_end = stream_end,
    .error_body = srv_ollama_error_body,
    .stream_error = stream_error,
    .ping = "",
    .stream_type = "application/x-ndjson",
};
